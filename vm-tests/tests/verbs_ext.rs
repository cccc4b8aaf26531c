//! The work requests beyond SEND/WRITE/READ/atomics, on rxe: ATOMIC WRITE,
//! FLUSH (Linux 6.2; refused by name where the kernel lacks them), and the
//! completion fields they and UD receives report. Each moves real bytes
//! and checks every byte of the target, and each checks the error status
//! rdma-core's pyverbs tests (`test_qpex`, `test_flush`) expect when the
//! MR or the QP lacks the access.
//! SEND with invalidate and local invalidate, which act on memory windows,
//! are in `verbs_mw.rs`.

mod common;

use common::rc::{caps, ok, pair, pair_with, pattern, wait, Pair, RW};
use rverbs::GidType;
use rverbs::{
    Access, CommandPath, Context, Error, Features, FlushLevel, FlushType, Mtu, PostError, QpCaps,
    QpInit, QpState, QpType, Remote, SendOp, SendWr, WcFlags, WcOpcode, WcStatus,
};

fn features(p: &Pair) -> Features {
    p.ctx.features().expect("features")
}

/// An error that names the kernel's missing operation.
fn assert_not_offered(r: rverbs::Result<()>) {
    match r {
        Err(Error::InvalidWorkRequest {
            reason: reason @ PostError::NotOffered { .. },
            ..
        }) => {
            assert!(reason.is_unsupported());
            assert!(reason.to_string().contains("Linux 6.2"), "{reason}")
        }
        r => panic!("expected an operation the kernel does not offer, got {r:?}"),
    }
}

const LEN: usize = 4096;

#[test]
fn atomic_write_places_eight_bytes_and_nothing_else() {
    let mut p = pair();
    let target = p.pd.alloc_mr(LEN, RW).unwrap();
    let before = pattern(LEN, 1);
    target.write(0, &before).unwrap();
    let value = *b"\x01\x23\x45\x67\x89\xab\xcd\xef";
    let remote = Remote {
        addr: target.iova() + 1024,
        rkey: target.rkey(),
    };
    let wr = SendWr::new(7, SendOp::AtomicWrite { remote, value }, &[]);
    if !features(&p).atomic_write {
        return assert_not_offered(p.a.qp.post_send(&[wr]));
    }
    p.a.qp.post_send(&[wr]).unwrap();
    let wc = wait(&mut p.a.cq, 1)[0];
    ok(&wc, WcOpcode::ATOMIC_WRITE);
    assert_eq!(wc.wr_id, 7);
    let mut want = before;
    want[1024..1032].copy_from_slice(&value);
    let mut got = vec![0; LEN];
    target.read(0, &mut got).unwrap();
    assert_eq!(got, want, "exactly the 8 bytes at offset 1024 changed");
    // Misaligned: refused before the ring, as rdma-core's provider does.
    let remote = Remote {
        addr: target.iova() + 1,
        rkey: target.rkey(),
    };
    let r =
        p.a.qp
            .post_send(&[SendWr::new(8, SendOp::AtomicWrite { remote, value }, &[])]);
    assert!(
        matches!(r, Err(Error::InvalidWorkRequest { index: 0, .. })),
        "{r:?}"
    );
}

#[test]
fn atomic_write_to_an_mr_without_remote_write_is_a_remote_access_error() {
    let mut p = pair();
    let target =
        p.pd.alloc_mr(LEN, Access::LOCAL_WRITE | Access::REMOTE_READ)
            .unwrap();
    target.fill(0, LEN, 0x5a).unwrap();
    let remote = Remote {
        addr: target.iova(),
        rkey: target.rkey(),
    };
    let wr = SendWr::new(
        1,
        SendOp::AtomicWrite {
            remote,
            value: [0; 8],
        },
        &[],
    );
    if !features(&p).atomic_write {
        return assert_not_offered(p.a.qp.post_send(&[wr]));
    }
    p.a.qp.post_send(&[wr]).unwrap();
    let wc = wait(&mut p.a.cq, 1)[0];
    assert_eq!(wc.status, WcStatus::REM_ACCESS_ERR, "{wc:?}");
    let mut got = vec![0; LEN];
    target.read(0, &mut got).unwrap();
    assert!(got.iter().all(|&b| b == 0x5a), "the MR is untouched");
}

#[test]
fn atomic_write_on_a_qp_without_remote_write_is_an_invalid_request() {
    // The responder's QP allows read and atomics, not write.
    let mut p = pair_with(Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC);
    let target = p.pd.alloc_mr(LEN, RW).unwrap();
    let remote = Remote {
        addr: target.iova(),
        rkey: target.rkey(),
    };
    let wr = SendWr::new(
        1,
        SendOp::AtomicWrite {
            remote,
            value: [9; 8],
        },
        &[],
    );
    if !features(&p).atomic_write {
        return assert_not_offered(p.a.qp.post_send(&[wr]));
    }
    p.a.qp.post_send(&[wr]).unwrap();
    let wc = wait(&mut p.a.cq, 1)[0];
    assert_eq!(wc.status, WcStatus::REM_INV_REQ_ERR, "{wc:?}");
    assert_eq!(target.read_u64(0).unwrap(), 0);
}

fn flush_op(remote: Remote, len: u32, level: FlushLevel) -> SendOp {
    SendOp::Flush {
        remote,
        len,
        placement: FlushType::Global,
        level,
    }
}

#[test]
fn write_then_flush_to_global_visibility() {
    let mut p = pair_with(RW | Access::FLUSH_GLOBAL);
    let f = features(&p);
    let local = p.pd.alloc_mr(LEN, RW).unwrap();
    let data = pattern(LEN, 3);
    local.write(0, &data).unwrap();
    if !f.flush_global {
        let remote = Remote { addr: 0, rkey: 0 };
        let wr = SendWr::new(1, flush_op(remote, 8, FlushLevel::Range), &[]);
        return assert_not_offered(p.a.qp.post_send(&[wr]));
    }
    let target = p.pd.alloc_mr(LEN, RW | Access::FLUSH_GLOBAL).unwrap();
    let remote = Remote {
        addr: target.iova(),
        rkey: target.rkey(),
    };
    let s = [local.all().unwrap()];
    // A WRITE, then FLUSH of its range and of the whole MR, in one list.
    let wrs = [
        SendWr::new(1, SendOp::Write(remote), &s).signaled(false),
        SendWr::new(2, flush_op(remote, LEN as u32, FlushLevel::Range), &[]),
        SendWr::new(3, flush_op(remote, 0, FlushLevel::Mr), &[]),
    ];
    p.a.qp.post_send(&wrs).unwrap();
    let wcs = wait(&mut p.a.cq, 2);
    for (wc, id) in wcs.iter().zip([2, 3]) {
        ok(wc, WcOpcode::FLUSH);
        assert_eq!(wc.wr_id, id);
    }
    let mut got = vec![0; LEN];
    target.read(0, &mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn flush_without_the_access_fails_as_rdma_core_expects() {
    // The MR lacks FLUSH_GLOBAL: the responder's rkey check fails.
    let mut p = pair_with(RW | Access::FLUSH_GLOBAL);
    let target = p.pd.alloc_mr(LEN, RW).unwrap();
    let remote = Remote {
        addr: target.iova(),
        rkey: target.rkey(),
    };
    let wr = SendWr::new(1, flush_op(remote, 64, FlushLevel::Range), &[]);
    if !features(&p).flush_global {
        return assert_not_offered(p.a.qp.post_send(&[wr]));
    }
    p.a.qp.post_send(&[wr]).unwrap();
    let wc = wait(&mut p.a.cq, 1)[0];
    assert_eq!(
        wc.status,
        WcStatus::REM_ACCESS_ERR,
        "MR without FLUSH: {wc:?}"
    );

    // The QP lacks FLUSH_GLOBAL: the responder refuses the operation.
    let mut p = pair();
    let target = p.pd.alloc_mr(LEN, RW | Access::FLUSH_GLOBAL).unwrap();
    let remote = Remote {
        addr: target.iova(),
        rkey: target.rkey(),
    };
    let wr = SendWr::new(2, flush_op(remote, 64, FlushLevel::Range), &[]);
    p.a.qp.post_send(&[wr]).unwrap();
    let wc = wait(&mut p.a.cq, 1)[0];
    assert_eq!(
        wc.status,
        WcStatus::REM_INV_REQ_ERR,
        "QP without FLUSH: {wc:?}"
    );
}

#[test]
fn rc_completions_carry_every_field() {
    // A SEND with immediate: the receive's completion, field by field.
    let mut p = pair();
    let src = p.pd.alloc_mr(256, RW).unwrap();
    let dst = p.pd.alloc_mr(256, RW).unwrap();
    let data = pattern(256, 5);
    src.write(0, &data).unwrap();
    let rs = [dst.all().unwrap()];
    p.b.qp
        .post_recv(&[rverbs::RecvWr {
            wr_id: 11,
            sges: &rs,
        }])
        .unwrap();
    let ss = [src.all().unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(12, SendOp::SendWithImm(0xfeed_beef), &ss)])
        .unwrap();
    ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::SEND);
    let wc = wait(&mut p.b.cq, 1)[0];
    ok(&wc, WcOpcode::RECV);
    assert_eq!(wc.wr_id, 11);
    assert_eq!(wc.byte_len, 256);
    assert_eq!(wc.imm_data(), Some(0xfeed_beef));
    assert_eq!(wc.invalidated_rkey(), None);
    assert!(wc.flags.contains(WcFlags::WITH_IMM));
    // rxe flags every user receive GRH (do_complete in rxe_resp.c), RC
    // too, though only UD receives carry the 40 bytes; src_qp comes from
    // the DETH, which only UD packets have.
    assert!(wc.has_grh());
    assert_eq!(wc.qp_num, p.b.qp.qpn());
    assert_eq!(wc.src_qp, 0);
    // RoCE has no LIDs: rxe reports zeros.
    assert_eq!(
        (wc.slid, wc.dlid_path_bits, wc.sl, wc.pkey_index),
        (0, 0, 0, 0)
    );
    let mut got = vec![0; 256];
    dst.read(0, &mut got).unwrap();
    assert_eq!(got, data);
}

/// QUERY_QP's sizes against CREATE_QP's: the same on 6.12; 6.1's rxe
/// reports its rings' capacity (a power of two less one) as the depths.
fn same_caps(queried: QpCaps, created: QpCaps) {
    if common::kernel_series() == "6.1" {
        assert!(
            queried.max_send_wr >= created.max_send_wr
                && queried.max_recv_wr >= created.max_recv_wr
                && (queried.max_send_wr + 1).is_power_of_two(),
            "{queried:?} vs {created:?}"
        );
        assert_eq!(
            (
                queried.max_send_sge,
                queried.max_recv_sge,
                queried.max_inline_data
            ),
            (
                created.max_send_sge,
                created.max_recv_sge,
                created.max_inline_data
            )
        );
    } else {
        assert_eq!(queried, created);
    }
}

#[test]
fn query_qp_reports_every_attribute_and_the_psns_follow_the_traffic() {
    let e = common::env();
    let mut p = pair();
    let gid = p.ctx.query_gid(1, e.gid).unwrap();
    let q = p.a.qp.query().unwrap();
    let a = &q.attr;
    assert_eq!(a.state, Some(QpState::Rts));
    // cur_qp_state is whatever the driver leaves in its attributes: rxe on
    // 6.12 keeps it current, 6.1's never sets it.
    let cur = if common::kernel_series() == "6.1" {
        QpState::Reset
    } else {
        QpState::Rts
    };
    assert_eq!(a.cur_state, Some(cur));
    assert_eq!(a.access, Some(RW | Access::REMOTE_ATOMIC));
    assert_eq!((a.port, a.pkey_index), (Some(1), Some(0)));
    assert_eq!(a.path_mtu, Some(Mtu::M1024));
    assert_eq!(a.dest_qpn, Some(p.b.qp.qpn()));
    assert_eq!((a.rq_psn, a.sq_psn), (Some(0), Some(0)));
    assert_eq!((a.max_rd_atomic, a.max_dest_rd_atomic), (Some(1), Some(1)));
    assert_eq!(
        (a.timeout, a.retry_cnt, a.rnr_retry),
        (Some(14), Some(6), Some(7))
    );
    assert_eq!(a.min_rnr_timer, Some(12));
    let av = a.av.unwrap();
    assert_eq!(av.port_num, 1);
    let grh = av.grh.expect("a RoCE path is global");
    assert_eq!(grh.dgid, gid);
    assert_eq!(grh.sgid_index, e.gid as u8);
    // Asked for 1; for a GID that is not link-local the kernel takes the
    // hop limit from the route it resolves (ib_resolve_eth_dmac): the
    // IPv4 default TTL, 64.
    assert_eq!(grh.hop_limit, 64);
    assert!(!q.sq_draining);
    assert_eq!(q.init.qp_type, QpType::Rc);
    same_caps(q.init.caps, p.a.qp.caps());
    assert!(!q.init.sq_sig_all);

    // Three single-packet WRITEs: A's send PSN and B's receive PSN move
    // together by three.
    let target = p.pd.alloc_mr(LEN, RW).unwrap();
    let src = p.pd.alloc_mr(LEN, RW).unwrap();
    let data = pattern(3 * 1024, 8);
    src.write(0, &data).unwrap();
    for i in 0..3u64 {
        let s = [src.slice(i as usize * 1024, 1024).unwrap()];
        let remote = Remote {
            addr: target.iova() + i * 1024,
            rkey: target.rkey(),
        };
        p.a.qp
            .post_send(&[SendWr::new(i, SendOp::Write(remote), &s)])
            .unwrap();
        ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::RDMA_WRITE);
    }
    let mut got = vec![0; 3 * 1024];
    target.read(0, &mut got).unwrap();
    assert_eq!(got, data);
    assert_eq!(p.a.qp.query().unwrap().attr.sq_psn, Some(3));
    assert_eq!(p.b.qp.query().unwrap().attr.rq_psn, Some(3));

    // A fresh QP: RESET, and rxe's initial path MTU (rxe_qp_init_misc
    // starts every QP at 256).
    let cq = p.ctx.create_cq(8, None, 0).unwrap();
    let fresh =
        p.pd.create_qp(&QpInit {
            caps: caps(4),
            sq_sig_all: true,
            ..QpInit::new(QpType::Ud, &cq)
        })
        .unwrap();
    let q = fresh.query().unwrap();
    assert_eq!(q.attr.state, Some(QpState::Reset));
    assert_eq!(q.attr.path_mtu, Some(Mtu::M256));
    assert_eq!(q.init.qp_type, QpType::Ud);
    assert!(q.init.sq_sig_all);
    same_caps(q.init.caps, fresh.caps());
}

#[test]
fn query_srq_pkey_and_gid_entry() {
    let e = common::env();
    let p = pair();
    let srq = p.pd.create_srq(32, 2, 0).unwrap();
    let a = srq.query().unwrap();
    // At least what was asked (6.1's rxe reports its ring's capacity, 63;
    // 6.12's the depth asked for).
    assert!(a.max_wr >= 32 && a.max_sge >= 2, "{a:?}");
    assert_eq!(a.srq_limit, 0);
    srq.set_limit(5).unwrap();
    assert_eq!(srq.query().unwrap().srq_limit, 5);

    // RoCE: the one default P_Key; an index past the table is an error
    // naming the file.
    assert_eq!(p.ctx.query_pkey(1, 0).unwrap(), 0xffff);
    match p.ctx.query_pkey(1, 4000) {
        Err(Error::Io { what, .. }) => assert!(what.contains("pkeys/4000"), "{what}"),
        r => panic!("expected an I/O error, got {r:?}"),
    }

    // The test GID's entry, on both command paths: its type and netdev.
    let want = p.ctx.query_gid(1, e.gid).unwrap();
    let dev = rverbs::Device::find(Some(&e.dev)).unwrap();
    let write = Context::open_via(&dev, CommandPath::Write).unwrap();
    for ctx in [&p.ctx, &write] {
        let g = ctx.query_gid_entry(1, e.gid).unwrap();
        assert_eq!((g.port, g.index, g.gid), (1, e.gid, want));
        assert_eq!(g.gid_type, GidType::RoceV2, "{g:?}");
        let netdev = g.netdev.as_deref().expect("a RoCE GID has a netdev");
        assert!(!netdev.is_empty());
        // The ifindex is the ioctl path's (sysfs gives none).
        if ctx.command_path() == CommandPath::Ioctl {
            let idx = std::fs::read_to_string(format!("/sys/class/net/{netdev}/ifindex")).unwrap();
            assert_eq!(g.netdev_ifindex, idx.trim().parse::<u32>().unwrap());
        }
        assert!(ctx.query_gid_entry(1, 200).is_err());
    }
}

/// A UD datagram from A to B over GID `gid_idx`, then B's reply over an
/// address handle made from the receive's completion and its 40 header
/// bytes: the reply reaches A, every byte of both messages checked.
fn ud_reply_through_ah_from_wc(gid_idx: u32) {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let mk = || {
        pd.create_qp(&QpInit {
            caps: caps(4),
            sq_sig_all: true,
            ..QpInit::new(QpType::Ud, &cq)
        })
        .unwrap()
    };
    let (mut a, mut b) = (mk(), mk());
    const QKEY: u32 = 0x2222;
    for q in [&mut a, &mut b] {
        q.ready_ud(1, QKEY).unwrap();
    }
    let gid = ctx.query_gid(1, gid_idx).unwrap();
    let to_b = pd
        .create_ah(&rverbs::AhAttr {
            port_num: 1,
            grh: Some(rverbs::Grh {
                dgid: gid,
                sgid_index: gid_idx as u8,
                hop_limit: 1,
                ..rverbs::Grh::default()
            }),
            ..rverbs::AhAttr::default()
        })
        .unwrap();
    let len = 256;
    let inbox = |id| {
        let m = pd.alloc_mr(40 + len, RW).unwrap();
        (m, id)
    };
    let (b_in, _) = inbox(1);
    let (a_in, _) = inbox(2);
    let bs = [b_in.all().unwrap()];
    b.post_recv(&[rverbs::RecvWr {
        wr_id: 1,
        sges: &bs,
    }])
    .unwrap();
    let as_ = [a_in.all().unwrap()];
    a.post_recv(&[rverbs::RecvWr {
        wr_id: 2,
        sges: &as_,
    }])
    .unwrap();
    let out = pd.alloc_mr(len, RW).unwrap();
    let ping = pattern(len, 21);
    out.write(0, &ping).unwrap();
    let os = [out.all().unwrap()];
    a.post_send(&[SendWr::new(3, SendOp::Send, &os).to(&to_b, b.qpn(), QKEY)])
        .unwrap();
    let wcs = wait(&mut cq, 2);
    let r = *wcs.iter().find(|w| w.wr_id == 1).expect("B's receive");
    ok(&r, WcOpcode::RECV);
    assert_eq!(r.byte_len as usize, 40 + len);
    assert!(r.has_grh());
    assert_eq!(r.src_qp, a.qpn());
    let mut got = vec![0; len];
    b_in.read(40, &mut got).unwrap();
    assert_eq!(got, ping);
    let mut grh = [0u8; rverbs::GRH_LEN];
    b_in.read(0, &mut grh).unwrap();
    let attr = ctx.init_ah_from_wc(1, &r, &grh).unwrap();
    let g = attr.grh.expect("a RoCE path is global");
    // One device: the sender's GID is the receiver's.
    assert_eq!((g.dgid, g.sgid_index), (gid, gid_idx as u8));
    assert_eq!((attr.port_num, attr.dlid), (1, 0));
    let v4 = gid[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
    match rverbs::NetworkHeader::parse(&grh).unwrap() {
        rverbs::NetworkHeader::Ipv4 { src, dst, .. } => {
            assert!(v4, "an IPv4 header for {gid:02x?}");
            assert_eq!(
                (src, dst),
                (gid[12..].try_into().unwrap(), gid[12..].try_into().unwrap())
            );
        }
        rverbs::NetworkHeader::Ipv6 { src, dst, .. } => {
            assert!(!v4, "an IPv6 header for {gid:02x?}");
            assert_eq!((src, dst), (gid, gid));
        }
    }
    let back = pd.create_ah_from_wc(1, &r, &grh).unwrap();
    let pong = pattern(len, 22);
    out.write(0, &pong).unwrap();
    b.post_send(&[SendWr::new(4, SendOp::Send, &os).to(&back, r.src_qp, QKEY)])
        .unwrap();
    let wcs = wait(&mut cq, 2);
    let r = *wcs.iter().find(|w| w.wr_id == 2).expect("A's receive");
    ok(&r, WcOpcode::RECV);
    assert_eq!(r.src_qp, b.qpn());
    a_in.read(40, &mut got).unwrap();
    assert_eq!(got, pong);
    // A header that is neither IPv6 nor IPv4 is refused by name.
    let r = ctx.init_ah_from_wc(1, &r, &[0; rverbs::GRH_LEN]);
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
}

#[test]
fn ah_from_wc_over_roce_v2_ipv4() {
    ud_reply_through_ah_from_wc(common::env().gid);
}

#[test]
fn ah_from_wc_over_roce_v2_ipv6() {
    let (ctx, _) = common::open();
    let v6 = ctx
        .gid_table(1)
        .unwrap()
        .into_iter()
        .find(|g| g.gid_type == GidType::RoceV2 && g.gid[..2] == [0xfe, 0x80])
        .expect("rxe's port has a link-local RoCE v2 GID");
    ud_reply_through_ah_from_wc(v6.index);
}

#[test]
fn the_extended_cq_reader_reads_what_poll_decodes() {
    // Eight SENDs with immediates into eight receives: B's CQ read member
    // by member through poll_each, A's decoded whole through it.
    let mut p = pair();
    let n = 8usize;
    let src = p.pd.alloc_mr(n * 64, RW).unwrap();
    let dst = p.pd.alloc_mr(n * 64, RW).unwrap();
    let data = pattern(n * 64, 30);
    src.write(0, &data).unwrap();
    for i in 0..n {
        let rs = [dst.slice(i * 64, 64).unwrap()];
        p.b.qp
            .post_recv(&[rverbs::RecvWr {
                wr_id: 100 + i as u64,
                sges: &rs,
            }])
            .unwrap();
    }
    for i in 0..n {
        let ss = [src.slice(i * 64, (i + 1) as u32 * 8).unwrap()];
        let op = SendOp::SendWithImm(0x1000 + i as u32);
        p.a.qp.post_send(&[SendWr::new(i as u64, op, &ss)]).unwrap();
    }
    let mut seen = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.len() < n {
        p.b.cq.poll_each(3, |e| {
            seen.push((
                e.wr_id(),
                e.status(),
                e.byte_len(),
                e.imm_data(),
                e.src_qp(),
            ))
        });
        assert!(std::time::Instant::now() < until, "{seen:?}");
    }
    for (i, &(wr_id, status, len, imm, src_qp)) in seen.iter().enumerate() {
        assert_eq!(
            (wr_id, status, len, imm, src_qp),
            (
                100 + i as u64,
                WcStatus::SUCCESS,
                (i as u32 + 1) * 8,
                Some(0x1000 + i as u32),
                0
            )
        );
        let mut got = vec![0; (i + 1) * 8];
        dst.read(i * 64, &mut got).unwrap();
        assert_eq!(got, data[i * 64..i * 64 + (i + 1) * 8]);
    }
    let mut sends = Vec::new();
    while sends.len() < n {
        p.a.cq.poll_each(n, |e| sends.push(e.wc()));
        assert!(std::time::Instant::now() < until, "{sends:?}");
    }
    for (i, w) in sends.iter().enumerate() {
        ok(w, WcOpcode::SEND);
        assert_eq!(w.wr_id, i as u64);
    }
    assert_eq!(p.a.cq.poll_each(n, |_| panic!("nothing left")), 0);
}

/// A `poll_each` whose reader panics has taken the completions it handed
/// out: a resize after it, which makes rxe copy the entries the kernel
/// still counts as unpolled into the new ring, hands none of them out
/// again (the consumer index is published before `RESIZE_CQ`).
#[test]
fn a_resize_after_a_panicking_reader_repeats_nothing() {
    let mut p = pair();
    let n = 4usize;
    let src = p.pd.alloc_mr(64, RW).unwrap();
    let dst = p.pd.alloc_mr(n * 64, RW).unwrap();
    for i in 0..n {
        let rs = [dst.slice(i * 64, 64).unwrap()];
        p.b.qp
            .post_recv(&[rverbs::RecvWr {
                wr_id: 100 + i as u64,
                sges: &rs,
            }])
            .unwrap();
    }
    let ss = [src.slice(0, 8).unwrap()];
    for i in 0..n {
        p.a.qp
            .post_send(&[SendWr::new(i as u64, SendOp::Send, &ss)])
            .unwrap();
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // The reader panics on the first completion it is handed.
    let mut first = None;
    while first.is_none() {
        let cq = &mut p.a.cq;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cq.poll_each(n, |e| panic!("reader gave up at {}", e.wr_id()))
        }));
        if r.is_err() {
            first = Some(0u64);
        }
        assert!(std::time::Instant::now() < until, "no completion");
    }
    // Let the other three land, then resize.
    std::thread::sleep(std::time::Duration::from_millis(300));
    p.a.cq.resize(64).unwrap();
    let mut rest = Vec::new();
    while rest.len() < n - 1 {
        p.a.cq.poll_each(n, |e| rest.push(e.wr_id()));
        assert!(std::time::Instant::now() < until, "{rest:?}");
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    p.a.cq.poll_each(n, |e| rest.push(e.wr_id()));
    assert_eq!(rest, [1, 2, 3], "the first was handed out once, before");
}

/// The process's address space, in bytes (`VmSize`).
fn address_space() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmSize in /proc/self/status");
    kb * 1024
}

/// Sets the soft `RLIMIT_AS` (the hard one stays).
fn set_address_space_limit(bytes: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain calls with a valid rlimit.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_AS, &mut lim), 0);
        lim.rlim_cur = bytes.min(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &lim), 0);
    }
}

/// A resize whose new ring cannot be mapped (the address-space limit
/// reached) fails before `RESIZE_CQ` swaps the rings, so the CQ keeps
/// the ring the kernel still writes: the completions after it arrive.
/// (When the mapping failed after the command, the CQ kept reading the
/// old ring, which nothing wrote any more: every later completion was
/// lost.)
#[test]
fn a_resize_that_cannot_map_its_ring_loses_nothing() {
    let mut p = pair();
    let src = p.pd.alloc_mr(64, RW).unwrap();
    let dst = p.pd.alloc_mr(64, RW).unwrap();
    let r = rverbs::Remote {
        addr: dst.iova(),
        rkey: dst.rkey(),
    };
    let ss = [src.slice(0, 8).unwrap()];
    let write = |p: &mut Pair, id: u64| {
        p.a.qp
            .post_send(&[SendWr::new(id, SendOp::Write(r), &ss).signaled(true)])
            .unwrap();
        let got = wait(&mut p.a.cq, 1);
        assert_eq!(got[0].wr_id, id, "{got:?}");
        ok(&got[0], WcOpcode::RDMA_WRITE);
    };
    write(&mut p, 1);
    // No new mapping of more than 64 KiB from here: a ring of 4,096
    // entries needs more.
    set_address_space_limit(address_space() + (64 << 10));
    let e = p.a.cq.resize(4096);
    set_address_space_limit(libc::RLIM_INFINITY);
    let e = e.unwrap_err();
    assert!(e.to_string().contains("ENOMEM"), "{e}");
    write(&mut p, 2);
    // And the CQ still resizes once the address space is there.
    p.a.cq.resize(4096).unwrap();
    assert!(p.a.cq.cqe() >= 4096);
    write(&mut p, 3);
}

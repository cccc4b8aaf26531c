//! The mlx5 glue's data path — work-request translation, one doorbell per
//! list, errors named by index, the CQ's QP registry and the conversion to
//! `Wc` — driven over the provider's software device model (no kernel, no
//! hardware: the kernel commands of this module are not exercised here).

use super::poll::{next_id, Poller, QpEntry, RecvRecs, Registry};
use super::post::{post_recv_list, post_send_list as post_send, wc};
use crate::error::Error;
use crate::qp::{RecvWr, Remote, SendOp, SendWr};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::wr::Slice;
use provider_mlx5_model::mem::access;
use provider_mlx5_model::{Device, RecvSide};
use std::sync::Arc;

struct Bed {
    // Provider objects before the model that owns their memory.
    sq_a: provider_mlx5::SendQueue,
    rq_b: provider_mlx5::RecvQueue,
    poller: Poller,
    registry: Arc<Registry>,
    id_a: u64,
    dev: Device,
    a: usize,
    b: usize,
    mr_a: usize,
    mr_b: usize,
}

fn bed() -> Bed {
    let mut dev = Device::new();
    let c = dev.add_cq(64, 64);
    let rq = RecvSide::Rq { cnt: 16, shift: 6 };
    let a = dev.add_qp(false, 16, RecvSide::Rq { cnt: 16, shift: 6 }, c, c, 256);
    let b = dev.add_qp(false, 16, rq, c, c, 256);
    dev.connect(a, b);
    let mr_a = dev.mem.reg(4096, access::ALL);
    let mr_b = dev.mem.reg(4096, access::ALL);
    let sq_a = dev.provider_sq(a, 4, 64, true);
    let rq_b = dev.provider_rq(b, 4);
    let cq = dev.provider_cq(c);
    let registry = registry_of(&cq);
    let id_a = next_id();
    registry.add(entry(dev.qps[a].qpn, id_a, Some(&sq_a), None));
    registry.add(entry(
        dev.qps[b].qpn,
        next_id(),
        None,
        Some(RecvRecs::Rq(rq_b.shared_records())),
    ));
    let poller = Poller::new(cq, registry.clone());
    Bed {
        sq_a,
        rq_b,
        poller,
        registry,
        id_a,
        dev,
        a,
        b,
        mr_a,
        mr_b,
    }
}

fn registry_of(cq: &provider_mlx5::CompletionQueue) -> Arc<Registry> {
    // SAFETY: the model's ring outlives the test's pollers and registries
    // (the Device is dropped last).
    Arc::new(Registry::new(unsafe { cq.scanner() }))
}

fn entry(
    qpn: u32,
    id: u64,
    sq: Option<&provider_mlx5::SendQueue>,
    rq: Option<RecvRecs>,
) -> QpEntry {
    QpEntry {
        qpn,
        id,
        sq: sq.map(|q| q.shared_records()),
        rq,
        until: None,
    }
}

impl Bed {
    fn slice(&self, mr: usize, off: u64, len: u32) -> Slice<'static> {
        let m = &self.dev.mem.mrs[mr];
        Slice::raw_for_model(m.buf.addr() + off, len, m.lkey)
    }
    fn remote(&self, mr: usize, off: u64) -> Remote {
        let m = &self.dev.mem.mrs[mr];
        Remote {
            addr: m.buf.addr() + off,
            rkey: m.rkey,
        }
    }
    fn poll(&mut self) -> Vec<Wc> {
        let mut out = [Wc::default(); 32];
        let n = self.poller.poll(&mut out, wc);
        out[..n].to_vec()
    }
}

#[test]
fn send_imm_and_write_complete_through_the_registry() {
    let mut t = bed();
    t.dev.mem.mrs[t.mr_a].buf.write(0, b"hello, mlx5 model");
    let recv = [t.slice(t.mr_b, 1024, 64)];
    post_recv_list(
        &mut t.rq_b,
        &[RecvWr {
            wr_id: 77,
            sges: &recv,
        }],
        "receive queue",
    )
    .unwrap();
    let src = [t.slice(t.mr_a, 0, 17)];
    let wrs = [
        SendWr::new(1, SendOp::SendWithImm(0xdead_beef), &src),
        SendWr::new(2, SendOp::Write(t.remote(t.mr_b, 2048)), &src),
        SendWr::inline(3, SendOp::Send, b"inl").signaled(false),
    ];
    // The third has no receive waiting; keep it off the wire: post two.
    post_send(&mut t.sq_a, &wrs[..2]).unwrap();
    t.dev.process();
    let wcs = t.poll();
    let by_id = |id| wcs.iter().find(|w| w.wr_id == id).copied().unwrap();
    assert_eq!(wcs.len(), 3, "{wcs:?}");
    let r = by_id(77);
    assert_eq!(
        (r.status, r.opcode, r.byte_len),
        (WcStatus::SUCCESS, WcOpcode::RECV, 17)
    );
    assert_eq!(r.imm_data, Some(0xdead_beef));
    assert!(r.flags.contains(WcFlags::WITH_IMM));
    assert_eq!(r.qp_num, t.dev.qps[t.b].qpn);
    assert_eq!(r.src_qp, t.dev.qps[t.a].qpn);
    assert_eq!(by_id(1).opcode, WcOpcode::SEND);
    assert_eq!(by_id(2).opcode, WcOpcode::RDMA_WRITE);
    let b = &t.dev.mem.mrs[t.mr_b].buf;
    assert_eq!(b.read(1024, 17), b"hello, mlx5 model");
    assert_eq!(b.read(2048, 17), b"hello, mlx5 model");
    assert_eq!(t.poll(), vec![], "each completes once");
}

#[test]
fn a_refused_request_is_named_by_index_and_the_rest_is_rung() {
    let mut t = bed();
    let src = [t.slice(t.mr_a, 0, 8)];
    let five = [src[0]; 5];
    let wrs = [
        SendWr::new(1, SendOp::Write(t.remote(t.mr_b, 0)), &src),
        SendWr::new(2, SendOp::Write(t.remote(t.mr_b, 8)), &five),
        SendWr::new(3, SendOp::Write(t.remote(t.mr_b, 16)), &src),
    ];
    match post_send(&mut t.sq_a, &wrs) {
        Err(Error::InvalidWorkRequest { index: 1, what }) => {
            assert!(what.contains("5 SGEs"), "{what}")
        }
        other => panic!("{other:?}"),
    }
    t.dev.process();
    let ids: Vec<u64> = t.poll().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [1], "the first was rung, the rest not posted");
    // Fill the 16-block SQ: the 17th single-block write is refused by index.
    let wrs: Vec<SendWr<'_>> = (0..17)
        .map(|i| SendWr::new(10 + i, SendOp::Write(t.remote(t.mr_b, 0)), &src))
        .collect();
    match post_send(&mut t.sq_a, &wrs) {
        Err(Error::QueueFull {
            queue: "send queue",
            index: 16,
        }) => {}
        other => panic!("{other:?}"),
    }
    t.dev.process();
    assert_eq!(t.poll().len(), 16);
}

#[test]
fn errors_map_to_named_statuses_and_flush() {
    let mut t = bed();
    let src = [t.slice(t.mr_a, 0, 8)];
    let mut bad = t.remote(t.mr_b, 0);
    bad.rkey ^= 0x100;
    let wrs = [
        SendWr::new(1, SendOp::Write(bad), &src),
        SendWr::new(2, SendOp::Write(t.remote(t.mr_b, 0)), &src),
    ];
    post_send(&mut t.sq_a, &wrs).unwrap();
    t.dev.process();
    let wcs = t.poll();
    let st: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        st,
        [(1, WcStatus::REM_ACCESS_ERR), (2, WcStatus::WR_FLUSH_ERR)]
    );
    assert_ne!(wcs[0].vendor_err, 0, "the vendor syndrome is kept");
}

/// A QP is destroyed with a completion still in the ring and its number
/// is reused at once: the old CQE is dropped (it lies before the
/// tombstone's position), the new QP's completions are reported.
#[test]
fn a_destroyed_qps_cqes_are_dropped_and_its_number_can_be_reused() {
    let mut t = bed();
    let src = [t.slice(t.mr_a, 0, 8)];
    let wr = [SendWr::new(5, SendOp::Write(t.remote(t.mr_b, 0)), &src)];
    post_send(&mut t.sq_a, &wr).unwrap();
    t.dev.process();
    // As QpInner's drop does after DESTROY_QP.
    let qpn_a = t.dev.qps[t.a].qpn;
    t.registry.retire(t.id_a);
    // A new QP of the same number registers (the model's QP a stands in
    // for it, so its records are the same object).
    t.registry.add(entry(qpn_a, next_id(), Some(&t.sq_a), None));
    let wr = [SendWr::new(6, SendOp::Write(t.remote(t.mr_b, 0)), &src)];
    post_send(&mut t.sq_a, &wr).unwrap();
    t.dev.process();
    let ids: Vec<u64> = t.poll().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [6]);
    assert_eq!(t.poller.discarded, 1);
    // A number registered again without the old incarnation retired (its
    // drop still running): the add retires it.
    let wr = [SendWr::new(7, SendOp::Write(t.remote(t.mr_b, 0)), &src)];
    post_send(&mut t.sq_a, &wr).unwrap();
    t.dev.process();
    t.registry.add(entry(qpn_a, next_id(), Some(&t.sq_a), None));
    let wr = [SendWr::new(8, SendOp::Write(t.remote(t.mr_b, 0)), &src)];
    post_send(&mut t.sq_a, &wr).unwrap();
    t.dev.process();
    let ids: Vec<u64> = t.poll().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [8]);
    assert_eq!(t.poller.discarded, 2);
}

/// Two QPs receive through one SRQ, on two CQs: each CQ resolves its QP's
/// receives through the SRQ records the QPs registered, and the SRQ takes
/// back what either completed.
#[test]
fn srq_receives_resolve_through_the_registry_of_each_cq() {
    use super::post::post_srq_recv_list;
    let mut dev = Device::new();
    let (cs, c1, c2) = (dev.add_cq(64, 64), dev.add_cq(64, 64), dev.add_cq(64, 64));
    let s = dev.add_srq(8, 6);
    let a1 = dev.add_qp(false, 16, RecvSide::None, cs, cs, 256);
    let a2 = dev.add_qp(false, 16, RecvSide::None, cs, cs, 256);
    let b1 = dev.add_qp(false, 16, RecvSide::Srq(s), c1, c1, 256);
    let b2 = dev.add_qp(false, 16, RecvSide::Srq(s), c2, c2, 256);
    dev.connect(a1, b1);
    dev.connect(a2, b2);
    let mr = dev.mem.reg(4096, access::ALL);
    let mut srq = dev.provider_srq(s, 2);
    let mut sq1 = dev.provider_sq(a1, 1, 64, true);
    let mut sq2 = dev.provider_sq(a2, 1, 64, true);
    let (cq_s, cq1, cq2) = (
        dev.provider_cq(cs),
        dev.provider_cq(c1),
        dev.provider_cq(c2),
    );
    let (reg_s, reg1, reg2) = (registry_of(&cq_s), registry_of(&cq1), registry_of(&cq2));
    for (q, sq) in [(a1, &sq1), (a2, &sq2)] {
        reg_s.add(entry(dev.qps[q].qpn, next_id(), Some(sq), None));
    }
    let mut ids = [0; 2];
    for (k, (q, reg)) in [(b1, &reg1), (b2, &reg2)].into_iter().enumerate() {
        ids[k] = next_id();
        let rq = RecvRecs::Srq(srq.shared_records());
        reg.add(entry(dev.qps[q].qpn, ids[k], None, Some(rq)));
    }
    let mut p_s = Poller::new(cq_s, reg_s);
    let mut p1 = Poller::new(cq1, reg1.clone());
    let mut p2 = Poller::new(cq2, reg2);
    let (base, lkey) = (dev.mem.mrs[mr].buf.addr(), dev.mem.mrs[mr].lkey);
    let mut out = [Wc::default(); 16];
    let mut next = 0u64;
    for round in 0..6u64 {
        // Refill the SRQ (7 receives at most), one list per round.
        let sl: Vec<[Slice<'static>; 1]> = (0..srq_room(&srq))
            .map(|i| [Slice::raw_for_model(base + (next + i) % 32 * 64, 64, lkey)])
            .collect();
        let wrs: Vec<RecvWr<'_>> = sl
            .iter()
            .enumerate()
            .map(|(i, s)| RecvWr {
                wr_id: next + i as u64,
                sges: s,
            })
            .collect();
        next += wrs.len() as u64;
        post_srq_recv_list(&mut srq, &wrs, "SRQ").unwrap();
        let m = [round as u8; 8];
        for (i, sq) in [&mut sq1, &mut sq2].into_iter().enumerate() {
            let wr = [SendWr::inline(100 + i as u64, SendOp::Send, &m)];
            post_send(sq, &wr).unwrap();
        }
        dev.process();
        // Poll b2's CQ first: its receive came second off the SRQ.
        let n2 = p2.poll(&mut out, wc);
        let w2 = out[0];
        let n1 = p1.poll(&mut out, wc);
        let w1 = out[0];
        assert_eq!((n1, n2), (1, 1), "round {round}");
        assert_eq!(
            (w1.opcode, w1.byte_len, w1.qp_num),
            (WcOpcode::RECV, 8, dev.qps[b1].qpn)
        );
        assert_eq!(w2.qp_num, dev.qps[b2].qpn);
        assert_eq!(
            w2.wr_id,
            w1.wr_id + 1,
            "SRQ WQEs are consumed in list order"
        );
        assert_eq!(p_s.poll(&mut out, wc), 2);
    }
    assert_eq!(srq.outstanding(), 7 - 2);
    assert_eq!(p1.discarded + p2.discarded + p_s.discarded, 0);
    // b1 receives once more, then is destroyed before its CQ is polled:
    // the receive's SRQ WQE still comes back (rdma-core's cq_clean frees
    // it too), and the completion is dropped.
    let m = [9u8; 8];
    post_send(&mut sq1, &[SendWr::inline(200, SendOp::Send, &m)]).unwrap();
    dev.process();
    assert_eq!(p_s.poll(&mut out, wc), 1);
    assert_eq!(
        srq.outstanding(),
        5,
        "consumed by the device, not completed"
    );
    reg1.retire(ids[0]);
    assert_eq!(p1.poll(&mut out, wc), 0);
    assert_eq!((p1.discarded, srq.outstanding()), (1, 4));
}

fn srq_room(srq: &provider_mlx5::SharedRecvQueue) -> u64 {
    (srq.capacity() - srq.outstanding()) as u64
}

//! UD multicast on rxe0: `ATTACH_MCAST` / `DETACH_MCAST` (the verbs), and
//! rdma_cm's join and leave (which attach for the user, as librdmacm does).

mod common;

use rverbs::{
    Access, AhAttr, Context, Cq, Errno, Grh, Mr, Pd, Qp, QpAttr, QpCaps, QpInit, QpState, QpType,
    RecvWr, SendOp, SendWr, Wc, WcOpcode,
};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

const QKEY: u32 = 0x1234_5678;
/// A UD send to a multicast group goes to this QPN (`0xffffff`).
const MCAST_QPN: u32 = 0xff_ffff;
const LEN: usize = 1000;

fn open() -> (Context, u32) {
    let e = common::env();
    (Context::open_by_name(Some(&e.dev)).expect("open"), e.gid)
}

/// The RoCE v2 GID of an IPv4 group: `::ffff:a.b.c.d`.
fn mgid(group: Ipv4Addr) -> [u8; 16] {
    group.to_ipv6_mapped().octets()
}

/// Joins `group` on the rxe netdev at the IP layer, as the kernel's rdma_cm
/// does for a RoCE v2 join (`cma_igmp_send`): without the membership, the
/// IP layer drops the group's packets before rxe sees them. The socket
/// holds the membership; drop it to leave.
fn ip_join(group: Ipv4Addr) -> UdpSocket {
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    let iface: Ipv4Addr = common::env().addr.parse().unwrap();
    s.join_multicast_v4(&group, &iface).unwrap();
    s
}

fn ud(pd: &Pd, cq: &Cq) -> Qp {
    let mut q = pd
        .create_qp(&QpInit {
            qp_type: QpType::Ud,
            send_cq: cq,
            recv_cq: cq,
            caps: QpCaps {
                max_send_wr: 8,
                max_recv_wr: 8,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            srq: None,
        })
        .unwrap();
    q.modify(&QpAttr::init_ud(1, QKEY)).unwrap();
    q.modify(&QpAttr::state(QpState::Rtr)).unwrap();
    q.modify(&QpAttr::rts_ud(0)).unwrap();
    q
}

/// Polls until `n` completions arrived (at most 10 s), then 200 ms more
/// to see that no others do.
fn collect(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::default(); 8];
    let until = Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let k = cq.poll(&mut buf);
        out.extend_from_slice(&buf[..k]);
        assert!(Instant::now() < until, "timed out after {out:?}");
    }
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        let k = cq.poll(&mut buf);
        out.extend_from_slice(&buf[..k]);
    }
    out
}

fn pattern(round: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(31) ^ round).collect()
}

fn post_recv(q: &mut Qp, mr: &Mr, wr_id: u64) {
    let s = [mr.all().unwrap()];
    q.post_recv(&[RecvWr { wr_id, sges: &s }]).unwrap();
}

fn check_payload(mr: &Mr, round: u8) {
    let mut got = vec![0u8; LEN];
    // Past the 40-byte GRH every UD receive starts with.
    mr.read(40, &mut got).unwrap();
    assert_eq!(got, pattern(round), "payload of round {round}");
    mr.fill(0, mr.len(), 0).unwrap();
}

#[test]
fn attach_delivers_to_every_member_and_detach_stops_it() {
    let (ctx, gid) = open();
    let group = Ipv4Addr::new(239, 77, 1, 1);
    let _ip = ip_join(group);
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let mut tx = ud(&pd, &cq);
    let mut members = [ud(&pd, &cq), ud(&pd, &cq)];
    let bufs: Vec<Mr> = (0..2)
        .map(|_| pd.alloc_mr(40 + LEN, Access::LOCAL_WRITE).unwrap())
        .collect();
    for m in &members {
        m.attach_mcast(&mgid(group), 0).unwrap();
    }
    let ah = pd
        .create_ah(&AhAttr {
            port_num: 1,
            grh: Some(Grh {
                dgid: mgid(group),
                sgid_index: gid as u8,
                hop_limit: 1,
                ..Grh::default()
            }),
            ..AhAttr::default()
        })
        .unwrap();
    let sbuf = pd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
    let send = |tx: &mut Qp, round: u8| {
        sbuf.write(0, &pattern(round)).unwrap();
        let s = [sbuf.all().unwrap()];
        tx.post_send(&[SendWr::new(100 + u64::from(round), SendOp::Send, &s)
            .signaled(true)
            .to(&ah, MCAST_QPN, QKEY)])
            .unwrap();
    };

    // Round 1: both members get a copy, byte for byte.
    for (i, m) in members.iter_mut().enumerate() {
        post_recv(m, &bufs[i], i as u64);
    }
    send(&mut tx, 1);
    let got = collect(&mut cq, 3);
    let recvs: Vec<&Wc> = got.iter().filter(|w| w.opcode == WcOpcode::RECV).collect();
    assert!(got.iter().all(|w| w.is_ok()), "{got:?}");
    assert_eq!(recvs.len(), 2, "one copy per member: {got:?}");
    for (i, m) in members.iter().enumerate() {
        let w = recvs.iter().find(|w| w.qp_num == m.qpn()).expect("member");
        assert_eq!(w.byte_len as usize, 40 + LEN);
        assert_eq!(w.src_qp, tx.qpn());
        check_payload(&bufs[i], 1);
    }

    // Round 2: the second member left; only the first gets it.
    members[1].detach_mcast(&mgid(group), 0).unwrap();
    for (i, m) in members.iter_mut().enumerate() {
        post_recv(m, &bufs[i], 10 + i as u64);
    }
    send(&mut tx, 2);
    let got = collect(&mut cq, 2);
    let recvs: Vec<&Wc> = got.iter().filter(|w| w.opcode == WcOpcode::RECV).collect();
    assert_eq!(recvs.len(), 1, "{got:?}");
    assert_eq!(recvs[0].qp_num, members[0].qpn());
    check_payload(&bufs[0], 2);
    let mut untouched = vec![0u8; 40 + LEN];
    bufs[1].read(0, &mut untouched).unwrap();
    assert!(untouched.iter().all(|&b| b == 0), "a detached QP received");
}

#[test]
fn attach_and_detach_errors_are_the_kernels() {
    let (ctx, _) = open();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, None, 0).unwrap();
    let q = ud(&pd, &cq);
    let group = mgid(Ipv4Addr::new(239, 77, 1, 2));
    let einval = |r: rverbs::Result<()>, what: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.errno(), Some(Errno(22)), "{what}: {e}");
        assert!(e.to_string().contains("MCAST"), "{what} names the command: {e}");
    };
    // Not a multicast GID.
    einval(
        q.attach_mcast(&Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped().octets(), 0),
        "unicast GID",
    );
    // Not attached.
    einval(q.detach_mcast(&group, 0), "detach before attach");
    // Twice is once: one detach undoes both.
    q.attach_mcast(&group, 0).unwrap();
    q.attach_mcast(&group, 0).unwrap();
    q.detach_mcast(&group, 0).unwrap();
    einval(q.detach_mcast(&group, 0), "second detach");
    // Only UD QPs join groups.
    let rc = pd
        .create_qp(&QpInit {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            caps: QpCaps {
                max_send_wr: 1,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            srq: None,
        })
        .unwrap();
    einval(rc.attach_mcast(&group, 0), "RC QP");
}

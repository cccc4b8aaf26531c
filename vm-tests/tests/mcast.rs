//! UD multicast on rxe0: `ATTACH_MCAST` / `DETACH_MCAST` (the verbs), and
//! rdma_cm's join and leave (which attach for the user, as librdmacm does).

mod common;

use common::rc::{caps, wait};
use rverbs::{
    Access, AhAttr, Cq, Errno, Grh, Mr, Pd, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Wc,
    WcOpcode,
};
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

const QKEY: u32 = 0x1234_5678;
/// A UD send to a multicast group goes to this QPN (`0xffffff`).
const MCAST_QPN: u32 = 0xff_ffff;
const LEN: usize = 1000;

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

/// A UD QP on `cq`, 8 sends and 8 receives deep, ready (RTS, `QKEY`).
fn ud(pd: &Pd, cq: &Cq) -> Qp {
    let mut q = pd
        .create_qp(&QpInit {
            caps: caps(8),
            ..QpInit::new(QpType::Ud, cq)
        })
        .unwrap();
    q.ready_ud(1, QKEY).unwrap();
    q
}

/// Polls until `n` completions arrived ([`wait`]), then 200 ms more to
/// see that no others do.
fn collect(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let mut out = wait(cq, n);
    out.extend(drain(cq, Duration::from_millis(200)));
    out
}

fn pattern(round: u8) -> Vec<u8> {
    (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ round)
        .collect()
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
    let (ctx, gid) = common::open();
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
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64, None, 0).unwrap();
    let q = ud(&pd, &cq);
    let group = mgid(Ipv4Addr::new(239, 77, 1, 2));
    let einval = |r: rverbs::Result<()>, what: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.errno(), Some(Errno(22)), "{what}: {e}");
        assert!(
            e.to_string().contains("MCAST"),
            "{what} names the command: {e}"
        );
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
            caps: caps(1),
            ..QpInit::new(QpType::Rc, &cq)
        })
        .unwrap();
    einval(rc.attach_mcast(&group, 0), "RC QP");
}

/// One rdma_cm UD id bound to the test address, with its QP (receives
/// posted) and buffer.
struct CmNode {
    id: rverbs::cm::CmId,
    pd: Pd,
    cq: Cq,
    qp: Qp,
    mr: Mr,
}

fn cm_node(chan: &std::sync::Arc<rverbs::cm::CmChannel>) -> CmNode {
    use rverbs::cm::PortSpace;
    let id = chan.create_id(PortSpace::UDP).unwrap();
    id.bind(&common::cm::addr(0)).unwrap();
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(32, None, 0).unwrap();
    let qp = id
        .create_qp(
            &pd,
            &QpInit {
                caps: caps(8),
                sq_sig_all: true,
                ..QpInit::new(QpType::Ud, &cq)
            },
        )
        .unwrap();
    let mr = pd.alloc_mr(40 + LEN, Access::LOCAL_WRITE).unwrap();
    CmNode { id, pd, cq, qp, mr }
}

/// Polls `cq` for up to `limit`; returns what came.
fn drain(cq: &mut Cq, limit: Duration) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut buf = [Wc::default(); 8];
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let k = cq.poll(&mut buf);
        out.extend_from_slice(&buf[..k]);
    }
    out
}

/// A membership's events move with its id (`MIGRATE_ID` moves the
/// id's queued and later events, its memberships' included): the join
/// event read on the new channel names the group and the id.
#[test]
fn a_membership_moves_with_its_migrated_id() {
    use rverbs::cm::{CmChannel, EventType};
    let (a, b) = (CmChannel::new().unwrap(), CmChannel::new().unwrap());
    let gaddr: std::net::SocketAddr = (Ipv4Addr::new(239, 77, 2, 9), 0).into();
    let mut n = cm_node(&a);
    n.id.join_multicast(&gaddr).unwrap();
    n.id.migrate(&b).unwrap();
    let ev = common::cm::next(&b);
    assert_eq!(ev.kind, EventType::MULTICAST_JOIN, "{ev:?}");
    assert_eq!((ev.uid, ev.mcast), (n.id.uid(), Some(gaddr)), "{ev:?}");
}

#[test]
fn rdma_cm_join_attaches_and_leave_detaches() {
    use rverbs::cm::{CmChannel, EventType, JoinFlags};
    let chan = CmChannel::new().unwrap();
    let group = Ipv4Addr::new(239, 77, 2, 1);
    let gaddr: std::net::SocketAddr = (group, 0).into();
    let mut a = cm_node(&chan);
    let mut b = cm_node(&chan);
    // c joins send-only: it may send to the group, nothing is delivered
    // to it.
    let mut c = cm_node(&chan);
    a.id.join_multicast(&gaddr).unwrap();
    b.id.join_multicast_ex(&gaddr, JoinFlags::FullMember)
        .unwrap();
    c.id.join_multicast_ex(&gaddr, JoinFlags::SendOnlyFullMember)
        .unwrap();
    // Joining twice is refused, naming the group.
    let e = a.id.join_multicast(&gaddr).unwrap_err();
    assert!(e.to_string().contains("already joined 239.77.2.1"), "{e}");
    let mut ud = None;
    for _ in 0..3 {
        let ev = common::cm::next(&chan);
        assert_eq!(ev.kind, EventType::MULTICAST_JOIN, "{ev:?}");
        assert_eq!(ev.status, 0);
        assert_eq!(ev.mcast, Some(gaddr), "the event names the group");
        assert!([a.id.uid(), b.id.uid(), c.id.uid()].contains(&ev.uid));
        assert_eq!(ev.ud.qp_num, MCAST_QPN);
        let av = ev.ah_attr();
        assert_eq!(av.grh.unwrap().dgid, mgid(group), "{av:?}");
        ud = Some((ev.ud, av));
    }
    let (ud, av) = ud.unwrap();
    let ah = c.pd.create_ah(&av).unwrap();
    let send = |c: &mut CmNode, round: u8| {
        c.mr.write(0, &pattern(round)).unwrap();
        let s = [c.mr.slice(0, LEN as u32).unwrap()];
        c.qp.post_send(&[
            SendWr::new(u64::from(round), SendOp::Send, &s).to(&ah, ud.qp_num, ud.qkey)
        ])
        .unwrap();
        let w = collect(&mut c.cq, 1);
        assert!(
            w.len() == 1 && w[0].is_ok(),
            "the send only, no loopback to c: {w:?}"
        );
    };
    for n in [&mut a, &mut b, &mut c] {
        post_recv(&mut n.qp, &n.mr, 7);
    }
    send(&mut c, 1);
    for n in [&mut a, &mut b] {
        let w = collect(&mut n.cq, 1);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].is_ok() && w[0].byte_len as usize == 40 + LEN, "{w:?}");
        check_payload(&n.mr, 1);
    }
    // b leaves: its QP is detached; a still gets the group's traffic.
    b.id.leave_multicast(&gaddr).unwrap();
    post_recv(&mut a.qp, &a.mr, 8);
    send(&mut c, 2);
    let w = collect(&mut a.cq, 1);
    assert_eq!(w.len(), 1, "{w:?}");
    check_payload(&a.mr, 2);
    assert!(
        drain(&mut b.cq, Duration::from_millis(300)).is_empty(),
        "b left"
    );
    // Leaving twice, or a group never joined, is refused.
    let e = b.id.leave_multicast(&gaddr).unwrap_err();
    assert!(e.to_string().contains("has not joined 239.77.2.1"), "{e}");
    a.id.leave_multicast(&gaddr).unwrap();
    c.id.leave_multicast(&gaddr).unwrap();
    // An id bound to no device cannot join: the kernel refuses.
    let lone = chan.create_id(rverbs::cm::PortSpace::UDP).unwrap();
    let e = lone.join_multicast(&gaddr).unwrap_err();
    assert!(e.errno().is_some(), "a kernel errno: {e}");
    assert!(e.to_string().contains("JOIN_MCAST"), "{e}");
}

/// `mckey` (rdma-core's) or `rverbs mckey`, on the test address.
fn mckey(bin: &str, group: &str, extra: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(bin);
    if bin == common::rverbs_bin() {
        c.arg("mckey");
    }
    c.args(["-m", group, "-b", &common::env().addr]).args(extra);
    c
}

/// A receiver started first, then a sender; both must report status 0,
/// the receiver having seen its `-C` datagrams.
fn mckey_pair(receiver: &str, sender: &str, group: &str, rx: &[&str], tx: &[&str]) -> String {
    use common::{show, Background};
    let mut r = Background::spawn(&mut mckey(receiver, group, rx));
    // The receiver joins well within the sender's 3 s pause.
    std::thread::sleep(Duration::from_secs(1));
    // rdma-core's sender leaves and destroys its QP right after posting
    // its sends unsignaled, so rxe may drop those still queued (all of
    // them, at times): it runs again, at most 5 times, until the receiver
    // has its count. Ours waits for its last send and runs once.
    let mut s = mckey(sender, group, tx).output().unwrap();
    for _ in 1..5 {
        let done = r.0.as_mut().unwrap().try_wait().unwrap().is_some();
        if done || sender == common::rverbs_bin() || !s.status.success() {
            break;
        }
        s = mckey(sender, group, tx).output().unwrap();
    }
    let r = r.wait(Duration::from_secs(60));
    let joined = format!("mckey: joined dgid: ::ffff:{group} mlid 0x0 sl 0");
    for (who, out, lines) in [
        (
            "sender",
            &s,
            ["initiating data transfers", "return status 0"],
        ),
        (
            "receiver",
            &r,
            ["receiving data transfers", "return status 0"],
        ),
    ] {
        let text = String::from_utf8_lossy(&out.stdout);
        let ctx = format!("{who} ({receiver} receiving from {sender})");
        assert!(out.status.success(), "{ctx}: {}", show(out));
        for l in lines
            .iter()
            .chain(&[joined.as_str(), "data transfers complete"])
        {
            assert!(
                text.lines().any(|t| t == *l),
                "{ctx} lacks {l:?}: {}",
                show(out)
            );
        }
    }
    String::from_utf8_lossy(&r.stdout).into_owned()
}

#[test]
fn mckey_rverbs_receives_from_rdma_core() {
    // rdma-core's sender leaves right after posting, unsignaled: some of
    // its datagrams may never leave; it sends plenty, the receivers count
    // 20 (each of two ids gets every datagram).
    let out = mckey_pair(
        common::rverbs_bin(),
        "mckey",
        "239.77.3.1",
        &["-C", "20", "-c", "2", "-S", "1000", "--timeout", "30"],
        &["-s", "-C", "1000", "-S", "1000"],
    );
    assert_eq!(out.matches("mckey: joined dgid:").count(), 2, "{out}");
}

#[test]
fn mckey_rdma_core_receives_from_rverbs() {
    mckey_pair(
        "mckey",
        common::rverbs_bin(),
        "239.77.3.2",
        &["-C", "20"],
        &["-s", "-C", "20"],
    );
    // Ours with ours, and a send-only sender (-o): its QP is not attached.
    mckey_pair(
        common::rverbs_bin(),
        common::rverbs_bin(),
        "239.77.3.3",
        &["-C", "20", "-S", "1024"],
        &["-s", "-o", "-C", "20", "-S", "1024"],
    );
}

#[test]
fn mckey_refuses_what_cannot_work() {
    use common::{rverbs_bin, show};
    for (args, why) in [
        (
            &["-S", "4000"][..],
            "message_size 4000 is larger than active mtu 1024",
        ),
        (&["-c", "0"][..], "at least one id"),
    ] {
        let out = mckey(rverbs_bin(), "239.77.3.4", args).output().unwrap();
        assert!(!out.status.success(), "{args:?}: {}", show(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(why) && text.contains("return status -1"),
            "{args:?}: {}",
            show(&out)
        );
    }
    let out = mckey(rverbs_bin(), "10.77.0.99", &[]).output().unwrap();
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("is not a multicast address"),
        "{}",
        show(&out)
    );
}

//! Core verbs on rxe0: two RC QPs on the same device connected to each
//! other, moving data through our own rxe data path.

mod common;

use common::rc::{self_av, side, wait, Pair, Side, ALL};

use rverbs::{
    Access, Error, Mr, Mtu, Pd, PostError, QpAttr, QpCaps, QpInit, QpState, QpType, RecvWr, Remote,
    SendFlags, SendLoop, SendOp, SendPush, SendWr, Wc, WcOpcode, WcStatus,
};
use std::time::{Duration, Instant};

/// Room for the tests' scatter lists (4 SGEs) and inline sends (64 bytes).
fn caps() -> QpCaps {
    QpCaps {
        max_send_sge: 4,
        max_recv_sge: 4,
        max_inline_data: 64,
        ..common::rc::caps(16)
    }
}

/// Two connected RC QPs: RESET → INIT → RTR → RTS on both.
fn pair_with(caps: QpCaps, access: Access) -> Pair {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().expect("alloc PD");
    let mut a = side(&ctx, &pd, caps);
    let mut b = side(&ctx, &pd, caps);
    for s in [&mut a, &mut b] {
        s.qp.modify(&QpAttr::init(1, access)).expect("to INIT");
    }
    connect(&ctx, &mut a, &mut b);
    Pair { ctx, pd, a, b }
}

/// INIT → RTR → RTS for two QPs in INIT, each towards the other, step by
/// step (not `Qp::connect`): the PSNs differ each way (a sends from 200,
/// b from 100), and a test posts between INIT and RTR.
fn connect(ctx: &rverbs::Context, a: &mut Side, b: &mut Side) {
    let av = self_av(ctx);
    let (qa, qb) = (a.qp.qpn(), b.qp.qpn());
    a.qp.modify(&QpAttr::rtr(av, Mtu::M1024, qb, 100))
        .expect("a to RTR");
    b.qp.modify(&QpAttr::rtr(av, Mtu::M1024, qa, 200))
        .expect("b to RTR");
    a.qp.modify(&QpAttr::rts(200)).expect("a to RTS");
    b.qp.modify(&QpAttr::rts(100)).expect("b to RTS");
    assert_eq!(a.qp.query_state().unwrap(), QpState::Rts);
}

fn pair() -> Pair {
    pair_with(caps(), ALL)
}

fn mr(pd: &Pd, len: usize) -> Mr {
    pd.alloc_mr(len, ALL).expect("alloc MR")
}

/// `n` SENDs (`wr_id` 0..n) sit posted on `a`: gives `b` as many 8-byte
/// receives (in the returned MR) and checks that each send completes
/// once, in order, successfully.
fn drain_in_order(p: &mut Pair, n: usize) -> Mr {
    let dst = mr(&p.pd, 8 * n);
    for i in 0..n {
        let r = [dst.slice(i * 8, 8).unwrap()];
        p.b.qp
            .post_recv(&[RecvWr {
                wr_id: i as u64,
                sges: &r,
            }])
            .unwrap();
    }
    let c = wait(&mut p.a.cq, n);
    let ids: Vec<u64> = c.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..n as u64).collect::<Vec<_>>());
    assert!(c.iter().all(|w| w.is_ok()), "{c:?}");
    dst
}

#[test]
fn device_and_port_queries_match_sysfs() {
    let (ctx, gid_idx) = common::open();
    let attr = ctx.query_device().unwrap();
    assert_eq!(attr.node_guid, ctx.device().node_guid());
    assert_eq!(attr.phys_port_cnt, 1);
    assert!(attr.max_qp > 0 && attr.max_cqe > 0);
    let port = ctx.query_port(1).unwrap();
    assert_eq!(port.state, 4, "port 1 ACTIVE");
    assert_eq!(port.link_layer, 2, "Ethernet");
    let e = common::env();
    let gid = ctx.query_gid(1, gid_idx).unwrap();
    let v4: std::net::Ipv4Addr = e.addr.parse().unwrap();
    assert_eq!(&gid[12..], &v4.octets());
    assert!(ctx.query_port(2).is_err(), "port 2 does not exist");
}

#[test]
fn send_recv_with_imm_and_multiple_sges() {
    let mut p = pair();
    let src = mr(&p.pd, 4096);
    let dst = mr(&p.pd, 4096);
    src.write(0, b"hello ").unwrap();
    src.write(100, b"rdma world").unwrap();
    let rs = [dst.slice(0, 8).unwrap(), dst.slice(1000, 100).unwrap()];
    p.b.qp
        .post_recv(&[RecvWr {
            wr_id: 77,
            sges: &rs,
        }])
        .unwrap();
    let ss = [src.slice(0, 6).unwrap(), src.slice(100, 10).unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(5, SendOp::SendWithImm(0xdeadbeef), &ss)])
        .unwrap();
    let s = wait(&mut p.a.cq, 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (5, WcStatus::SUCCESS, WcOpcode::SEND)
    );
    let r = wait(&mut p.b.cq, 1);
    assert_eq!(r[0].wr_id, 77);
    assert_eq!(r[0].status, WcStatus::SUCCESS);
    assert_eq!(r[0].opcode, WcOpcode::RECV);
    assert_eq!(r[0].byte_len, 16);
    assert_eq!(r[0].imm_data(), Some(0xdeadbeef));
    assert_eq!(r[0].qp_num, p.b.qp.qpn());
    let mut got = [0u8; 16];
    dst.read(0, &mut got[..8]).unwrap();
    dst.read(1000, &mut got[8..]).unwrap();
    assert_eq!(&got, b"hello rdma world");
}

#[test]
fn rdma_write_read_and_inline() {
    let mut p = pair();
    let local = mr(&p.pd, 8192);
    let remote = mr(&p.pd, 8192);
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    local.write(0, &pattern).unwrap();
    let r = Remote {
        addr: remote.addr(),
        rkey: remote.rkey(),
    };
    let s = [local.all().unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(1, SendOp::Write(r), &s)])
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::RDMA_WRITE)
    );
    let mut back = vec![0u8; 8192];
    remote.read(0, &mut back).unwrap();
    assert_eq!(back, pattern);

    // Read it back into a fresh MR.
    let into = mr(&p.pd, 8192);
    let s = [into.all().unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(2, SendOp::Read(r), &s)])
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::RDMA_READ)
    );
    into.read(0, &mut back).unwrap();
    assert_eq!(back, pattern);

    // An inline write: the payload is copied at post time.
    let data = *b"inline bytes!";
    p.a.qp
        .post_send(&[SendWr::inline(3, SendOp::Write(r), &data)])
        .unwrap();
    wait(&mut p.a.cq, 1);
    let mut got = [0u8; 13];
    remote.read(0, &mut got).unwrap();
    assert_eq!(&got, &data);
}

#[test]
fn atomics() {
    let mut p = pair();
    let target = mr(&p.pd, 64);
    target.write(8, &40u64.to_ne_bytes()).unwrap();
    let result = mr(&p.pd, 64);
    let r = Remote {
        addr: target.addr() + 8,
        rkey: target.rkey(),
    };
    let s = [result.slice(0, 8).unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(1, SendOp::FetchAdd { remote: r, add: 2 }, &s)])
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::FETCH_ADD)
    );
    assert_eq!(result.read_u64(0).unwrap(), 40);
    assert_eq!(target.read_u64(8).unwrap(), 42);
    let s = [result.slice(8, 8).unwrap()];
    let cas = SendOp::CompareSwap {
        remote: r,
        compare: 42,
        swap: 7,
    };
    p.a.qp.post_send(&[SendWr::new(2, cas, &s)]).unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::SUCCESS, WcOpcode::COMP_SWAP)
    );
    assert_eq!(result.read_u64(8).unwrap(), 42);
    assert_eq!(target.read_u64(8).unwrap(), 7);
    // A failing compare leaves the target alone.
    p.a.qp.post_send(&[SendWr::new(3, cas, &s)]).unwrap();
    wait(&mut p.a.cq, 1);
    assert_eq!(result.read_u64(8).unwrap(), 7);
    assert_eq!(target.read_u64(8).unwrap(), 7);
}

#[test]
fn unsignaled_sends_and_a_list_in_one_post() {
    let mut p = pair();
    let src = mr(&p.pd, 64);
    let dst = mr(&p.pd, 64 * 4);
    for i in 0..4 {
        let s = [dst.slice(i * 64, 64).unwrap()];
        p.b.qp
            .post_recv(&[RecvWr {
                wr_id: 100 + i as u64,
                sges: &s,
            }])
            .unwrap();
    }
    let s = [src.slice(0, 64).unwrap()];
    let wrs: Vec<SendWr> = (0..4)
        .map(|i| SendWr::new(i, SendOp::Send, &s).signaled(i == 3))
        .collect();
    p.a.qp.post_send(&wrs).unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(c[0].wr_id, 3, "only the signaled send completes");
    let r = wait(&mut p.b.cq, 4);
    let ids: Vec<u64> = r.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![100, 101, 102, 103]);
    let mut buf = [Wc::default(); 4];
    assert_eq!(
        p.a.cq.poll(&mut buf),
        0,
        "no completions for unsignaled sends"
    );
}

#[test]
fn errors_are_named() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    // Remote write without local write: refused before the kernel.
    let e = pd.alloc_mr(64, Access::REMOTE_WRITE).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
    // Out-of-bounds slices.
    let m = mr(&pd, 64);
    assert!(m.slice(60, 8).is_err());
    assert!(m.write(63, b"ab").is_err());
    // Posting before RTS is refused before anything reaches the ring
    // (rxe's doorbell would fail only after the WQE was published, and the
    // request would then run at RTS: see
    // refused_sends_before_rts_never_run).
    // A QP whose queues could overrun its CQ is refused (rxe would drop
    // the completions beyond the CQ's size without a word).
    let small = ctx.create_cq(4, None, 0).unwrap();
    let e = pd
        .create_qp(&QpInit {
            caps: caps(),
            ..QpInit::new(QpType::Rc, &small)
        })
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { what } if what.contains("overrun")),
        "{e}"
    );
    // The explicit opt-out creates it, reserving nothing: a QP that fits
    // the CQ is still accepted beside it.
    let deep = pd
        .create_qp_accepting_cq_overrun(&QpInit {
            caps: caps(),
            ..QpInit::new(QpType::Rc, &small)
        })
        .unwrap();
    assert!(deep.caps().max_send_wr >= caps().max_send_wr);
    let fits = QpCaps {
        max_send_wr: 2,
        max_recv_wr: 2,
        ..caps()
    };
    let beside = pd
        .create_qp(&QpInit {
            caps: fits,
            ..QpInit::new(QpType::Rc, &small)
        })
        .unwrap();
    drop((beside, deep));
    let cq = ctx.create_cq(64, None, 0).unwrap();
    let mut qp = pd
        .create_qp(&QpInit {
            caps: caps(),
            ..QpInit::new(QpType::Rc, &cq)
        })
        .unwrap();
    let s = [m.slice(0, 8).unwrap()];
    let e = qp
        .post_send(&[SendWr::new(1, SendOp::Send, &s)])
        .unwrap_err();
    match e {
        Error::InvalidWorkRequest {
            index: 0,
            reason: PostError::NotReady { state: 0 },
        } => {}
        other => panic!("expected a refused work request, got {other}"),
    }
    // So do a send list, at its start, and the one-request post.
    let not_ready = |e: Error| {
        assert!(
            matches!(
                e,
                Error::InvalidWorkRequest {
                    index: 0,
                    reason: PostError::NotReady { state: 0 },
                }
            ),
            "{e}"
        )
    };
    not_ready(qp.send_list().unwrap_err());
    not_ready(
        qp.post_send_one(&SendWr::new(1, SendOp::Send, &s))
            .unwrap_err(),
    );
    // Too many SGEs for the QP.
    let five = [s[0]; 5];
    let e = qp
        .post_recv(&[RecvWr {
            wr_id: 1,
            sges: &five,
        }])
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidWorkRequest { index: 0, .. }),
        "{e}"
    );
}

/// A send refused before RTS is not in the ring: once the QP reaches RTS
/// it does not run (rxe used to run it, after failing the doorbell), and
/// only the sends posted from RTS on complete.
#[test]
fn refused_sends_before_rts_never_run() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut a = side(&ctx, &pd, caps());
    let mut b = side(&ctx, &pd, caps());
    for s in [&mut a, &mut b] {
        s.qp.modify(&QpAttr::init(1, Access::LOCAL_WRITE)).unwrap();
    }
    let m = mr(&pd, 256);
    let land = [m.slice(0, 64).unwrap()];
    let land2 = [m.slice(64, 64).unwrap()];
    b.qp.post_recv(&[
        RecvWr {
            wr_id: 10,
            sges: &land,
        },
        RecvWr {
            wr_id: 11,
            sges: &land2,
        },
    ])
    .unwrap();
    let s = [m.slice(128, 8).unwrap()];
    let early = SendWr::new(1, SendOp::Send, &s);
    let e = a.qp.post_send(&[early]).unwrap_err();
    assert!(
        matches!(e, Error::InvalidWorkRequest { index: 0, .. }),
        "{e}"
    );
    connect(&ctx, &mut a, &mut b);
    a.qp.post_send(&[SendWr::new(2, SendOp::Send, &s)]).unwrap();
    let sent = wait(&mut a.cq, 1);
    assert_eq!((sent[0].wr_id, sent[0].status), (2, WcStatus::SUCCESS));
    let got = wait(&mut b.cq, 1);
    assert_eq!((got[0].wr_id, got[0].status), (10, WcStatus::SUCCESS));
    // Long enough for the refused send to arrive if it were in the ring.
    std::thread::sleep(Duration::from_millis(300));
    let mut more = [Wc::default(); 4];
    assert_eq!(a.cq.poll(&mut more), 0, "{more:?}");
    assert_eq!(b.cq.poll(&mut more), 0, "receive 11 stays posted: {more:?}");
}

#[test]
fn remote_access_error_on_a_read_only_mr() {
    let mut p = pair();
    let ro =
        p.pd.alloc_mr(64, Access::LOCAL_WRITE | Access::REMOTE_READ)
            .unwrap();
    let src = mr(&p.pd, 64);
    let s = [src.slice(0, 8).unwrap()];
    let r = Remote {
        addr: ro.addr(),
        rkey: ro.rkey(),
    };
    p.a.qp
        .post_send(&[SendWr::new(9, SendOp::Write(r), &s)])
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(c[0].wr_id, 9);
    assert_eq!(c[0].status, WcStatus::REM_ACCESS_ERR, "{:?}", c[0]);
}

#[test]
fn error_state_flushes_every_outstanding_receive_once() {
    let mut p = pair();
    let dst = mr(&p.pd, 64 * 8);
    for i in 0..8 {
        let s = [dst.slice(i * 64, 64).unwrap()];
        p.b.qp
            .post_recv(&[RecvWr {
                wr_id: i as u64,
                sges: &s,
            }])
            .unwrap();
    }
    p.b.qp.modify(&QpAttr::err()).unwrap();
    let c = wait(&mut p.b.cq, 8);
    let mut ids: Vec<u64> = c.iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(ids, (0..8).collect::<Vec<_>>());
    assert!(c.iter().all(|w| w.status == WcStatus::WR_FLUSH_ERR));
    std::thread::sleep(Duration::from_millis(100));
    let mut buf = [Wc::default(); 4];
    assert_eq!(p.b.cq.poll(&mut buf), 0, "nothing completes twice");
    drop(p.ctx);
}

#[test]
fn send_queue_full_is_an_error_not_a_loss() {
    let mut p = pair_with(
        QpCaps {
            max_send_wr: 4,
            ..caps()
        },
        Access::LOCAL_WRITE,
    );
    let src = mr(&p.pd, 64);
    let s = [src.slice(0, 8).unwrap()];
    // No receives at the peer: sends wait in RNR retry, so the SQ fills.
    let cap = p.a.qp.caps().max_send_wr as usize;
    let wrs: Vec<SendWr> = (0..cap as u64 + 64)
        .map(|i| SendWr::new(i, SendOp::Send, &s))
        .collect();
    let e = p.a.qp.post_send(&wrs).unwrap_err();
    let Error::QueueFull { index, .. } = e else {
        panic!("expected QueueFull, got {e}");
    };
    assert!(index >= cap, "posted {index} of a {cap}-entry SQ");
    // Every posted WR completes exactly once, in order, once receives
    // are there; the rejected ones never appear.
    assert!(index <= 16, "SQ took {index}; the RQ below has 16 slots");
    drain_in_order(&mut p, index);
    std::thread::sleep(Duration::from_millis(200));
    let mut buf = [Wc::default(); 4];
    assert_eq!(p.a.cq.poll(&mut buf), 0);
    let _ = &p.ctx;
}

/// `post_send_one`, request by request, answers as `post_send` of a list
/// does: the SQ fills, the request that finds it full is refused (index 0)
/// and never runs, and every posted one completes once, in order; an
/// inline WRITE through it lands.
#[test]
fn one_request_posts_fill_and_drain_as_lists_do() {
    let mut p = pair_with(
        QpCaps {
            max_send_wr: 4,
            ..caps()
        },
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    );
    let src = mr(&p.pd, 64);
    let s = [src.slice(0, 8).unwrap()];
    let mut posted = 0u64;
    let e = loop {
        match p.a.qp.post_send_one(&SendWr::new(posted, SendOp::Send, &s)) {
            Ok(()) => posted += 1,
            Err(e) => break e,
        }
        assert!(posted <= 64, "the SQ never filled");
    };
    assert!(
        matches!(e, Error::QueueFull { index: 0, .. }),
        "expected QueueFull at index 0, got {e}"
    );
    assert!(posted >= u64::from(p.a.qp.caps().max_send_wr), "{posted}");
    let dst = drain_in_order(&mut p, posted as usize);
    let r = Remote {
        addr: dst.addr(),
        rkey: dst.rkey(),
    };
    let data = *b"one, inline";
    p.a.qp
        .post_send_one(&SendWr::inline(99, SendOp::Write(r), &data))
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (99, WcStatus::SUCCESS));
    let mut got = [0u8; 11];
    dst.read(0, &mut got).unwrap();
    assert_eq!(&got, &data);
    std::thread::sleep(Duration::from_millis(200));
    let mut buf = [Wc::default(); 4];
    assert_eq!(p.a.cq.poll(&mut buf), 0);
}

/// A send list writes requests as they are pushed and hands them to the
/// device at `finish` (or drop): a refused push is named by its index in
/// the list and not written, the list goes on, and every written request
/// completes once, in order.
#[test]
fn send_lists_post_what_was_pushed() {
    let mut p = pair_with(caps(), Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let src = mr(&p.pd, 64);
    let dst = mr(&p.pd, 64);
    src.write(0, &[0xab; 64]).unwrap();
    let r = Remote {
        addr: dst.addr(),
        rkey: dst.rkey(),
    };
    let s = [src.slice(0, 8).unwrap()];
    let five = [s[0]; 5];
    let mut list = p.a.qp.send_list().unwrap();
    assert!(list.is_empty());
    list.push(&SendWr::new(1, SendOp::Write(r), &s)).unwrap();
    // More SGEs than the QP's: refused, named by its place in the list.
    let e = list
        .push(&SendWr::new(2, SendOp::Write(r), &five))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidWorkRequest {
                index: 1,
                reason: PostError::TooManySges { .. },
            }
        ),
        "{e}"
    );
    let r8 = Remote {
        addr: dst.addr() + 8,
        rkey: dst.rkey(),
    };
    list.push(&SendWr::new(3, SendOp::Write(r8), &s)).unwrap();
    assert_eq!(list.len(), 2);
    list.finish().unwrap();
    succeed(&mut p.a.cq, &[1, 3]);
    let mut got = [0u8; 16];
    dst.read(0, &mut got).unwrap();
    assert_eq!(got, [0xab; 16]);
    // Dropped without finish: what was pushed still reaches the device.
    {
        let mut list = p.a.qp.send_list().unwrap();
        list.push(&SendWr::new(4, SendOp::Write(r), &s)).unwrap();
    }
    succeed(&mut p.a.cq, &[4]);
    nothing_more(&mut p.a.cq);
}

/// Waits for the completions of the requests `ids`, in this order, each
/// a success.
fn succeed(cq: &mut rverbs::Cq, ids: &[u64]) {
    let c = wait(cq, ids.len());
    let got: Vec<(u64, WcStatus)> = c.iter().map(|w| (w.wr_id, w.status)).collect();
    let want: Vec<(u64, WcStatus)> = ids.iter().map(|&i| (i, WcStatus::SUCCESS)).collect();
    assert_eq!(got, want);
}

/// No completion comes in the next 200 ms: none came twice.
fn nothing_more(cq: &mut rverbs::Cq) {
    std::thread::sleep(Duration::from_millis(200));
    let mut buf = [Wc::default(); 4];
    assert_eq!(cq.poll(&mut buf), 0, "each request completes once");
}

/// A connected pair that takes RDMA WRITEs, a source MR of 64 bytes of
/// 0xcd and a destination MR of 64 zero bytes.
struct Writes {
    p: Pair,
    src: Mr,
    dst: Mr,
}

fn writes() -> Writes {
    let p = pair_with(caps(), Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let src = mr(&p.pd, 64);
    let dst = mr(&p.pd, 64);
    src.write(0, &[0xcd; 64]).unwrap();
    Writes { p, src, dst }
}

/// The peer's view of byte `off` of `m`.
fn remote(m: &Mr, off: u64) -> Remote {
    Remote {
        addr: m.addr() + off,
        rkey: m.rkey(),
    }
}

/// Pushes its requests through the list it is handed, and flushes if asked.
struct Pushes<'a> {
    wrs: &'a [SendWr<'a>],
    flush: bool,
}

impl SendLoop for Pushes<'_> {
    /// Each push's answer: `None` written, `Some(index)` refused, named
    /// by that index.
    type Output = Vec<Option<usize>>;

    fn run<P: SendPush>(self, list: &mut P) -> Vec<Option<usize>> {
        let answers = self
            .wrs
            .iter()
            .map(|w| match list.push(w) {
                Ok(()) => None,
                Err(Error::InvalidWorkRequest { index, .. }) => Some(index),
                Err(e) => panic!("unexpected refusal: {e}"),
            })
            .collect();
        if self.flush {
            list.flush().unwrap();
        }
        answers
    }
}

/// `SendList::run` hands a loop its QP's provider's push: a refused push
/// is named by its index in the list as `SendList::push` names it, what
/// the loop pushed counts in the list afterwards and is rung by its
/// `finish`, and a loop that flushes leaves the list empty; every
/// written request completes once, with its data.
#[test]
fn a_send_list_runs_a_loop_of_pushes() {
    let Writes { mut p, src, dst } = writes();
    let at = |off: u64| remote(&dst, off);
    let s = [src.slice(0, 8).unwrap()];
    let five = [s[0]; 5];
    let wrs = [
        SendWr::new(1, SendOp::Write(at(0)), &s),
        // More SGEs than the QP's: refused, the second of the list.
        SendWr::new(2, SendOp::Write(at(8)), &five),
        SendWr::new(3, SendOp::Write(at(8)), &s),
    ];
    let mut list = p.a.qp.send_list().unwrap();
    let answers = list.run(Pushes {
        wrs: &wrs,
        flush: false,
    });
    assert_eq!(answers, [None, Some(1), None]);
    assert_eq!(list.len(), 2, "the loop's pushes count in the list");
    list.finish().unwrap();
    succeed(&mut p.a.cq, &[1, 3]);
    let mut got = [0u8; 16];
    dst.read(0, &mut got).unwrap();
    assert_eq!(got, [0xcd; 16]);
    // A loop that flushes: rung, and nothing left for the list.
    let wr = [SendWr::new(4, SendOp::Write(at(16)), &s)];
    let mut list = p.a.qp.send_list().unwrap();
    let answers = list.run(Pushes {
        wrs: &wr,
        flush: true,
    });
    assert_eq!(answers, [None]);
    assert!(list.is_empty());
    drop(list);
    succeed(&mut p.a.cq, &[4]);
    nothing_more(&mut p.a.cq);
}

/// Sends built in place (`Qp::build_send`) go out as one batch at
/// `finish`, each with its payload (an SGE, inline bytes); a batch with a
/// refused piece (inline data on a READ), an atomic left without its
/// buffer, or a builder dropped unfinished posts nothing, and `finish`
/// names the first refusal by its request's index; the queue goes on as if
/// none of it had been built.
#[test]
fn a_send_builder_posts_its_batch_all_or_nothing() {
    let Writes { mut p, src, dst } = writes();
    let at = |off: u64| remote(&dst, off);
    let sig = SendFlags::SIGNALED;
    let mut b = p.a.qp.build_send().unwrap();
    b.start(1, SendOp::Write(at(0)), sig);
    b.sge(src.slice(0, 8).unwrap());
    b.start(2, SendOp::Write(at(8)), sig);
    b.inline(&[0xab; 8]);
    assert_eq!((b.len(), b.is_failed()), (2, false));
    assert_eq!(b.finish().unwrap(), 2);
    succeed(&mut p.a.cq, &[1, 2]);
    let mut got = [0u8; 24];
    dst.read(0, &mut got).unwrap();
    assert_eq!(got[..16], [[0xcd; 8], [0xab; 8]].concat()[..]);

    // A refused piece fails the whole batch.
    let mut b = p.a.qp.build_send().unwrap();
    b.start(3, SendOp::Write(at(16)), sig);
    b.sge(src.slice(0, 8).unwrap());
    b.start(4, SendOp::Read(at(0)), sig);
    b.inline(b"x");
    assert!(b.is_failed());
    let read = SendOp::Read(at(0)).opcode();
    match b.finish() {
        Err(Error::InvalidWorkRequest {
            index: 1,
            reason: PostError::InlineNotAllowed { opcode },
        }) if opcode == read => {}
        other => panic!("{other:?}"),
    }
    // An atomic without its 8-byte buffer: refused at the end.
    let mut b = p.a.qp.build_send().unwrap();
    b.start(
        5,
        SendOp::FetchAdd {
            remote: at(24),
            add: 1,
        },
        sig,
    );
    match b.finish() {
        Err(Error::InvalidWorkRequest {
            index: 0,
            reason: PostError::BadAtomic,
        }) => {}
        other => panic!("{other:?}"),
    }
    // Dropped unfinished: taken back.
    let mut b = p.a.qp.build_send().unwrap();
    b.start(6, SendOp::Write(at(16)), sig);
    b.sge(src.slice(0, 8).unwrap());
    drop(b);
    // None of them reached the device: the next post is the next request
    // it sees, and the only one that completes.
    let s = [src.slice(0, 8).unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(7, SendOp::Write(at(32)), &s)])
        .unwrap();
    succeed(&mut p.a.cq, &[7]);
    nothing_more(&mut p.a.cq);
    dst.read(0, &mut got).unwrap();
    assert_eq!(got[16..], [0; 8], "nothing of 3 or 6 landed");
}

/// A peer that went away (its QP destroyed, as when its process is killed)
/// ends a send in bounded time with RETRY_EXC_ERR, not a retry loop that
/// never ends (QpAttr::rts's transport retry count is 6: rxe treats 7 as
/// "forever"), and the completion channel's bounded wait returns.
#[test]
fn a_dead_peer_ends_sends_in_bounded_time() {
    let Pair { ctx, pd, mut a, b } = pair();
    drop(b);
    let m = mr(&pd, 64);
    let s = [m.slice(0, 8).unwrap()];
    let start = Instant::now();
    a.qp.post_send(&[SendWr::new(9, SendOp::Send, &s)]).unwrap();
    let c = wait(&mut a.cq, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status),
        (9, WcStatus::RETRY_EXC_ERR),
        "{c:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
    let ch = ctx.create_comp_channel().unwrap();
    assert_eq!(ch.get_event_timeout(100).unwrap(), None, "nothing armed");
}

/// fork() while MRs are registered and in use: the parent's pages stay the
/// ones the device writes (the kernel copies pinned pages into the child
/// from 5.13 on; before that, rverbs marks device memory MADV_DONTFORK, as
/// ibv_fork_init does). The parent writes its buffer while the child still
/// holds the fork's references, then a peer's RDMA WRITE must land where
/// the parent reads.
#[test]
fn fork_with_live_mrs_keeps_the_parents_pages() {
    let mut p = pair();
    let target = mr(&p.pd, 4096);
    let src = mr(&p.pd, 4096);
    src.fill(0, 4096, 0xab).unwrap();
    // SAFETY: the child only sleeps and exits (async-signal-safe calls),
    // touching nothing of the parent's state.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        // SAFETY: as above; _exit skips the parent's atexit handlers.
        unsafe {
            libc::usleep(500_000);
            libc::_exit(0);
        }
    }
    // Copy-on-write would give the parent a new page here.
    target.fill(0, 4096, 0x11).unwrap();
    let remote = Remote {
        addr: target.addr(),
        rkey: target.rkey(),
    };
    let s = [src.slice(0, 4096).unwrap()];
    p.b.qp
        .post_send(&[SendWr::new(3, SendOp::Write(remote), &s)])
        .unwrap();
    let c = wait(&mut p.b.cq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (3, WcStatus::SUCCESS), "{c:?}");
    let mut got = vec![0u8; 4096];
    target.read(0, &mut got).unwrap();
    assert!(
        got.iter().all(|&b| b == 0xab),
        "the write landed in the parent's pages"
    );
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
}

/// Prepared sends: WRITEs moved across the remote region, SENDs with
/// immediate data and READs, posted many times each (past the SQ's
/// depth, so the ring wraps) interleaved with ordinary posts; every byte
/// lands, every request completes once, in order, with its id.
#[test]
fn prepared_sends_write_send_and_read() {
    let mut p = pair();
    let local = mr(&p.pd, 8192);
    let remote = mr(&p.pd, 8192);
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 13 % 251) as u8).collect();
    local.write(0, &pattern).unwrap();
    let r = Remote {
        addr: remote.addr(),
        rkey: remote.rkey(),
    };
    let shape = [local.slice(0, 1).unwrap()];
    let write =
        p.a.qp
            .prepare_send(&SendWr::new(0, SendOp::Write(r), &shape))
            .unwrap();
    assert!(write.takes_remote_address());
    // 64 prepared WRITEs of 128 bytes each, at 64 remote offsets, every
    // fourth request an ordinary post_send of the same.
    for i in 0..64u64 {
        let off = (i as usize) * 128;
        let s = local.slice(off, 128).unwrap();
        let at = remote.addr() + off as u64;
        if i % 4 == 3 {
            let op = SendOp::Write(Remote { addr: at, ..r });
            p.a.qp.post_send(&[SendWr::new(i, op, &[s])]).unwrap();
        } else {
            p.a.qp.post_prepared(&write, i, s, Some(at)).unwrap();
        }
        let c = wait(&mut p.a.cq, 1);
        assert_eq!(
            (c[0].wr_id, c[0].status, c[0].opcode),
            (i, WcStatus::SUCCESS, WcOpcode::RDMA_WRITE)
        );
    }
    let mut back = vec![0u8; 8192];
    remote.read(0, &mut back).unwrap();
    assert_eq!(back, pattern);

    // SEND with immediate, 20 times (the SQ holds 16), receives posted
    // ahead; then READ back into a fresh region with the prepared address.
    let dst = mr(&p.pd, 8192);
    let send =
        p.a.qp
            .prepare_send(&SendWr::new(0, SendOp::SendWithImm(0x0102_0304), &shape))
            .unwrap();
    assert!(!send.takes_remote_address());
    for i in 0..20u64 {
        let rs = [dst.slice((i as usize % 16) * 512, 512).unwrap()];
        p.b.qp
            .post_recv(&[RecvWr {
                wr_id: 500 + i,
                sges: &rs,
            }])
            .unwrap();
        let s = local.slice((i as usize) * 256, 256).unwrap();
        p.a.qp.post_prepared(&send, 100 + i, s, None).unwrap();
        let c = wait(&mut p.a.cq, 1);
        assert_eq!((c[0].wr_id, c[0].opcode), (100 + i, WcOpcode::SEND));
        let r = wait(&mut p.b.cq, 1);
        assert_eq!(
            (r[0].wr_id, r[0].byte_len, r[0].imm_data()),
            (500 + i, 256, Some(0x0102_0304))
        );
        let mut got = vec![0u8; 256];
        dst.read((i as usize % 16) * 512, &mut got).unwrap();
        assert_eq!(got, pattern[i as usize * 256..][..256]);
    }
    let into = mr(&p.pd, 8192);
    let read =
        p.a.qp
            .prepare_send(&SendWr::new(0, SendOp::Read(r), &shape))
            .unwrap();
    p.a.qp
        .post_prepared(&read, 7, into.all().unwrap(), None)
        .unwrap();
    let c = wait(&mut p.a.cq, 1);
    assert_eq!(
        (c[0].wr_id, c[0].status, c[0].opcode, c[0].byte_len),
        (7, WcStatus::SUCCESS, WcOpcode::RDMA_READ, 8192)
    );
    into.read(0, &mut back).unwrap();
    assert_eq!(back, pattern);
}

/// What a prepared send refuses, by name: shapes it cannot prepare, a
/// remote address for a SEND, another QP's prepared send, a QP not in RTS.
#[test]
fn prepared_sends_refuse_by_name() {
    let mut p = pair();
    let local = mr(&p.pd, 4096);
    let shape = [local.slice(0, 8).unwrap()];
    let two = [local.slice(0, 8).unwrap(), local.slice(8, 8).unwrap()];
    let r = Remote { addr: 0, rkey: 1 };
    let refused = |e: Error, want: PostError| match e {
        Error::InvalidWorkRequest { index: 0, reason } => assert_eq!(reason, want),
        e => panic!("{e}"),
    };
    let cas = SendOp::CompareSwap {
        remote: r,
        compare: 0,
        swap: 1,
    };
    for (op, sges) in [
        (cas, &shape[..]),
        (SendOp::Send, &two[..]),
        (SendOp::Send, &[][..]),
    ] {
        let e = p.a.qp.prepare_send(&SendWr::new(1, op, sges)).unwrap_err();
        refused(
            e,
            PostError::NotPreparable {
                opcode: op.opcode(),
            },
        );
    }
    let send =
        p.a.qp
            .prepare_send(&SendWr::new(1, SendOp::Send, &shape))
            .unwrap();
    let e =
        p.a.qp
            .post_prepared(&send, 1, shape[0], Some(8))
            .unwrap_err();
    refused(
        e,
        PostError::NoRemoteAddress {
            opcode: SendOp::Send.opcode(),
        },
    );
    let e = p.b.qp.post_prepared(&send, 1, shape[0], None).unwrap_err();
    assert!(e.to_string().contains("prepared by another QP"), "{e}");
    // A QP in INIT takes no prepared sends either.
    let mut c = common::rc::side(&p.ctx, &p.pd, caps());
    c.qp.modify(&QpAttr::init(1, ALL)).unwrap();
    let early =
        c.qp.prepare_send(&SendWr::new(1, SendOp::Send, &shape))
            .unwrap();
    let e = c.qp.post_prepared(&early, 1, shape[0], None).unwrap_err();
    refused(e, PostError::NotReady { state: 1 });
    // Nothing was posted by any of it.
    let mut out = [Wc::default(); 4];
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.a.cq.poll(&mut out), 0);
}

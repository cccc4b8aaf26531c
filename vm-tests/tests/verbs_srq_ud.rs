//! SRQs (with the limit event), UD QPs with address handles, and async
//! events, on rxe0.

mod common;

use common::rc::{connect, self_av, wait};
use rverbs::{
    Access, AhAttr, Cq, EventType, Pd, Qp, QpCaps, QpInit, QpType, RecvWr, SendFlags, SendLoop,
    SendOp, SendPush, SendWr, Wc, WcFlags, WcOpcode, WcStatus,
};

/// A new RC QP on `cq` (`QpCaps::default`), on `srq` if given.
fn rc(pd: &Pd, cq: &Cq, srq: Option<&rverbs::Srq>) -> Qp {
    pd.create_qp(&QpInit {
        srq,
        ..QpInit::new(QpType::Rc, cq)
    })
    .unwrap()
}

#[test]
fn two_qps_share_an_srq_and_the_limit_event_fires() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let mut srq = pd.create_srq(16, 1, 0).unwrap();
    let buf = pd.alloc_mr(64 * 16, Access::LOCAL_WRITE).unwrap();
    for i in 0..8u64 {
        let s = [buf.slice(i as usize * 64, 64).unwrap()];
        srq.post_recv(&[RecvWr {
            wr_id: 1000 + i,
            sges: &s,
        }])
        .unwrap();
    }
    srq.set_limit(6).unwrap();
    assert_eq!(srq.query_limit().unwrap(), 6);
    let mut s1 = rc(&pd, &cq, None);
    let mut r1 = rc(&pd, &cq, Some(&srq));
    let mut s2 = rc(&pd, &cq, None);
    let mut r2 = rc(&pd, &cq, Some(&srq));
    let av = self_av(&ctx);
    connect(&mut s1, &mut r1, Access::LOCAL_WRITE, av).unwrap();
    connect(&mut s2, &mut r2, Access::LOCAL_WRITE, av).unwrap();
    let src = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    src.write(0, b"via the srq").unwrap();
    let s = [src.slice(0, 11).unwrap()];
    s1.post_send(&[SendWr::new(1, SendOp::Send, &s)]).unwrap();
    s2.post_send(&[SendWr::new(2, SendOp::Send, &s)]).unwrap();
    s1.post_send(&[SendWr::new(3, SendOp::Send, &s)]).unwrap();
    let c = wait(&mut cq, 6);
    let recvs: Vec<&Wc> = c.iter().filter(|w| w.opcode == WcOpcode::RECV).collect();
    assert_eq!(recvs.len(), 3, "{c:?}");
    let mut ids: Vec<u64> = recvs.iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(
        ids,
        vec![1000, 1001, 1002],
        "receives are taken in order from the SRQ"
    );
    let qpns: Vec<u32> = recvs.iter().map(|w| w.qp_num).collect();
    assert!(qpns.contains(&r1.qpn()) && qpns.contains(&r2.qpn()));
    // 8 posted, 3 consumed: 5 < 6, so the limit event fired once.
    assert!(ctx.wait_async_event(5000).unwrap(), "no async event");
    let ev = ctx.get_async_event().unwrap();
    assert_eq!(ev.event_type, EventType::SRQ_LIMIT_REACHED);
    assert_eq!(ev.element, srq.user_handle());
    assert_eq!(
        srq.query_limit().unwrap(),
        0,
        "the limit disarms after firing"
    );
    let mut got = [0u8; 11];
    buf.read(0, &mut got).unwrap();
    assert_eq!(&got, b"via the srq");
}

#[test]
fn ud_send_with_an_address_handle() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    // Room for both QPs' queues (16 + 16 each): a QP that could overrun
    // its CQ is refused.
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let mk = || pd.create_qp(&QpInit::new(QpType::Ud, &cq)).unwrap();
    let (mut a, mut b) = (mk(), mk());
    const QKEY: u32 = 0x1111_1111;
    for q in [&mut a, &mut b] {
        q.ready_ud(1, QKEY).unwrap();
    }
    let ah = pd.create_ah(&self_av(&ctx)).unwrap();
    // UD receives start with a 40-byte GRH.
    let rbuf = pd.alloc_mr(40 + 256, Access::LOCAL_WRITE).unwrap();
    let rs = [rbuf.all().unwrap()];
    b.post_recv(&[RecvWr {
        wr_id: 9,
        sges: &rs,
    }])
    .unwrap();
    let sbuf = pd.alloc_mr(256, Access::LOCAL_WRITE).unwrap();
    sbuf.write(0, b"datagram").unwrap();
    let ss = [sbuf.slice(0, 8).unwrap()];
    a.post_send(&[SendWr::new(1, SendOp::SendWithImm(7), &ss).to(&ah, b.qpn(), QKEY)])
        .unwrap();
    let c = wait(&mut cq, 2);
    let r = c
        .iter()
        .find(|w| w.opcode == WcOpcode::RECV)
        .expect("receive");
    assert_eq!(r.status, WcStatus::SUCCESS);
    assert_eq!(r.byte_len, 40 + 8);
    assert_eq!(r.src_qp, a.qpn());
    assert!(r.flags.contains(WcFlags::GRH));
    assert_eq!(r.imm_data(), Some(7));
    let mut got = [0u8; 8];
    rbuf.read(40, &mut got).unwrap();
    assert_eq!(&got, b"datagram");
    // A UD QP refuses a send without a destination, naming the WR.
    let e = a
        .post_send(&[SendWr::new(2, SendOp::Send, &ss)])
        .unwrap_err();
    assert!(
        matches!(e, rverbs::Error::InvalidWorkRequest { index: 0, .. }),
        "{e}"
    );
}

#[test]
fn completion_channel_wakes_on_an_armed_cq() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let ch = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq(64, Some(&ch), 0).unwrap();
    let mut a = rc(&pd, &cq, None);
    let mut b = rc(&pd, &cq, None);
    connect(&mut a, &mut b, Access::LOCAL_WRITE, self_av(&ctx)).unwrap();
    let m = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    let s = [m.slice(0, 8).unwrap()];
    b.post_recv(&[RecvWr { wr_id: 5, sges: &s }]).unwrap();
    cq.req_notify(false).unwrap();
    a.post_send(&[SendWr::new(6, SendOp::Send, &s)]).unwrap();
    let h = ch.get_event().unwrap();
    assert_eq!(h, cq.user_handle());
    let c = wait(&mut cq, 2);
    assert!(c.iter().all(|w| w.is_ok()));
}

/// Two ready UD QPs on one CQ: `b` holds eight receives of 296 bytes
/// (`wr_id` 100 + i, in `rbuf` at i * 296), and `sbuf` eight 64-byte
/// datagrams of bytes i + 1 (at i * 256).
struct Datagrams {
    a: Qp,
    b: Qp,
    sbuf: rverbs::Mr,
    rbuf: rverbs::Mr,
}

impl Datagrams {
    fn new(pd: &Pd, cq: &Cq, qkey: u32) -> Self {
        let mk = || pd.create_qp(&QpInit::new(QpType::Ud, cq)).unwrap();
        let (mut a, mut b) = (mk(), mk());
        for q in [&mut a, &mut b] {
            q.ready_ud(1, qkey).unwrap();
        }
        let rbuf = pd.alloc_mr(8 * 296, Access::LOCAL_WRITE).unwrap();
        let sbuf = pd.alloc_mr(8 * 256, Access::LOCAL_WRITE).unwrap();
        for i in 0..8usize {
            sbuf.write(i * 256, &[i as u8 + 1; 64]).unwrap();
            let rs = [rbuf.slice(i * 296, 296).unwrap()];
            b.post_recv(&[RecvWr {
                wr_id: 100 + i as u64,
                sges: &rs,
            }])
            .unwrap();
        }
        Datagrams { a, b, sbuf, rbuf }
    }
}

/// Of `Datagrams`' eight sends (`wr_id` 0..8) from the QP numbered
/// `src`: each completed once, and each receive holds its datagram
/// after the 40-byte GRH.
fn check_eight_datagrams(c: &[Wc], rbuf: &rverbs::Mr, src: u32) {
    let mut sends: Vec<u64> = c
        .iter()
        .filter(|w| w.opcode == WcOpcode::SEND)
        .map(|w| w.wr_id)
        .collect();
    sends.sort();
    assert_eq!(sends, (0..8).collect::<Vec<_>>());
    for w in c.iter().filter(|w| w.opcode == WcOpcode::RECV) {
        assert_eq!(
            (w.status, w.byte_len, w.src_qp),
            (WcStatus::SUCCESS, 40 + 64, src)
        );
        let i = (w.wr_id - 100) as usize;
        let mut got = [0u8; 64];
        rbuf.read(i * 296 + 40, &mut got).unwrap();
        assert_eq!(got, [i as u8 + 1; 64]);
    }
}

/// A prepared UD send through an AH: the AH and the prepared send are
/// both dropped right after the last post, and every datagram still
/// arrives (the QP keeps the AH until its sends complete).
#[test]
fn prepared_ud_sends_keep_their_address_handle() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    const QKEY: u32 = 0x2222_2222;
    let Datagrams {
        mut a,
        b,
        sbuf,
        rbuf,
    } = Datagrams::new(&pd, &cq, QKEY);
    let ah = pd.create_ah(&self_av(&ctx)).unwrap();
    let shape = [sbuf.slice(0, 1).unwrap()];
    let prepared = a
        .prepare_send(&SendWr::new(0, SendOp::Send, &shape).to(&ah, b.qpn(), QKEY))
        .unwrap();
    drop(ah);
    for i in 0..8usize {
        let s = sbuf.slice(i * 256, 64).unwrap();
        a.post_prepared(&prepared, i as u64, s, None).unwrap();
    }
    drop(prepared);
    check_eight_datagrams(&wait(&mut cq, 16), &rbuf, a.qpn());
}

/// Datagrams 3 to 5 of `ud_sends_through_send_lists_keep_their_address_handles`,
/// pushed by a `SendLoop`, each naming an AH dropped right after its push.
struct Datagrams3<'a> {
    pd: &'a Pd,
    av: &'a AhAttr,
    sbuf: &'a rverbs::Mr,
    qpn: u32,
    qkey: u32,
}

impl SendLoop for Datagrams3<'_> {
    type Output = ();

    fn run<P: SendPush>(self, list: &mut P) {
        for i in 3..6usize {
            let ah = self.pd.create_ah(self.av).unwrap();
            let s = [self.sbuf.slice(i * 256, 64).unwrap()];
            list.push(&SendWr::new(i as u64, SendOp::Send, &s).to(&ah, self.qpn, self.qkey))
                .unwrap();
            drop(ah);
        }
    }
}

/// UD sends written through a send list (pushed by the program, then by a
/// `SendLoop` it runs), posted with `post_send_one` and built in place
/// (`Qp::build_send`), each naming an AH the program drops right after the
/// push, post or `to` and before the doorbell: every datagram arrives (the QP
/// keeps each AH until its send has completed).
#[test]
fn ud_sends_through_send_lists_keep_their_address_handles() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    const QKEY: u32 = 0x3333_3333;
    let Datagrams {
        mut a,
        b,
        sbuf,
        rbuf,
    } = Datagrams::new(&pd, &cq, QKEY);
    let mut list = a.send_list().unwrap();
    for i in 0..3usize {
        let ah = pd.create_ah(&self_av(&ctx)).unwrap();
        let s = [sbuf.slice(i * 256, 64).unwrap()];
        list.push(&SendWr::new(i as u64, SendOp::Send, &s).to(&ah, b.qpn(), QKEY))
            .unwrap();
        drop(ah);
    }
    // And through `SendList::run`'s push for a QP that keeps AHs.
    list.run(Datagrams3 {
        pd: &pd,
        av: &self_av(&ctx),
        sbuf: &sbuf,
        qpn: b.qpn(),
        qkey: QKEY,
    });
    assert_eq!(list.len(), 6);
    list.finish().unwrap();
    let ah = pd.create_ah(&self_av(&ctx)).unwrap();
    let s = [sbuf.slice(6 * 256, 64).unwrap()];
    a.post_send_one(&SendWr::new(6, SendOp::Send, &s).to(&ah, b.qpn(), QKEY))
        .unwrap();
    drop(ah);
    // And built in place: the AH dropped before the batch is rung.
    let mut build = a.build_send().unwrap();
    build.start(7, SendOp::Send, SendFlags::SIGNALED);
    build.sge(sbuf.slice(7 * 256, 64).unwrap());
    let ah = pd.create_ah(&self_av(&ctx)).unwrap();
    build.to(&ah, b.qpn(), QKEY);
    drop(ah);
    assert_eq!(build.finish().unwrap(), 1);
    check_eight_datagrams(&wait(&mut cq, 16), &rbuf, a.qpn());
}

/// rxe sends a user QP's requests from a kernel work item after the
/// doorbell returns, and a request names its address handle by number,
/// looked up when the work item gets to it. Through our provider nothing
/// posted is lost when the program destroys the QP, or the AH, right
/// after posting: all 256 datagrams arrive either way. (rdma-core's
/// `mckey -s`, which posts unsignaled and then destroys its AH and its QP,
/// sends anywhere from none to all of its datagrams over rdma-core's
/// library and all of them over ours: docs/loss.md.)
#[test]
fn queued_datagrams_survive_their_qp_or_address_handle_being_destroyed_at_once() {
    const N: usize = 256;
    const QKEY: u32 = 0x2222_2222;
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    // 40 bytes of GRH, then the datagram's 8.
    let rbuf = pd.alloc_mr(N * 48, Access::LOCAL_WRITE).unwrap();
    let sbuf = pd.alloc_mr(8, Access::LOCAL_WRITE).unwrap();
    let ss = [sbuf.slice(0, 8).unwrap()];
    let caps = QpCaps {
        max_send_wr: N as u32,
        max_recv_wr: N as u32,
        ..QpCaps::default()
    };
    // One round: a fresh receiver with N receives, a fresh sender and AH,
    // N datagrams, only the last signaled; then the QP dropped at once, or
    // the AH. Returns how many arrived, and the send completions (of the
    // AH round).
    let round = |drop_ah: bool| -> (usize, Vec<rverbs::Wc>) {
        // Room for both of a QP's queues.
        let mut rcq = ctx.create_cq(2 * N as u32, None, 0).unwrap();
        let mut receiver = pd
            .create_qp(&QpInit {
                caps,
                ..QpInit::new(QpType::Ud, &rcq)
            })
            .unwrap();
        receiver.ready_ud(1, QKEY).unwrap();
        for i in 0..N {
            let rs = [rbuf.slice(i * 48, 48).unwrap()];
            receiver
                .post_recv(&[RecvWr {
                    wr_id: i as u64,
                    sges: &rs,
                }])
                .unwrap();
        }
        let mut scq = ctx.create_cq(2 * N as u32, None, 0).unwrap();
        let mut sender = pd
            .create_qp(&QpInit {
                caps,
                ..QpInit::new(QpType::Ud, &scq)
            })
            .unwrap();
        sender.ready_ud(1, QKEY).unwrap();
        let ah = pd.create_ah(&self_av(&ctx)).unwrap();
        let wrs: Vec<SendWr> = (0..N)
            .map(|i| {
                SendWr::new(i as u64, SendOp::Send, &ss)
                    .to(&ah, receiver.qpn(), QKEY)
                    .signaled(i == N - 1)
            })
            .collect();
        sender.post_send(&wrs).unwrap();
        drop(wrs);
        let mut sends = Vec::new();
        if drop_ah {
            drop(ah);
            sends = common::rc::wait_up_to(&mut scq, N, std::time::Duration::from_secs(2));
        } else {
            drop(sender);
        }
        // What was sent arrives well within two seconds.
        let got = common::rc::wait_up_to(&mut rcq, N, std::time::Duration::from_secs(2));
        assert!(got.iter().all(|w| w.status == WcStatus::SUCCESS), "{got:?}");
        (got.len(), sends)
    };
    let (arrived, _) = round(false);
    assert_eq!(
        arrived, N,
        "a QP destroyed right after its posts lost datagrams"
    );
    let (arrived, sends) = round(true);
    assert_eq!(
        arrived, N,
        "an AH destroyed right after the posts lost datagrams"
    );
    assert!(
        sends.len() == 1 && sends[0].status == WcStatus::SUCCESS,
        "the signaled last send: {sends:?}"
    );
}

//! Directed cases against the device model: arming and events, corrupt
//! CQEs, refused posts, and every named error status.

use provider_mlx5::seg::DatagramSeg;
use provider_mlx5::{
    wc, AhAddr, BadCqe, PostError, Remote, SendOp, SendWr, Sge, Status, WcOpcode, WcStatus,
};
use provider_mlx5_model::cq::CqeSpec;
use provider_mlx5_model::driver::{Bad, Driver, INJECTABLE};
use provider_mlx5_model::harness::{Pair, PairCfg};

fn recv(p: &mut Pair, wr_id: u64, off: usize, len: u32) {
    let sge = [Sge {
        addr: p.addr(p.b_mr, off),
        length: len,
        lkey: p.lkey(p.b_mr),
    }];
    // SAFETY: the SGE names the model's region b, which outlives the RQ.
    unsafe { p.b_rq.post(wr_id, &sge) }.unwrap();
}

fn send(p: &mut Pair, wr: &SendWr<'_, Sge, AhAddr>) {
    // SAFETY: every SGE in these tests names a model region.
    unsafe { p.a_sq.post(wr) }.unwrap();
}

#[test]
fn arm_next_and_solicited() {
    let mut p = Pair::new(PairCfg::default());
    let events = |p: &Pair| p.dev.cqs[0].events;
    for i in 0..4 {
        recv(&mut p, i, i as usize * 64, 64);
    }
    p.ring();
    p.cq.arm(false);
    p.dev.process();
    assert_eq!(events(&p), 0);
    send(&mut p, &SendWr::inline(1, SendOp::Send, &[1]));
    p.ring();
    assert_eq!(events(&p), 1);
    p.cq.ack_event();
    assert_eq!(p.drain().len(), 2);
    // Solicited only: a plain SEND raises nothing, a solicited one does.
    p.cq.arm(true);
    p.dev.process();
    send(&mut p, &SendWr::inline(2, SendOp::Send, &[2]));
    p.ring();
    assert_eq!(events(&p), 1);
    send(
        &mut p,
        &SendWr::inline(3, SendOp::Send, &[3]).solicited(true),
    );
    p.ring();
    assert_eq!(events(&p), 2);
    p.cq.ack_event();
    let c = p.drain();
    assert!(c
        .iter()
        .any(|c| c.wr_id == 2 && c.flags.contains(wc::SOLICITED)));
    // Arming with completions already waiting raises the event at once.
    send(&mut p, &SendWr::inline(4, SendOp::Send, &[4]));
    p.ring();
    p.cq.arm(false);
    p.dev.process();
    assert_eq!(events(&p), 3);
    p.cq.ack_event();
    assert_eq!(p.cq.arm_sn(), 3);
    assert_eq!(p.drain().len(), 2);
}

#[test]
fn corrupt_cqes_are_refused_and_nothing_is_completed_twice() {
    let mut p = Pair::new(PairCfg::default());
    let (qa, qb) = (p.qpn(p.a), p.qpn(p.b));
    recv(&mut p, 50, 0, 64);
    send(&mut p, &SendWr::inline(1, SendOp::Send, &[1; 8]));
    p.ring();
    assert_eq!(p.drain().len(), 2);
    let push = |p: &mut Pair, spec: CqeSpec| p.dev.cqs[0].push(spec);
    let req = |qpn, ctr| CqeSpec {
        qpn,
        wqe_counter: ctr,
        send_opcode: 0x0a,
        ..CqeSpec::default()
    };
    // Unknown QP; an already completed WQE; a receive that was never posted;
    // an opcode this crate does not handle.
    push(&mut p, req(0x999, 0));
    assert_eq!(
        p.poll(4),
        Err(BadCqe::UnknownQueue {
            qpn: 0x999,
            send: true
        })
    );
    push(&mut p, req(qa, 0));
    assert_eq!(
        p.poll(4),
        Err(BadCqe::NotOutstanding {
            qpn: qa,
            wqe_counter: 0
        })
    );
    push(
        &mut p,
        CqeSpec {
            opcode: 2,
            qpn: qb,
            wqe_counter: 1,
            ..CqeSpec::default()
        },
    );
    assert_eq!(
        p.poll(4),
        Err(BadCqe::NotOutstanding {
            qpn: qb,
            wqe_counter: 1
        })
    );
    push(
        &mut p,
        CqeSpec {
            opcode: 6,
            qpn: qa,
            ..CqeSpec::default()
        },
    );
    assert_eq!(p.poll(4), Err(BadCqe::Opcode { opcode: 6 }));
    // A two-block WQE, rung but not yet run: its second block, its counter
    // plus the ring size, and (before the ring) its own counter are refused.
    let data = [2u8; 60];
    send(&mut p, &SendWr::inline(2, SendOp::Send, &data));
    push(&mut p, req(qa, 1));
    assert_eq!(
        p.poll(4),
        Err(BadCqe::NotOutstanding {
            qpn: qa,
            wqe_counter: 1
        })
    );
    p.a_sq.ring();
    for ctr in [2, 1 + 16] {
        push(&mut p, req(qa, ctr));
        assert_eq!(
            p.poll(4),
            Err(BadCqe::NotOutstanding {
                qpn: qa,
                wqe_counter: ctr
            })
        );
    }
    // A forged completion of the real WQE is taken (the device's word is
    // all there is), so the device's own CQE for it is then a duplicate:
    // good CQEs before a bad one come out first, the bad one next.
    recv(&mut p, 51, 0, 64);
    push(&mut p, req(qa, 1));
    p.ring();
    let got = p.poll(8).unwrap();
    assert_eq!(
        got.iter().map(|c| (c.qp_num, c.wr_id)).collect::<Vec<_>>(),
        [(qa, 2), (qb, 51)]
    );
    assert_eq!(
        p.poll(8),
        Err(BadCqe::NotOutstanding {
            qpn: qa,
            wqe_counter: 1
        })
    );
    assert_eq!(p.poll(8), Ok(vec![]));
    // Traffic goes on.
    recv(&mut p, 52, 0, 64);
    send(&mut p, &SendWr::inline(3, SendOp::Send, &[3]));
    p.ring();
    assert_eq!(
        p.drain().iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        [52, 3]
    );
}

#[test]
fn refused_posts_write_nothing() {
    let mut p = Pair::new(PairCfg {
        sq_cnt: 4,
        max_inline: 60,
        ..PairCfg::default()
    });
    let snapshot = |p: &Pair| p.dev.qps[p.a].sq.read(0, 256);
    let before = snapshot(&p);
    let (lkey, addr) = (p.lkey(p.a_mr), p.addr(p.a_mr, 0));
    let sge = Sge {
        addr,
        length: 8,
        lkey,
    };
    let five = [sge; 5];
    let one = [sge];
    let remote = Remote {
        addr: p.addr(p.b_mr, 4),
        rkey: p.rkey(p.b_mr),
    };
    let av = DatagramSeg::default().ah_addr();
    let cases: Vec<(SendWr<'_, Sge, AhAddr>, PostError)> = vec![
        (
            SendWr::new(1, SendOp::Send, &five),
            PostError::TooManySges { given: 5, max: 4 },
        ),
        (
            SendWr::inline(1, SendOp::Send, &[0; 61]),
            PostError::InlineTooLong { given: 61, max: 60 },
        ),
        (
            SendWr::inline(1, SendOp::Read(remote), &[1]),
            PostError::InlineNotAllowed {
                opcode: SendOp::Read(remote).opcode(),
            },
        ),
        (
            SendWr::new(1, SendOp::FetchAdd { remote, add: 1 }, &one),
            PostError::BadAtomic,
        ),
        (
            SendWr {
                inline: Some(&[1]),
                ..SendWr::new(1, SendOp::Send, &one)
            },
            PostError::InlineAndSges,
        ),
        (
            SendWr::new(1, SendOp::Send, &[]).to(&av, 1, 1),
            PostError::UdMismatch { qp_is_ud: false },
        ),
    ];
    for (wr, e) in &cases {
        // SAFETY: refused before anything is written.
        assert_eq!(unsafe { p.a_sq.post(wr) }, Err(*e));
    }
    assert_eq!(snapshot(&p), before);
    for i in 0..4 {
        p.a_sq.post_nop(i, false).unwrap();
    }
    let full = snapshot(&p);
    let post = p.a_sq.cur_post();
    let refused = p.a_sq.post_nop(9, true);
    assert_eq!(refused, Err(PostError::QueueFull));
    assert_eq!((snapshot(&p), p.a_sq.cur_post()), (full, post));
}

#[test]
fn every_syndrome_is_named_and_flushes_the_rest() {
    for s in INJECTABLE {
        let mut d = Driver::new(Pair::new(PairCfg::default()));
        d.post_bad(Bad::Inject(s));
        d.finish();
        assert!(
            !matches!(Status::from_syndrome(s), Status::Other(_)),
            "{s:#x} unnamed"
        );
    }
    // RNR: a SEND with no receive posted.
    let mut p = Pair::new(PairCfg::default());
    send(&mut p, &SendWr::inline(1, SendOp::Send, &[1]));
    p.a_sq.post_nop(2, true).unwrap();
    p.ring();
    let c = p.drain();
    assert_eq!(
        c.iter()
            .map(|c| (c.wr_id, c.status, Status::of(c)))
            .collect::<Vec<_>>(),
        [
            (1, WcStatus::RNR_RETRY_EXC_ERR, Status::RnrRetryExceeded),
            (2, WcStatus::WR_FLUSH_ERR, Status::WrFlush)
        ]
    );
    assert_eq!(
        (c[0].vendor_err, c[0].opcode),
        (
            0x16 << 8 | provider_mlx5_model::exec::VENDOR as u32,
            WcOpcode::SEND
        )
    );
}

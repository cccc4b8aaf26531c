//! Directed cases against the device model: arming and events, corrupt
//! CQEs, refused posts, and every named error status.

use provider_mlx5::seg::DatagramSeg;
use provider_mlx5::wr::Payload;
use provider_mlx5::{
    BadCqe, PostError, Remote, SendFlags, SendOp, SendWr, Sge, Status, UdDest, WcFlags, WcOpcode,
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

fn send(p: &mut Pair, wr: &SendWr<'_>) {
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
    send(&mut p, &SendWr::new(1, SendOp::Send, Payload::Inline(&[1])));
    p.ring();
    assert_eq!(events(&p), 1);
    p.cq.ack_event();
    assert_eq!(p.drain().len(), 2);
    // Solicited only: a plain SEND raises nothing, a solicited one does.
    p.cq.arm(true);
    p.dev.process();
    send(&mut p, &SendWr::new(2, SendOp::Send, Payload::Inline(&[2])));
    p.ring();
    assert_eq!(events(&p), 1);
    let mut wr = SendWr::new(3, SendOp::Send, Payload::Inline(&[3]));
    wr.flags |= SendFlags::SOLICITED;
    send(&mut p, &wr);
    p.ring();
    assert_eq!(events(&p), 2);
    p.cq.ack_event();
    let c = p.drain();
    assert!(c
        .iter()
        .any(|c| c.wr_id == 2 && c.flags.contains(WcFlags::SOLICITED)));
    // Arming with completions already waiting raises the event at once.
    send(&mut p, &SendWr::new(4, SendOp::Send, Payload::Inline(&[4])));
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
    send(
        &mut p,
        &SendWr::new(1, SendOp::Send, Payload::Inline(&[1; 8])),
    );
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
    send(
        &mut p,
        &SendWr::new(2, SendOp::Send, Payload::Inline(&data)),
    );
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
        got.iter().map(|c| (c.qpn, c.wr_id)).collect::<Vec<_>>(),
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
    send(&mut p, &SendWr::new(3, SendOp::Send, Payload::Inline(&[3])));
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
    let av = UdDest {
        av: DatagramSeg::default(),
        remote_qpn: 1,
        qkey: 1,
    };
    let cases: Vec<(SendWr<'_>, PostError)> = vec![
        (
            SendWr::new(1, SendOp::Send, Payload::Sges(&five)),
            PostError::TooManySges { given: 5, max: 4 },
        ),
        (
            SendWr::new(1, SendOp::Send, Payload::Inline(&[0; 61])),
            PostError::InlineTooLong { given: 61, max: 60 },
        ),
        (
            SendWr::new(1, SendOp::Read { remote }, Payload::Inline(&[1])),
            PostError::InlineNotAllowed { opcode: 0x10 },
        ),
        (
            SendWr::new(1, SendOp::FetchAdd { remote, add: 1 }, Payload::Sges(&one)),
            PostError::BadAtomic,
        ),
        (
            SendWr::new(1, SendOp::Nop, Payload::Sges(&one)),
            PostError::PayloadNotAllowed,
        ),
        (
            SendWr {
                ud: Some(&av),
                ..SendWr::new(1, SendOp::Send, Payload::Sges(&[]))
            },
            PostError::UdMismatch { qp_is_ud: false },
        ),
    ];
    for (wr, e) in &cases {
        // SAFETY: refused before anything is written.
        assert_eq!(unsafe { p.a_sq.post(wr) }, Err(*e));
    }
    assert_eq!(snapshot(&p), before);
    for i in 0..4 {
        send(
            &mut p,
            &SendWr {
                flags: SendFlags::empty(),
                ..SendWr::new(i, SendOp::Nop, Payload::Sges(&[]))
            },
        );
    }
    let full = snapshot(&p);
    let post = p.a_sq.cur_post();
    let nop = SendWr::new(9, SendOp::Nop, Payload::Sges(&[]));
    // SAFETY: refused before anything is written.
    let refused = unsafe { p.a_sq.post(&nop) };
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
    send(&mut p, &SendWr::new(1, SendOp::Send, Payload::Inline(&[1])));
    send(&mut p, &SendWr::new(2, SendOp::Nop, Payload::Sges(&[])));
    p.ring();
    let c = p.drain();
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        [(1, Status::RnrRetryExceeded), (2, Status::WrFlush)]
    );
    assert_eq!(
        (c[0].vendor_err, c[0].opcode),
        (provider_mlx5_model::exec::VENDOR, WcOpcode::Send)
    );
}

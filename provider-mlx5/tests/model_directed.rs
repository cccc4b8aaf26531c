//! Directed cases against the device model: the doorbell and BlueFlame
//! paths, inline data across the ring's end, the SRQ free list with
//! out-of-order completions, and UD.

use provider_mlx5::seg::DatagramSeg;
use provider_mlx5::{
    AhAddr, PostError, QpQueues, RecvTarget, SendOp, SendWr, Sge, Wc, WcFlags, WcStatus,
};
use provider_mlx5_model::exec::GRH;
use provider_mlx5_model::harness::{Pair, PairCfg};
use provider_mlx5_model::mem::access;
use provider_mlx5_model::{Device, RecvSide};

fn recv(p: &mut Pair, wr_id: u64, off: usize, len: u32) {
    let sge = [Sge {
        addr: p.addr(p.b_mr, off),
        length: len,
        lkey: p.lkey(p.b_mr),
    }];
    // SAFETY: the SGE names the model's region b, which outlives the RQ.
    unsafe { p.b_rq.post(wr_id, &sge) }.unwrap();
}

/// A send request over plain SGEs, to an address vector on UD QPs.
type Wr<'a> = SendWr<'a, Sge, AhAddr>;

fn send(p: &mut Pair, wr: &Wr<'_>) {
    // SAFETY: every SGE in these tests names a model region.
    unsafe { p.a_sq.post(wr) }.unwrap();
}

#[test]
fn blueflame_for_single_small_inline_wqes_doorbell_otherwise() {
    let mut p = Pair::new(PairCfg::default());
    for i in 0..4 {
        recv(&mut p, 100 + i, i as usize * 64, 64);
    }
    let data = [7u8; 40];
    send(&mut p, &SendWr::inline(1, SendOp::Send, &data));
    p.ring();
    let qp = &p.dev.qps[p.a];
    assert_eq!((qp.doorbells, qp.blueflame_copies), (1, 1));
    // Two WQEs in one ring: a doorbell of the last one's first 8 bytes.
    send(&mut p, &SendWr::inline(2, SendOp::Send, &data));
    send(&mut p, &SendWr::inline(3, SendOp::Send, &data));
    p.ring();
    // A single gather WQE, and a NOP (one octoword): doorbells.
    p.write(p.a_mr, 0, &data);
    let sge = [Sge {
        addr: p.addr(p.a_mr, 0),
        length: 40,
        lkey: p.lkey(p.a_mr),
    }];
    send(&mut p, &SendWr::new(4, SendOp::Send, &sge));
    p.ring();
    p.a_sq.post_nop(5, true).unwrap();
    p.ring();
    let qp = &p.dev.qps[p.a];
    assert_eq!((qp.doorbells, qp.blueflame_copies), (4, 1));
    let ids: Vec<u64> = p.drain().iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [100, 1, 101, 2, 102, 3, 103, 4, 5]);
    for i in 0..4 {
        assert_eq!(p.read(p.b_mr, i * 64, 40), data);
    }

    let mut p = Pair::new(PairCfg {
        blueflame: false,
        ..PairCfg::default()
    });
    recv(&mut p, 1, 0, 64);
    send(&mut p, &SendWr::inline(1, SendOp::Send, &data));
    p.ring();
    assert_eq!(p.dev.qps[p.a].blueflame_copies, 0);
    assert_eq!(p.drain().len(), 2);
}

#[test]
fn inline_data_wraps_to_the_ring_start() {
    let mut p = Pair::new(PairCfg {
        sq_cnt: 4,
        ..PairCfg::default()
    });
    for i in 0..3 {
        p.a_sq.post_nop(i, true).unwrap();
    }
    p.ring();
    assert_eq!(p.drain().len(), 3);
    recv(&mut p, 9, 0, 128);
    let data: Vec<u8> = (0..100).collect();
    send(&mut p, &SendWr::inline(10, SendOp::Send, &data));
    // WQE = ctrl + 4-byte header + 100 bytes + 8 pad = 128 bytes: the last
    // block of the ring, then the first.
    let ring = &p.dev.qps[p.a].sq;
    assert_eq!(ring.be32(192 + 16), 100 | 0x8000_0000);
    assert_eq!(ring.read(192 + 20, 44), data[..44]);
    assert_eq!(ring.read(0, 56), data[44..]);
    assert_eq!(ring.read(56, 8), [0; 8]);
    p.ring();
    let c = p.drain();
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [9, 10]);
    assert_eq!(p.read(p.b_mr, 0, 100), data);
}

#[test]
fn srq_free_list_survives_out_of_order_completions() {
    let mut dev = Device::new();
    let (c0, c1, c2) = (dev.add_cq(16, 64), dev.add_cq(16, 64), dev.add_cq(16, 64));
    let s = dev.add_srq(8, 6);
    let a1 = dev.add_qp(false, 16, RecvSide::None, c0, c0, 256);
    let a2 = dev.add_qp(false, 16, RecvSide::None, c0, c0, 256);
    let b1 = dev.add_qp(false, 16, RecvSide::Srq(s), c1, c1, 256);
    let b2 = dev.add_qp(false, 16, RecvSide::Srq(s), c2, c2, 256);
    dev.connect(a1, b1);
    dev.connect(a2, b2);
    let mr = dev.mem.reg(4096, access::ALL);
    let (lkey, base) = (dev.mem.mrs[mr].lkey, dev.mem.mrs[mr].buf.addr());
    let mut srq = dev.provider_srq(s, 3);
    let mut sq1 = dev.provider_sq(a1, 1, 64, true);
    let mut sq2 = dev.provider_sq(a2, 1, 64, true);
    let (mut cq1, mut cq2) = (dev.provider_cq(c1), dev.provider_cq(c2));
    let mut cq0 = dev.provider_cq(c0);
    let qpn: Vec<u32> = dev.qps.iter().map(|q| q.qpn).collect();
    let (n1, n2) = (qpn[b1], qpn[b2]);
    let post_recv = |srq: &mut provider_mlx5::SharedRecvQueue, id: u64| {
        let sge = [Sge {
            addr: base + id * 64,
            length: 64,
            lkey,
        }];
        // SAFETY: region mr outlives the SRQ.
        unsafe { srq.post(id, &sge) }
    };
    for id in 0..7 {
        post_recv(&mut srq, id).unwrap();
    }
    assert_eq!(post_recv(&mut srq, 7), Err(PostError::QueueFull));
    srq.ring();
    let msg = |i: u64| [i as u8; 24];
    let send = |sq: &mut provider_mlx5::SendQueue, i: u64| {
        let m = msg(i);
        // SAFETY: inline data only.
        unsafe { sq.post(&Wr::inline(i, SendOp::Send, &m)) }.unwrap();
    };
    for i in 0..3 {
        send(&mut sq1, i);
        send(&mut sq2, 10 + i);
    }
    sq1.ring();
    sq2.ring();
    dev.process();
    let poll = |cq: &mut provider_mlx5::CompletionQueue,
                qpn: u32,
                srq: &mut provider_mlx5::SharedRecvQueue| {
        let mut qs = QpQueues {
            qpn,
            sq: None,
            rq: Some(RecvTarget::Srq(srq.records())),
        };
        let mut out = [Wc::default(); 16];
        let n = cq.poll(&mut qs, &mut out).unwrap();
        out[..n].to_vec()
    };
    // b2's receives (SRQ WQEs 3, 4, 5) complete before b1's (0, 1, 2).
    let got2 = poll(&mut cq2, n2, &mut srq);
    assert_eq!(got2.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [3, 4, 5]);
    let got1 = poll(&mut cq1, n1, &mut srq);
    assert_eq!(got1.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(srq.outstanding(), 1);
    // Six more receives go into the freed WQEs; the device, following the
    // links, uses WQE 6 (still posted) and then them, in order.
    for id in 20..26 {
        post_recv(&mut srq, id).unwrap();
    }
    assert_eq!(post_recv(&mut srq, 26), Err(PostError::QueueFull));
    srq.ring();
    for i in 0..7 {
        send(&mut sq1, 30 + i);
    }
    sq1.ring();
    dev.process();
    let got = poll(&mut cq1, n1, &mut srq);
    assert_eq!(
        got.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        [6, 20, 21, 22, 23, 24, 25]
    );
    for (c, i) in got.iter().zip(30..) {
        assert_eq!(c.status, WcStatus::SUCCESS);
        assert_eq!(
            dev.mem.mrs[mr].buf.read((c.wr_id * 64) as usize, 24),
            msg(i)
        );
    }
    assert_eq!(srq.outstanding(), 0);
    let mut qs = [
        QpQueues {
            qpn: qpn[a1],
            sq: Some(sq1.records()),
            rq: None,
        },
        QpQueues {
            qpn: qpn[a2],
            sq: Some(sq2.records()),
            rq: None,
        },
    ];
    let mut out = [Wc::default(); 16];
    assert_eq!(cq0.poll(&mut qs[..], &mut out), Ok(13));
}

#[test]
fn ud_send_lands_after_the_grh_area() {
    let mut dev = Device::new();
    let c = dev.add_cq(16, 128);
    let u1 = dev.add_qp(true, 8, RecvSide::Rq { cnt: 4, shift: 4 }, c, c, 256);
    let u2 = dev.add_qp(true, 8, RecvSide::Rq { cnt: 4, shift: 4 }, c, c, 256);
    let mr = dev.mem.reg(4096, access::ALL);
    let (lkey, base) = (dev.mem.mrs[mr].lkey, dev.mem.mrs[mr].buf.addr());
    let mut sq = dev.provider_sq(u1, 1, 64, true);
    let rq1 = dev.provider_rq(u1, 1);
    let mut rq2 = dev.provider_rq(u2, 1);
    let mut cq = dev.provider_cq(c);
    let sge = [Sge {
        addr: base,
        length: 128,
        lkey,
    }];
    // SAFETY: region mr outlives the RQ.
    unsafe { rq2.post(77, &sge) }.unwrap();
    rq2.ring();
    let av = DatagramSeg::new(
        0,
        0,
        false,
        3,
        0,
        0x11,
        [1, 2, 3, 4, 5, 6],
        0,
        64,
        0,
        [9; 16],
    );
    let data = [0xabu8; 50];
    let ah = av.ah_addr();
    let (qpn2, qkey2) = (dev.qps[u2].qpn, dev.qps[u2].qkey);
    for (id, qkey) in [(1, qkey2 ^ 1), (2, qkey2)] {
        let wr = Wr::inline(id, SendOp::SendWithImm(5), &data).to(&ah, qpn2, qkey);
        // SAFETY: inline data only.
        unsafe { sq.post(&wr) }.unwrap();
    }
    let on_rc = Wr::inline(3, SendOp::Send, &data);
    // SAFETY: rejected before anything is written.
    let refused = unsafe { sq.post(&on_rc) };
    assert_eq!(refused, Err(PostError::UdMismatch { qp_is_ud: true }));
    // An address handle of another provider (an rxe AH number).
    let foreign = Wr::inline(4, SendOp::Send, &data).to(&AhAddr::Number(7), qpn2, qkey2);
    // SAFETY: rejected before anything is written.
    let refused = unsafe { sq.post(&foreign) };
    assert_eq!(refused, Err(PostError::ForeignAddressHandle));
    sq.ring();
    dev.process();
    let (n1, n2) = (dev.qps[u1].qpn, dev.qps[u2].qpn);
    let mut qs = [
        QpQueues {
            qpn: n1,
            sq: Some(sq.records()),
            rq: Some(RecvTarget::Rq(rq1.records())),
        },
        QpQueues {
            qpn: n2,
            sq: None,
            rq: Some(RecvTarget::Rq(rq2.records())),
        },
    ];
    let mut out = [Wc::default(); 8];
    let n = cq.poll(&mut qs[..], &mut out).unwrap();
    let r = out[..n]
        .iter()
        .find(|c| c.qp_num == n2)
        .expect("the good datagram arrived");
    assert_eq!(
        (r.wr_id, r.byte_len, r.src_qp, r.imm_data()),
        (77, (GRH + 50) as u32, n1, Some(5))
    );
    assert!(r.flags.contains(WcFlags::WITH_IMM));
    assert_eq!(dev.mem.mrs[mr].buf.read(GRH, 50), data);
    assert_eq!(
        out[..n]
            .iter()
            .filter(|c| c.qp_num == n1)
            .map(|c| c.wr_id)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(n, 3, "the wrong Q_Key was dropped silently");
}

/// One SRQ receive stays completed-but-unpolled (its QP's CQ is not
/// polled) while the other QP cycles three times the SRQ's capacity through
/// the rest: the late poll still yields its wr_id, once. (An earlier
/// version judged "published" by the receive's age and refused it.)
#[test]
fn srq_receive_polled_late_after_many_reposts() {
    let mut dev = Device::new();
    let (c0, c1, c2) = (dev.add_cq(16, 64), dev.add_cq(16, 64), dev.add_cq(16, 64));
    let s = dev.add_srq(8, 6);
    let a1 = dev.add_qp(false, 16, RecvSide::None, c0, c0, 256);
    let a2 = dev.add_qp(false, 16, RecvSide::None, c0, c0, 256);
    let b1 = dev.add_qp(false, 16, RecvSide::Srq(s), c1, c1, 256);
    let b2 = dev.add_qp(false, 16, RecvSide::Srq(s), c2, c2, 256);
    dev.connect(a1, b1);
    dev.connect(a2, b2);
    let mr = dev.mem.reg(4096, access::ALL);
    let (lkey, base) = (dev.mem.mrs[mr].lkey, dev.mem.mrs[mr].buf.addr());
    let mut srq = dev.provider_srq(s, 3);
    let mut sq1 = dev.provider_sq(a1, 1, 64, true);
    let mut sq2 = dev.provider_sq(a2, 1, 64, true);
    let (mut cq0, mut cq1, mut cq2) = (
        dev.provider_cq(c0),
        dev.provider_cq(c1),
        dev.provider_cq(c2),
    );
    let qpn: Vec<u32> = dev.qps.iter().map(|q| q.qpn).collect();
    let post_recv = |srq: &mut provider_mlx5::SharedRecvQueue, id: u64| {
        let sge = [Sge {
            addr: base + (id % 32) * 64,
            length: 64,
            lkey,
        }];
        // SAFETY: region mr outlives the SRQ.
        unsafe { srq.post(id, &sge) }
    };
    let send = |sq: &mut provider_mlx5::SendQueue, i: u64| {
        let m = [i as u8; 16];
        // SAFETY: inline data only.
        unsafe { sq.post(&Wr::inline(i, SendOp::Send, &m)) }.unwrap();
    };
    let mut next_id = 0;
    for _ in 0..7 {
        post_recv(&mut srq, next_id).unwrap();
        next_id += 1;
    }
    srq.ring();
    send(&mut sq1, 100);
    sq1.ring();
    dev.process();
    let mut senders = [
        QpQueues {
            qpn: qpn[a1],
            sq: Some(sq1.records()),
            rq: None,
        },
        QpQueues {
            qpn: qpn[a2],
            sq: Some(sq2.records()),
            rq: None,
        },
    ];
    let mut out = [Wc::default(); 16];
    assert_eq!(cq0.poll(&mut senders[..], &mut out), Ok(1));
    // Receive 0 has completed on c1, unpolled. Three rounds of six.
    let mut expect = 1..7u64;
    for round in 0..3 {
        for i in 0..6 {
            send(&mut sq2, 200 + round * 6 + i);
        }
        sq2.ring();
        dev.process();
        let mut qs = QpQueues {
            qpn: qpn[b2],
            sq: None,
            rq: Some(RecvTarget::Srq(srq.records())),
        };
        let n = cq2.poll(&mut qs, &mut out).unwrap();
        let ids: Vec<u64> = out[..n].iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, expect.clone().collect::<Vec<_>>(), "round {round}");
        let mut senders = [QpQueues {
            qpn: qpn[a2],
            sq: Some(sq2.records()),
            rq: None,
        }];
        assert_eq!(cq0.poll(&mut senders[..], &mut out), Ok(6));
        assert_eq!(srq.outstanding(), 1);
        let first = next_id;
        for _ in 0..6 {
            post_recv(&mut srq, next_id).unwrap();
            next_id += 1;
        }
        assert_eq!(post_recv(&mut srq, 999), Err(PostError::QueueFull));
        srq.ring();
        expect = first..next_id;
    }
    let mut qs = QpQueues {
        qpn: qpn[b1],
        sq: None,
        rq: Some(RecvTarget::Srq(srq.records())),
    };
    let n = cq1.poll(&mut qs, &mut out).unwrap();
    assert_eq!((n, out[0].wr_id, out[0].status), (1, 0, WcStatus::SUCCESS));
    assert_eq!(cq1.poll(&mut qs, &mut out), Ok(0));
    assert_eq!(srq.outstanding(), 6);
}

#[test]
fn uc_drops_what_the_responder_refuses_and_fails_reads_locally() {
    let mut p = Pair::of_type(PairCfg::default(), true);
    let data = [5u8; 32];
    p.write(p.a_mr, 0, &data);
    let sge = [Sge {
        addr: p.addr(p.a_mr, 0),
        length: 32,
        lkey: p.lkey(p.a_mr),
    }];
    let to = |rkey| provider_mlx5::Remote {
        addr: p.addr(p.b_mr, 256),
        rkey,
    };
    let (good, bad) = (to(p.rkey(p.b_mr)), to(p.rkey(p.b_mr) ^ 0x5500));
    // A WRITE to an rkey the responder does not know completes (nothing
    // comes back on UC) and writes nothing; the good one lands.
    send(&mut p, &SendWr::new(1, SendOp::Write(bad), &sge));
    send(&mut p, &SendWr::new(2, SendOp::Write(good), &sge));
    // A SEND with no receive posted: dropped at the responder too.
    send(&mut p, &SendWr::new(3, SendOp::Send, &sge));
    p.ring();
    let c = p.drain();
    let got: Vec<(u64, WcStatus)> = c.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::SUCCESS),
            (2, WcStatus::SUCCESS),
            (3, WcStatus::SUCCESS)
        ]
    );
    assert_eq!(p.read(p.b_mr, 256, 32), data);
    assert!(!p.dev.qps[p.a].error && !p.dev.qps[p.b].error);
    // provider-mlx5 refuses a READ on UC.
    assert!(matches!(
        // SAFETY: the SGE names model region a.
        unsafe { p.a_sq.post(&Wr::new(4, SendOp::Read(good), &sge)) },
        Err(PostError::NotOnTransport { .. })
    ));

    // One written as for RC (an SQ of RC's layout over a fresh UC QP's
    // ring) fails at the device with a local QP operation error.
    let mut p = Pair::of_type(PairCfg::default(), true);
    p.dev.qps[p.a].uc = false;
    let mut rc_sq = p.dev.provider_sq(p.a, 4, 0, false);
    p.dev.qps[p.a].uc = true;
    let sge = [Sge {
        addr: p.addr(p.a_mr, 0),
        length: 32,
        lkey: p.lkey(p.a_mr),
    }];
    let remote = provider_mlx5::Remote {
        addr: p.addr(p.b_mr, 0),
        rkey: p.rkey(p.b_mr),
    };
    // SAFETY: the SGE names model region a.
    unsafe { rc_sq.post(&Wr::new(7, SendOp::Read(remote), &sge)) }.unwrap();
    rc_sq.ring();
    p.dev.process();
    let mut out = [Wc::default(); 4];
    let qa = p.qpn(p.a);
    let mut qs = [QpQueues {
        qpn: qa,
        sq: Some(rc_sq.records()),
        rq: None,
    }];
    let n = p.cq.poll(&mut qs[..], &mut out).unwrap();
    assert_eq!(n, 1);
    assert_eq!((out[0].wr_id, out[0].status), (7, WcStatus::LOC_QP_OP_ERR));
    assert!(p.dev.qps[p.a].error);
}

/// A CQ's lookup hears each batch's new consumer index before SET_CI hands
/// the batch's entries back to the device (which may then overwrite
/// them): a CQ's registry publishes it there, so that a QP's destroy,
/// scanning the ring from it on another thread, never starts behind
/// entries the device may already have rewritten.
#[test]
fn a_batch_is_announced_before_its_entries_go_back() {
    use provider_mlx5::{SendRecords, WorkQueues};
    use provider_mlx5_model::cq::ModelCq;

    struct Watch<'a> {
        qs: [QpQueues<'a>; 1],
        cq: &'a ModelCq,
        /// (the index announced, SET_CI as the device saw it then)
        heard: Vec<(u32, u32)>,
    }
    impl WorkQueues for Watch<'_> {
        fn send_queue(&mut self, qpn: u32, u: u32) -> Option<&SendRecords> {
            self.qs.send_queue(qpn, u)
        }
        fn recv_queue(&mut self, qpn: u32, u: u32) -> Option<RecvTarget<'_>> {
            self.qs.recv_queue(qpn, u)
        }
        fn releasing(&mut self, ci: u32) {
            self.heard.push((ci, self.cq.ci()));
        }
    }

    let mut p = Pair::new(PairCfg::default());
    let src = [Sge {
        addr: p.addr(p.a_mr, 0),
        length: 8,
        lkey: p.lkey(p.a_mr),
    }];
    let remote = provider_mlx5::Remote {
        addr: p.addr(p.b_mr, 0),
        rkey: p.rkey(p.b_mr),
    };
    for i in 0..12 {
        send(&mut p, &Wr::new(i, SendOp::Write(remote), &src));
    }
    p.ring();
    assert_eq!(p.dev.cqs.len(), 1);
    let qpn = p.qpn(p.a);
    let mut w = Watch {
        qs: [QpQueues {
            qpn,
            sq: Some(p.a_sq.records()),
            rq: None,
        }],
        cq: &p.dev.cqs[0],
        heard: Vec::new(),
    };
    let mut out = [Wc::default(); 8];
    assert_eq!(p.cq.poll(&mut w, &mut out), Ok(8));
    assert_eq!(p.cq.poll(&mut w, &mut out), Ok(4));
    assert_eq!(p.cq.poll(&mut w, &mut out), Ok(0));
    assert_eq!(w.heard, [(8, 0), (12, 8)], "announced before SET_CI moved");
    assert_eq!(w.cq.ci(), 12);
}

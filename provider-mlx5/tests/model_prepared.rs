//! Prepared sends against `post` and the device model: for random shapes
//! and posts (every preparable operation, flags, empty and full SGEs,
//! remote addresses moved or kept, ring wraps), the WQE a prepared post
//! builds is byte for byte the one `post` builds for the same request, and
//! the model runs it to the same completions and data. UD too, with its
//! datagram segment.

use proptest::prelude::*;
use provider_mlx5::seg::DatagramSeg;
use provider_mlx5::{AhAddr, PostError, QpQueues, RecvTarget, SendOp, SendWr, Sge, Wc};
use provider_mlx5_model::harness::{Pair, PairCfg};
use provider_mlx5_model::mem::access;
use provider_mlx5_model::{Device, RecvSide};

type Wr<'a> = SendWr<'a, Sge, AhAddr>;

/// The operation `k` (0..5) at remote address `addr`.
fn op(k: u8, addr: u64, rkey: u32, imm: u32) -> SendOp {
    let r = provider_mlx5::Remote { addr, rkey };
    match k {
        0 => SendOp::Send,
        1 => SendOp::SendWithImm(imm),
        2 => SendOp::Write(r),
        3 => SendOp::WriteWithImm(r, imm),
        _ => SendOp::Read(r),
    }
}

/// The SQ bytes of the WQE at block `start` (`ds` octowords, wrapping).
fn wqe_bytes(p: &Pair, start: u32, ds: usize) -> Vec<u8> {
    let ring = &p.dev.qps[p.a].sq;
    let len = ring.len();
    // Octoword by octoword: a WQE starts on a block and wraps only between
    // octowords.
    (0..ds)
        .flat_map(|k| ring.read((start as usize * 64 + k * 16) % len, 16))
        .collect()
}

/// Posts per case: enough for several wraps of the 8-block ring; fewer
/// under Miri (`cargo xtask test` runs this file there too), where each
/// post's model run and region comparisons are slow.
const MAX_POSTS: usize = if cfg!(miri) { 12 } else { 40 };

fn small_cfg() -> PairCfg {
    PairCfg {
        sq_cnt: 8,
        rq_cnt: 64,
        ..PairCfg::default()
    }
}

proptest! {
    #[test]
    fn prepared_posts_build_and_run_what_post_does(
        k in 0u8..5,
        flags in any::<(bool, bool)>(),
        imm in any::<u32>(),
        posts in proptest::collection::vec((0usize..4, 0u32..200, any::<bool>()), 1..MAX_POSTS),
    ) {
        let (mut a, mut b) = (Pair::new(small_cfg()), Pair::new(small_cfg()));
        let rkey = b.rkey(b.b_mr);
        prop_assert_eq!(rkey, a.rkey(a.b_mr));
        let shape_sge = [Sge::default()];
        let shape: Wr<'_> = Wr::new(0, op(k, b.addr(b.b_mr, 0), rkey, imm), &shape_sge)
            .signaled(true)
            .solicited(flags.0)
            .fence(flags.1);
        let t = b.a_sq.prepare(&shape).unwrap();
        prop_assert_eq!(t.takes_remote_address(), k >= 2);
        for (i, (slot, len, move_remote)) in posts.into_iter().enumerate() {
            let id = i as u64;
            for p in [&mut a, &mut b] {
                let fill: Vec<u8> = (0..len).map(|x| (x as u8) ^ (i as u8)).collect();
                p.write(p.a_mr, slot * 256, &fill);
                p.write(p.b_mr, slot * 256, &fill);
                let sge = [Sge { addr: p.addr(p.b_mr, 2048 + slot * 256), length: 256, lkey: p.lkey(p.b_mr) }];
                // SAFETY: the SGE names the model's region b.
                unsafe { p.b_rq.post(1000 + id, &sge) }.unwrap();
            }
            let raddr = (move_remote && k >= 2).then_some(slot * 256 + 7);
            let sge_a = Sge { addr: a.addr(a.a_mr, slot * 256), length: len, lkey: a.lkey(a.a_mr) };
            let sges = [sge_a];
            let mut wr = Wr::new(id, op(k, a.addr(a.b_mr, raddr.unwrap_or(0)), rkey, imm), &sges)
                .signaled(true)
                .solicited(flags.0)
                .fence(flags.1);
            wr.wr_id = id;
            let (start_a, start_b) = (a.a_sq.cur_post(), b.a_sq.cur_post());
            prop_assert_eq!(start_a, start_b);
            // SAFETY: the SGE names the model's region a.
            unsafe { a.a_sq.post(&wr) }.unwrap();
            let sge_b = Sge { addr: b.addr(b.a_mr, slot * 256), length: len, lkey: b.lkey(b.a_mr) };
            // SAFETY: as above; `t` is this queue's.
            unsafe { b.a_sq.post_prepared(&t, id, sge_b, raddr.map(|o| b.addr(b.b_mr, o))) }.unwrap();
            let ds = ((a.a_sq.cur_post() - start_a) * 4) as usize;
            prop_assert_eq!(b.a_sq.cur_post(), a.a_sq.cur_post());
            let (wa, wb) = (wqe_bytes(&a, start_a, ds), wqe_bytes(&b, start_b, ds));
            // The WQE names addresses and keys of its own pair's regions,
            // which the two models place at different addresses: compare
            // the bytes with each pair's addresses taken out.
            let strip = |p: &Pair, mut w: Vec<u8>| {
                for at in (0..w.len()).step_by(8) {
                    let v = u64::from_be_bytes(w[at..at + 8].try_into().unwrap());
                    for (tag, mr) in [(1u64 << 40, p.a_mr), (2 << 40, p.b_mr)] {
                        // Every address these posts name is in a region's
                        // first 4 KiB.
                        let off = v.wrapping_sub(p.addr(mr, 0));
                        if off < 0x1000 {
                            w[at..at + 8].copy_from_slice(&(tag | off).to_be_bytes());
                        }
                    }
                }
                w
            };
            prop_assert_eq!(strip(&a, wa), strip(&b, wb));
            a.ring();
            b.ring();
            let (ca, cb) = (a.drain(), b.drain());
            let key = |c: &Wc| (c.wr_id, c.status, c.opcode, c.byte_len, c.flags, c.imm_data());
            prop_assert_eq!(ca.iter().map(key).collect::<Vec<_>>(), cb.iter().map(key).collect::<Vec<_>>());
            prop_assert_eq!(a.read(a.a_mr, 0, 4096), b.read(b.a_mr, 0, 4096));
            prop_assert_eq!(a.read(a.b_mr, 0, 4096), b.read(b.b_mr, 0, 4096));
        }
        if k < 2 {
            let sge = Sge::default();
            // SAFETY: refused before anything is written.
            let e = unsafe { b.a_sq.post_prepared(&t, 1, sge, Some(8)) };
            prop_assert_eq!(e, Err(PostError::NoRemoteAddress { opcode: op(k, 0, 0, 0).opcode() }));
        }
    }
}

#[test]
fn shapes_that_are_not_preparable_are_refused() {
    let p = Pair::new(small_cfg());
    let two = [Sge::default(); 2];
    let wr: Wr<'_> = Wr::new(0, SendOp::Send, &two);
    assert_eq!(
        p.a_sq.prepare(&wr).unwrap_err(),
        PostError::NotPreparable {
            opcode: SendOp::Send.opcode()
        }
    );
}

#[test]
fn a_prepared_ud_send_matches_post_and_arrives() {
    let mut dev = Device::new();
    let c = dev.add_cq(16, 128);
    let u1 = dev.add_qp(true, 8, RecvSide::Rq { cnt: 8, shift: 4 }, c, c, 256);
    let u2 = dev.add_qp(true, 8, RecvSide::Rq { cnt: 8, shift: 4 }, c, c, 256);
    let mr = dev.mem.reg(4096, access::ALL);
    let (lkey, base) = (dev.mem.mrs[mr].lkey, dev.mem.mrs[mr].buf.addr());
    let mut sq = dev.provider_sq(u1, 1, 64, true);
    let rq1 = dev.provider_rq(u1, 1);
    let mut rq2 = dev.provider_rq(u2, 1);
    let mut cq = dev.provider_cq(c);
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
    let ah = av.ah_addr();
    let (qpn2, qkey2) = (dev.qps[u2].qpn, dev.qps[u2].qkey);
    dev.mem.mrs[mr].buf.write(0, &[0x5a; 40]);
    let payload = Sge {
        addr: base,
        length: 40,
        lkey,
    };
    for i in 0..6u64 {
        let sge = [Sge {
            addr: base + 1024 + i * 128,
            length: 128,
            lkey,
        }];
        // SAFETY: region mr outlives the RQ.
        unsafe { rq2.post(100 + i, &sge) }.unwrap();
    }
    rq2.ring();
    let sges = [payload];
    let wr = Wr::new(1, SendOp::SendWithImm(5), &sges)
        .signaled(true)
        .to(&ah, qpn2, qkey2);
    let t = sq.prepare(&wr).unwrap();
    assert!(!t.takes_remote_address());
    // Three rounds of post then prepared post: same bytes each time (at
    // consecutive WQEs, so the second of each pair is the comparison),
    // across the 8-block ring's end (each UD WQE takes two blocks).
    for round in 0..3u64 {
        let start = sq.cur_post();
        let mut w = wr;
        w.wr_id = 10 + round;
        // SAFETY: the SGE names region mr.
        unsafe { sq.post(&w) }.unwrap();
        let mid = sq.cur_post();
        // SAFETY: as above; `t` is this queue's.
        unsafe { sq.post_prepared(&t, 10 + round, payload, None) }.unwrap();
        let ring = &dev.qps[u1].sq;
        let at = |blk: u32, n: usize| -> Vec<u8> {
            (0..n)
                .map(|i| ring.read((blk as usize * 64 + i) % ring.len(), 1)[0])
                .collect()
        };
        let (mut x, mut y) = (at(start, 80), at(mid, 80));
        // The WQE index differs (bytes 1..3 of the control segment).
        x[1..3].fill(0);
        y[1..3].fill(0);
        assert_eq!(x, y, "round {round}");
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
        let sends: Vec<u64> = out[..n]
            .iter()
            .filter(|c| c.qp_num == n1)
            .map(|c| c.wr_id)
            .collect();
        assert_eq!(sends, [10 + round, 10 + round]);
        let recvs: Vec<(u32, Option<u32>)> = out[..n]
            .iter()
            .filter(|c| c.qp_num == n2)
            .map(|c| (c.byte_len, c.imm_data()))
            .collect();
        assert_eq!(recvs, [(40 + 40, Some(5)); 2]);
    }
    let got = dev.mem.mrs[mr].buf.read(1024 + 40, 40);
    assert_eq!(got, [0x5a; 40]);
}

//! provider-mlx5's poll, three ways, on the software device model: a poll
//! that returns one completion, one that returns four, and an empty poll —
//! the rows `cargo xtask bench` sets beside rdma-core's own `mlx5_poll_cq`
//! doing the same (xtask/bench-ref/mlx5/). The figure is inclusive
//! instructions / calls of each `bench_poll_*` function, which contain
//! only provider code; the posts and the model's work between them are
//! not counted.
//!
//! ```text
//! cargo run --release -p provider-mlx5-model --example bench_polls -- 1000
//! ```
//! Not a test: it asserts only that every completion came back right, so
//! that a broken build cannot report a cheap-looking number.

use provider_mlx5::{AhAddr, CompletionQueue, QpQueues, Remote, SendOp, SendWr, Sge, Wc, WcStatus};
use provider_mlx5_model::harness::{Pair, PairCfg};

/// Polls with room for one completion, where one is waiting.
#[inline(never)]
fn bench_poll_one(cq: &mut CompletionQueue, qs: &mut [QpQueues<'_>], out: &mut [Wc; 1]) -> usize {
    cq.poll(qs, out)
        .unwrap_or_else(|e| panic!("bad CQE: {e:?}"))
}

/// Polls with room for four completions, where four are waiting.
#[inline(never)]
fn bench_poll_four(cq: &mut CompletionQueue, qs: &mut [QpQueues<'_>], out: &mut [Wc; 4]) -> usize {
    cq.poll(qs, out)
        .unwrap_or_else(|e| panic!("bad CQE: {e:?}"))
}

/// Polls an empty CQ with room for one completion.
#[inline(never)]
fn bench_poll_empty(cq: &mut CompletionQueue, qs: &mut [QpQueues<'_>], out: &mut [Wc; 1]) -> usize {
    cq.poll(qs, out)
        .unwrap_or_else(|e| panic!("bad CQE: {e:?}"))
}

/// Posts `n` signaled 64-byte RDMA WRITEs from a to b and lets the model
/// run them (not measured).
fn post(p: &mut Pair, first_id: u64, n: u64) {
    let sge = [Sge {
        addr: p.addr(p.a_mr, 0),
        length: 64,
        lkey: p.lkey(p.a_mr),
    }];
    let remote = Remote {
        addr: p.addr(p.b_mr, 128),
        rkey: p.rkey(p.b_mr),
    };
    for id in first_id..first_id + n {
        let wr: SendWr<'_, Sge, AhAddr> = SendWr::new(id, SendOp::Write(remote), &sge);
        // SAFETY: the SGE names the model's registered region, which
        // outlives the queue (the Pair owns both).
        if let Err(e) = unsafe { p.a_sq.post(&wr) } {
            panic!("post failed: {e:?}");
        }
    }
    p.a_sq.ring();
    p.dev.process();
}

fn check(out: &[Wc], first_id: u64) {
    for (i, wc) in out.iter().enumerate() {
        assert_eq!(wc.wr_id, first_id + i as u64, "wrong wr_id");
        assert_eq!(wc.status, WcStatus::SUCCESS, "wr {}", wc.wr_id);
    }
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut p = Pair::new(PairCfg::default());
    let mut id = 0;
    for _ in 0..iters {
        post(&mut p, id, 1);
        let mut one = [Wc::default(); 1];
        let mut four = [Wc::default(); 4];
        let (n1, n0) = p.with_queues(false, |cq, qs| {
            let n1 = bench_poll_one(cq, qs, &mut one);
            let n0 = bench_poll_empty(cq, qs, &mut one);
            (n1, n0)
        });
        assert_eq!((n1, n0), (1, 0), "one, then empty");
        check(&one, id);
        id += 1;
        post(&mut p, id, 4);
        let n4 = p.with_queues(false, |cq, qs| bench_poll_four(cq, qs, &mut four));
        assert_eq!(n4, 4, "four");
        check(&four, id);
        id += 4;
    }
    println!("mlx5 model: {iters} polls of one, of four and empty, every completion checked");
}

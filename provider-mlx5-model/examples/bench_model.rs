//! The mlx5 data path's cost per operation, on the software device model:
//! build and ring one signaled single-SGE RDMA WRITE, then poll its one
//! CQE. Run under callgrind by `cargo xtask bench` (or `--mlx5-only`); the
//! figure is inclusive instructions / calls of [`bench_post`] and
//! [`bench_poll`], which contain only provider code — the model's work
//! (consuming the WQE, moving the data, writing the CQE) happens between
//! them and is not counted.
//!
//! ```text
//! cargo run --release -p provider-mlx5-model --example bench_model -- 1000
//! ```
//! Not a test: it asserts only that every write landed and completed, so
//! that a broken build cannot report a cheap-looking number.

use provider_mlx5::{
    AhAddr, CompletionQueue, QpQueues, Remote, SendOp, SendQueue, SendWr, Sge, Wc, WcStatus,
};
use provider_mlx5_model::harness::{Pair, PairCfg};

/// Builds one WQE into the SQ ring and rings the doorbell (BlueFlame or
/// the 8-byte doorbell, as the provider decides).
#[inline(never)]
fn bench_post(sq: &mut SendQueue, wr: &SendWr<'_, Sge, AhAddr>) {
    // SAFETY: the SGE names the model's registered region, which outlives
    // the queue (the Pair owns both).
    if let Err(e) = unsafe { sq.post(wr) } {
        panic!("post failed: {e:?}");
    }
    sq.ring();
}

/// Polls one CQE, resolves it to its work request and decodes it into a
/// `Wc`.
#[inline(never)]
fn bench_poll(cq: &mut CompletionQueue, qs: &mut [QpQueues<'_>], out: &mut [Wc]) -> usize {
    match cq.poll(qs, out) {
        Ok(n) => n,
        Err(e) => panic!("bad CQE: {e:?}"),
    }
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut p = Pair::new(PairCfg::default());
    let mut out = [Wc::default(); 1];
    for i in 0..iters {
        let stamp = (i as u8).wrapping_mul(13).wrapping_add(1);
        p.write(p.a_mr, 0, &[stamp; 64]);
        let sge = [Sge {
            addr: p.addr(p.a_mr, 0),
            length: 64,
            lkey: p.lkey(p.a_mr),
        }];
        let remote = Remote {
            addr: p.addr(p.b_mr, 128),
            rkey: p.rkey(p.b_mr),
        };
        let wr = SendWr::new(i, SendOp::Write(remote), &sge);
        bench_post(&mut p.a_sq, &wr);
        // The device consumes the WQE and writes the CQE: not counted.
        p.dev.process();
        let n = p.with_queues(false, |cq, qs| bench_poll(cq, qs, &mut out));
        assert_eq!(n, 1, "iteration {i}: no completion");
        assert_eq!(out[0].wr_id, i, "iteration {i}: wrong wr_id");
        assert_eq!(out[0].status, WcStatus::SUCCESS, "iteration {i}");
        assert_eq!(
            p.read(p.b_mr, 128, 64),
            vec![stamp; 64],
            "iteration {i}: data"
        );
    }
    println!("mlx5 model: {iters} RDMA WRITEs posted, rung, completed and verified");
}

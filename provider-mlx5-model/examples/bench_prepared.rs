//! The mlx5 prepared send's cost per call, on the software device model:
//! one signaled single-SGE RDMA WRITE prepared once
//! (`SendQueue::prepare`), then posted and rung each time with its id, SGE
//! and remote address ([`bench_post_prepared`]) — the row beside
//! `bench_model`'s `bench_post`, which builds the same WRITE from a
//! `SendWr` each time. A program of its own so that neither's code is
//! shaped by the other's. Run under callgrind by `cargo xtask bench`.
//!
//! ```text
//! cargo run --release -p provider-mlx5-model --example bench_prepared -- 1000
//! ```
//! Not a test: it asserts only that every write landed and completed, so
//! that a broken build cannot report a cheap-looking number.

use provider_mlx5::{AhAddr, Remote, SendOp, SendQueue, SendTemplate, SendWr, Sge, Wc, WcStatus};
use provider_mlx5_model::harness::{Pair, PairCfg};

/// Posts a WRITE prepared once (id, SGE and remote address given) and
/// rings the doorbell.
#[inline(never)]
fn bench_post_prepared(sq: &mut SendQueue, t: &SendTemplate, id: u64, sge: Sge, raddr: u64) {
    // SAFETY: the SGE names the model's registered region, which outlives
    // the queue (the Pair owns both); `t` is this queue's.
    if let Err(e) = unsafe { sq.post_prepared(t, id, sge, Some(raddr)) } {
        panic!("post_prepared failed: {e:?}");
    }
    sq.ring();
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut p = Pair::new(PairCfg::default());
    let mut out = [Wc::default(); 1];
    let shape = [Sge::default()];
    let remote = Remote {
        addr: p.addr(p.b_mr, 0),
        rkey: p.rkey(p.b_mr),
    };
    let t = p
        .a_sq
        .prepare(&SendWr::<'_, Sge, AhAddr>::new(
            0,
            SendOp::Write(remote),
            &shape,
        ))
        .expect("a WRITE of one SGE prepares");
    for i in 0..iters {
        let stamp = (i as u8).wrapping_mul(7).wrapping_add(3);
        p.write(p.a_mr, 0, &[stamp; 64]);
        let sge = Sge {
            addr: p.addr(p.a_mr, 0),
            length: 64,
            lkey: p.lkey(p.a_mr),
        };
        let at = 256 + (i as usize % 8) * 64;
        let raddr = p.addr(p.b_mr, at);
        bench_post_prepared(&mut p.a_sq, &t, i, sge, raddr);
        // The device consumes the WQE and writes the CQE: not counted.
        p.dev.process();
        let n = p.with_queues(false, |cq, qs| cq.poll(qs, &mut out).expect("good CQE"));
        assert_eq!((n, out[0].wr_id), (1, i), "iteration {i}: completion");
        assert_eq!(out[0].status, WcStatus::SUCCESS, "iteration {i}");
        assert_eq!(
            p.read(p.b_mr, at, 64),
            vec![stamp; 64],
            "iteration {i}: data"
        );
    }
    println!("mlx5 model: {iters} prepared RDMA WRITEs posted, rung, completed and verified");
}

//! The rxe data path through the safe API, per call, in the VM: post one
//! signaled 64-byte RDMA WRITE (one SGE), and poll a CQ holding one
//! completion, one holding four, and an empty one. `cargo xtask bench`
//! runs it under callgrind beside xtask/bench-ref/rxe/calls.c, which does
//! the same through rdma-core's libibverbs, and reads the inclusive cost
//! per call of each `bench_*` function.
//!
//! Completions are let arrive before the measured poll (the program sleeps
//! after posting), so that no measured call spins waiting for the kernel:
//! spinning counts waiting, which varies from run to run. A poll that
//! still comes back short is counted and reported (`short=`), not hidden.
//!
//! ```text
//! bench_calls [DEVICE] [PORT] [ITERATIONS]
//! ```

mod common;

use rverbs::{Access, Cq, Mtu, Qp, QpAttr, QpCaps, QpInit, QpType, Remote, SendOp, SendWr, Wc};
use std::time::Duration;

/// How long the kernel gets to complete what was posted.
const SETTLE: Duration = Duration::from_millis(20);

/// Tells the measured functions apart: functions with identical machine
/// code are merged into one symbol by rustc, and callgrind would then
/// count two scenarios as one. Each passes its own tag through
/// `black_box` (a store or two); on the rdma-core side gcc's
/// `noipa` keeps them apart.
#[inline(always)]
fn tag(n: u32) {
    std::hint::black_box(n);
}

#[inline(never)]
fn bench_post_write(qp: &mut Qp, wr: &[SendWr<'_>]) {
    tag(1);
    if let Err(e) = qp.post_send(wr) {
        panic!("post_send: {e}");
    }
}

#[inline(never)]
fn bench_poll_one(cq: &mut Cq, out: &mut [Wc; 1]) -> usize {
    tag(2);
    cq.poll(out)
}

#[inline(never)]
fn bench_poll_four(cq: &mut Cq, out: &mut [Wc; 4]) -> usize {
    tag(3);
    cq.poll(out)
}

#[inline(never)]
fn bench_poll_empty(cq: &mut Cq, out: &mut [Wc; 1]) -> usize {
    tag(4);
    cq.poll(out)
}

/// Waits (not measured) until the last write's data landed at `offset`
/// of the target (the responder's side is done; the requester's
/// completion follows with the ACK), then gives the kernel `SETTLE` more.
fn settle(dst: &rverbs::Mr, offset: usize, stamp: u8) -> rverbs::Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while dst.read_volatile_u8(offset)? != stamp && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    std::thread::sleep(SETTLE);
    Ok(())
}

/// Takes whatever a short poll left behind (not measured).
fn drain(cq: &mut Cq, want: usize) {
    // A timeout here only means the kernel lost nothing we can wait for;
    // the iteration is already counted short.
    let _ = common::wait(cq, want);
}

fn main() -> rverbs::Result<()> {
    let (ctx, port) = common::open_from_args()?;
    let iters: usize = std::env::args()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(64, None, 0)?;
    let init = QpInit {
        qp_type: QpType::Rc,
        send_cq: &cq,
        recv_cq: &cq,
        caps: QpCaps {
            max_send_wr: 16,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
        srq: None,
    };
    // One QP connected to itself: rxe answers its own GID.
    let mut qp = pd.create_qp(&init)?;
    let av = ctx.port_address(port)?;
    let me = qp.qpn();
    qp.modify(&QpAttr::init(
        port,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE,
    ))?;
    qp.modify(&QpAttr::rtr(av, Mtu::M1024, me, 0))?;
    qp.modify(&QpAttr::rts(0))?;
    let src_mr = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
    let dst_mr = pd.alloc_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    src_mr.fill(0, 64, 0x5a)?;
    let remote = |k: u64| Remote {
        addr: dst_mr.addr() + 64 * k,
        rkey: dst_mr.rkey(),
    };
    let src = [src_mr.slice(0, 64)?];
    let (mut short, mut id) = (0usize, 0u64);
    let mut one = [Wc::default(); 1];
    let mut four = [Wc::default(); 4];
    for i in 0..iters {
        // Each round's data carries its own stamp, so that its landing
        // can be seen.
        let stamp = (i % 255) as u8 + 1;
        src_mr.fill(0, 64, stamp)?;
        bench_post_write(
            &mut qp,
            &[SendWr::new(id, SendOp::Write(remote(0)), &src).signaled(true)],
        );
        settle(&dst_mr, 0, stamp)?;
        let n = bench_poll_one(&mut cq, &mut one);
        if n != 1 || !one[0].is_ok() || one[0].wr_id != id {
            short += 1;
            drain(&mut cq, 1 - n.min(1));
        }
        id += 1;
        if bench_poll_empty(&mut cq, &mut one) != 0 {
            short += 1;
        }
        let wrs: Vec<SendWr<'_>> = (0..4)
            .map(|k| SendWr::new(id + k, SendOp::Write(remote(k + 1)), &src).signaled(true))
            .collect();
        if let Err(e) = qp.post_send(&wrs) {
            panic!("post_send of four: {e}");
        }
        settle(&dst_mr, 64 * 4, stamp)?;
        let n = bench_poll_four(&mut cq, &mut four);
        if n != 4 || four.iter().any(|w| !w.is_ok()) {
            short += 1;
            drain(&mut cq, 4 - n.min(4));
        }
        id += 4;
    }
    println!("BENCH-CALLS rverbs iterations={iters} short={short}");
    Ok(())
}

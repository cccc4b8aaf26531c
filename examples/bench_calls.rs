//! The rxe data path through the safe API, per call, in the VM: post one
//! signaled 64-byte RDMA WRITE (one SGE), a list of 16 such WRITEs in one
//! call (one doorbell), one signaled 64-byte inline SEND, and one 64-byte
//! UD SEND through an address handle; poll a CQ holding one completion,
//! one holding four, one holding sixteen (with room for sixteen), and an
//! empty one; and the WRITE and the UD SEND again as prepared sends
//! (`Qp::post_prepared`). `cargo xtask bench` runs it under callgrind beside
//! xtask/bench-ref/rxe/calls.c, which does the same through rdma-core's
//! libibverbs, and reads the inclusive cost per call of each `bench_*`
//! function.
//!
//! One RC QP looped back to itself takes the WRITEs and the inline SEND
//! (its receive posted beforehand); a UD QP sends to itself through an
//! address handle of the port's own address (its receive, with room for
//! the 40-byte GRH, posted beforehand). Receives are posted and the
//! SENDs' completions taken outside the measured functions.
//!
//! Completions are let arrive before the measured poll (the program sleeps
//! after posting), so that no measured call spins waiting for the kernel:
//! spinning counts waiting, which varies from run to run. A poll that
//! still comes back short, or a completion that failed or is not the
//! expected one, is counted and reported (`short=`), not hidden.
//!
//! ```text
//! bench_calls [DEVICE] [PORT] [ITERATIONS]
//! ```

mod common;

use rverbs::{
    Access, Cq, Mtu, PreparedSend, Qp, QpAttr, QpCaps, QpInit, QpType, RecvWr, Remote, SendOp,
    SendWr, Slice, Wc, WcOpcode, GRH_LEN,
};
use std::time::{Duration, Instant};

/// How long the kernel gets to complete what was posted.
const SETTLE: Duration = Duration::from_millis(20);

/// The UD QP's Q_Key (its own and the one its sends carry).
const QKEY: u32 = 0x1111_1111;

/// Bytes of every message.
const LEN: u32 = 64;

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
fn bench_post_read(qp: &mut Qp, wr: &[SendWr<'_>]) {
    tag(11);
    if let Err(e) = qp.post_send(wr) {
        panic!("post_send READ: {e}");
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

/// Sixteen WRITEs, one call, one doorbell.
#[inline(never)]
fn bench_post_list16(qp: &mut Qp, wrs: &[SendWr<'_>]) {
    tag(5);
    if let Err(e) = qp.post_send(wrs) {
        panic!("post_send of sixteen: {e}");
    }
}

#[inline(never)]
fn bench_post_inline(qp: &mut Qp, wr: &[SendWr<'_>]) {
    tag(6);
    if let Err(e) = qp.post_send(wr) {
        panic!("post_send inline: {e}");
    }
}

#[inline(never)]
fn bench_post_ud(qp: &mut Qp, wr: &[SendWr<'_>]) {
    tag(7);
    if let Err(e) = qp.post_send(wr) {
        panic!("post_send UD: {e}");
    }
}

#[inline(never)]
fn bench_poll_16(cq: &mut Cq, out: &mut [Wc; 16]) -> usize {
    tag(8);
    cq.poll(out)
}

/// A signaled 64 B WRITE, prepared, to `raddr`.
#[inline(never)]
fn bench_post_prepared(qp: &mut Qp, p: &PreparedSend, id: u64, s: Slice<'_>, raddr: u64) {
    tag(9);
    if let Err(e) = qp.post_prepared(p, id, s, Some(raddr)) {
        panic!("post_prepared: {e}");
    }
}

/// A signaled 64 B UD SEND, prepared.
#[inline(never)]
fn bench_post_ud_prepared(qp: &mut Qp, p: &PreparedSend, id: u64, s: Slice<'_>) {
    tag(10);
    if let Err(e) = qp.post_prepared(p, id, s, None) {
        panic!("post_prepared UD: {e}");
    }
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

/// Takes (not measured, within 5 s) the two completions of a SEND to
/// this process: the send's (`send_id`) and the receive's (`recv_id`,
/// `len` bytes). Whether both came, successful, as expected.
fn send_and_receive(cq: &mut Cq, send_id: u64, recv_id: u64, len: u32) -> bool {
    let mut wcs = [Wc::default(); 2];
    let got = cq.poll_until(&mut wcs, Instant::now() + Duration::from_secs(5));
    got == 2
        && wcs.iter().all(Wc::is_ok)
        && wcs
            .iter()
            .any(|w| w.wr_id == send_id && w.opcode == WcOpcode::SEND)
        && wcs
            .iter()
            .any(|w| w.wr_id == recv_id && w.opcode == WcOpcode::RECV && w.byte_len == len)
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
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: LEN,
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
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
    ))?;
    qp.modify(&QpAttr::rtr(av, Mtu::M1024, me, 0))?;
    qp.modify(&QpAttr::rts(0))?;
    // One UD QP sending to itself through an AH of the port's address.
    let mut ud = pd.create_qp(&QpInit {
        qp_type: QpType::Ud,
        caps: QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..init
    })?;
    ud.ready_ud(port, QKEY)?;
    let ah = pd.create_ah(&av)?;
    let ud_qpn = ud.qpn();
    let src_mr = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
    let dst_mr = pd.alloc_mr(
        4096,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
    )?;
    let rcv_mr = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
    src_mr.fill(0, 64, 0x5a)?;
    let remote = |k: u64| Remote {
        addr: dst_mr.addr() + 64 * k,
        rkey: dst_mr.rkey(),
    };
    let src = [src_mr.slice(0, 64)?];
    // The RC receive at 0, the UD one (GRH, then the data) at 256.
    let rc_recv = [rcv_mr.slice(0, LEN)?];
    let ud_recv = [rcv_mr.slice(256, GRH_LEN as u32 + LEN)?];
    let mut inline_data = [0u8; LEN as usize];
    let (mut short, mut id) = (0usize, 0u64);
    let mut one = [Wc::default(); 1];
    let mut four = [Wc::default(); 4];
    let mut sixteen = [Wc::default(); 16];
    let write = qp.prepare_send(&SendWr::new(0, SendOp::Write(remote(30)), &src).signaled(true))?;
    let ud_send = ud.prepare_send(
        &SendWr::new(0, SendOp::Send, &src)
            .signaled(true)
            .to(&ah, ud_qpn, QKEY),
    )?;
    let ud_recv2 = [rcv_mr.slice(512, GRH_LEN as u32 + LEN)?];
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

        // Sixteen WRITEs (to 64 B blocks 8..24) in one call; then the
        // poll that takes their sixteen completions.
        let wrs16: [SendWr<'_>; 16] = std::array::from_fn(|k| {
            let k = k as u64;
            SendWr::new(id + k, SendOp::Write(remote(8 + k)), &src).signaled(true)
        });
        bench_post_list16(&mut qp, &wrs16);
        settle(&dst_mr, 64 * 23, stamp)?;
        let n = bench_poll_16(&mut cq, &mut sixteen);
        if n != 16
            || sixteen
                .iter()
                .zip(id..)
                .any(|(w, want)| !w.is_ok() || w.wr_id != want)
        {
            short += 1;
            drain(&mut cq, 16 - n.min(16));
        }
        id += 16;

        // A 64 B inline SEND to the RC QP itself, its receive posted
        // beforehand.
        inline_data.fill(stamp);
        let recv_id = (1 << 32) | id;
        qp.post_recv(&[RecvWr {
            wr_id: recv_id,
            sges: &rc_recv,
        }])?;
        bench_post_inline(
            &mut qp,
            &[SendWr::inline(id, SendOp::Send, &inline_data).signaled(true)],
        );
        if !send_and_receive(&mut cq, id, recv_id, LEN) || rcv_mr.read_volatile_u8(0)? != stamp {
            short += 1;
        }
        id += 1;

        // A 64 B UD SEND to the UD QP itself through the AH.
        let recv_id = (1 << 32) | id;
        ud.post_recv(&[RecvWr {
            wr_id: recv_id,
            sges: &ud_recv,
        }])?;
        bench_post_ud(
            &mut ud,
            &[SendWr::new(id, SendOp::Send, &src)
                .signaled(true)
                .to(&ah, ud_qpn, QKEY)],
        );
        if !send_and_receive(&mut cq, id, recv_id, GRH_LEN as u32 + LEN)
            || rcv_mr.read_volatile_u8(256 + GRH_LEN)? != stamp
        {
            short += 1;
        }
        id += 1;

        // The WRITE, prepared, to block 30.
        bench_post_prepared(&mut qp, &write, id, src[0], remote(30).addr);
        settle(&dst_mr, 64 * 30, stamp)?;
        let n = cq.poll(&mut one);
        if n != 1 || !one[0].is_ok() || one[0].wr_id != id {
            short += 1;
            drain(&mut cq, 1 - n.min(1));
        }
        id += 1;

        // The READ of block 0 (this round's first WRITE), into the
        // receive MR at 1024.
        let read_to = [rcv_mr.slice(1024, LEN)?];
        bench_post_read(
            &mut qp,
            &[SendWr::new(id, SendOp::Read(remote(0)), &read_to).signaled(true)],
        );
        settle(&rcv_mr, 1024, stamp)?;
        let n = cq.poll(&mut one);
        if n != 1 || !one[0].is_ok() || one[0].wr_id != id {
            short += 1;
            drain(&mut cq, 1 - n.min(1));
        }
        id += 1;

        // The UD SEND, prepared.
        let recv_id = (1 << 32) | id;
        ud.post_recv(&[RecvWr {
            wr_id: recv_id,
            sges: &ud_recv2,
        }])?;
        bench_post_ud_prepared(&mut ud, &ud_send, id, src[0]);
        if !send_and_receive(&mut cq, id, recv_id, GRH_LEN as u32 + LEN)
            || rcv_mr.read_volatile_u8(512 + GRH_LEN)? != stamp
        {
            short += 1;
        }
        id += 1;
    }
    println!("BENCH-CALLS rverbs iterations={iters} short={short}");
    Ok(())
}

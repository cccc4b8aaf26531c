//! The rxe data path's cost per operation, over rings in plain memory:
//! post one signaled single-SGE RDMA WRITE, one signaled 64-byte inline
//! SEND and one single-SGE receive, and poll a CQ that holds one completion
//! (and one that holds none). Run under callgrind; the figure is inclusive
//! instructions / calls of the `bench_*` functions, which contain only
//! provider code — the kernel's side (reading the slot, advancing the
//! consumer index, writing a CQE) happens between the calls and is not
//! counted.
//!
//! ```text
//! cargo build --release -p provider-rxe --example bench_ring
//! valgrind --tool=callgrind --callgrind-out-file=cg.rxe \
//!     target/release/examples/bench_ring 1000
//! callgrind_annotate --inclusive=yes cg.rxe | grep bench_post
//! ```
//! Not a test: it asserts only that every WQE landed where the kernel reads
//! it, so that a broken build cannot report a cheap-looking number.

use core::ptr::NonNull;
use provider_rxe::wqe::{recv, send, wc, SGE_SIZE, WC_SIZE};
use provider_rxe::{
    AhAddr, CompletionQueue, Queue, RecvQueue, Remote, SendOp, SendQueue, SendWr, Sge, Wc, WcStatus,
};
use uverbs_abi::rxe::offsets::queue_buf;

/// Requests over plain SGEs, on a connected QP (no address handles).
type Wr<'a> = SendWr<'a, Sge, AhAddr>;

/// Slots per ring (the loop never fills it: each post is consumed at once).
const SLOTS: u32 = 64;
/// Inline bytes of the SEND (and the QP's `max_inline_data`).
const INLINE: usize = 64;
/// The QP's `max_send_sge` / `max_recv_sge`.
const MAX_SGE: u32 = 4;

/// A ring laid out as the kernel's `struct rxe_queue_buf` with `SLOTS`
/// slots of `1 << log2` bytes, in 8-aligned heap memory, with a second
/// view of it that plays the kernel.
struct Ring {
    buf: Vec<u64>,
    log2: u32,
}

impl Ring {
    /// A ring whose slots hold `need` bytes.
    fn new(need: usize) -> Ring {
        let log2 = need.next_power_of_two().trailing_zeros();
        let bytes = queue_buf::DATA + ((SLOTS as usize) << log2);
        let mut r = Ring {
            buf: vec![0u64; bytes.div_ceil(8)],
            log2,
        };
        r.set_u32(queue_buf::LOG2_ELEM_SIZE, log2);
        r.set_u32(queue_buf::INDEX_MASK, SLOTS - 1);
        r
    }

    fn set_u32(&mut self, off: usize, v: u32) {
        assert!(off % 4 == 0 && off + 4 <= self.buf.len() * 8);
        let base = self.buf.as_mut_ptr().cast::<u8>();
        // SAFETY: off..off + 4 is inside the buffer and 4-aligned (checked
        // above; the buffer is 8-aligned), and &mut self excludes any other
        // access.
        unsafe { base.add(off).cast::<u32>().write(v) }
    }

    /// A view of the ring for a queue with `min_elem_size`-byte entries.
    fn queue(&mut self, min_elem_size: usize) -> Queue {
        let len = self.buf.len() * 8;
        let base = NonNull::new(self.buf.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: the buffer is 8-aligned, len bytes long, readable and
        // writable, and outlives every Queue made of it (main keeps the
        // Ring until the end).
        unsafe { Queue::new(base, len, min_elem_size) }.expect("ring geometry")
    }
}

/// The kernel's consumer: checks the slot at the consumer index with
/// `check`, then advances the index (release, as the kernel does).
fn kernel_consume(k: &Queue, check: impl FnOnce(&[u8])) {
    let cons = k.load_consumer();
    assert_ne!(cons, k.load_producer(), "nothing was posted");
    let mut slot = vec![0u8; k.elem_size()];
    // SAFETY: slot(cons) is elem_size() bytes inside the mapping; the
    // acquire load of the producer above ordered this read after the
    // provider's stores.
    unsafe { core::ptr::copy_nonoverlapping(k.slot(cons), slot.as_mut_ptr(), slot.len()) };
    check(&slot);
    k.store_consumer(k.next(cons));
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

fn get_u64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

/// Posts one signaled single-SGE RDMA WRITE.
#[inline(never)]
fn bench_post_write(sq: &mut SendQueue, wr: &Wr<'_>) {
    // SAFETY: the SGE names a buffer main keeps alive; nothing reads it
    // (the "kernel" here only looks at the WQE).
    if let Err(e) = unsafe { sq.post(wr) } {
        panic!("post failed: {e:?}");
    }
}

/// Posts one signaled SEND with a 64-byte inline payload.
#[inline(never)]
fn bench_post_send(sq: &mut SendQueue, wr: &Wr<'_>) {
    // SAFETY: an inline payload is copied from a live slice; no SGEs.
    if let Err(e) = unsafe { sq.post(wr) } {
        panic!("post failed: {e:?}");
    }
}

/// Posts one single-SGE receive.
#[inline(never)]
fn bench_post_recv(rq: &mut RecvQueue, wr_id: u64, sges: &[Sge]) {
    // SAFETY: as for bench_post_write.
    if let Err(e) = unsafe { rq.post(wr_id, sges) } {
        panic!("post failed: {e:?}");
    }
}

/// Polls a CQ that holds exactly one completion.
#[inline(never)]
fn bench_poll_one(cq: &mut CompletionQueue, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

/// Polls a CQ that holds none (for one entry, which also keeps the linker
/// from folding this function into `bench_poll_one`).
#[inline(never)]
fn bench_poll_empty(cq: &mut CompletionQueue, out: &mut [Wc]) -> usize {
    cq.poll(&mut out[..1])
}

/// The kernel's producer: writes one successful completion of `wr_id` at
/// the producer index and publishes it (release).
fn kernel_complete(k: &Queue, wr_id: u64) {
    let prod = k.load_producer();
    let slot = k.slot(prod);
    // SAFETY: slot(prod) is elem_size() >= WC_SIZE bytes inside the ring,
    // which the provider reads only after the release store below.
    unsafe {
        core::ptr::write_bytes(slot, 0, WC_SIZE);
        slot.add(wc::WR_ID).cast::<u64>().write_unaligned(wr_id);
        slot.add(wc::BYTE_LEN).cast::<u32>().write_unaligned(64);
    }
    k.store_producer(k.next(prod));
}

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);

    let sq_need = send::PAYLOAD + (MAX_SGE as usize * SGE_SIZE).max(INLINE);
    let mut sq_ring = Ring::new(sq_need);
    let mut sq = SendQueue::new(
        sq_ring.queue(sq_need),
        MAX_SGE,
        INLINE as u32,
        rverbs_types::QpType::Rc,
    )
    .expect("SQ capabilities");
    let sq_kernel = sq_ring.queue(sq_need);
    let rq_need = recv::SGES + MAX_SGE as usize * SGE_SIZE;
    let mut rq_ring = Ring::new(rq_need);
    let mut rq = RecvQueue::new(rq_ring.queue(rq_need), MAX_SGE).expect("RQ capabilities");
    let rq_kernel = rq_ring.queue(rq_need);

    let local = [0u8; 64];
    let sge = [Sge {
        addr: local.as_ptr() as u64,
        length: local.len() as u32,
        lkey: 0x1234,
    }];
    let remote = Remote {
        addr: 0x7f00_0000_1000,
        rkey: 0x5678,
    };
    for i in 0..iters {
        let payload = [(i as u8).wrapping_mul(13).wrapping_add(1); INLINE];

        let write = Wr::new(3 * i, SendOp::Write(remote), &sge);
        bench_post_write(&mut sq, &write);
        kernel_consume(&sq_kernel, |w| {
            assert_eq!(get_u64(w, send::WR_ID), 3 * i, "iteration {i}: WRITE");
            assert_eq!(get_u64(w, send::RDMA_REMOTE_ADDR), remote.addr);
            assert_eq!(get_u32(w, send::DMA_LENGTH), 64);
            assert_eq!(get_u64(w, send::PAYLOAD), sge[0].addr);
        });

        let send_wr = Wr::inline(3 * i + 1, SendOp::Send, &payload);
        bench_post_send(&mut sq, &send_wr);
        kernel_consume(&sq_kernel, |w| {
            assert_eq!(get_u64(w, send::WR_ID), 3 * i + 1, "iteration {i}: SEND");
            assert_eq!(get_u32(w, send::DMA_LENGTH), INLINE as u32);
            assert_eq!(&w[send::PAYLOAD..send::PAYLOAD + INLINE], &payload);
        });

        bench_post_recv(&mut rq, 3 * i + 2, &sge);
        kernel_consume(&rq_kernel, |w| {
            assert_eq!(get_u64(w, recv::WR_ID), 3 * i + 2, "iteration {i}: RECV");
            assert_eq!(get_u32(w, recv::DMA_NUM_SGE), 1);
            assert_eq!(get_u64(w, recv::SGES), sge[0].addr);
        });
    }
    let mut cq_ring = Ring::new(WC_SIZE);
    let mut cq = CompletionQueue::new(cq_ring.queue(WC_SIZE)).expect("WC-sized slots");
    let cq_kernel = cq_ring.queue(WC_SIZE);
    let mut out = [Wc::default(); 4];
    for i in 0..iters {
        kernel_complete(&cq_kernel, i);
        assert_eq!(bench_poll_one(&mut cq, &mut out), 1, "iteration {i}: poll");
        assert_eq!((out[0].wr_id, out[0].status), (i, WcStatus::SUCCESS));
        assert_eq!(
            bench_poll_empty(&mut cq, &mut out),
            0,
            "iteration {i}: empty"
        );
    }
    println!(
        "rxe ring ({} and {} byte slots): {iters} WRITEs, 64-byte inline SENDs and receives posted and checked, {iters} completions polled",
        1u32 << sq_ring.log2,
        1u32 << rq_ring.log2
    );
}

//! The mlx5 CQE decoder: a `CompletionQueue` over a ring whose CQEs come
//! from the fuzzer, polled against the records of a QP that has requests
//! outstanding on both queues (NOPs on its SQ, receives on its RQ), so
//! that forged `wqe_counter`s, QP numbers, opcodes, syndromes and owner
//! bits all reach the decoder. Nothing may be read outside the ring (the
//! address sanitizer watches), nothing may panic, and no request may
//! complete twice.
#![no_main]

use core::ptr::NonNull;
use libfuzzer_sys::fuzz_target;
use provider_mlx5::{
    CompletionQueue, CqConfig, QpQueues, QpType, RecvQueue, RecvTarget, SendQueue, Sge, SqConfig,
    Wc,
};
use std::collections::HashSet;

const QPN: u32 = 0x11;
const NCQE: u32 = 16;
const WQE_CNT: u32 = 64;

/// An 8-byte-granular buffer of `len` bytes aligned to 64.
struct Buf(Vec<u64>);

impl Buf {
    fn new(len: usize) -> Buf {
        Buf(vec![0u64; len.div_ceil(8) + 8])
    }
    /// The first 64-aligned byte.
    fn ptr(&mut self) -> NonNull<u8> {
        let p = self.0.as_mut_ptr().cast::<u8>();
        let off = p.align_offset(64);
        NonNull::new(p.wrapping_add(off)).unwrap()
    }
}

fuzz_target!(|data: &[u8]| {
    let mut cq_buf = Buf::new((NCQE * 64) as usize);
    let mut sq_buf = Buf::new((WQE_CNT * 64) as usize);
    let mut rq_buf = Buf::new((WQE_CNT * 16) as usize);
    let mut dbrecs = Buf::new(64);
    let mut uar = Buf::new(4096);
    let db = dbrecs.ptr();
    let cfg = CqConfig {
        ncqe: NCQE,
        cqe_size: 64,
        cqn: 1,
    };
    // SAFETY: every buffer outlives the queues (declared first, dropped
    // last), is aligned as the constructors check, and is used by nothing
    // else; the doorbell records are separate 8-byte words of one buffer.
    let (mut cq, mut sq, mut rq) = unsafe {
        let cq = CompletionQueue::new(
            cq_buf.ptr(),
            (NCQE * 64) as usize,
            db.cast(),
            uar.ptr(),
            cfg,
        )
        .unwrap();
        let sq = SendQueue::new(
            sq_buf.ptr(),
            (WQE_CNT * 64) as usize,
            NonNull::new(db.as_ptr().add(8).cast()).unwrap(),
            NonNull::new(uar.ptr().as_ptr().add(0x800)).unwrap(),
            SqConfig {
                qpn: QPN,
                qp_type: QpType::Rc,
                wqe_cnt: WQE_CNT,
                max_wr: WQE_CNT,
                max_sge: 1,
                max_inline: 0,
                bf_size: 256,
                blueflame: false,
                prefer_blueflame: false,
                sig_all: false,
            },
        )
        .unwrap();
        let rq = RecvQueue::new(
            rq_buf.ptr(),
            (WQE_CNT * 16) as usize,
            NonNull::new(db.as_ptr().add(16).cast()).unwrap(),
            WQE_CNT,
            4,
            1,
        )
        .unwrap();
        (cq, sq, rq)
    };
    // Requests outstanding on both queues, every other one signaled.
    for i in 0..8u64 {
        sq.post_nop(i, i % 2 == 0).unwrap();
        let sge = [Sge {
            addr: 0x1000 + i * 64,
            length: 64,
            lkey: 7,
        }];
        // SAFETY: nothing ever reads or writes the memory the SGE names:
        // there is no device here.
        unsafe { rq.post(100 + i, &sge) }.unwrap();
    }
    sq.ring();
    rq.ring();
    let (send, recv) = (sq.shared_records(), rq.shared_records());
    let mut qs = QpQueues {
        qpn: QPN,
        sq: Some(&send),
        rq: Some(RecvTarget::Rq(&recv)),
    };
    // The fuzzer's bytes become the ring, a CQE at a time, in rounds: each
    // round writes up to NCQE entries then polls them.
    let mut seen = HashSet::new();
    let mut out = [Wc::default(); 4];
    for round in data.chunks((NCQE * 64) as usize) {
        let ring = cq_buf.ptr().as_ptr();
        // SAFETY: round.len() <= NCQE * 64, the ring's length.
        unsafe { core::ptr::copy_nonoverlapping(round.as_ptr(), ring, round.len()) };
        for _ in 0..NCQE {
            match cq.poll(&mut qs, &mut out) {
                Ok(0) => break,
                Ok(n) => {
                    for w in &out[..n] {
                        // A receive completes once; sends may complete
                        // several earlier unsignaled ones together, but
                        // never report one wr_id twice.
                        assert!(seen.insert(w.wr_id), "wr_id {} completed twice", w.wr_id);
                    }
                }
                Err(_) => {}
            }
        }
    }
});

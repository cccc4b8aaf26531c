//! The completion queue: `ib_uverbs_wc` entries the kernel produces.

use crate::queue::Queue;
use crate::wqe::{get_u16, get_u32, get_u64, wc, WC_SIZE};
use rverbs_types::{Wc, WcFlags, WcOpcode, WcStatus};

/// A completion as the kernel wrote it (`struct ib_uverbs_wc`: statuses,
/// opcodes and flags are the kernel's own numbers, kept when unknown).
#[inline(always)]
fn parse(b: &[u8; WC_SIZE]) -> Wc {
    let flags = WcFlags::from_bits_retain(get_u32(b, wc::WC_FLAGS));
    Wc {
        wr_id: get_u64(b, wc::WR_ID),
        status: WcStatus(get_u32(b, wc::STATUS)),
        opcode: WcOpcode(get_u32(b, wc::OPCODE)),
        vendor_err: get_u32(b, wc::VENDOR_ERR),
        byte_len: get_u32(b, wc::BYTE_LEN),
        // The kernel stores imm_data as it came off the wire (big endian).
        imm_data: flags
            .contains(WcFlags::WITH_IMM)
            .then(|| u32::from_be(get_u32(b, wc::EX))),
        // The same word, in host order, is the invalidated rkey.
        invalidated_rkey: flags
            .contains(WcFlags::WITH_INVALIDATE)
            .then(|| get_u32(b, wc::EX)),
        qp_num: get_u32(b, wc::QP_NUM),
        src_qp: get_u32(b, wc::SRC_QP),
        flags,
        pkey_index: get_u16(b, wc::PKEY_INDEX),
        slid: get_u16(b, wc::SLID),
        sl: b[wc::SL],
        dlid_path_bits: b[wc::DLID_PATH_BITS],
    }
}

/// The consumer side of an rxe CQ.
#[derive(Debug)]
pub struct CompletionQueue {
    q: Queue,
    cons: u32,
}

impl CompletionQueue {
    /// Wraps a validated CQ ring (its slots must hold an `ib_uverbs_wc`;
    /// pass `WC_SIZE` as `min_elem_size` to [`Queue::new`]; a ring with
    /// smaller slots yields no completions).
    pub fn new(q: Queue) -> CompletionQueue {
        debug_assert!(q.elem_size() >= WC_SIZE);
        let cons = q.load_consumer();
        CompletionQueue { q, cons }
    }

    /// Slots in the ring (capacity + 1).
    pub fn slots(&self) -> u32 {
        self.q.slots()
    }

    /// Copies up to `out.len()` completions out of the ring, oldest first,
    /// and returns how many. Never blocks, never makes a system call.
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        // One acquire load of the producer covers every slot before it.
        let prod = self.q.load_producer();
        let mut n = 0;
        while n < out.len() {
            match self.next(prod) {
                Some(r) => out[n] = r,
                None => break,
            }
            n += 1;
        }
        if n > 0 {
            // Hand the slots back: the kernel may now overwrite them.
            self.commit();
        }
        n
    }

    /// Copies out the oldest completion, if any, without handing its slot
    /// back: call [`CompletionQueue::commit`] after a batch. Lets the caller
    /// convert entries in place with no intermediate buffer.
    #[inline]
    pub fn next(&mut self, prod: u32) -> Option<Wc> {
        if self.cons == prod {
            return None;
        }
        // The caller's acquire load of `prod` (load_producer) ordered this
        // read after the kernel's write. None only if the ring was validated
        // for entries smaller than a WC (see new()): then nothing is read.
        let b = self.q.read_slot::<WC_SIZE>(self.cons)?;
        self.cons = self.q.next(self.cons);
        Some(parse(&b))
    }

    /// Acquire-loads the producer index, for [`CompletionQueue::next`].
    #[inline]
    pub fn load_producer(&self) -> u32 {
        self.q.load_producer()
    }

    /// Hands every slot read by [`CompletionQueue::next`] back to the kernel.
    #[inline]
    pub fn commit(&mut self) {
        self.q.store_consumer(self.cons);
    }

    /// True if a completion is waiting (an acquire load, no copy).
    pub fn has_completion(&self) -> bool {
        self.cons != self.q.load_producer()
    }
}

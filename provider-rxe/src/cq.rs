//! The completion queue: `ib_uverbs_wc` entries the kernel produces.

use crate::queue::{Queue, ReadRing};
use crate::wqe::{get_u16, get_u32, get_u64, wc, WC_SIZE};
use crate::RingError;
use rverbs_types::{Wc, WcFlags, WcOpcode, WcStatus};

/// A completion as the kernel wrote it: a [`Wc`] has the layout of
/// `struct ib_uverbs_wc`, so this is a copy (statuses, opcodes and flags
/// are the kernel's own numbers, kept when unknown).
#[inline(always)]
fn parse(b: &[u8; WC_SIZE]) -> Wc {
    Wc::from_uverbs(b)
}

/// One completion as the kernel wrote it, copied out of its slot but not
/// decoded: each accessor decodes only its own member, for a poller that
/// wants a few (the extended-CQ style, `ibv_wc_read_*`). [`RawWc::wc`]
/// decodes them all, as [`CompletionQueue::poll`] does.
#[derive(Clone, Copy)]
pub struct RawWc([u8; WC_SIZE]);

#[allow(missing_docs)] // each accessor is the ib_uverbs_wc member of its name
impl RawWc {
    #[inline(always)]
    pub fn wr_id(&self) -> u64 {
        get_u64(&self.0, wc::WR_ID)
    }
    #[inline(always)]
    pub fn status(&self) -> WcStatus {
        WcStatus(get_u32(&self.0, wc::STATUS))
    }
    #[inline(always)]
    pub fn opcode(&self) -> WcOpcode {
        WcOpcode(get_u32(&self.0, wc::OPCODE))
    }
    #[inline(always)]
    pub fn vendor_err(&self) -> u32 {
        get_u32(&self.0, wc::VENDOR_ERR)
    }
    #[inline(always)]
    pub fn byte_len(&self) -> u32 {
        get_u32(&self.0, wc::BYTE_LEN)
    }
    #[inline(always)]
    pub fn flags(&self) -> WcFlags {
        WcFlags::from_bits_retain(get_u32(&self.0, wc::WC_FLAGS))
    }
    /// The immediate in host order, with [`WcFlags::WITH_IMM`].
    #[inline(always)]
    pub fn imm_data(&self) -> Option<u32> {
        self.flags()
            .contains(WcFlags::WITH_IMM)
            .then(|| u32::from_be(get_u32(&self.0, wc::EX)))
    }
    /// The invalidated rkey, with [`WcFlags::WITH_INVALIDATE`].
    #[inline(always)]
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.flags()
            .contains(WcFlags::WITH_INVALIDATE)
            .then(|| get_u32(&self.0, wc::EX))
    }
    #[inline(always)]
    pub fn qp_num(&self) -> u32 {
        get_u32(&self.0, wc::QP_NUM)
    }
    #[inline(always)]
    pub fn src_qp(&self) -> u32 {
        get_u32(&self.0, wc::SRC_QP)
    }
    #[inline(always)]
    pub fn pkey_index(&self) -> u16 {
        get_u16(&self.0, wc::PKEY_INDEX)
    }
    #[inline(always)]
    pub fn slid(&self) -> u16 {
        get_u16(&self.0, wc::SLID)
    }
    #[inline(always)]
    pub fn sl(&self) -> u8 {
        self.0[wc::SL]
    }
    #[inline(always)]
    pub fn dlid_path_bits(&self) -> u8 {
        self.0[wc::DLID_PATH_BITS]
    }
    /// Every member, decoded.
    #[inline]
    pub fn wc(&self) -> Wc {
        parse(&self.0)
    }
}

impl core::fmt::Debug for RawWc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.wc().fmt(f)
    }
}

/// The consumer side of an rxe CQ.
#[derive(Debug)]
pub struct CompletionQueue {
    q: ReadRing<WC_SIZE>,
    cons: u32,
}

/// The kernel's producer index as [`CompletionQueue::load_producer`]
/// read it: acquire-loaded and masked, so that [`CompletionQueue::next`]
/// stops at it (a raw word, unmasked or made up, could run the consumer
/// past it and round the ring, handing back stale entries without end).
/// Only `load_producer` makes one:
///
/// ```compile_fail
/// let made_up = provider_rxe::Producer(8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Producer(u32);

impl CompletionQueue {
    /// Wraps a validated CQ ring, whose slots must hold an `ib_uverbs_wc`
    /// (`WC_SIZE` bytes; a ring of smaller slots is refused).
    pub fn new(q: Queue) -> Result<CompletionQueue, RingError> {
        let q = ReadRing::new(q).map_err(|q| RingError {
            elem_size: q.elem_size(),
            need: WC_SIZE,
        })?;
        let cons = q.queue().load_consumer();
        Ok(CompletionQueue { q, cons })
    }

    /// Slots in the ring (capacity + 1).
    pub fn slots(&self) -> u32 {
        self.q.queue().slots()
    }

    /// Copies up to `out.len()` completions out of the ring, oldest first,
    /// and returns how many. Never blocks, never makes a system call.
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        // One acquire load of the producer covers every slot before it.
        let prod = self.load_producer();
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
    pub fn next(&mut self, prod: Producer) -> Option<Wc> {
        if self.cons == prod.0 {
            return None;
        }
        // The caller's acquire load of `prod` (load_producer) ordered this
        // read after the kernel's write.
        let b = self.q.read(self.cons);
        self.cons = self.q.queue().next(self.cons);
        Some(parse(&b))
    }

    /// [`CompletionQueue::next`], undecoded: the entry's bytes, for a
    /// poller that reads only some members ([`RawWc`]).
    #[inline]
    pub fn next_raw(&mut self, prod: Producer) -> Option<RawWc> {
        if self.cons == prod.0 {
            return None;
        }
        // As in next(): ordered after the caller's acquire load of `prod`.
        let b = self.q.read(self.cons);
        self.cons = self.q.queue().next(self.cons);
        Some(RawWc(b))
    }

    /// Acquire-loads the producer index, for [`CompletionQueue::next`].
    #[inline]
    pub fn load_producer(&self) -> Producer {
        Producer(self.q.queue().load_producer())
    }

    /// Hands every slot read by [`CompletionQueue::next`] back to the kernel.
    #[inline]
    pub fn commit(&mut self) {
        self.q.queue().store_consumer(self.cons);
    }

    /// True if a completion is waiting (an acquire load, no copy).
    pub fn has_completion(&self) -> bool {
        self.cons != self.q.queue().load_producer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_accessors_read_what_parse_reads() {
        let mut b = [0u8; WC_SIZE];
        let put =
            |b: &mut [u8; WC_SIZE], off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(&mut b, wc::WR_ID, &0x1122_3344_5566_7788u64.to_ne_bytes());
        put(&mut b, wc::STATUS, &10u32.to_ne_bytes());
        put(&mut b, wc::OPCODE, &128u32.to_ne_bytes());
        put(&mut b, wc::BYTE_LEN, &512u32.to_ne_bytes());
        put(&mut b, wc::EX, &0xabcd_0001u32.to_ne_bytes());
        put(&mut b, wc::QP_NUM, &17u32.to_ne_bytes());
        put(&mut b, wc::SRC_QP, &18u32.to_ne_bytes());
        let flags = WcFlags::WITH_INVALIDATE | WcFlags::GRH;
        put(&mut b, wc::WC_FLAGS, &flags.bits().to_ne_bytes());
        put(&mut b, wc::SLID, &3u16.to_ne_bytes());
        b[wc::SL] = 4;
        b[wc::DLID_PATH_BITS] = 5;
        let r = RawWc(b);
        let w = r.wc();
        assert_eq!(r.wr_id(), w.wr_id);
        assert_eq!((r.status(), r.opcode()), (w.status, w.opcode));
        assert_eq!(r.byte_len(), 512);
        assert_eq!(r.invalidated_rkey(), Some(0xabcd_0001));
        assert_eq!(w.invalidated_rkey(), Some(0xabcd_0001));
        assert_eq!((r.imm_data(), w.imm_data()), (None, None));
        assert_eq!((r.qp_num(), r.src_qp()), (17, 18));
        assert_eq!((r.slid(), r.sl(), r.dlid_path_bits()), (3, 4, 5));
        assert_eq!((w.slid, w.sl, w.dlid_path_bits), (3, 4, 5));
        assert_eq!(r.flags(), flags);
    }
}

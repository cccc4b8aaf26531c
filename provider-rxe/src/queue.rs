//! The ring the rxe kernel driver shares with userspace (`struct
//! rxe_queue_buf` in `rdma_user_rxe.h`).
//!
//! Index convention (the kernel's `rxe_queue.h`, and rdma-core's): indices are
//! stored **masked** (`0..=index_mask`), one slot is always left empty, so the
//! ring is empty when `producer == consumer` and full when
//! `(producer + 1) & mask == consumer`. Each side owns one index: it writes
//! that index with a release store after touching the slot, and reads the
//! other side's index with an acquire load before touching a slot.
//!
//! Trust: the header lives in memory the kernel and any thread of this
//! process can write. Its `log2_elem_size` and `index_mask` are read **once**
//! here, checked against the mapping's length, and never re-read (the kernel
//! also keeps private copies). Every index read from the page is masked
//! before it forms an address, so a corrupted index cannot move an access out
//! of the mapping.

#![allow(unsafe_code)] // the shared mapping: header atomics, slot reads, handing out slot views

use crate::slot::{SlotMut, SLOT_ALIGN};
use core::mem::offset_of;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use uverbs_abi::rxe::{RxeQueueBuf, RXE_QUEUE_DATA_OFFSET};

/// Byte offset of `log2_elem_size` in `struct rxe_queue_buf`.
pub const LOG2_ELEM_SIZE_OFFSET: usize = offset_of!(RxeQueueBuf, log2_elem_size);
/// Byte offset of `index_mask`.
pub const INDEX_MASK_OFFSET: usize = offset_of!(RxeQueueBuf, index_mask);
/// Byte offset of `producer_index` (its own cache line).
pub const PRODUCER_OFFSET: usize = offset_of!(RxeQueueBuf, producer_index);
/// Byte offset of `consumer_index` (its own cache line).
pub const CONSUMER_OFFSET: usize = offset_of!(RxeQueueBuf, consumer_index);
/// Byte offset of `data[]`, the first slot (`sizeof(struct rxe_queue_buf)`).
pub const DATA_OFFSET: usize = RXE_QUEUE_DATA_OFFSET;

// Slots start SLOT_ALIGN-aligned when the base is (Queue::new checks) and
// elem_size is a power of two >= SLOT_ALIGN (SlotRing::new checks).
const _: () = assert!(DATA_OFFSET % SLOT_ALIGN == 0);

/// Why a mapping cannot be used as an rxe queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// The mapping's base is not 8-byte aligned.
    Misaligned,
    /// The mapping is shorter than the header.
    TooShort {
        /// The mapping's length.
        len: usize,
    },
    /// `index_mask + 1` is not a power of two.
    BadMask {
        /// The value read.
        index_mask: u32,
    },
    /// The element size is smaller than the caller needs, or absurd.
    BadElemSize {
        /// The value read.
        log2_elem_size: u32,
    },
    /// The slots do not fit in the mapping.
    SlotsOutsideMapping {
        /// Bytes the slots need, header included.
        need: usize,
        /// The mapping's length.
        len: usize,
    },
}

impl core::fmt::Display for QueueError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            QueueError::Misaligned => write!(f, "rxe queue mapping is not 8-byte aligned"),
            QueueError::TooShort { len } => write!(
                f,
                "rxe queue mapping of {len} bytes is shorter than its header"
            ),
            QueueError::BadMask { index_mask } => {
                write!(f, "rxe queue index_mask {index_mask:#x} is not 2^n - 1")
            }
            QueueError::BadElemSize { log2_elem_size } => {
                write!(
                    f,
                    "rxe queue log2_elem_size {log2_elem_size} is out of range"
                )
            }
            QueueError::SlotsOutsideMapping { need, len } => {
                write!(
                    f,
                    "rxe queue slots need {need} bytes but the mapping has {len}"
                )
            }
        }
    }
}

impl std::error::Error for QueueError {}

/// A view of one rxe queue mapping: geometry checked once, indices masked.
///
/// `Queue` does not own the mapping; the caller keeps it alive (see
/// [`Queue::new`]). It is `Send` (the mapping is process memory) but the
/// methods that publish an index take `&mut self` on the owning ring types.
#[derive(Debug)]
pub struct Queue {
    base: NonNull<u8>,
    len: usize,
    mask: u32,
    log2_elem_size: u32,
}

// SAFETY: Queue is a pointer to a shared mapping whose contents are accessed
// only through atomics and raw copies; moving it to another thread is no
// different from moving the mapping's address.
unsafe impl Send for Queue {}

impl Queue {
    /// Validates the header of the queue mapped at `base..base + len`.
    ///
    /// `min_elem_size` is the smallest element the caller will read or write
    /// (e.g. the 48-byte `ib_uverbs_wc` for a CQ).
    ///
    /// # Safety
    /// `base` must point to a readable and writable mapping of at least `len`
    /// bytes that stays mapped for as long as the
    /// returned `Queue` (and anything built on it) is used.
    pub unsafe fn new(
        base: NonNull<u8>,
        len: usize,
        min_elem_size: usize,
    ) -> Result<Queue, QueueError> {
        if base.as_ptr() as usize % 8 != 0 {
            return Err(QueueError::Misaligned);
        }
        if len < DATA_OFFSET {
            return Err(QueueError::TooShort { len });
        }
        // A view with no slots yet, to read the header through word().
        let header = Queue {
            base,
            len,
            mask: 0,
            log2_elem_size: 0,
        };
        // Relaxed loads: the values are checked below, not trusted, and
        // read only here.
        let log2_elem_size = header
            .word::<LOG2_ELEM_SIZE_OFFSET>()
            .load(Ordering::Relaxed);
        let mask = header.word::<INDEX_MASK_OFFSET>().load(Ordering::Relaxed);
        if mask == u32::MAX || !(mask + 1).is_power_of_two() {
            return Err(QueueError::BadMask { index_mask: mask });
        }
        if log2_elem_size > 20 || (1usize << log2_elem_size) < min_elem_size {
            return Err(QueueError::BadElemSize { log2_elem_size });
        }
        // In u64, where (mask + 1) << log2_elem_size (at most 2^52) cannot
        // overflow: a 32-bit usize could, and `checked_shl` does not see
        // bits shifted out (0x8000_0000 << 6 is 0 there).
        let need = ((u64::from(mask) + 1) << log2_elem_size) + DATA_OFFSET as u64;
        if need > len as u64 {
            let need = usize::try_from(need).unwrap_or(usize::MAX);
            return Err(QueueError::SlotsOutsideMapping { need, len });
        }
        Ok(Queue {
            base,
            len,
            mask,
            log2_elem_size,
        })
    }

    /// The number of slots (one of which always stays empty).
    pub fn slots(&self) -> u32 {
        self.mask + 1
    }

    /// The index mask (`slots - 1`).
    pub fn mask(&self) -> u32 {
        self.mask
    }

    /// The size of one slot in bytes.
    pub fn elem_size(&self) -> usize {
        1 << self.log2_elem_size
    }

    /// The length of the mapping.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a validated queue has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The header word at `OFF`, as the atomic both sides access it with.
    #[inline(always)]
    fn word<const OFF: usize>(&self) -> &AtomicU32 {
        const { assert!(OFF % 4 == 0 && OFF + 4 <= DATA_OFFSET) };
        // The word lies inside the mapping (OFF + 4 <= DATA_OFFSET <= len:
        // the assertion above, and Queue::new checks len) and is 4-aligned
        // from an 8-aligned base; no Rust reference to it exists but these
        // atomics, which match the kernel's atomic accesses.
        // SAFETY: in bounds, aligned, alive for &self (Queue::new's contract).
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(OFF).cast()) }
    }

    /// Acquire-loads the producer index, masked.
    #[inline]
    pub fn load_producer(&self) -> u32 {
        self.word::<PRODUCER_OFFSET>().load(Ordering::Acquire) & self.mask
    }

    /// Acquire-loads the consumer index, masked.
    #[inline]
    pub fn load_consumer(&self) -> u32 {
        self.word::<CONSUMER_OFFSET>().load(Ordering::Acquire) & self.mask
    }

    /// Release-stores the producer index (after the slot is written).
    #[inline]
    pub fn store_producer(&self, v: u32) {
        self.word::<PRODUCER_OFFSET>()
            .store(v & self.mask, Ordering::Release)
    }

    /// Release-stores the consumer index (after the slot is read).
    #[inline]
    pub fn store_consumer(&self, v: u32) {
        self.word::<CONSUMER_OFFSET>()
            .store(v & self.mask, Ordering::Release)
    }

    /// The next index after `i`.
    #[inline]
    pub fn next(&self, i: u32) -> u32 {
        i.wrapping_add(1) & self.mask
    }

    /// The address of slot `i` (masked): `elem_size()` bytes inside the
    /// mapping.
    #[inline]
    pub fn slot(&self, i: u32) -> *mut u8 {
        self.slot_ptr(i).as_ptr()
    }

    #[inline(always)]
    fn slot_ptr(&self, i: u32) -> NonNull<u8> {
        let off = DATA_OFFSET + (((i & self.mask) as usize) << self.log2_elem_size);
        // SAFETY: (i & mask) <= mask, and Queue::new checked that
        // DATA_OFFSET + (mask + 1) << log2_elem_size <= len, so the slot and
        // its elem_size bytes are inside the mapping: the offset stays in
        // the allocation, and an address inside a mapping is not null.
        unsafe { NonNull::new_unchecked(self.base.as_ptr().add(off)) }
    }

    /// Copies the first `N` bytes of slot `i` (masked) out of the ring, if
    /// the slots hold `N` bytes.
    ///
    /// The caller orders this after the other side's writes (an acquire
    /// load of its index).
    #[inline(always)]
    pub fn read_slot<const N: usize>(&self, i: u32) -> Option<[u8; N]> {
        if self.elem_size() < N {
            return None;
        }
        let mut out = [0u8; N];
        // SAFETY: slot_ptr(i) is elem_size() >= N bytes inside the mapping
        // (see slot_ptr()), readable under Queue::new's contract; `out` is
        // a local array, so the two do not overlap. A byte copy reads
        // whatever the kernel wrote; every value of u8 is valid.
        unsafe { core::ptr::copy_nonoverlapping(self.slot_ptr(i).as_ptr(), out.as_mut_ptr(), N) };
        Some(out)
    }
}

/// A [`Queue`] the producer writes, whose slots were checked, once, to
/// hold `N` bytes (the fixed part of its entries, e.g. `sizeof(struct
/// rxe_send_wqe)`): the slots it hands out need no further check of their
/// size, and stores within their first `N` bytes at constant offsets none
/// at all (see [`SlotMut`]).
#[derive(Debug)]
pub(crate) struct SlotRing<const N: usize> {
    q: Queue,
    /// `elem_size - N`.
    spare: usize,
}

impl<const N: usize> SlotRing<N> {
    /// Checks that `q`'s slots hold `N` bytes (and at least 8); gives `q`
    /// back if they do not.
    pub(crate) fn new(q: Queue) -> Result<SlotRing<N>, Queue> {
        let len = q.elem_size();
        if len < N || len < SLOT_ALIGN {
            return Err(q);
        }
        Ok(SlotRing { spare: len - N, q })
    }

    /// The queue.
    #[inline(always)]
    pub(crate) fn queue(&self) -> &Queue {
        &self.q
    }

    /// Slot `i` (masked), to be written.
    #[inline(always)]
    pub(crate) fn slot_mut(&mut self, i: u32) -> SlotMut<'_, N> {
        // slot_ptr(i) is elem_size() = N + spare bytes inside the mapping
        // (SlotRing::new checked elem_size >= N), SLOT_ALIGN-aligned (an
        // 8-aligned base, DATA_OFFSET and elem_size multiples of it), and no
        // Rust reference to slot memory exists.
        // SAFETY: in bounds, aligned, writable while &mut self is borrowed.
        unsafe { SlotMut::new(self.q.slot_ptr(i), self.spare) }
    }
}

/// A [`Queue`] the consumer reads, whose slots were checked, once, to hold
/// `N` bytes (an entry the kernel writes, e.g. `struct ib_uverbs_wc`): a
/// read needs no check of the slot's size (callgrind: the check per poll
/// was 4 of an empty poll's 19 instructions).
#[derive(Debug)]
pub(crate) struct ReadRing<const N: usize> {
    q: Queue,
}

impl<const N: usize> ReadRing<N> {
    /// Checks that `q`'s slots hold `N` bytes; gives `q` back if they do
    /// not.
    pub(crate) fn new(q: Queue) -> Result<ReadRing<N>, Queue> {
        if q.elem_size() < N {
            return Err(q);
        }
        Ok(ReadRing { q })
    }

    /// The queue.
    #[inline(always)]
    pub(crate) fn queue(&self) -> &Queue {
        &self.q
    }

    /// Copies the first `N` bytes of slot `i` (masked) out of the ring.
    ///
    /// The caller orders this after the other side's writes (an acquire
    /// load of its index).
    #[inline(always)]
    pub(crate) fn read(&self, i: u32) -> [u8; N] {
        let mut out = [0u8; N];
        // slot_ptr(i) is elem_size() >= N bytes (ReadRing::new checked it)
        // inside the mapping (see slot_ptr()), readable under Queue::new's
        // contract; `out` is a local array, so the two do not overlap.
        // SAFETY: in bounds and readable (above); a byte copy reads
        // whatever the kernel wrote, and every value of u8 is valid.
        unsafe { core::ptr::copy_nonoverlapping(self.q.slot_ptr(i).as_ptr(), out.as_mut_ptr(), N) };
        out
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A heap-backed stand-in for a kernel-created queue, with the kernel's
    //! side of the protocol, for tests.
    use super::*;
    use zerocopy::IntoBytes;

    /// An aligned buffer laid out like `rxe_queue_buf`.
    pub struct FakeRing {
        pub buf: Vec<u64>,
    }

    impl FakeRing {
        pub fn new(slots: u32, log2_elem_size: u32) -> FakeRing {
            let bytes = DATA_OFFSET + ((slots as usize) << log2_elem_size);
            let mut r = FakeRing {
                buf: vec![0u64; bytes.div_ceil(8)],
            };
            r.set_u32(LOG2_ELEM_SIZE_OFFSET, log2_elem_size);
            r.set_u32(INDEX_MASK_OFFSET, slots - 1);
            r
        }
        pub fn base(&mut self) -> NonNull<u8> {
            NonNull::new(self.buf.as_mut_ptr().cast()).unwrap()
        }
        pub fn len(&self) -> usize {
            self.buf.len() * 8
        }
        pub fn set_u32(&mut self, off: usize, v: u32) {
            self.buf.as_mut_bytes()[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        }
        pub fn get_u32(&self, off: usize) -> u32 {
            u32::from_ne_bytes(self.bytes()[off..off + 4].try_into().unwrap())
        }
        pub fn bytes(&self) -> &[u8] {
            self.buf.as_bytes()
        }
        pub fn queue(&mut self, min: usize) -> Queue {
            let len = self.len();
            // SAFETY: the buffer is 8-aligned, len bytes, and outlives the
            // Queue in every test that uses it.
            unsafe { Queue::new(self.base(), len, min).unwrap() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::FakeRing;
    use super::*;

    #[test]
    fn rejects_bad_geometry() {
        let mut r = FakeRing::new(8, 6);
        r.set_u32(INDEX_MASK_OFFSET, 6);
        let len = r.len();
        // SAFETY: see FakeRing::queue.
        let e = unsafe { Queue::new(r.base(), len, 48) }.unwrap_err();
        assert_eq!(e, QueueError::BadMask { index_mask: 6 });
        r.set_u32(INDEX_MASK_OFFSET, 15);
        // SAFETY: as above.
        let e = unsafe { Queue::new(r.base(), len, 48) }.unwrap_err();
        assert!(matches!(e, QueueError::SlotsOutsideMapping { .. }), "{e:?}");
        r.set_u32(INDEX_MASK_OFFSET, 7);
        r.set_u32(LOG2_ELEM_SIZE_OFFSET, 4);
        // SAFETY: as above.
        let e = unsafe { Queue::new(r.base(), len, 48) }.unwrap_err();
        assert_eq!(e, QueueError::BadElemSize { log2_elem_size: 4 });
        // SAFETY: as above.
        let e = unsafe { Queue::new(r.base(), 100, 48) }.unwrap_err();
        assert_eq!(e, QueueError::TooShort { len: 100 });
    }

    #[test]
    fn corrupted_indices_stay_inside() {
        let mut r = FakeRing::new(8, 6);
        let q = r.queue(48);
        r.set_u32(PRODUCER_OFFSET, 0xdead_beef);
        assert!(q.load_producer() <= q.mask());
        let base = q.slot(0) as usize;
        let last = q.slot(u32::MAX) as usize;
        assert!(last >= base && last + q.elem_size() <= base - DATA_OFFSET + q.len());
    }

    #[test]
    fn slot_views_are_checked_once_and_stay_inside() {
        let mut r = FakeRing::new(8, 6); // 64-byte slots, the last one ending the buffer
        let last = DATA_OFFSET + 7 * 64;
        r.set_u32(last + 4, 0xabcd);
        let q = r.queue(48);
        // Reads: N bytes of a masked slot, if the slots hold them.
        assert!(q.read_slot::<65>(7).is_none());
        let b = q.read_slot::<8>(7 + 8 * 1000).unwrap();
        assert_eq!(b[4..], 0xabcdu32.to_ne_bytes());
        // Writes: slots smaller than N are refused once, at construction.
        let q = SlotRing::<65>::new(q).unwrap_err();
        let mut ring = SlotRing::<48>::new(q).unwrap();
        let mut w = ring.slot_mut(u32::MAX); // masked: the last slot
        assert_eq!(w.len(), 64);
        w.u64(56, 0x1122_3344_5566_7788).unwrap();
        assert!(w.u64(64, 1).is_err());
        assert!(w.bytes(48, &[0xee; 17]).is_err());
        assert_eq!(
            r.bytes()[last + 56..],
            0x1122_3344_5566_7788u64.to_ne_bytes()
        );
        assert_eq!(r.get_u32(last + 48), 0);
    }
}

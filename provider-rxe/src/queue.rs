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

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

/// Byte offset of `log2_elem_size` in `struct rxe_queue_buf`.
pub const LOG2_ELEM_SIZE_OFFSET: usize = 0;
/// Byte offset of `index_mask`.
pub const INDEX_MASK_OFFSET: usize = 4;
/// Byte offset of `producer_index` (its own cache line).
pub const PRODUCER_OFFSET: usize = 128;
/// Byte offset of `consumer_index` (its own cache line).
pub const CONSUMER_OFFSET: usize = 256;
/// Byte offset of `data[]`, the first slot.
pub const DATA_OFFSET: usize = 384;

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
        // SAFETY: offsets 0 and 4 are inside the mapping (len >= 384), 4-byte
        // aligned because base is 8-aligned (checked above); read through atomics as the kernel may
        // write the page concurrently.
        let (log2_elem_size, mask) = unsafe {
            (
                AtomicU32::from_ptr(base.as_ptr().add(LOG2_ELEM_SIZE_OFFSET).cast())
                    .load(Ordering::Relaxed),
                AtomicU32::from_ptr(base.as_ptr().add(INDEX_MASK_OFFSET).cast())
                    .load(Ordering::Relaxed),
            )
        };
        if mask == u32::MAX || !(mask + 1).is_power_of_two() {
            return Err(QueueError::BadMask { index_mask: mask });
        }
        if log2_elem_size > 20 || (1usize << log2_elem_size) < min_elem_size {
            return Err(QueueError::BadElemSize { log2_elem_size });
        }
        let need = ((mask as usize) + 1)
            .checked_shl(log2_elem_size)
            .and_then(|s| s.checked_add(DATA_OFFSET))
            .unwrap_or(usize::MAX);
        if need > len {
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

    fn index(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: offset is PRODUCER_OFFSET or CONSUMER_OFFSET, both < 384 <=
        // len and 4-byte aligned; the mapping outlives &self (Queue::new's
        // contract); the kernel writes it only with atomic stores.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    /// Acquire-loads the producer index, masked.
    pub fn load_producer(&self) -> u32 {
        self.index(PRODUCER_OFFSET).load(Ordering::Acquire) & self.mask
    }

    /// Acquire-loads the consumer index, masked.
    pub fn load_consumer(&self) -> u32 {
        self.index(CONSUMER_OFFSET).load(Ordering::Acquire) & self.mask
    }

    /// Release-stores the producer index (after the slot is written).
    pub fn store_producer(&self, v: u32) {
        self.index(PRODUCER_OFFSET)
            .store(v & self.mask, Ordering::Release)
    }

    /// Release-stores the consumer index (after the slot is read).
    pub fn store_consumer(&self, v: u32) {
        self.index(CONSUMER_OFFSET)
            .store(v & self.mask, Ordering::Release)
    }

    /// The next index after `i`.
    pub fn next(&self, i: u32) -> u32 {
        i.wrapping_add(1) & self.mask
    }

    /// The address of slot `i` (masked): `elem_size()` bytes inside the
    /// mapping.
    pub fn slot(&self, i: u32) -> *mut u8 {
        let off = DATA_OFFSET + (((i & self.mask) as usize) << self.log2_elem_size);
        // SAFETY: (i & mask) <= mask, and Queue::new checked that
        // DATA_OFFSET + (mask + 1) << log2_elem_size <= len, so the slot and
        // its elem_size bytes are inside the mapping.
        unsafe { self.base.as_ptr().add(off) }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A heap-backed stand-in for a kernel-created queue, with the kernel's
    //! side of the protocol, for tests.
    use super::*;

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
            let bytes: &mut [u8] = zerocopy_bytes(&mut self.buf);
            bytes[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        }
        pub fn get_u32(&self, off: usize) -> u32 {
            let bytes = self.bytes();
            u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap())
        }
        pub fn bytes(&self) -> &[u8] {
            // SAFETY: a Vec<u64>'s buffer is valid for len*8 bytes of u8.
            unsafe { core::slice::from_raw_parts(self.buf.as_ptr().cast(), self.buf.len() * 8) }
        }
        pub fn queue(&mut self, min: usize) -> Queue {
            let len = self.len();
            // SAFETY: the buffer is 8-aligned, len bytes, and outlives the
            // Queue in every test that uses it.
            unsafe { Queue::new(self.base(), len, min).unwrap() }
        }
    }

    fn zerocopy_bytes(v: &mut [u64]) -> &mut [u8] {
        // SAFETY: u64 has no invalid bit patterns as u8s and the length is
        // scaled by 8.
        unsafe { core::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len() * 8) }
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
}

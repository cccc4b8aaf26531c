//! A writable view of one ring slot: every store bounds-checked, most of
//! them at compile time.
//!
//! A [`SlotMut`] owns the slot's pointer and length, taken from a ring
//! whose geometry was checked once ([`SlotRing::slot_mut`]): the slot lies
//! inside the mapping, is `elem_size` bytes long and 8-aligned. Its type
//! also carries `N`, a length the ring's slots were checked to hold (the
//! fixed part of the entry, e.g. `sizeof(struct rxe_send_wqe)`): a store
//! that ends within `N` at a constant offset — an `offset_of!` on
//! `uverbs-abi`'s header-checked types — is decided by the compiler and
//! costs nothing at run time. A store past `N` (an SGE array, inline data)
//! is checked against the rest of the slot once, whatever its length.
//!
//! A store that would leave the slot, or be misaligned, is refused, not
//! written: it returns [`Refused`], and the entry, incomplete, must not be
//! published.
//!
//! The stores are plain stores: the kernel reads a slot only after the
//! release store of the producer index that publishes it.
//!
//! Crate-private on purpose: a WQE names memory the device will read or
//! write, which only the `unsafe` posts' callers can vouch for, so nothing
//! outside [`SendQueue`](crate::SendQueue) and [`RecvQueue`](crate::RecvQueue)
//! writes one.
//!
//! [`SlotRing::slot_mut`]: crate::queue::SlotRing::slot_mut
#![allow(unsafe_code)] // raw stores into the shared ring; each block says why it is sound

use crate::wr::Sge;
use core::marker::PhantomData;
use core::mem::{align_of, size_of, size_of_val};
use core::ptr::NonNull;
use uverbs_abi::rxe::RxeSge;
use zerocopy::{Immutable, IntoBytes};

/// The alignment every slot's start has (and the largest a store may need).
pub(crate) const SLOT_ALIGN: usize = 8;

/// A store the slot refused: `size` bytes at `off` would have left the
/// slot, or were misaligned. Nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Offset of the store in the slot.
    pub(crate) off: usize,
    /// Its size in bytes.
    pub(crate) size: usize,
}

impl Refused {
    /// The slot length the store would have needed (saturating).
    pub(crate) fn end(&self) -> usize {
        self.off.saturating_add(self.size)
    }
}

/// One slot of a ring, writable, known to be at least `N` bytes long.
///
/// The slot's length is kept as `N + spare`: a store that ends within the
/// first `N` bytes at a constant offset is decided at compile time; one
/// past them is measured against `spare` (for an array right after the
/// fixed part, a single comparison).
///
/// Invariant (established by [`SlotMut::new`]'s contract): `ptr` is valid
/// for writes of `N + spare` bytes for `'a`, `SLOT_ALIGN`-aligned, and
/// nothing in this process holds a reference to those bytes.
#[derive(Debug)]
pub(crate) struct SlotMut<'a, const N: usize> {
    ptr: NonNull<u8>,
    spare: usize,
    _ring: PhantomData<&'a mut [u8]>,
}

impl<'a, const N: usize> SlotMut<'a, N> {
    /// A view of the `N + spare` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `N + spare` bytes for `'a` and
    /// `SLOT_ALIGN`-aligned, and nothing may access those bytes through a
    /// Rust reference while the view lives (the kernel may read them; it
    /// does not write a slot the producer owns).
    #[inline(always)]
    pub(crate) unsafe fn new(ptr: NonNull<u8>, spare: usize) -> SlotMut<'a, N> {
        debug_assert!(ptr.as_ptr() as usize % SLOT_ALIGN == 0);
        SlotMut {
            ptr,
            spare,
            _ring: PhantomData,
        }
    }

    /// A view of a buffer of this process's own, laid out as a slot (a
    /// WQE built once and copied into the ring many times).
    #[inline(always)]
    pub(crate) fn over_words<const M: usize>(buf: &'a mut [u64; M]) -> SlotMut<'a, N> {
        const { assert!(M * 8 >= N) };
        let ptr = NonNull::from(buf).cast::<u8>();
        // SAFETY: the array is M * 8 = N + spare writable bytes, 8-aligned
        // (u64s), borrowed mutably for 'a, so nothing else reaches them
        // while the view lives.
        unsafe { SlotMut::new(ptr, M * 8 - N) }
    }

    /// The slot's address.
    #[inline(always)]
    pub(crate) fn addr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The slot's length in bytes (the ring's `elem_size`).
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        N + self.spare
    }

    /// The address of `size` bytes at `off` aligned to `align`, if they lie
    /// inside the slot.
    ///
    /// With `off`, `size` and `align` constants (the usual case, after
    /// inlining) and `off + size <= N`, this folds to the address; with
    /// `off == N`, to one comparison of `size` with `spare`.
    #[inline(always)]
    fn range(&self, off: usize, size: usize, align: usize) -> Result<*mut u8, Refused> {
        // No arithmetic here can overflow.
        let fits = if off <= N {
            // Starts in the fixed part, which holds N - off bytes from off;
            // the rest must fit the spare.
            size.saturating_sub(N - off) <= self.spare
        } else {
            let rel = off - N;
            rel <= self.spare && size <= self.spare - rel
        };
        if fits && align <= SLOT_ALIGN && off % align == 0 {
            Ok(self.ptr.as_ptr().wrapping_add(off))
        } else {
            Err(Refused { off, size })
        }
    }

    /// Stores `v` (a type of `uverbs-abi`, or an integer) at `off`.
    #[inline(always)]
    pub(crate) fn put<T: IntoBytes + Immutable>(
        &mut self,
        off: usize,
        v: T,
    ) -> Result<(), Refused> {
        let p = self.range(off, size_of::<T>(), align_of::<T>())?;
        // SAFETY: range() checked that off..off + size_of::<T>() lies in the
        // slot's N + spare bytes, which the invariant makes valid for
        // writes, and that off is a multiple of T's alignment (at most
        // SLOT_ALIGN, the slot's own alignment).
        unsafe { p.cast::<T>().write(v) };
        Ok(())
    }

    /// Copies `fixed`, a whole fixed part built before (a prepared WQE),
    /// to the slot's start: `N` bytes, which the slot always holds, so
    /// nothing is checked at run time.
    #[inline(always)]
    pub(crate) fn fixed<const W: usize>(&mut self, fixed: &[u64; W]) {
        const { assert!(W * 8 == N) };
        let dst = self.ptr.as_ptr().cast::<u64>();
        // Two halves: a copy of at most 128 bytes is inlined as vector
        // moves, a longer one becomes a call to memcpy (callgrind: the
        // 208-byte WQE's call, with the registers it spills, cost 18
        // instructions a post more than the two inline copies).
        let half = W / 2;
        // SAFETY: the invariant makes ptr valid for writes of N = 8 * W
        // bytes and 8-aligned; `fixed` is those W words (asserted) of a Rust
        // value, which never overlaps ring memory; the halves are
        // 0..half and half..W of both.
        unsafe {
            core::ptr::copy_nonoverlapping(fixed.as_ptr(), dst, half);
            core::ptr::copy_nonoverlapping(fixed.as_ptr().add(half), dst.add(half), W - half);
        }
    }

    /// Stores a `u32` at `off`.
    #[inline(always)]
    pub(crate) fn u32(&mut self, off: usize, v: u32) -> Result<(), Refused> {
        self.put(off, v)
    }

    /// Stores a `u64` at `off`.
    #[inline(always)]
    pub(crate) fn u64(&mut self, off: usize, v: u64) -> Result<(), Refused> {
        self.put(off, v)
    }

    /// Stores `sges` as an array of `struct rxe_sge` at `off` and returns
    /// the sum of their lengths. The array is checked as a whole: if it
    /// does not fit, none of it is written.
    #[inline(always)]
    pub(crate) fn sges(&mut self, off: usize, sges: &[Sge]) -> Result<u64, Refused> {
        const _: () = assert!(size_of::<Sge>() == size_of::<RxeSge>());
        let p = self.range(off, size_of_val(sges), align_of::<RxeSge>())?;
        let mut total = 0u64;
        for (i, s) in sges.iter().enumerate() {
            let sge = RxeSge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
            // SAFETY: range() checked that the whole array,
            // off..off + sges.len() * size_of::<RxeSge>(), lies in the slot
            // and that off is aligned for RxeSge; element i < sges.len()
            // starts a whole number of (aligned) RxeSges after it.
            unsafe { p.cast::<RxeSge>().add(i).write(sge) };
            total += s.length as u64;
        }
        Ok(total)
    }

    /// Copies `data` to `off` (inline payloads).
    #[inline(always)]
    pub(crate) fn bytes(&mut self, off: usize, data: &[u8]) -> Result<(), Refused> {
        let p = self.range(off, data.len(), 1)?;
        // SAFETY: range() checked that off..off + data.len() lies in the
        // slot; `data` is a Rust slice, not ring memory, so the two do not
        // overlap.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// Zeroes `len` bytes at `off`.
    #[inline(always)]
    pub(crate) fn zero(&mut self, off: usize, len: usize) -> Result<(), Refused> {
        let p = self.range(off, len, 1)?;
        // SAFETY: range() checked that off..off + len lies in the slot.
        unsafe { core::ptr::write_bytes(p, 0, len) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot at the start of a 128-byte buffer filled with 0xff, so that
    /// a store past the slot would show after it.
    struct Buf([u64; 16]);

    impl Buf {
        fn new() -> Buf {
            Buf([u64::MAX; 16])
        }
        fn slot<const N: usize>(&mut self, len: usize) -> SlotMut<'_, N> {
            assert!(len <= 128 && len >= N);
            let ptr = NonNull::new(self.0.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: the array is 128 writable, 8-aligned bytes borrowed
            // mutably for the view's lifetime, and N + (len - N) <= 128.
            unsafe { SlotMut::new(ptr, len - N) }
        }
        fn bytes(&self) -> &[u8] {
            self.0.as_bytes()
        }
    }

    const SGE: Sge = Sge {
        addr: 0x1000,
        length: 7,
        lkey: 9,
    };

    #[test]
    fn stores_land_at_their_offsets() {
        let mut b = Buf::new();
        let mut w = b.slot::<16>(64);
        w.u64(0, 0x0102_0304_0506_0708).unwrap();
        w.u32(8, 0xaabb_ccdd).unwrap();
        w.zero(12, 4).unwrap();
        w.bytes(16, b"inline").unwrap();
        assert_eq!(w.sges(32, &[SGE; 2]), Ok(14));
        assert_eq!(w.len(), 64);
        let bytes = b.bytes();
        assert_eq!(bytes[..8], 0x0102_0304_0506_0708u64.to_ne_bytes());
        assert_eq!(bytes[8..12], 0xaabb_ccddu32.to_ne_bytes());
        assert_eq!(bytes[12..16], [0; 4]);
        assert_eq!(&bytes[16..22], b"inline");
        assert_eq!(bytes[22], 0xff);
        assert_eq!(bytes[32..40], 0x1000u64.to_ne_bytes());
        assert_eq!(bytes[40..44], 7u32.to_ne_bytes());
        assert_eq!(bytes[44..48], 9u32.to_ne_bytes());
        assert_eq!(bytes[48..56], 0x1000u64.to_ne_bytes());
        assert!(bytes[64..].iter().all(|&x| x == 0xff));
    }

    #[test]
    fn a_store_past_the_slot_is_refused_not_written() {
        let mut b = Buf::new();
        let mut w = b.slot::<16>(64);
        w.u64(56, 1).unwrap(); // the last 8 bytes
        let refused = |off, size| Err(Refused { off, size });
        assert_eq!(w.u64(60, 2), refused(60, 8)); // straddles the end
        assert_eq!(w.u32(64, 3), refused(64, 4)); // just past it
        assert_eq!(w.u32(1 << 20, 3), refused(1 << 20, 4)); // far past
        assert_eq!(w.zero(48, 17), refused(48, 17));
        assert_eq!(w.bytes(63, b"ab"), refused(63, 2));
        assert_eq!(w.bytes(8, &[0; 57]), refused(8, 57)); // from inside N
        assert_eq!(w.u32(usize::MAX - 3, 4), refused(usize::MAX - 3, 4));
        assert_eq!(refused(usize::MAX, 4).unwrap_err().end(), usize::MAX);
        let bytes = b.bytes();
        assert_eq!(bytes[..56], [0xff; 56]);
        assert_eq!(bytes[56..64], 1u64.to_ne_bytes());
        assert!(bytes[64..].iter().all(|&x| x == 0xff));
    }

    #[test]
    fn an_sge_array_that_does_not_fit_is_not_written_at_all() {
        let mut b = Buf::new();
        let mut w = b.slot::<16>(64);
        assert_eq!(w.sges(32, &[SGE; 3]), Err(Refused { off: 32, size: 48 }));
        assert_eq!(w.sges(16, &[SGE; 4]), Err(Refused { off: 16, size: 64 }));
        assert_eq!(w.sges(16, &[SGE; 3]), Ok(21)); // exactly fills it
        assert_eq!(w.sges(64, &[]), Ok(0)); // empty, at the end
        let bytes = b.bytes();
        assert_eq!(bytes[..16], [0xff; 16]);
        assert!(bytes[64..].iter().all(|&x| x == 0xff));
    }

    #[test]
    fn misaligned_stores_are_refused() {
        let mut b = Buf::new();
        let mut w = b.slot::<16>(64);
        assert_eq!(w.u32(2, 1), Err(Refused { off: 2, size: 4 }));
        assert_eq!(w.u64(4, 2), Err(Refused { off: 4, size: 8 }));
        assert_eq!(w.sges(20, &[SGE]), Err(Refused { off: 20, size: 16 }));
        assert!(b.bytes().iter().all(|&x| x == 0xff));
    }

    #[test]
    fn the_known_length_does_not_widen_the_slot() {
        // N only skips checks it proves: a slot of exactly N bytes still
        // refuses byte N, and one with spare bytes takes them.
        let mut b = Buf::new();
        let mut w = b.slot::<64>(64);
        w.u32(60, 1).unwrap();
        assert_eq!(w.u32(64, 2), Err(Refused { off: 64, size: 4 }));
        let mut w = b.slot::<32>(64);
        w.u32(60, 1).unwrap();
        assert_eq!(w.bytes(32, &[0; 33]), Err(Refused { off: 32, size: 33 }));
        w.bytes(32, &[0; 32]).unwrap();
        assert!(b.bytes()[64..].iter().all(|&x| x == 0xff));
    }
}

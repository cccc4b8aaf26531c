//! The memory an [`Mr`](super::Mr) can own: what `Pd::register` takes and
//! gives back.
//!
//! # How the buffer is held
//! Registering a buffer takes it apart into its raw parts (pointer, length,
//! whatever frees it) — `Vec::into_raw_parts`-style — and keeps only those:
//! no `Vec`, `Box` or `&mut` to the bytes exists while the device may reach
//! them, so no Rust code can resize, move, free or hold a reference into
//! registered memory (the hole of rust-ibverbs #61, whose MR handed out the
//! `Vec` it registered, which a caller could grow and so move). The buffer
//! is put back together only after `DEREG_MR` has succeeded, and is leaked
//! if it fails.

use std::ptr::NonNull;

/// Memory that an [`Mr`](super::Mr) can own while it is registered and
/// give back afterwards ([`Mr::deregister`](super::Mr::deregister)).
///
/// rverbs implements it for `Vec<u8>`, `Box<[u8]>`, [`Pages`] (what
/// [`Pd::alloc_mr`](crate::pd::Pd::alloc_mr) maps) and, with the `memmap2`
/// feature, `memmap2::MmapMut`.
///
/// # Safety
/// An implementation promises that [`MrBuffer::into_raw`] returns the
/// address and length of memory that
/// - is readable and writable by this process for `len` bytes;
/// - stays allocated and mapped at that address, with that length, until
///   [`MrBuffer::from_raw`] is called with the returned parts — and forever
///   if it never is;
/// - nothing but the holder of the parts reads, writes, moves or frees
///   meanwhile (the buffer gave up every other way to reach it).
pub unsafe trait MrBuffer: Sized + Send + 'static {
    /// What the buffer is while it is registered.
    type Raw: Send + Sync + 'static;

    /// Takes the buffer apart: its raw parts, the first byte, the length.
    fn into_raw(self) -> (Self::Raw, NonNull<u8>, usize);

    /// Puts the buffer back together.
    ///
    /// # Safety
    /// `raw` came from [`MrBuffer::into_raw`] of this type, and the device
    /// can no longer reach the memory (its MR is deregistered).
    unsafe fn from_raw(raw: Self::Raw) -> Self;
}

/// A `Vec<u8>`'s parts: pointer, length, capacity.
pub struct VecParts {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: VecParts is the unique owner of a heap allocation of bytes (the
// Vec gave it up), which is not tied to a thread.
unsafe impl Send for VecParts {}
// SAFETY: &VecParts gives nothing out (its fields are private and read
// only by from_raw, which takes it by value).
unsafe impl Sync for VecParts {}

// SAFETY: the allocation stays where it is until Vec::from_raw_parts
// rebuilds the Vec from the same parts; ManuallyDrop keeps the Vec from
// freeing it, and nothing else has the pointer. The registered length is
// `len`, the initialised bytes.
unsafe impl MrBuffer for Vec<u8> {
    type Raw = VecParts;

    fn into_raw(self) -> (VecParts, NonNull<u8>, usize) {
        let mut v = std::mem::ManuallyDrop::new(self);
        let (len, cap) = (v.len(), v.capacity());
        // A Vec's pointer is never null (dangling, not null, when empty).
        let ptr = NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling());
        (VecParts { ptr, len, cap }, ptr, len)
    }

    unsafe fn from_raw(raw: VecParts) -> Vec<u8> {
        // SAFETY: the parts of a Vec<u8> that into_raw took apart (the
        // caller's contract), never used since.
        unsafe { Vec::from_raw_parts(raw.ptr.as_ptr(), raw.len, raw.cap) }
    }
}

/// A `Box<[u8]>`'s parts: pointer and length.
pub struct BoxParts {
    ptr: NonNull<[u8]>,
}

// SAFETY: as for VecParts: the unique owner of a heap allocation.
unsafe impl Send for BoxParts {}
// SAFETY: as for VecParts.
unsafe impl Sync for BoxParts {}

// SAFETY: Box::leak (into_raw) gives up the allocation until Box::from_raw takes
// it back; nothing else has the pointer.
unsafe impl MrBuffer for Box<[u8]> {
    type Raw = BoxParts;

    fn into_raw(self) -> (BoxParts, NonNull<u8>, usize) {
        let len = self.len();
        // Box::leak is Box::into_raw as a reference: the allocation is
        // given up, and from_raw's Box::from_raw takes it back.
        let ptr = NonNull::from(Box::leak(self));
        (BoxParts { ptr }, ptr.cast(), len)
    }

    unsafe fn from_raw(raw: BoxParts) -> Box<[u8]> {
        // SAFETY: the pointer Box::into_raw gave (the caller's contract).
        unsafe { Box::from_raw(raw.ptr.as_ptr()) }
    }
}

/// Memory rverbs mapped for an MR ([`Pd::alloc_mr`](crate::pd::Pd::alloc_mr),
/// [`Pd::alloc_mr_huge`](crate::pd::Pd::alloc_mr_huge)): private anonymous
/// pages, unmapped when this is dropped.
pub struct Pages {
    pub(crate) map: crate::sys::Mapping,
}

impl std::fmt::Debug for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pages")
            .field("len", &self.map.len())
            .finish()
    }
}

// SAFETY: the mapping is owned by `Mapping`, unmapped only when it drops,
// and reached only through the pointer it hands out here.
unsafe impl MrBuffer for Pages {
    type Raw = crate::sys::Mapping;

    fn into_raw(self) -> (crate::sys::Mapping, NonNull<u8>, usize) {
        let (ptr, len) = (self.map.as_ptr(), self.map.len());
        (self.map, ptr, len)
    }

    unsafe fn from_raw(raw: crate::sys::Mapping) -> Pages {
        Pages { map: raw }
    }
}

/// The buffer type of an MR over memory rverbs does not own
/// ([`Pd::register_raw`](crate::pd::Pd::register_raw)): `Mr<External>`. It has
/// no values: the MR holds only the address range the caller vouched for,
/// and [`Mr::deregister`](super::Mr::deregister) gives back a [`Released`]
/// receipt, not a buffer — so memory whose `unsafe` promise ended at
/// deregistration cannot be registered again by safe code.
#[derive(Debug)]
pub enum External {}

/// What [`Mr::deregister`](super::Mr::deregister) of an `Mr<External>`
/// gives back: the range, now out of the device's reach. It is a receipt,
/// not a buffer ([`Pd::register`](crate::pd::Pd::register) does not take it):
/// the memory is the caller's again, and registering it again needs
/// `unsafe` again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// The first byte.
    pub ptr: NonNull<u8>,
    /// The length in bytes.
    pub len: usize,
}

// SAFETY: Released is only an address range, which is not tied to a thread.
unsafe impl Send for Released {}
// SAFETY: as for Send: it is two numbers.
unsafe impl Sync for Released {}

mod sealed {
    pub trait Sealed {}
    impl<B: super::MrBuffer> Sealed for B {}
    impl Sealed for super::External {}
}

/// What an [`Mr`](super::Mr) can be over: any [`MrBuffer`] (which it owns
/// and gives back), or [`External`] memory (which it does not own, and for
/// which it gives back a [`Released`] receipt). Sealed: implement
/// [`MrBuffer`] instead.
pub trait MrMemory: sealed::Sealed + Send + Sized + 'static {
    /// What the memory is while registered.
    #[doc(hidden)]
    type Held: Send + Sync + 'static;
    /// What [`Mr::deregister`](super::Mr::deregister) gives back.
    type Back;
    /// Turns what was held into what is given back.
    ///
    /// # Safety
    /// `held` was taken from this type for the range `ptr..ptr + len`, and
    /// the device can no longer reach it (its MR is deregistered).
    #[doc(hidden)]
    unsafe fn give_back(held: Self::Held, ptr: NonNull<u8>, len: usize) -> Self::Back;
}

impl<B: MrBuffer> MrMemory for B {
    type Held = B::Raw;
    type Back = B;
    unsafe fn give_back(held: B::Raw, _: NonNull<u8>, _: usize) -> B {
        // SAFETY: the caller's contract is from_raw's.
        unsafe { B::from_raw(held) }
    }
}

impl MrMemory for External {
    type Held = ();
    type Back = Released;
    unsafe fn give_back(_: (), ptr: NonNull<u8>, len: usize) -> Released {
        Released { ptr, len }
    }
}

#[cfg(feature = "memmap2")]
// SAFETY: an MmapMut owns its mapping and unmaps it only on drop; moving it
// does not move the mapping, and once it is held as the raw part nothing
// else can reach it (no &mut to it is handed out).
unsafe impl MrBuffer for memmap2::MmapMut {
    type Raw = memmap2::MmapMut;

    fn into_raw(mut self) -> (memmap2::MmapMut, NonNull<u8>, usize) {
        let len = self.len();
        let ptr = NonNull::new(self.as_mut_ptr()).unwrap_or(NonNull::dangling());
        (self, ptr, len)
    }

    unsafe fn from_raw(raw: memmap2::MmapMut) -> memmap2::MmapMut {
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Taken apart and put together again, a buffer is the same buffer
    /// with the same bytes at the same address.
    #[test]
    fn buffers_round_trip_through_their_raw_parts() {
        let v: Vec<u8> = (0..100u8).collect();
        let at = v.as_ptr();
        let (raw, ptr, len) = v.into_raw();
        assert_eq!((ptr.as_ptr().cast_const(), len), (at, 100));
        // SAFETY: the parts just taken, unused since.
        let back = unsafe { <Vec<u8> as MrBuffer>::from_raw(raw) };
        assert_eq!(back.as_ptr(), at);
        assert_eq!(back, (0..100u8).collect::<Vec<_>>());

        let b: Box<[u8]> = vec![7u8; 33].into_boxed_slice();
        let at = b.as_ptr();
        let (raw, ptr, len) = b.into_raw();
        assert_eq!((ptr.as_ptr().cast_const(), len), (at, 33));
        // SAFETY: as above.
        let back = unsafe { <Box<[u8]> as MrBuffer>::from_raw(raw) };
        assert_eq!(&*back, &[7u8; 33][..]);
    }
}

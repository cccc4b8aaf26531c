//! Work requests: the verbs vocabulary (`rverbs-types`, which both
//! providers speak too) over the safe API's memory: checked MR slices,
//! laid out as SGEs, so that a request reaches the provider's ring as the
//! caller built it — no translation, no copy.
//!
//! [`crate::SendWr`] and [`crate::RecvWr`] are the vocabulary's requests
//! over [`Slice`]s (and, for UD sends, [`crate::Ah`]s).

pub use rverbs_types::{FlushLevel, FlushType, MwBind, Remote, SendOp, Sge, Ud};
use std::marker::PhantomData;

/// The most SGEs one work request may carry through the safe API (rxe's
/// own limit is 32).
pub const MAX_SGE: usize = 32;

/// A checked piece of an MR for a work request: offset and length are
/// inside the MR ([`crate::mr::Mr::slice`]). Borrows the MR so that it is not
/// dropped while the work request is being built.
///
/// Laid out exactly as an SGE (`struct ibv_sge`: `addr`, `length`, `lkey`;
/// the borrow is zero-sized), so that a list of slices *is* the SGE list a
/// provider copies into its ring: no conversion on the data path.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Slice<'a> {
    addr: u64,
    len: u32,
    lkey: u32,
    _mr: PhantomData<&'a ()>,
}

const _: () = {
    use uverbs_abi::verbs::IbUverbsSge as K;
    assert!(size_of::<Slice<'static>>() == size_of::<K>());
    assert!(std::mem::offset_of!(Slice<'static>, addr) == std::mem::offset_of!(K, addr));
    assert!(std::mem::offset_of!(Slice<'static>, len) == std::mem::offset_of!(K, length));
    assert!(std::mem::offset_of!(Slice<'static>, lkey) == std::mem::offset_of!(K, lkey));
};

// SAFETY: Slice is repr(C) with the field types, offsets and size of
// `struct ib_uverbs_sge` (asserted above), which rverbs_types::Sge has too;
// its only other member is a zero-sized marker.
#[allow(unsafe_code)]
unsafe impl rverbs_types::AsSge for Slice<'_> {}

impl<'a> Slice<'a> {
    /// A slice the caller has checked to lie inside a live MR that the
    /// lifetime `'a` borrows.
    pub(crate) fn checked(addr: u64, len: u32, lkey: u32) -> Slice<'a> {
        Slice {
            addr,
            len,
            lkey,
            _mr: PhantomData,
        }
    }

    /// The address the device uses (`addr` of the SGE).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The MR's lkey.
    #[inline]
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
}

impl Slice<'static> {
    /// An SGE named by its raw parts, for a C ABI (`rverbs-libibverbs`)
    /// whose callers name memory by address and lkey, not by `Mr`.
    ///
    /// # Safety
    /// `lkey` names a live MR of the QP's PD covering `addr..addr + len`
    /// until the work request completes, and no Rust reference reaches that
    /// memory meanwhile: what a C caller of `ibv_post_send` promises. (The
    /// device checks the lkey's bounds itself, as with rdma-core.)
    #[allow(unsafe_code)]
    pub unsafe fn from_raw_parts(addr: u64, len: u32, lkey: u32) -> Slice<'static> {
        Slice::checked(addr, len, lkey)
    }

    /// A C array of `n` SGEs (`struct ibv_sge`, which a [`Slice`] is laid
    /// out as) viewed in place as slices, for a C ABI's post path: no copy,
    /// no allocation. `None` if `sges` is NULL or misaligned while `n > 0`.
    ///
    /// # Safety
    /// `sges` points to `n` initialised SGEs that stay unchanged for `'a`,
    /// and each one satisfies [`Slice::from_raw_parts`]'s contract.
    #[allow(unsafe_code)]
    pub unsafe fn list_from_raw_parts<'a>(
        sges: *const Sge,
        n: usize,
    ) -> Option<&'a [Slice<'static>]> {
        if n == 0 {
            return Some(&[]);
        }
        if sges.is_null() || !sges.cast::<Slice<'static>>().is_aligned() {
            return None;
        }
        // Slice has Sge's layout (asserted above: `struct ib_uverbs_sge`)
        // plus a zero-sized marker, so n SGEs are n Slices.
        // SAFETY: same layout (above); non-NULL and aligned (checked); the n
        // elements initialised and unchanged for 'a, and what each names,
        // are the caller's promise, as for from_raw_parts.
        Some(unsafe { std::slice::from_raw_parts(sges.cast::<Slice<'static>>(), n) })
    }

    /// A slice over memory that is not an `Mr`'s: for tests that run the
    /// data path over a device model's memory, never for the device.
    #[cfg(test)]
    pub(crate) fn raw_for_model(addr: u64, len: u32, lkey: u32) -> Slice<'static> {
        Slice::checked(addr, len, lkey)
    }
}

/// One receive work request: where an incoming message lands.
pub type RecvWr<'a> = rverbs_types::RecvWr<'a, Slice<'a>>;

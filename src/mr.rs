//! Memory regions (`REG_MR` / `DEREG_MR`), and the soundness rule for
//! memory the device can touch.
//!
//! # Why MR memory is never a Rust reference
//! Once registered, a buffer can be read or written by the device at any
//! time: by a local work request until its completion is polled, and by any
//! peer holding the rkey (RDMA WRITE/READ, atomics) for as long as the MR
//! exists. No `&[u8]` or `&mut [u8]` into such memory can be sound, so the
//! safe API never creates one. An [`Mr`] owns its buffer — a private
//! anonymous mapping made for it — and offers copies in and out
//! ([`Mr::write`], [`Mr::read`]) through raw pointers, as one treats memory
//! shared with another process. Work requests name memory as
//! ([`Mr`], offset, length) triples checked against the MR's bounds
//! ([`Mr::slice`]).
//!
//! The buffer is unmapped only after `DEREG_MR` has succeeded: from then on
//! the kernel grants no new access through the keys, and pages it still has
//! pinned for an access in flight are no longer mapped in this process, so
//! the device can never write into memory this process reuses.

use crate::cmd::{self, mr::MrHandle};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use crate::sys::Mapping;
use bitflags::bitflags;
use std::sync::Arc;

pub use crate::wr::Slice;

bitflags! {
    /// MR access rights (`IB_UVERBS_ACCESS_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access: u32 {
        /// The local device may write (needed for receives, READ, atomics).
        const LOCAL_WRITE = 1;
        /// Peers may RDMA WRITE.
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// Peers may perform atomics.
        const REMOTE_ATOMIC = 1 << 3;
    }
}

/// A registered memory region that owns its buffer.
#[derive(Clone)]
pub struct Mr {
    pub(crate) inner: Arc<MrInner>,
}

pub(crate) struct MrInner {
    /// DEREG_MR on drop, then the buffer is unmapped (it keeps it; see the
    /// module docs). Dropped before the PD.
    _handle: MrHandle,
    _pd: Arc<PdInner>,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    /// The buffer's address (mapped while `handle` lives).
    addr: u64,
    len: usize,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.inner.len)
            .field("lkey", &self.inner.lkey)
            .field("rkey", &self.inner.rkey)
            .finish()
    }
}

impl Pd {
    /// Allocates `len` bytes of zeroed, page-aligned memory and registers it
    /// (`REG_MR`) with `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        // The kernel rejects remote write or atomic access without local
        // write (IB spec); say so before asking it.
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(Error::invalid(format!(
                "MR access {access:?}: remote write and atomic access need LOCAL_WRITE"
            )));
        }
        let mem = Mapping::anonymous("mmap of MR memory", len)?;
        let start = mem.as_ptr().as_ptr() as u64;
        let pd = &self.inner;
        let mut r = cmd::mr::reg(
            &pd.ctx.dev,
            pd.handle.raw(),
            start,
            len as u64,
            access.bits(),
        )?;
        r.handle.keep(mem);
        Ok(Mr {
            inner: Arc::new(MrInner {
                _handle: r.handle,
                _pd: pd.clone(),
                lkey: r.lkey,
                rkey: r.rkey,
                addr: start,
                len,
            }),
        })
    }
}

impl Mr {
    fn base(&self) -> *mut u8 {
        // The mapping made in alloc_mr, kept by the control half for as
        // long as this Mr exists.
        self.inner.addr as usize as *mut u8
    }

    /// The buffer's address (what peers use with the rkey).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.inner.addr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the MR is empty (never: registration needs one byte).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.inner.lkey
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        self.inner.rkey
    }

    /// `len` bytes at `offset`, checked against the MR's bounds.
    pub fn slice(&self, offset: usize, len: u32) -> Result<Slice<'_>> {
        self.check(offset, len as usize)?;
        Ok(Slice::checked(
            self.addr() + offset as u64,
            len,
            self.inner.lkey,
        ))
    }

    /// The whole MR (its length must fit an SGE's 32 bits).
    pub fn all(&self) -> Result<Slice<'_>> {
        let len = u32::try_from(self.inner.len)
            .map_err(|_| Error::invalid("MR longer than 4 GiB: use slice()"))?;
        Ok(Slice::checked(self.addr(), len, self.inner.lkey))
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(()),
            _ => Err(Error::invalid(format!(
                "range {offset}+{len} is outside the {}-byte MR",
                self.inner.len
            ))),
        }
    }

    /// Copies `data` into the MR at `offset`.
    ///
    /// If the device is accessing the same bytes at the same time (a send
    /// in flight, a peer's RDMA WRITE) the result is torn data, never
    /// undefined behaviour: no reference to the buffer exists.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: offset + len is inside the mapping (check above), which
        // lives as long as self; data is a separate Rust allocation, so the
        // ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base().add(offset), data.len())
        };
        Ok(())
    }

    /// Copies bytes at `offset` out of the MR into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: as in write(): in bounds, non-overlapping, mapping alive.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Reads the byte at `offset` with a volatile load: for spinning on a
    /// byte a peer's RDMA WRITE will change (a plain copy could be hoisted
    /// out of the loop by the compiler).
    pub fn read_volatile_u8(&self, offset: usize) -> Result<u8> {
        self.check(offset, 1)?;
        // SAFETY: in bounds of the live mapping (check above); a u8 needs
        // no alignment.
        Ok(unsafe { std::ptr::read_volatile(self.base().add(offset)) })
    }

    /// Reads a native-endian u64 at `offset` (atomics' results).
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Fills `len` bytes at `offset` with `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.check(offset, len)?;
        // SAFETY: in bounds of the live mapping (check above).
        unsafe { std::ptr::write_bytes(self.base().add(offset), byte, len) };
        Ok(())
    }

    /// A raw pointer to the buffer, for zero-copy users.
    ///
    /// # Safety
    /// The caller must not create references to the memory while the device
    /// may access it, and must not use the pointer after the last clone of
    /// this `Mr` is dropped.
    pub unsafe fn as_ptr(&self) -> *mut u8 {
        self.base()
    }
}

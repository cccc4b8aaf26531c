//! Memory regions over a dma-buf (`UVERBS_METHOD_REG_DMABUF_MR`,
//! `ibv_reg_dmabuf_mr`): memory another driver exports as a file — a
//! GPU's, or a `udmabuf` over a memfd — registered by descriptor, so that
//! the device reads and writes it directly.
//!
//! Unlike [`super::Mr`], the bytes are not this process's to touch through
//! the MR: no pointer is kept, and the only way to the memory is the
//! exporter's (its own mapping of the dma-buf, or the GPU's API). The
//! kernel holds a reference on the dma-buf for as long as the MR exists;
//! the `DmabufMr` keeps the descriptor too, so that the buffer lives as
//! long as the registration by ownership, not by promise.

use super::{check_access, in_bounds, slice_addr};
use crate::cmd::{self, mr::MrHandle};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use crate::wr::Slice;
use rverbs_types::Access;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// A memory region over a dma-buf ([`Pd::reg_dmabuf_mr`]). Dropping it
/// deregisters it (`DEREG_MR`), then closes the descriptor.
pub struct DmabufMr {
    /// Dropped first: DEREG_MR.
    handle: MrHandle,
    fd: OwnedFd,
    /// DEREG_MR before DEALLOC_PD.
    _pd: Arc<PdInner>,
    lkey: u32,
    rkey: u32,
    iova: u64,
    len: u64,
    access: Access,
}

impl std::fmt::Debug for DmabufMr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmabufMr")
            .field("fd", &self.fd.as_raw_fd())
            .field("lkey", &self.lkey)
            .field("rkey", &self.rkey)
            .field("iova", &self.iova)
            .field("len", &self.len)
            .field("access", &self.access)
            .finish()
    }
}

impl Pd {
    /// Registers `len` bytes at `offset` into the dma-buf `fd`, which work
    /// requests and peers address from `iova` on (`ibv_reg_dmabuf_mr`).
    ///
    /// Refused before the kernel: an empty region, an IOVA whose offset in
    /// its page is not `offset`'s (the kernel's rule), a span past the
    /// 64-bit address space, access flags the device lacks. The kernel's
    /// refusals name `REG_DMABUF_MR`: rxe has no dma-buf support and
    /// answers `EOPNOTSUPP`; a kernel older than 5.12 lacks the method
    /// (`EPROTONOSUPPORT`).
    pub fn reg_dmabuf_mr(
        &self,
        fd: OwnedFd,
        offset: u64,
        len: u64,
        iova: u64,
        access: Access,
    ) -> Result<DmabufMr> {
        if len == 0 {
            return Err(Error::invalid("REG_DMABUF_MR of an empty region"));
        }
        let page = crate::sys::page_size() as u64;
        if iova % page != offset % page {
            return Err(Error::invalid(format!(
                "REG_DMABUF_MR: IOVA {iova:#x} for offset {offset:#x}: the IOVA must have the \
                 offset's place in its page ({:#x})",
                offset % page
            )));
        }
        if iova.checked_add(len - 1).is_none() || offset.checked_add(len).is_none() {
            return Err(Error::invalid(format!(
                "REG_DMABUF_MR: {len} bytes at IOVA {iova:#x} (offset {offset:#x}) would pass \
                 the end of the 64-bit address space"
            )));
        }
        check_access(self, access)?;
        let pd = &self.inner;
        let r = cmd::mr::reg_dmabuf(
            &pd.ctx.dev,
            pd.handle.raw(),
            fd.as_raw_fd(),
            offset,
            len,
            iova,
            access.bits(),
        )?;
        Ok(DmabufMr {
            handle: r.handle,
            fd,
            _pd: pd.clone(),
            lkey: r.lkey,
            rkey: r.rkey,
            iova,
            len,
            access,
        })
    }
}

impl DmabufMr {
    /// The local key, for SGEs.
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// The remote key, for peers' RDMA.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Where the region starts for work requests and peers.
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// Bytes registered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Never: an empty region is refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The access it was registered with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The dma-buf.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `len` bytes at `offset` as an SGE (IOVA-addressed), checked against
    /// the region's bounds.
    pub fn slice(&self, offset: u64, len: u32) -> Result<Slice<'_>> {
        let size = usize::try_from(self.len).unwrap_or(usize::MAX);
        let off = usize::try_from(offset)
            .map_err(|_| Error::invalid(format!("offset {offset} is outside the MR")))?;
        in_bounds(off, len as usize, size)?;
        Ok(Slice::checked(
            slice_addr(self.iova, offset)?,
            len,
            self.lkey,
        ))
    }

    /// Deregisters now, reporting the kernel's error (a window still bound
    /// to it, say); the region stays registered then, and its drop tries
    /// again (it comes back with the error). On success the descriptor
    /// is given back.
    #[allow(clippy::result_large_err)] // the refusal hands the MR back
    pub fn deregister(mut self) -> std::result::Result<OwnedFd, (Error, Box<DmabufMr>)> {
        match self.handle.try_close() {
            Ok(()) => {
                let DmabufMr { fd, .. } = self;
                Ok(fd)
            }
            Err(e) => Err((e, Box::new(self))),
        }
    }
}

//! The command layer: every uverbs command rverbs issues, one file per
//! kernel object, all through one executor ([`Dev`]) and uverbs-abi's typed
//! descriptors (`WriteCmd`, `ExWriteCmd`, the ioctl attribute builder).
//! Nothing above this module frames a command.
//!
//! Kernel objects are held by [`Handle`]s, the control half of each object:
//! dropping one issues its DESTROY command, and releases the memory the
//! kernel or the device may use ([`Handle::keep`]) only once the kernel has
//! destroyed the object. If the kernel refuses, that memory is leaked — a
//! bounded loss, against the device writing memory the process reuses.

pub(crate) mod ah;
pub(crate) mod context;
pub(crate) mod cq;
pub(crate) mod mcast;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod srq;

use crate::error::{Error, Result};
use crate::sys;
use std::marker::PhantomData;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use uverbs_abi::ioctl::{self as io, AttrArray};
use uverbs_abi::verbs::{self as v, ExWriteCmd, WriteCmd};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Which kernel interface carries a context's commands.
///
/// Kernels since 4.20 take every verb as an `RDMA_VERBS_IOCTL` method
/// (attribute arrays); the older `write()` commands remain and are what the
/// ioctl-only methods fall back to. rdma-core tries the ioctl first and
/// falls back to `write()` where the kernel answers that it lacks the
/// method; so does [`crate::Context::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandPath {
    /// `RDMA_VERBS_IOCTL` where a method exists (context, async event fd,
    /// port and GID queries), `write()` for the rest.
    Ioctl,
    /// `write()` only (and sysfs for the GID table), as on kernels before
    /// the ioctl ABI.
    Write,
}

/// An open uverbs command fd and how its commands are carried.
pub(crate) struct Dev {
    pub(crate) fd: OwnedFd,
    /// Which interface carries the commands that have both.
    pub(crate) path: CommandPath,
    /// `RDMA_DRIVER_*` of the device, for the ioctl header.
    pub(crate) driver_id: u32,
}

impl Dev {
    /// Executes write() command `C` with driver udata both ways and
    /// returns its core response; the driver's answer lands in
    /// `udata_out`. A command without a response (`C::Resp = ()`) gets no
    /// response buffer.
    pub(crate) fn write<C: WriteCmd>(
        &self,
        op: &'static str,
        req: &C::Req,
        udata_in: &[u8],
        udata_out: &mut [u8],
    ) -> Result<C::Resp>
    where
        C::Resp: FromZeros,
    {
        let core = std::mem::size_of::<C::Resp>();
        // The kernel writes the core response, then the driver's,
        // contiguously; u64 words keep it aligned for the core struct.
        let mut resp = vec![0u64; (core + udata_out.len()).div_ceil(8)];
        let resp_bytes = resp.as_mut_bytes();
        let bytes = v::encode_write_vec::<C>(
            req,
            udata_in,
            resp_bytes.as_mut_ptr() as u64,
            udata_out.len(),
        )
        .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
        // SAFETY: the only pointer in the command is the response buffer,
        // `resp`, which is core + udata_out.len() bytes and lives across
        // the call.
        unsafe { sys::write_cmd(self.fd.as_fd(), op, &bytes) }?;
        if core == 0 {
            return Ok(C::Resp::new_zeroed());
        }
        let resp_bytes = resp.as_bytes();
        udata_out.copy_from_slice(&resp_bytes[core..core + udata_out.len()]);
        C::Resp::read_from_prefix(resp_bytes)
            .map(|(r, _)| r)
            .map_err(|_| Error::bad_answer(format!("{op}: response shorter than its struct")))
    }

    /// [`Dev::write`] without driver udata.
    pub(crate) fn write0<C: WriteCmd>(&self, op: &'static str, req: &C::Req) -> Result<C::Resp>
    where
        C::Resp: FromZeros,
    {
        self.write::<C>(op, req, &[], &mut [])
    }

    /// Executes extended write() command `C` (`ib_uverbs_ex_cmd_hdr`). The
    /// kernel writes at most the response's size and says in the response
    /// how much it filled.
    pub(crate) fn write_ex<C: ExWriteCmd>(&self, op: &'static str, req: &C::Req) -> Result<C::Resp>
    where
        C::Resp: FromZeros,
    {
        let mut resp = C::Resp::new_zeroed();
        let bytes =
            v::encode_ex_write_vec::<C>(req, &[], resp.as_mut_bytes().as_mut_ptr() as u64, 0)
                .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
        // SAFETY: the response pointer is `resp`, of the size the header
        // declares, alive across the call.
        unsafe { sys::write_cmd(self.fd.as_fd(), op, &bytes) }?;
        Ok(resp)
    }

    /// Issues one `RDMA_VERBS_IOCTL` with `attrs`.
    pub(crate) fn ioctl(&self, op: &'static str, attrs: &mut AttrArray<'_>) -> Result<()> {
        ioctl(&self.fd, op, attrs)
    }

    /// A new attribute array for `object`/`method` on this device.
    pub(crate) fn attrs<'b>(
        &self,
        storage: &'b mut [u64],
        object: u16,
        method: u16,
    ) -> AttrArray<'b> {
        AttrArray::new(storage, object, method, self.driver_id)
    }
}

/// Issues one `RDMA_VERBS_IOCTL` with `attrs` on `fd`.
pub(crate) fn ioctl(fd: &OwnedFd, op: &'static str, attrs: &mut AttrArray<'_>) -> Result<()> {
    let buf = attrs
        .ioctl_buf()
        .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
    // SAFETY: the attribute builder ties every pointer attribute to a
    // buffer borrowed for the array's lifetime, which spans this call.
    unsafe { sys::verbs_ioctl(fd.as_fd(), op, u64::from(io::RDMA_VERBS_IOCTL), buf) }
}

/// Whether an ioctl error means "this kernel has no such method (or no
/// ioctl ABI at all)", the cases where rdma-core falls back to `write()`.
pub(crate) fn ioctl_unsupported(e: &Error) -> bool {
    matches!(
        e.errno().map(|e| e.0),
        Some(libc::ENOTTY | libc::EPROTONOSUPPORT | libc::EOPNOTSUPP)
    )
}

/// A kind of kernel object: how it is destroyed.
pub(crate) trait Kind {
    /// Issues the object's DESTROY command.
    fn destroy(dev: &Dev, handle: u32) -> Result<()>;
}

/// The control half of a kernel object: its handle on a device, and the
/// memory the kernel or the device may use until the object is destroyed.
pub(crate) struct Handle<K: Kind> {
    dev: Arc<Dev>,
    handle: u32,
    keep: Vec<Box<dyn Send + Sync>>,
    /// Not yet destroyed ([`Handle::close`] destroys early).
    live: bool,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Handle<K> {
    /// Takes ownership of `handle`, just created on `dev`.
    pub(crate) fn new(dev: &Arc<Dev>, handle: u32) -> Handle<K> {
        Handle {
            dev: dev.clone(),
            handle,
            keep: Vec::new(),
            live: true,
            _kind: PhantomData,
        }
    }

    /// The kernel's handle.
    pub(crate) fn raw(&self) -> u32 {
        self.handle
    }

    /// Keeps `mem` until after the object's DESTROY has succeeded (queue
    /// buffers and doorbell records the device uses, an MR's pages).
    pub(crate) fn keep(&mut self, mem: impl Send + Sync + 'static) {
        self.keep.push(Box::new(mem));
    }

    /// Destroys the object now and says whether the kernel agreed: on
    /// success what it kept is freed; on failure it is leaked (the kernel
    /// still has the object). Either way nothing is left to do on drop.
    pub(crate) fn close(mut self) -> Result<()> {
        self.destroy_now()
    }

    fn destroy_now(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        let r = K::destroy(&self.dev, self.handle);
        let keep = std::mem::take(&mut self.keep);
        if r.is_err() {
            // The kernel still has the object: what it or the device may
            // touch must never return to the process.
            std::mem::forget(keep);
        }
        r
    }
}

impl<K: Kind> Drop for Handle<K> {
    fn drop(&mut self) {
        let _ = self.destroy_now();
    }
}

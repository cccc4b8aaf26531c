//! The command layer: every uverbs command rverbs issues, one file per
//! kernel object, all through one executor ([`Dev`]) and uverbs-abi's typed
//! descriptors (`WriteCmd`, `ExWriteCmd`, whose names errors carry, and the
//! ioctl attribute builder, made per [`method::Method`]); the RDMA netlink
//! commands that find devices ([`device`]) and manage links ([`link`]).
//! Nothing above this module frames a command.
//!
//! Where a query has more than one kernel interface — an ioctl method, the
//! write command, sysfs ([`sysfs`], the one file that reads it) — the
//! choice is made here, once per query function, from what the device's
//! kernel already said ([`method`]: rdma-core's `cmd_fallback.c`).
//!
//! Kernel objects are held by [`Handle`]s, the control half of each object:
//! dropping one issues its DESTROY command, and releases the memory the
//! kernel or the device may use ([`Handle::keep`]) only once the kernel has
//! destroyed the object. If the kernel refuses, that memory is leaked — a
//! bounded loss, against the device writing memory the process reuses.

pub(crate) mod ah;
pub(crate) mod context;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod link;
pub(crate) mod mcast;
pub(crate) mod method;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod pd;
pub(crate) mod port;
pub(crate) mod qp;
pub(crate) mod srq;
pub(crate) mod sysfs;

use crate::error::{Error, Result};
use crate::sys;
use method::{Call, Method, Support};
use std::marker::PhantomData;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use uverbs_abi::ioctl as io;
use uverbs_abi::verbs::{self as v, ExWriteCmd, WriteCmd};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Which kernel interface carries a context's commands.
///
/// Kernels since 4.20 take every verb as an `RDMA_VERBS_IOCTL` method
/// (attribute arrays); the older `write()` commands remain and are what the
/// ioctl-only methods fall back to. rdma-core tries the ioctl first and
/// falls back to `write()` where the kernel answers that it lacks the
/// method; so does opening a context.
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
    /// The device's name: where sysfs keeps what the ioctl methods would
    /// answer, for the fallback.
    pub(crate) name: String,
    /// The ioctl methods this device's kernel said it lacks.
    support: Support,
}

impl Dev {
    /// A device opened as `fd`, its commands carried by `path`.
    pub(crate) fn new(fd: OwnedFd, name: &str, driver_id: u32, path: CommandPath) -> Dev {
        Dev {
            fd,
            path,
            driver_id,
            name: name.to_string(),
            support: Support::new(),
        }
    }

    /// Executes write() command `C` with driver udata both ways and
    /// returns its core response; the driver's answer lands in
    /// `udata_out`. A command without a response (`C::Resp = ()`) gets no
    /// response buffer.
    pub(crate) fn write<C: WriteCmd>(
        &self,
        req: &C::Req,
        udata_in: &[u8],
        udata_out: &mut [u8],
    ) -> Result<C::Resp>
    where
        C::Resp: FromZeros,
    {
        let op = C::NAME;
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
    pub(crate) fn write0<C: WriteCmd>(&self, req: &C::Req) -> Result<C::Resp>
    where
        C::Resp: FromZeros,
    {
        self.write::<C>(req, &[], &mut [])
    }

    /// Executes extended write() command `C` (`ib_uverbs_ex_cmd_hdr`). The
    /// kernel writes at most the response's size and says in the response
    /// how much it filled.
    pub(crate) fn write_ex<C: ExWriteCmd>(&self, req: &C::Req) -> Result<C::Resp>
    where
        C::Resp: FromZeros,
    {
        let op = C::NAME;
        let mut resp = C::Resp::new_zeroed();
        let bytes =
            v::encode_ex_write_vec::<C>(req, &[], resp.as_mut_bytes().as_mut_ptr() as u64, 0)
                .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
        // SAFETY: the response pointer is `resp`, of the size the header
        // declares, alive across the call.
        unsafe { sys::write_cmd(self.fd.as_fd(), op, &bytes) }?;
        Ok(resp)
    }

    /// A call of ioctl `method` on this device, its attributes in
    /// `storage`.
    pub(crate) fn call<'b>(&self, method: Method, storage: &'b mut [u64]) -> Call<'b> {
        Call::new(method, storage, self.driver_id)
    }

    /// Issues `call` (one `RDMA_VERBS_IOCTL`), unless the kernel said it
    /// lacks the method: then it fails at once, as it did then (see
    /// [`method`]). Its error names the method.
    pub(crate) fn ioctl(&self, call: &mut Call<'_>) -> Result<()> {
        let op = call.method.name();
        if let Some(errno) = self.support.lacks(call.method) {
            return Err(Error::kernel(op, errno));
        }
        let buf = call
            .ioctl_buf()
            .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
        // SAFETY: the attribute builder ties every pointer attribute to a
        // buffer borrowed for the array's lifetime, which spans this call.
        let r =
            unsafe { sys::verbs_ioctl(self.fd.as_fd(), op, u64::from(io::RDMA_VERBS_IOCTL), buf) };
        if let Err(Error::Kernel { errno, .. }) = &r {
            self.support.learn(call.method, *errno);
        }
        r
    }
}

/// Whether an ioctl error means "this kernel has no such method (or no
/// ioctl ABI at all)", the cases where rverbs falls back to `write()` or
/// sysfs (rdma-core: `ENOTTY` and `EPROTONOSUPPORT`; rverbs also takes
/// the driver's `EOPNOTSUPP`, without remembering it).
pub(crate) fn ioctl_unsupported(e: &Error) -> bool {
    matches!(
        e.errno().map(|e| e.0),
        Some(libc::ENOTTY | libc::EPROTONOSUPPORT | libc::EOPNOTSUPP)
    )
}

/// A probe's answer: whether the kernel has the ioctl method it issued.
/// "No such method" is absence; any other answer, success or a refusal of
/// the arguments, means the method is there.
pub(crate) fn method_present<T>(r: Result<T>) -> Result<bool> {
    match r {
        Ok(_) => Ok(true),
        Err(e) if ioctl_unsupported(&e) => Ok(false),
        Err(e) if e.errno().is_some() => Ok(true),
        Err(e) => Err(e),
    }
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

    /// Destroys the object now if the kernel agrees; if it refuses (an MR
    /// a window is bound to, a PD still in use), the handle stays live and
    /// keeps its memory, so that a later try, or the drop, destroys it —
    /// what rdma-core's `ibv_dereg_mr` and `ibv_dealloc_*` leave a program.
    pub(crate) fn try_close(&mut self) -> Result<()> {
        if !self.live {
            return Ok(());
        }
        K::destroy(&self.dev, self.handle)?;
        self.live = false;
        self.keep.clear();
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_answers_are_read_as_the_kernel_means_them() {
        let k = |errno| -> Result<()> {
            Err(Error::Kernel {
                op: "X",
                errno: crate::error::Errno(errno),
            })
        };
        assert!(method_present(Ok(())).unwrap());
        for absent in [libc::EOPNOTSUPP, libc::EPROTONOSUPPORT, libc::ENOTTY] {
            assert!(!method_present(k(absent)).unwrap());
        }
        // The method looked at the arguments and refused them: it exists.
        assert!(method_present(k(libc::EINVAL)).unwrap());
        assert!(method_present::<()>(Err(Error::invalid("x"))).is_err());
    }

    /// A kernel without the ioctl interface is asked once: `/dev/null`
    /// answers `RDMA_VERBS_IOCTL` with ENOTTY, as such a kernel does. Then
    /// the fd is swapped for one on which every call fails with EBADF, so
    /// that an ioctl issued again would show.
    #[test]
    fn enotty_is_remembered_and_queries_fall_back_to_write() {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |flags| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(flags)
                .open("/dev/null");
            OwnedFd::from(f.unwrap())
        };
        let mut dev = Dev::new(open(0), "null0", 0, CommandPath::Ioctl);
        let errno = |r: Result<_>| match r {
            Err(Error::Kernel { op, errno }) => (op, errno.0),
            r => panic!("{:?}", r.map(drop)),
        };
        let first = errno(port::query_port_ioctl(&dev, 1).map(drop));
        assert_eq!(first, ("QUERY_PORT (ioctl)", libc::ENOTTY));
        dev.fd = open(libc::O_PATH);
        // Every method is now answered from what the kernel said.
        let again = errno(port::gid_entry_ioctl(&dev, 1, 0).map(drop));
        assert_eq!(again, ("QUERY_GID_ENTRY", libc::ENOTTY));
        // A query with a write twin takes it without trying the ioctl.
        let write = errno(port::query_port(&dev, 1).map(drop));
        assert_eq!(write, ("QUERY_PORT", libc::EBADF));
    }
}

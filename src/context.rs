//! An open device: the uverbs command fd, its async-event fd, and the
//! command execution every object uses.

use crate::device::{Device, Driver};
use crate::error::{Error, Result};
use crate::sys;
use std::fs::OpenOptions;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::sync::Arc;
use uverbs_abi::ioctl::{self as io, AttrArray, RdmaDriverId};
use uverbs_abi::verbs as v;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};

/// Which kernel interface carries a context's commands.
///
/// Kernels since 4.20 take every verb as an `RDMA_VERBS_IOCTL` method
/// (attribute arrays); the older `write()` commands remain and are what the
/// ioctl-only methods fall back to. rdma-core tries the ioctl first and
/// falls back to `write()` where the kernel answers that it lacks the
/// method; so does [`Context::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandPath {
    /// `RDMA_VERBS_IOCTL` where a method exists (context, async event fd,
    /// port and GID queries), `write()` for the rest.
    Ioctl,
    /// `write()` only (and sysfs for the GID table), as on kernels before
    /// the ioctl ABI.
    Write,
}

/// An open RDMA device (`ibv_context`). Cheap to clone; the device is
/// closed when the last clone and every object created from it are gone.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) fd: OwnedFd,
    pub(crate) async_fd: OwnedFd,
    pub(crate) device: Device,
    pub(crate) num_comp_vectors: u32,
    pub(crate) path: CommandPath,
    /// `RDMA_DRIVER_*` of the device, for the ioctl header.
    pub(crate) driver_id: u32,
    /// mlx5 devices: the driver's context answer and the mapped UARs.
    pub(crate) mlx5: Option<crate::mlx5::Mlx5Ctx>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.device.name())
            .finish()
    }
}

impl Context {
    /// Opens `dev`: its uverbs character device, then `GET_CONTEXT` — the
    /// ioctl method (and `ASYNC_EVENT_ALLOC` for the async event fd), or the
    /// `write()` command where the kernel lacks the method.
    ///
    /// Refuses devices whose driver has no rverbs provider, naming the
    /// driver. rxe and mlx5 have one; mlx5 has not yet run on hardware
    /// (see the README).
    pub fn open(dev: &Device) -> Result<Context> {
        Context::open_via(dev, CommandPath::Ioctl)
    }

    /// Opens `dev` using `path` where there is a choice.
    /// [`CommandPath::Ioctl`] still falls back to `write()` when the kernel
    /// has no ioctl `GET_CONTEXT`; [`CommandPath::Write`] never issues an
    /// ioctl (useful to test the path older kernels take).
    pub fn open_via(dev: &Device, path: CommandPath) -> Result<Context> {
        let (driver_id, abis) = match dev.driver() {
            Driver::Rxe => (RdmaDriverId::RXE.0, 1..=2),
            Driver::Mlx5 => {
                let v = uverbs_abi::mlx5::MLX5_IB_UVERBS_ABI_VERSION;
                (RdmaDriverId::MLX5.0, v..=v)
            }
            Driver::Other => {
                return Err(Error::UnsupportedDriver {
                    device: dev.name().to_string(),
                    driver: dev.driver_name().to_string(),
                })
            }
        };
        if !abis.contains(&dev.driver_abi()) {
            return Err(Error::UnsupportedDriver {
                device: dev.name().to_string(),
                driver: format!("{} with driver ABI {}", dev.driver_name(), dev.driver_abi()),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(dev.dev_path())
            .map_err(|e| Error::Io {
                what: format!("opening {}", dev.dev_path().display()),
                source: e,
            })?;
        // The node must be the character device sysfs named, not a file
        // someone put in its place (rdma-core checks the same).
        let meta = file.metadata().map_err(|e| Error::Io {
            what: format!("stat {}", dev.dev_path().display()),
            source: e,
        })?;
        let (maj, min) = dev.dev_t;
        if libc::major(meta.rdev()) != maj || libc::minor(meta.rdev()) != min {
            return Err(Error::bad_answer(format!(
                "{} is not the character device {maj}:{min} sysfs names",
                dev.dev_path().display()
            )));
        }
        let fd = OwnedFd::from(file);
        if dev.driver() == Driver::Mlx5 {
            // mlx5's GET_CONTEXT carries driver udata both ways; the write
            // command takes it on every kernel.
            let (async_fd, num_comp_vectors, mx) = crate::mlx5::get_context(&fd)?;
            return Ok(Context {
                inner: Arc::new(ContextInner {
                    fd,
                    async_fd,
                    device: dev.clone(),
                    num_comp_vectors,
                    path: CommandPath::Write,
                    driver_id,
                    mlx5: Some(mx),
                }),
            });
        }
        let ioctl = match path {
            CommandPath::Ioctl => get_context_ioctl(&fd, driver_id)?,
            CommandPath::Write => None,
        };
        let (path, async_fd, num_comp_vectors) = match ioctl {
            Some((fd_async, n)) => (CommandPath::Ioctl, fd_async, n),
            None => {
                let (fd_async, n) = get_context_write(&fd)?;
                (CommandPath::Write, fd_async, n)
            }
        };
        Ok(Context {
            inner: Arc::new(ContextInner {
                fd,
                async_fd,
                device: dev.clone(),
                num_comp_vectors,
                path,
                driver_id,
                mlx5: None,
            }),
        })
    }

    /// Opens the device named `name`, or the first device if `None`.
    pub fn open_by_name(name: Option<&str>) -> Result<Context> {
        Context::open(&Device::find(name)?)
    }

    /// The device this context is open on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Completion vectors the device offers.
    pub fn num_comp_vectors(&self) -> u32 {
        self.inner.num_comp_vectors
    }

    /// The interface this context's commands go through: `Ioctl` unless it
    /// was opened with [`CommandPath::Write`] or the kernel lacks the ioctl
    /// `GET_CONTEXT`.
    pub fn command_path(&self) -> CommandPath {
        self.inner.path
    }

    /// The async event fd (pollable; see [`crate::event`]).
    pub fn async_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.async_fd.as_fd()
    }
}

/// Whether an ioctl error means "this kernel has no such method (or no
/// ioctl ABI at all)", the cases where rdma-core falls back to `write()`.
pub(crate) fn ioctl_unsupported(e: &Error) -> bool {
    matches!(
        e.errno().map(|e| e.0),
        Some(libc::ENOTTY | libc::EPROTONOSUPPORT | libc::EOPNOTSUPP)
    )
}

/// `GET_CONTEXT` through the ioctl method, then the async event fd through
/// `ASYNC_EVENT_ALLOC` (the ioctl `GET_CONTEXT`, unlike the write command,
/// does not create one). `None` when the kernel lacks the method.
fn get_context_ioctl(fd: &OwnedFd, driver_id: u32) -> Result<Option<(OwnedFd, u32)>> {
    let mut num_comp_vectors = [0u8; 4];
    let mut core_support = [0u8; 8];
    let mut storage = [0u64; io::attr_buf_words(2)];
    let mut attrs = AttrArray::new(
        &mut storage,
        io::UVERBS_OBJECT_DEVICE,
        io::UVERBS_METHOD_GET_CONTEXT,
        driver_id,
    );
    attrs
        .ptr_out(
            io::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
            &mut num_comp_vectors,
        )
        .ptr_out(io::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &mut core_support);
    match run_ioctl(fd, "GET_CONTEXT (ioctl)", &mut attrs) {
        Ok(()) => {}
        Err(e) if ioctl_unsupported(&e) => return Ok(None),
        Err(e) => return Err(e),
    }

    let mut storage = [0u64; io::attr_buf_words(1)];
    let mut attrs = AttrArray::new(
        &mut storage,
        io::UVERBS_OBJECT_ASYNC_EVENT,
        io::UVERBS_METHOD_ASYNC_EVENT_ALLOC,
        driver_id,
    );
    attrs.fd_new(io::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE);
    run_ioctl(fd, "ASYNC_EVENT_ALLOC", &mut attrs)?;
    let raw = attrs
        .new_fd(io::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
        .filter(|&f| f >= 0)
        .ok_or_else(|| Error::bad_answer("ASYNC_EVENT_ALLOC: no fd written back"))?;
    // SAFETY: the kernel just installed this fd for us in ASYNC_EVENT_ALLOC
    // and nothing else owns it.
    let async_fd = unsafe { OwnedFd::from_raw_fd(raw) };
    Ok(Some((async_fd, u32::from_ne_bytes(num_comp_vectors))))
}

/// `GET_CONTEXT` through the `write()` command: it also creates the async
/// event fd.
fn get_context_write(fd: &OwnedFd) -> Result<(OwnedFd, u32)> {
    get_context_write_udata(fd, &[], &mut [])
}

/// `GET_CONTEXT` through `write()` with driver udata in and out.
pub(crate) fn get_context_write_udata(
    fd: &OwnedFd,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<(OwnedFd, u32)> {
    let resp: v::IbUverbsGetContextResp = exec_write(
        fd,
        "GET_CONTEXT",
        v::IB_USER_VERBS_CMD_GET_CONTEXT,
        |response| {
            let mut c = v::IbUverbsGetContext::new_zeroed();
            c.response = response;
            c
        },
        udata_in,
        udata_out,
    )?;
    // SAFETY: the kernel just created this fd for us in GET_CONTEXT and
    // nothing else owns it.
    let async_fd = unsafe { OwnedFd::from_raw_fd(resp.async_fd as i32) };
    Ok((async_fd, resp.num_comp_vectors))
}

/// Issues one `RDMA_VERBS_IOCTL` with `attrs`.
fn run_ioctl(fd: &OwnedFd, op: &'static str, attrs: &mut AttrArray<'_>) -> Result<()> {
    let buf = attrs
        .ioctl_buf()
        .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
    sys::verbs_ioctl(fd.as_fd(), op, u64::from(io::RDMA_VERBS_IOCTL), buf)
}

impl ContextInner {
    /// Issues one `RDMA_VERBS_IOCTL` on this context.
    pub(crate) fn ioctl(&self, op: &'static str, attrs: &mut AttrArray<'_>) -> Result<()> {
        run_ioctl(&self.fd, op, attrs)
    }

    /// Executes an extended write() command (`ib_uverbs_ex_cmd_hdr`) and
    /// returns its response. The kernel writes at most the response's size
    /// and says in the response how much it filled.
    pub(crate) fn cmd_ex<C: v::ExWriteCmd>(&self, op: &'static str, req: &C::Req) -> Result<C::Resp>
    where
        C::Resp: FromBytes + IntoBytes + FromZeros,
    {
        let mut resp = C::Resp::new_zeroed();
        let bytes =
            v::encode_ex_write_vec::<C>(req, &[], resp.as_mut_bytes().as_mut_ptr() as u64, 0)
                .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
        sys::write_cmd(self.fd.as_fd(), op, &bytes)?;
        Ok(resp)
    }

    /// Executes a write() command with a response.
    pub(crate) fn cmd<Req, Resp>(
        &self,
        op: &'static str,
        cmd: u32,
        make: impl FnOnce(u64) -> Req,
        udata_in: &[u8],
        udata_out: &mut [u8],
    ) -> Result<Resp>
    where
        Req: IntoBytes + Immutable,
        Resp: FromBytes + IntoBytes + FromZeros,
    {
        exec_write(&self.fd, op, cmd, make, udata_in, udata_out)
    }

    /// Executes a write() command with no response from raw request bytes
    /// (core struct followed by driver udata).
    pub(crate) fn cmd_raw_no_resp(&self, op: &'static str, cmd: u32, req: &[u8]) -> Result<()> {
        let bytes = frame(cmd, req, &[], 0)?;
        sys::write_cmd(self.fd.as_fd(), op, &bytes)
    }

    /// Executes a write() command that has no response.
    pub(crate) fn cmd_no_resp<Req: IntoBytes + Immutable>(
        &self,
        op: &'static str,
        cmd: u32,
        req: &Req,
    ) -> Result<()> {
        let bytes = frame(cmd, req.as_bytes(), &[], 0)?;
        sys::write_cmd(self.fd.as_fd(), op, &bytes)
    }
}

/// The 8-byte `ib_uverbs_cmd_hdr` then the payload: `in_words` counts the
/// whole write in 4-byte words, `out_words` the response buffer.
fn frame(cmd: u32, req: &[u8], udata_in: &[u8], out_len: usize) -> Result<Vec<u8>> {
    let total = 8 + req.len() + udata_in.len();
    if total % 4 != 0 || out_len % 4 != 0 {
        return Err(Error::invalid("command or udata not a multiple of 4 bytes"));
    }
    let in_words = u16::try_from(total / 4).map_err(|_| Error::invalid("command too long"))?;
    let out_words = u16::try_from(out_len / 4).map_err(|_| Error::invalid("response too long"))?;
    let mut hdr = v::IbUverbsCmdHdr::new_zeroed();
    hdr.command = cmd;
    hdr.in_words = in_words;
    hdr.out_words = out_words;
    let mut bytes = Vec::with_capacity(total);
    bytes.extend_from_slice(hdr.as_bytes());
    bytes.extend_from_slice(req);
    bytes.extend_from_slice(udata_in);
    Ok(bytes)
}

fn exec_write<Req, Resp>(
    fd: &OwnedFd,
    op: &'static str,
    cmd: u32,
    make: impl FnOnce(u64) -> Req,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<Resp>
where
    Req: IntoBytes + Immutable,
    Resp: FromBytes + IntoBytes + FromZeros,
{
    let core = std::mem::size_of::<Resp>();
    // The kernel writes the core response, then the driver's, contiguously.
    let mut resp = vec![0u64; (core + udata_out.len()).div_ceil(8)];
    let resp_bytes = resp.as_mut_bytes();
    let req = make(resp_bytes.as_mut_ptr() as u64);
    let bytes = frame(cmd, req.as_bytes(), udata_in, core + udata_out.len())?;
    sys::write_cmd(fd.as_fd(), op, &bytes)?;
    let resp_bytes = resp.as_bytes();
    udata_out.copy_from_slice(&resp_bytes[core..core + udata_out.len()]);
    Resp::read_from_prefix(resp_bytes)
        .map(|(r, _)| r)
        .map_err(|_| Error::bad_answer(format!("{op}: response shorter than its struct")))
}

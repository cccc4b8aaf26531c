//! An open device: the uverbs command fd, its async-event fd, and the
//! provider state every object is created through.

use crate::cmd::Dev;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::provider;
use std::fs::OpenOptions;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::sync::Arc;

pub use crate::cmd::CommandPath;

/// An open RDMA device (`ibv_context`). Cheap to clone; the device is
/// closed when the last clone and every object created from it are gone.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

pub(crate) struct ContextInner {
    /// The command fd and how commands are carried.
    pub(crate) dev: Arc<Dev>,
    pub(crate) async_fd: OwnedFd,
    pub(crate) device: Device,
    pub(crate) num_comp_vectors: u32,
    /// The provider's per-device state.
    pub(crate) provider: provider::Ctx,
    /// The device's extended capability flags, queried once: rxe's
    /// CREATE_QP consults them for every QP, and a device's capabilities
    /// do not change under an open context (querying each time made a
    /// QP's creation one kernel command longer than rdma-core's).
    pub(crate) cap_flags_ex: std::sync::OnceLock<u64>,
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
        let (maj, min) = dev.id.dev_t;
        if libc::major(meta.rdev()) != maj || libc::minor(meta.rdev()) != min {
            return Err(Error::bad_answer(format!(
                "{} is not the character device {maj}:{min} sysfs names",
                dev.dev_path().display()
            )));
        }
        let (cmd_dev, opened, provider) = provider::open(&dev.id, OwnedFd::from(file), path)?;
        Ok(Context {
            inner: Arc::new(ContextInner {
                dev: cmd_dev,
                async_fd: opened.async_fd,
                device: dev.clone(),
                num_comp_vectors: opened.num_comp_vectors,
                cap_flags_ex: std::sync::OnceLock::new(),
                provider,
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
        self.inner.dev.path
    }

    /// The async event fd (pollable; see [`AsyncEvent`](crate::event::AsyncEvent)).
    pub fn async_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.inner.async_fd.as_fd()
    }
}

//! [`EventChannel`]: one open of `/dev/infiniband/rdma_cm`.

use crate::error::{Error, Result};
use crate::event::Event;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use uverbs_abi::cm as c;
use zerocopy::{FromZeros, Immutable, IntoBytes};

/// An open rdma_cm device: the fd commands are written to and events are
/// read from. Pollable (readable when an event is queued). Blocking unless
/// [`set_nonblocking`](Self::set_nonblocking) was called.
#[derive(Debug)]
pub struct EventChannel {
    fd: OwnedFd,
}

impl EventChannel {
    /// Opens `/dev/infiniband/rdma_cm` (close-on-exec) and checks that the
    /// kernel speaks ABI version 4.
    pub fn open() -> Result<EventChannel> {
        if let Ok(v) = std::fs::read_to_string("/sys/class/misc/rdma_cm/abi_version") {
            if v.trim() != c::RDMA_USER_CM_ABI_VERSION.to_string() {
                return Err(Error::BadKernelAnswer(format!(
                    "rdma_cm ABI version {} (this crate speaks {})",
                    v.trim(),
                    c::RDMA_USER_CM_ABI_VERSION
                )));
            }
        }
        let path = c"/dev/infiniband/rdma_cm";
        // SAFETY: path is a NUL-terminated string; open has no other
        // memory effects.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last("open /dev/infiniband/rdma_cm", None));
        }
        // SAFETY: open just returned this fd; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventChannel { fd })
    }

    /// Makes [`get_event`](Self::get_event) return `EAGAIN` instead of
    /// blocking when no event is queued (or blocking again).
    pub fn set_nonblocking(&self, nonblocking: bool) -> Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on an fd we own; no memory is passed.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(Error::last("fcntl(F_GETFL)", None));
        }
        let flags = if nonblocking {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags) } < 0 {
            return Err(Error::last("fcntl(F_SETFL)", None));
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` (-1: forever) for an event to be queued;
    /// `Ok(false)` on timeout.
    pub fn poll(&self, timeout_ms: i32) -> Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: p is one valid pollfd for the duration of the call.
            let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
            if r < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(Error::last("poll", None));
            }
            return Ok(r > 0);
        }
    }

    /// Takes the next event (`GET_EVENT`): blocks until one is queued, or
    /// fails with `EAGAIN` on a non-blocking channel. Each event is
    /// returned once; the kernel counts it as reported to its id.
    pub fn get_event(&self) -> Result<Event> {
        let mut resp = c::RdmaUcmEventResp::new_zeroed();
        let cmd = c::RdmaUcmGetEvent {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
        };
        self.command(
            "GET_EVENT",
            None,
            c::RDMA_USER_CM_CMD_GET_EVENT,
            &cmd,
            size_of::<c::RdmaUcmEventResp>(),
        )?;
        Ok(Event::from_kernel(&resp))
    }

    /// Writes one command whose `response` field (if any) already points to
    /// a buffer of `out_len` bytes.
    pub(crate) fn command<T: IntoBytes + Immutable>(
        &self,
        op: &'static str,
        id: Option<u32>,
        cmd: u32,
        payload: &T,
        out_len: usize,
    ) -> Result<()> {
        let bytes = c::encode_cmd(cmd, payload, out_len)
            .map_err(|e| Error::InvalidArgument(format!("{op}: {e}")))?;
        loop {
            // SAFETY: bytes is a valid buffer of bytes.len() bytes; the
            // response address inside it (if any) was set by the caller to
            // a live buffer of out_len bytes that outlives this call.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
            if n < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(Error::last(op, id));
            }
            if n as usize != bytes.len() {
                return Err(Error::BadKernelAnswer(format!(
                    "{op}: write() took {n} of {} bytes",
                    bytes.len()
                )));
            }
            return Ok(());
        }
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

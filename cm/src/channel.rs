//! [`EventChannel`]: one open of `/dev/infiniband/rdma_cm`.

use crate::error::{Error, Result};
use crate::event::Event;
use crate::sys;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
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
        let fd = sys::open_rw(c"/dev/infiniband/rdma_cm")
            .map_err(|errno| Error::kernel("open /dev/infiniband/rdma_cm", None, errno))?;
        Ok(EventChannel { fd })
    }

    /// Makes [`get_event`](Self::get_event) return `EAGAIN` instead of
    /// blocking when no event is queued (or blocking again).
    pub fn set_nonblocking(&self, nonblocking: bool) -> Result<()> {
        sys::set_nonblocking(self.fd.as_fd(), nonblocking)
            .map_err(|errno| Error::kernel("fcntl(O_NONBLOCK)", None, errno))
    }

    /// Waits up to `timeout_ms` (-1: forever) for an event to be queued;
    /// `Ok(false)` on timeout.
    pub fn poll(&self, timeout_ms: i32) -> Result<bool> {
        sys::poll_readable(self.fd.as_fd(), timeout_ms)
            .map_err(|errno| Error::kernel("poll", None, errno))
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
        // SAFETY: the response address inside `bytes` (if any) was set by
        // the caller to a live buffer of out_len bytes that outlives this
        // call.
        let n = unsafe { sys::write_cmd(self.fd.as_fd(), &bytes) }
            .map_err(|errno| Error::kernel(op, id, errno))?;
        if n != bytes.len() {
            return Err(Error::BadKernelAnswer(format!(
                "{op}: write() took {n} of {} bytes",
                bytes.len()
            )));
        }
        Ok(())
    }
}

impl AsFd for EventChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

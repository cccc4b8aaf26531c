//! Every system call of this crate, and its one `EINTR` retry: open, fcntl,
//! poll and write of the rdma_cm device. Errors are bare errnos; callers
//! name the command.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use uverbs_abi::Errno;

/// Runs `call` until it does not fail with `EINTR`.
fn retry(mut call: impl FnMut() -> isize) -> Result<usize, Errno> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = Errno::last();
        if e != Errno::EINTR {
            return Err(e);
        }
    }
}

/// Opens `path` read-write, close-on-exec.
pub(crate) fn open_rw(path: &CStr) -> Result<OwnedFd, Errno> {
    // SAFETY: path is a NUL-terminated string; open has no other memory
    // effects.
    let fd =
        retry(|| unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) as isize })?;
    // SAFETY: open just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sets or clears `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>, nonblocking: bool) -> Result<(), Errno> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL on a live fd; no memory is passed.
    let flags = retry(|| unsafe { libc::fcntl(fd, libc::F_GETFL) as isize })? as i32;
    let flags = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above, F_SETFL.
    retry(|| unsafe { libc::fcntl(fd, libc::F_SETFL, flags) as isize }).map(drop)
}

/// Waits up to `timeout_ms` (-1: forever) for `fd` to be readable.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> Result<bool, Errno> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: p is one valid pollfd for the duration of the call.
    Ok(retry(|| unsafe { libc::poll(&mut p, 1, timeout_ms) as isize })? > 0)
}

/// Writes one rdma_cm command in one `write()`; returns the count taken.
///
/// # Safety
/// The response address inside `cmd` (if any) must point to a live buffer
/// of the length the command declares, which outlives the call.
pub(crate) unsafe fn write_cmd(fd: BorrowedFd<'_>, cmd: &[u8]) -> Result<usize, Errno> {
    // SAFETY: cmd is valid for cmd.len() bytes; the pointers it carries
    // are valid by this function's contract.
    retry(|| unsafe { libc::write(fd.as_raw_fd(), cmd.as_ptr().cast(), cmd.len()) })
}

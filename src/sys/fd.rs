//! File-status flags of the event fds: `O_NONBLOCK`, which an async
//! reactor needs (it reads until `EAGAIN` after every readiness report and
//! must never block its thread in `read()`).

use super::retry;
use crate::error::Result;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Sets or clears `O_NONBLOCK` on `fd` (`fcntl(F_GETFL)`, then
/// `fcntl(F_SETFL)` with the other flags kept). The flag belongs to the
/// open file description, so every duplicate of the fd sees it.
pub fn set_nonblocking(fd: BorrowedFd<'_>, op: &'static str, nonblocking: bool) -> Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: F_GETFL on an fd the BorrowedFd keeps open; no memory is
    // passed to the kernel.
    let flags = retry(op, || unsafe { libc::fcntl(raw, libc::F_GETFL) as isize })? as i32;
    let want = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    if want == flags {
        return Ok(());
    }
    // SAFETY: as above; F_SETFL takes an int argument, no pointer.
    retry(op, || unsafe {
        libc::fcntl(raw, libc::F_SETFL, want) as isize
    })
    .map(drop)
}

/// A duplicate of `fd` (`F_DUPFD_CLOEXEC`: the same open file, so the same
/// readiness and file-status flags), registered with the current tokio
/// reactor for readability (`epoll_ctl(ADD)` on tokio's epoll). The
/// duplicate is owned by the returned `AsyncFd`, which the reactor needs:
/// registering an fd the caller could close while it is registered is
/// what tokio's `register_with_interest` makes unsafe. `op` names the fd
/// in errors. Panics outside a runtime with IO enabled, as tokio does:
/// callers check for a runtime first.
#[cfg(feature = "tokio")]
pub fn register_readable(
    fd: BorrowedFd<'_>,
    op: &'static str,
) -> Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    let dup = fd
        .try_clone_to_owned()
        .map_err(|e| crate::error::Error::Io {
            what: format!("dup of the {op}"),
            source: e,
        })?;
    // SAFETY: `dup` is an OwnedFd moved into the AsyncFd: it stays open,
    // on the same open file, until the AsyncFd drops it (after tokio
    // deregistered it), and `as_raw_fd` always returns that one fd.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(dup, tokio::io::Interest::READABLE) }
        .map_err(|e| crate::error::Error::Io {
            what: format!("registering the {op} with the tokio reactor"),
            source: e.into(),
        })
}

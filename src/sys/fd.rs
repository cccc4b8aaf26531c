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

/// A handle that owns one event fd for its whole life: the fd its
/// [`held_fd`](Self::held_fd) returns is the same at every call and is
/// closed only when the last clone of the handle is dropped.
///
/// # Safety
/// An implementation must keep both promises: tokio's reactor keeps the fd
/// registered for as long as it holds the handle, and a closed (or reused)
/// fd number under a registration is what `register_with_interest` makes
/// unsafe.
#[cfg(feature = "tokio")]
pub unsafe trait HoldsFd {
    fn held_fd(&self) -> BorrowedFd<'_>;
}

/// The handle the reactor holds: its fd is the handle's. The handle is
/// private and reached only through [`get`](Self::get), so nothing can
/// swap it for another (through `AsyncFd::get_mut`) while registered.
#[cfg(feature = "tokio")]
pub struct Held<T>(T);

#[cfg(feature = "tokio")]
impl<T> Held<T> {
    pub fn get(&self) -> &T {
        &self.0
    }
}

#[cfg(feature = "tokio")]
impl<T: HoldsFd> AsRawFd for Held<T> {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.held_fd().as_raw_fd()
    }
}

/// Registers `holder`'s own fd with the current tokio reactor for
/// readability, without a duplicate: for an fd that has one reader, such
/// as the private channel of an `AsyncCq` or an `AsyncCmId`, so that each
/// costs one fd, as rdma-core's channel does. (`epoll_ctl(ADD)` refuses an
/// fd registered already, so an fd with several readers takes
/// [`register_readable`].) Panics outside a runtime, as that does.
#[cfg(feature = "tokio")]
pub fn register_holder<T: HoldsFd>(
    holder: T,
    op: &'static str,
) -> Result<tokio::io::unix::AsyncFd<Held<T>>> {
    // SAFETY: the AsyncFd owns `holder`, which (HoldsFd) keeps the one fd
    // it names open and unchanged until it is dropped, after tokio has
    // deregistered it.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            Held(holder),
            tokio::io::Interest::READABLE,
        )
    }
    .map_err(|e| crate::error::Error::Io {
        what: format!("registering the {op} with the tokio reactor"),
        source: e.into(),
    })
}

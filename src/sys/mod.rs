//! The only place the root crate makes system calls on the uverbs device:
//! `write()` of a command, the verbs `ioctl()`, and `mmap()` of kernel
//! queues. Everything above works with safe wrappers from here.

mod mapping;

pub use mapping::Mapping;

use crate::error::{Errno, Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Writes one uverbs command (header, payload, driver udata) in one `write()`
/// call. The kernel takes the whole command or fails it: a short count is an
/// ABI violation, reported as such.
pub fn write_cmd(fd: BorrowedFd<'_>, op: &'static str, cmd: &[u8]) -> Result<()> {
    loop {
        // SAFETY: cmd is a valid slice for cmd.len() bytes; any response
        // pointer inside it was set by the caller to a buffer that outlives
        // this call (the command builders take it by &mut).
        let n = unsafe { libc::write(fd.as_raw_fd(), cmd.as_ptr().cast(), cmd.len()) };
        if n < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(Error::kernel(op, e));
        }
        if n as usize != cmd.len() {
            return Err(Error::bad_answer(format!(
                "{op}: write() took {n} of {} bytes",
                cmd.len()
            )));
        }
        return Ok(());
    }
}

/// Issues `RDMA_VERBS_IOCTL` with an attribute array (header and attrs, as
/// built by `uverbs_abi::ioctl`).
pub fn verbs_ioctl(
    fd: BorrowedFd<'_>,
    op: &'static str,
    request: u64,
    buf: &mut [u8],
) -> Result<()> {
    loop {
        // SAFETY: buf holds a complete ioctl header + attribute array whose
        // pointer attributes point to buffers the caller keeps alive across
        // this call (the builder's lifetime ties them to `buf`'s borrow).
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, buf.as_mut_ptr()) };
        if r < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(Error::kernel(op, e));
        }
        return Ok(());
    }
}

/// The name of the network interface `ifindex`, or `None` if there is none
/// (it went away, or the index is stale).
pub fn if_name(ifindex: u32) -> Option<String> {
    let mut buf = [0u8; libc::IF_NAMESIZE];
    // SAFETY: buf is IF_NAMESIZE bytes, the size if_indextoname writes at
    // most (name and NUL); it returns NULL or a pointer into buf.
    let r = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr().cast()) };
    if r.is_null() {
        return None;
    }
    let len = buf.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&buf[..len]).ok().map(str::to_string)
}

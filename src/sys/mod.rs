//! Every system call the root crate makes, and the one place that retries
//! on `EINTR`: `write()` of a uverbs command, the verbs `ioctl()`, `read()`
//! and `poll()` of event fds (and their `O_NONBLOCK`, see [`fd`]), the
//! RDMA netlink socket (see [`netlink`]), `mmap()` (see [`Mapping`]), and a
//! few queries (page size, random bytes, interface names). Everything above works
//! with the safe wrappers here.
//!
//! Why `libc` and not `rustix` or `nix`: what is left here is unsafe
//! whatever the wrapper. A uverbs `write()` or `ioctl()` carries pointers
//! the kernel writes through (response buffers, attribute arrays), and an
//! `mmap()` of memory the device shares is unsafe in rustix too (`mmap` is
//! an `unsafe fn` there); the remaining calls (`read`, `poll`, `socket`)
//! are a few lines each. A wrapper crate would add a dependency without
//! removing an `unsafe` block that carries an invariant of ours; `libc` is
//! already linked by `std`.

mod fd;
mod mapping;
pub mod netlink;

#[cfg(feature = "tokio")]
pub use fd::register_readable;
pub use fd::set_nonblocking;
#[cfg(feature = "tokio")]
pub use fd::{register_holder, Held, HoldsFd};

pub use mapping::{kernel_copies_on_fork, Mapping, Reservation};

use crate::error::{Errno, Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Runs `call` until it does not fail with `EINTR`; a negative return is
/// the failure `op` names, with the errno.
fn retry(op: &'static str, mut call: impl FnMut() -> isize) -> Result<usize> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = Errno::last();
        if e.0 != libc::EINTR {
            return Err(Error::kernel(op, e));
        }
    }
}

/// Writes one uverbs command (header, payload, driver udata) in one `write()`
/// call. The kernel takes the whole command or fails it: a short count is an
/// ABI violation, reported as such.
///
/// Inlined, with everything but the one system call out of line: rxe's
/// send doorbell comes through here on every post.
///
/// # Safety
/// Every response pointer inside `cmd` must point to a buffer that is
/// writable for the length the command declares and outlives this call.
#[inline]
pub unsafe fn write_cmd(fd: BorrowedFd<'_>, op: &'static str, cmd: &[u8]) -> Result<()> {
    // SAFETY: cmd is a valid slice for cmd.len() bytes; the pointers it
    // carries are valid by this function's contract.
    let n = unsafe { write_raw(fd.as_raw_fd(), cmd.as_ptr(), cmd.len()) };
    if n >= 0 && n as usize == cmd.len() {
        return Ok(());
    }
    // SAFETY: this function's contract.
    unsafe { write_cmd_again(fd, op, cmd, n) }
}

/// [`write_cmd`] answering only the errno: for a caller that answers one
/// (a C ABI's doorbell), to which an [`Error`], too large for registers,
/// would cost a stack frame in every call. A short write, which no kernel
/// makes of a command, is `EIO`.
///
/// # Safety
/// As for [`write_cmd`].
#[inline(always)]
pub unsafe fn write_cmd_errno(fd: BorrowedFd<'_>, cmd: &[u8]) -> std::result::Result<(), Errno> {
    // SAFETY: as in write_cmd.
    let n = unsafe { write_raw(fd.as_raw_fd(), cmd.as_ptr(), cmd.len()) };
    if n >= 0 && n as usize == cmd.len() {
        return Ok(());
    }
    // SAFETY: this function's contract.
    unsafe { write_cmd_errno_again(fd, cmd, n) }
}

/// [`write_cmd_errno`]'s retry after `EINTR`, and its errors.
///
/// # Safety
/// As for [`write_cmd`].
#[cold]
#[inline(never)]
unsafe fn write_cmd_errno_again(
    fd: BorrowedFd<'_>,
    cmd: &[u8],
    mut n: isize,
) -> std::result::Result<(), Errno> {
    while n == -(libc::EINTR as isize) {
        // SAFETY: as in write_cmd.
        n = unsafe { write_raw(fd.as_raw_fd(), cmd.as_ptr(), cmd.len()) };
    }
    match n {
        n if n < 0 => Err(Errno(-n as i32)),
        n if n as usize != cmd.len() => Err(Errno(libc::EIO)),
        _ => Ok(()),
    }
}

/// `write(2)`, returning the count or `-errno`: on x86_64 and aarch64 one
/// system call instruction, since glibc's wrapper adds a cancellation
/// check and an errno store that rxe's doorbell would pay on every post
/// (callgrind: 7 of the post's instructions); elsewhere, under Miri, and
/// with `--cfg rverbs_libc_syscalls` (for an interposer such as the fake
/// uverbs device of `mlx5-oracle`, which an `LD_PRELOAD` library can only
/// be through libc's symbols), libc's.
///
/// # Safety
/// `buf` must be readable for `len` bytes, and every pointer the bytes
/// carry valid for what the kernel does with it (see [`write_cmd`]).
#[cfg(all(target_arch = "x86_64", not(miri), not(rverbs_libc_syscalls)))]
#[inline(always)]
unsafe fn write_raw(fd: i32, buf: *const u8, len: usize) -> isize {
    let ret: isize;
    // x86_64 Linux's syscall ABI: the number in rax, arguments in rdi, rsi,
    // rdx; the kernel returns in rax, clobbers rcx and r11 only, restores
    // the flags and uses no user stack. Memory is not marked read-only:
    // the kernel writes the response buffers the command names.
    // SAFETY: that ABI, and the caller's contract for `buf` and its pointers.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_write as isize => ret,
            in("rdi") fd as isize,
            in("rsi") buf,
            in("rdx") len,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        )
    };
    ret
}

/// See the x86_64 [`write_raw`].
///
/// # Safety
/// As there.
#[cfg(all(target_arch = "aarch64", not(miri), not(rverbs_libc_syscalls)))]
#[inline(always)]
unsafe fn write_raw(fd: i32, buf: *const u8, len: usize) -> isize {
    let ret: isize;
    // aarch64 Linux's syscall ABI: the number in x8, arguments in x0..x2,
    // the result in x0; `svc 0` clobbers nothing else. Memory as on x86_64.
    // SAFETY: that ABI, and the caller's contract for `buf` and its pointers.
    unsafe {
        core::arch::asm!(
            "svc 0",
            inlateout("x0") fd as isize => ret,
            in("x1") buf,
            in("x2") len,
            in("x8") libc::SYS_write,
            options(nostack, preserves_flags),
        )
    };
    ret
}

/// See the x86_64 [`write_raw`].
///
/// # Safety
/// As there.
#[cfg(any(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    miri,
    rverbs_libc_syscalls
))]
#[inline(always)]
unsafe fn write_raw(fd: i32, buf: *const u8, len: usize) -> isize {
    // SAFETY: the caller's contract.
    let n = unsafe { libc::write(fd, buf.cast(), len) };
    if n < 0 {
        -(Errno::last().0 as isize)
    } else {
        n
    }
}

/// The rare outcomes of [`write_cmd`]'s first try (`n`: a count or
/// `-errno`): an interruption (tried again), a failure, a short count.
///
/// # Safety
/// As for [`write_cmd`].
#[cold]
#[inline(never)]
unsafe fn write_cmd_again(
    fd: BorrowedFd<'_>,
    op: &'static str,
    cmd: &[u8],
    mut n: isize,
) -> Result<()> {
    while n == -(libc::EINTR as isize) {
        // SAFETY: as in write_cmd.
        n = unsafe { write_raw(fd.as_raw_fd(), cmd.as_ptr(), cmd.len()) };
    }
    if n < 0 {
        return Err(Error::kernel(op, Errno(-n as i32)));
    }
    if n as usize != cmd.len() {
        return Err(Error::bad_answer(format!(
            "{op}: write() took {n} of {} bytes",
            cmd.len()
        )));
    }
    Ok(())
}

/// Issues `RDMA_VERBS_IOCTL` with an attribute array (header and attrs, as
/// built by `uverbs_abi::ioctl`).
///
/// # Safety
/// The pointer attributes inside `buf` must point to buffers that are valid
/// for their declared lengths across this call.
pub unsafe fn verbs_ioctl(
    fd: BorrowedFd<'_>,
    op: &'static str,
    request: u64,
    buf: &mut [u8],
) -> Result<()> {
    retry(op, || {
        // SAFETY: buf holds a complete ioctl header + attribute array whose
        // pointers are valid by this function's contract.
        unsafe { libc::ioctl(fd.as_raw_fd(), request as _, buf.as_mut_ptr()) as isize }
    })
    .map(drop)
}

/// One `read()` into `buf`; returns the byte count.
pub fn read(fd: BorrowedFd<'_>, op: &'static str, buf: &mut [u8]) -> Result<usize> {
    retry(op, || {
        // SAFETY: buf is writable for buf.len() bytes.
        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
    })
}

/// Waits up to `timeout_ms` (-1: forever) for `fd` to be readable.
pub fn poll_readable(fd: BorrowedFd<'_>, op: &'static str, timeout_ms: i32) -> Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, the count given is 1.
    let n = retry(op, || unsafe { libc::poll(&mut p, 1, timeout_ms) as isize })?;
    Ok(n > 0)
}

/// Whether the process runs set-user-ID (its real and effective user IDs
/// differ): then, as libibverbs, rverbs ignores `SYSFS_PATH`.
pub fn set_user_id() -> bool {
    // SAFETY: getuid and geteuid have no preconditions and cannot fail.
    unsafe { libc::getuid() != libc::geteuid() }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited or unknown).
pub fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid rlimit for getrlimit to fill.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// `HugePages_Free` of `/proc/meminfo`: free pages of the default huge
/// page size (`None` if it cannot be read).
pub fn free_huge_pages() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("HugePages_Free:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Two random bytes, or `None` if the kernel has no entropy yet.
pub fn random_u16() -> Option<u16> {
    let mut b = [0u8; 2];
    // SAFETY: b is 2 writable bytes; getrandom writes at most that many.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 2, libc::GRND_NONBLOCK) };
    (n == 2).then(|| u16::from_ne_bytes(b))
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

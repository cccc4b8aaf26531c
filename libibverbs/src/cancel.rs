//! Thread cancellation at the two calls that block, `ibv_get_cq_event`
//! and `ibv_get_async_event`.
//!
//! rdma-core blocks in `read(2)`, a cancellation point: a program may
//! `pthread_cancel` a thread waiting for events (rdma-core's `rping` does,
//! to end its CQ thread). glibc acts on a cancellation by force-unwinding
//! the thread's stack, and Rust allows that only through "plain old
//! frames" (RFC 2945): frames with no live destructor and no
//! `catch_unwind`. Every entry point here runs its body in a panic guard
//! (`catch_unwind`), and the event paths hold a lock guard while they read;
//! a cancellation acted on inside them would be undefined behaviour, and
//! in practice would leave the reading lock held (every later read or
//! destroy on the channel then waits forever).
//!
//! So [`blocking`] runs each attempt with cancellation disabled, inside the
//! guard, and makes the wait itself outside it, in its own frame, with the
//! program's cancellation state restored and nothing live but plain values:
//! the thread is cancellable while it waits (and on entry, where
//! rdma-core's `read` would act on a cancellation already pending), and
//! nowhere else.

use crate::guard;
use crate::minus1_errno;
use std::ffi::c_int;
use std::os::fd::RawFd;

// POSIX; not in the `libc` crate. The values are glibc's and musl's.
extern "C" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
    fn pthread_testcancel();
}
const PTHREAD_CANCEL_DISABLE: c_int = 1;

/// What one attempt of a blocking call came to.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    /// The call's answer (0, or -1 with `errno` set).
    Done(c_int),
    /// Nothing yet: wait for the fd to be readable, then try again.
    Wait(RawFd),
}

/// Runs a call that may block: `attempt`, in a panic guard with
/// cancellation disabled, answers or asks to wait; the wait is made here,
/// cancellable as the program left the thread. `Copy` keeps `attempt`
/// free of anything with a destructor, so that this frame stays a plain
/// one while a cancellation may unwind it.
pub(crate) fn blocking(attempt: impl Fn() -> Step + Copy) -> c_int {
    // SAFETY: no argument; a cancellation acted on here unwinds only this
    // frame (nothing live but `attempt`, which has no destructor) and the
    // entry point's, which calls nothing else first.
    unsafe { pthread_testcancel() };
    let old = disable();
    loop {
        match guard::value(Step::Done(-1), attempt) {
            Step::Done(rc) => {
                restore(old);
                return rc;
            }
            Step::Wait(fd) => {
                restore(old);
                let waited = wait_readable(fd);
                disable();
                if let Err(e) = waited {
                    restore(old);
                    return minus1_errno(e);
                }
            }
        }
    }
}

/// Disables cancellation; answers the state it replaced.
fn disable() -> c_int {
    let mut old = 0;
    // SAFETY: a valid state, and a writable int for the old one.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
    old
}

/// Restores the cancellation state `old` (from [`disable`]).
fn restore(old: c_int) {
    // SAFETY: a state pthread_setcancelstate answered; NULL for the old
    // one is accepted by glibc and musl.
    unsafe { pthread_setcancelstate(old, std::ptr::null_mut()) };
}

/// Waits until `fd` is readable: a cancellation point (`poll(2)`), made
/// with nothing live but plain values. A signal handler that interrupts
/// the wait ends it with `EINTR` unless the handlers restart system calls
/// ([`handlers_restart`]): rdma-core blocks in `read(2)` on the fd, which
/// the kernel restarts after a handler installed with `SA_RESTART` and
/// fails with `EINTR` after one without (a program's way out of its event
/// loop); `poll(2)`, which waits here so that the read can be made under
/// the reading lock, is never restarted.
fn wait_readable(fd: RawFd) -> Result<(), c_int> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, the count given is 1.
        if unsafe { libc::poll(&mut p, 1, -1) } >= 0 {
            return Ok(());
        }
        // SAFETY: the calling thread's errno, read at once.
        let e = unsafe { *libc::__errno_location() };
        if e != libc::EINTR || !handlers_restart() {
            return Err(e);
        }
    }
}

/// Whether every signal handler the process has installed restarts
/// system calls (`SA_RESTART`; `signal(3)` installs them so): which
/// signal interrupted a wait is not known, so one handler without it
/// makes the wait end as rdma-core's read would. Out of line: only an
/// interrupted wait asks.
#[cold]
fn handlers_restart() -> bool {
    (1..=libc::SIGRTMAX()).all(|sig| {
        // SAFETY: sigaction only reads the action (no new one is given)
        // into a zeroed struct of the right type.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above; a signal number the C library refuses (its own
        // internal ones) answers -1 and is skipped.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            return true;
        }
        old.sa_sigaction == libc::SIG_DFL
            || old.sa_sigaction == libc::SIG_IGN
            || old.sa_flags & libc::SA_RESTART != 0
    })
}

/// Whether the program made `fd` non-blocking (then an attempt that finds
/// nothing answers `EAGAIN`, as rdma-core's read does).
pub(crate) fn nonblocking(fd: RawFd) -> bool {
    // SAFETY: F_GETFL on a fd of ours takes no pointer.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK != 0
}

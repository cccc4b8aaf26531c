//! The data-path lock: what rdma-core's providers take around each queue
//! (`pthread_spin_lock` on the SQ, the RQ, the CQ), since the C API lets
//! threads post to and poll one object concurrently.
//!
//! `std::sync::Mutex` was this crate's lock; uncontended it costs an atomic
//! swap each way plus two poison checks (each a load of std's global panic
//! count and a branch), about 20 instructions a call that rdma-core does
//! not pay (callgrind, `cargo xtask bench`'s C rows over this library).
//! A panic here never leaves a queue half-updated (see [`crate::lock`]) and
//! aborts in the C builds (`panic = "abort"`), so poisoning buys nothing.
//!
//! Uncontended, locking is one compare-and-swap and unlocking one release
//! store. A waiter spins briefly, then yields its CPU between attempts: a
//! holder may be inside a system call (`MODIFY_QP`, `REQ_NOTIFY_CQ`, the
//! rxe doorbell), which can take longer than spinning is worth.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// Spins before a waiter starts yielding.
const SPINS: u32 = 64;

/// A value behind a spin lock.
pub(crate) struct Spin<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out the value to one thread at a time (`locked`,
// taken with Acquire and released with Release, orders each holder's
// accesses after the previous holder's), so sharing a `Spin<T>` shares
// only the right to take turns with a `T`, which needs `T: Send`.
unsafe impl<T: Send> Sync for Spin<T> {}

impl<T> Spin<T> {
    pub(crate) const fn new(value: T) -> Spin<T> {
        Spin {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Waits for the lock and holds it until the guard is dropped.
    ///
    /// The contended path is inline too, and calls no function (its yield
    /// is one system call instruction, [`yield_cpu`]): a call there, even
    /// out of line and never taken, made every entry point that locks
    /// save and restore registers for it (callgrind, C program over this
    /// library: empty poll 46 -> 44, WRITE through the builders 322 ->
    /// 302, the UD SEND 380 -> 356).
    #[inline(always)]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Read-only while held, so waiters do not steal the line from
            // the holder.
            while self.locked.load(Ordering::Relaxed) {
                if spins < SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    yield_cpu();
                }
            }
        }
        SpinGuard {
            lock: self,
            _value: PhantomData,
        }
    }
}

impl<T> Spin<T> {
    /// Waits for the lock and keeps it past this call: the `ibv_wr_*`
    /// builders hold a QP from `wr_start` to `wr_complete` or `wr_abort`,
    /// across calls from C, as rdma-core's providers hold their SQ lock.
    /// The value is the holder's until [`Spin::release`].
    ///
    /// # Safety
    /// The caller releases the lock exactly once, with [`Spin::release`],
    /// and uses the value (through the result) only until then, on the
    /// thread that holds it.
    #[inline(always)]
    pub(crate) unsafe fn hold<'a>(&self) -> &'a mut T {
        std::mem::forget(self.lock());
        // SAFETY: the lock is held (taken above, kept), so the value is
        // this holder's alone until it releases it (caller's contract).
        unsafe { &mut *self.value.get() }
    }

    /// The value of a lock this thread holds through [`Spin::hold`], for a
    /// later call of the same hold (`ibv_next_poll` after
    /// `ibv_start_poll`).
    ///
    /// # Safety
    /// The lock was taken by [`Spin::hold`] on this thread and not yet
    /// released, and no other reference to the value handed out since is
    /// used while the result lives.
    #[inline(always)]
    pub(crate) unsafe fn held<'a>(&self) -> &'a mut T {
        // SAFETY: held by this thread (caller's contract), so the value is
        // its alone.
        unsafe { &mut *self.value.get() }
    }

    /// Lets go of a lock taken by [`Spin::hold`].
    ///
    /// # Safety
    /// The lock was taken by [`Spin::hold`] and not yet released, and the
    /// value it handed out is not used again.
    #[inline(always)]
    pub(crate) unsafe fn release(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

/// Gives the CPU up (`sched_yield(2)`), as one system call instruction on
/// x86_64 and aarch64: no function call (see [`Spin::lock`]). Its answer,
/// always 0 on Linux, is not needed.
#[cfg(all(target_arch = "x86_64", target_os = "linux", not(miri)))]
#[inline(always)]
fn yield_cpu() {
    // SAFETY: sched_yield takes no argument and touches no memory of
    // ours; x86_64 Linux's syscall ABI: the number in rax, the result in
    // rax, rcx and r11 clobbered, no user stack used, flags kept.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_sched_yield => _,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, preserves_flags),
        )
    };
}

/// See the x86_64 [`yield_cpu`].
#[cfg(all(target_arch = "aarch64", target_os = "linux", not(miri)))]
#[inline(always)]
fn yield_cpu() {
    // SAFETY: as on x86_64; aarch64 Linux's ABI: the number in x8, the
    // result in x0, nothing else clobbered by `svc 0`.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") libc::SYS_sched_yield,
            lateout("x0") _,
            options(nostack, preserves_flags),
        )
    };
}

/// See the x86_64 [`yield_cpu`]; elsewhere, and under Miri, std's.
#[cfg(not(all(
    any(target_arch = "x86_64", target_arch = "aarch64"),
    target_os = "linux",
    not(miri)
)))]
#[inline(always)]
fn yield_cpu() {
    std::thread::yield_now();
}

/// The lock, held: the value while it lives.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a Spin<T>,
    /// What the guard hands out, for its auto traits: shared across
    /// threads only if `T` is `Sync` (a `&SpinGuard` gives `&T`), as
    /// std's `MutexGuard`; the `&Spin<T>` alone would make it `Sync` for
    /// any `T: Send`.
    _value: PhantomData<&'a mut T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (Spin::lock), so no other
        // reference to the value exists until it is dropped.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; `&mut self` makes this the only borrow
        // through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // Release: the holder's accesses happen before the next holder's
        // Acquire. Also runs while unwinding, so a panic never leaves the
        // lock taken (test builds unwind; the C builds abort).
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Four threads add under the lock, contending hard: no increment is
    /// lost, so no two held it at once.
    #[test]
    fn holders_exclude_each_other() {
        const N: u64 = if cfg!(miri) { 200 } else { 100_000 };
        let s = Arc::new(Spin::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..N {
                        // A read and a write apart, so that an overlap
                        // would lose an update.
                        let mut g = s.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*s.lock(), 4 * N);
    }

    /// A lock held across calls (`hold`, as `ibv_wr_start` takes the QP)
    /// excludes the guard's holders until `release`: half the threads
    /// add through `hold`/`release`, half through the guard, and no
    /// increment is lost.
    #[test]
    fn a_held_lock_excludes_guards_until_released() {
        const N: u64 = if cfg!(miri) { 100 } else { 50_000 };
        let s = Arc::new(Spin::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..N {
                        if i % 2 == 0 {
                            // SAFETY: released below, once; the value is
                            // used only in between, on this thread.
                            let v = unsafe { s.hold() };
                            let x = *v;
                            std::hint::black_box(&x);
                            *v = x + 1;
                            // SAFETY: taken by hold above; `v` not used
                            // again.
                            unsafe { s.release() };
                        } else {
                            let mut g = s.lock();
                            let x = *g;
                            std::hint::black_box(&x);
                            *g = x + 1;
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*s.lock(), 4 * N);
    }

    /// A panic while holding the lock releases it (test builds unwind).
    #[test]
    fn a_panicking_holder_releases_the_lock() {
        let s = Arc::new(Spin::new(1u32));
        let s2 = s.clone();
        let r = std::thread::spawn(move || {
            let _g = s2.lock();
            panic!("while holding");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*s.lock(), 1);
    }
}

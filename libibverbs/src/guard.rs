//! The panic boundary. A panic unwinding out of an `extern "C"` function
//! is undefined behaviour before Rust 1.81 and aborts the process from
//! 1.81 on; neither is an answer a C caller of rdma-core's API can handle.
//! Every entry point of this library therefore runs its body through one
//! of these guards, which catch the unwind and answer the failure the
//! function reports in its own convention (NULL, -1, an errno, ...), with
//! `errno` set to [`PANICKED`].
//!
//! A panic here is a bug of this library, never a C caller's error: the
//! panic hook prints it to stderr before the guard answers. Built with
//! `panic = "abort"`, a panic aborts at once instead and the guards cost
//! nothing: the backstop for a panic the guards do not cover (one inside
//! a guard's own failure path).

use crate::{null_errno, ret_errno, set_errno};
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The errno of a caught panic: an internal error of this library.
pub(crate) const PANICKED: c_int = libc::EIO;

/// Runs `body`; if it panics, `on_panic()` answers instead.
///
/// Unwind safety is asserted: what a panic may leave half-done is behind
/// this crate's locks, each of which is taken poison-tolerantly and holds
/// state that is consistent between statements (no invariant spans a call
/// that can panic).
pub(crate) fn or_else<R>(body: impl FnOnce() -> R, on_panic: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| on_panic())
}

/// For a function that returns 0 or an errno.
pub(crate) fn errno(body: impl FnOnce() -> c_int) -> c_int {
    or_else(body, || ret_errno(PANICKED))
}

/// For a function that returns 0 (or a count), or -1 with `errno` set.
pub(crate) fn minus1(body: impl FnOnce() -> c_int) -> c_int {
    or_else(body, || {
        set_errno(PANICKED);
        -1
    })
}

/// For a constructor: NULL with `errno` set.
pub(crate) fn null<T>(body: impl FnOnce() -> *mut T) -> *mut T {
    or_else(body, || null_errno(PANICKED))
}

/// For a function that returns nothing.
pub(crate) fn void(body: impl FnOnce()) {
    or_else(body, || set_errno(PANICKED))
}

/// For a function whose failure is the value `failed` (a negative errno,
/// a "none" value); `errno` is set too.
pub(crate) fn value<R>(failed: R, body: impl FnOnce() -> R) -> R {
    or_else(body, || {
        set_errno(PANICKED);
        failed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno_now() -> c_int {
        // SAFETY: the calling thread's errno slot.
        unsafe { *libc::__errno_location() }
    }

    /// Each guard answers its convention's failure for a body that
    /// panics, with errno set, and passes a body's answer through.
    #[test]
    fn a_panic_becomes_the_c_failure() {
        let boom = || -> c_int { panic!("a bug") };
        set_errno(0);
        assert_eq!((errno(boom), errno_now()), (PANICKED, PANICKED));
        set_errno(0);
        assert_eq!((minus1(boom), errno_now()), (-1, PANICKED));
        set_errno(0);
        let p = null::<u8>(|| panic!("a bug"));
        assert_eq!((p.is_null(), errno_now()), (true, PANICKED));
        set_errno(0);
        void(|| panic!("a bug"));
        assert_eq!(errno_now(), PANICKED);
        set_errno(0);
        assert_eq!(value(-5isize, || panic!("a bug")), -5);
        assert_eq!(errno_now(), PANICKED);
        assert_eq!((errno(|| 7), minus1(|| 3), value(1u8, || 2)), (7, 3, 2));
    }

    /// Every source file of the library, to check each entry point's first
    /// statement (the test below fails for a module missing here).
    const SOURCES: [(&str, &str); 46] = [
        ("abi/ah.rs", include_str!("abi/ah.rs")),
        ("abi/context.rs", include_str!("abi/context.rs")),
        ("abi/cq.rs", include_str!("abi/cq.rs")),
        ("abi/device.rs", include_str!("abi/device.rs")),
        ("abi/layout.rs", include_str!("abi/layout.rs")),
        ("abi/mod.rs", include_str!("abi/mod.rs")),
        ("abi/pd.rs", include_str!("abi/pd.rs")),
        ("abi/qp.rs", include_str!("abi/qp.rs")),
        ("abi/srq.rs", include_str!("abi/srq.rs")),
        ("abi/wr.rs", include_str!("abi/wr.rs")),
        ("ah.rs", include_str!("ah.rs")),
        ("async_event.rs", include_str!("async_event.rs")),
        ("cancel.rs", include_str!("cancel.rs")),
        ("batch.rs", include_str!("batch.rs")),
        ("bind.rs", include_str!("bind.rs")),
        ("channel.rs", include_str!("channel.rs")),
        ("context.rs", include_str!("context.rs")),
        ("convert/attr.rs", include_str!("convert/attr.rs")),
        ("convert/device.rs", include_str!("convert/device.rs")),
        ("convert/mod.rs", include_str!("convert/mod.rs")),
        ("convert/wr.rs", include_str!("convert/wr.rs")),
        ("cq.rs", include_str!("cq.rs")),
        ("ctest.rs", include_str!("ctest.rs")),
        ("device.rs", include_str!("device.rs")),
        ("guard.rs", include_str!("guard.rs")),
        ("lib.rs", include_str!("lib.rs")),
        ("marshall.rs", include_str!("marshall.rs")),
        ("mr.rs", include_str!("mr.rs")),
        ("mw.rs", include_str!("mw.rs")),
        ("obj.rs", include_str!("obj.rs")),
        ("spin.rs", include_str!("spin.rs")),
        ("ops.rs", include_str!("ops.rs")),
        ("pd.rs", include_str!("pd.rs")),
        ("poll.rs", include_str!("poll.rs")),
        ("qp.rs", include_str!("qp.rs")),
        ("qp_ex.rs", include_str!("qp_ex.rs")),
        ("rate.rs", include_str!("rate.rs")),
        ("recv.rs", include_str!("recv.rs")),
        ("send.rs", include_str!("send.rs")),
        ("srq.rs", include_str!("srq.rs")),
        ("strs.rs", include_str!("strs.rs")),
        ("stubs.rs", include_str!("stubs.rs")),
        ("sysfs.rs", include_str!("sysfs.rs")),
        ("testing.rs", include_str!("testing.rs")),
        ("walk.rs", include_str!("walk.rs")),
        ("wr.rs", include_str!("wr.rs")),
    ];

    /// The name of the `extern "C"` function a line defines, if it does
    /// (a function pointer type, `extern "C" fn(`, names none).
    fn defines(line: &str) -> Option<&str> {
        let at = line.find("extern \"C\" fn ")? + "extern \"C\" fn ".len();
        let name = line[at..].split('(').next()?;
        (!name.is_empty() && !line.trim_start().starts_with("//")).then_some(name)
    }

    /// The modules a file declares in files of their own (`mod x;`).
    fn modules(src: &str) -> impl Iterator<Item = &str> {
        src.lines().filter_map(|line| {
            let l = line.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
    }

    /// Every `extern "C"` function's body is one guarded call: a panic in
    /// any entry point is caught, whatever it calls (a new entry point
    /// without a guard fails this test).
    #[test]
    // A text check of the sources: no unsafe code for Miri to check, and
    // minutes of string handling under its interpreter.
    #[cfg_attr(miri, ignore)]
    fn every_entry_point_runs_under_a_guard() {
        let mut seen = 0;
        for (file, src) in SOURCES {
            let lines: Vec<&str> = src.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(name) = defines(line) else { continue };
                let open = (i..lines.len())
                    .find(|&j| lines[j].trim_end().ends_with('{'))
                    .unwrap_or_else(|| panic!("{file}: {name} has no body"));
                // Its first statement, past comments: a guard, or
                // `cancel::blocking`, which runs each attempt in one (and
                // waits outside it: cancel.rs says why).
                let first = lines[open + 1..]
                    .iter()
                    .map(|l| l.trim_start())
                    .find(|l| !l.starts_with("//"))
                    .unwrap_or("");
                assert!(
                    first.starts_with("guard::") || first.starts_with("cancel::blocking("),
                    "{file}: {name} starts with `{first}`, not a guard"
                );
                seen += 1;
            }
        }
        assert!(seen > 100, "only {seen} entry points found");
        // Every module is checked: each `mod` of lib.rs, and of each
        // folder's mod.rs, is a file listed above.
        for (file, src) in SOURCES {
            for m in modules(src) {
                let dir = file.strip_suffix("mod.rs").unwrap_or("");
                let (one, folder) = (format!("{dir}{m}.rs"), format!("{dir}{m}/mod.rs"));
                assert!(
                    SOURCES.iter().any(|(f, _)| *f == one || *f == folder),
                    "{file}: mod {m} is not in SOURCES"
                );
            }
        }
    }
}

//! The `rverbs` command-line tool.
//!
//! `#![no_main]`: the C runtime calls our `main` directly, without std's
//! start-up wrapper. That wrapper's main-thread stack guard asks glibc for
//! the stack's bounds, which glibc finds by parsing `/proc/self/maps` with
//! `sscanf` — about 100,000 instructions, more than a whole `rverbs devices`
//! needs otherwise. What the wrapper did and we do here instead: SIGPIPE
//! (below), a panic caught and reported as exit code 101, stdout flushed.
//! What is lost: the "has overflowed its stack" message; a stack overflow
//! still stops at the kernel's guard gap, as a plain SIGSEGV.
//! (Test builds keep std's entry point: the test harness is the `main`.)
#![cfg_attr(not(test), no_main)]

mod cli;

use std::ffi::{c_char, c_int, CStr, OsString};
use std::io::Write as _;
use std::os::unix::ffi::OsStringExt as _;
use std::process::ExitCode;

#[cfg_attr(not(test), no_mangle)]
#[cfg_attr(test, allow(dead_code))]
extern "C" fn main(argc: c_int, argv: *const *const c_char) -> c_int {
    // Like any Unix filter: a closed pipe (`rverbs gids | grep -q`) ends the
    // program quietly instead of making println! panic.
    // SAFETY: restoring the default disposition of SIGPIPE before any
    // thread exists has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = (0..argc.max(0) as usize)
        .map(|i| {
            // SAFETY: the C runtime passes argc valid pointers in argv, each
            // to a NUL-terminated string that lives until exit.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            OsString::from_vec(arg.to_bytes().to_vec())
        })
        .collect::<Vec<_>>();
    let code = std::panic::catch_unwind(|| cli::main(args)).unwrap_or(ExitCode::from(101));
    let _ = std::io::stdout().flush();
    if code == ExitCode::SUCCESS {
        0
    } else if code == ExitCode::from(101) {
        101
    } else {
        1
    }
}

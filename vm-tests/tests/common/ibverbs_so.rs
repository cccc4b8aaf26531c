//! Running a libibverbs program over rverbs' `libibverbs.so.1` (crate
//! `rverbs-libibverbs`) or over rdma-core's, for the VM tests that compare
//! the two.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// A directory holding our library as `libibverbs.so.1` (the name the
/// programs' `NEEDED` entry asks for): `target/cshim/libibverbs.so`, built
/// with `panic = "abort"` as C programs get it (`cargo xtask test` builds
/// it), linked under /tmp (the VM's writable tmpfs). Panics, never skips,
/// if the library was not built.
pub fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let so = super::profile_dir()
            .with_file_name("cshim")
            .join("libibverbs.so");
        assert!(
            so.is_file(),
            "{} is missing: build it with `cargo build -p rverbs-libibverbs --profile cshim` \
             (`cargo xtask test` does)",
            so.display()
        );
        let dir = std::env::temp_dir().join(format!("rverbs-ibverbs-so-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the library directory");
        let link = dir.join("libibverbs.so.1");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so, &link).expect("link libibverbs.so.1");
        dir
    })
}

/// `prog` over our library.
pub fn ours(prog: &str) -> Command {
    let mut c = Command::new(prog);
    c.env("LD_LIBRARY_PATH", lib_dir());
    c
}

/// `prog` over rdma-core's library (whatever the environment says).
pub fn theirs(prog: &str) -> Command {
    let mut c = Command::new(prog);
    c.env_remove("LD_LIBRARY_PATH");
    c
}

/// `prog` over ours or over rdma-core's.
pub fn over(is_ours: bool, prog: &str) -> Command {
    if is_ours {
        ours(prog)
    } else {
        theirs(prog)
    }
}

/// Runs `c` to completion; panics if it cannot start.
pub fn run(mut c: Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", c.get_program()))
}

/// Runs `prog args` over our library with the loader's account of what it
/// initialised (`LD_DEBUG=libs`, on stderr), and asserts that it was ours,
/// under [`lib_dir`], and not rdma-core's libibverbs as well. Returns the
/// run, for what else the caller checks in the account.
pub fn assert_loads_ours(prog: &str, args: &[&str]) -> Output {
    let mut c = ours(prog);
    c.args(args).env("LD_DEBUG", "libs");
    let out = run(c);
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!("calling init: {}/libibverbs.so.1", lib_dir().display());
    assert!(
        err.lines().any(|l| l.contains(&want)),
        "{prog} did not initialise our library ({want}):\n{}",
        super::show(&out)
    );
    assert!(
        !err.contains("/usr/lib/x86_64-linux-gnu/libibverbs.so.1"),
        "{prog} also loaded rdma-core's libibverbs:\n{}",
        super::show(&out)
    );
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles the C program `source` as `name` (the host's gcc and
/// rdma-core's headers, through the VM's chroot) with `-std=gnu11 -Wall
/// -Werror` and `flags`, linked against `libibverbs.so.1` by its SONAME so
/// that `LD_LIBRARY_PATH` picks the library; returns the executable's
/// path. Panics, naming the compiler's output, if it does not build.
pub fn build_c(name: &str, source: &str, flags: &[&str]) -> String {
    let dir = lib_dir();
    let (src, exe) = (dir.join(format!("{name}.c")), dir.join(name));
    std::fs::write(&src, source).expect("write the C program");
    let mut cc = Command::new("cc");
    cc.args(["-std=gnu11", "-Wall", "-Werror"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-libverbs")
        .env_remove("LD_LIBRARY_PATH");
    let out = run(cc);
    assert!(out.status.success(), "cc {name}.c: {}", super::show(&out));
    exe.display().to_string()
}

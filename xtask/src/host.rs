//! Host-side helpers: running commands, installing Debian packages, paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Errors are plain strings here: xtask prints them and exits non-zero.
pub type Result<T> = std::result::Result<T, String>;

/// The workspace root (the parent of xtask/).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Cargo's target directory, honouring CARGO_TARGET_DIR like cargo does.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                workspace_root().join(d)
            }
        }
        None => workspace_root().join("target"),
    }
}

/// Runs a command to completion with inherited output; an error names it.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed: {status}", describe(cmd)))
    }
}

/// Runs a command and returns its standard output.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", describe(cmd), out.status));
    }
    String::from_utf8(out.stdout).map_err(|_| format!("{} printed non-UTF-8", describe(cmd)))
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// The package of the `rverbs` command-line tool; its binary is `rverbs`.
pub const TOOL_PACKAGE: &str = "rverbs-tool";

/// The package of the integration tests that need the rxe VM (`vm-tests/`,
/// outside the workspace's `default-members`).
pub const VM_TESTS_PACKAGE: &str = "rverbs-vm-tests";

/// Every Debian package xtask needs on the host, the one list (`.ci/run`
/// installs nothing itself): `test`, `demo`, `bench` and `vm-run` install
/// the missing ones before they start.
pub const PACKAGES: &[&str] = &[
    // The VM test bed: QEMU and the pieces of the initramfs.
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "kmod",
    "xz-utils",
    // Newer kernels' modules may come zstd-compressed; the sid kernel
    // fetch needs Debian's archive keyring (debian-archive-keyring).
    "zstd",
    "debian-archive-keyring",
    // Used inside the VM through the chroot of the host's root: iproute2
    // (ip, rdma) for the VM's network, rdma-core's tools as the interop
    // and benchmark peer.
    "iproute2",
    "ibverbs-utils",
    "rdmacm-utils",
    "perftest",
    "rdma-core",
    // rdma-core's own test suite (pyverbs), run over both libibverbs by
    // vm-tests/tests/libibverbs_pyverbs.rs.
    "python3-pyverbs",
    // The host tests' test-time C programs: uverbs-abi's layout check
    // (linux-libc-dev: rdma/*.h) and provider-mlx5's golden bytes
    // (libibverbs-dev: infiniband/mlx5dv.h).
    "gcc",
    "libc6-dev",
    "linux-libc-dev",
    "libibverbs-dev",
    // `dist`: strip, and readelf for the static binary's check (gcc
    // brings it too).
    "binutils",
    // The barrier check disassembles provider-mlx5's aarch64 build
    // (xtask/src/barriers.rs); `dist` links and strips the aarch64 builds
    // with Debian's cross gcc (its static glibc is libc6-dev-arm64-cross,
    // which gcc only recommends), and the arm64 test bed boots them under
    // qemu-system-aarch64 (package qemu-system-arm).
    "binutils-aarch64-linux-gnu",
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "qemu-system-arm",
    // `bench`: callgrind, in the VM and on the host; for the rdma-core
    // mlx5 reference, dpkg-source and dpkg-buildflags (Debian's compiler
    // flags), and python3 for rdma-core's header generator.
    "valgrind",
    "dpkg-dev",
    "python3",
    // vm-tests/tests/scale.rs counts the kernel commands per QP of a C
    // program over each libibverbs with strace.
    "strace",
    // In CI's list since its first version; nothing in the tree runs
    // file(1) today.
    "file",
];

/// Installs whichever of [`PACKAGES`] is missing, with apt-get (we run as
/// root on these machines; CI starts from a machine that has none of them).
/// Checks once per xtask process.
pub fn ensure_host_packages() -> Result<()> {
    use std::sync::OnceLock;
    static DONE: OnceLock<Result<()>> = OnceLock::new();
    DONE.get_or_init(|| {
        let missing: Vec<&str> = PACKAGES
            .iter()
            .copied()
            .filter(|p| !package_installed(p))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        eprintln!("xtask: installing Debian packages: {}", missing.join(" "));
        apt_update_once()?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null()))
        .map_err(|e| format!("{e} (is this a Debian machine, and are we root?)"))
    })
    .clone()
}

fn package_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// `apt-get update`, once per xtask process.
pub fn apt_update_once() -> Result<()> {
    use std::sync::Once;
    static ONCE: Once = Once::new();
    let mut res = Ok(());
    ONCE.call_once(|| {
        res = run(Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null()));
    });
    res
}

/// Adds `target`'s standard library with rustup if the toolchain lacks it.
pub fn ensure_rust_target(target: &str) -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("rustup target list: {e} (cross builds need rustup)"))?;
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == target)
    {
        return Ok(());
    }
    println!("xtask: adding the {target} standard library (rustup target add)");
    run(Command::new("rustup").args(["target", "add", target]))
}

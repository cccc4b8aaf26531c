//! Host-side helpers: running commands, installing the bed's Debian
//! packages.

use std::process::{Command, Stdio};

/// Errors are plain strings: the bed's callers print them.
pub type Result<T> = std::result::Result<T, String>;

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

/// The Debian packages the bed needs on the host (it installs the missing
/// ones before it boots anything).
pub const PACKAGES: &[&str] = &[
    // QEMU and the pieces of the initramfs.
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "kmod",
    "xz-utils",
    // Newer kernels' modules may come zstd-compressed; the sid kernel
    // fetch needs Debian's archive keyring.
    "zstd",
    "debian-archive-keyring",
    // Used inside the VM through the chroot of the host's root: iproute2
    // (ip, rdma) for the VM's network and its rxe device, rdma-core's
    // library, provider and tools for programs that use them.
    "iproute2",
    "ibverbs-utils",
    "rdmacm-utils",
    "perftest",
    "rdma-core",
    // More than two hosts share a VDE hub (vde_switch) on a unix socket.
    "vde2",
    // Bare guests of another architecture (arm64 under
    // qemu-system-aarch64).
    "qemu-system-arm",
];

/// Installs whichever of [`PACKAGES`] is missing, with apt-get (as root;
/// a fresh machine has none of them). Checks once per process.
pub fn ensure_packages() -> Result<()> {
    use std::sync::OnceLock;
    static DONE: OnceLock<Result<()>> = OnceLock::new();
    DONE.get_or_init(|| install_missing(PACKAGES)).clone()
}

/// Installs whichever of `packages` is missing (as root, with apt-get).
pub fn install_missing(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !package_installed(p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("testbed: installing Debian packages: {}", missing.join(" "));
    apt_update_once()?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null()))
    .map_err(|e| format!("{e} (is this a Debian machine, and are we root?)"))
}

fn package_installed(pkg: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", pkg])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

/// `apt-get update`, once per process.
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

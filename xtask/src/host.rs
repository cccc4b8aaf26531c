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

/// The Debian packages the VM test bed needs on the host: QEMU, the pieces of
/// the initramfs, iproute2 (ip, rdma) used inside the VM through the chroot,
/// and rdma-core's tools as the interop peer.
pub const VM_PACKAGES: &[&str] = &[
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "kmod",
    "xz-utils",
    "iproute2",
    "ibverbs-utils",
    "rdmacm-utils",
    "perftest",
    "rdma-core",
];

/// Installs whichever of `pkgs` is missing, with apt-get (we run as root on
/// these machines; CI starts from a machine that has none of them).
pub fn ensure_packages(pkgs: &[&str]) -> Result<()> {
    let missing: Vec<&str> = pkgs
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

//! `cargo xtask vm-run`: boot a fresh VM with an rxe device and run a command
//! in it.
//!
//! Inside the VM the host's root is mounted read-only over 9p and the command
//! runs in a chroot of it, so paths are the host's: a test binary under
//! `target/` or a Debian tool runs as it is. `/tmp` is a tmpfs; the directory
//! named by `RVERBS_VM_OUT` is a writable share that comes back to the host.

mod image;
pub mod kernels;
mod qemu;

pub use image::host_mirror;
pub use kernels::Kernel;
pub use qemu::{run, shell_quote, Options};

/// Builds (or reuses) kernel `k` and its initramfs without booting, so that
/// the first test does not pay for the fetch inside its timeout.
pub fn prepare(k: &Kernel) -> crate::host::Result<()> {
    crate::host::ensure_host_packages()?;
    if k.arch == kernels::Arch::X86_64 {
        image::ensure(k).map(|_| ())
    } else {
        image::userland(k)?;
        image::ensure_bare(k).map(|_| ())
    }
}

//! The rxe test bed: boot a fresh VM (QEMU, Debian's kernel package) with
//! an rxe device on a veth, or up to [`MAX_HOSTS`] VMs on one L2 segment,
//! and run a command in them. `cargo xtask` runs every VM test through this crate; the
//! `rverbs-testbed` binary offers the same to any project.
//!
//! Inside the VM the host's root is mounted read-only over 9p and the
//! command runs in a chroot of it, so paths are the host's: a test binary
//! under `target/` or a Debian tool runs as it is. `/tmp` is a tmpfs; the
//! directory named by `RVERBS_VM_OUT` is a writable share that comes back
//! to the host.
//!
//! Kernels, initramfs images and run directories are cached under
//! [`cache_dir`].

pub mod host;
mod image;
pub mod kernels;
mod qemu;

pub use host::{ensure_packages, Result, PACKAGES};
pub use image::host_mirror;
pub use kernels::Kernel;
pub use qemu::{run, shell_quote, Options, Outcome, MAX_HOSTS, VM_MEMORY_MB};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the bed caches, and which host directories under `/tmp` the guest
/// must still see (see [`configure`]).
#[derive(Clone, Debug)]
pub struct Config {
    /// Kernels, images, the acceleration probe's answer and the runs'
    /// directories.
    pub cache_dir: PathBuf,
    /// Host directories that stay visible in the guest even under `/tmp`
    /// (which the guest replaces with a tmpfs), beside the cache and the
    /// working directory: a workspace and its target directory, say.
    pub keep: Vec<PathBuf>,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets the cache directory and the kept paths, once, before the first
/// run; without it the cache is `$RVERBS_TESTBED_CACHE`, else
/// `$XDG_CACHE_HOME/rverbs-testbed`, else `~/.cache/rverbs-testbed`.
/// Returns the configuration in force (the first one set wins).
pub fn configure(c: Config) -> &'static Config {
    CONFIG.get_or_init(|| c)
}

/// The configuration in force, the default one if none was set.
fn configure_default() -> &'static Config {
    CONFIG.get_or_init(|| Config {
        cache_dir: default_cache_dir(),
        keep: Vec::new(),
    })
}

fn default_cache_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = env("RVERBS_TESTBED_CACHE") {
        return d;
    }
    let base = env("XDG_CACHE_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"));
    base.join("rverbs-testbed")
}

/// The cache directory in force.
pub fn cache_dir() -> &'static Path {
    &configure_default().cache_dir
}

/// Builds (or reuses) kernel `k` and its initramfs without booting, so that
/// the first test does not pay for the fetch inside its timeout.
pub fn prepare(k: &Kernel) -> Result<()> {
    ensure_packages()?;
    if k.arch == kernels::Arch::X86_64 {
        image::ensure(k).map(|_| ())
    } else {
        image::userland(k)?;
        image::ensure_bare(k).map(|_| ())
    }
}

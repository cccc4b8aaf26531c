//! The kernels the VM boots: one row per kernel, with where Debian ships it,
//! how its package is laid out and which modules rxe needs on it.
//!
//! Each row was found by booting the kernel by hand under TCG (see
//! docs/kernels.md, which records the same facts for readers).

use std::fmt;
use std::path::Path;

/// Which apt configuration fetches a kernel's packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apt {
    /// The host's own sources (bookworm and its updates).
    Host,
    /// A private configuration under `apt-sid/` in the cache directory with Debian
    /// unstable as its one source; the host's apt sources stay untouched.
    Sid,
    /// A private configuration under `apt-bookworm-arm64/` in the cache directory:
    /// bookworm, its updates and its security archive, for arm64 only.
    BookwormArm64,
}

/// The machine a kernel runs on: which QEMU, which console, which Rust
/// targets build its userspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// Debian's name of the architecture.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    pub fn qemu(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Aarch64 => "qemu-system-aarch64",
        }
    }

    /// The serial console the kernel writes to: the PC's 16550, or the
    /// PL011 of QEMU's `virt` board.
    pub fn console(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Aarch64 => "ttyAMA0",
        }
    }

    /// The static builds of the tool for this machine: glibc, then musl.
    pub fn rust_targets(self) -> [&'static str; 2] {
        match self {
            Arch::X86_64 => ["x86_64-unknown-linux-gnu", "x86_64-unknown-linux-musl"],
            Arch::Aarch64 => ["aarch64-unknown-linux-gnu", "aarch64-unknown-linux-musl"],
        }
    }
}

/// One kernel the test bed can boot.
#[derive(Debug)]
pub struct Kernel {
    /// The name on the command line (`--kernel 6.1`).
    pub name: &'static str,
    pub arch: Arch,
    pub apt: Apt,
    /// `apt-cache search --names-only` pattern of the package whose name
    /// carries the kernel release; the newest match is taken.
    pub search: &'static str,
    /// What that package's name is the release prefixed with.
    pub prefix: &'static str,
    /// How every release of this kernel starts (`6.1.0-`, never `6.12.`),
    /// to find it in the cache.
    pub release_start: &'static str,
    /// The packages to fetch, each a prefix the release completes.
    pub packages: &'static [&'static str],
    /// Where the modules live in the unpacked packages (`lib/modules`, or
    /// `usr/lib/modules` in a merged-/usr package).
    pub modroot: &'static str,
    /// The kernel image, `{V}` standing for the release.
    pub vmlinuz: &'static str,
    /// Modules loaded at boot, roots of the dependency walk (the walk adds
    /// what they depend on, deepest first); a name ending in `?` is loaded
    /// only if the kernel has it, and one built in is skipped.
    pub modules: &'static [&'static str],
    /// A kernel of the user's (`--kernel DIR`): the directory holding its
    /// image and modules, used as it is (nothing fetched).
    pub local: Option<&'static Path>,
}

/// Modules every kernel needs: uverbs (which 7.2's rdma_rxe no longer
/// depends on: it comes with ib_uverbs_support), rxe, rdma_cm, veth for the
/// one-VM link, 9p for the host share, virtio_net for two VMs, and
/// sch_netem for `tc qdisc ... netem` (loss, reordering, duplication,
/// corruption on a link: the loss tests).
macro_rules! common_modules {
    ($($extra:literal),*) => {
        &[$($extra,)* "ib_uverbs", "rdma_rxe", "rdma_ucm", "veth", "9p", "9pnet_virtio", "virtio_net", "sch_netem"]
    };
}

/// The kernels, oldest first. `crc32_generic` / `crc32_cryptoapi` is not a
/// declared dependency of rdma_rxe, but rxe allocates the "crc32" crypto
/// shash at link creation and fails with ENOENT without a provider of it.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "6.1",
        arch: Arch::X86_64,
        apt: Apt::Host,
        search: r"^linux-image-6\.1\.0-[0-9]+-amd64$",
        prefix: "linux-image-",
        release_start: "6.1.0-",
        packages: &["linux-image-"],
        modroot: "lib/modules",
        vmlinuz: "boot/vmlinuz-{V}",
        // 6.1 builds virtio_pci as a module (6.12 and 7.2 build it in):
        // without it there is no virtio transport and the 9p mount fails.
        modules: common_modules!("crc32_generic", "virtio_pci"),
        local: None,
    },
    Kernel {
        name: "6.12",
        arch: Arch::X86_64,
        apt: Apt::Host,
        search: r"^linux-image-6\.12\.[0-9]+\+deb12-amd64$",
        prefix: "linux-image-",
        release_start: "6.12.",
        packages: &["linux-image-"],
        modroot: "lib/modules",
        vmlinuz: "boot/vmlinuz-{V}",
        modules: common_modules!("crc32_generic"),
        local: None,
    },
    Kernel {
        name: "7.2",
        arch: Arch::X86_64,
        apt: Apt::Sid,
        // linux-image-7.2.* is only a metapackage over these two.
        search: r"^linux-binary-7\.2\.[0-9]+\+deb14-amd64$",
        prefix: "linux-binary-",
        release_start: "7.2.",
        packages: &["linux-binary-", "linux-modules-"],
        modroot: "usr/lib/modules",
        vmlinuz: "usr/lib/modules/{V}/vmlinuz",
        // crc32_generic is gone in 7.x; the crypto API's "crc32" comes from
        // crc32_cryptoapi over the library crc32.
        modules: common_modules!("crc32_cryptoapi"),
        local: None,
    },
    Kernel {
        // The same series for arm64, booted on QEMU's `virt` board under
        // TCG. Only bare VMs run on it: the host's root is x86_64, so the
        // guest's userspace is busybox, our aarch64 static builds and, for
        // interop, rdma-core's arm64 packages unpacked (see image.rs).
        name: "6.12-arm64",
        arch: Arch::Aarch64,
        apt: Apt::BookwormArm64,
        search: r"^linux-image-6\.12\.[0-9]+\+deb12-arm64$",
        prefix: "linux-image-",
        release_start: "6.12.",
        packages: &["linux-image-"],
        modroot: "lib/modules",
        vmlinuz: "boot/vmlinuz-{V}",
        // virtio_pci is built in, as on amd64; the list is amd64's.
        modules: common_modules!("crc32_generic"),
        local: None,
    },
];

/// What a kernel of the user's loads: the common modules and whichever
/// crc32 provider it has (crc32_generic before 7.x, crc32_cryptoapi after),
/// and virtio_pci where it is a module (6.1 builds it so).
const LOCAL_MODULES: &[&str] = common_modules!("crc32_generic?", "crc32_cryptoapi?", "virtio_pci?");

/// The arm64 kernel (the arm64 test bed's, and the mixed-architecture
/// pair's second host).
pub const ARM64: &Kernel = &KERNELS[3];

/// The kernel `vm-run` and `test` use unless told otherwise.
pub const DEFAULT: &Kernel = &KERNELS[1];

impl Kernel {
    /// The row named `name` (`6.1`, `6.12`, `7.2`), or an error listing
    /// them.
    pub fn by_name(name: &str) -> Result<&'static Kernel, String> {
        if name.contains('/') {
            return Kernel::from_dir(Path::new(name));
        }
        KERNELS.iter().find(|k| k.name == name).ok_or_else(|| {
            let names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
            format!(
                "unknown kernel {name:?}: choose one of {}, or a directory (a path with a '/')",
                names.join(", ")
            )
        })
    }

    /// An amd64 kernel of the user's, in `dir`: its modules under
    /// `lib/modules/RELEASE/` (or `usr/lib/modules/`), with `modules.dep`
    /// (what `make modules_install INSTALL_MOD_PATH=DIR` leaves), and its
    /// image as `boot/vmlinuz-RELEASE`, `vmlinuz-RELEASE` or `bzImage`
    /// (`make install INSTALL_PATH=DIR`, or a copy): a Debian kernel package
    /// unpacked with `dpkg -x` is such a directory too. It must have what
    /// the bed loads, as modules or built in: rdma_rxe, ib_uverbs,
    /// rdma_ucm, veth, 9p over virtio, virtio_net, sch_netem, and a
    /// provider of the crypto API's crc32 (which rxe asks for).
    pub fn from_dir(dir: &Path) -> Result<&'static Kernel, String> {
        let dir = dir
            .canonicalize()
            .map_err(|e| format!("--kernel {}: {e}", dir.display()))?;
        let modroot = ["lib/modules", "usr/lib/modules"]
            .into_iter()
            .find(|m| dir.join(m).is_dir())
            .ok_or(format!(
                "--kernel {}: no lib/modules/RELEASE/ in it (make modules_install INSTALL_MOD_PATH=DIR)",
                dir.display()
            ))?;
        let name: &'static str = Box::leak(dir.display().to_string().into_boxed_str());
        let local: &'static Path = Box::leak(dir.into_boxed_path());
        Ok(Box::leak(Box::new(Kernel {
            name,
            arch: Arch::X86_64,
            apt: Apt::Host,
            search: "",
            prefix: "",
            release_start: "",
            packages: &[],
            modroot,
            vmlinuz: "",
            modules: LOCAL_MODULES,
            local: Some(local),
        })))
    }

    /// The cache directory prefix of this kernel's unpacked packages
    /// (`kernel-<release>`).
    pub fn cache_prefix(&self) -> String {
        format!("kernel-{}", self.release_start)
    }

    /// Whether an unpacked kernel directory (`kernel-<release>`) is this
    /// row's: its prefix, and its architecture's suffix.
    pub fn owns_cache_dir(&self, name: &str) -> bool {
        name.starts_with(&self.cache_prefix())
            && name.ends_with(&format!("-{}", self.arch.debian()))
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Linux {}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_prefixes_do_not_overlap() {
        let p: Vec<String> = KERNELS.iter().map(|k| k.cache_prefix()).collect();
        assert_eq!(
            p,
            [
                "kernel-6.1.0-",
                "kernel-6.12.",
                "kernel-7.2.",
                "kernel-6.12."
            ]
        );
        // 6.12 for amd64 and for arm64 share a prefix: the suffix tells
        // them apart.
        let amd = "kernel-6.12.117+deb12-amd64";
        let arm = "kernel-6.12.117+deb12-arm64";
        assert!(KERNELS[1].owns_cache_dir(amd) && !KERNELS[1].owns_cache_dir(arm));
        assert!(ARM64.owns_cache_dir(arm) && !ARM64.owns_cache_dir(amd));
        assert!(!KERNELS[0].owns_cache_dir(amd));
    }

    #[test]
    fn names_resolve() {
        assert_eq!(Kernel::by_name("6.12").unwrap().name, DEFAULT.name);
        assert!(Kernel::by_name("5.10")
            .unwrap_err()
            .contains("6.1, 6.12, 7.2, 6.12-arm64"));
        assert_eq!(Kernel::by_name("6.12-arm64").unwrap().arch, Arch::Aarch64);
    }
}

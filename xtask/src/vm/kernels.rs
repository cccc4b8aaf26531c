//! The kernels the VM boots: one row per kernel, with where Debian ships it,
//! how its package is laid out and which modules rxe needs on it.
//!
//! Each row was found by booting the kernel by hand under TCG (see
//! docs/kernels.md, which records the same facts for readers).

use std::fmt;

/// Which apt configuration fetches a kernel's packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apt {
    /// The host's own sources (bookworm and its updates).
    Host,
    /// A private configuration under `target/vm/apt-sid/` with Debian
    /// unstable as its one source; the host's apt sources stay untouched.
    Sid,
}

/// One kernel the test bed can boot.
#[derive(Debug)]
pub struct Kernel {
    /// The name on the command line (`--kernel 6.1`).
    pub name: &'static str,
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
    /// what they depend on, deepest first).
    pub modules: &'static [&'static str],
}

/// Modules every kernel needs: uverbs (which 7.2's rdma_rxe no longer
/// depends on: it comes with ib_uverbs_support), rxe, rdma_cm, veth for the
/// one-VM link, 9p for the host share, virtio_net for two VMs.
macro_rules! common_modules {
    ($($extra:literal),*) => {
        &[$($extra,)* "ib_uverbs", "rdma_rxe", "rdma_ucm", "veth", "9p", "9pnet_virtio", "virtio_net"]
    };
}

/// The kernels, oldest first. `crc32_generic` / `crc32_cryptoapi` is not a
/// declared dependency of rdma_rxe, but rxe allocates the "crc32" crypto
/// shash at link creation and fails with ENOENT without a provider of it.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "6.1",
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
    },
    Kernel {
        name: "6.12",
        apt: Apt::Host,
        search: r"^linux-image-6\.12\.[0-9]+\+deb12-amd64$",
        prefix: "linux-image-",
        release_start: "6.12.",
        packages: &["linux-image-"],
        modroot: "lib/modules",
        vmlinuz: "boot/vmlinuz-{V}",
        modules: common_modules!("crc32_generic"),
    },
    Kernel {
        name: "7.2",
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
    },
];

/// The kernel `vm-run` and `test` use unless told otherwise.
pub const DEFAULT: &Kernel = &KERNELS[1];

impl Kernel {
    /// The row named `name` (`6.1`, `6.12`, `7.2`), or an error listing
    /// them.
    pub fn by_name(name: &str) -> Result<&'static Kernel, String> {
        KERNELS.iter().find(|k| k.name == name).ok_or_else(|| {
            let names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
            format!(
                "unknown kernel {name:?}: choose one of {}",
                names.join(", ")
            )
        })
    }

    /// The cache directory prefix of this kernel's unpacked packages
    /// (`kernel-<release>`).
    pub fn cache_prefix(&self) -> String {
        format!("kernel-{}", self.release_start)
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
        assert_eq!(p, ["kernel-6.1.0-", "kernel-6.12.", "kernel-7.2."]);
    }

    #[test]
    fn names_resolve() {
        assert_eq!(Kernel::by_name("6.12").unwrap().name, DEFAULT.name);
        assert!(Kernel::by_name("5.10")
            .unwrap_err()
            .contains("6.1, 6.12, 7.2"));
    }
}

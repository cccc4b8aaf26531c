//! What the running kernel and device offer that rverbs depends on, read
//! from what they report — never from a kernel version string.
//!
//! What a program needs to know is on [`Features`].

use crate::cmd;
use crate::context::{CommandPath, Context};
use crate::error::Result;
use uverbs_abi::ioctl::IbUverbsAdviseMrAdvice;
use uverbs_abi::verbs::{self as v, IbAtomicCap, IbOdpGeneralCaps, IbUverbsDeviceCapFlags as F};

/// What a device and its kernel offer. Built by
/// [`Context::features`].
///
/// The uverbs ABI grows: ioctl methods appear, and rxe gained atomic write
/// and FLUSH in Linux 6.2 and on-demand paging (with `ibv_advise_mr`
/// prefetch) in 6.14. A program that needs one of them asks
/// [`Context::features`] once and takes another path, or reports what is
/// missing, instead of matching on `uname -r` (distributions backport).
/// Each field says where its answer comes from:
/// - `QUERY_DEVICE_EX`: `device_cap_flags_ex`, `atomic_cap`, the ODP caps;
/// - probes: an ioctl method that answers anything but "no such method"
///   (`ENOTTY` and `EPROTONOSUPPORT`, which rdma-core's fallback reads as
///   absence, and the driver's `EOPNOTSUPP`) is present; a method the
///   context's kernel already said it lacks is not asked again;
/// - netlink (`RDMA_NLDEV_CMD_SYS_GET`) and sysfs for the system-wide
///   answers (copy-on-fork, the rdma_cm ABI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Features {
    /// How this context's commands travel: `Ioctl` when the kernel took the
    /// ioctl `GET_CONTEXT` (and the context was not opened with
    /// [`CommandPath::Write`]).
    pub command_path: CommandPath,
    /// The ioctl `QUERY_PORT` method (`port_cap_flags2`, `active_speed_ex`).
    pub ioctl_query_port: bool,
    /// The ioctl `QUERY_GID_TABLE` method (`ibv_query_gid_table`); without
    /// it the GID table comes from sysfs.
    pub ioctl_query_gid_table: bool,
    /// The ioctl `QUERY_GID_ENTRY` method (`ibv_query_gid_ex`).
    pub ioctl_query_gid_entry: bool,
    /// `ADVISE_MR` (`ibv_advise_mr`): prefetch of on-demand-paging MRs
    /// ([`crate::pd::Pd::advise_mr`]). rxe offers it together with ODP.
    pub advise_mr: bool,
    /// How many bytes of the `QUERY_DEVICE_EX` response the kernel filled.
    pub query_device_ex_len: u32,
    /// All 64 bits of `device_cap_flags_ex`, for flags not named here.
    pub device_cap_flags_ex: u64,
    /// Atomics (`atomic_cap` is not `IB_ATOMIC_NONE`): `REMOTE_ATOMIC` MRs,
    /// compare-and-swap and fetch-and-add.
    pub atomics: bool,
    /// `IB_UVERBS_DEVICE_ATOMIC_WRITE` (rxe from Linux 6.2).
    pub atomic_write: bool,
    /// `IB_UVERBS_DEVICE_FLUSH_GLOBAL`: `FLUSH_GLOBAL` MRs (rxe from 6.2).
    pub flush_global: bool,
    /// `IB_UVERBS_DEVICE_FLUSH_PERSISTENT`: `FLUSH_PERSISTENT` MRs (rxe
    /// from 6.2; the memory itself must also be persistent).
    pub flush_persistent: bool,
    /// Memory windows (`MEM_WINDOW`, or type 2A/2B): `MW_BIND` MRs.
    pub memory_windows: bool,
    /// On-demand paging, when `odp_caps.general_caps` has `IB_ODP_SUPPORT`
    /// (rxe from Linux 6.14): `ON_DEMAND` MRs.
    pub odp: Option<Odp>,
    /// The kernel copies pinned pages into a child at `fork()`
    /// (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`, Linux 5.13 on).
    pub copy_on_fork: bool,
    /// The rdma_cm user ABI version the kernel's rdma_ucm speaks
    /// (`/sys/class/misc/rdma_cm/abi_version`), `None` without rdma_ucm.
    pub rdma_cm_abi: Option<u32>,
}

/// On-demand paging as the device reports it (`odp_caps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Odp {
    /// `IB_ODP_SUPPORT_IMPLICIT`: implicit (whole address space) ODP MRs.
    pub implicit: bool,
    /// What an RC QP may do over ODP MRs ([`OdpOps`]).
    pub rc: OdpOps,
    /// The same for UD QPs.
    pub ud: OdpOps,
}

bitflags::bitflags! {
    /// `enum ib_odp_transport_cap_bits`: operations a transport may run
    /// over ODP MRs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct OdpOps: u32 {
        /// Send.
        const SEND = 1;
        /// Receive.
        const RECV = 1 << 1;
        /// RDMA WRITE.
        const WRITE = 1 << 2;
        /// RDMA READ.
        const READ = 1 << 3;
        /// Atomics.
        const ATOMIC = 1 << 4;
        /// Receive through an SRQ.
        const SRQ_RECV = 1 << 5;
        /// FLUSH (`IB_ODP_SUPPORT_FLUSH`, Linux 6.2's uapi).
        const FLUSH = 1 << 6;
        /// Atomic write (`IB_ODP_SUPPORT_ATOMIC_WRITE`).
        const ATOMIC_WRITE = 1 << 7;
        // A newer kernel's bits stay visible.
        const _ = !0;
    }
}

/// One row of [`Features::table`]: a feature, whether it is there, and
/// where the answer came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The feature's name (stable: tests and documents use it).
    pub name: &'static str,
    /// Whether the kernel and device offer it.
    pub present: bool,
    /// Where the answer came from.
    pub source: &'static str,
}

impl Features {
    /// The features as rows, in a fixed order: one table for every kernel,
    /// which the README's per-kernel table is made of.
    pub fn table(&self) -> Vec<Row> {
        let odp = |f: OdpOps| self.odp.is_some_and(|o| o.rc.contains(f));
        let row = |name, present, source| Row {
            name,
            present,
            source,
        };
        vec![
            row(
                "ioctl GET_CONTEXT",
                self.command_path == CommandPath::Ioctl,
                "GET_CONTEXT ioctl taken at open",
            ),
            row("ioctl QUERY_PORT", self.ioctl_query_port, "probe"),
            row("ioctl QUERY_GID_TABLE", self.ioctl_query_gid_table, "probe"),
            row("ioctl QUERY_GID_ENTRY", self.ioctl_query_gid_entry, "probe"),
            row("ADVISE_MR (prefetch)", self.advise_mr, "probe"),
            row("atomics", self.atomics, "QUERY_DEVICE atomic_cap"),
            row(
                "ATOMIC_WRITE",
                self.atomic_write,
                "QUERY_DEVICE_EX device_cap_flags_ex",
            ),
            row(
                "FLUSH_GLOBAL",
                self.flush_global,
                "QUERY_DEVICE_EX device_cap_flags_ex",
            ),
            row(
                "FLUSH_PERSISTENT",
                self.flush_persistent,
                "QUERY_DEVICE_EX device_cap_flags_ex",
            ),
            row(
                "memory windows",
                self.memory_windows,
                "QUERY_DEVICE_EX device_cap_flags_ex",
            ),
            row(
                "ODP",
                self.odp.is_some(),
                "QUERY_DEVICE_EX odp_caps.general_caps",
            ),
            row(
                "ODP RC WRITE/READ",
                odp(OdpOps::WRITE | OdpOps::READ),
                "QUERY_DEVICE_EX odp_caps.rc_odp_caps",
            ),
            row(
                "ODP RC SEND/RECV",
                odp(OdpOps::SEND | OdpOps::RECV),
                "QUERY_DEVICE_EX odp_caps.rc_odp_caps",
            ),
            row(
                "ODP RC ATOMIC",
                odp(OdpOps::ATOMIC),
                "QUERY_DEVICE_EX odp_caps.rc_odp_caps",
            ),
            row(
                "copy-on-fork",
                self.copy_on_fork,
                "netlink RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK",
            ),
            row(
                "rdma_cm ABI 4",
                self.rdma_cm_abi == Some(4),
                "sysfs misc/rdma_cm/abi_version",
            ),
        ]
    }
}

impl std::fmt::Display for Features {
    /// The table, one `name: yes|no (source)` line per feature.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for r in self.table() {
            let yes = if r.present { "yes" } else { "no" };
            writeln!(f, "{}: {yes} ({})", r.name, r.source)?;
        }
        Ok(())
    }
}

impl Context {
    /// What this device and the running kernel offer (see
    /// [`Features`]): `QUERY_DEVICE_EX`, one probe per ioctl method
    /// (a PD is allocated and freed for the `ADVISE_MR` probe), netlink and
    /// sysfs. Errors other than "no such method" are returned, named.
    pub fn features(&self) -> Result<Features> {
        let dev = &self.inner.dev;
        let attr = self.query_device_ex()?;
        let caps = attr.device_cap_flags_ex;
        let has = |flag: F| caps & flag.bits() != 0;
        let odp = (attr.odp_general_caps & IbOdpGeneralCaps::SUPPORT.bits() != 0).then(|| Odp {
            implicit: attr.odp_general_caps & IbOdpGeneralCaps::SUPPORT_IMPLICIT.bits() != 0,
            rc: OdpOps::from_bits_retain(attr.odp_rc_caps),
            ud: OdpOps::from_bits_retain(attr.odp_ud_caps),
        });
        let gid_len = self.query_port(1)?.gid_tbl_len as usize;
        Ok(Features {
            command_path: self.command_path(),
            ioctl_query_port: cmd::method_present(cmd::port::query_port_ioctl(dev, 1))?,
            ioctl_query_gid_table: cmd::method_present(cmd::port::gid_table_ioctl(
                dev,
                gid_len.clamp(1, 256),
            ))?,
            // Index 0 is populated on every port (the default GID).
            ioctl_query_gid_entry: cmd::method_present(cmd::port::gid_entry_ioctl(dev, 1, 0))?,
            advise_mr: self.probe_advise_mr()?,
            query_device_ex_len: attr.response_length,
            device_cap_flags_ex: caps,
            atomics: attr.orig.atomic_cap != IbAtomicCap::NONE.0,
            atomic_write: has(F::ATOMIC_WRITE),
            flush_global: has(F::FLUSH_GLOBAL),
            flush_persistent: has(F::FLUSH_PERSISTENT),
            memory_windows: has(F::MEM_WINDOW)
                || has(F::MEM_WINDOW_TYPE_2A)
                || has(F::MEM_WINDOW_TYPE_2B),
            odp,
            copy_on_fork: crate::sys::kernel_copies_on_fork(),
            rdma_cm_abi: cmd::sysfs::rdma_cm_abi(),
        })
    }

    /// `ADVISE_MR` on a fresh PD with one SGE naming no MR (lkey 0) and the
    /// FLUSH flag: a kernel and driver that offer the method look the key
    /// up and refuse it (rxe: EINVAL); one that lacks it says so before
    /// (EOPNOTSUPP / EPROTONOSUPPORT). Nothing is prefetched either way.
    fn probe_advise_mr(&self) -> Result<bool> {
        let pd = self.alloc_pd()?;
        let sge = v::IbUverbsSge {
            addr: 0,
            length: 1,
            lkey: 0,
        };
        cmd::method_present(cmd::mr::advise(
            &self.inner.dev,
            pd.inner.handle.raw(),
            IbUverbsAdviseMrAdvice::PREFETCH.0,
            crate::odp::FLAG_FLUSH,
            &[sge],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> Features {
        Features {
            command_path: CommandPath::Write,
            ioctl_query_port: false,
            ioctl_query_gid_table: false,
            ioctl_query_gid_entry: false,
            advise_mr: false,
            query_device_ex_len: 0,
            device_cap_flags_ex: 0,
            atomics: false,
            atomic_write: false,
            flush_global: false,
            flush_persistent: false,
            memory_windows: false,
            odp: None,
            copy_on_fork: false,
            rdma_cm_abi: None,
        }
    }

    #[test]
    fn the_table_has_one_row_per_feature_and_reads_the_fields() {
        let f = none();
        let t = f.table();
        assert_eq!(t.len(), 16);
        assert!(t.iter().all(|r| !r.present), "{t:?}");
        let odp = Features {
            odp: Some(Odp {
                implicit: false,
                rc: OdpOps::READ | OdpOps::WRITE,
                ud: OdpOps::empty(),
            }),
            ..none()
        };
        let present: Vec<&str> = odp
            .table()
            .into_iter()
            .filter(|r| r.present)
            .map(|r| r.name)
            .collect();
        assert_eq!(present, ["ODP", "ODP RC WRITE/READ"]);
        assert!(odp.to_string().contains("ODP RC SEND/RECV: no ("));
    }
}

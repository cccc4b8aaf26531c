//! The RDMA devices on the system, as the command layer knows them: found
//! over RDMA netlink (`RDMA_NLDEV_CMD_GET`, then
//! `RDMA_NLDEV_CMD_GET_CHARDEV` for each device's uverbs character device
//! and driver id), as rdma-core does on modern kernels; where netlink is
//! not available, through sysfs, with the driver guessed from the parent
//! device's driver or the name prefix.

use super::sysfs;
use crate::error::{Error, Result};
use crate::sys::netlink;
use std::path::{Path, PathBuf};
use uverbs_abi::ioctl::RdmaDriverId;
use uverbs_abi::netlink as nl;

/// The drivers rverbs has a provider for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// Soft-RoCE (`rdma_rxe`).
    Rxe,
    /// ConnectX (`mlx5_ib`).
    Mlx5,
    /// Anything else: listed, but refuses to open.
    Other,
}

impl Driver {
    /// The firmware version `raw` (`DeviceAttr::fw_ver`: three 16-bit
    /// fields, major, minor, sub-minor) as this driver's rdma-core
    /// provider prints it: mlx5 `%d.%d.%04d`, the others `%d.%d.%d`.
    pub fn format_fw_ver(self, raw: u64) -> String {
        let (a, b, c) = ((raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
        match self {
            Driver::Mlx5 => format!("{a}.{b}.{c:04}"),
            _ => format!("{a}.{b}.{c}"),
        }
    }
}

/// What identifies a device and its driver: what opening it needs.
#[derive(Debug, Clone)]
pub(crate) struct DeviceId {
    /// `rxe0`, `mlx5_0`.
    pub(crate) name: String,
    /// The uverbs character device (`/dev/infiniband/uverbs0`).
    pub(crate) dev_path: PathBuf,
    /// Its major and minor numbers, to check the node is that device.
    pub(crate) dev_t: (u32, u32),
    /// The driver's uverbs ABI version.
    pub(crate) driver_abi: u32,
    pub(crate) node_guid: u64,
    /// `RDMA_NODE_*`.
    pub(crate) node_type: u32,
    pub(crate) driver: Driver,
    /// The driver's name as the kernel knows it.
    pub(crate) driver_name: String,
}

/// Every RDMA device that has a uverbs character device: over netlink,
/// or from sysfs if netlink fails.
pub(crate) fn list() -> Result<Vec<DeviceId>> {
    list_netlink().or_else(|_| list_sysfs())
}

fn list_netlink() -> Result<Vec<DeviceId>> {
    let mut out = Vec::new();
    for d in devices()? {
        // A device without a uverbs node (or that vanished meanwhile) is
        // not usable from userspace: skip it.
        let Ok(c) = chardev(d.index) else {
            continue;
        };
        let (driver, driver_name) = match c.driver_id.map(RdmaDriverId) {
            Some(RdmaDriverId::RXE) => (Driver::Rxe, "rxe".to_string()),
            Some(RdmaDriverId::MLX5) => (Driver::Mlx5, "mlx5".to_string()),
            Some(id) => (Driver::Other, driver_id_name(id)),
            None => identify_driver(&d.name),
        };
        out.push(DeviceId {
            dev_path: Path::new("/dev/infiniband").join(&c.name),
            name: d.name,
            dev_t: c.dev,
            driver_abi: c.abi as u32,
            node_guid: d.node_guid,
            node_type: u32::from(d.node_type),
            driver,
            driver_name,
        });
    }
    Ok(out)
}

/// `RDMA_DRIVER_IRDMA` → `irdma`.
fn driver_id_name(id: RdmaDriverId) -> String {
    id.name()
        .map(|n| n.trim_start_matches("RDMA_DRIVER_").to_ascii_lowercase())
        .unwrap_or_else(|| format!("driver id {}", id.0))
}

fn list_sysfs() -> Result<Vec<DeviceId>> {
    // A device can vanish between readdir and read: skip it rather than
    // fail the whole listing.
    Ok(sysfs::uverbs_dirs()?
        .iter()
        .filter_map(|dir| from_sysfs(dir).ok())
        .collect())
}

fn from_sysfs(dir: &Path) -> Result<DeviceId> {
    let u = sysfs::uverbs(dir)?;
    let node_guid = sysfs::node_guid(&u.ibdev)?;
    let node_type = sysfs::node_type(&u.ibdev)?;
    let (driver, driver_name) = identify_driver(&u.ibdev);
    Ok(DeviceId {
        dev_path: Path::new("/dev/infiniband").join(&u.node),
        name: u.ibdev,
        dev_t: u.dev_t,
        driver_abi: u.abi,
        node_guid,
        node_type,
        driver,
        driver_name,
    })
}

/// The driver behind a device: the bound kernel driver of its parent device
/// when it has one (mlx5_core), else the name prefix (rxe devices are
/// virtual and have no parent; rdma-core matches them by name too).
fn identify_driver(name: &str) -> (Driver, String) {
    if let Some(drv) = sysfs::parent_driver(name) {
        let d = match drv.as_str() {
            "mlx5_core" => Driver::Mlx5,
            _ => Driver::Other,
        };
        return (d, drv);
    }
    if name.starts_with("rxe") {
        return (Driver::Rxe, "rxe".into());
    }
    (Driver::Other, "unknown".into())
}

/// One RDMA device as `RDMA_NLDEV_CMD_GET` reports it.
#[derive(Debug, Clone, Default)]
pub(crate) struct NlDevice {
    pub(crate) index: u32,
    pub(crate) name: String,
    pub(crate) node_guid: u64,
    pub(crate) node_type: u8,
}

/// Every RDMA device (`RDMA_NLDEV_CMD_GET`, dump), with or without a
/// uverbs node.
pub(crate) fn devices() -> Result<Vec<NlDevice>> {
    let get = nl::RDMA_NLDEV_CMD_GET;
    let reply = netlink::transact("RDMA_NLDEV_CMD_GET", get, nl::NLM_F_DUMP, |r| r)?;
    let mut out = Vec::new();
    for attrs in reply.messages() {
        let mut d = NlDevice::default();
        for a in attrs {
            match a.kind() {
                nl::RDMA_NLDEV_ATTR_DEV_INDEX => d.index = a.u32().unwrap_or(0),
                nl::RDMA_NLDEV_ATTR_DEV_NAME => d.name = a.str().unwrap_or_default().into(),
                nl::RDMA_NLDEV_ATTR_NODE_GUID => d.node_guid = a.u64().unwrap_or(0),
                nl::RDMA_NLDEV_ATTR_DEV_NODE_TYPE => d.node_type = a.u8().unwrap_or(0),
                _ => {}
            }
        }
        if !d.name.is_empty() {
            out.push(d);
        }
    }
    Ok(out)
}

/// A device's uverbs character device (`RDMA_NLDEV_CMD_GET_CHARDEV`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Chardev {
    /// `uverbs0`.
    pub(crate) name: String,
    pub(crate) dev: (u32, u32),
    pub(crate) abi: u64,
    pub(crate) driver_id: Option<u32>,
}

/// The uverbs character device of device `index`; an error if it has none.
pub(crate) fn chardev(index: u32) -> Result<Chardev> {
    let cmd = nl::RDMA_NLDEV_CMD_GET_CHARDEV;
    let reply = netlink::transact("RDMA_NLDEV_CMD_GET_CHARDEV", cmd, 0, |r| {
        r.u32(nl::RDMA_NLDEV_ATTR_DEV_INDEX, index)
            .str(nl::RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
    })?;
    let mut c = Chardev::default();
    for a in reply.messages().flatten() {
        match a.kind() {
            nl::RDMA_NLDEV_ATTR_CHARDEV_NAME => c.name = a.str().unwrap_or_default().into(),
            nl::RDMA_NLDEV_ATTR_CHARDEV => c.dev = nl::huge_decode_dev(a.u64().unwrap_or(0)),
            nl::RDMA_NLDEV_ATTR_CHARDEV_ABI => c.abi = a.u64().unwrap_or(0),
            // The header says u64; the kernel puts a u32 (nla_put_u32 in
            // ib_uverbs_get_nl_info), which rdma-core reads. Take both.
            nl::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID => {
                c.driver_id = a
                    .u32()
                    .or_else(|| a.u64().and_then(|v| u32::try_from(v).ok()))
            }
            _ => {}
        }
    }
    if c.name.is_empty() {
        return Err(Error::bad_answer(format!(
            "device {index} has no uverbs character device"
        )));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::Driver;

    #[test]
    fn firmware_versions_print_as_each_provider_prints_them() {
        // 16.30.1000 as mlx5 firmware reports it, and a sub-minor below
        // 1000: rdma-core's mlx5 pads it to four digits, the rest do not.
        let raw = (16u64 << 32) | (30 << 16) | 1000;
        assert_eq!(Driver::Mlx5.format_fw_ver(raw), "16.30.1000");
        let raw = (16u64 << 32) | (30 << 16) | 7;
        assert_eq!(Driver::Mlx5.format_fw_ver(raw), "16.30.0007");
        assert_eq!(Driver::Rxe.format_fw_ver(raw), "16.30.7");
        assert_eq!(Driver::Other.format_fw_ver(u64::MAX), "65535.65535.65535");
    }
}

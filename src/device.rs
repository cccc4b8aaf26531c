//! RDMA devices: discovery and identity.
//!
//! Devices are found over RDMA netlink (`RDMA_NLDEV_CMD_GET`, then
//! `RDMA_NLDEV_CMD_GET_CHARDEV` for each device's uverbs character device
//! and driver id), as rdma-core does on modern kernels; where netlink is not
//! available, through sysfs (`/sys/class/infiniband_verbs/uverbsN`), with
//! the driver guessed from the parent device's driver or the name prefix.

use crate::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};
use uverbs_abi::ioctl::RdmaDriverId;

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

/// The node type (`/sys/class/infiniband/*/node_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    /// 1: CA (an HCA, RoCE or InfiniBand).
    Ca,
    /// 2: switch.
    Switch,
    /// 3: router.
    Router,
    /// 4: RNIC (iWARP).
    Rnic,
    /// 5: usNIC.
    Usnic,
    /// 6: usNIC UDP.
    UsnicUdp,
    /// 7: unspecified.
    Unspecified,
    /// A value this version does not know.
    Unknown(u32),
}

impl NodeType {
    pub(crate) fn from_raw(v: u32) -> NodeType {
        match v {
            1 => NodeType::Ca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            4 => NodeType::Rnic,
            5 => NodeType::Usnic,
            6 => NodeType::UsnicUdp,
            7 => NodeType::Unspecified,
            v => NodeType::Unknown(v),
        }
    }

    /// The transport rdma-core prints for this node type.
    pub fn transport(self) -> &'static str {
        match self {
            NodeType::Ca | NodeType::Switch | NodeType::Router => "InfiniBand",
            NodeType::Rnic => "iWARP",
            NodeType::Usnic => "usNIC",
            NodeType::UsnicUdp => "usNIC UDP",
            NodeType::Unspecified => "unspecified",
            NodeType::Unknown(_) => "invalid transport",
        }
    }
}

/// An RDMA device as found on the system (not yet opened).
#[derive(Debug, Clone)]
pub struct Device {
    pub(crate) name: String,
    pub(crate) dev_path: PathBuf,
    pub(crate) dev_t: (u32, u32),
    pub(crate) driver_abi: u32,
    pub(crate) node_guid: u64,
    pub(crate) node_type: NodeType,
    pub(crate) driver: Driver,
    pub(crate) driver_name: String,
}

const SYS_VERBS: &str = "/sys/class/infiniband_verbs";
const SYS_IB: &str = "/sys/class/infiniband";

fn read_trim(p: &Path) -> Result<String> {
    fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::Io {
            what: format!("reading {}", p.display()),
            source: e,
        })
}

/// Parses `xxxx:xxxx:xxxx:xxxx` (how sysfs prints GUIDs) into the GUID's
/// value (the big-endian number the text spells). Public, hidden, for the
/// fuzz targets.
#[doc(hidden)]
pub fn parse_guid(s: &str) -> Option<u64> {
    let hex: String = s.trim().split(':').collect();
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

/// Formats a GUID as rdma-core does (`0200:00ff:fe00:0001` → `020000fffe000001`).
pub fn format_guid(g: u64) -> String {
    format!("{g:016x}")
}

impl Device {
    /// Lists every RDMA device that has a uverbs character device: over
    /// netlink, or from sysfs if netlink fails.
    pub fn list() -> Result<Vec<Device>> {
        match Self::list_netlink() {
            Ok(v) => Ok(v),
            Err(_) => Self::list_sysfs(),
        }
    }

    fn list_netlink() -> Result<Vec<Device>> {
        let mut out = Vec::new();
        for d in crate::netlink::devices()? {
            // A device without a uverbs node (or that vanished meanwhile)
            // is not usable from userspace: skip it.
            let Ok(c) = crate::netlink::chardev(d.index) else {
                continue;
            };
            let (driver, driver_name) = match c.driver_id.map(RdmaDriverId) {
                Some(RdmaDriverId::RXE) => (Driver::Rxe, "rxe".to_string()),
                Some(RdmaDriverId::MLX5) => (Driver::Mlx5, "mlx5".to_string()),
                Some(id) => (
                    Driver::Other,
                    id.name()
                        .map(|n| n.trim_start_matches("RDMA_DRIVER_").to_ascii_lowercase())
                        .unwrap_or_else(|| format!("driver id {}", id.0)),
                ),
                None => identify_driver(&d.name, &Path::new(SYS_IB).join(&d.name)),
            };
            out.push(Device {
                dev_path: Path::new("/dev/infiniband").join(&c.name),
                name: d.name,
                dev_t: c.dev,
                driver_abi: c.abi as u32,
                node_guid: d.node_guid,
                node_type: NodeType::from_raw(d.node_type as u32),
                driver,
                driver_name,
            });
        }
        Ok(out)
    }

    fn list_sysfs() -> Result<Vec<Device>> {
        let mut out = Vec::new();
        let dir = match fs::read_dir(SYS_VERBS) {
            Ok(d) => d,
            // No RDMA modules loaded: no devices, not an error.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => {
                return Err(Error::Io {
                    what: format!("listing {SYS_VERBS}"),
                    source: e,
                })
            }
        };
        let mut entries: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("uverbs"))
            })
            .collect();
        entries.sort_by_key(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n["uverbs".len()..].parse::<u32>().ok())
                .unwrap_or(u32::MAX)
        });
        for p in entries {
            // A device can vanish between readdir and read: skip it rather
            // than fail the whole listing.
            if let Ok(d) = Self::from_sysfs(&p) {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// Finds a device by name (`None`: the first one).
    pub fn find(name: Option<&str>) -> Result<Device> {
        let all = Self::list()?;
        match name {
            Some(n) => all.into_iter().find(|d| d.name == n),
            None => all.into_iter().next(),
        }
        .ok_or_else(|| Error::NoDevice {
            name: name.map(String::from),
        })
    }

    fn from_sysfs(uverbs_dir: &Path) -> Result<Device> {
        let uverbs = uverbs_dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let name = read_trim(&uverbs_dir.join("ibdev"))?;
        let dev = read_trim(&uverbs_dir.join("dev"))?;
        let dev_t = dev
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| Error::bad_answer(format!("{}/dev: {dev:?}", uverbs_dir.display())))?;
        let driver_abi = read_trim(&uverbs_dir.join("abi_version"))?
            .parse()
            .map_err(|_| Error::bad_answer(format!("{}/abi_version", uverbs_dir.display())))?;
        let ib = Path::new(SYS_IB).join(&name);
        let node_guid = parse_guid(&read_trim(&ib.join("node_guid"))?)
            .ok_or_else(|| Error::bad_answer(format!("{}/node_guid", ib.display())))?;
        let nt = read_trim(&ib.join("node_type"))?;
        let node_type = NodeType::from_raw(
            nt.split(':')
                .next()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        );
        let (driver, driver_name) = identify_driver(&name, &ib);
        Ok(Device {
            dev_path: Path::new("/dev/infiniband").join(&uverbs),
            name,
            dev_t,
            driver_abi,
            node_guid,
            node_type,
            driver,
            driver_name,
        })
    }

    /// The device's name (`rxe0`, `mlx5_0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The uverbs character device (`/dev/infiniband/uverbs0`).
    pub fn dev_path(&self) -> &Path {
        &self.dev_path
    }

    /// The node GUID, as a number (print with [`format_guid`]).
    pub fn node_guid(&self) -> u64 {
        self.node_guid
    }

    /// The node type.
    pub fn node_type(&self) -> NodeType {
        self.node_type
    }

    /// The driver, as far as rverbs is concerned.
    pub fn driver(&self) -> Driver {
        self.driver
    }

    /// The driver's name as the kernel knows it.
    pub fn driver_name(&self) -> &str {
        &self.driver_name
    }

    /// The driver's uverbs ABI version (rxe 2, mlx5 1).
    pub fn driver_abi(&self) -> u32 {
        self.driver_abi
    }
}

/// The driver behind a device: the bound kernel driver of its parent device
/// when it has one (mlx5_core), else the name prefix (rxe devices are
/// virtual and have no parent; rdma-core matches them by name too).
fn identify_driver(name: &str, ib: &Path) -> (Driver, String) {
    if let Ok(link) = fs::read_link(ib.join("device/driver")) {
        if let Some(drv) = link.file_name().and_then(|n| n.to_str()) {
            let d = match drv {
                "mlx5_core" => Driver::Mlx5,
                _ => Driver::Other,
            };
            return (d, drv.to_string());
        }
    }
    if name.starts_with("rxe") {
        return (Driver::Rxe, "rxe".into());
    }
    (Driver::Other, "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_parse_like_sysfs_prints_them() {
        assert_eq!(parse_guid("5054:00ff:fe12:3456"), Some(0x505400fffe123456));
        assert_eq!(format_guid(0x505400fffe123456), "505400fffe123456");
        assert_eq!(parse_guid("5054:00ff:fe12"), None);
        assert_eq!(parse_guid("zzzz:00ff:fe12:3456"), None);
    }
}

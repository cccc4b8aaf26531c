//! RDMA devices: discovery and identity.
//!
//! What a program needs to know is on [`Device`].

use crate::cmd::device::{self, DeviceId};
use crate::error::{Error, Result};
use std::path::Path;

pub use crate::cmd::device::Driver;

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
///
/// Devices are found over RDMA netlink (`RDMA_NLDEV_CMD_GET`, then
/// `RDMA_NLDEV_CMD_GET_CHARDEV` for each device's uverbs character device
/// and driver id), as rdma-core does on modern kernels; where netlink is not
/// available, through sysfs (`/sys/class/infiniband_verbs/uverbsN`), with
/// the driver guessed from the parent device's driver or the name prefix.
/// The command layer finds them (`cmd::device`); a [`Device`] is what it
/// found.
#[derive(Clone)]
pub struct Device {
    pub(crate) id: DeviceId,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = &self.id;
        f.debug_struct("Device")
            .field("name", &id.name)
            .field("dev_path", &id.dev_path)
            .field("dev_t", &id.dev_t)
            .field("driver_abi", &id.driver_abi)
            .field("node_guid", &id.node_guid)
            .field("node_type", &self.node_type())
            .field("driver", &id.driver)
            .field("driver_name", &id.driver_name)
            .finish()
    }
}

/// Formats a GUID as rdma-core does (`0200:00ff:fe00:0001` → `020000fffe000001`).
pub fn format_guid(g: u64) -> String {
    format!("{g:016x}")
}

impl Device {
    /// Lists every RDMA device that has a uverbs character device: over
    /// netlink, or from sysfs if netlink fails.
    pub fn list() -> Result<Vec<Device>> {
        Ok(device::list()?
            .into_iter()
            .map(|id| Device { id })
            .collect())
    }

    /// Finds a device by name (`None`: the first one).
    pub fn find(name: Option<&str>) -> Result<Device> {
        let all = Self::list()?;
        match name {
            Some(n) => all.into_iter().find(|d| d.name() == n),
            None => all.into_iter().next(),
        }
        .ok_or_else(|| Error::NoDevice {
            name: name.map(String::from),
        })
    }

    /// The device's name (`rxe0`, `mlx5_0`).
    pub fn name(&self) -> &str {
        &self.id.name
    }

    /// The uverbs character device (`/dev/infiniband/uverbs0`).
    pub fn dev_path(&self) -> &Path {
        &self.id.dev_path
    }

    /// The node GUID, as a number (print with [`format_guid`]).
    pub fn node_guid(&self) -> u64 {
        self.id.node_guid
    }

    /// The node type.
    pub fn node_type(&self) -> NodeType {
        NodeType::from_raw(self.id.node_type)
    }

    /// The driver, as far as rverbs is concerned.
    pub fn driver(&self) -> Driver {
        self.id.driver
    }

    /// The driver's name as the kernel knows it.
    pub fn driver_name(&self) -> &str {
        &self.id.driver_name
    }

    /// The driver's uverbs ABI version (rxe 2, mlx5 1).
    pub fn driver_abi(&self) -> u32 {
        self.id.driver_abi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_print_as_rdma_core_prints_them() {
        assert_eq!(format_guid(0x505400fffe123456), "505400fffe123456");
        assert_eq!(format_guid(1), "0000000000000001");
    }
}

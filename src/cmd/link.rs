//! Links: the ports of a device (`RDMA_NLDEV_CMD_PORT_GET`) and the
//! software devices `rdma link` adds and deletes
//! (`RDMA_NLDEV_CMD_NEWLINK`, `RDMA_NLDEV_CMD_DELLINK`).

use crate::error::Result;
use crate::sys::netlink;
use uverbs_abi::netlink as nl;

/// One port, as `RDMA_NLDEV_CMD_PORT_GET` reports it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Port {
    pub(crate) dev: String,
    pub(crate) port: u32,
    pub(crate) state: u8,
    pub(crate) phys_state: u8,
    pub(crate) netdev: Option<String>,
}

/// Every port of device `index` (a dump: the kernel dumps the ports of
/// one device at a time).
pub(crate) fn ports(index: u32) -> Result<Vec<Port>> {
    let cmd = nl::RDMA_NLDEV_CMD_PORT_GET;
    let reply = netlink::transact("RDMA_NLDEV_CMD_PORT_GET", cmd, nl::NLM_F_DUMP, |r| {
        r.u32(nl::RDMA_NLDEV_ATTR_DEV_INDEX, index)
    })?;
    let mut out = Vec::new();
    for attrs in reply.messages() {
        let mut p = Port::default();
        for a in attrs {
            match a.kind() {
                nl::RDMA_NLDEV_ATTR_DEV_NAME => p.dev = a.str().unwrap_or_default().into(),
                nl::RDMA_NLDEV_ATTR_PORT_INDEX => p.port = a.u32().unwrap_or(0),
                nl::RDMA_NLDEV_ATTR_PORT_STATE => p.state = a.u8().unwrap_or(0),
                nl::RDMA_NLDEV_ATTR_PORT_PHYS_STATE => p.phys_state = a.u8().unwrap_or(0),
                nl::RDMA_NLDEV_ATTR_NDEV_NAME => p.netdev = a.str().map(String::from),
                _ => {}
            }
        }
        out.push(p);
    }
    Ok(out)
}

/// `RDMA_NLDEV_CMD_NEWLINK`: a device `name` of `link_type` over
/// `netdev`.
pub(crate) fn new_link(name: &str, link_type: &str, netdev: &str) -> Result<()> {
    let cmd = nl::RDMA_NLDEV_CMD_NEWLINK;
    netlink::transact(
        "RDMA_NLDEV_CMD_NEWLINK (link add)",
        cmd,
        nl::NLM_F_ACK,
        |r| {
            r.str(nl::RDMA_NLDEV_ATTR_DEV_NAME, name)
                .str(nl::RDMA_NLDEV_ATTR_LINK_TYPE, link_type)
                .str(nl::RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
        },
    )
    .map(drop)
}

/// `RDMA_NLDEV_CMD_DELLINK` of device `index`. The kernel blocks until
/// every process that holds the device open has closed it.
pub(crate) fn del_link(index: u32) -> Result<()> {
    let cmd = nl::RDMA_NLDEV_CMD_DELLINK;
    netlink::transact(
        "RDMA_NLDEV_CMD_DELLINK (link delete)",
        cmd,
        nl::NLM_F_ACK,
        |r| r.u32(nl::RDMA_NLDEV_ATTR_DEV_INDEX, index),
    )
    .map(drop)
}

//! Ports: `QUERY_PORT` (the ioctl method, which adds `port_cap_flags2`
//! and `active_speed_ex`, or the write command), the GID table (the
//! `QUERY_GID_ENTRY`/`QUERY_GID_TABLE` ioctl methods, or sysfs, which the
//! kernel keeps in step with its own table) and the P_Key table (sysfs
//! only: uverbs has no command for it). Each query decides here, once per
//! call and from what the device's kernel said before ([`super::method`]),
//! which of them answers.

use super::method::Method;
use super::{context, ioctl_unsupported, sysfs, CommandPath, Dev};
use crate::error::{Error, Result};
use uverbs_abi::ioctl::{self as io, IbUverbsGidEntry};
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::{FromZeros, IntoBytes};

/// Largest GID table read in one `QUERY_GID_TABLE` call: a pointer
/// attribute's length is a `u16`.
const MAX_GID_ENTRIES: usize = u16::MAX as usize / std::mem::size_of::<IbUverbsGidEntry>();

/// `QUERY_PORT`: the ioctl method on the ioctl path where the kernel has
/// it, else the write command, whose answer has no `port_cap_flags2` and
/// `active_speed_ex` (0).
pub(crate) fn query_port(dev: &Dev, port: u8) -> Result<io::IbUverbsQueryPortRespEx> {
    if dev.path == CommandPath::Ioctl {
        match query_port_ioctl(dev, port) {
            Err(e) if ioctl_unsupported(&e) => {}
            r => return r,
        }
    }
    let mut c = v::IbUverbsQueryPort::new_zeroed();
    c.port_num = port;
    let mut r = io::IbUverbsQueryPortRespEx::new_zeroed();
    r.legacy_resp = dev.write0::<cmds::QueryPort>(&c)?;
    Ok(r)
}

/// `QUERY_PORT` through the ioctl method.
pub(crate) fn query_port_ioctl(dev: &Dev, port: u8) -> Result<io::IbUverbsQueryPortRespEx> {
    let mut resp = io::IbUverbsQueryPortRespEx::new_zeroed();
    let mut storage = [0u64; io::attr_buf_words(2)];
    let mut call = dev.call(Method::QueryPort, &mut storage);
    call.const_in(io::UVERBS_ATTR_QUERY_PORT_PORT_NUM, u64::from(port))
        .ptr_out(io::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_mut_bytes());
    dev.ioctl(&mut call)?;
    Ok(resp)
}

/// One populated GID table entry, from the kernel or from sysfs.
pub(crate) struct Gid {
    pub(crate) port: u32,
    pub(crate) index: u32,
    pub(crate) gid: [u8; 16],
    /// `IB_UVERBS_GID_TYPE_*` (`u32::MAX`: sysfs text not known).
    pub(crate) gid_type: u32,
    /// 0 for none, and on the sysfs path.
    pub(crate) netdev_ifindex: u32,
    pub(crate) netdev: Option<String>,
}

impl Gid {
    fn from_kernel(e: &IbUverbsGidEntry) -> Gid {
        Gid {
            port: e.port_num,
            index: e.gid_index,
            gid: e.gid_bytes(),
            gid_type: e.gid_type,
            netdev_ifindex: e.netdev_ifindex,
            netdev: (e.netdev_ifindex != 0)
                .then(|| crate::sys::if_name(e.netdev_ifindex))
                .flatten(),
        }
    }
}

/// GID `index` of `port`: the ioctl `QUERY_GID_ENTRY`, or sysfs
/// `ports/P/gids/I` on the write path or where the kernel lacks it.
pub(crate) fn query_gid(dev: &Dev, port: u8, index: u32) -> Result<[u8; 16]> {
    if dev.path == CommandPath::Ioctl {
        match gid_entry_ioctl(dev, port, index) {
            Err(e) if ioctl_unsupported(&e) => {}
            r => return r.map(|e| e.gid_bytes()),
        }
    }
    sysfs::gid(&dev.name, port, index)
}

/// GID table entry `index` of `port` with its type and netdev: the ioctl
/// `QUERY_GID_ENTRY`, or the table read from sysfs. An index with no GID
/// is the kernel's error (ENODATA / EINVAL), or `InvalidArgument` on the
/// sysfs path.
pub(crate) fn query_gid_entry(dev: &Dev, port: u8, index: u32) -> Result<Gid> {
    if dev.path == CommandPath::Ioctl {
        match gid_entry_ioctl(dev, port, index) {
            Err(e) if ioctl_unsupported(&e) => {}
            r => return r.map(|e| Gid::from_kernel(&e)),
        }
    }
    query_gid_table(dev)?
        .into_iter()
        .find(|e| e.port == u32::from(port) && e.index == index)
        .ok_or_else(|| Error::invalid(format!("no GID at index {index} of port {port}")))
}

/// `QUERY_GID_ENTRY` (ioctl only).
pub(crate) fn gid_entry_ioctl(dev: &Dev, port: u8, index: u32) -> Result<IbUverbsGidEntry> {
    let mut entry = IbUverbsGidEntry::new_zeroed();
    let mut storage = [0u64; io::attr_buf_words(4)];
    let mut call = dev.call(Method::QueryGidEntry, &mut storage);
    call.const_in(io::UVERBS_ATTR_QUERY_GID_ENTRY_PORT, u64::from(port))
        .const_in(io::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, u64::from(index))
        .u32_in(io::UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
        .ptr_out(
            io::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
            entry.as_mut_bytes(),
        );
    dev.ioctl(&mut call)?;
    Ok(entry)
}

/// Every populated GID of every port (`ibv_query_gid_table`), sorted by
/// port, then index: one ioctl `QUERY_GID_TABLE` sized by the ports'
/// `gid_tbl_len`, or sysfs on the write path or where the kernel lacks it.
pub(crate) fn query_gid_table(dev: &Dev) -> Result<Vec<Gid>> {
    let ports = context::query_device(dev)?.phys_port_cnt;
    let mut total = 0usize;
    let mut lens = Vec::with_capacity(usize::from(ports));
    for port in 1..=ports {
        let len = query_port(dev, port)?.legacy_resp.gid_tbl_len;
        lens.push((port, len));
        total += len as usize;
    }
    if dev.path == CommandPath::Ioctl {
        match gid_table_ioctl(dev, total.clamp(1, MAX_GID_ENTRIES)) {
            Ok(entries) => {
                let mut v: Vec<Gid> = entries.iter().map(Gid::from_kernel).collect();
                v.sort_by_key(|e| (e.port, e.index));
                return Ok(v);
            }
            Err(e) if ioctl_unsupported(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let mut out = Vec::new();
    for (port, len) in lens {
        gid_table_sysfs(dev, port, len, &mut out)?;
    }
    Ok(out)
}

/// `QUERY_GID_TABLE` (ioctl only) into a buffer of `max` entries; the
/// populated ones.
pub(crate) fn gid_table_ioctl(dev: &Dev, max: usize) -> Result<Vec<IbUverbsGidEntry>> {
    let entry_size = std::mem::size_of::<IbUverbsGidEntry>();
    let mut entries = vec![IbUverbsGidEntry::new_zeroed(); max];
    let mut num = [0u8; 8];
    let mut storage = [0u64; io::attr_buf_words(4)];
    let mut call = dev.call(Method::QueryGidTable, &mut storage);
    call.const_in(
        io::UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE,
        entry_size as u64,
    )
    .u32_in(io::UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0)
    .ptr_out(
        io::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
        entries.as_mut_slice().as_mut_bytes(),
    )
    .ptr_out(io::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &mut num);
    dev.ioctl(&mut call)?;
    let n = u64::from_ne_bytes(num);
    // The count is the kernel's word: never trust it past our buffer.
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= entries.len())
        .ok_or_else(|| {
            Error::bad_answer(format!(
                "QUERY_GID_TABLE: {n} entries in a {max}-entry buffer"
            ))
        })?;
    entries.truncate(n);
    Ok(entries)
}

/// The populated entries of `port`'s table of `len`, from sysfs: each
/// GID (through [`query_gid`]), its type (read against the port's link
/// layer) and its netdev.
fn gid_table_sysfs(dev: &Dev, port: u8, len: u32, out: &mut Vec<Gid>) -> Result<()> {
    let ll = query_port(dev, port)?.legacy_resp.link_layer;
    let ib = ll == v::IbLinkLayer::INFINIBAND.0 || ll == v::IbLinkLayer::UNSPECIFIED.0;
    for index in 0..len {
        let Ok(gid) = query_gid(dev, port, index) else {
            continue;
        };
        if gid == [0; 16] {
            continue;
        }
        out.push(Gid {
            port: u32::from(port),
            index,
            gid,
            gid_type: sysfs::gid_type(&dev.name, port, index, ib),
            netdev_ifindex: 0,
            netdev: sysfs::gid_netdev(&dev.name, port, index),
        });
    }
    Ok(())
}

/// P_Key `index` of `port` (`ibv_query_pkey`, which reads sysfs
/// `ports/P/pkeys/I` too: uverbs has no command for it). RoCE ports have
/// the one default P_Key, 0xffff, at index 0.
pub(crate) fn query_pkey(dev: &Dev, port: u8, index: u16) -> Result<u16> {
    sysfs::pkey(&dev.name, port, index)
}

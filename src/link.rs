//! RDMA links, as iproute2's `rdma link` manages them over RDMA netlink:
//! list every port ([`links`]), add a software device over a network
//! interface ([`add`]: `rdma link add NAME type rxe netdev IFACE`), delete
//! one ([`delete`], [`delete_wait`]). Adding and deleting need
//! `CAP_NET_ADMIN`.
//!
//! ```no_run
//! rverbs::link::add("rxe0", "rxe", "eth0")?;
//! for l in rverbs::link::links()? {
//!     println!("{}/{} netdev {:?}", l.dev, l.port, l.netdev);
//! }
//! rverbs::link::delete("rxe0")?;
//! # Ok::<(), rverbs::Error>(())
//! ```

use crate::cmd::{self, device};
use crate::error::{Error, Result};
use std::path::Path;

/// One port, as `RDMA_NLDEV_CMD_PORT_GET` reports it.
#[derive(Debug, Clone, Default)]
pub struct Link {
    /// Device name.
    pub dev: String,
    /// Port number.
    pub port: u32,
    /// `ib_port_state` (4 = ACTIVE).
    pub state: u8,
    /// Physical state (5 = LINK_UP).
    pub phys_state: u8,
    /// The netdev the port runs over, if any.
    pub netdev: Option<String>,
}

/// Every port of every device: a `RDMA_NLDEV_CMD_PORT_GET` dump per device
/// (the kernel dumps the ports of one device index at a time).
pub fn links() -> Result<Vec<Link>> {
    let mut out = Vec::new();
    for d in device::devices()? {
        out.extend(cmd::link::ports(d.index)?.into_iter().map(|p| Link {
            dev: p.dev,
            port: p.port,
            state: p.state,
            phys_state: p.phys_state,
            netdev: p.netdev,
        }));
    }
    Ok(out)
}

/// Creates a software RDMA link (`rdma link add NAME type TYPE netdev
/// IFACE`, `RDMA_NLDEV_CMD_NEWLINK`).
///
/// The names are checked first (the kernel answers a bad one with an
/// errno that reads like a missing driver): the device name must be 1 to
/// 63 bytes (`IB_DEVICE_NAME_MAX` with its NUL) without `/`, white space
/// or control characters, the interface name 1 to 15 (`IFNAMSIZ`).
pub fn add(name: &str, link_type: &str, netdev: &str) -> Result<()> {
    check_name("device", name, 63)?;
    check_name("link type", link_type, 63)?;
    check_name("network interface", netdev, 15)?;
    cmd::link::new_link(name, link_type, netdev)
}

/// Refuses a name the kernel would refuse, naming what is wrong.
fn check_name(what: &str, name: &str, max: usize) -> Result<()> {
    let bad = if name.is_empty() {
        Some("is empty".to_string())
    } else if name.len() > max {
        Some(format!("is {} bytes, at most {max}", name.len()))
    } else if name
        .chars()
        .any(|c| c == '/' || c.is_whitespace() || c.is_control())
    {
        Some("contains '/', white space or a control character".to_string())
    } else {
        None
    };
    match bad {
        Some(why) => Err(Error::invalid(format!(
            "link add: {what} name {name:?} {why}"
        ))),
        None => Ok(()),
    }
}

/// Deletes a link by device name (`rdma link delete NAME`,
/// `RDMA_NLDEV_CMD_DELLINK`), unless a process holds the device open:
/// then it fails with [`Error::DeviceInUse`] naming them, because the
/// kernel would block the delete until they close it (rxe cannot take a
/// device away from its users). [`delete_wait`] waits instead.
pub fn delete(name: &str) -> Result<()> {
    delete_link(name, false)
}

/// Deletes a link by device name, waiting (in the kernel) for every
/// process that holds it open to close it — which never happens if one of
/// them is the caller.
pub fn delete_wait(name: &str) -> Result<()> {
    delete_link(name, true)
}

fn delete_link(name: &str, wait: bool) -> Result<()> {
    let dev = device::devices()?
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| Error::NoDevice {
            name: Some(name.to_string()),
        })?;
    if !wait {
        // A device without a uverbs node has no user-space holders.
        if let Ok(c) = device::chardev(dev.index) {
            let holders = holders_of(&Path::new("/dev/infiniband").join(&c.name));
            if !holders.is_empty() {
                return Err(Error::DeviceInUse {
                    device: name.to_string(),
                    holders,
                });
            }
        }
    }
    cmd::link::del_link(dev.index)
}

/// The processes that hold `dev_path` open: `(pid, command name)`, read
/// from `/proc/*/fd` (processes whose fds this one may not read are not
/// seen).
fn holders_of(dev_path: &Path) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == dev_path))
        {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            out.push((pid, comm.trim().to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_link_names_are_refused_before_the_kernel() {
        for (name, netdev) in [
            ("", "eth0"),
            (&*"x".repeat(64), "eth0"),
            ("a/b", "eth0"),
            ("rxe0", ""),
            ("rxe0", "sixteen_chars_xx"),
        ] {
            let e = add(name, "rxe", netdev).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { .. }),
                "{name:?} {netdev:?}: {e}"
            );
        }
    }

    /// The holders of a file this process has open include this process.
    #[test]
    fn holders_are_read_from_proc() {
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let target = std::fs::read_link("/proc/self/exe").unwrap();
        let me = std::process::id();
        assert!(holders_of(&target).iter().any(|(pid, _)| *pid == me));
        drop(f);
    }
}

//! Every sysfs read of rverbs: where the kernel keeps what an older
//! kernel's commands cannot answer. The uverbs devices where RDMA netlink
//! is missing (`/sys/class/infiniband_verbs/uverbsN`), a port's GID and
//! P_Key tables where the ioctl methods are missing (rdma-core reads them
//! there too; uverbs has no P_Key command at all), and the rdma_cm ABI
//! version. The text is read by `uverbs_abi::sysfs`.
//!
//! The root is `SYSFS_PATH` when it is set, as libibverbs reads it
//! (`ibv_get_sysfs_path`), else `/sys`: a test can stand a tree of its own
//! in for the kernel's (the fake uverbs device of `mlx5-oracle` does).

use crate::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};
use uverbs_abi::sysfs as text;

/// The sysfs root, read once: `SYSFS_PATH` with its trailing slashes
/// dropped when it is set and the process is not set-user-ID, as
/// libibverbs' `ibv_get_sysfs_path` reads it; else `/sys`.
fn root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| match std::env::var_os("SYSFS_PATH") {
        Some(p) if !crate::sys::set_user_id() => {
            let s = p.to_string_lossy();
            // "" and "/" both name the root directory: paths below are
            // joined as "/class/…", as libibverbs' "%s/class/…" forms them.
            PathBuf::from(format!("{}/", s.trim_end_matches('/')))
        }
        _ => PathBuf::from("/sys"),
    })
}

/// `class/infiniband_verbs` under the root: the uverbs devices.
fn sys_verbs() -> PathBuf {
    root().join("class/infiniband_verbs")
}

/// `class/infiniband` under the root: the RDMA devices.
fn sys_ib() -> PathBuf {
    root().join("class/infiniband")
}

fn read(p: &Path) -> Result<String> {
    fs::read_to_string(p).map_err(|e| Error::Io {
        what: format!("reading {}", p.display()),
        source: e,
    })
}

/// Reads `p` and parses it with `parse`; text that does not parse is a bad
/// answer naming the file and the text.
fn parse<T>(p: &Path, parse: impl FnOnce(&str) -> Option<T>) -> Result<T> {
    let s = read(p)?;
    parse(&s).ok_or_else(|| Error::bad_answer(format!("{}: {s:?}", p.display())))
}

/// A uverbs character device as sysfs describes it.
pub(crate) struct Uverbs {
    /// The node's name (`uverbs0`).
    pub(crate) node: String,
    /// The RDMA device it belongs to (`ibdev`).
    pub(crate) ibdev: String,
    /// `dev`: its major and minor numbers.
    pub(crate) dev_t: (u32, u32),
    /// `abi_version`: the driver's uverbs ABI version.
    pub(crate) abi: u32,
}

/// Every `uverbsN` directory, in the order of N; none (not an error)
/// without the RDMA modules loaded.
pub(crate) fn uverbs_dirs() -> Result<Vec<PathBuf>> {
    let verbs = sys_verbs();
    let dir = match fs::read_dir(&verbs) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::Io {
                what: format!("listing {}", verbs.display()),
                source: e,
            })
        }
    };
    let number = |p: &Path| {
        let name = p.file_name()?.to_str()?;
        name.strip_prefix("uverbs")?.parse::<u32>().ok()
    };
    let mut dirs: Vec<PathBuf> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("uverbs"))
        })
        .collect();
    dirs.sort_by_key(|p| number(p).unwrap_or(u32::MAX));
    Ok(dirs)
}

/// What one `uverbsN` directory says.
pub(crate) fn uverbs(dir: &Path) -> Result<Uverbs> {
    let node = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    Ok(Uverbs {
        node: node.to_string(),
        ibdev: read(&dir.join("ibdev"))?.trim().to_string(),
        dev_t: parse(&dir.join("dev"), text::dev_t)?,
        abi: parse(&dir.join("abi_version"), |s| s.trim().parse().ok())?,
    })
}

/// The device's node GUID.
pub(crate) fn node_guid(ibdev: &str) -> Result<u64> {
    parse(&sys_ib().join(ibdev).join("node_guid"), text::guid)
}

/// The device's node type (`RDMA_NODE_*`), 0 when the text has no number.
pub(crate) fn node_type(ibdev: &str) -> Result<u32> {
    let s = read(&sys_ib().join(ibdev).join("node_type"))?;
    Ok(text::node_type(&s).unwrap_or(0))
}

/// The kernel driver bound to the device's parent (`mlx5_core`), if it
/// has one (rxe devices are virtual and have none).
pub(crate) fn parent_driver(ibdev: &str) -> Option<String> {
    let link = fs::read_link(sys_ib().join(ibdev).join("device/driver")).ok()?;
    Some(link.file_name()?.to_str()?.to_string())
}

fn port_dir(ibdev: &str, port: u8) -> PathBuf {
    sys_ib().join(ibdev).join("ports").join(port.to_string())
}

/// GID `index` of `port` (`ports/P/gids/I`; all zeros where none is set).
pub(crate) fn gid(ibdev: &str, port: u8, index: u32) -> Result<[u8; 16]> {
    let p = port_dir(ibdev, port).join("gids").join(index.to_string());
    parse(&p, text::gid)
}

/// The type of GID `index` (`gid_attrs/types/I`) as an
/// `IB_UVERBS_GID_TYPE_*`, `u32::MAX` for text this version does not know.
pub(crate) fn gid_type(ibdev: &str, port: u8, index: u32, ib_port: bool) -> u32 {
    let p = port_dir(ibdev, port).join(format!("gid_attrs/types/{index}"));
    let s = fs::read_to_string(p).unwrap_or_default();
    text::gid_type(&s, ib_port).map_or(u32::MAX, |t| t.0)
}

/// The netdev of GID `index` (`gid_attrs/ndevs/I`), if it names one.
pub(crate) fn gid_netdev(ibdev: &str, port: u8, index: u32) -> Option<String> {
    let p = port_dir(ibdev, port).join(format!("gid_attrs/ndevs/{index}"));
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// P_Key `index` of `port` (`ports/P/pkeys/I`).
pub(crate) fn pkey(ibdev: &str, port: u8, index: u16) -> Result<u16> {
    parse(
        &port_dir(ibdev, port).join("pkeys").join(index.to_string()),
        text::pkey,
    )
}

/// The rdma_cm user ABI version (`/sys/class/misc/rdma_cm/abi_version`),
/// `None` without rdma_ucm.
pub(crate) fn rdma_cm_abi() -> Option<u32> {
    let s = fs::read_to_string(root().join("class/misc/rdma_cm/abi_version")).ok()?;
    s.trim().parse().ok()
}

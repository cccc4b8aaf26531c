//! RDMA netlink (`NETLINK_RDMA`, the NLDEV client): list devices and their
//! uverbs character devices, and add or delete links (`rdma link add NAME
//! type rxe netdev IFACE`) — what iproute2's `rdma` tool sends.
//!
//! Replies are parsed through checked views: every length is validated
//! before it is used, so a malformed message is an error, never a panic.

use crate::error::{Errno, Error, Result};
use crate::sys;
use std::os::fd::AsFd;
use uverbs_abi::netlink as v;

/// One attribute of a message: its type and payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attr<'a> {
    pub kind: u16,
    pub data: &'a [u8],
}

impl Attr<'_> {
    pub fn u32(&self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.data.get(..4)?.try_into().ok()?))
    }
    pub fn u64(&self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.data.get(..8)?.try_into().ok()?))
    }
    pub fn u8(&self) -> Option<u8> {
        self.data.first().copied()
    }
    pub fn str(&self) -> Option<String> {
        let end = self
            .data
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.data.len());
        std::str::from_utf8(&self.data[..end])
            .ok()
            .map(String::from)
    }
}

/// The attributes of one message payload; a malformed one is an error.
pub(crate) fn attrs(mut b: &[u8]) -> Result<Vec<Attr<'_>>> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let kind = u16::from_ne_bytes([b[2], b[3]]) & 0x3fff; // drop NLA_F_NESTED/NET_BYTEORDER
        if len < 4 || len > b.len() {
            return Err(Error::bad_answer(format!(
                "netlink attribute of length {len} in {} bytes",
                b.len()
            )));
        }
        out.push(Attr {
            kind,
            data: &b[4..len],
        });
        let padded = (len + 3) & !3;
        b = b.get(padded..).unwrap_or(&[]);
    }
    Ok(out)
}

/// One message of a reply: its type, flags and payload.
struct Msg<'a> {
    kind: u16,
    payload: &'a [u8],
}

fn messages(mut b: &[u8]) -> Result<Vec<Msg<'_>>> {
    let mut out = Vec::new();
    while b.len() >= 16 {
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        if len < 16 || len > b.len() {
            return Err(Error::bad_answer(format!(
                "netlink message of length {len} in {} bytes",
                b.len()
            )));
        }
        out.push(Msg {
            kind,
            payload: &b[16..len],
        });
        b = b.get((len + 3) & !3..).unwrap_or(&[]);
    }
    Ok(out)
}

/// Reads one reply datagram as [`transact`] and the listings do: its
/// messages, each one's attributes, each attribute's value as every type;
/// returns how many attributes it found. Public, hidden, for the fuzz
/// targets (malformed bytes must be an error, never a panic).
#[doc(hidden)]
pub fn parse_reply(datagram: &[u8]) -> Result<usize> {
    let mut n = 0;
    for m in messages(datagram)? {
        for a in attrs(m.payload)? {
            let _ = (a.u8(), a.u32(), a.u64(), a.str());
            n += 1;
        }
    }
    Ok(n)
}

/// A request under construction: header, then attributes.
pub(crate) struct Request {
    buf: Vec<u8>,
}

impl Request {
    /// A request for `op`. Requests that are not dumps always ask for an
    /// ACK: the kernel then ends every reply with NLMSG_ERROR(0), so the
    /// reader knows when it is complete (a dump ends with NLMSG_DONE).
    pub fn new(op: u16, flags: u16) -> Request {
        let mut buf = vec![0u8; 16];
        let kind = (v::RDMA_NL_NLDEV << 10) + op;
        let flags = if flags & v::NLM_F_DUMP == v::NLM_F_DUMP {
            flags
        } else {
            flags | v::NLM_F_ACK
        };
        buf[4..6].copy_from_slice(&kind.to_ne_bytes());
        buf[6..8].copy_from_slice(&(flags | v::NLM_F_REQUEST).to_ne_bytes());
        buf[8..12].copy_from_slice(&1u32.to_ne_bytes()); // seq
        Request { buf }
    }

    fn attr(mut self, kind: u16, data: &[u8]) -> Request {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
        self
    }

    pub fn u32(self, kind: u16, v: u32) -> Request {
        self.attr(kind, &v.to_ne_bytes())
    }

    pub fn str(self, kind: u16, s: &str) -> Request {
        let mut d = s.as_bytes().to_vec();
        d.push(0);
        self.attr(kind, &d)
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// Sends `req` and collects every reply payload until the dump ends or the
/// kernel acknowledges. A kernel error comes back as [`Error::Kernel`]
/// naming `op`.
pub(crate) fn transact(op: &'static str, req: Request) -> Result<Vec<Vec<u8>>> {
    let sock = sys::netlink_socket(v::NETLINK_RDMA, 5)?;
    let msg = req.finish();
    sys::netlink_send(sock.as_fd(), op, &msg)?;
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        sys::netlink_recv(sock.as_fd(), op, &mut buf)?;
        for m in messages(&buf)? {
            match m.kind {
                v::NLMSG_DONE => return Ok(out),
                v::NLMSG_ERROR => {
                    return match nlmsg_error(m.payload)? {
                        None => Ok(out), // the ACK
                        Some(errno) => Err(Error::kernel(op, errno)),
                    };
                }
                _ => out.push(m.payload.to_vec()),
            }
        }
    }
}

/// The errno of an `NLMSG_ERROR` payload (`struct nlmsgerr`: a negative
/// errno first), or `None` for the ACK (0). The code is the kernel's word,
/// not trusted: anything but a negative errno is a bad answer (`-i32::MIN`
/// does not exist).
fn nlmsg_error(payload: &[u8]) -> Result<Option<Errno>> {
    let code = payload
        .get(..4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| Error::bad_answer("short netlink error message"))?;
    match code {
        0 => Ok(None),
        c if c < 0 && c > -4096 => Ok(Some(Errno(-c))),
        c => Err(Error::bad_answer(format!(
            "netlink error message with code {c}, not a negative errno"
        ))),
    }
}

/// One RDMA device as RDMA_NLDEV_CMD_GET reports it.
#[derive(Debug, Clone, Default)]
pub(crate) struct NlDevice {
    pub index: u32,
    pub name: String,
    pub node_guid: u64,
    pub node_type: u8,
}

/// Every RDMA device (`RDMA_NLDEV_CMD_GET`, dump).
pub(crate) fn devices() -> Result<Vec<NlDevice>> {
    let replies = transact(
        "RDMA_NLDEV_CMD_GET",
        Request::new(v::RDMA_NLDEV_CMD_GET, v::NLM_F_DUMP),
    )?;
    let mut out = Vec::new();
    for r in &replies {
        let mut d = NlDevice::default();
        for a in attrs(r)? {
            match a.kind {
                v::RDMA_NLDEV_ATTR_DEV_INDEX => d.index = a.u32().unwrap_or(0),
                v::RDMA_NLDEV_ATTR_DEV_NAME => d.name = a.str().unwrap_or_default(),
                v::RDMA_NLDEV_ATTR_NODE_GUID => d.node_guid = a.u64().unwrap_or(0),
                v::RDMA_NLDEV_ATTR_DEV_NODE_TYPE => d.node_type = a.u8().unwrap_or(0),
                _ => {}
            }
        }
        if !d.name.is_empty() {
            out.push(d);
        }
    }
    Ok(out)
}

/// Whether the kernel copies pinned pages into a child at fork
/// (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`, Linux 5.13 on). Asked once per
/// process (`RDMA_NLDEV_CMD_SYS_GET`); a kernel that does not say is taken
/// not to.
pub(crate) fn kernel_copies_on_fork() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        let Ok(replies) = transact(
            "RDMA_NLDEV_CMD_SYS_GET",
            Request::new(v::RDMA_NLDEV_CMD_SYS_GET, 0),
        ) else {
            return false;
        };
        replies.iter().any(|r| {
            attrs(r).is_ok_and(|a| {
                a.iter()
                    .any(|a| a.kind == v::RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK && a.u8() == Some(1))
            })
        })
    })
}

/// Device memory (MR buffers, mlx5 queues): marked `MADV_DONTFORK` where
/// the kernel does not copy pinned pages on fork (what rdma-core's
/// `ibv_fork_init` does), so a `fork()` never leaves the device writing
/// pages the parent lost to copy-on-write.
pub(crate) fn device_memory(op: &'static str, len: usize) -> Result<sys::Mapping> {
    sys::Mapping::for_device(op, len, !kernel_copies_on_fork())
}

/// A device's uverbs character device (`RDMA_NLDEV_CMD_GET_CHARDEV`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Chardev {
    pub name: String,
    pub dev: (u32, u32),
    pub abi: u64,
    pub driver_id: Option<u32>,
}

pub(crate) fn chardev(index: u32) -> Result<Chardev> {
    let req = Request::new(v::RDMA_NLDEV_CMD_GET_CHARDEV, 0)
        .u32(v::RDMA_NLDEV_ATTR_DEV_INDEX, index)
        .str(v::RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs");
    let replies = transact("RDMA_NLDEV_CMD_GET_CHARDEV", req)?;
    let mut c = Chardev::default();
    for r in &replies {
        for a in attrs(r)? {
            match a.kind {
                v::RDMA_NLDEV_ATTR_CHARDEV_NAME => c.name = a.str().unwrap_or_default(),
                v::RDMA_NLDEV_ATTR_CHARDEV => {
                    // huge_encode_dev(): the kernel's 32-bit dev_t in a u64.
                    let d = a.u64().unwrap_or(0);
                    c.dev = (
                        ((d & 0xfff00) >> 8) as u32,
                        ((d & 0xff) | ((d >> 12) & 0xfff00)) as u32,
                    );
                }
                v::RDMA_NLDEV_ATTR_CHARDEV_ABI => c.abi = a.u64().unwrap_or(0),
                v::RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID => c.driver_id = a.u64().map(|v| v as u32),
                _ => {}
            }
        }
    }
    if c.name.is_empty() {
        return Err(Error::bad_answer(format!(
            "device {index} has no uverbs character device"
        )));
    }
    Ok(c)
}

/// One port, as RDMA_NLDEV_CMD_PORT_GET reports it (for `rverbs link`).
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
    let mut replies = Vec::new();
    for d in devices()? {
        let req = Request::new(v::RDMA_NLDEV_CMD_PORT_GET, v::NLM_F_DUMP)
            .u32(v::RDMA_NLDEV_ATTR_DEV_INDEX, d.index);
        replies.extend(transact("RDMA_NLDEV_CMD_PORT_GET", req)?);
    }
    let mut out = Vec::new();
    for r in &replies {
        let mut l = Link::default();
        for a in attrs(r)? {
            match a.kind {
                v::RDMA_NLDEV_ATTR_DEV_NAME => l.dev = a.str().unwrap_or_default(),
                v::RDMA_NLDEV_ATTR_PORT_INDEX => l.port = a.u32().unwrap_or(0),
                v::RDMA_NLDEV_ATTR_PORT_STATE => l.state = a.u8().unwrap_or(0),
                v::RDMA_NLDEV_ATTR_PORT_PHYS_STATE => l.phys_state = a.u8().unwrap_or(0),
                v::RDMA_NLDEV_ATTR_NDEV_NAME => l.netdev = a.str(),
                _ => {}
            }
        }
        out.push(l);
    }
    Ok(out)
}

/// Creates a software RDMA link (`rdma link add NAME type TYPE netdev IFACE`).
///
/// The names are checked first (the kernel answers a bad one with an
/// errno that reads like a missing driver): the device name must be 1 to
/// 63 bytes (`IB_DEVICE_NAME_MAX` with its NUL) without `/`, white space
/// or control characters, the interface name 1 to 15 (`IFNAMSIZ`).
pub fn link_add(name: &str, link_type: &str, netdev: &str) -> Result<()> {
    check_name("device", name, 63)?;
    check_name("link type", link_type, 63)?;
    check_name("network interface", netdev, 15)?;
    let req = Request::new(v::RDMA_NLDEV_CMD_NEWLINK, v::NLM_F_ACK)
        .str(v::RDMA_NLDEV_ATTR_DEV_NAME, name)
        .str(v::RDMA_NLDEV_ATTR_LINK_TYPE, link_type)
        .str(v::RDMA_NLDEV_ATTR_NDEV_NAME, netdev);
    transact("RDMA_NLDEV_CMD_NEWLINK (link add)", req).map(|_| ())
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

/// Deletes a link by device name (`rdma link delete NAME`), unless a
/// process holds the device open: then it fails with
/// [`Error::DeviceInUse`] naming them, because the kernel would block the
/// delete until they close it (rxe cannot take a device away from its
/// users). [`link_delete_wait`] waits instead.
pub fn link_delete(name: &str) -> Result<()> {
    delete(name, false)
}

/// Deletes a link by device name, waiting (in the kernel) for every
/// process that holds it open to close it — which never happens if one of
/// them is the caller.
pub fn link_delete_wait(name: &str) -> Result<()> {
    delete(name, true)
}

/// The processes that hold `dev_path` open: `(pid, command name)`, read
/// from `/proc/*/fd` (processes whose fds this one may not read are not
/// seen).
pub fn holders_of(dev_path: &std::path::Path) -> Vec<(u32, String)> {
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

fn delete(name: &str, wait: bool) -> Result<()> {
    let dev = devices()?
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| Error::NoDevice {
            name: Some(name.to_string()),
        })?;
    if !wait {
        // A device without a uverbs node has no user-space holders.
        if let Ok(c) = chardev(dev.index) {
            let path = std::path::Path::new("/dev/infiniband").join(&c.name);
            let holders = holders_of(&path);
            if !holders.is_empty() {
                return Err(Error::DeviceInUse {
                    device: name.to_string(),
                    holders,
                });
            }
        }
    }
    let req = Request::new(v::RDMA_NLDEV_CMD_DELLINK, v::NLM_F_ACK)
        .u32(v::RDMA_NLDEV_ATTR_DEV_INDEX, dev.index);
    transact("RDMA_NLDEV_CMD_DELLINK (link delete)", req).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An error code the kernel never sends (`i32::MIN`, whose negation
    /// overflows; a positive one) is a bad answer, not a panic or a
    /// wrapped errno (issue 25, item 5).
    #[test]
    fn netlink_error_codes_are_checked() {
        let p = |c: i32| c.to_ne_bytes();
        assert!(nlmsg_error(&p(0)).unwrap().is_none());
        assert_eq!(
            nlmsg_error(&p(-libc::EINVAL)).unwrap(),
            Some(Errno(libc::EINVAL))
        );
        assert!(nlmsg_error(&p(i32::MIN)).is_err());
        assert!(nlmsg_error(&p(5)).is_err());
        assert!(nlmsg_error(&[0, 0]).is_err());
    }

    #[test]
    fn bad_link_names_are_refused_before_the_kernel() {
        for (name, netdev) in [
            ("", "eth0"),
            (&*"x".repeat(64), "eth0"),
            ("a/b", "eth0"),
            ("rxe0", ""),
            ("rxe0", "sixteen_chars_xx"),
        ] {
            let e = link_add(name, "rxe", netdev).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument { .. }),
                "{name:?} {netdev:?}: {e}"
            );
        }
    }

    #[test]
    fn request_layout() {
        let m = Request::new(v::RDMA_NLDEV_CMD_NEWLINK, v::NLM_F_ACK)
            .str(v::RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
            .finish();
        assert_eq!(m.len(), 16 + 12);
        assert_eq!(u32::from_ne_bytes(m[..4].try_into().unwrap()), 28);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), (5 << 10) + 3);
        let a = attrs(&m[16..]).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].str().as_deref(), Some("rxe0"));
    }

    proptest! {
        /// Whatever the kernel sends, parsing never panics.
        #[test]
        fn parsing_arbitrary_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = messages(&b);
            let _ = attrs(&b);
        }

        /// Attributes round-trip through the builder and the parser.
        #[test]
        fn attributes_round_trip(vals in proptest::collection::vec((1u16..100, any::<u32>()), 0..20)) {
            let mut r = Request::new(v::RDMA_NLDEV_CMD_GET, 0);
            for (k, x) in &vals {
                r = r.u32(*k, *x);
            }
            let m = r.finish();
            let a = attrs(&m[16..]).unwrap();
            prop_assert_eq!(a.len(), vals.len());
            for (got, (k, x)) in a.iter().zip(&vals) {
                prop_assert_eq!((got.kind, got.u32()), (*k, Some(*x)));
            }
        }
    }
}

//! The RDMA netlink socket (`NETLINK_RDMA`): one NLDEV request out, its
//! reply in. The bytes both ways are uverbs-abi's ([`NlMsgBuilder`],
//! [`ReplyReader`], checked views that never panic); this module adds the
//! socket, the send and the receive, and turns the reply's failures into
//! [`Error`]s: the kernel's errno as [`Error::Kernel`] naming the request,
//! malformed bytes as [`Error::BadKernelAnswer`].

use super::retry;
use crate::error::{Errno, Error, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use uverbs_abi::netlink::{self as nl, Attrs, NlMsgBuilder, NlReplyError, ReplyReader};

/// A request's attributes, added to the header [`transact`] writes.
pub type Request = NlMsgBuilder<Vec<u8>>;

/// Every request is alone on a fresh socket: one sequence number does.
const SEQ: u32 = 1;

/// Seconds a receive waits: a kernel that never answers must not hang the
/// caller.
const TIMEOUT_SECS: i64 = 5;

/// The data messages of one reply.
pub struct Reply(Vec<Vec<u8>>);

impl Reply {
    /// Each message's attributes, in order. Their lengths were checked
    /// when the reply arrived ([`transact`] fails otherwise), so none is
    /// skipped here.
    pub fn messages(&self) -> impl Iterator<Item = Attrs<'_>> {
        self.0.iter().filter_map(|p| Attrs::new_checked(p).ok())
    }
}

/// Sends NLDEV command `cmd` (`RDMA_NLDEV_CMD_*`) with `flags` and the
/// attributes `attrs` adds, and collects the reply: every message of a
/// dump up to `NLMSG_DONE`, or of an answer up to the kernel's ACK (a
/// request that is not a dump always asks for one, so that its end is
/// known). A kernel error comes back as [`Error::Kernel`] naming `op`.
pub fn transact(
    op: &'static str,
    cmd: u16,
    flags: u16,
    attrs: impl FnOnce(Request) -> Request,
) -> Result<Reply> {
    let flags = request_flags(flags);
    let kind = nl::rdma_nl_get_type(nl::RDMA_NL_NLDEV, cmd);
    let msg = attrs(NlMsgBuilder::new(Vec::new(), kind, flags, SEQ))
        .finish()
        .map_err(|e| Error::invalid(format!("{op}: {e}")))?;
    let sock = socket()?;
    send(sock.as_fd(), op, &msg)?;
    let mut reader = ReplyReader::new(SEQ, flags);
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    while !reader.is_done() {
        recv(sock.as_fd(), op, &mut buf)?;
        for m in reader.feed(&buf).map_err(|e| reply_error(op, e))? {
            m.attrs()
                .map_err(|e| Error::bad_answer(format!("{op}: {e}")))?;
            out.push(m.payload().to_vec());
        }
    }
    Ok(Reply(out))
}

/// The flags a request is sent with: a request, and one that is not a
/// dump asks for an ACK, so that the kernel ends every reply (a dump ends
/// with `NLMSG_DONE`).
fn request_flags(flags: u16) -> u16 {
    if flags & nl::NLM_F_DUMP == nl::NLM_F_DUMP {
        flags | nl::NLM_F_REQUEST
    } else {
        flags | nl::NLM_F_REQUEST | nl::NLM_F_ACK
    }
}

/// A failed reply as an [`Error`] naming the request.
fn reply_error(op: &'static str, e: NlReplyError) -> Error {
    match e {
        // The reader took the code only in the errno range.
        NlReplyError::Kernel { errno, .. } => Error::kernel(op, Errno(errno)),
        e => Error::bad_answer(format!("{op}: {e}")),
    }
}

/// A `NETLINK_RDMA` socket whose receives time out.
fn socket() -> Result<OwnedFd> {
    // SAFETY: a plain socket(2) call; the fd is owned right below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            nl::NETLINK_RDMA,
        )
    };
    if fd < 0 {
        return Err(Error::kernel("socket(AF_NETLINK)", Errno::last()));
    }
    // SAFETY: fd is a fresh socket nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let tv = libc::timeval {
        tv_sec: TIMEOUT_SECS,
        tv_usec: 0,
    };
    // SAFETY: tv is a valid timeval for the length given.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        )
    };
    if r < 0 {
        return Err(Error::kernel("setsockopt(SO_RCVTIMEO)", Errno::last()));
    }
    Ok(sock)
}

/// Sends `msg` to the kernel (netlink port 0).
fn send(sock: BorrowedFd<'_>, op: &'static str, msg: &[u8]) -> Result<()> {
    // SAFETY: an all-zero sockaddr_nl is valid; pid 0 is the kernel.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    retry(op, || {
        // SAFETY: msg and sa are valid for the lengths given.
        unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        }
    })
    .map(drop)
}

/// Receives one datagram into `buf`'s spare capacity and sets its length
/// to the datagram's; a receive timeout is `ETIMEDOUT`. The buffer is
/// never zeroed first: the kernel writes what is read (zeroing two 64 KiB
/// buffers was a third of `rverbs devices`' start-up).
fn recv(sock: BorrowedFd<'_>, op: &'static str, buf: &mut Vec<u8>) -> Result<()> {
    buf.clear();
    let spare = buf.spare_capacity_mut();
    let n = retry(op, || {
        // SAFETY: spare is writable (uninitialised) memory of its length;
        // recv writes at most that many bytes into it.
        unsafe { libc::recv(sock.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), 0) }
    })
    .map_err(|e| match e.errno() {
        Some(Errno(libc::EAGAIN)) => Error::kernel(op, Errno(libc::ETIMEDOUT)),
        _ => e,
    })?;
    let n = n.min(buf.capacity());
    // SAFETY: recv initialised the first n bytes (n is at most the spare
    // capacity, clamped again above).
    unsafe { buf.set_len(n) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_ask_for_an_ack_unless_they_dump() {
        use nl::{NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};
        assert_eq!(request_flags(0), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(request_flags(NLM_F_ACK), NLM_F_REQUEST | NLM_F_ACK);
        assert_eq!(request_flags(NLM_F_DUMP), NLM_F_REQUEST | NLM_F_DUMP);
    }

    #[test]
    fn kernel_errors_name_the_request_and_malformed_replies_are_bad_answers() {
        let e = reply_error(
            "RDMA_NLDEV_CMD_GET",
            NlReplyError::Kernel {
                errno: libc::EPERM,
                message: None,
            },
        );
        assert!(
            matches!(e, Error::Kernel { op: "RDMA_NLDEV_CMD_GET", errno } if errno.0 == libc::EPERM)
        );
        let bad = nl::NlParseError::BadErrorCode { code: i32::MIN };
        let e = reply_error("X", NlReplyError::Malformed(bad));
        assert!(matches!(e, Error::BadKernelAnswer { .. }), "{e}");
    }
}

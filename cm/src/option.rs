//! `SET_OPTION` and `NOTIFY` of an id.

use crate::error::Result;
use crate::id::Id;
use uverbs_abi::cm as c;
use zerocopy::IntoBytes;

/// An option of an id (`rdma_set_option`, level `RDMA_OPTION_ID`), with the
/// value in the type and size the kernel checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdOption {
    /// `RDMA_OPTION_ID_TOS`: the type of service (IP TOS / traffic class)
    /// of the id's traffic.
    Tos(u8),
    /// `RDMA_OPTION_ID_REUSEADDR`: bind to a port still held by an id in
    /// TIME_WAIT or by another id with the option (before bind).
    ReuseAddr(bool),
    /// `RDMA_OPTION_ID_AFONLY`: an IPv6 wildcard bind takes only IPv6
    /// (before bind).
    AfOnly(bool),
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`: the QP's local ACK timeout exponent
    /// (4.096 µs × 2^n), overriding the one derived from the path.
    AckTimeout(u8),
}

impl Id {
    /// Sets an option (`SET_OPTION`).
    pub fn set_option(&self, opt: IdOption) -> Result<()> {
        let (name, int, byte) = match opt {
            IdOption::Tos(v) => (c::RDMA_OPTION_ID_TOS, None, v),
            IdOption::ReuseAddr(v) => (c::RDMA_OPTION_ID_REUSEADDR, Some(i32::from(v)), 0),
            IdOption::AfOnly(v) => (c::RDMA_OPTION_ID_AFONLY, Some(i32::from(v)), 0),
            IdOption::AckTimeout(v) => (c::RDMA_OPTION_ID_ACK_TIMEOUT, None, v),
        };
        // The value lives on this stack frame for the whole write().
        let (ptr, len) = match &int {
            Some(i) => (i.as_bytes().as_ptr(), 4),
            None => (std::ptr::from_ref(&byte), 1),
        };
        let cmd = c::RdmaUcmSetOption {
            optval: ptr as u64,
            id: self.handle(),
            level: c::RDMA_OPTION_ID,
            optname: name,
            optlen: len,
        };
        self.cmd("SET_OPTION", c::RDMA_USER_CM_CMD_SET_OPTION, &cmd, 0)
    }

    /// Tells the connection a QP event happened (`NOTIFY`, `rdma_notify`):
    /// `event` is an `IB_EVENT_*` number; `IB_EVENT_COMM_EST` (4) on the
    /// passive side completes a connection whose RTU was lost, the
    /// traffic having arrived first.
    pub fn notify(&self, event: u32) -> Result<()> {
        let cmd = c::RdmaUcmNotify {
            id: self.handle(),
            event,
        };
        self.cmd("NOTIFY", c::RDMA_USER_CM_CMD_NOTIFY, &cmd, 0)
    }
}

//! Options and notifications of an id: `rdma_set_option`, `rdma_notify`,
//! `rdma_get_src_port` / `rdma_get_dst_port`.

use super::CmId;
use crate::error::Result;
use rverbs_cm::IdOption;

impl CmId {
    /// Sets an option of the id (`SET_OPTION`, `rdma_set_option` at level
    /// `RDMA_OPTION_ID`): TOS before resolving the route, REUSEADDR and
    /// AFONLY before binding, ACK_TIMEOUT before the QP reaches RTS. The
    /// kernel refuses an option in a state that no longer takes it
    /// (`EINVAL`).
    pub fn set_option(&self, opt: IdOption) -> Result<()> {
        Ok(self.raw().set_option(opt)?)
    }

    /// Reports a QP event to the connection (`NOTIFY`, `rdma_notify`):
    /// `IB_EVENT_COMM_EST` (4) on the passive side of a connection whose
    /// RTU has not arrived establishes it (the peer's traffic proved it
    /// up); `ESTABLISHED` follows.
    pub fn notify(&self, event: u32) -> Result<()> {
        Ok(self.raw().notify(event)?)
    }

    /// The local port (`rdma_get_src_port`): 0 before bind or resolve.
    pub fn src_port(&self) -> Result<u16> {
        Ok(self.query_addr()?.src.map_or(0, |a| a.port()))
    }

    /// The peer's port (`rdma_get_dst_port`): 0 before resolve or a
    /// connection request.
    pub fn dst_port(&self) -> Result<u16> {
        Ok(self.query_addr()?.dst.map_or(0, |a| a.port()))
    }
}

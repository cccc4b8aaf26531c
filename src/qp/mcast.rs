//! Multicast groups of a UD QP (`ibv_attach_mcast` / `ibv_detach_mcast`).

use super::{Qp, QpInner};
use crate::cmd;
use crate::error::Result;

impl QpInner {
    pub(crate) fn attach_mcast(&self, gid: &[u8; 16], lid: u16) -> Result<()> {
        cmd::mcast::attach(&self.ctx.dev, self.handle.raw(), gid, lid)
    }

    pub(crate) fn detach_mcast(&self, gid: &[u8; 16], lid: u16) -> Result<()> {
        cmd::mcast::detach(&self.ctx.dev, self.handle.raw(), gid, lid)
    }
}

impl Qp {
    /// Attaches this UD QP to the multicast group `gid` (`ATTACH_MCAST`):
    /// from now on it receives a copy of every datagram sent to the group.
    /// `lid` is the group's multicast LID on InfiniBand; RoCE ignores it
    /// (pass 0). The kernel refuses a QP that is not UD (`EINVAL`) and a
    /// GID that is not multicast (`ff..`, `EINVAL`); attaching twice to one
    /// group is allowed and counted once.
    pub fn attach_mcast(&self, gid: &[u8; 16], lid: u16) -> Result<()> {
        self.inner.attach_mcast(gid, lid)
    }

    /// Detaches this QP from `gid` (`DETACH_MCAST`); the kernel answers
    /// `EINVAL` if it was not attached.
    pub fn detach_mcast(&self, gid: &[u8; 16], lid: u16) -> Result<()> {
        self.inner.detach_mcast(gid, lid)
    }
}

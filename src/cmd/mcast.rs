//! Multicast attachment of UD QPs: `ATTACH_MCAST` and `DETACH_MCAST`
//! (write() commands without a response; `ib_uverbs_attach_mcast` in the
//! kernel's `uverbs_cmd.c`).

use super::Dev;
use crate::error::Result;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// `ATTACH_MCAST`: the QP receives what is sent to `gid` (and `lid` on IB;
/// RoCE ignores it).
pub(crate) fn attach(dev: &Dev, qp: u32, gid: &[u8; 16], lid: u16) -> Result<()> {
    let mut c = v::IbUverbsAttachMcast::new_zeroed();
    c.gid = *gid;
    c.qp_handle = qp;
    c.mlid = lid;
    dev.write0::<cmds::AttachMcast>(&c)
}

/// `DETACH_MCAST`: undoes [`attach`].
pub(crate) fn detach(dev: &Dev, qp: u32, gid: &[u8; 16], lid: u16) -> Result<()> {
    let mut c = v::IbUverbsDetachMcast::new_zeroed();
    c.gid = *gid;
    c.qp_handle = qp;
    c.mlid = lid;
    dev.write0::<cmds::DetachMcast>(&c)
}

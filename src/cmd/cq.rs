//! Completion queues and channels: `CREATE_COMP_CHANNEL`, `CREATE_CQ`,
//! `RESIZE_CQ`, `REQ_NOTIFY_CQ`, `DESTROY_CQ`.

use super::{Dev, Handle, Kind};
use crate::error::{Error, Result};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// A CQ's kind.
pub(crate) enum CqKind {}
/// A CQ's control half.
pub(crate) type CqHandle = Handle<CqKind>;

impl Kind for CqKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDestroyCq::new_zeroed();
        c.cq_handle = handle;
        dev.write0::<cmds::DestroyCq>(&c).map(drop)
    }
}

/// `CREATE_COMP_CHANNEL`: the channel's fd.
pub(crate) fn create_comp_channel(dev: &Dev) -> Result<OwnedFd> {
    let r = dev.write0::<cmds::CreateCompChannel>(&v::IbUverbsCreateCompChannel::new_zeroed())?;
    let fd = i32::try_from(r.fd)
        .ok()
        .filter(|&fd| fd >= 0)
        .ok_or_else(|| Error::bad_answer("CREATE_COMP_CHANNEL: no fd"))?;
    // SAFETY: the kernel created this fd for us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a CQ is created with.
#[derive(Clone, Copy)]
pub(crate) struct CqRequest {
    pub(crate) user_handle: u64,
    pub(crate) cqe: u32,
    pub(crate) comp_vector: u32,
    /// The completion channel's fd, or -1.
    pub(crate) channel: i32,
}

/// `CREATE_CQ` with driver udata; returns the handle and the entries the
/// kernel granted.
pub(crate) fn create(
    dev: &Arc<Dev>,
    req: &CqRequest,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<(CqHandle, u32)> {
    let mut c = v::IbUverbsCreateCq::new_zeroed();
    c.user_handle = req.user_handle;
    c.cqe = req.cqe;
    c.comp_vector = req.comp_vector;
    c.comp_channel = req.channel;
    let r = dev.write::<cmds::CreateCq>(&c, udata_in, udata_out)?;
    Ok((Handle::new(dev, r.cq_handle), r.cqe))
}

/// `RESIZE_CQ` to at least `cqe` entries; returns the new size.
pub(crate) fn resize(dev: &Dev, cq: u32, cqe: u32, udata_out: &mut [u8]) -> Result<u32> {
    let mut c = v::IbUverbsResizeCq::new_zeroed();
    c.cq_handle = cq;
    c.cqe = cqe;
    Ok(dev.write::<cmds::ResizeCq>(&c, &[], udata_out)?.cqe)
}

/// `REQ_NOTIFY_CQ`.
pub(crate) fn req_notify(dev: &Dev, cq: u32, solicited_only: bool) -> Result<()> {
    let mut c = v::IbUverbsReqNotifyCq::new_zeroed();
    c.cq_handle = cq;
    c.solicited_only = solicited_only as u32;
    dev.write0::<cmds::ReqNotifyCq>(&c)
}

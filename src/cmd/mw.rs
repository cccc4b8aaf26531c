//! Memory windows: `ALLOC_MW` / `DEALLOC_MW` (write() commands; the
//! kernel's ioctl object for windows has only a destroy method, and the
//! write() form of both is what every kernel rverbs runs on answers).
//! Binding is not a command: it is a work request (`IB_WR_BIND_MW`), for
//! type 1 windows too, as in rdma-core's rxe provider.

use super::{Dev, Handle, Kind};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// A window's kind.
pub(crate) enum MwKind {}
/// A window's control half. It keeps the MRs the window was bound to (see
/// the `mw` module) until `DEALLOC_MW` has succeeded.
pub(crate) type MwHandle = Handle<MwKind>;

impl Kind for MwKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDeallocMw::new_zeroed();
        c.mw_handle = handle;
        dev.write0::<cmds::DeallocMw>(&c)
    }
}

/// `ALLOC_MW` of `mw_type` (an `IbMwType`) in PD `pd`: the handle and the
/// window's first rkey.
pub(crate) fn alloc(dev: &Arc<Dev>, pd: u32, mw_type: u8) -> Result<(MwHandle, u32)> {
    let mut c = v::IbUverbsAllocMw::new_zeroed();
    c.pd_handle = pd;
    c.mw_type = mw_type;
    let r = dev.write0::<cmds::AllocMw>(&c)?;
    Ok((Handle::new(dev, r.mw_handle), r.rkey))
}

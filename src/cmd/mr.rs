//! Memory regions: `REG_MR` / `DEREG_MR`.

use super::{Dev, Handle, Kind};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// An MR's kind.
pub(crate) enum MrKind {}
/// An MR's control half (it keeps the registered memory).
pub(crate) type MrHandle = Handle<MrKind>;

impl Kind for MrKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDeregMr::new_zeroed();
        c.mr_handle = handle;
        dev.write0::<cmds::DeregMr>("DEREG_MR", &c)
    }
}

/// A registered MR: its control half and keys.
pub(crate) struct Registered {
    pub(crate) handle: MrHandle,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// `REG_MR` of `len` bytes at `start`, which work requests and peers
/// address from `iova` on (`hca_va`; `start` itself for an ordinary MR).
pub(crate) fn reg(
    dev: &Arc<Dev>,
    pd: u32,
    start: u64,
    len: u64,
    iova: u64,
    access: u32,
) -> Result<Registered> {
    let mut c = v::IbUverbsRegMr::new_zeroed();
    c.start = start;
    c.length = len;
    c.hca_va = iova;
    c.pd_handle = pd;
    c.access_flags = access;
    let r = dev.write0::<cmds::RegMr>("REG_MR", &c)?;
    Ok(Registered {
        handle: Handle::new(dev, r.mr_handle),
        lkey: r.lkey,
        rkey: r.rkey,
    })
}

//! Protection domains: `ALLOC_PD` / `DEALLOC_PD`.

use super::{Dev, Handle, Kind};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// A PD's kind.
pub(crate) enum PdKind {}
/// A PD's control half.
pub(crate) type PdHandle = Handle<PdKind>;

impl Kind for PdKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDeallocPd::new_zeroed();
        c.pd_handle = handle;
        dev.write0::<cmds::DeallocPd>(&c)
    }
}

/// `ALLOC_PD`; the driver's answer (if any) goes to `udata_out`.
pub(crate) fn alloc(dev: &Arc<Dev>, udata_out: &mut [u8]) -> Result<PdHandle> {
    let r = dev.write::<cmds::AllocPd>(&v::IbUverbsAllocPd::new_zeroed(), &[], udata_out)?;
    Ok(Handle::new(dev, r.pd_handle))
}

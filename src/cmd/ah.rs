//! Address handles: `CREATE_AH` / `DESTROY_AH`.

use super::{Dev, Handle, Kind};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// An AH's kind.
pub(crate) enum AhKind {}
/// An AH's control half.
pub(crate) type AhHandle = Handle<AhKind>;

impl Kind for AhKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDestroyAh::new_zeroed();
        c.ah_handle = handle;
        dev.write0::<cmds::DestroyAh>(&c)
    }
}

/// `CREATE_AH` in `pd` with `attr`; the driver's answer goes to
/// `udata_out`.
pub(crate) fn create(
    dev: &Arc<Dev>,
    pd: u32,
    attr: &v::IbUverbsAhAttr,
    udata_out: &mut [u8],
) -> Result<AhHandle> {
    let mut c = v::IbUverbsCreateAh::new_zeroed();
    c.pd_handle = pd;
    c.attr = *attr;
    let r = dev.write::<cmds::CreateAh>(&c, &[], udata_out)?;
    Ok(Handle::new(dev, r.ah_handle))
}

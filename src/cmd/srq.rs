//! Shared receive queues: `CREATE_SRQ`, `MODIFY_SRQ`, `QUERY_SRQ`,
//! `DESTROY_SRQ`.

use super::{Dev, Handle, Kind};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// An SRQ's kind.
pub(crate) enum SrqKind {}
/// An SRQ's control half.
pub(crate) type SrqHandle = Handle<SrqKind>;

impl Kind for SrqKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDestroySrq::new_zeroed();
        c.srq_handle = handle;
        dev.write0::<cmds::DestroySrq>(&c).map(drop)
    }
}

/// `IB_SRQ_LIMIT` in `enum ib_srq_attr_mask`.
pub(crate) const SRQ_LIMIT: u32 = 1 << 1;

/// What an SRQ is created with.
#[derive(Clone, Copy)]
pub(crate) struct SrqRequest {
    pub(crate) user_handle: u64,
    pub(crate) pd: u32,
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) srq_limit: u32,
}

/// `CREATE_SRQ` with driver udata.
pub(crate) fn create(
    dev: &Arc<Dev>,
    req: &SrqRequest,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<(SrqHandle, v::IbUverbsCreateSrqResp)> {
    let mut c = v::IbUverbsCreateSrq::new_zeroed();
    c.user_handle = req.user_handle;
    c.pd_handle = req.pd;
    c.max_wr = req.max_wr;
    c.max_sge = req.max_sge;
    c.srq_limit = req.srq_limit;
    let r = dev.write::<cmds::CreateSrq>(&c, udata_in, udata_out)?;
    Ok((Handle::new(dev, r.srq_handle), r))
}

/// `MODIFY_SRQ` of the attributes in `attr_mask`, with driver udata in.
pub(crate) fn modify(
    dev: &Dev,
    srq: u32,
    attr_mask: u32,
    srq_limit: u32,
    udata_in: &[u8],
) -> Result<()> {
    let mut c = v::IbUverbsModifySrq::new_zeroed();
    c.srq_handle = srq;
    c.attr_mask = attr_mask;
    c.srq_limit = srq_limit;
    dev.write::<cmds::ModifySrq>(&c, udata_in, &mut [])
}

/// `QUERY_SRQ`.
pub(crate) fn query(dev: &Dev, srq: u32) -> Result<v::IbUverbsQuerySrqResp> {
    let mut c = v::IbUverbsQuerySrq::new_zeroed();
    c.srq_handle = srq;
    dev.write0::<cmds::QuerySrq>(&c)
}

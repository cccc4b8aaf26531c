//! Protection domains (`ALLOC_PD` / `DEALLOC_PD`).

use crate::context::{Context, ContextInner};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs as v;
use zerocopy::FromZeros;

/// A protection domain. MRs, QPs, SRQs and AHs created in it keep it alive:
/// the kernel refuses to free a PD that still has objects, so rverbs frees
/// it only after the last of them is gone.
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

pub(crate) struct PdInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: u32,
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pd")
            .field("handle", &self.inner.handle)
            .finish()
    }
}

impl Context {
    /// Allocates a protection domain (`ALLOC_PD`).
    pub fn alloc_pd(&self) -> Result<Pd> {
        // mlx5 answers with `struct mlx5_ib_alloc_pd_resp { pdn; }` and
        // copies it whatever room we gave: room must be there.
        let mut mlx5_resp = [0u8; std::mem::size_of::<uverbs_abi::mlx5::Mlx5IbAllocPdResp>()];
        let udata_out: &mut [u8] = if self.inner.mlx5.is_some() {
            &mut mlx5_resp
        } else {
            &mut []
        };
        let resp: v::IbUverbsAllocPdResp = self.inner.cmd(
            "ALLOC_PD",
            v::IB_USER_VERBS_CMD_ALLOC_PD,
            |response| {
                let mut c = v::IbUverbsAllocPd::new_zeroed();
                c.response = response;
                c
            },
            &[],
            udata_out,
        )?;
        Ok(Pd {
            inner: Arc::new(PdInner {
                ctx: self.inner.clone(),
                handle: resp.pd_handle,
            }),
        })
    }
}

impl Pd {
    /// The context this PD belongs to.
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }
}

impl Drop for PdInner {
    fn drop(&mut self) {
        let mut c = v::IbUverbsDeallocPd::new_zeroed();
        c.pd_handle = self.handle;
        // Nothing can be done about a failure here (every child object is
        // already gone, so the kernel has no reason to refuse).
        let _ = self
            .ctx
            .cmd_no_resp("DEALLOC_PD", v::IB_USER_VERBS_CMD_DEALLOC_PD, &c);
    }
}

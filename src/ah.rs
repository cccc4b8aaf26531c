//! Address handles (`CREATE_AH` / `DESTROY_AH`) for UD sends.

mod attr;
mod from_wc;

pub use attr::{AhAttr, Grh};

pub use from_wc::{NetworkHeader, GRH_LEN};

use crate::context::Context;
use crate::error::Result;
use crate::pd::{Pd, PdInner};
use crate::provider::AhParts;
use rverbs_types::{AddressHandle, AhAddr};
use std::sync::Arc;

/// An address handle: where a UD send goes.
#[derive(Clone)]
pub struct Ah {
    pub(crate) inner: Arc<AhInner>,
}

pub(crate) struct AhInner {
    /// The kernel object and what UD sends to it carry; dropped first.
    parts: AhParts,
    _pd: Arc<PdInner>,
}

impl std::fmt::Debug for Ah {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ah")
            .field("handle", &self.inner.parts.handle.raw())
            .finish()
    }
}

impl AddressHandle for Ah {
    #[inline(always)]
    fn address(&self) -> &AhAddr {
        &self.inner.parts.addr
    }
}

impl Pd {
    /// Creates an address handle (`CREATE_AH`). On RoCE the kernel resolves
    /// the destination MAC from the GRH's GID.
    pub fn create_ah(&self, attr: &AhAttr) -> Result<Ah> {
        let pd = &self.inner;
        let ctx = Context {
            inner: pd.ctx.clone(),
        };
        let parts =
            pd.ctx
                .provider
                .create_ah(&pd.ctx.dev, &ctx, pd.handle.raw(), &attr.kernel())?;
        Ok(Ah {
            inner: Arc::new(AhInner {
                parts,
                _pd: pd.clone(),
            }),
        })
    }
}

//! Protection domains (`ALLOC_PD` / `DEALLOC_PD`).

use crate::cmd::pd::PdHandle;
use crate::context::{Context, ContextInner};
use crate::error::Result;
use std::sync::Arc;

/// A protection domain. MRs, QPs, SRQs and AHs created in it keep it alive:
/// the kernel refuses to free a PD that still has objects, so rverbs frees
/// it only after the last of them is gone.
#[derive(Clone)]
pub struct Pd {
    pub(crate) inner: Arc<PdInner>,
}

pub(crate) struct PdInner {
    /// Dropped first: DEALLOC_PD, while the context is still open.
    pub(crate) handle: PdHandle,
    pub(crate) ctx: Arc<ContextInner>,
}

impl std::fmt::Debug for Pd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pd")
            .field("handle", &self.inner.handle.raw())
            .finish()
    }
}

impl Context {
    /// Allocates a protection domain (`ALLOC_PD`).
    pub fn alloc_pd(&self) -> Result<Pd> {
        let handle = self.inner.provider.alloc_pd(&self.inner.dev)?;
        Ok(Pd {
            inner: Arc::new(PdInner {
                handle,
                ctx: self.inner.clone(),
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

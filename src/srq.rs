//! Shared receive queues (`CREATE_SRQ`, `MODIFY_SRQ`, `QUERY_SRQ`,
//! `DESTROY_SRQ`).

use crate::cmd::srq::{SrqHandle, SrqRequest};
use crate::cmd::{self};
use crate::context::{Context, ContextInner};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use crate::provider::{RecvRing, SrqShared};
use crate::wr::{RecvWr, MAX_SGE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared receive queue. QPs created with it take their receives from it
/// and keep it alive.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
    rq: RecvRing,
}

/// The part of an SRQ its QPs hold.
pub(crate) struct SrqInner {
    /// Dropped first: DESTROY_SRQ (the memory the device uses is kept by
    /// the handle until then).
    pub(crate) handle: SrqHandle,
    pub(crate) ctx: Arc<ContextInner>,
    _pd: Arc<PdInner>,
    srqn: u32,
    max_wr: u32,
    user_handle: u64,
    /// What QPs on this SRQ need of it.
    pub(crate) shared: SrqShared,
}

static NEXT_USER_HANDLE: AtomicU64 = AtomicU64::new(1 << 32);

impl std::fmt::Debug for Srq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srq")
            .field("srqn", &self.inner.srqn)
            .field("max_wr", &self.inner.max_wr)
            .finish()
    }
}

impl Pd {
    /// Creates an SRQ (`CREATE_SRQ`) of at least `max_wr` receives of up
    /// to `max_sge` SGEs, armed at `srq_limit` (0: not armed).
    pub fn create_srq(&self, max_wr: u32, max_sge: u32, srq_limit: u32) -> Result<Srq> {
        if max_sge as usize > MAX_SGE {
            return Err(Error::invalid(format!(
                "more than {MAX_SGE} SGEs per receive"
            )));
        }
        let pd = &self.inner;
        let req = SrqRequest {
            user_handle: NEXT_USER_HANDLE.fetch_add(1, Ordering::Relaxed),
            pd: pd.handle.raw(),
            max_wr,
            max_sge,
            srq_limit,
        };
        let ctx = Context {
            inner: pd.ctx.clone(),
        };
        let parts = pd.ctx.provider.create_srq(&pd.ctx.dev, &ctx, &req)?;
        Ok(Srq {
            inner: Arc::new(SrqInner {
                handle: parts.handle,
                ctx: pd.ctx.clone(),
                _pd: pd.clone(),
                srqn: parts.srqn,
                max_wr: parts.max_wr,
                user_handle: req.user_handle,
                shared: parts.shared,
            }),
            rq: parts.ring,
        })
    }
}

impl Srq {
    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.inner.srqn
    }

    /// Receives the kernel granted room for.
    pub fn max_wr(&self) -> u32 {
        self.inner.max_wr
    }

    /// The handle async events for this SRQ carry ([`crate::event::AsyncEvent`]).
    pub fn user_handle(&self) -> u64 {
        self.inner.user_handle
    }

    /// Posts receives (no system call).
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<()> {
        self.rq.post(wrs, "SRQ")
    }

    /// Arms the SRQ limit (`MODIFY_SRQ` with `IB_SRQ_LIMIT`): when fewer
    /// than `limit` receives remain, an SRQ_LIMIT_REACHED async event fires
    /// once and the limit disarms.
    pub fn set_limit(&self, limit: u32) -> Result<()> {
        let i = &self.inner;
        i.shared.set_limit(&i.ctx.dev, i.handle.raw(), limit)
    }

    /// The current limit (`QUERY_SRQ`).
    pub fn query_limit(&self) -> Result<u32> {
        Ok(self.query()?.srq_limit)
    }

    /// Every attribute of the SRQ (`QUERY_SRQ`, `ibv_query_srq`): the
    /// granted depth and SGEs and the armed limit (0 when none is armed).
    /// Of `ibv_modify_srq`, rverbs offers the limit ([`Srq::set_limit`]);
    /// resizing (`IBV_SRQ_MAX_WR`) would move rxe's ring to a new mapping
    /// under the receives already posted, and is not offered.
    pub fn query(&self) -> Result<SrqAttr> {
        let i = &self.inner;
        let r = cmd::srq::query(&i.ctx.dev, i.handle.raw())?;
        Ok(SrqAttr {
            max_wr: r.max_wr,
            max_sge: r.max_sge,
            srq_limit: r.srq_limit,
        })
    }
}

/// What [`Srq::query`] answers (`struct ibv_srq_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receives the SRQ holds.
    pub max_wr: u32,
    /// SGEs per receive.
    pub max_sge: u32,
    /// The armed limit (0: none).
    pub srq_limit: u32,
}

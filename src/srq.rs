//! Shared receive queues (`CREATE_SRQ`, `MODIFY_SRQ`, `QUERY_SRQ`,
//! `DESTROY_SRQ`) over rxe's shared ring.

use crate::context::ContextInner;
use crate::cq::mminfo;
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use crate::qp::{RecvWr, MAX_SGE};
use crate::sys::Mapping;
use provider_rxe::{Queue, RecvQueue};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use uverbs_abi::verbs as v;
use zerocopy::{FromZeros, IntoBytes};

/// `IB_SRQ_LIMIT` in `enum ib_srq_attr_mask`.
const SRQ_LIMIT: u32 = 1 << 1;

/// A shared receive queue. QPs created with it take their receives from it
/// and keep it alive.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
    rq: SrqQueue,
}

/// The provider's producer side of the SRQ.
pub(crate) enum SrqQueue {
    Rxe(RecvQueue),
    Mlx5(provider_mlx5::SharedRecvQueue),
}

pub(crate) struct SrqInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) _pd: Arc<PdInner>,
    pub(crate) handle: u32,
    pub(crate) srqn: u32,
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) user_handle: u64,
    pub(crate) ring: Option<Mapping>,
    /// mlx5: the buffer and doorbell record (unmapped after DESTROY_SRQ)
    /// and the records QPs on this SRQ register with their receive CQs.
    pub(crate) mlx5: Option<(
        Mapping,
        crate::mlx5::DbRecord,
        Arc<provider_mlx5::SrqRecords>,
    )>,
}

pub(crate) static NEXT_USER_HANDLE: AtomicU64 = AtomicU64::new(1 << 32);

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
        let user_handle = NEXT_USER_HANDLE.fetch_add(1, Ordering::Relaxed);
        if pd.ctx.mlx5.is_some() {
            return crate::mlx5::create_srq(self, max_wr, max_sge, srq_limit, user_handle);
        }
        let mut udata = [0u8; 24]; // struct rxe_create_srq_resp { mi; srq_num; reserved; }
        let resp = create_srq_cmd(
            pd,
            user_handle,
            (max_wr, max_sge, srq_limit),
            &[],
            &mut udata,
        )?;
        let mut inner = SrqInner {
            ctx: pd.ctx.clone(),
            _pd: pd.clone(),
            handle: resp.srq_handle,
            srqn: resp.srqn,
            max_wr: resp.max_wr,
            max_sge: resp.max_sge,
            user_handle,
            ring: None,
            mlx5: None,
        };
        let (off, size) = mminfo(&udata[..16])?;
        let map = Mapping::shared(pd.ctx.fd.as_fd(), "mmap of the SRQ ring", size, off)?;
        // SAFETY: the mapping goes into inner.ring below and lives in the
        // Arc<SrqInner> the Srq holds, so it outlives the Queue.
        let q = unsafe { Queue::new(map.as_ptr(), map.len(), provider_rxe::wqe::recv::SGES) }
            .map_err(|e| Error::bad_answer(format!("CREATE_SRQ ring: {e}")))?;
        inner.ring = Some(map);
        let rq = RecvQueue::new(q, inner.max_sge)
            .map_err(|e| Error::bad_answer(format!("CREATE_SRQ ring: {e}")))?;
        Ok(Srq {
            inner: Arc::new(inner),
            rq: SrqQueue::Rxe(rq),
        })
    }
}

/// `CREATE_SRQ` of `(max_wr, max_sge, srq_limit)` with driver udata.
pub(crate) fn create_srq_cmd(
    pd: &PdInner,
    user_handle: u64,
    (max_wr, max_sge, srq_limit): (u32, u32, u32),
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<v::IbUverbsCreateSrqResp> {
    pd.ctx.cmd(
        "CREATE_SRQ",
        v::IB_USER_VERBS_CMD_CREATE_SRQ,
        |response| {
            let mut c = v::IbUverbsCreateSrq::new_zeroed();
            c.response = response;
            c.user_handle = user_handle;
            c.pd_handle = pd.handle;
            c.max_wr = max_wr;
            c.max_sge = max_sge;
            c.srq_limit = srq_limit;
            c
        },
        udata_in,
        udata_out,
    )
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

    /// The handle async events for this SRQ carry ([`crate::AsyncEvent`]).
    pub fn user_handle(&self) -> u64 {
        self.inner.user_handle
    }

    /// Posts receives (no system call on rxe).
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<()> {
        match &mut self.rq {
            SrqQueue::Rxe(rq) => crate::qp::post_recv_list(rq, wrs, "SRQ"),
            SrqQueue::Mlx5(srq) => crate::mlx5::post_srq_recv(srq, wrs),
        }
    }

    pub(crate) fn from_parts(inner: Arc<SrqInner>, rq: SrqQueue) -> Srq {
        Srq { inner, rq }
    }

    /// Arms the SRQ limit (`MODIFY_SRQ` with `IB_SRQ_LIMIT`): when fewer
    /// than `limit` receives remain, an SRQ_LIMIT_REACHED async event fires
    /// once and the limit disarms.
    pub fn set_limit(&self, limit: u32) -> Result<()> {
        let mut c = v::IbUverbsModifySrq::new_zeroed();
        c.srq_handle = self.inner.handle;
        c.attr_mask = SRQ_LIMIT;
        c.srq_limit = limit;
        if self.inner.mlx5.is_some() {
            // mlx5 takes no udata here.
            return self
                .inner
                .ctx
                .cmd_no_resp("MODIFY_SRQ", v::IB_USER_VERBS_CMD_MODIFY_SRQ, &c);
        }
        // rxe reads `struct rxe_modify_srq_cmd { u64 mmap_info_addr; }` as
        // udata on every modify; it writes there only when resizing.
        let mut mi = [0u64; 2];
        let mut bytes = c.as_bytes().to_vec();
        bytes.extend_from_slice(&(mi.as_mut_ptr() as u64).to_ne_bytes());
        self.inner
            .ctx
            .cmd_raw_no_resp("MODIFY_SRQ", v::IB_USER_VERBS_CMD_MODIFY_SRQ, &bytes)
    }

    /// The current limit (`QUERY_SRQ`).
    pub fn query_limit(&self) -> Result<u32> {
        let r: v::IbUverbsQuerySrqResp = self.inner.ctx.cmd(
            "QUERY_SRQ",
            v::IB_USER_VERBS_CMD_QUERY_SRQ,
            |response| {
                let mut c = v::IbUverbsQuerySrq::new_zeroed();
                c.response = response;
                c.srq_handle = self.inner.handle;
                c
            },
            &[],
            &mut [],
        )?;
        Ok(r.srq_limit)
    }
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        let r: Result<v::IbUverbsDestroySrqResp> = self.ctx.cmd(
            "DESTROY_SRQ",
            v::IB_USER_VERBS_CMD_DESTROY_SRQ,
            |response| {
                let mut c = v::IbUverbsDestroySrq::new_zeroed();
                c.response = response;
                c.srq_handle = self.handle;
                c
            },
            &[],
            &mut [],
        );
        if r.is_err() {
            std::mem::forget(self.ring.take());
            std::mem::forget(self.mlx5.take());
        }
    }
}

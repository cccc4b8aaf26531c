//! Queue pairs (`CREATE_QP`, `MODIFY_QP`, `QUERY_QP`, `DESTROY_QP`) and the
//! data path: post send (rxe: ring write + the `POST_SEND` doorbell), post
//! receive (ring write only).

pub(crate) mod attr;
mod wr;

pub use attr::{AhAttr, Grh, Mtu, QpAttr, QpState};
pub use wr::{RecvWr, Remote, SendOp, SendWr, Ud};

use crate::context::ContextInner;
use crate::cq::{mminfo, Cq, CqInner};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use crate::sys::{self, Mapping};
use provider_rxe::{Queue, RecvQueue, SendQueue};
use std::cell::UnsafeCell;
use std::os::fd::AsFd;
use std::sync::Arc;
use uverbs_abi::verbs as v;
use zerocopy::{FromZeros, IntoBytes};

/// The transport service of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl QpType {
    pub(crate) fn raw(self) -> u8 {
        match self {
            QpType::Rc => 2, // IB_UVERBS_QPT_RC
            QpType::Uc => 3,
            QpType::Ud => 4,
        }
    }
}

/// Queue sizes asked for at creation, and granted by the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpCaps {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send.
    pub max_inline_data: u32,
}

/// What [`Pd::create_qp`] needs.
#[derive(Debug, Clone, Copy)]
pub struct QpInit<'a> {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Where send completions go.
    pub send_cq: &'a Cq,
    /// Where receive completions go.
    pub recv_cq: &'a Cq,
    /// Requested sizes.
    pub caps: QpCaps,
    /// Every send generates a completion, signaled or not.
    pub sq_sig_all: bool,
    /// Take receives from this SRQ instead of an own receive queue.
    pub srq: Option<&'a crate::Srq>,
}

/// The most SGEs one work request may carry through the safe API (rxe's
/// own limit is 32). A work request's slices are passed to the provider as
/// they are (`mr::Slice` is laid out as an SGE): nothing is converted or
/// copied on the way.
pub const MAX_SGE: usize = 32;

/// The `POST_SEND` doorbell command, built once per QP. The kernel writes
/// `bad_wr` into `resp`, so it lives in an `UnsafeCell` at a stable (boxed)
/// address.
pub(crate) struct Doorbell {
    cmd: [u8; 32],
    resp: UnsafeCell<u32>,
}

/// A queue pair. Posting takes `&mut self`: a QP is driven by one thread at
/// a time, so the data path needs no lock.
pub struct Qp {
    inner: Arc<QpInner>,
    queues: Queues,
}

/// The provider's producer side of the QP's queues.
pub(crate) enum Queues {
    Rxe {
        sq: SendQueue,
        rq: Option<RecvQueue>,
        doorbell: Box<Doorbell>,
    },
    Mlx5 {
        sq: provider_mlx5::SendQueue,
        rq: Option<provider_mlx5::RecvQueue>,
    },
}

// SAFETY: the Doorbell's UnsafeCell is written only by the kernel during the
// write() that Qp::ring_doorbell makes through &mut self, so moving a Qp to
// another thread cannot race with it; the mlx5 queues are Send.
unsafe impl Send for Qp {}

pub(crate) struct QpInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) _pd: Arc<PdInner>,
    pub(crate) _send_cq: Arc<CqInner>,
    pub(crate) _recv_cq: Arc<CqInner>,
    pub(crate) _srq: Option<Arc<crate::srq::SrqInner>>,
    pub(crate) handle: u32,
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) caps: QpCaps,
    /// mlx5: the incarnation the QP registered with its CQs under.
    pub(crate) reg_id: u64,
    /// mlx5: the doorbell record (returned to the context's pool after
    /// DESTROY_QP).
    pub(crate) dbrec: Option<crate::mlx5::DbRecord>,
    // Unmapped only after the kernel destroyed the QP (rxe: the kernel's
    // rings; mlx5: our buffer and doorbell record, which the device uses).
    pub(crate) maps: Vec<Mapping>,
}

impl QpInner {
    /// MODIFY_QP with attributes and mask the kernel produced (rdma_cm's
    /// `INIT_QP_ATTR`), optionally overriding the read depths.
    pub(crate) fn modify_kernel_attr(&self, attr: &v::IbUverbsQpAttr) -> Result<()> {
        let cmd = attr::encode_kernel_attr(attr, self.handle);
        self.ctx
            .cmd_no_resp("MODIFY_QP", v::IB_USER_VERBS_CMD_MODIFY_QP, &cmd)
    }

    /// MODIFY_QP to ERR: outstanding work flushes.
    pub(crate) fn to_error(&self) -> Result<()> {
        let cmd = QpAttr::err().encode(self.handle)?;
        self.ctx
            .cmd_no_resp("MODIFY_QP", v::IB_USER_VERBS_CMD_MODIFY_QP, &cmd)
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    pub(crate) fn uses_srq(&self) -> bool {
        self._srq.is_some()
    }
}

impl Drop for QpInner {
    fn drop(&mut self) {
        let r: Result<v::IbUverbsDestroyQpResp> = self.ctx.cmd(
            "DESTROY_QP",
            v::IB_USER_VERBS_CMD_DESTROY_QP,
            |response| {
                let mut c = v::IbUverbsDestroyQp::new_zeroed();
                c.response = response;
                c.qp_handle = self.handle;
                c
            },
            &[],
            &mut [],
        );
        if r.is_err() {
            // The kernel may still use the rings: keep them mapped.
            std::mem::forget(std::mem::take(&mut self.maps));
            std::mem::forget(self.dbrec.take());
            return;
        }
        // Nothing more is written for this QP: its CQEs still in the rings
        // are dropped by the pollers (see mlx5::poll).
        for cq in [&self._send_cq, &self._recv_cq] {
            if let Some(m) = &cq.mlx5 {
                m.registry.retire(self.reg_id);
            }
        }
    }
}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.inner.qpn)
            .field("type", &self.inner.qp_type)
            .field("caps", &self.inner.caps)
            .finish()
    }
}

impl Pd {
    /// Creates a QP (`CREATE_QP`) and maps its rings.
    pub fn create_qp(&self, init: &QpInit<'_>) -> Result<Qp> {
        let pd = &self.inner;
        let c = init.caps;
        if c.max_send_sge as usize > MAX_SGE || c.max_recv_sge as usize > MAX_SGE {
            return Err(Error::invalid(format!(
                "more than {MAX_SGE} SGEs per work request"
            )));
        }
        // Handles are per context: a CQ or SRQ of another context would be
        // looked up by its number in this one.
        let same = |c: &Arc<ContextInner>| Arc::ptr_eq(c, &pd.ctx);
        if !same(&init.send_cq.inner.ctx)
            || !same(&init.recv_cq.inner.ctx)
            || init.srq.is_some_and(|s| !same(&s.inner.ctx))
        {
            return Err(Error::invalid(
                "CREATE_QP: the CQs and SRQ must come from the PD's context",
            ));
        }
        if pd.ctx.mlx5.is_some() {
            return crate::mlx5::create_qp(self, init);
        }
        let mut udata = [0u8; 32]; // struct rxe_create_qp_resp { rq_mi, sq_mi }
        let mut want = c;
        if init.srq.is_some() {
            want.max_recv_wr = 0;
        }
        let resp = create_qp_cmd(pd, init, &want, &[], &mut udata)?;
        let caps = QpCaps {
            max_send_wr: resp.max_send_wr,
            max_recv_wr: resp.max_recv_wr,
            max_send_sge: resp.max_send_sge,
            max_recv_sge: resp.max_recv_sge,
            max_inline_data: resp.max_inline_data,
        };
        let mut inner = QpInner::new(pd, init, &resp, caps);
        let fd = pd.ctx.fd.as_fd();
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            Error::bad_answer(format!("CREATE_QP {what}: {e}"))
        };
        let (sq_off, sq_size) = mminfo(&udata[16..])?;
        let sq_map = Mapping::shared(fd, "mmap of the SQ ring", sq_size, sq_off)?;
        // SAFETY: the mapping is kept in inner.maps, which lives in the
        // Arc<QpInner> the returned Qp holds, so it outlives the Queue.
        let sq_q = unsafe {
            Queue::new(
                sq_map.as_ptr(),
                sq_map.len(),
                provider_rxe::wqe::send::PAYLOAD,
            )
        };
        inner.maps.push(sq_map);
        let sq_q = sq_q.map_err(|e| bad("SQ ring", &e))?;
        let ud = init.qp_type == QpType::Ud;
        let sq = SendQueue::new(sq_q, caps.max_send_sge, caps.max_inline_data, ud)
            .map_err(|e| bad("SQ ring", &e))?;
        // With an SRQ, rxe gives the QP no receive ring of its own.
        let rq = if init.srq.is_none() {
            let (rq_off, rq_size) = mminfo(&udata[..16])?;
            let rq_map = Mapping::shared(fd, "mmap of the RQ ring", rq_size, rq_off)?;
            // SAFETY: as for the SQ ring.
            let rq_q =
                unsafe { Queue::new(rq_map.as_ptr(), rq_map.len(), provider_rxe::wqe::recv::SGES) };
            inner.maps.push(rq_map);
            let rq_q = rq_q.map_err(|e| bad("RQ ring", &e))?;
            Some(RecvQueue::new(rq_q, caps.max_recv_sge).map_err(|e| bad("RQ ring", &e))?)
        } else {
            None
        };
        let doorbell = Doorbell::new(inner.handle);
        Ok(Qp {
            inner: Arc::new(inner),
            queues: Queues::Rxe { sq, rq, doorbell },
        })
    }
}

/// `CREATE_QP` for `init` asking for `caps`, with driver udata.
pub(crate) fn create_qp_cmd(
    pd: &PdInner,
    init: &QpInit<'_>,
    caps: &QpCaps,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<v::IbUverbsCreateQpResp> {
    pd.ctx.cmd(
        "CREATE_QP",
        v::IB_USER_VERBS_CMD_CREATE_QP,
        |response| {
            let mut r = v::IbUverbsCreateQp::new_zeroed();
            r.response = response;
            r.user_handle = 0;
            r.pd_handle = pd.handle;
            r.send_cq_handle = init.send_cq.inner.handle;
            r.recv_cq_handle = init.recv_cq.inner.handle;
            r.srq_handle = init.srq.map(|s| s.inner.handle).unwrap_or(0);
            r.max_send_wr = caps.max_send_wr;
            r.max_recv_wr = caps.max_recv_wr;
            r.max_send_sge = caps.max_send_sge;
            r.max_recv_sge = caps.max_recv_sge;
            r.max_inline_data = caps.max_inline_data;
            r.sq_sig_all = init.sq_sig_all as u8;
            r.qp_type = init.qp_type.raw();
            r.is_srq = init.srq.is_some() as u8;
            r
        },
        udata_in,
        udata_out,
    )
}

impl QpInner {
    /// The control half of a QP the kernel just created; from here on its
    /// drop destroys the kernel object.
    pub(crate) fn new(
        pd: &Arc<PdInner>,
        init: &QpInit<'_>,
        resp: &v::IbUverbsCreateQpResp,
        caps: QpCaps,
    ) -> QpInner {
        QpInner {
            ctx: pd.ctx.clone(),
            _pd: pd.clone(),
            _send_cq: init.send_cq.inner.clone(),
            _recv_cq: init.recv_cq.inner.clone(),
            _srq: init.srq.map(|s| s.inner.clone()),
            handle: resp.qp_handle,
            qpn: resp.qpn,
            qp_type: init.qp_type,
            caps,
            reg_id: 0,
            dbrec: None,
            maps: Vec::new(),
        }
    }
}

/// Posts receives in order into an RQ or SRQ ring, converting each one's
/// SGEs through `scratch`; the first refused one ends the list, named by its
/// index.
pub(crate) fn post_recv_list(
    rq: &mut RecvQueue,
    wrs: &[RecvWr<'_>],
    queue: &'static str,
) -> Result<()> {
    for (index, wr) in wrs.iter().enumerate() {
        let sges =
            wr::sges_of(wr.sges).map_err(|what| Error::InvalidWorkRequest { index, what })?;
        // SAFETY: every SGE came from an `mr::Slice`, checked to lie inside
        // an Mr that unmaps its memory only after DEREG_MR (see Qp::post_send).
        match unsafe { rq.post(wr.wr_id, sges) } {
            Ok(()) => {}
            Err(provider_rxe::PostError::QueueFull) => {
                return Err(Error::QueueFull { queue, index })
            }
            Err(e) => {
                return Err(Error::InvalidWorkRequest {
                    index,
                    what: e.to_string(),
                })
            }
        }
    }
    Ok(())
}

impl Doorbell {
    fn new(qp_handle: u32) -> Box<Doorbell> {
        let mut db = Box::new(Doorbell {
            cmd: [0; 32],
            resp: UnsafeCell::new(0),
        });
        let mut hdr = v::IbUverbsCmdHdr::new_zeroed();
        hdr.command = v::IB_USER_VERBS_CMD_POST_SEND;
        hdr.in_words = 8; // 8-byte header + 24-byte ib_uverbs_post_send
        hdr.out_words = 1; // ib_uverbs_post_send_resp
        let mut c = v::IbUverbsPostSend::new_zeroed();
        c.response = db.resp.get() as u64;
        c.qp_handle = qp_handle;
        c.wr_count = 0; // the WRs are in the ring already
        c.sge_count = 0;
        // The kernel insists on at least sizeof(struct ib_uverbs_send_wr).
        c.wqe_size = std::mem::size_of::<v::IbUverbsSendWr>() as u32;
        db.cmd[..8].copy_from_slice(hdr.as_bytes());
        db.cmd[8..].copy_from_slice(c.as_bytes());
        db
    }
}

impl Qp {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.inner.qpn
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }

    /// The sizes the kernel granted.
    pub fn caps(&self) -> QpCaps {
        self.inner.caps
    }

    /// Posts send work requests in order, then rings the doorbell once.
    ///
    /// If one is rejected (invalid, or the SQ is full), the ones before it
    /// are posted and rung, it and the rest are not, and the error names
    /// its index — rdma-core's `bad_wr`, as a value.
    #[inline(never)] // measurable per call; see Cq::poll
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        let (sq, doorbell) = match &mut self.queues {
            Queues::Rxe { sq, doorbell, .. } => (sq, doorbell),
            Queues::Mlx5 { sq, .. } => return crate::mlx5::post_send(sq, wrs),
        };
        let mut first_err = None;
        let mut posted = 0;
        for (index, wr) in wrs.iter().enumerate() {
            let raw = match wr.as_rxe() {
                Ok(r) => r,
                Err(what) => {
                    first_err = Some(Error::InvalidWorkRequest { index, what });
                    break;
                }
            };
            // SAFETY: every SGE came from an `mr::Slice`, checked to lie
            // inside an Mr that owns its mapping and unmaps it only after
            // DEREG_MR (see the mr module), so the device never reaches
            // memory this process reuses.
            match unsafe { sq.post(&raw) } {
                Ok(()) => posted += 1,
                Err(provider_rxe::PostError::QueueFull) => {
                    first_err = Some(Error::QueueFull {
                        queue: "send queue",
                        index,
                    });
                    break;
                }
                Err(e) => {
                    first_err = Some(Error::InvalidWorkRequest {
                        index,
                        what: e.to_string(),
                    });
                    break;
                }
            }
        }
        if posted > 0 {
            // rxe's doorbell: a `POST_SEND` with no work requests makes the
            // kernel run this QP's requester over the ring.
            sys::write_cmd(
                self.inner.ctx.fd.as_fd(),
                "POST_SEND (doorbell)",
                &doorbell.cmd,
            )?;
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Posts receive work requests in order (no system call on rxe).
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let through_srq = || Error::invalid("this QP receives through an SRQ");
        match &mut self.queues {
            Queues::Rxe { rq, .. } => {
                post_recv_list(rq.as_mut().ok_or_else(through_srq)?, wrs, "receive queue")
            }
            Queues::Mlx5 { rq, .. } => {
                crate::mlx5::post_recv(rq.as_mut().ok_or_else(through_srq)?, wrs)
            }
        }
    }

    pub(crate) fn from_parts(inner: Arc<QpInner>, queues: Queues) -> Qp {
        Qp { inner, queues }
    }

    /// Modifies the QP (`MODIFY_QP`) with every attribute set in `attr`.
    pub fn modify(&mut self, attr: &QpAttr) -> Result<()> {
        if matches!(self.queues, Queues::Mlx5 { .. }) && attr.state == Some(QpState::Reset) {
            // The device restarts its counters at RESET; rdma-core then also
            // cleans the CQs and resets its own indices and doorbell record
            // (mlx5_modify_qp). rverbs does not do that yet.
            return Err(Error::invalid(
                "MODIFY_QP to RESET: not supported on mlx5 QPs by rverbs yet (destroy and recreate)",
            ));
        }
        let cmd = attr.encode(self.inner.handle)?;
        self.inner
            .ctx
            .cmd_no_resp("MODIFY_QP", v::IB_USER_VERBS_CMD_MODIFY_QP, &cmd)
    }

    /// The QP's control half (handle and context), for the rdma_cm glue
    /// that moves the QP through its states while the user posts.
    pub(crate) fn control(&self) -> Arc<QpInner> {
        self.inner.clone()
    }

    /// Queries the QP's state (`QUERY_QP`).
    pub fn query_state(&self) -> Result<QpState> {
        let resp: v::IbUverbsQueryQpResp = self.inner.ctx.cmd(
            "QUERY_QP",
            v::IB_USER_VERBS_CMD_QUERY_QP,
            |response| {
                let mut c = v::IbUverbsQueryQp::new_zeroed();
                c.response = response;
                c.qp_handle = self.inner.handle;
                c.attr_mask = attr::mask::STATE;
                c
            },
            &[],
            &mut [],
        )?;
        Ok(QpState::from_raw(resp.qp_state as u32))
    }
}

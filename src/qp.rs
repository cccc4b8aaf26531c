//! Queue pairs (`CREATE_QP`, `MODIFY_QP`, `QUERY_QP`, `DESTROY_QP`) and the
//! data path: post send (rxe: ring write + the `POST_SEND` doorbell; mlx5:
//! WQEs and a doorbell, no system call), post receive (ring write only).

pub(crate) mod attr;
mod build;
mod connect;
mod mcast;
mod prepared;
mod query;

pub use crate::ah::{AhAttr, Grh};
pub use crate::cmd::qp::{QpCaps, QpType};
pub use crate::wr::{RecvWr, Remote, SendOp, Ud, MAX_SGE};
pub use attr::{Mtu, QpAttr, QpState};
pub use build::{SendBuilder, SendFlags, Unposted};
pub use prepared::PreparedSend;
pub use query::{QpInitAttr, QpQuery};

use crate::ah::Ah;
use crate::cmd::qp::{QpHandle, QpRequest};
use crate::cmd::{self};
use crate::context::{Context, ContextInner};
use crate::cq::{Commitment, Cq, CqInner};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use crate::provider::{
    self, Keeper, Mlx5Pusher, RecvRing, Registration, RingPush, RxePusher, SendRing,
};
use crate::wr::Slice;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use uverbs_abi::verbs as v;

/// One send work request: what to do, over which MR slices, to which
/// address handle on a UD QP. Built with [`SendWr::new`] and its setters.
pub type SendWr<'a> = rverbs_types::SendWr<'a, Slice<'a>, Ah>;

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
    pub srq: Option<&'a crate::srq::Srq>,
}

impl<'a> QpInit<'a> {
    /// A QP of `qp_type` whose sends and receives complete on `cq`, with
    /// [`QpCaps::default`] sizes, signaling only the sends that ask, and
    /// its own receive queue. Change the fields for anything else.
    pub fn new(qp_type: QpType, cq: &'a Cq) -> QpInit<'a> {
        QpInit {
            qp_type,
            send_cq: cq,
            recv_cq: cq,
            caps: QpCaps::default(),
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// A queue pair. Posting takes `&mut self`: a QP is driven by one thread at
/// a time, so the data path needs no lock.
///
/// A UD send names its [`Ah`] only while it is posted, but the device may
/// look the AH up only when it runs the send (rxe does): the QP keeps every
/// AH a posted send names until that send has completed, so dropping an
/// `Ah` right after posting is harmless. (It keeps it a little longer: until
/// the send's slot in the queue is reused, or the QP is destroyed.)
pub struct Qp {
    inner: Arc<QpInner>,
    send: SendRing,
    recv: Option<RecvRing>,
    /// UD QPs whose device looks AHs up late: the AH of each posted send,
    /// by SQ slot.
    ahs: Option<AhKeep>,
}

/// The AHs of posted UD sends, by SQ slot. A slot is reused only after the
/// kernel consumed (completed) the send in it, so replacing the AH there
/// releases one that no outstanding send names.
struct AhKeep {
    slots: Box<[Option<Ah>]>,
}

impl AhKeep {
    fn new(slots: u32) -> AhKeep {
        AhKeep {
            slots: (0..slots).map(|_| None).collect(),
        }
    }

    /// Keeps the AH of `wr`, posted into `slot`.
    #[inline(always)]
    fn put(&mut self, slot: u32, wr: &SendWr<'_>) {
        self.put_ah(slot, wr.ud.map(|ud| ud.ah));
    }

    /// Keeps `ah`, named by the send posted into `slot`. `None` (which a
    /// UD QP's sends never are: every one names its AH) leaves the slot as
    /// it was: its AH is then kept a little longer, until a send names
    /// another.
    #[inline(always)]
    fn put_ah(&mut self, slot: u32, ah: Option<&Ah>) {
        let Some(ah) = ah else { return };
        // `slot` is the SQ's producer index, masked below the ring's size,
        // which is this table's (AhKeep::new): in bounds.
        let kept = &mut self.slots[slot as usize];
        // The AH the slot's last send named already (a program that sends
        // to one peer): nothing to count (callgrind: an Arc increment and
        // decrement per send). Otherwise dropping the AH this replaces
        // may destroy it (DESTROY_AH): only when the program has dropped
        // it too, and never while a send names it.
        if !kept
            .as_ref()
            .is_some_and(|k| Arc::ptr_eq(&ah.inner, &k.inner))
        {
            *kept = Some(ah.clone());
        }
    }
}

impl Keeper<Ah> for &mut AhKeep {
    #[inline(always)]
    fn put(&mut self, slot: u32, wr: &SendWr<'_>) {
        AhKeep::put(self, slot, wr);
    }
}

/// The part of a QP that the rdma_cm glue shares: the kernel object.
pub(crate) struct QpInner {
    /// Dropped first: DESTROY_QP (the device stops using the queues'
    /// memory, which the handle keeps until then).
    handle: QpHandle,
    /// Then the QP leaves its CQs' registries (nothing more is written for
    /// it) and gives back the room it reserved on them.
    _registration: Registration,
    _commitments: [Option<Commitment>; 2],
    pub(crate) ctx: Arc<ContextInner>,
    _pd: Arc<PdInner>,
    _send_cq: Arc<CqInner>,
    _recv_cq: Arc<CqInner>,
    _srq: Option<Arc<crate::srq::SrqInner>>,
    qpn: u32,
    qp_type: QpType,
    caps: QpCaps,
    user_handle: u64,
    /// The state this process last moved the QP to (`enum ib_qp_state`):
    /// sends are refused before they reach the ring in RESET, INIT and
    /// RTR, where the kernel would refuse the doorbell only after the WQE
    /// was already published (and would run it once the QP reached RTS).
    /// The kernel's own moves to SQE/ERR need no tracking: posting there
    /// is allowed (the requests flush).
    state: AtomicU32,
    /// The AHs the QP kept for its posted sends, parked here when the `Qp`
    /// is dropped so that they outlive DESTROY_QP (`handle`, dropped
    /// first) even while the rdma_cm glue keeps this half alive.
    parked_ahs: std::sync::Mutex<Option<AhKeep>>,
}

impl Drop for Qp {
    fn drop(&mut self) {
        if let Some(k) = self.ahs.take() {
            *self
                .inner
                .parked_ahs
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(k);
        }
    }
}

/// User handles of QPs (their async events carry them).
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1 << 48);

impl QpInner {
    /// MODIFY_QP with an encoded request; on success, notes the new state.
    fn modify_raw(&self, cmd: &v::IbUverbsModifyQp) -> Result<()> {
        cmd::qp::modify(&self.ctx.dev, cmd)?;
        if cmd.attr_mask & attr::mask::STATE != 0 {
            self.state.store(u32::from(cmd.qp_state), Ordering::Relaxed);
        }
        Ok(())
    }

    /// MODIFY_QP with attributes and mask the kernel produced (rdma_cm's
    /// `INIT_QP_ATTR`).
    pub(crate) fn modify_kernel_attr(&self, attr: &v::IbUverbsQpAttr) -> Result<()> {
        self.modify_raw(&attr::encode_kernel_attr(attr, self.handle.raw()))
    }

    /// MODIFY_QP to ERR: outstanding work flushes.
    pub(crate) fn to_error(&self) -> Result<()> {
        self.modify_raw(&QpAttr::err().encode(self.handle.raw())?)
    }

    /// Whether sends may be posted: not in RESET, INIT or RTR.
    #[inline(always)]
    fn can_send(&self) -> bool {
        self.state.load(Ordering::Relaxed) >= QpState::Rts.raw()
    }

    pub(crate) fn qpn(&self) -> u32 {
        self.qpn
    }

    pub(crate) fn uses_srq(&self) -> bool {
        self._srq.is_some()
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

/// Whether a new QP reserves its depths on its CQs ([`Pd::create_qp`]) or
/// its creator accepts that they may overrun
/// ([`Pd::create_qp_accepting_cq_overrun`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CqBudget {
    Reserve,
    AcceptOverrun,
}

impl CqBudget {
    /// How many completions to reserve on the send CQ and on the receive
    /// CQ (`None`: nothing). Receives through an SRQ are bounded by the
    /// SRQ, shared between QPs that may report to different CQs: never
    /// counted here.
    fn reservations(self, caps: &QpCaps, srq: bool) -> [Option<u32>; 2] {
        match self {
            CqBudget::Reserve => [Some(caps.max_send_wr), (!srq).then_some(caps.max_recv_wr)],
            CqBudget::AcceptOverrun => [None, None],
        }
    }
}

impl Pd {
    /// Creates a QP (`CREATE_QP`) and maps its rings.
    ///
    /// The QP reserves the depths it asks for on its CQs, so that no
    /// completion can be lost to a full CQ: a QP whose depths exceed what
    /// its CQs have left is refused (`InvalidArgument` saying "overrun").
    /// [`Pd::create_qp_accepting_cq_overrun`] is the opt-out.
    pub fn create_qp(&self, init: &QpInit<'_>) -> Result<Qp> {
        self.create_qp_budgeted(init, CqBudget::Reserve)
    }

    /// Creates a QP as [`Pd::create_qp`] does, without reserving its
    /// depths on its CQs: the caller accepts that more completions may be
    /// outstanding than the CQs hold, as rdma-core's `ibv_create_qp`
    /// allows. If they are, the CQ overruns: rxe drops completions and
    /// reports `IBV_EVENT_CQ_ERR` as an async event ([`crate::event::AsyncEvent`]),
    /// mlx5 moves the CQ to an error state; either way the program must
    /// keep its outstanding work within the CQ itself. For C ABIs that
    /// must accept what libibverbs accepts (`rverbs-libibverbs`); Rust
    /// programs should size their CQs and use [`Pd::create_qp`].
    pub fn create_qp_accepting_cq_overrun(&self, init: &QpInit<'_>) -> Result<Qp> {
        self.create_qp_budgeted(init, CqBudget::AcceptOverrun)
    }

    fn create_qp_budgeted(&self, init: &QpInit<'_>, budget: CqBudget) -> Result<Qp> {
        let pd = &self.inner;
        let c = init.caps;
        // With an SRQ or no receives the receive SGEs size no queue of the
        // QP's: left to the provider and the kernel (rdma-core's mlx5
        // ignores them, rxe's kernel checks them against its max_sge).
        let recv_sge = if init.srq.is_some() || c.max_recv_wr == 0 {
            0
        } else {
            c.max_recv_sge
        };
        if c.max_send_sge as usize > MAX_SGE || recv_sge as usize > MAX_SGE {
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
        let user_handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        let req = provider::QpInit {
            cmd: QpRequest {
                user_handle,
                pd: pd.handle.raw(),
                send_cq: init.send_cq.inner.handle.raw(),
                recv_cq: init.recv_cq.inner.handle.raw(),
                srq: init.srq.map(|s| s.inner.handle.raw()),
                qp_type: init.qp_type,
                caps: c,
                sq_sig_all: init.sq_sig_all,
            },
            qp_type: init.qp_type,
            send_cq: &init.send_cq.inner.shared,
            recv_cq: &init.recv_cq.inner.shared,
            srq: init.srq.map(|s| &s.inner.shared),
        };
        let ctx = Context {
            inner: pd.ctx.clone(),
        };
        let parts = pd.ctx.provider.create_qp(&pd.ctx.dev, &ctx, &req)?;
        // Reserve the depths asked for on the CQs (a refusal drops the
        // parts, which destroys the QP). Not the granted ones: rxe rounds
        // its rings up to a power of two, and the depths rdma-core's tools
        // ask for (a CQ of rx_depth + 1 for rx_depth receives and one send)
        // would not fit; a program that posts beyond what it asked for can
        // still overrun the CQ, as with rdma-core.
        let [sends, recvs] = budget.reservations(&c, init.srq.is_some());
        let sends = sends
            .map(|n| init.send_cq.inner.commit(n, "send work requests"))
            .transpose()?;
        let recvs = recvs
            .map(|n| init.recv_cq.inner.commit(n, "receive work requests"))
            .transpose()?;
        Ok(Qp {
            inner: Arc::new(QpInner {
                handle: parts.created.handle,
                _registration: parts.registration,
                _commitments: [sends, recvs],
                ctx: pd.ctx.clone(),
                _pd: pd.clone(),
                _send_cq: init.send_cq.inner.clone(),
                _recv_cq: init.recv_cq.inner.clone(),
                _srq: init.srq.map(|s| s.inner.clone()),
                qpn: parts.created.qpn,
                qp_type: init.qp_type,
                caps: parts.caps,
                user_handle,
                state: AtomicU32::new(QpState::Reset.raw()),
                parked_ahs: std::sync::Mutex::new(None),
            }),
            ahs: match (init.qp_type, parts.send.slot_cursor()) {
                (QpType::Ud, Some((_, slots))) => Some(AhKeep::new(slots)),
                _ => None,
            },
            send: parts.send,
            recv: parts.recv,
        })
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

    /// The handle this QP's async events carry ([`crate::event::AsyncEvent`]).
    pub fn user_handle(&self) -> u64 {
        self.inner.user_handle
    }

    /// Posts send work requests in order, then rings the doorbell once.
    ///
    /// If one is rejected (invalid, or the SQ is full), the ones before it
    /// are posted and rung, it and the rest are not, and the error names
    /// its index — rdma-core's `bad_wr`, as a value.
    ///
    /// A QP in RESET, INIT or RTR takes no sends: the first request is
    /// refused (index 0) and nothing is posted.
    #[inline(always)]
    pub fn post_send(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        // Two loops, each out of line with the registers to itself
        // (callgrind: a 16-WRITE list ~7 a request fewer than one loop for
        // both), chosen here so that neither pays the other's prologue.
        if let [wr] = wrs {
            self.post_send_single(wr)
        } else if self.ahs.is_some() {
            self.post_send_keeping_ahs(wrs)
        } else {
            self.post_send_plain(wrs)
        }
    }

    /// [`Qp::post_send`] of one request: no loop, and the lists' loops
    /// keep their own layout (callgrind: handled inside `post_send_plain`,
    /// a list of 16 cost 85 instructions more).
    ///
    /// A SEND goes through its own copy of the post, in which the
    /// operation is a constant: no jump table on it in the provider
    /// (callgrind, in the rxe VM: inline SEND 182 -> 171, UD SEND 198 ->
    /// 189). A WRITE does not: with a copy of its own it cost 196,
    /// against 181 without (measured; the general path already suits it).
    #[inline(never)]
    fn post_send_single(&mut self, wr: &SendWr<'_>) -> Result<()> {
        match wr.op {
            SendOp::Send => self.post_send_one(&SendWr {
                op: SendOp::Send,
                ..*wr
            }),
            _ => self.post_send_one(wr),
        }
    }

    /// Posts one send work request and rings the doorbell: what
    /// [`Qp::post_send`] does with `&[wr]`, errors included, but inlined
    /// into the caller, so that a request built just before is read where
    /// it was built (the C library's `ibv_post_send` of one request: its
    /// translation is not stored and then loaded back).
    #[inline(always)]
    pub fn post_send_one(&mut self, wr: &SendWr<'_>) -> Result<()> {
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        match &mut self.ahs {
            // The request borrows its AH until we return: kept in the slot
            // it took before anyone can drop it.
            Some(keep) => self.send.post_one(wr, |slot, wr| keep.put(slot, wr)),
            None => self.send.post_one(wr, |_, _| {}),
        }
    }

    /// Starts a list of send work requests written one at a time
    /// ([`SendList::push`]) and handed to the device together when the
    /// list ends ([`SendList::finish`]): one doorbell, as
    /// [`Qp::post_send`] of a slice, for requests built as they go (the C
    /// library's `ibv_post_send` of a linked list) rather than gathered
    /// into a slice first.
    ///
    /// Refused as [`Qp::post_send`] refuses a QP in RESET, INIT or RTR.
    #[inline(always)]
    pub fn send_list(&mut self) -> Result<SendList<'_>> {
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        Ok(SendList {
            qp: self,
            pushed: 0,
        })
    }

    /// [`Qp::post_send`] on a QP that keeps no AHs (connected, or mlx5).
    #[inline(never)]
    fn post_send_plain(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        // Checked again (never taken from post_send): with this test here
        // the compiler lays the loop out as it does best (callgrind: a
        // 16-WRITE list 2178 without it, 2063 with it).
        if self.ahs.is_some() {
            return self.post_send_keeping_ahs(wrs);
        }
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        self.send.post(wrs)
    }

    /// [`Qp::post_send`] on a QP that keeps the AHs its sends name (UD on
    /// rxe).
    #[inline(never)]
    fn post_send_keeping_ahs(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        let (send, ahs) = (&mut self.send, &mut self.ahs);
        let Some(keep) = ahs else {
            return send.post(wrs);
        };
        // Each posted request borrows its AH until we return, so none can
        // have been dropped before it is kept here, in the slot it took.
        send.post_each(wrs, |slot, wr| keep.put(slot, wr))
    }

    /// Posts `wrs` only if all of them can be: every request valid and
    /// room for all of them in the send queue; otherwise nothing is posted
    /// and the error names the first request that is invalid or does not
    /// fit. What a batch API needs (`ibv_wr_complete`: rdma-core's
    /// providers roll the whole batch back), and what a program that must
    /// not reuse a buffer the device may still read should use.
    pub fn post_send_all(&mut self, wrs: &[SendWr<'_>]) -> Result<()> {
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        self.send.check_all(wrs)?;
        self.post_send(wrs)
    }

    #[cold]
    fn not_ready(&self) -> Error {
        Error::InvalidWorkRequest {
            index: 0,
            reason: rverbs_types::PostError::NotReady {
                state: self.inner.state.load(Ordering::Relaxed),
            },
        }
    }

    /// Posts receive work requests in order (no system call).
    pub fn post_recv(&mut self, wrs: &[RecvWr<'_>]) -> Result<()> {
        match &mut self.recv {
            Some(rq) => rq.post(wrs, "receive queue"),
            None => Err(Error::invalid("this QP receives through an SRQ")),
        }
    }

    /// Modifies the QP (`MODIFY_QP`) with every attribute set in `attr`.
    pub fn modify(&mut self, attr: &QpAttr) -> Result<()> {
        self.inner
            .ctx
            .provider
            .check_modify(attr.state == Some(QpState::Reset))?;
        self.inner
            .modify_raw(&attr.encode(self.inner.handle.raw())?)
    }

    /// The QP's control half (handle and context), for the rdma_cm glue
    /// that moves the QP through its states while the user posts.
    pub(crate) fn control(&self) -> Arc<QpInner> {
        self.inner.clone()
    }

    /// The state this process last moved the QP to ([`Qp::modify`], or
    /// rdma_cm on its behalf), without a system call. The kernel's own
    /// moves to SQE or ERR are not seen here: [`Qp::query_state`] asks the
    /// kernel.
    pub fn last_state(&self) -> QpState {
        QpState::from_raw(self.inner.state.load(Ordering::Relaxed))
    }

    /// Queries the QP's state (`QUERY_QP`).
    pub fn query_state(&self) -> Result<QpState> {
        let resp = cmd::qp::query(
            &self.inner.ctx.dev,
            self.inner.handle.raw(),
            attr::mask::STATE,
        )?;
        Ok(QpState::from_raw(resp.qp_state as u32))
    }
}

/// A list of send work requests being posted on a QP ([`Qp::send_list`]).
///
/// Each [`SendList::push`] checks its request as [`Qp::post_send`] does
/// and writes it into the send queue; the device sees the requests pushed
/// so far, in order, at [`SendList::flush`] or [`SendList::finish`]
/// (which report a failed doorbell) or when the list is dropped — which
/// still rings, but cannot report a failed doorbell: a program that
/// returns early on a refused push (`list.push(&wr)?`) has its earlier
/// requests rung and learns only of the refusal. A leaked list
/// (`mem::forget`) leaves its requests written but unseen until the QP's
/// next post. A request's memory is borrowed for its push only, as with
/// [`Qp::post_send`]: its SGEs are MR slices, whose MR keeps the memory
/// mapped until it is deregistered; a UD send's AH is kept by the QP
/// until the send has completed.
#[derive(Debug)]
#[must_use = "a send list rings at finish (or drop); finish reports a failed doorbell"]
pub struct SendList<'q> {
    qp: &'q mut Qp,
    pushed: usize,
}

impl SendList<'_> {
    /// Checks `wr` and writes it into the send queue. A refused request
    /// (invalid, or the queue full) is not written and is named by an
    /// index: how many requests this list wrote since it started or was
    /// last flushed (refused ones not counted); the list goes on.
    #[inline(always)]
    pub fn push(&mut self, wr: &SendWr<'_>) -> Result<()> {
        let qp = &mut *self.qp;
        match &mut qp.ahs {
            // The request borrows its AH until this returns: kept in the
            // slot it took before anyone can drop it.
            Some(keep) => qp
                .send
                .push(wr, self.pushed, |slot, wr| keep.put(slot, wr))?,
            None => qp.send.push(wr, self.pushed, |_, _| {})?,
        }
        self.pushed += 1;
        Ok(())
    }

    /// How many requests were written since the list started or was last
    /// flushed.
    pub fn len(&self) -> usize {
        self.pushed
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Hands the pushed requests to the device (nothing to do if none
    /// was): on rxe one `POST_SEND` doorbell, whose failure is the error.
    #[inline(always)]
    pub fn finish(mut self) -> Result<()> {
        self.flush()
    }

    /// Hands the requests pushed so far to the device, as
    /// [`SendList::finish`] does; the list goes on, empty.
    #[inline(always)]
    pub fn flush(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pushed) == 0 {
            return Ok(());
        }
        self.qp.send.flush()
    }
}

impl SendList<'_> {
    /// Runs `l` over this list with its provider chosen once: `l` is
    /// handed a [`SendPush`] of the QP's provider (and, on rxe, of
    /// whether the QP keeps the AHs its sends name), so that a loop of
    /// pushes inside it tests neither per request, as [`SendList::push`]
    /// must. What `l` pushes and does not flush is flushed, as ever, by
    /// [`SendList::finish`], [`SendList::flush`] or the drop.
    #[inline(always)]
    pub fn run<L: SendLoop>(&mut self, l: L) -> L::Output {
        let qp = &mut *self.qp;
        let pushed = self.pushed;
        // Each arm hands the count back, pushes and flushes included.
        match (&mut qp.send, &mut qp.ahs) {
            (SendRing::Rxe(q), None) => {
                let mut p = Pusher(RxePusher {
                    q,
                    keep: (),
                    pushed,
                });
                let out = l.run(&mut p);
                self.pushed = p.0.pushed;
                out
            }
            (SendRing::Rxe(q), Some(keep)) => {
                let mut p = Pusher(RxePusher { q, keep, pushed });
                let out = l.run(&mut p);
                self.pushed = p.0.pushed;
                out
            }
            // mlx5 copies the address into the WQE: nothing to keep.
            (SendRing::Mlx5(q), _) => {
                let mut p = Pusher(Mlx5Pusher { q, pushed });
                let out = l.run(&mut p);
                self.pushed = p.0.pushed;
                out
            }
        }
    }
}

/// A list's push and flush ([`SendList`]'s own, or the one
/// [`SendList::run`] hands its loop, for one provider).
pub trait SendPush {
    /// As [`SendList::push`].
    fn push(&mut self, wr: &SendWr<'_>) -> Result<()>;
    /// As [`SendList::flush`].
    fn flush(&mut self) -> Result<()>;
}

/// A loop of pushes, run by [`SendList::run`] with a [`SendPush`] of the
/// QP's provider: one copy of the loop is made for each provider, in
/// which the provider is known.
pub trait SendLoop {
    /// What the loop answers.
    type Output;
    /// Runs the loop over `list`.
    fn run<P: SendPush>(self, list: &mut P) -> Self::Output;
}

impl SendPush for SendList<'_> {
    #[inline(always)]
    fn push(&mut self, wr: &SendWr<'_>) -> Result<()> {
        SendList::push(self, wr)
    }

    #[inline(always)]
    fn flush(&mut self) -> Result<()> {
        SendList::flush(self)
    }
}

/// [`SendList::run`]'s [`SendPush`]: one provider's pusher (the public
/// trait is implemented here, on a type of this module, for the
/// provider module's crate-private pushers).
struct Pusher<T>(T);

impl<T: RingPush<Ah>> SendPush for Pusher<T> {
    #[inline(always)]
    fn push(&mut self, wr: &SendWr<'_>) -> Result<()> {
        self.0.push(wr)
    }

    #[inline(always)]
    fn flush(&mut self) -> Result<()> {
        self.0.flush()
    }
}

impl Drop for SendList<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Nothing pushed is left unseen by the device; a doorbell error
        // here has no one to go to (finish reports it).
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: QpCaps = QpCaps {
        max_send_wr: 1000,
        max_recv_wr: 700,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };

    #[test]
    fn by_default_a_qp_reserves_both_depths_and_none_through_an_srq() {
        assert_eq!(
            CqBudget::Reserve.reservations(&CAPS, false),
            [Some(1000), Some(700)]
        );
        assert_eq!(
            CqBudget::Reserve.reservations(&CAPS, true),
            [Some(1000), None]
        );
    }

    #[test]
    fn accepting_overrun_reserves_nothing() {
        for srq in [false, true] {
            assert_eq!(
                CqBudget::AcceptOverrun.reservations(&CAPS, srq),
                [None, None]
            );
        }
    }
}

//! Sends built in place, piece by piece ([`Qp::build_send`]): the shape
//! of rdma-core's `ibv_wr_*` builders, for a program that knows each
//! request's parts one at a time and would otherwise assemble a
//! [`SendWr`](super::SendWr) only to have it copied.

use super::{AhKeep, Qp};
use crate::ah::Ah;
use crate::error::{Errno, Error, Result};
use crate::provider::{rxe, SendRing};
use crate::wr::{SendOp, Slice};
use rverbs_types::PostError;

/// The flags of a send work request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendFlags {
    /// Generate a completion.
    pub signaled: bool,
    /// Set the solicited-event bit.
    pub solicited: bool,
    /// Wait for earlier READs and atomics first.
    pub fence: bool,
}

impl SendFlags {
    /// A signaled send, neither solicited nor fenced.
    pub const SIGNALED: SendFlags = SendFlags {
        signaled: true,
        solicited: false,
        fence: false,
    };

    /// `enum ib_send_flags`' bits.
    #[inline(always)]
    fn bits(self) -> u32 {
        use uverbs_abi::verbs::IbSendFlags as F;
        (self.fence as u32 * F::FENCE.bits())
            | (self.signaled as u32 * F::SIGNALED.bits())
            | (self.solicited as u32 * F::SOLICITED.bits())
    }
}

/// A batch of send work requests written into the send queue as they are
/// built ([`Qp::build_send`]): [`SendBuilder::start`] begins a request
/// (its operation, id and flags) in the next slot; [`SendBuilder::sges`],
/// [`SendBuilder::inline`] and [`SendBuilder::to`] give the request started
/// last its payload and UD destination; [`SendBuilder::finish`] hands the
/// batch to the device (rxe: one doorbell).
///
/// All or nothing, as rdma-core's `ibv_wr_complete`: every call is checked
/// as [`Qp::post_send`] checks a request; a refusal is kept, not answered,
/// and [`SendBuilder::finish`] reports the first one, naming its request
/// by index (as rdma-core's builders report at `ibv_wr_complete`). A
/// refused call, a request
/// left incomplete (a UD send without its destination, an atomic without
/// its 8-byte buffer), [`SendBuilder::abort`] or dropping the builder
/// takes the whole batch back: the device sees none of it. A leaked
/// builder (`mem::forget`) leaves its requests, as built so far, written
/// but unseen until the QP's next post, which sends them (as a leaked
/// [`SendList`](super::SendList)'s); a batch built after it is still taken
/// back whole, to where it began. SGEs are MR slices, borrowed for the call only, as
/// with [`Qp::post_send`]; a UD send's AH is kept by the QP until the send
/// has completed.
///
/// rxe only: an mlx5 QP builds its WQEs in [`Qp::post_send`] and
/// [`Qp::send_list`].
#[must_use = "a send builder posts nothing until finish"]
pub struct SendBuilder<'q> {
    q: &'q mut rxe::Sq,
    keep: Option<&'q mut AhKeep>,
}

impl Qp {
    /// Starts a batch of sends built in place ([`SendBuilder`]).
    ///
    /// Refused as [`Qp::post_send`] refuses a QP in RESET, INIT or RTR,
    /// and on an mlx5 QP.
    #[inline(always)]
    pub fn build_send(&mut self) -> Result<SendBuilder<'_>> {
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        match &mut self.send {
            SendRing::Rxe(q) => {
                q.sq.build_begin();
                Ok(SendBuilder {
                    q,
                    keep: self.ahs.as_mut(),
                })
            }
            SendRing::Mlx5(_) => Err(not_in_place()),
        }
    }

    /// [`Qp::build_send`] for a caller that keeps alive itself every AH it
    /// gives the builder (a C ABI's `ibv_wr_set_ud_addr`, whose caller
    /// must): the QP keeps none, and the answer is only whether the batch
    /// began. [`Qp::build_send`] says why not; its `Error`, too large to
    /// come back in registers, costs every call a stack frame (callgrind:
    /// 4 instructions, and the AH-keeping 5 more).
    ///
    /// # Safety
    /// Every AH given to the builder ([`SendBuilder::to`]) stays alive,
    /// with its kernel AH, until its send has completed.
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    pub unsafe fn build_send_unkept(&mut self) -> Option<SendBuilder<'_>> {
        if !self.inner.can_send() {
            return None;
        }
        match &mut self.send {
            SendRing::Rxe(q) => {
                q.sq.build_begin();
                Some(SendBuilder { q, keep: None })
            }
            SendRing::Mlx5(_) => None,
        }
    }
}

impl SendBuilder<'_> {
    /// Begins a request of `op` with id `wr_id` and `flags`, in the next
    /// slot of the send queue. The request started before it must be
    /// complete. A refusal (the transport does not take `op`, the queue is
    /// full) fails the batch.
    #[inline(always)]
    pub fn start(&mut self, wr_id: u64, op: SendOp, flags: SendFlags) {
        let index = self.q.sq.build_len();
        if let Err(r) = self.q.sq.build_start(wr_id, op, flags.bits()) {
            self.fail(r, index);
        }
    }

    /// Gives the request started last the SGEs `sges`, replacing any
    /// payload it had.
    #[inline(always)]
    pub fn sges(&mut self, sges: &[Slice<'_>]) {
        let r = rxe::build_sges(&mut self.q.sq, sges);
        self.check_last(r);
    }

    /// Gives the request started last the one SGE `sge`.
    #[inline(always)]
    pub fn sge(&mut self, sge: Slice<'_>) {
        if !rxe::build_sge_plain(&mut self.q.sq, &sge) {
            self.sge_checked(sge);
        }
    }

    /// [`SendBuilder::sge`] for a request that is not a plain one (an
    /// atomic, an operation without payload, none started): out of line,
    /// so that its refusal is built outside the common path's frame.
    #[cold]
    #[inline(never)]
    fn sge_checked(&mut self, sge: Slice<'_>) {
        self.sges(std::slice::from_ref(&sge))
    }

    /// Gives the request started last `data` as its inline payload, copied
    /// now, replacing any payload it had.
    #[inline(always)]
    pub fn inline(&mut self, data: &[u8]) {
        self.inline_parts(std::iter::once(data))
    }

    /// Gives the request started last the inline payload made of `parts`,
    /// in order, copied now (in one pass: each part is checked against the
    /// room left before it is copied).
    #[inline(always)]
    pub fn inline_parts<'d, I>(&mut self, parts: I)
    where
        I: IntoIterator<Item = &'d [u8]>,
    {
        let r = self.q.sq.build_inline(parts.into_iter());
        self.check_last(r);
    }

    /// Gives the request started last its UD destination: `ah`, the QP
    /// `remote_qpn`, the Q_Key `remote_qkey`. The QP keeps `ah` until the
    /// send has completed.
    #[inline(always)]
    pub fn to(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) {
        match self.q.sq.build_ud(ah, remote_qpn, remote_qkey) {
            Ok(slot) => {
                // Kept in the slot the send took before anyone can drop
                // the AH: the borrow lasts until we return.
                if let Some(keep) = self.keep.as_deref_mut() {
                    keep.put_ah(slot, Some(ah));
                }
            }
            Err(r) => self.check_last(Err(r)),
        }
    }

    /// [`SendBuilder::to`] without the QP keeping `ah`: for a caller that
    /// keeps it alive itself, as a C caller of `ibv_wr_set_ud_addr` must
    /// (the AH-keeping costs each UD send a table update; callgrind).
    ///
    /// # Safety
    /// `ah` (and its kernel AH, which the device looks up by number when it
    /// sends) stays alive until the send has completed.
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    pub unsafe fn to_unkept(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) {
        if !self.q.sq.build_ud_plain(ah, remote_qpn, remote_qkey) {
            self.ud_refused(ah, remote_qpn, remote_qkey);
        }
    }

    /// [`SendBuilder::to_unkept`] refused: records why, out of line (as
    /// [`SendBuilder::sge_checked`]).
    #[cold]
    #[inline(never)]
    fn ud_refused(&mut self, ah: &Ah, remote_qpn: u32, remote_qkey: u32) {
        if let Err(r) = self.q.sq.build_ud(ah, remote_qpn, remote_qkey) {
            self.check_last(Err(r));
        }
    }

    /// Whether a call of this batch was refused (then [`SendBuilder::finish`]
    /// reports the first refusal and posts nothing).
    pub fn is_failed(&self) -> bool {
        self.q.sq.build_failed()
    }

    /// Requests started so far.
    pub fn len(&self) -> usize {
        self.q.sq.build_len() as usize
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands the batch to the device and answers how many requests it
    /// held, or fails with the batch's first refusal, or for its last
    /// request left incomplete: then none of it is posted. A doorbell the
    /// kernel refuses (rxe's POST_SEND, `Error::Kernel`) comes after the
    /// requests were published, as in rdma-core's `ibv_wr_complete`: they
    /// stay in the queue, for the kernel to take at the QP's next doorbell.
    #[inline(always)]
    pub fn finish(self) -> Result<usize> {
        self.finish_raw().map_err(Unposted::into_error)
    }

    /// [`SendBuilder::finish`] answering why not in a form that comes back
    /// in registers ([`Unposted`]), for a caller that answers an errno (a
    /// C ABI): an [`Error`] is too large for them, and costs every call a
    /// stack frame (callgrind: 8 instructions a batch).
    #[inline(always)]
    pub fn finish_raw(mut self) -> std::result::Result<usize, Unposted> {
        let r = self.end();
        std::mem::forget(self);
        r
    }

    /// [`SendBuilder::finish_raw`], leaving the builder to be forgotten.
    #[inline(always)]
    fn end(&mut self) -> std::result::Result<usize, Unposted> {
        match self.q.sq.build_end() {
            Ok(0) => Ok(0),
            Ok(n) => match self.q.doorbell.ring_errno() {
                Ok(()) => Ok(n as usize),
                Err(e) => Err(Unposted::Doorbell(e)),
            },
            Err((reason, index)) => Err(Unposted::Refused { reason, index }),
        }
    }

    /// Takes the whole batch back: the device sees none of it.
    pub fn abort(self) {
        // The drop does it.
    }

    /// [`SendBuilder::check`] for the request started last.
    #[inline(always)]
    fn check_last(&mut self, r: std::result::Result<(), PostError>) {
        if let Err(r) = r {
            let index = self.q.sq.build_len().saturating_sub(1);
            self.fail(r, index);
        }
    }

    /// Records the refusal in place: a refusal handed to a function out of
    /// line goes through the stack, which then every call of the
    /// builder's paid for with a frame (callgrind).
    #[inline(always)]
    fn fail(&mut self, r: PostError, index: u32) {
        unlikely();
        self.q.sq.build_fail(r, index);
    }
}

impl std::fmt::Debug for SendBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBuilder")
            .field("len", &self.len())
            .field("failed", &self.is_failed())
            .finish_non_exhaustive()
    }
}

impl Drop for SendBuilder<'_> {
    fn drop(&mut self) {
        self.q.sq.build_abort();
    }
}

/// Why [`SendBuilder::finish_raw`] posted nothing, or rang no doorbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unposted {
    /// A call of the batch was refused, or its last request was left
    /// incomplete: the reason, and the request's index in the batch.
    /// Nothing was posted.
    Refused {
        /// Why.
        reason: PostError,
        /// The request's index in the batch.
        index: u32,
    },
    /// rxe's doorbell (`POST_SEND`) failed with this errno, after the
    /// batch was published (as [`SendBuilder::finish`]'s
    /// [`Error::Kernel`]); a short write, which no kernel makes of a
    /// command, is `EIO` (where `Qp::post_send` answers
    /// [`Error::BadKernelAnswer`]).
    Doorbell(Errno),
}

impl Unposted {
    /// The [`Error`] [`SendBuilder::finish`] answers for it.
    #[cold]
    pub fn into_error(self) -> Error {
        match self {
            Unposted::Refused { reason, index } => refused(reason, index),
            Unposted::Doorbell(e) => Error::kernel("POST_SEND (doorbell)", e),
        }
    }
}

/// Marks the path that calls it as rarely taken.
#[cold]
#[inline(never)]
fn unlikely() {}

#[cold]
#[inline(never)]
fn not_in_place() -> Error {
    Error::invalid(
        "build_send: an mlx5 QP builds no sends in place; post with post_send or send_list",
    )
}

#[cold]
fn refused(r: PostError, index: u32) -> Error {
    let index = index as usize;
    match r {
        PostError::QueueFull => Error::QueueFull {
            queue: "send queue",
            index,
        },
        reason => Error::InvalidWorkRequest { index, reason },
    }
}

//! Sends built in place, piece by piece: the shape of rdma-core's
//! `ibv_wr_*` builders. [`SendQueue::build_start`] writes a request's
//! header straight into the next slot (no payload, no destination yet) and
//! moves the producer past it without publishing; the `build_*` calls then
//! give that request its SGEs, inline bytes or UD destination, in its slot;
//! [`SendQueue::build_end`] publishes the lot (the caller rings the
//! doorbell) and [`SendQueue::build_abort`] takes it all back.
//!
//! Nothing is assembled and then copied: each piece is stored where the
//! kernel reads it, as rdma-core's rxe builders do. Unlike those, every
//! piece is checked as [`SendQueue::post`] checks a whole request (the
//! transport takes the operation, the payload fits the slot and the QP's
//! caps, an atomic has its 8 bytes, a UD send its destination): a request
//! left short of what it needs fails the batch at its end, and a failed
//! batch is rolled back whole. Between [`SendQueue::build_begin`] and the
//! batch's end no other post may be made on the queue (rverbs'
//! `SendBuilder` borrows the QP for the batch). A batch never ended (its
//! builder leaked) is in the ring past the producer: the queue's next post
//! publishes it, as built so far, and the next `build_begin` leaves it
//! there; it is never rolled back over later requests.

use super::{write_wqe, SendQueue, HEADER, INLINE};
use crate::slot::SlotMut;
use crate::wqe::send;
use crate::wr::{AddressHandle, AhAddr, SendOp, SendWr, Sge};
use core::ptr::NonNull;
use rverbs_types::{check_payload, PostError, QpType};

/// The request still needs its UD destination (every request on a UD QP).
const NEEDS_UD: u8 = 1;
/// The request still needs its 8-byte local buffer (compare-and-swap and
/// fetch-and-add).
const NEEDS_ATOMIC_BUFFER: u8 = 2;

/// The request takes no payload (local invalidate, window bind, FLUSH,
/// ATOMIC WRITE).
const NO_PAYLOAD: u8 = 1;
/// The request reads the peer: no inline payload.
const NO_INLINE: u8 = 2;
/// The request is an atomic that needs its 8-byte buffer.
const ATOMIC: u8 = 4;

/// The batch being built on a queue: where it began, and what the request
/// started last is and still needs. The requests of a batch take
/// consecutive slots, so the last one's slot is the one before the
/// producer, and their number the producer's distance from `first`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Build {
    /// The producer when the batch began.
    first: u32,
    /// The producer after the batch's last request: the batch's own view
    /// of it. A post that moved the producer since has taken the batch's
    /// requests as its own (see [`SendQueue::build_abort`]).
    end: u32,
    /// A batch is open: begun, and neither ended nor aborted.
    open: bool,
    /// The last request's send flags, without `IB_SEND_INLINE`.
    flags: u32,
    /// `enum ib_uverbs_wr_opcode` of the last request, for errors.
    opcode: u32,
    /// What the last request's operation takes (`NO_PAYLOAD` ...).
    kind: u8,
    /// What the last request still needs (`NEEDS_UD` ...).
    needs: u8,
    /// The batch's first refusal, and the index of its request: the batch
    /// then fails at its end.
    failed: Option<(PostError, u32)>,
    /// The slot of the request this batch started last (the one before
    /// the producer), kept so that each piece stores straight into it
    /// instead of working its address out from the producer again
    /// (callgrind: 5 instructions a piece). `None` before the batch's
    /// first request.
    last: Option<NonNull<u8>>,
    /// The last request takes one SGE with no rule of its own (its
    /// operation takes a payload, may read it from memory and is no
    /// atomic; the queue's slots hold an SGE): [`SendQueue::build_sge_plain`]
    /// then stores it with no further check.
    plain: bool,
}

#[allow(unsafe_code)] // the pointer's thread rule, argued below
                      // SAFETY: `last` points into the send queue's ring, which the queue that
                      // holds this record owns the use of (as `Queue`, which is Send for the
                      // same reason); it is only written through `&mut SendQueue`. Without the
                      // pointer the record is plain data.
unsafe impl Send for Build {}

/// A slot that holds its header and one SGE.
const ONE_SGE: usize = HEADER + size_of::<Sge>();

impl Build {
    /// A post filled the slots up to `next`: the batch's requests start
    /// past them.
    #[inline(always)]
    pub(super) fn posted(&mut self, next: u32) {
        self.first = next;
        // The post took the batch's requests (a leaked builder's) as its
        // own, and may have published them: no piece may reach them.
        self.last = None;
    }
}

/// The error for a request left without what it needs.
#[cold]
fn missing(needs: u8) -> PostError {
    if needs & NEEDS_UD != 0 {
        PostError::UdMismatch { qp_is_ud: true }
    } else {
        PostError::BadAtomic
    }
}

/// A request type with no destination, for a header written before its
/// destination is known (never constructed).
enum NoAh {}

impl AddressHandle for NoAh {
    fn address(&self) -> &AhAddr {
        match *self {}
    }
}

/// The refusal of a store into a slot of `max` bytes.
#[cold]
fn too_large(r: crate::slot::Refused, max: usize) -> PostError {
    PostError::WqeTooLarge {
        bytes: r.end(),
        max,
    }
}

impl SendQueue {
    /// Begins a batch of sends built in place. The caller keeps other
    /// posts off the queue until [`SendQueue::build_end`] or
    /// [`SendQueue::build_abort`] (rverbs' `SendBuilder` borrows the QP for
    /// it); a batch begun while another was open takes the other's
    /// requests as posted ones (the next publish shows them).
    #[inline(always)]
    pub fn build_begin(&mut self) {
        self.build.first = self.prod;
        self.build.end = self.prod;
        self.build.open = true;
        self.build.failed = None;
        self.build.last = None;
    }

    /// Fails the batch with `r`, for its request at `index`, unless it
    /// failed before: [`SendQueue::build_end`] then reports the first
    /// refusal and posts nothing. (The `build_*` calls answer their own
    /// refusal and leave it to the caller to record.)
    #[inline(always)]
    pub fn build_fail(&mut self, r: PostError, index: u32) {
        self.build.failed.get_or_insert((r, index));
    }

    /// Whether the batch failed ([`SendQueue::build_fail`]).
    pub fn build_failed(&self) -> bool {
        self.build.failed.is_some()
    }

    /// Requests the batch has started.
    #[inline(always)]
    pub fn build_len(&self) -> u32 {
        self.prod.wrapping_sub(self.build.first) & self.q.queue().mask()
    }

    /// The slot of the request started last, if any.
    #[inline(always)]
    fn build_last(&self) -> Result<u32, PostError> {
        if self.prod == self.build.first {
            return Err(PostError::NoRequest);
        }
        Ok(self.prod.wrapping_sub(1) & self.q.queue().mask())
    }

    /// Fails if the request started last lacks what it needs.
    #[inline(always)]
    fn build_check_last(&self) -> Result<(), PostError> {
        if self.build.needs != 0 && self.prod != self.build.first {
            return Err(missing(self.build.needs));
        }
        Ok(())
    }

    /// Starts a request of `op` with `wr_id` and the send flags `flags`
    /// (`IB_SEND_SIGNALED`, `_SOLICITED`, `_FENCE`; `IB_SEND_INLINE` is
    /// the payload's to set): checks that the QP's transport takes it and
    /// that the queue has room, then writes its header in the next slot,
    /// with no payload, and moves past it unpublished. The request before
    /// it must be complete (a UD destination, an atomic's buffer). A
    /// refused request leaves nothing behind.
    #[inline(always)]
    pub fn build_start(&mut self, wr_id: u64, op: SendOp, flags: u32) -> Result<(), PostError> {
        self.build_check_last()?;
        // The transport's rule (check_send's), with the refusal built here:
        // one built out of line comes back through the stack, and every
        // call would pay for the frame (callgrind).
        let qp_type = self.limits.qp_type;
        let taken = match qp_type {
            QpType::Rc => true,
            QpType::Ud => matches!(op, SendOp::Send | SendOp::SendWithImm(_)),
            QpType::Uc => !op.reads_remote(),
        };
        if !taken {
            return Err(PostError::NotOnTransport {
                opcode: op.opcode(),
                qp_type,
            });
        }
        let mut needs = if qp_type == QpType::Ud { NEEDS_UD } else { 0 };
        let kind = match op {
            SendOp::Send
            | SendOp::SendWithImm(_)
            | SendOp::Write(_)
            | SendOp::WriteWithImm(..)
            | SendOp::SendWithInv(_) => 0,
            SendOp::Read(_) => NO_INLINE,
            SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } => {
                if remote.addr & 7 != 0 {
                    return Err(PostError::BadAtomic);
                }
                needs |= NEEDS_ATOMIC_BUFFER;
                NO_INLINE | ATOMIC
            }
            op => {
                self.check_extended(op, false)?;
                NO_PAYLOAD
            }
        };
        self.ensure_room()?;
        let slot = self.prod;
        let next = self.q.queue().next(slot);
        let wr: SendWr<'_, Sge, NoAh> = SendWr {
            wr_id,
            op,
            sges: &[],
            inline: None,
            signaled: false,
            solicited: false,
            fence: false,
            ud: None,
        };
        let mut w = self.q.slot_mut(slot);
        let max = w.len();
        let at = w.addr();
        write_wqe(&mut w, &wr, self.ssn).map_err(|e| e.post_error(max))?;
        // The flags as given (write_wqe wrote those of `wr`, none), and
        // the length the operation has of its own (ATOMIC WRITE, FLUSH).
        let own = match op {
            SendOp::AtomicWrite { .. } => 8,
            SendOp::Flush { len, .. } => len,
            _ => 0,
        };
        // IB_SEND_INLINE is the payload's to set.
        let flags = flags & !INLINE;
        w.u32(send::SEND_FLAGS, flags)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::DMA_LENGTH, own)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::DMA_RESID, own).map_err(|r| too_large(r, max))?;
        self.ssn = self.ssn.wrapping_add(1);
        self.prod = next;
        self.room -= 1;
        self.build.end = next;
        self.build.flags = flags;
        self.build.opcode = op.opcode();
        self.build.kind = kind;
        self.build.needs = needs;
        self.build.last = Some(at);
        self.build.plain = kind == 0 && self.limits.max_sge != 0;
        Ok(())
    }

    /// Gives the request started last the SGEs `sges` (replacing any
    /// payload it had). A refusal may leave the request half-given: the
    /// batch fails then, and is taken back whole.
    ///
    /// # Safety
    /// As for [`SendQueue::post`].
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    pub unsafe fn build_sges(&mut self, sges: &[Sge]) -> Result<(), PostError> {
        let slot = self.build_last()?;
        check_payload(
            self.limits.max_sge,
            self.limits.max_inline,
            sges.len(),
            None,
        )?;
        let b = self.build;
        if b.kind & NO_PAYLOAD != 0 {
            // An empty list leaves the operation's own length (FLUSH's
            // range, ATOMIC WRITE's 8 bytes) as it is.
            return match sges.is_empty() {
                true => Ok(()),
                false => Err(PostError::NoPayload { opcode: b.opcode }),
            };
        }
        let mut w = self.q.slot_mut(slot);
        let max = w.len();
        let total = w.sges(send::PAYLOAD, sges).map_err(|r| too_large(r, max))?;
        let length = u32::try_from(total).map_err(|_| PostError::TooLong {
            length: total,
            max: u32::MAX.into(),
        })?;
        if b.kind & ATOMIC != 0 {
            if length < 8 {
                return Err(PostError::BadAtomic);
            }
            self.build.needs &= !NEEDS_ATOMIC_BUFFER;
        }
        w.u32(send::DMA_NUM_SGE, sges.len() as u32)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::DMA_LENGTH, length)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::DMA_RESID, length)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::SEND_FLAGS, b.flags)
            .map_err(|r| too_large(r, max))?;
        Ok(())
    }

    /// Gives the request started last the inline payload made of `parts`,
    /// copied now (replacing any payload it had).
    #[inline(always)]
    pub fn build_inline<'d, I>(&mut self, mut parts: I) -> Result<(), PostError>
    where
        I: Iterator<Item = &'d [u8]>,
    {
        let slot = self.build_last()?;
        let b = self.build;
        if b.kind & NO_INLINE != 0 {
            return Err(PostError::InlineNotAllowed { opcode: b.opcode });
        }
        if b.kind & NO_PAYLOAD != 0 {
            return Err(PostError::NoPayload { opcode: b.opcode });
        }
        let max_inline = self.limits.max_inline as usize;
        let mut w = self.q.slot_mut(slot);
        let max = w.len();
        // One pass over the parts: the length written is the length of
        // what was copied (an iterator need not yield the same parts
        // twice), and each part is checked before it is copied.
        let mut total = 0usize;
        while let Some(p) = parts.next() {
            let end = total.saturating_add(p.len());
            if end > max_inline {
                // The whole request's length, for the error: the rest is
                // counted, not copied. (The batch fails, and is taken back.)
                let given = parts.fold(end, |n, p| n.saturating_add(p.len()));
                return Err(PostError::InlineTooLong {
                    given,
                    max: self.limits.max_inline,
                });
            }
            w.bytes(send::PAYLOAD + total, p)
                .map_err(|r| too_large(r, max))?;
            total = end;
        }
        // One piece, as a post's inline request (write_wqe says why).
        w.u32(send::DMA_NUM_SGE, 1).map_err(|r| too_large(r, max))?;
        w.u32(send::DMA_LENGTH, total as u32)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::DMA_RESID, total as u32)
            .map_err(|r| too_large(r, max))?;
        w.u32(send::SEND_FLAGS, b.flags | INLINE)
            .map_err(|r| too_large(r, max))?;
        Ok(())
    }

    /// Gives the request started last its UD destination: `ah`, QP
    /// `remote_qpn`, Q_Key `remote_qkey`, and answers its slot. The caller
    /// keeps the AH alive until the request completes (the kernel reads the
    /// AH by number).
    #[inline(always)]
    #[allow(unsafe_code)] // the view of the last request's slot
    pub fn build_ud<A: AddressHandle>(
        &mut self,
        ah: &A,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> Result<u32, PostError> {
        let Some(at) = self.build.last else {
            return Err(PostError::NoRequest);
        };
        if self.limits.qp_type != QpType::Ud {
            return Err(PostError::UdMismatch { qp_is_ud: false });
        }
        let AhAddr::Number(ah_num) = *ah.address() else {
            return Err(PostError::ForeignAddressHandle);
        };
        // The header alone: every store is at a constant offset inside it.
        // SAFETY: `at` is the slot of the batch's last request (`last`),
        // which holds at least HEADER bytes (SlotRing::new checked the
        // ring's elem_size), 8-aligned, in the ring this queue writes
        // through `&mut self`, which no Rust reference reaches.
        let mut w: SlotMut<'_, HEADER> = unsafe { SlotMut::new(at, 0) };
        // The P_Key index stays the 0 build_start wrote.
        let _ = w.u32(send::UD_REMOTE_QPN, remote_qpn);
        let _ = w.u32(send::UD_REMOTE_QKEY, remote_qkey);
        let _ = w.u32(send::UD_AH_NUM, ah_num);
        self.build.needs &= !NEEDS_UD;
        Ok(self.prod.wrapping_sub(1) & self.q.queue().mask())
    }

    /// [`SendQueue::build_ud`] when nothing in it can be refused (a request
    /// was started, the QP is UD, the AH is rxe's, by number): answers
    /// whether it stored the destination; if not, the caller gives it with
    /// [`SendQueue::build_ud`], which says why not. (As
    /// [`SendQueue::build_sge_plain`]: a refusal built here would cost
    /// every call its registers.)
    #[inline(always)]
    pub fn build_ud_plain<A: AddressHandle>(
        &mut self,
        ah: &A,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> bool {
        match (self.build.last, self.limits.qp_type, ah.address()) {
            (Some(_), QpType::Ud, AhAddr::Number(_)) => {
                // Cannot be refused: every case that would be is above.
                let _ = self.build_ud(ah, remote_qpn, remote_qkey);
                true
            }
            _ => false,
        }
    }

    /// Gives the request started last the one SGE `sge` (replacing any
    /// payload it had) if that request is a plain one (`Build::plain`), as
    /// nearly every request is: stored with no further check. Answers
    /// whether it was; if not, the caller gives it with
    /// [`SendQueue::build_sges`], which checks what the operation asks.
    /// (Two calls rather than one answering a `Result`: a refusal built in
    /// the same function costs every call a stack frame; callgrind.)
    ///
    /// # Safety
    /// As for [`SendQueue::post`].
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body's unsafe is its own
    pub unsafe fn build_sge_plain(&mut self, sge: &Sge) -> bool {
        let (Some(at), true) = (self.build.last, self.build.plain) else {
            return false;
        };
        // `plain` says the queue's slots hold an SGE past the header
        // (max_sge >= 1, which SendQueue::new checked elem_size against).
        // SAFETY: `at` is the last request's slot: ONE_SGE bytes (above),
        // 8-aligned, in the ring written through `&mut self`, unreferenced.
        let mut w: SlotMut<'_, ONE_SGE> = unsafe { SlotMut::new(at, 0) };
        // Constant offsets inside the view: nothing is checked at run time
        // and no store can be refused.
        let _ = w.sges(send::PAYLOAD, core::slice::from_ref(sge));
        let _ = w.u32(send::DMA_NUM_SGE, 1);
        let _ = w.u32(send::DMA_LENGTH, sge.length);
        let _ = w.u32(send::DMA_RESID, sge.length);
        let _ = w.u32(send::SEND_FLAGS, self.build.flags);
        true
    }

    /// Ends the batch: if nothing failed it and its last request is
    /// complete, publishes every request it started and answers how many
    /// (the caller rings the doorbell if any); if not, rolls the batch back
    /// and answers the first refusal with the index of its request.
    #[inline(always)]
    pub fn build_end(&mut self) -> Result<u32, (PostError, u32)> {
        if !self.build.open {
            return Ok(0);
        }
        if let Some(f) = self.build.failed {
            self.build_abort();
            return Err(f);
        }
        if let Err(e) = self.build_check_last() {
            let last = self.build_len() - 1;
            self.build_abort();
            return Err((e, last));
        }
        let n = self.build_len();
        if n != 0 {
            self.publish();
        }
        self.build.first = self.prod;
        self.build.open = false;
        // No piece may reach a published slot through it.
        self.build.last = None;
        Ok(n)
    }

    /// Takes back every request the batch started: the producer, the
    /// sequence number and the room are as before the batch, and the
    /// device sees none of it (nothing was published). With no batch open,
    /// or once a post has moved the producer past the batch (a batch left
    /// open, its builder leaked, then a post), it moves nothing: the
    /// batch's requests are the post's, published with it or by the next.
    /// Requests a leaked builder or list left unpublished before the batch
    /// began stay, for the next post to publish.
    #[inline(always)]
    pub fn build_abort(&mut self) {
        if !core::mem::take(&mut self.build.open) {
            return;
        }
        self.build.last = None;
        // The batch's own record, not the shared producer word (which the
        // kernel can write, and which lags a leaked list's requests).
        if self.prod != self.build.end {
            return;
        }
        let n = self.build_len();
        self.prod = self.build.first;
        self.ssn = self.ssn.wrapping_sub(n);
        self.room += n;
    }
}

#[cfg(test)]
#[allow(unsafe_code)] // the tests call the unsafe posts
mod tests {
    use super::*;
    use crate::queue::testing::FakeRing;
    use crate::queue::{DATA_OFFSET, PRODUCER_OFFSET};
    use crate::wqe::get_u64;
    use crate::wr::{Remote, Ud};
    use rverbs_types::QpType;

    const SIGNALED: u32 = 2;
    const ELEM: usize = 256;

    fn ring(qp_type: QpType) -> (FakeRing, SendQueue) {
        crate::tests::sq_ring_of(8, qp_type)
    }

    fn slot(r: &FakeRing, i: usize) -> Vec<u8> {
        r.bytes()[DATA_OFFSET + i * ELEM..DATA_OFFSET + (i + 1) * ELEM].to_vec()
    }

    const SGES: [Sge; 2] = crate::tests::TWO_SGES;

    /// A request built piece by piece leaves the bytes a post of the same
    /// request leaves, for SGEs, inline data and a UD destination; nothing
    /// is seen before the end.
    #[test]
    fn a_built_request_is_the_posted_one() {
        let remote = Remote {
            addr: 0xdead_0000,
            rkey: 0x55,
        };
        let ah = AhAddr::Number(3);
        let cases: [(QpType, SendWr<'_, Sge, AhAddr>); 3] = [
            (QpType::Rc, SendWr::new(11, SendOp::Write(remote), &SGES)),
            (
                QpType::Rc,
                SendWr::inline(12, SendOp::Send, b"hello, inline"),
            ),
            (
                QpType::Ud,
                SendWr {
                    ud: Some(Ud {
                        ah: &ah,
                        remote_qpn: 0x42,
                        remote_qkey: 0x1111,
                    }),
                    ..SendWr::new(13, SendOp::SendWithImm(9), &SGES[..1])
                },
            ),
        ];
        for (t, wr) in cases {
            let (posted, mut psq) = ring(t);
            // SAFETY: a fake ring; the SGEs name no memory anyone reads.
            unsafe { psq.post(&wr) }.unwrap();
            let (mut built, mut bsq) = ring(t);
            bsq.build_begin();
            bsq.build_start(wr.wr_id, wr.op, wr.send_flags()).unwrap();
            match wr.inline {
                Some(d) => bsq.build_inline([&d[..5], &d[5..]].into_iter()),
                // SAFETY: as above.
                None => unsafe { bsq.build_sges(wr.sges) },
            }
            .unwrap();
            if let Some(ud) = wr.ud {
                bsq.build_ud(ud.ah, ud.remote_qpn, ud.remote_qkey).unwrap();
            }
            assert_eq!(built.get_u32(PRODUCER_OFFSET), 0, "seen before the end");
            assert_eq!(bsq.build_end(), Ok(1));
            assert_eq!(built.get_u32(PRODUCER_OFFSET), 1);
            assert_eq!(slot(&built, 0), slot(&posted, 0), "{t:?} {:?}", wr.op);
            // The queues go on in step.
            // SAFETY: as above.
            unsafe { bsq.post(&wr) }.unwrap();
            assert_eq!(built.get_u32(PRODUCER_OFFSET), 2);
            let _ = &mut built;
        }
    }

    /// The plain paths store what the checked ones do, and take only what
    /// nothing could refuse: no request started, an atomic, a queue
    /// without SGEs, a connected QP's destination, a batch ended are left
    /// to the checked ones (answered `false`, nothing written).
    #[test]
    fn the_plain_paths_store_what_the_checked_ones_do() {
        let remote = Remote {
            addr: 0x40,
            rkey: 9,
        };
        let ah = AhAddr::Number(3);
        for (t, op) in [
            (QpType::Rc, SendOp::Write(remote)),
            (QpType::Ud, SendOp::SendWithImm(5)),
        ] {
            let (checked, mut csq) = ring(t);
            let (plain, mut psq) = ring(t);
            csq.build_begin();
            psq.build_begin();
            // SAFETY: a fake ring; the SGE names no memory anyone reads.
            assert!(!unsafe { psq.build_sge_plain(&SGES[0]) }, "no request yet");
            assert!(!psq.build_ud_plain(&ah, 1, 2), "no request yet");
            for sq in [&mut csq, &mut psq] {
                sq.build_start(4, op, SIGNALED).unwrap();
            }
            // SAFETY: as above.
            unsafe { csq.build_sges(&SGES[..1]) }.unwrap();
            // SAFETY: as above.
            assert!(unsafe { psq.build_sge_plain(&SGES[0]) });
            if t == QpType::Ud {
                csq.build_ud(&ah, 0x42, 0x1111).unwrap();
                assert!(psq.build_ud_plain(&ah, 0x42, 0x1111));
            } else {
                assert!(!psq.build_ud_plain(&ah, 0x42, 0x1111), "not UD");
            }
            assert_eq!(csq.build_end(), Ok(1));
            assert_eq!(psq.build_end(), Ok(1));
            assert_eq!(slot(&plain, 0), slot(&checked, 0), "{t:?}");
            // Ended: no piece reaches the published slot.
            // SAFETY: as above.
            assert!(!unsafe { psq.build_sge_plain(&SGES[1]) }, "ended");
            assert!(!psq.build_ud_plain(&ah, 7, 7), "ended");
            assert_eq!(slot(&plain, 0), slot(&checked, 0), "untouched");
        }
        // What has a rule of its own is left to the checked path.
        let (r, mut sq) = ring(QpType::Rc);
        sq.build_begin();
        let cas = SendOp::CompareSwap {
            remote: Remote {
                addr: 0x40,
                rkey: 9,
            },
            compare: 1,
            swap: 2,
        };
        sq.build_start(1, cas, SIGNALED).unwrap();
        let before = slot(&r, 0);
        // SAFETY: as above.
        assert!(!unsafe { sq.build_sge_plain(&SGES[0]) }, "an atomic");
        assert_eq!(slot(&r, 0), before, "nothing written");
        let mut r0 = FakeRing::new(8, 8);
        let mut sq0 = SendQueue::new(r0.queue(208), 0, 48, QpType::Rc).unwrap();
        sq0.build_begin();
        sq0.build_start(1, SendOp::Write(remote), SIGNALED).unwrap();
        // SAFETY: as above.
        assert!(!unsafe { sq0.build_sge_plain(&SGES[0]) }, "no SGE fits");
        let _ = &mut r0;
    }

    /// A post made while a batch is open (its builder leaked) takes the
    /// started request as its own and publishes it: the pieces after it
    /// answer that no request is started, and write nothing (found in
    /// review: the kept slot outlived the post).
    #[test]
    fn pieces_after_a_post_do_not_reach_the_published_slot() {
        let ah = AhAddr::Number(3);
        let (r, mut sq) = ring(QpType::Ud);
        sq.build_begin();
        sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
        let wr = SendWr {
            ud: Some(Ud {
                ah: &ah,
                remote_qpn: 0x42,
                remote_qkey: 0x1111,
            }),
            ..SendWr::new(2, SendOp::Send, &SGES[..1])
        };
        // SAFETY: a fake ring; the SGEs name no memory anyone reads.
        unsafe { sq.post(&wr) }.unwrap();
        assert_eq!(r.get_u32(PRODUCER_OFFSET), 2, "both published");
        let before = slot(&r, 0);
        // SAFETY: as above.
        let plain = unsafe { sq.build_sge_plain(&SGES[1]) };
        assert!(!plain, "a plain SGE stored after the post");
        assert_eq!(sq.build_ud(&ah, 7, 7), Err(PostError::NoRequest));
        assert!(!sq.build_ud_plain(&ah, 7, 7));
        assert_eq!(slot(&r, 0), before, "the published slot rewritten");
    }

    /// A batch whose last request lacks its UD destination fails at its
    /// end and is rolled back whole: the next post takes its first slot,
    /// with its sequence number.
    #[test]
    fn an_incomplete_batch_is_taken_back() {
        let (r, mut sq) = ring(QpType::Ud);
        let ah = AhAddr::Number(3);
        sq.build_begin();
        sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
        sq.build_ud(&ah, 5, 6).unwrap();
        sq.build_start(2, SendOp::Send, SIGNALED).unwrap();
        assert_eq!(sq.build_len(), 2);
        assert_eq!(
            sq.build_end(),
            Err((PostError::UdMismatch { qp_is_ud: true }, 1))
        );
        assert_eq!(r.get_u32(PRODUCER_OFFSET), 0, "nothing published");
        assert_eq!(sq.producer(), 0, "rolled back");
        sq.build_begin();
        assert_eq!(
            sq.build_start(3, SendOp::Write(Remote { addr: 0, rkey: 1 }), 0),
            Err(PostError::NotOnTransport {
                opcode: SendOp::Write(Remote { addr: 0, rkey: 1 }).opcode(),
                qp_type: QpType::Ud
            })
        );
        assert_eq!(
            sq.build_ud(&ah, 5, 6),
            Err(PostError::NoRequest),
            "no request started"
        );
        sq.build_abort();
        assert_eq!(sq.producer(), 0);
    }

    /// A batch never ended (its builder leaked) goes out with the queue's
    /// next post, as built so far; aborting or ending it after that moves
    /// nothing back over the posted requests.
    #[test]
    fn a_batch_never_ended_goes_out_with_the_next_post() {
        let wr: SendWr<'_, Sge, AhAddr> = SendWr::new(2, SendOp::Send, &SGES[..1]);
        // Taken back by an abort, and by an end (the batch's last request
        // lacked its UD address, but the post took it: the end finds none
        // of its own, and nothing to refuse).
        for (t, take_back) in [
            (QpType::Rc, SendQueue::build_abort as fn(&mut SendQueue)),
            (QpType::Ud, |sq: &mut SendQueue| {
                assert_eq!(sq.build_end(), Ok(0))
            }),
        ] {
            let (r, mut sq) = ring(t);
            sq.build_begin();
            sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
            // SAFETY: a fake ring.
            unsafe { sq.build_sges(&SGES[..1]) }.unwrap();
            // Never ended: the next post publishes it with its own.
            let ah = AhAddr::Number(3);
            let ud = Some(Ud {
                ah: &ah,
                remote_qpn: 1,
                remote_qkey: 1,
            });
            let wr = SendWr {
                ud: ud.filter(|_| t == QpType::Ud),
                ..wr
            };
            // SAFETY: as above.
            unsafe { sq.post(&wr) }.unwrap();
            assert_eq!(r.get_u32(PRODUCER_OFFSET), 2);
            assert_eq!(get_u64(&slot(&r, 0), send::WR_ID), 1);
            assert_eq!(get_u64(&slot(&r, 1), send::WR_ID), 2);
            take_back(&mut sq);
            assert_eq!(
                (sq.producer(), r.get_u32(PRODUCER_OFFSET)),
                (2, 2),
                "{t:?}: nothing moved back over the posted requests"
            );
            // Nor with no batch open.
            sq.build_abort();
            assert_eq!(sq.build_end(), Ok(0));
            assert_eq!(sq.producer(), 2, "{t:?}");
            // The queue goes on: the next post takes slot 2.
            // SAFETY: as above.
            unsafe { sq.post(&wr) }.unwrap();
            assert_eq!(r.get_u32(PRODUCER_OFFSET), 3, "{t:?}");
        }
    }

    /// A batch left unfinished (its builder, or a list, leaked) keeps its
    /// requests for the next post; a batch begun after it and aborted, or
    /// failed, is taken back to where it began, leftovers untouched.
    #[test]
    fn a_batch_after_a_leaked_one_is_still_taken_back() {
        for leak_a_list in [false, true] {
            let (r, mut sq) = ring(QpType::Rc);
            let wr: SendWr<'_, Sge, AhAddr> = SendWr::new(1, SendOp::Send, &SGES[..1]);
            if leak_a_list {
                // SAFETY: a fake ring. Not published, as a leaked list's.
                unsafe { sq.post_unpublished(&wr) }.unwrap();
            } else {
                sq.build_begin();
                sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
            }
            assert_eq!((sq.producer(), r.get_u32(PRODUCER_OFFSET)), (1, 0));
            sq.build_begin();
            sq.build_start(2, SendOp::Send, SIGNALED).unwrap();
            sq.build_start(3, SendOp::Send, SIGNALED).unwrap();
            sq.build_abort();
            assert_eq!(sq.producer(), 1, "leak_a_list {leak_a_list}: taken back");
            sq.build_begin();
            let fa = SendOp::FetchAdd {
                remote: Remote { addr: 0, rkey: 1 },
                add: 1,
            };
            sq.build_start(4, fa, SIGNALED).unwrap();
            assert_eq!(sq.build_end(), Err((PostError::BadAtomic, 0)));
            assert_eq!(
                sq.producer(),
                1,
                "leak_a_list {leak_a_list}: failed, taken back"
            );
            // The leftover goes out with the next post, in slot 0.
            // SAFETY: as above.
            unsafe { sq.post(&SendWr { wr_id: 5, ..wr }) }.unwrap();
            assert_eq!(r.get_u32(PRODUCER_OFFSET), 2);
            assert_eq!(get_u64(&slot(&r, 0), send::WR_ID), 1);
            assert_eq!(get_u64(&slot(&r, 1), send::WR_ID), 5);
        }
    }

    /// The inline length written is that of the bytes copied, from one pass
    /// over the parts: an iterator whose clone yields other parts cannot
    /// make the request claim bytes it does not carry.
    #[test]
    fn inline_parts_are_read_once() {
        /// Yields `b"hi"`; a clone yields 40 bytes.
        #[derive(Default)]
        struct TwoFaced(bool, bool);
        impl Clone for TwoFaced {
            fn clone(&self) -> Self {
                TwoFaced(true, false)
            }
        }
        impl Iterator for TwoFaced {
            type Item = &'static [u8];
            fn next(&mut self) -> Option<&'static [u8]> {
                if core::mem::replace(&mut self.1, true) {
                    return None;
                }
                Some(if self.0 { &[7; 40] } else { b"hi" })
            }
        }
        let (r, mut sq) = ring(QpType::Rc);
        sq.build_begin();
        sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
        sq.build_inline(TwoFaced::default()).unwrap();
        assert_eq!(sq.build_end(), Ok(1));
        let s = slot(&r, 0);
        let u32_at = |o: usize| u32::from_ne_bytes(s[o..o + 4].try_into().unwrap());
        assert_eq!((u32_at(send::DMA_LENGTH), u32_at(send::DMA_RESID)), (2, 2));
        assert_eq!(&s[send::PAYLOAD..send::PAYLOAD + 2], b"hi");
        // Too long: refused, the whole length named.
        let (_r, mut sq) = ring(QpType::Rc);
        sq.build_begin();
        sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
        let parts = [&[0u8; 30][..], &[0u8; 30][..], &[0u8; 5][..]];
        assert_eq!(
            sq.build_inline(parts.into_iter()),
            Err(PostError::InlineTooLong { given: 65, max: 48 })
        );
    }

    /// A post between a batch's pieces ends what the batch had: a piece
    /// given after it finds no request (the slot before the producer is
    /// the post's, published, and stays as the post wrote it), and an abort
    /// takes back only what was started after it.
    #[test]
    fn a_post_ends_what_a_batch_had() {
        let ah = AhAddr::Number(3);
        for t in [QpType::Rc, QpType::Ud] {
            let (r, mut sq) = ring(t);
            let wr = SendWr {
                ud: (t == QpType::Ud).then_some(Ud {
                    ah: &ah,
                    remote_qpn: 0x42,
                    remote_qkey: 0x1111,
                }),
                ..SendWr::new(1, SendOp::Send, &SGES[..1])
            };
            // With no batch, and inside one.
            for begin in [false, true] {
                if begin {
                    sq.build_begin();
                }
                // SAFETY: a fake ring; the SGEs name no memory anyone reads.
                unsafe { sq.post(&wr) }.unwrap();
                let at = (sq.producer() as usize + 7) % 8;
                let before = slot(&r, at);
                assert_eq!(
                    sq.build_inline([&b"xyz"[..]].into_iter()),
                    Err(PostError::NoRequest)
                );
                // SAFETY: as above.
                let sges = unsafe { sq.build_sges(&SGES[..1]) };
                assert_eq!(sges, Err(PostError::NoRequest));
                assert_eq!(sq.build_ud(&ah, 7, 7), Err(PostError::NoRequest));
                assert_eq!(slot(&r, at), before, "{t:?}: the posted WQE untouched");
            }
            // The batch begun before the last post: an abort after a start
            // takes back the started request only.
            let posted = sq.producer();
            sq.build_start(9, SendOp::Send, SIGNALED).unwrap();
            sq.build_abort();
            assert_eq!(sq.producer(), posted, "{t:?}");
            assert_eq!(r.get_u32(PRODUCER_OFFSET), posted, "{t:?}: published");
        }
    }

    /// Ending or aborting twice moves nothing the second time: a batch
    /// ended is the device's, and an abort after it takes nothing back.
    #[test]
    fn a_second_end_or_abort_moves_nothing() {
        let (r, mut sq) = ring(QpType::Rc);
        sq.build_begin();
        sq.build_start(1, SendOp::Send, SIGNALED).unwrap();
        assert_eq!(sq.build_end(), Ok(1));
        sq.build_abort();
        assert_eq!(sq.build_end(), Ok(0));
        assert_eq!((sq.producer(), r.get_u32(PRODUCER_OFFSET)), (1, 1));
        // An aborted batch, aborted again, gives back its room once.
        sq.build_begin();
        sq.build_start(2, SendOp::Send, SIGNALED).unwrap();
        sq.build_abort();
        sq.build_abort();
        assert_eq!(sq.build_end(), Ok(0));
        assert_eq!((sq.producer(), r.get_u32(PRODUCER_OFFSET)), (1, 1));
        // Room for six more (eight slots hold seven, one taken), and no
        // more: the aborted request gave its slot back once.
        sq.build_begin();
        for i in 0..6 {
            sq.build_start(10 + i, SendOp::Send, 0).unwrap();
        }
        assert_eq!(
            sq.build_start(20, SendOp::Send, 0),
            Err(PostError::QueueFull)
        );
    }

    /// An empty SGE list given to an operation that carries its own length
    /// (FLUSH's range, ATOMIC WRITE's 8 bytes) leaves that length; a
    /// non-empty one is refused.
    #[test]
    fn an_empty_sge_list_keeps_an_operations_own_length() {
        let remote = Remote {
            addr: 0x100,
            rkey: 1,
        };
        for (op, own) in [
            (
                SendOp::Flush {
                    remote,
                    len: 4096,
                    placement: rverbs_types::FlushType::Global,
                    level: rverbs_types::FlushLevel::Range,
                },
                4096,
            ),
            (
                SendOp::AtomicWrite {
                    remote,
                    value: [7; 8],
                },
                8,
            ),
        ] {
            let (_r, mut sq) = ring(QpType::Rc);
            sq.build_begin();
            sq.build_start(1, op, SIGNALED).unwrap();
            // SAFETY: a fake ring.
            unsafe { sq.build_sges(&[]) }.unwrap();
            assert_eq!(
                // SAFETY: as above.
                unsafe { sq.build_sges(&SGES[..1]) },
                Err(PostError::NoPayload {
                    opcode: op.opcode()
                })
            );
            let s = sq.q.queue().slot(0);
            let mut b = [0u8; ELEM];
            // SAFETY: slot 0 of the fake ring, ELEM bytes, alive in `_r`.
            unsafe { core::ptr::copy_nonoverlapping(s, b.as_mut_ptr(), ELEM) };
            let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
            assert_eq!(
                (u32_at(send::DMA_LENGTH), u32_at(send::DMA_RESID)),
                (own, own),
                "{op:?}"
            );
        }
    }

    /// `IB_SEND_INLINE` in `start`'s flags is not taken: only an inline
    /// payload sets it, so a request started with it and given SGEs is an
    /// SGE request.
    #[test]
    fn start_takes_no_inline_flag() {
        let (r, mut sq) = ring(QpType::Rc);
        sq.build_begin();
        sq.build_start(1, SendOp::Send, SIGNALED | INLINE).unwrap();
        // SAFETY: a fake ring.
        unsafe { sq.build_sges(&SGES[..1]) }.unwrap();
        assert_eq!(sq.build_end(), Ok(1));
        let flags = u32::from_ne_bytes(
            slot(&r, 0)[send::SEND_FLAGS..send::SEND_FLAGS + 4]
                .try_into()
                .unwrap(),
        );
        assert_eq!(flags, SIGNALED, "the inline flag masked off");
    }

    /// Each piece is checked as a post checks the whole request.
    #[test]
    fn pieces_are_checked() {
        let (_r, mut sq) = ring(QpType::Rc);
        let remote = Remote {
            addr: 0x100,
            rkey: 1,
        };
        sq.build_begin();
        sq.build_start(1, SendOp::Read(remote), SIGNALED).unwrap();
        assert_eq!(
            sq.build_inline([&b"x"[..]].into_iter()),
            Err(PostError::InlineNotAllowed {
                opcode: SendOp::Read(remote).opcode()
            })
        );
        let four = [SGES[0]; 4];
        // SAFETY: a fake ring.
        let e = unsafe { sq.build_sges(&four) };
        assert_eq!(e, Err(PostError::TooManySges { given: 4, max: 3 }));
        sq.build_start(2, SendOp::Send, SIGNALED).unwrap();
        let long = [0u8; 49];
        assert_eq!(
            sq.build_inline([&long[..]].into_iter()),
            Err(PostError::InlineTooLong { given: 49, max: 48 })
        );
        let fa = SendOp::FetchAdd { remote, add: 1 };
        sq.build_start(3, fa, SIGNALED).unwrap();
        // SAFETY: a fake ring.
        let e = unsafe { sq.build_sges(&SGES[..0]) };
        assert_eq!(e, Err(PostError::BadAtomic), "no 8-byte buffer");
        assert_eq!(
            sq.build_start(4, SendOp::Send, SIGNALED),
            Err(PostError::BadAtomic),
            "the atomic before has no 8-byte buffer"
        );
        // SAFETY: a fake ring.
        unsafe { sq.build_sges(&SGES[..1]) }.unwrap();
        assert_eq!(sq.build_end(), Ok(3));
        assert_eq!(sq.producer(), 3);
    }
}

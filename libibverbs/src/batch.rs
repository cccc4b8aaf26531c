//! The batch of `ibv_wr_*` requests a QP gathers between `wr_start` and
//! `wr_complete` ([`Batch`], in the QP's `ibv_qp_ex` tail: `qp_ex.rs`),
//! and its post: mlx5's QPs (`wr.rs`'s `Gather`; rxe's write each piece
//! into the send queue as it comes, `wr.rs`'s `InRing`).
//!
//! `wr_start` opens a batch, each `wr_<op>` adds a request with the QP's
//! `wr_id`/`wr_flags` at that moment, `wr_set_*` give the last one its
//! payload, and `wr_complete` posts the batch through rverbs'
//! `Qp::post_send_all` (the provider's own ring code, all or nothing) or
//! reports the first error; `wr_abort` drops it. Memory named by SGEs must
//! stay valid until completion, as with `ibv_post_send`; inline data is
//! copied when set, as the API allows the caller to reuse it at once.
//!
//! No call between `wr_start` and `wr_complete` allocates: the batch's
//! storage (requests, SGEs, inline bytes, the translated requests) is
//! sized once, at `ibv_create_qp_ex`, from the caps the QP was granted, and
//! reused by every batch. A batch that outgrows it (more requests than the
//! send queue holds, more SGEs or inline bytes than a request may carry)
//! fails at `wr_complete` and posts nothing, with the provider's errno for
//! it in rdma-core: `ENOSPC` from rxe's, `ENOMEM` from mlx5's.
//!
//! A batch that fits the storage but not the room left in the send queue
//! (sends still outstanding), or holds an invalid request, posts nothing
//! either, as rdma-core's providers roll the batch back:
//! `Qp::post_send_all` checks every request and the room before it writes
//! the first.

use crate::abi::{IbvDataBuf, IbvSge};
use crate::convert::with_flags;
use crate::spin::Spin;
use crate::{errno_of, lock};
use rverbs::{Ah, Qp, QpState, SendOp, SendWr, Slice};
use std::ffi::c_int;

/// One request of a batch, until `wr_complete`.
struct Req {
    wr_id: u64,
    flags: u32,
    op: SendOp,
    /// Its SGEs: `Batch::sges[start..start + len]`.
    sges: (usize, usize),
    /// Its inline payload, if any: `Batch::bytes[start..start + len]`.
    inline: Option<(usize, usize)>,
    /// `wr_set_ud_addr`: the AH (a clone of the C `ibv_ah *`'s: C may
    /// destroy its AH before `wr_complete`, as rdma-core's mlx5 copies the
    /// address at the call), remote QPN and Q_Key.
    ud: Option<(Ah, u32, u32)>,
}

/// The requests between `wr_start` and `wr_complete`, and the first
/// error a call made (reported by `wr_complete`, as providers do). Every
/// vector is allocated once with its final capacity ([`Batch::sized`])
/// and only cleared after: nothing here reallocates.
#[derive(Default)]
pub(crate) struct Batch {
    reqs: Vec<Req>,
    sges: Vec<Slice<'static>>,
    bytes: Vec<u8>,
    /// The translated requests, filled and emptied inside `wr_complete`.
    /// Their borrows (of `sges` and `bytes`) are erased to `'static`; see
    /// `wr_complete` for why that holds.
    wrs: Vec<SendWr<'static>>,
    /// Largest SGE count and inline payload of one request.
    max_sge: usize,
    max_inline: usize,
    /// What the provider answers for a batch it has no room for.
    full: c_int,
    error: Option<c_int>,
    /// Between `wr_start` and `wr_complete`/`wr_abort`: the session lock
    /// (`QpEx::gather_start`) is held.
    pub(crate) open: bool,
}

impl Batch {
    /// Storage for batches of up to `wrs` requests, each of up to `sge`
    /// SGEs or `inline` bytes (the QP's granted caps); a batch beyond them
    /// fails with `full`.
    pub(crate) fn sized(wrs: usize, sge: usize, inline: usize, full: c_int) -> Batch {
        let sge = sge.clamp(1, rverbs::MAX_SGE);
        Batch {
            reqs: Vec::with_capacity(wrs),
            sges: Vec::with_capacity(wrs * sge),
            bytes: Vec::with_capacity(wrs * inline),
            wrs: Vec::with_capacity(wrs),
            max_sge: sge,
            max_inline: inline,
            full,
            error: None,
            open: false,
        }
    }

    /// Empties the batch, keeping its storage.
    pub(crate) fn reset(&mut self) {
        // The translated requests first: they view the others.
        self.wrs.clear();
        self.reqs.clear();
        self.sges.clear();
        self.bytes.clear();
        self.error = None;
    }

    /// Fills `wrs` with the requests in rverbs' form (no allocation: `wrs`
    /// has the capacity of `reqs`).
    fn translate(&mut self) {
        self.wrs.clear();
        for r in &self.reqs {
            // SAFETY: `r` is a request of this batch.
            let w = unsafe { self.wr(r) };
            self.wrs.push(w);
        }
    }

    /// The request `r` in rverbs' form.
    ///
    /// Lifetime erasure: the result views `sges`, `bytes` and the AH in
    /// `r`; it lives in
    /// `wrs` (emptied by `reset`, under the same lock, before either
    /// vector changes again) or, in [`Batch::post`], only until the post
    /// returns.
    ///
    /// # Safety
    /// `r` is one of `reqs` (its ranges were bounds-checked when set).
    #[inline(always)]
    unsafe fn wr(&self, r: &Req) -> SendWr<'static> {
        // SAFETY: the caller's contract.
        unsafe { self.wr_of(r, r.op) }
    }

    /// [`Batch::wr`] with the operation `op` (the request's own, passed
    /// apart so that a caller that matched it passes a constant).
    ///
    /// # Safety
    /// As [`Batch::wr`].
    #[inline(always)]
    unsafe fn wr_of(&self, r: &Req, op: SendOp) -> SendWr<'static> {
        let (start, len) = r.inline.unwrap_or(r.sges);
        // SAFETY: neither vector ever reallocates (pushes stop at
        // capacity) and the ranges were bounds-checked when set.
        let w: SendWr<'static> = unsafe {
            match r.inline {
                Some(_) => SendWr::inline(
                    r.wr_id,
                    op,
                    std::slice::from_raw_parts(self.bytes.as_ptr().add(start), len),
                ),
                None => SendWr::new(
                    r.wr_id,
                    op,
                    std::slice::from_raw_parts(self.sges.as_ptr().add(start), len),
                ),
            }
        };
        let w = match &r.ud {
            Some((ah, qpn, qkey)) => {
                // SAFETY: the AH lives in `reqs`, which neither reallocates
                // nor changes while the result lives (the erasure above).
                let ah: &'static Ah = unsafe { &*std::ptr::from_ref(ah) };
                w.to(ah, *qpn, *qkey)
            }
            None => w,
        };
        with_flags(w, r.flags)
    }

    /// Posts the request `r` of this batch, whose operation is `op`, on
    /// `qp`: 0 or its errno.
    ///
    /// # Safety
    /// As [`Batch::wr`].
    #[inline(always)]
    unsafe fn post_as(&self, r: &Req, op: SendOp, qp: &mut Qp) -> c_int {
        // SAFETY: the caller's contract.
        let w = unsafe { self.wr_of(r, op) };
        // Matched in place: a Result handed on by value is copied whole
        // (an Error is large; callgrind: ~25 instructions a post).
        match &qp.post_send_one(&w) {
            Ok(()) => 0,
            Err(e) => refused(self.full, e),
        }
    }

    /// The ids of the requests gathered so far, in order.
    #[cfg(test)]
    pub(crate) fn reqs_ids(&self) -> Vec<u64> {
        self.reqs.iter().map(|r| r.wr_id).collect()
    }

    /// Records the first error of the batch.
    pub(crate) fn fail(&mut self, e: c_int) {
        self.error.get_or_insert(e);
    }

    /// Adds a request of `op` with the program's `wr_id` and `wr_flags`, or
    /// fails the batch if the storage is full.
    pub(crate) fn add(&mut self, wr_id: u64, flags: u32, op: SendOp) {
        self.push(Req {
            wr_id,
            flags,
            op,
            sges: (0, 0),
            inline: None,
            ud: None,
        });
    }

    /// Adds a request, or fails the batch if the storage is full.
    fn push(&mut self, r: Req) {
        if self.reqs.len() == self.reqs.capacity() {
            return self.fail(self.full);
        }
        self.reqs.push(r);
    }

    /// Gives the last request the SGEs `list` (replacing any payload).
    pub(crate) fn set_sges(
        &mut self,
        list: impl ExactSizeIterator<Item = IbvSge>,
    ) -> Result<(), c_int> {
        let n = list.len();
        if self.reqs.is_empty() {
            return Err(libc::EINVAL);
        }
        if n > self.max_sge || self.sges.len() + n > self.sges.capacity() {
            return Err(self.full);
        }
        let start = self.sges.len();
        for s in list {
            // SAFETY: the C caller vouches that each lkey's MR covers its
            // range until the request completes (ibv_wr_*'s contract).
            let sge = unsafe { Slice::from_raw_parts(s.addr, s.length, s.lkey) };
            self.sges.push(sge);
        }
        if let Some(r) = self.reqs.last_mut() {
            r.sges = (start, n);
            r.inline = None;
        }
        Ok(())
    }

    /// Gives the last request the inline payload gathered from `bufs`
    /// (copied now: the caller may reuse them on return).
    ///
    /// # Safety
    /// Each buffer is readable for its length (C contract).
    pub(crate) unsafe fn set_inline(&mut self, bufs: &[IbvDataBuf]) -> Result<(), c_int> {
        if self.reqs.is_empty() {
            return Err(libc::EINVAL);
        }
        let mut total = 0usize;
        for b in bufs {
            if b.length > 0 && b.addr.is_null() {
                return Err(libc::EINVAL);
            }
            total = total.saturating_add(b.length);
        }
        if total > self.max_inline || self.bytes.len() + total > self.bytes.capacity() {
            return Err(self.full);
        }
        let start = self.bytes.len();
        for b in bufs.iter().filter(|b| b.length > 0) {
            // SAFETY: readable for length bytes (caller's contract,
            // non-NULL checked above).
            self.bytes.extend_from_slice(unsafe {
                std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length)
            });
        }
        if let Some(r) = self.reqs.last_mut() {
            r.inline = Some((start, total));
            r.sges = (0, 0);
        }
        Ok(())
    }

    /// Gives the last request the address of a UD send: `ah`'s, to
    /// `remote_qpn` with `remote_qkey`.
    pub(crate) fn set_ud(&mut self, ah: &Ah, qpn: u32, qkey: u32) -> Result<(), c_int> {
        let r = self.reqs.last_mut().ok_or(libc::EINVAL)?;
        // A clone (a reference count, no allocation): the request keeps
        // the AH to its post, whatever C destroys meanwhile.
        r.ud = Some((ah.clone(), qpn, qkey));
        Ok(())
    }

    /// Posts the batch on `qp`, all or nothing: 0, or the errno of the
    /// first failed call (nothing is posted then) or of the post.
    pub(crate) fn post(&mut self, qp: &Spin<Qp>) -> c_int {
        if let Some(e) = self.error {
            return e;
        }
        if self.reqs.is_empty() {
            return 0;
        }
        // Matched in place: a Result handed on by value is copied whole
        // (an Error is large; callgrind: ~25 instructions a post).
        let answer = |full: c_int, r: &rverbs::Result<()>| match r {
            Ok(()) => 0,
            Err(e) => refused(full, e),
        };
        if let [r] = &self.reqs[..] {
            // The common batch, one request: all or nothing is what a post
            // of one is, so it goes through the inlined one-request post,
            // built where it is read (callgrind: see the commit).
            let mut qp = lock(qp);
            // No check of the QP's state here: rverbs refuses a post before
            // RTS before anything reaches the ring, EINVAL (`refused`).
            // A WRITE and a SEND each through their own copy of the
            // post, in which the operation's kind is a constant: no jump
            // table on it in the provider (as `send.rs`'s `by_opcode`;
            // callgrind, a WRITE through the builders: 365 -> 328
            // instructions, with the doorbell).
            // SAFETY: r is a request of this batch (each arm).
            return unsafe {
                match r.op {
                    SendOp::Write(x) => self.post_as(r, SendOp::Write(x), &mut qp),
                    SendOp::Send => self.post_as(r, SendOp::Send, &mut qp),
                    op => self.post_as(r, op, &mut qp),
                }
            };
        }
        if not_ready(&lock(qp)) {
            return libc::EINVAL;
        }
        self.translate();
        // All or nothing, as rdma-core's providers roll a batch back: a batch
        // with an invalid request, or longer than the room left, posts none.
        let rc = answer(self.full, &lock(qp).post_send_all(&self.wrs));
        self.wrs.clear();
        rc
    }
}

/// The errno of a refused batch: `full` for a send queue without room.
#[cold]
pub(crate) fn refused(full: c_int, e: &rverbs::Error) -> c_int {
    match e {
        rverbs::Error::QueueFull { .. } => full,
        e => errno_of(e),
    }
}

/// What rxe answers for a QP before RTS (its POST_SEND doorbell refuses
/// it), as `ibv_post_send` does here: EINVAL, nothing posted.
#[inline(always)]
fn not_ready(qp: &Qp) -> bool {
    matches!(
        qp.last_state(),
        QpState::Reset | QpState::Init | QpState::Rtr
    )
}

/// What the tests of the `ibv_qp_ex` tail read of a batch.
#[cfg(test)]
impl Batch {
    pub(crate) fn error(&self) -> Option<c_int> {
        self.error
    }

    /// Each request's `wr_id` and flags.
    pub(crate) fn requests(&self) -> Vec<(u64, u32)> {
        self.reqs.iter().map(|r| (r.wr_id, r.flags)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    fn req(wr_id: u64) -> Req {
        Req {
            wr_id,
            flags: crate::abi::send_flags::SIGNALED,
            op: SendOp::Send,
            sges: (0, 0),
            inline: None,
            ud: None,
        }
    }

    /// Many batches of requests with SGE lists and inline payloads, built
    /// and translated as `wr_*` and `wr_complete` do, allocate nothing
    /// once the storage is sized.
    #[test]
    fn batches_allocate_nothing_after_create() {
        let data = [5u8; 64];
        let sge = |i: u64| IbvSge {
            addr: data.as_ptr() as u64 + i,
            length: 8,
            lkey: 0x1234,
        };
        let mut b = Batch::sized(16, 4, 64, libc::ENOSPC);
        let before = crate::testing::allocs();
        for round in 0..100u64 {
            b.reset();
            for i in 0..16 {
                b.push(req(round * 16 + i));
                let r = if i % 2 == 0 {
                    b.set_sges((0..(i as u32 % 4) + 1).map(|k| sge(u64::from(k))))
                } else {
                    let buf = [IbvDataBuf {
                        addr: data.as_ptr() as *mut c_void,
                        length: (i as usize) * 4,
                    }];
                    // SAFETY: `data` is readable for its 64 bytes.
                    unsafe { b.set_inline(&buf) }
                };
                assert_eq!(r, Ok(()));
            }
            assert_eq!(b.error, None);
            b.translate();
            assert_eq!(b.wrs.len(), 16);
            b.wrs.clear();
        }
        assert_eq!(crate::testing::allocs() - before, 0, "a batch allocated");
    }

    /// A batch that outgrows its storage fails with the provider's errno
    /// for a full queue (nothing is posted then), as an overfilled send
    /// queue does in rdma-core: `ENOSPC` from rxe's provider.
    #[test]
    fn a_batch_beyond_the_caps_fails_with_the_providers_errno() {
        let data = [0u8; 128];
        let mut b = Batch::sized(2, 1, 16, libc::ENOSPC);
        b.push(req(1));
        assert_eq!(
            b.set_sges((0..2).map(|_| IbvSge {
                addr: 0,
                length: 0,
                lkey: 0
            })),
            Err(libc::ENOSPC),
            "more SGEs than max_send_sge"
        );
        let long = [IbvDataBuf {
            addr: data.as_ptr() as *mut c_void,
            length: 17,
        }];
        // SAFETY: `data` is readable for its 128 bytes.
        assert_eq!(unsafe { b.set_inline(&long) }, Err(libc::ENOSPC));
        b.push(req(2));
        assert_eq!(b.error, None);
        b.push(req(3));
        assert_eq!(
            b.error,
            Some(libc::ENOSPC),
            "more requests than max_send_wr"
        );
        b.reset();
        assert_eq!((b.error, b.reqs.len(), b.reqs.capacity()), (None, 0, 2));
    }
}

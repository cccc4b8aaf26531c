//! Extended QPs: `ibv_create_qp_ex` (the `verbs_context.create_qp_ex`
//! slot `verbs.h`'s inline calls), `ibv_qp_to_qp_ex`, and the `ibv_wr_*`
//! work request API (`struct ibv_qp_ex`'s function pointers, which the
//! inlines call directly).
//!
//! Every QP box carries the tail of a `struct ibv_qp_ex` right after its
//! `struct ibv_qp` ([`QpEx`], the box's second field), so the QP's C
//! pointer is also its `ibv_qp_ex` pointer, as in libibverbs' `verbs_qp`.
//! It is handed out (by `ibv_qp_to_qp_ex`) only for QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`, as libibverbs does.
//!
//! `wr_start` opens a batch, each `wr_<op>` adds a request with the QP's
//! `wr_id`/`wr_flags` at that moment, `wr_set_*` give the last one its
//! payload, and `wr_complete` posts the batch through rverbs'
//! `Qp::post_send_all` (the provider's own ring code, all or nothing) or
//! reports the first error; `wr_abort` drops it. Memory named by SGEs must stay valid until
//! completion, as with `ibv_post_send`; inline data is copied when set,
//! as the API allows the caller to reuse it at once.
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

use crate::abi::{
    init_mask, send_ops as ops, IbvContext, IbvDataBuf, IbvQp, IbvQpCap, IbvQpExC, IbvQpExOps,
    IbvQpExTail, IbvQpInitAttr, IbvQpInitAttrEx, IbvSge, Slot,
};
use crate::guard;
use crate::verbs::{new_qp, qp_of};
use crate::{errno_of, export, member, null_errno};
use rverbs::{QpState, Remote, SendOp, SendWr, Slice};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

/// One request of a batch, until `wr_complete`.
#[derive(Clone, Copy)]
struct Req {
    wr_id: u64,
    flags: u32,
    op: SendOp,
    /// Its SGEs: `Batch::sges[start..start + len]`.
    sges: (usize, usize),
    /// Its inline payload, if any: `Batch::bytes[start..start + len]`.
    inline: Option<(usize, usize)>,
    /// `wr_set_ud_addr`: the AH (a C `ibv_ah *` of ours, which the C
    /// caller keeps alive until the request completes, as with
    /// `ibv_post_send`'s `wr.ud.ah`), remote QPN and Q_Key.
    ud: Option<(*const crate::ah::AhBox, u32, u32)>,
}

/// The requests between `wr_start` and `wr_complete`, and the first
/// error a call made (reported by `wr_complete`, as providers do). Every
/// vector is allocated once with its final capacity ([`Batch::sized`])
/// and only cleared after: nothing here reallocates.
#[derive(Default)]
struct Batch {
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
}

impl Batch {
    /// Storage for batches of up to `wrs` requests, each of up to `sge`
    /// SGEs or `inline` bytes (the QP's granted caps); a batch beyond them
    /// fails with `full`.
    fn sized(wrs: usize, sge: usize, inline: usize, full: c_int) -> Batch {
        let sge = sge.clamp(1, rverbs::wr::MAX_SGE);
        Batch {
            reqs: Vec::with_capacity(wrs),
            sges: Vec::with_capacity(wrs * sge),
            bytes: Vec::with_capacity(wrs * inline),
            wrs: Vec::with_capacity(wrs),
            max_sge: sge,
            max_inline: inline,
            full,
            error: None,
        }
    }

    /// Empties the batch, keeping its storage.
    fn reset(&mut self) {
        self.reqs.clear();
        self.sges.clear();
        self.bytes.clear();
        self.wrs.clear();
        self.error = None;
    }

    /// Fills `wrs` with the requests in rverbs' form (no allocation: `wrs`
    /// has the capacity of `reqs`).
    fn translate(&mut self) {
        use crate::abi::send_flags::*;
        self.wrs.clear();
        for r in &self.reqs {
            let (start, len) = r.inline.unwrap_or(r.sges);
            // Lifetime erasure: these views of `sges` and `bytes` live in
            // `wrs`, which is emptied (by `reset`, under the same lock)
            // before either vector changes again.
            // SAFETY: neither vector ever reallocates (pushes stop at
            // capacity) and the ranges were bounds-checked when set.
            let mut w: SendWr<'static> = unsafe {
                match r.inline {
                    Some(_) => SendWr::inline(
                        r.wr_id,
                        r.op,
                        std::slice::from_raw_parts(self.bytes.as_ptr().add(start), len),
                    ),
                    None => SendWr::new(
                        r.wr_id,
                        r.op,
                        std::slice::from_raw_parts(self.sges.as_ptr().add(start), len),
                    ),
                }
            };
            if let Some((ah, qpn, qkey)) = r.ud {
                // SAFETY: an AH of ours that the C caller keeps alive until
                // the request completes (wr_set_ud_addr's contract).
                w = w.to(unsafe { &(*ah).ah }, qpn, qkey);
            }
            self.wrs.push(
                w.signaled(r.flags & SIGNALED != 0)
                    .solicited(r.flags & SOLICITED != 0)
                    .fence(r.flags & FENCE != 0),
            );
        }
    }

    /// Records the first error of the batch.
    fn fail(&mut self, e: c_int) {
        self.error.get_or_insert(e);
    }

    /// Adds a request, or fails the batch if the storage is full.
    fn push(&mut self, r: Req) {
        if self.reqs.len() == self.reqs.capacity() {
            return self.fail(self.full);
        }
        self.reqs.push(r);
    }

    /// Gives the last request the SGEs `list` (replacing any payload).
    fn set_sges(&mut self, list: impl ExactSizeIterator<Item = IbvSge>) -> Result<(), c_int> {
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
    unsafe fn set_inline(&mut self, bufs: &[IbvDataBuf]) -> Result<(), c_int> {
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
}

/// What a QP box carries for the `ibv_qp_ex` view (the box's second
/// field, right after its `struct ibv_qp`).
#[repr(C)]
pub(crate) struct QpEx {
    /// In an UnsafeCell: the program writes `wr_id` and `wr_flags` through
    /// its pointer while other threads may hold shared references to the
    /// box (any verb on the same QP).
    c: UnsafeCell<IbvQpExTail>,
    /// Set at creation, before the pointer is handed out.
    enabled: bool,
    send_ops: u64,
    batch: Mutex<Batch>,
}

impl QpEx {
    /// A QP's tail, not (yet) an extended QP: every slot set, so a stray
    /// call through one fails the batch instead of jumping to NULL.
    pub(crate) fn new() -> QpEx {
        QpEx {
            c: UnsafeCell::new(IbvQpExTail {
                comp_mask: 0,
                wr_id: 0,
                wr_flags: 0,
                ops: IbvQpExOps {
                    wr_atomic_cmp_swp: wr_atomic_cmp_swp as Slot,
                    wr_atomic_fetch_add: wr_atomic_fetch_add as Slot,
                    wr_bind_mw: wr_bind_mw as Slot,
                    wr_local_inv: wr_local_inv as Slot,
                    wr_rdma_read: wr_rdma_read as Slot,
                    wr_rdma_write: wr_rdma_write as Slot,
                    wr_rdma_write_imm: wr_rdma_write_imm as Slot,
                    wr_send: wr_send as Slot,
                    wr_send_imm: wr_send_imm as Slot,
                    wr_send_inv: wr_send_inv as Slot,
                    wr_send_tso: unsupported as Slot,
                    wr_set_ud_addr: wr_set_ud_addr as Slot,
                    wr_set_xrc_srqn: unsupported as Slot,
                    wr_set_inline_data: wr_set_inline_data as Slot,
                    wr_set_inline_data_list: wr_set_inline_data_list as Slot,
                    wr_set_sge: wr_set_sge as Slot,
                    wr_set_sge_list: wr_set_sge_list as Slot,
                    wr_start: wr_start as Slot,
                    wr_complete: wr_complete as Slot,
                    wr_abort: wr_abort as Slot,
                    wr_atomic_write: wr_atomic_write as Slot,
                },
            }),
            enabled: false,
            send_ops: 0,
            batch: Mutex::new(Batch::default()),
        }
    }

    /// The tail of a QP created for `send_ops` (`ibv_create_qp_ex` with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`): its batch storage, once, from
    /// the caps granted.
    /// A full batch fails with `full` (the provider's errno for it).
    pub(crate) fn extended(send_ops: u64, cap: &IbvQpCap, full: c_int) -> QpEx {
        QpEx {
            enabled: true,
            send_ops,
            batch: Mutex::new(Batch::sized(
                cap.max_send_wr as usize,
                cap.max_send_sge as usize,
                cap.max_inline_data as usize,
                full,
            )),
            ..QpEx::new()
        }
    }

    /// Adds a request of `op` (if the QP was created for it) with the
    /// program's current `wr_id` and `wr_flags`.
    fn add(&self, needs: u64, op: SendOp) {
        let t = self.c.get();
        // SAFETY: `t` is this live struct's tail, in its UnsafeCell: the
        // program writes these plain integers through its own pointer
        // between calls, so they are read through the cell, never a
        // reference.
        let (wr_id, flags) = unsafe {
            (
                std::ptr::addr_of!((*t).wr_id).read(),
                std::ptr::addr_of!((*t).wr_flags).read(),
            )
        };
        let mut b = batch_of(self);
        if self.send_ops & needs == 0 {
            return b.fail(libc::EINVAL);
        }
        b.push(Req {
            wr_id,
            flags,
            op,
            sges: (0, 0),
            inline: None,
            ud: None,
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The QP's batch. A panic while it was held (caught by the entry point's
/// guard) may have left it short of a request: then the batch is failed,
/// so that `wr_complete` posts none of it.
fn batch_of(x: &QpEx) -> MutexGuard<'_, Batch> {
    x.batch.lock().unwrap_or_else(|p| {
        x.batch.clear_poison();
        let mut b = p.into_inner();
        b.fail(guard::PANICKED);
        b
    })
}

/// The extension of the QP `q` (an `ibv_qp_ex *`, which is its
/// `ibv_qp *`), if it is one of ours.
unsafe fn ex_of<'a>(q: *mut IbvQpExC) -> Option<&'a QpEx> {
    // SAFETY: the ibv_qp_ex pointer C holds is the QP box's address (this
    // module hands out nothing else); C contract: not destroyed.
    unsafe { qp_of(q.cast::<IbvQp>()) }.map(|b| &b.ex)
}

/// Adds a request of `op` to the batch of the QP `q` ([`QpEx::add`]).
unsafe fn push(q: *mut IbvQpExC, needs: u64, op: SendOp) {
    // SAFETY: forwarded C contract.
    if let Some(x) = unsafe { ex_of(q) } {
        x.add(needs, op);
    }
}

fn remote(rkey: u32, addr: u64) -> Remote {
    Remote { addr, rkey }
}

unsafe extern "C" fn wr_send(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::SEND, SendOp::Send) }
    })
}

unsafe extern "C" fn wr_send_imm(q: *mut IbvQpExC, imm_be: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe {
            push(
                q,
                ops::SEND_WITH_IMM,
                SendOp::SendWithImm(u32::from_be(imm_be)),
            )
        }
    })
}

unsafe extern "C" fn wr_send_inv(q: *mut IbvQpExC, rkey: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::SEND_WITH_INV, SendOp::SendWithInv(rkey)) }
    })
}

unsafe extern "C" fn wr_local_inv(q: *mut IbvQpExC, rkey: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::LOCAL_INV, SendOp::LocalInv(rkey)) }
    })
}

unsafe extern "C" fn wr_rdma_write(q: *mut IbvQpExC, rkey: u32, addr: u64) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::RDMA_WRITE, SendOp::Write(remote(rkey, addr))) }
    })
}

unsafe extern "C" fn wr_rdma_write_imm(q: *mut IbvQpExC, rkey: u32, addr: u64, imm_be: u32) {
    guard::void(|| {
        let op = SendOp::WriteWithImm(remote(rkey, addr), u32::from_be(imm_be));
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::RDMA_WRITE_WITH_IMM, op) }
    })
}

unsafe extern "C" fn wr_rdma_read(q: *mut IbvQpExC, rkey: u32, addr: u64) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::RDMA_READ, SendOp::Read(remote(rkey, addr))) }
    })
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    q: *mut IbvQpExC,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    guard::void(|| {
        let op = SendOp::CompareSwap {
            remote: remote(rkey, addr),
            compare,
            swap,
        };
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::ATOMIC_CMP_AND_SWP, op) }
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(q: *mut IbvQpExC, rkey: u32, addr: u64, add: u64) {
    guard::void(|| {
        let op = SendOp::FetchAdd {
            remote: remote(rkey, addr),
            add,
        };
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::ATOMIC_FETCH_AND_ADD, op) }
    })
}

/// `wr_atomic_write(qp, rkey, remote_addr, atomic_wr)`: the 8 bytes at
/// `atomic_wr`, placed at the peer as one unit (IBA oA19; the kernel's rxe
/// has it from Linux 6.2).
unsafe extern "C" fn wr_atomic_write(q: *mut IbvQpExC, rkey: u32, addr: u64, value: *const u8) {
    guard::void(|| {
        if value.is_null() {
            // SAFETY: forwarded C contract.
            unsafe { set_last(q, |_| Err(libc::EINVAL)) };
            return;
        }
        let mut v = [0u8; 8];
        // SAFETY: atomic_wr points to 8 readable bytes (C contract, non-NULL).
        unsafe { std::ptr::copy_nonoverlapping(value, v.as_mut_ptr(), 8) };
        let op = SendOp::AtomicWrite {
            remote: remote(rkey, addr),
            value: v,
        };
        // SAFETY: forwarded C contract.
        unsafe { push(q, ops::ATOMIC_WRITE, op) }
    })
}

/// The slots this library does not implement (TSO and XRC addressing):
/// the batch fails with
/// `EOPNOTSUPP` at `wr_complete`. The caller's other arguments are
/// ignored (the C calling convention lets the callee ignore them).
unsafe extern "C" fn unsupported(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            batch_of(x).fail(libc::EOPNOTSUPP);
        }
    })
}

/// Applies `f` to the batch (which gives its last request a payload); an
/// error fails the batch.
unsafe fn set_last(q: *mut IbvQpExC, f: impl FnOnce(&mut Batch) -> Result<(), c_int>) {
    // SAFETY: forwarded C contract.
    let Some(x) = (unsafe { ex_of(q) }) else {
        return;
    };
    let mut b = batch_of(x);
    if let Err(e) = f(&mut b) {
        b.fail(e);
    }
}

/// `wr_bind_mw`: binds a type 2 window to `rkey` over `info` (unbinds with
/// a zero length), as `IBV_WR_BIND_MW` does through `ibv_post_send`.
unsafe extern "C" fn wr_bind_mw(
    q: *mut IbvQpExC,
    mw: *mut crate::abi::IbvMw,
    rkey: u32,
    info: *const crate::abi::IbvMwBindInfo,
) {
    guard::void(|| {
        // SAFETY: NULL or a live window and bind info (C contract).
        let bind = match unsafe { info.as_ref() } {
            // SAFETY: NULL or a live window (C contract).
            Some(info) => unsafe { crate::post::mw_bind(mw, rkey, info) },
            None => Err(libc::EINVAL),
        };
        match bind {
            // SAFETY: forwarded C contract.
            Ok(b) => unsafe { push(q, ops::BIND_MW, SendOp::BindMw(b)) },
            // SAFETY: forwarded C contract.
            Err(e) => unsafe { set_last(q, |_| Err(e)) },
        }
    })
}

/// `wr_set_ud_addr`: where the last request goes on a UD QP. An AH that
/// is not ours fails the batch with `EINVAL`.
unsafe extern "C" fn wr_set_ud_addr(
    q: *mut IbvQpExC,
    ah: *mut crate::abi::IbvAh,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    guard::void(|| {
        // SAFETY: NULL or an AH of ours (C contract).
        let Some(a) = (unsafe { crate::ah::ah_of(ah) }) else {
            // SAFETY: forwarded C contract.
            unsafe { set_last(q, |_| Err(libc::EINVAL)) };
            return;
        };
        let a = std::ptr::from_ref(a);
        // SAFETY: forwarded C contract.
        unsafe {
            set_last(q, |b| match b.reqs.last_mut() {
                Some(r) => {
                    r.ud = Some((a, remote_qpn, remote_qkey));
                    Ok(())
                }
                None => Err(libc::EINVAL),
            })
        }
    })
}

unsafe extern "C" fn wr_set_sge(q: *mut IbvQpExC, lkey: u32, addr: u64, length: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe {
            set_last(q, |b| {
                b.set_sges(std::iter::once(IbvSge { addr, length, lkey }))
            })
        }
    })
}

unsafe extern "C" fn wr_set_sge_list(q: *mut IbvQpExC, n: usize, list: *const IbvSge) {
    guard::void(|| {
        if n > rverbs::wr::MAX_SGE || (n > 0 && list.is_null()) {
            // SAFETY: forwarded C contract.
            unsafe { set_last(q, |_| Err(libc::EINVAL)) };
            return;
        }
        // SAFETY: list holds n readable ibv_sge (C contract; checked non-NULL
        // when n > 0).
        let read = move |i: usize| unsafe { list.add(i).read_unaligned() };
        // SAFETY: forwarded C contract.
        unsafe { set_last(q, |b| b.set_sges((0..n).map(read))) }
    })
}

unsafe extern "C" fn wr_set_inline_data(q: *mut IbvQpExC, addr: *mut c_void, length: usize) {
    guard::void(|| {
        let buf = [IbvDataBuf { addr, length }];
        // SAFETY: addr is readable for length bytes (C contract).
        unsafe { set_last(q, |b| b.set_inline(&buf)) }
    })
}

unsafe extern "C" fn wr_set_inline_data_list(q: *mut IbvQpExC, n: usize, list: *const IbvDataBuf) {
    guard::void(|| {
        if n > 0 && list.is_null() {
            // SAFETY: forwarded C contract.
            unsafe { set_last(q, |_| Err(libc::EINVAL)) };
            return;
        }
        let bufs: &[IbvDataBuf] = if n == 0 {
            &[]
        } else {
            // SAFETY: list holds n readable ibv_data_buf (C contract; checked
            // non-NULL).
            unsafe { std::slice::from_raw_parts(list, n) }
        };
        // SAFETY: each buffer is readable for its length (C contract).
        unsafe { set_last(q, |b| b.set_inline(bufs)) }
    })
}

unsafe extern "C" fn wr_start(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            batch_of(x).reset();
        }
    })
}

unsafe extern "C" fn wr_abort(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            batch_of(x).reset();
        }
    })
}

/// `wr_complete`: posts the batch; 0, or the errno of the first failed
/// call or of the post (nothing is posted after an earlier call failed).
unsafe extern "C" fn wr_complete(q: *mut IbvQpExC) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { qp_of(q.cast::<IbvQp>()) }) else {
            return libc::EINVAL;
        };
        let mut batch = batch_of(&b.ex);
        let r = post_batch(&mut batch, &b.qp);
        batch.reset();
        r
    })
}

/// Posts `batch` on `qp`: 0 or an errno.
fn post_batch(batch: &mut Batch, qp: &Mutex<rverbs::Qp>) -> c_int {
    if let Some(e) = batch.error {
        return e;
    }
    if batch.reqs.is_empty() {
        return 0;
    }
    // What rxe answers for a QP before RTS (its POST_SEND doorbell
    // refuses it), as ibv_post_send does here: EINVAL, nothing posted.
    if matches!(
        lock(qp).last_state(),
        QpState::Reset | QpState::Init | QpState::Rtr
    ) {
        return libc::EINVAL;
    }
    batch.translate();
    // All or nothing, as rdma-core's providers roll a batch back: a batch
    // with an invalid request, or longer than the room left, posts none.
    let rc = match lock(qp).post_send_all(&batch.wrs) {
        Ok(()) => 0,
        Err(rverbs::Error::QueueFull { .. }) => batch.full,
        Err(e) => errno_of(&e),
    };
    batch.wrs.clear();
    rc
}

/// What `ibv_create_qp_ex` asks for, read from the caller's struct.
struct InitEx {
    pd: *mut crate::abi::IbvPd,
    init: IbvQpInitAttr,
    send_ops: Option<u64>,
}

/// Reads the caller's `ibv_qp_init_attr_ex` member by member, as rdma-core
/// does: the members every version of the struct has, and each optional
/// one only if `comp_mask` names it. A program built against older headers
/// passes a shorter struct, and need not set members it does not name.
/// `EINVAL` without a PD; `EOPNOTSUPP` for what this library lacks (XRC,
/// RSS, TSO, create flags, source QPNs).
///
/// # Safety
/// `a` points to a readable struct holding the members before `comp_mask`,
/// `comp_mask` itself, and every member `comp_mask` names (C contract).
unsafe fn read_init_ex(a: *const IbvQpInitAttrEx) -> Result<InitEx, c_int> {
    use init_mask::*;
    // SAFETY: comp_mask is in every version (the caller's contract).
    let mask = unsafe { member!(a, comp_mask) };
    if mask & PD == 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: comp_mask names pd, so the caller's struct holds it.
    let pd = unsafe { member!(a, pd) };
    if pd.is_null() {
        return Err(libc::EINVAL);
    }
    if mask & !(PD | CREATE_FLAGS | SEND_OPS_FLAGS) != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: read only when comp_mask names it (short-circuit).
    if mask & CREATE_FLAGS != 0 && unsafe { member!(a, create_flags) } != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let send_ops = if mask & SEND_OPS_FLAGS != 0 {
        // SAFETY: comp_mask names send_ops_flags.
        let f = unsafe { member!(a, send_ops_flags) };
        if f & !ops::SUPPORTED != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        Some(f)
    } else {
        None
    };
    // SAFETY: the members before comp_mask, in every version.
    let init = unsafe {
        IbvQpInitAttr {
            qp_context: member!(a, qp_context),
            send_cq: member!(a, send_cq),
            recv_cq: member!(a, recv_cq),
            srq: member!(a, srq),
            cap: member!(a, cap),
            qp_type: member!(a, qp_type),
            sq_sig_all: member!(a, sq_sig_all),
        }
    };
    Ok(InitEx { pd, init, send_ops })
}

/// `verbs_context.create_qp_ex`: what `verbs.h`'s `ibv_create_qp_ex`
/// calls when `comp_mask` is more than `IBV_QP_INIT_ATTR_PD`. RC and UC
/// QPs over a PD, with `send_ops_flags` for the `ibv_wr_*` API (see
/// [`read_init_ex`] for what is refused). On success the granted caps are
/// written back into `cap`, the only member written.
pub(crate) unsafe extern "C" fn create_qp_ex(
    c: *mut IbvContext,
    a: *mut IbvQpInitAttrEx,
) -> *mut IbvQp {
    guard::null(|| {
        if a.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a readable init attr (C contract, non-NULL).
        let mut x = match unsafe { read_init_ex(a) } {
            Ok(x) => x,
            Err(e) => return null_errno(e),
        };
        // SAFETY: a PD of ours (C contract); its first field is the ibv_pd.
        if unsafe { (*x.pd).context } != c {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: an open context of ours (C contract, checked against the PD).
        let Some(ctx) = (unsafe { crate::device::ctx_of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        let full = match ctx.dev.dev.driver() {
            rverbs::Driver::Rxe => libc::ENOSPC,
            _ => libc::ENOMEM,
        };
        let ex = |cap: &IbvQpCap| match x.send_ops {
            Some(flags) => QpEx::extended(flags, cap, full),
            None => QpEx::new(),
        };
        // SAFETY: forwarded C contract (a PD and CQs of ours).
        let q = unsafe { new_qp(x.pd, &mut x.init, ex) };
        if !q.is_null() {
            // SAFETY: cap is in every version of the caller's writable struct.
            unsafe { std::ptr::addr_of_mut!((*a).cap).write(x.init.cap) };
        }
        q
    })
}

/// `ibv_qp_to_qp_ex`: the QP's `ibv_qp_ex` if it was created with
/// `send_ops_flags`, else NULL (as libibverbs).
unsafe extern "C" fn qp_to_qp_ex(q: *mut IbvQp) -> *mut IbvQp {
    guard::null(|| {
        // SAFETY: a QP of ours (C contract).
        match unsafe { qp_of(q) } {
            Some(b) if b.ex.enabled => q,
            _ => std::ptr::null_mut(),
        }
    })
}
export!("ibv_qp_to_qp_ex" = qp_to_qp_ex);

/// Fills the `verbs_context` slots this module implements.
pub(crate) fn fill_verbs_ops(v: &mut crate::abi::VerbsContext) {
    v.create_qp_ex = Some(create_qp_ex);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

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
        let before = crate::post::tests::allocs();
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
        assert_eq!(
            crate::post::tests::allocs() - before,
            0,
            "a batch allocated"
        );
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

    /// A panic in a `wr_*` call while the batch is held (a bug, caught by
    /// the entry point's guard) fails the batch, which then posts nothing.
    #[test]
    fn a_panic_mid_batch_fails_the_batch() {
        let cap = IbvQpCap {
            max_send_wr: 4,
            max_send_sge: 1,
            ..IbvQpCap::default()
        };
        let x = QpEx::extended(ops::SEND, &cap, libc::ENOSPC);
        x.add(ops::SEND, SendOp::Send);
        guard::void(|| {
            let _held = batch_of(&x);
            panic!("a bug");
        });
        assert_eq!(batch_of(&x).error, Some(guard::PANICKED));
        batch_of(&x).reset();
        assert_eq!(batch_of(&x).error, None, "the next batch starts clean");
    }

    /// The program sets `wr_id` and `wr_flags` through its own pointer
    /// while a verb holds a shared reference to the box; the next request
    /// takes them, and neither the pointer nor the reference is
    /// invalidated (Miri checks the aliasing).
    #[test]
    fn the_program_sets_wr_id_through_its_pointer() {
        let cap = IbvQpCap {
            max_send_wr: 4,
            max_send_sge: 1,
            ..IbvQpCap::default()
        };
        let p = Box::into_raw(Box::new(QpEx::extended(ops::SEND, &cap, libc::ENOSPC)));
        // SAFETY: live until it is freed at the end.
        let x = unsafe { &*p };
        for id in [9u64, 10] {
            let tail = p.cast::<u8>().wrapping_add(offset_of!(QpEx, c));
            // SAFETY: the program's stores, through its pointer, to the
            // members at their offsets in the live tail.
            unsafe {
                tail.add(offset_of!(IbvQpExTail, wr_id))
                    .cast::<u64>()
                    .write(id);
                tail.add(offset_of!(IbvQpExTail, wr_flags))
                    .cast::<u32>()
                    .write(crate::abi::send_flags::SIGNALED);
            }
            x.add(ops::SEND, SendOp::Send);
        }
        let b = lock(&x.batch);
        let got: Vec<(u64, u32)> = b.reqs.iter().map(|r| (r.wr_id, r.flags)).collect();
        assert_eq!(got, [(9, 2), (10, 2)]);
        assert_eq!(b.error, None);
        drop(b);
        // SAFETY: made by Box::into_raw above; `x` is not used after.
        drop(unsafe { Box::from_raw(p) });
    }

    /// A program built against older headers passes a shorter
    /// `ibv_qp_init_attr_ex`, and sets only the members its `comp_mask`
    /// names: nothing else is read (Miri reports a read past the caller's
    /// bytes or of a member left unset).
    #[test]
    fn create_qp_ex_reads_only_the_members_comp_mask_names() {
        use init_mask::*;
        let pd = std::ptr::NonNull::<crate::abi::IbvPd>::dangling().as_ptr();
        let cap = IbvQpCap {
            max_send_wr: 8,
            ..IbvQpCap::default()
        };
        let cases = [
            // A struct that ends after pd.
            (offset_of!(IbvQpInitAttrEx, xrcd), PD, None),
            // One that ends after create_flags, which it names.
            (
                offset_of!(IbvQpInitAttrEx, max_tso_header),
                PD | CREATE_FLAGS,
                None,
            ),
            // The whole struct: only send_ops_flags named, the members
            // between pd and it left unset.
            (
                std::mem::size_of::<IbvQpInitAttrEx>(),
                PD | SEND_OPS_FLAGS,
                Some(ops::SEND),
            ),
        ];
        for (len, mask, send_ops) in cases {
            let a = crate::Partial::<IbvQpInitAttrEx>::new(len);
            let p = a.ptr();
            let null = std::ptr::null_mut();
            // SAFETY: every member written lies within the len bytes.
            unsafe {
                crate::put!(
                    p,
                    qp_context = null,
                    send_cq = null.cast(),
                    recv_cq = null.cast(),
                    srq = null,
                    cap = cap,
                    qp_type = 2,
                    sq_sig_all = 0,
                    comp_mask = mask,
                    pd = pd
                );
                if mask & CREATE_FLAGS != 0 {
                    crate::put!(p, create_flags = 0);
                }
                if let Some(f) = send_ops {
                    crate::put!(p, send_ops_flags = f);
                }
            }
            // SAFETY: the members comp_mask names are set.
            let x = unsafe { read_init_ex(p) }.expect("accepted");
            assert_eq!((x.pd, x.send_ops), (pd, send_ops), "{mask:#x}");
            assert_eq!((x.init.cap.max_send_wr, x.init.qp_type), (8, 2));
        }
    }

    /// The tail lies in a QP box right after its `struct ibv_qp`, where C
    /// finds `struct ibv_qp_ex`'s own members (the tail itself is checked
    /// against `verbs.h` in `abi/layout.rs`).
    #[test]
    // Miri cannot run the C compiler.
    #[cfg_attr(miri, ignore)]
    fn structs_match_verbs_h() {
        let at = offset_of!(crate::verbs::QpBox, ex) + offset_of!(QpEx, c);
        let checks = [
            ("sizeof(struct ibv_qp)".to_string(), at),
            ("offsetof(struct ibv_qp_ex, comp_mask)".to_string(), at),
            (
                "sizeof(struct ibv_qp_ex)".to_string(),
                at + size_of::<IbvQpExTail>(),
            ),
        ];
        crate::ctest::assert_c_values("qp-ex", &["infiniband/verbs.h"], &checks);
    }
}

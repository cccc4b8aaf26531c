//! The `ibv_wr_*` work request API: the function slots of `struct
//! ibv_qp_ex`, which `verbs.h`'s inlines call directly, in two forms
//! ([`Mode`]):
//!
//! - [`InRing`] (rxe): as rdma-core's rxe builders, `wr_start` takes the
//!   QP's lock and opens an rverbs `SendBuilder` on it, each `wr_<op>`
//!   writes a request's header into the send queue, each `wr_set_*` its
//!   payload or address, in its slot, and `wr_complete` publishes the
//!   batch and rings the doorbell, or takes it all back if a call failed;
//! - [`Gather`] (mlx5): the calls gather the batch (`batch.rs`) and
//!   `wr_complete` posts it all or nothing.

use crate::abi::{send_ops as ops, IbvAh, IbvDataBuf, IbvMw, IbvMwBindInfo, IbvQp, IbvQpExC};
use crate::abi::{IbvQpExOps, IbvSge, Slot};
use crate::ah::AhBox;
use crate::batch::{refused, Batch};
use crate::convert::mw_bind;
use crate::guard;
use crate::obj::CObject;
use crate::qp::QpBox;
use crate::qp_ex::QpEx;
use rverbs::{Remote, SendFlags, SendOp, Slice};
use std::ffi::{c_int, c_void};

/// The slots of every QP's `ibv_qp_ex` of one [`Mode`], for the
/// context's tables.
pub(crate) fn qp_ex_ops<M: Mode>() -> IbvQpExOps {
    IbvQpExOps {
        wr_atomic_cmp_swp: wr_atomic_cmp_swp::<M> as Slot,
        wr_atomic_fetch_add: wr_atomic_fetch_add::<M> as Slot,
        wr_bind_mw: wr_bind_mw::<M> as Slot,
        wr_local_inv: wr_local_inv::<M> as Slot,
        wr_rdma_read: wr_rdma_read::<M> as Slot,
        wr_rdma_write: wr_rdma_write::<M> as Slot,
        wr_rdma_write_imm: wr_rdma_write_imm::<M> as Slot,
        wr_send: wr_send::<M> as Slot,
        wr_send_imm: wr_send_imm::<M> as Slot,
        wr_send_inv: wr_send_inv::<M> as Slot,
        wr_send_tso: unsupported::<M> as Slot,
        wr_set_ud_addr: wr_set_ud_addr::<M> as Slot,
        wr_set_xrc_srqn: unsupported::<M> as Slot,
        wr_set_inline_data: wr_set_inline_data::<M> as Slot,
        wr_set_inline_data_list: wr_set_inline_data_list::<M> as Slot,
        wr_set_sge: wr_set_sge::<M> as Slot,
        wr_set_sge_list: wr_set_sge_list::<M> as Slot,
        wr_start: wr_start::<M> as Slot,
        wr_complete: wr_complete::<M> as Slot,
        wr_abort: wr_abort::<M> as Slot,
        wr_atomic_write: wr_atomic_write::<M> as Slot,
    }
}

/// How a QP's builders hold their batch: each slot does its part through
/// one of these, given the QP's box.
pub(crate) trait Mode {
    /// Opens a batch (`wr_start`).
    fn start(b: &QpBox);
    /// Adds a request of `op`, which the QP takes only if created for
    /// `needs`, with the program's `wr_id` and `wr_flags`.
    fn add(x: &QpEx, needs: u64, op: SendOp);
    /// Fails the batch with `e`.
    fn fail(x: &QpEx, e: c_int);
    /// Gives the last request the SGEs `list`.
    fn sges(x: &QpEx, list: &[IbvSge]);
    /// Gives the last request the one SGE `sge` (`wr_set_sge`).
    #[inline(always)]
    fn sge(x: &QpEx, sge: IbvSge) {
        Self::sges(x, &[sge])
    }
    /// Gives the last request the inline payload of `bufs`.
    ///
    /// # Safety
    /// Each buffer is readable for its length (C contract).
    unsafe fn inline(x: &QpEx, bufs: &[IbvDataBuf]);
    /// Gives the last request its UD address: `ah`'s (NULL or not ours:
    /// the batch fails with `EINVAL`).
    fn ud(x: &QpEx, ah: Option<&AhBox>, remote_qpn: u32, remote_qkey: u32);
    /// Posts the batch (`wr_complete`): 0 or an errno.
    fn complete(b: &QpBox) -> c_int;
    /// Drops the batch (`wr_abort`).
    fn abort(b: &QpBox);
}

/// The box of the QP `q` whose slot C called.
///
/// Never NULL: `verbs.h`'s inlines call each slot through the QP it was
/// read from (`qp->wr_start(qp)`), so a NULL `qp` faults in the program
/// before any slot runs; rdma-core's slots take the same contract
/// (`container_of`, no check). Not testing it is 2 instructions of every
/// `ibv_wr_*` call (callgrind).
///
/// # Safety
/// `q` is the `ibv_qp_ex *` the slot was read through: a QP this library
/// created and C has not destroyed; the reference lives no longer than
/// that.
#[inline(always)]
unsafe fn slot_box<'a>(q: *mut IbvQpExC) -> &'a QpBox {
    // SAFETY: the ibv_qp_ex pointer C holds is the QP box's address (this
    // library hands out nothing else), not NULL and not destroyed (the
    // caller's contract).
    unsafe { QpBox::of(q.cast::<IbvQp>()).unwrap_unchecked() }
}

/// The extension of the QP `q` (an `ibv_qp_ex *`, which is its
/// `ibv_qp *`): always `Some` ([`slot_box`]), kept an `Option` for the
/// slots' `let Some(x) = ... else` shape.
///
/// # Safety
/// As [`slot_box`].
#[inline(always)]
unsafe fn ex_of<'a>(q: *mut IbvQpExC) -> Option<&'a QpEx> {
    // SAFETY: forwarded contract.
    Some(&unsafe { slot_box(q) }.ex)
}

/// Adds a request of `op` to the batch of the QP `q` ([`Mode::add`]).
///
/// # Safety
/// As [`ex_of`].
#[inline(always)]
unsafe fn push<M: Mode>(q: *mut IbvQpExC, needs: u64, op: SendOp) {
    // SAFETY: forwarded C contract.
    if let Some(x) = unsafe { ex_of(q) } {
        M::add(x, needs, op);
    }
}

/// Fails the batch of the QP `q` with `e`.
///
/// # Safety
/// As [`ex_of`].
unsafe fn fail<M: Mode>(q: *mut IbvQpExC, e: c_int) {
    // SAFETY: forwarded C contract.
    if let Some(x) = unsafe { ex_of(q) } {
        M::fail(x, e);
    }
}

fn remote(rkey: u32, addr: u64) -> Remote {
    Remote { addr, rkey }
}

unsafe extern "C" fn wr_send<M: Mode>(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::SEND, SendOp::Send) }
    })
}

unsafe extern "C" fn wr_send_imm<M: Mode>(q: *mut IbvQpExC, imm_be: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe {
            push::<M>(
                q,
                ops::SEND_WITH_IMM,
                SendOp::SendWithImm(u32::from_be(imm_be)),
            )
        }
    })
}

unsafe extern "C" fn wr_send_inv<M: Mode>(q: *mut IbvQpExC, rkey: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::SEND_WITH_INV, SendOp::SendWithInv(rkey)) }
    })
}

unsafe extern "C" fn wr_local_inv<M: Mode>(q: *mut IbvQpExC, rkey: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::LOCAL_INV, SendOp::LocalInv(rkey)) }
    })
}

unsafe extern "C" fn wr_rdma_write<M: Mode>(q: *mut IbvQpExC, rkey: u32, addr: u64) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::RDMA_WRITE, SendOp::Write(remote(rkey, addr))) }
    })
}

unsafe extern "C" fn wr_rdma_write_imm<M: Mode>(
    q: *mut IbvQpExC,
    rkey: u32,
    addr: u64,
    imm_be: u32,
) {
    guard::void(|| {
        let op = SendOp::WriteWithImm(remote(rkey, addr), u32::from_be(imm_be));
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::RDMA_WRITE_WITH_IMM, op) }
    })
}

unsafe extern "C" fn wr_rdma_read<M: Mode>(q: *mut IbvQpExC, rkey: u32, addr: u64) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::RDMA_READ, SendOp::Read(remote(rkey, addr))) }
    })
}

unsafe extern "C" fn wr_atomic_cmp_swp<M: Mode>(
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
        unsafe { push::<M>(q, ops::ATOMIC_CMP_AND_SWP, op) }
    })
}

unsafe extern "C" fn wr_atomic_fetch_add<M: Mode>(
    q: *mut IbvQpExC,
    rkey: u32,
    addr: u64,
    add: u64,
) {
    guard::void(|| {
        let op = SendOp::FetchAdd {
            remote: remote(rkey, addr),
            add,
        };
        // SAFETY: forwarded C contract.
        unsafe { push::<M>(q, ops::ATOMIC_FETCH_AND_ADD, op) }
    })
}

/// `wr_atomic_write(qp, rkey, remote_addr, atomic_wr)`: the 8 bytes at
/// `atomic_wr`, placed at the peer as one unit (IBA oA19; the kernel's rxe
/// has it from Linux 6.2).
unsafe extern "C" fn wr_atomic_write<M: Mode>(
    q: *mut IbvQpExC,
    rkey: u32,
    addr: u64,
    value: *const u8,
) {
    guard::void(|| {
        if value.is_null() {
            // SAFETY: forwarded C contract.
            unsafe { fail::<M>(q, libc::EINVAL) };
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
        unsafe { push::<M>(q, ops::ATOMIC_WRITE, op) }
    })
}

/// The slots this library does not implement (TSO and XRC addressing):
/// the batch fails with `EOPNOTSUPP` at `wr_complete`. The caller's other
/// arguments are ignored (the C calling convention lets the callee ignore
/// them).
unsafe extern "C" fn unsupported<M: Mode>(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        unsafe { fail::<M>(q, libc::EOPNOTSUPP) }
    })
}

/// `wr_bind_mw`: binds a type 2 window to `rkey` over `info` (unbinds with
/// a zero length), as `IBV_WR_BIND_MW` does through `ibv_post_send`.
unsafe extern "C" fn wr_bind_mw<M: Mode>(
    q: *mut IbvQpExC,
    mw: *mut IbvMw,
    rkey: u32,
    info: *const IbvMwBindInfo,
) {
    guard::void(|| {
        // SAFETY: NULL or a live window and bind info (C contract).
        let bind = match unsafe { info.as_ref() } {
            // SAFETY: NULL or a live window (C contract).
            Some(info) => unsafe { mw_bind(mw, rkey, info) },
            None => Err(libc::EINVAL),
        };
        match bind {
            // SAFETY: forwarded C contract.
            Ok(b) => unsafe { push::<M>(q, ops::BIND_MW, SendOp::BindMw(b)) },
            // SAFETY: forwarded C contract.
            Err(e) => unsafe { fail::<M>(q, e) },
        }
    })
}

/// `wr_set_ud_addr`: where the last request goes on a UD QP. An AH that
/// is not ours fails the batch with `EINVAL`.
unsafe extern "C" fn wr_set_ud_addr<M: Mode>(
    q: *mut IbvQpExC,
    ah: *mut IbvAh,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        let Some(x) = (unsafe { ex_of(q) }) else {
            return;
        };
        // SAFETY: NULL or an AH of ours (C contract).
        let a = unsafe { AhBox::of(ah) };
        M::ud(x, a, remote_qpn, remote_qkey);
    })
}

unsafe extern "C" fn wr_set_sge<M: Mode>(q: *mut IbvQpExC, lkey: u32, addr: u64, length: u32) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            M::sge(x, IbvSge { addr, length, lkey });
        }
    })
}

unsafe extern "C" fn wr_set_sge_list<M: Mode>(q: *mut IbvQpExC, n: usize, list: *const IbvSge) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        let Some(x) = (unsafe { ex_of(q) }) else {
            return;
        };
        if n > 0 && list.is_null() {
            return M::fail(x, libc::EINVAL);
        }
        // More than any QP takes: the provider's answer for too many
        // (rdma-core's rxe ENOSPC, mlx5 ENOMEM: `full`).
        if n > rverbs::MAX_SGE {
            return M::fail(x, x.full());
        }
        let list: &[IbvSge] = if n == 0 {
            &[]
        } else if list.is_aligned() {
            // SAFETY: list holds n readable ibv_sge (C contract; checked
            // non-NULL and aligned), unchanged during this call.
            unsafe { std::slice::from_raw_parts(list, n) }
        } else {
            // SAFETY: as above, but for the alignment, which it does not need.
            return unsafe { sges_unaligned::<M>(x, n, list) };
        };
        M::sges(x, list);
    })
}

/// `wr_set_sge_list` of a misaligned C array, which cannot be viewed as
/// a slice. C forbids one, but rdma-core's providers read it with plain
/// loads (which x86 and arm64 take), and so a program that passes one runs
/// there: its SGEs are copied out one by one and given as any list.
/// Out of line, so that the aligned path carries no copy on its stack.
///
/// # Safety
/// `list` holds `n <= MAX_SGE` readable `ibv_sge`, at any alignment.
#[cold]
#[inline(never)]
unsafe fn sges_unaligned<M: Mode>(x: &QpEx, n: usize, list: *const IbvSge) {
    let mut copy = [IbvSge::default(); rverbs::MAX_SGE];
    for (i, c) in copy.iter_mut().take(n).enumerate() {
        // SAFETY: i < n, inside the caller's list; an unaligned read.
        *c = unsafe { list.add(i).read_unaligned() };
    }
    M::sges(x, &copy[..n.min(rverbs::MAX_SGE)]);
}

unsafe extern "C" fn wr_set_inline_data<M: Mode>(
    q: *mut IbvQpExC,
    addr: *mut c_void,
    length: usize,
) {
    guard::void(|| {
        let buf = [IbvDataBuf { addr, length }];
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            // SAFETY: addr is readable for length bytes (C contract).
            unsafe { M::inline(x, &buf) }
        }
    })
}

unsafe extern "C" fn wr_set_inline_data_list<M: Mode>(
    q: *mut IbvQpExC,
    n: usize,
    list: *const IbvDataBuf,
) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        let Some(x) = (unsafe { ex_of(q) }) else {
            return;
        };
        if n > 0 && list.is_null() {
            return M::fail(x, libc::EINVAL);
        }
        let bufs: &[IbvDataBuf] = if n == 0 {
            &[]
        } else if list.is_aligned() {
            // SAFETY: list holds n readable ibv_data_buf (C contract; checked
            // non-NULL and aligned), unchanged during this call.
            unsafe { std::slice::from_raw_parts(list, n) }
        } else {
            // SAFETY: as above, but for the alignment, which it does not need.
            return unsafe { inline_unaligned::<M>(x, n, list) };
        };
        // SAFETY: each buffer is readable for its length (C contract).
        unsafe { M::inline(x, bufs) }
    })
}

/// `wr_set_inline_data_list` of a misaligned C array, as
/// [`sges_unaligned`]: copied out, and given as any list. The count is
/// the caller's and unbounded, so the copy is on the heap; C forbids the
/// array (a program whose arrays are aligned never comes here).
///
/// # Safety
/// `list` holds `n` readable `ibv_data_buf`, at any alignment, each buffer
/// readable for its length.
#[cold]
#[inline(never)]
unsafe fn inline_unaligned<M: Mode>(x: &QpEx, n: usize, list: *const IbvDataBuf) {
    let copy: Vec<IbvDataBuf> = (0..n)
        // SAFETY: i < n, inside the caller's list; an unaligned read.
        .map(|i| unsafe { list.add(i).read_unaligned() })
        .collect();
    // SAFETY: each buffer is readable for its length (the caller's contract).
    unsafe { M::inline(x, &copy) }
}

unsafe extern "C" fn wr_start<M: Mode>(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: the QP the slot was read through (slot_box).
        M::start(unsafe { slot_box(q) });
    })
}

unsafe extern "C" fn wr_abort<M: Mode>(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: the QP the slot was read through (slot_box).
        M::abort(unsafe { slot_box(q) });
    })
}

/// `wr_complete`: posts the batch; 0, or the errno of the first failed
/// call or of the post (nothing is posted after an earlier call failed).
unsafe extern "C" fn wr_complete<M: Mode>(q: *mut IbvQpExC) -> c_int {
    guard::errno(|| {
        // SAFETY: the QP the slot was read through (slot_box).
        M::complete(unsafe { slot_box(q) })
    })
}

/// The builders of a QP that gathers its batch (`batch.rs`), posted whole
/// at `wr_complete` (mlx5's QPs here).
pub(crate) struct Gather;

impl Gather {
    /// Applies `f` to the batch (which gives its last request a payload);
    /// an error fails the batch.
    fn set_last(x: &QpEx, f: impl FnOnce(&mut Batch) -> Result<(), c_int>) {
        let mut b = x.batch();
        if let Err(e) = f(&mut b) {
            b.fail(e);
        }
    }
}

impl Mode for Gather {
    fn start(b: &QpBox) {
        b.ex.gather_start();
    }

    fn add(x: &QpEx, needs: u64, op: SendOp) {
        x.add(needs, op);
    }

    fn fail(x: &QpEx, e: c_int) {
        x.batch().fail(e);
    }

    fn sges(x: &QpEx, list: &[IbvSge]) {
        Gather::set_last(x, |b| b.set_sges(list.iter().copied()));
    }

    unsafe fn inline(x: &QpEx, bufs: &[IbvDataBuf]) {
        // SAFETY: the caller's contract.
        Gather::set_last(x, |b| unsafe { b.set_inline(bufs) });
    }

    fn ud(x: &QpEx, ah: Option<&AhBox>, remote_qpn: u32, remote_qkey: u32) {
        Gather::set_last(x, |b| match ah {
            Some(a) => b.set_ud(&a.ah, remote_qpn, remote_qkey),
            None => Err(libc::EINVAL),
        });
    }

    fn complete(b: &QpBox) -> c_int {
        b.ex.gather_end(|batch| batch.post(&b.qp))
    }

    fn abort(b: &QpBox) {
        b.ex.gather_end(|_| 0);
    }
}

/// The builders of an rxe QP: written into its send queue as they go,
/// through an rverbs `SendBuilder`, with the QP's lock held from
/// `wr_start` to `wr_complete` or `wr_abort`, as rdma-core's rxe provider
/// holds its SQ lock. C calls the other slots only in between, from the
/// thread that called `wr_start` (rdma-core's contract too: its builders
/// write the ring under that lock), so they touch the batch unlocked.
pub(crate) struct InRing;

impl InRing {
    /// A batch `wr_start` could not open (the QP is not ready to send):
    /// `wr_complete` reports why.
    #[cold]
    #[inline(never)]
    fn refused_start(r: &mut crate::qp_ex::InRing, full: c_int, qp: &mut rverbs::Qp) {
        r.builder = None;
        r.error = match qp.build_send() {
            Err(e) => refused(full, &e),
            Ok(_) => libc::EINVAL, // cannot be: it was refused just now
        };
    }

    /// The in-ring batch of `x`, from inside a slot call.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)] // the QP's lock, held, makes it unique
    fn ring(x: &QpEx) -> &mut crate::qp_ex::InRing {
        // SAFETY: called only from the slots, which C may call only between
        // wr_start and wr_complete / wr_abort, on the thread that holds the
        // QP's lock (the contract rdma-core's builders rely on too: a
        // program that breaks it races there as here).
        unsafe { x.ring() }
    }
}

/// The errno of a batch of rxe builders refused at its end: `full` for a
/// queue without room or a request past the QP's caps (rdma-core's rxe
/// answers `ENOSPC` from `wr_set_sge_list` and `wr_set_inline_data` as for
/// a batch without room), the doorbell's errno, or `EINVAL`. Worked out in
/// registers: an `Error` made of it, or the `Unposted` handed out of line,
/// would cost `wr_complete` a stack frame (callgrind).
#[inline(always)]
fn unposted(full: c_int, u: rverbs::Unposted) -> c_int {
    use rverbs::PostError as P;
    match u {
        rverbs::Unposted::Doorbell(e) => e.0,
        rverbs::Unposted::Refused {
            reason: P::QueueFull | P::TooManySges { .. } | P::InlineTooLong { .. },
            ..
        } => full,
        rverbs::Unposted::Refused { .. } => libc::EINVAL,
    }
}

impl Mode for InRing {
    #[inline(always)]
    fn start(b: &QpBox) {
        // SAFETY: released once, by wr_complete or wr_abort; the QP is
        // used through it only by this thread's calls in between (the
        // slots' contract above), and the builder that borrows it is
        // dropped before the lock is let go.
        let qp: *mut rverbs::Qp = unsafe { b.qp.hold() };
        // SAFETY: the lock is held (just taken): this thread's alone.
        let r = unsafe { b.ex.ring() };
        r.open = true;
        r.error = 0;
        // The QP through a pointer: the refusal's branch borrows it again,
        // which the borrow checker does not see the builder is not using.
        // SAFETY: the C caller keeps every AH it names alive until its
        // send completes (wr_set_ud_addr's contract, as ibv_post_send's
        // `wr.ud.ah`): `ud` gives them to the builder unkept.
        match unsafe { (*qp).build_send_unkept() } {
            // `builder` is None here (wr_complete and wr_abort leave it so):
            // nothing to drop, and no test for it (callgrind).
            Some(s) => std::mem::forget(r.builder.replace(s)),
            // SAFETY: held (above); no builder was made, so nothing else
            // borrows it.
            None => InRing::refused_start(r, b.ex.full(), unsafe { &mut *qp }),
        }
    }

    #[inline(always)]
    fn add(x: &QpEx, needs: u64, op: SendOp) {
        let (wr_id, flags) = x.id_and_flags();
        if !x.takes(needs) {
            return Self::fail(x, libc::EINVAL);
        }
        let flags = SendFlags {
            signaled: flags & crate::abi::send_flags::SIGNALED != 0,
            solicited: flags & crate::abi::send_flags::SOLICITED != 0,
            fence: flags & crate::abi::send_flags::FENCE != 0,
        };
        match Self::ring(x).builder.as_mut() {
            Some(s) => {
                s.start(wr_id, op, flags);
            }
            None => Self::fail(x, libc::EINVAL),
        }
    }

    #[cold]
    fn fail(x: &QpEx, e: c_int) {
        let r = Self::ring(x);
        if r.error == 0 {
            r.error = e;
        }
    }

    #[inline(always)]
    fn sges(x: &QpEx, list: &[IbvSge]) {
        let Some(s) = Self::ring(x).builder.as_mut() else {
            return Self::fail(x, libc::EINVAL);
        };
        // SAFETY: `ibv_sge` is rverbs' `Sge` (one layout, `struct
        // ib_uverbs_sge`), read in place while this call lasts; the C
        // caller vouches that each lkey's MR covers its range until the
        // request completes (ibv_wr_*'s contract).
        let sges = unsafe { Slice::list_from_raw_parts(list.as_ptr().cast(), list.len()) };
        match sges {
            Some(sges) => {
                s.sges(sges);
            }
            None => Self::fail(x, libc::EINVAL),
        }
    }

    #[inline(always)]
    fn sge(x: &QpEx, sge: IbvSge) {
        let Some(s) = Self::ring(x).builder.as_mut() else {
            return Self::fail(x, libc::EINVAL);
        };
        // SAFETY: the C caller vouches that the lkey's MR covers the range
        // until the request completes (ibv_wr_set_sge's contract).
        s.sge(unsafe { Slice::from_raw_parts(sge.addr, sge.length, sge.lkey) });
    }

    unsafe fn inline(x: &QpEx, bufs: &[IbvDataBuf]) {
        let Some(s) = Self::ring(x).builder.as_mut() else {
            return Self::fail(x, libc::EINVAL);
        };
        let mut total = 0usize;
        for b in bufs {
            if b.length > 0 && b.addr.is_null() {
                return Self::fail(x, libc::EINVAL);
            }
            total = total.saturating_add(b.length);
        }
        // Before any slice is made of the buffers: a length past what C
        // can have given (up to SIZE_MAX) must not become one. Too long
        // is ENOSPC, as rdma-core's rxe `wr_set_inline_data` answers.
        if total > x.max_inline() {
            return Self::fail(x, x.full());
        }
        let parts = bufs.iter().filter(|b| b.length > 0).map(|b| {
            // SAFETY: readable for length bytes (caller's contract,
            // non-NULL checked above).
            unsafe { std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length) }
        });
        s.inline_parts(parts);
    }

    #[inline(always)]
    fn ud(x: &QpEx, ah: Option<&AhBox>, remote_qpn: u32, remote_qkey: u32) {
        let (Some(s), Some(a)) = (Self::ring(x).builder.as_mut(), ah) else {
            return Self::fail(x, libc::EINVAL);
        };
        // SAFETY: the C caller keeps the AH alive until the send completes
        // (wr_set_ud_addr's contract, as ibv_post_send's `wr.ud.ah`).
        unsafe { s.to_unkept(&a.ah, remote_qpn, remote_qkey) };
    }

    #[inline(always)]
    fn complete(b: &QpBox) -> c_int {
        // SAFETY: inside wr_complete (the slots' contract).
        let r = unsafe { b.ex.ring() };
        if !r.open {
            return libc::EINVAL;
        }
        let rc = match (r.builder.take(), r.error) {
            (Some(s), 0) => match s.finish_raw() {
                Ok(_) => 0,
                Err(u) => unposted(b.ex.full(), u),
            },
            (s, e) => {
                drop(s); // takes the batch back
                if e != 0 {
                    e
                } else {
                    libc::EINVAL
                }
            }
        };
        r.open = false;
        // SAFETY: taken by wr_start (`open`), not yet released; the builder
        // that borrowed the QP is gone.
        unsafe { b.qp.release() };
        rc
    }

    fn abort(b: &QpBox) {
        // SAFETY: inside wr_abort (the slots' contract).
        let r = unsafe { b.ex.ring() };
        if !r.open {
            return;
        }
        r.builder = None; // takes the batch back
        r.error = 0;
        r.open = false;
        // SAFETY: as in complete.
        unsafe { b.qp.release() };
    }
}

//! The `ibv_wr_*` work request API: the function slots of `struct
//! ibv_qp_ex`, which `verbs.h`'s inlines call directly. Each `wr_<op>`
//! adds a request to the QP's batch, each `wr_set_*` gives the last one
//! its payload or address, and `wr_complete` posts the batch all or
//! nothing (`qp_ex.rs` holds the batch and says how).

use crate::abi::{send_ops as ops, IbvAh, IbvDataBuf, IbvMw, IbvMwBindInfo, IbvQp, IbvQpExC};
use crate::abi::{IbvQpExOps, IbvSge, Slot};
use crate::ah::AhBox;
use crate::batch::Batch;
use crate::convert::mw_bind;
use crate::guard;
use crate::obj::CObject;
use crate::qp::QpBox;
use crate::qp_ex::QpEx;
use rverbs::{Remote, SendOp};
use std::ffi::{c_int, c_void};

/// The slots of every QP's `ibv_qp_ex`, for the context's table.
pub(crate) fn qp_ex_ops() -> IbvQpExOps {
    IbvQpExOps {
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
    }
}

/// The extension of the QP `q` (an `ibv_qp_ex *`, which is its
/// `ibv_qp *`), if it is one of ours.
unsafe fn ex_of<'a>(q: *mut IbvQpExC) -> Option<&'a QpEx> {
    // SAFETY: the ibv_qp_ex pointer C holds is the QP box's address (this
    // library hands out nothing else); C contract: not destroyed.
    unsafe { QpBox::of(q.cast::<IbvQp>()) }.map(|b| &b.ex)
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
/// the batch fails with `EOPNOTSUPP` at `wr_complete`. The caller's other arguments are
/// ignored (the C calling convention lets the callee ignore them).
unsafe extern "C" fn unsupported(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            x.batch().fail(libc::EOPNOTSUPP);
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
    let mut b = x.batch();
    if let Err(e) = f(&mut b) {
        b.fail(e);
    }
}

/// `wr_bind_mw`: binds a type 2 window to `rkey` over `info` (unbinds with
/// a zero length), as `IBV_WR_BIND_MW` does through `ibv_post_send`.
unsafe extern "C" fn wr_bind_mw(
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
    ah: *mut IbvAh,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    guard::void(|| {
        // SAFETY: NULL or an AH of ours (C contract).
        let a = unsafe { AhBox::of(ah) };
        // SAFETY: forwarded C contract.
        unsafe {
            set_last(q, |b| match a {
                Some(a) => b.set_ud(&a.ah, remote_qpn, remote_qkey),
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
        if n > rverbs::MAX_SGE || (n > 0 && list.is_null()) {
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
            x.batch().reset();
        }
    })
}

unsafe extern "C" fn wr_abort(q: *mut IbvQpExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(x) = unsafe { ex_of(q) } {
            x.batch().reset();
        }
    })
}

/// `wr_complete`: posts the batch; 0, or the errno of the first failed
/// call or of the post (nothing is posted after an earlier call failed).
unsafe extern "C" fn wr_complete(q: *mut IbvQpExC) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { QpBox::of(q.cast::<IbvQp>()) }) else {
            return libc::EINVAL;
        };
        let mut batch = b.ex.batch();
        let r = batch.post(&b.qp);
        batch.reset();
        r
    })
}

//! Memory windows: `ops.alloc_mw`, `ops.dealloc_mw`, `ops.bind_mw` (what
//! `verbs.h`'s inline `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`
//! call), over rverbs' [`Mw`]. Type 2 windows are bound by an
//! `IBV_WR_BIND_MW` send ([`crate::post`]).
//!
//! The C struct's `rkey` is the window's rkey as C sees it, kept as
//! rdma-core's rxe provider keeps it: `ibv_bind_mw` moves it to the next
//! key once the bind is posted (a failed completion leaves it to the
//! caller to undo), and a type 2 bind leaves it to the caller, who names
//! the new key in the request. The rverbs window only owns the kernel
//! object (`DEALLOC_MW` when dropped).

use crate::abi::*;
use crate::guard;
use crate::verbs::{pd_of, PdBox};
use crate::{errno_of, null_errno, set_errno};
use rverbs::{Mw, MwType};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::Ordering;

#[repr(C)]
struct MwBox {
    /// In an UnsafeCell: `ibv_bind_mw` moves `rkey` while C holds the
    /// pointer.
    c: UnsafeCell<IbvMw>,
    _mw: Mw,
    pd: *const PdBox,
}

/// `IBV_ACCESS_ZERO_BASED`, which rxe refuses for windows (and rverbs does
/// not offer).
const ACCESS_ZERO_BASED: u32 = 1 << 5;

/// `ops.alloc_mw`: NULL + errno on failure.
unsafe extern "C" fn alloc_mw(p: *mut IbvPd, mw_type: c_int) -> *mut IbvMw {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { pd_of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        let t = match mw_type {
            1 => MwType::Type1,
            2 => MwType::Type2,
            _ => return null_errno(libc::EINVAL),
        };
        let mw = match pd.pd.alloc_mw(t) {
            Ok(m) => m,
            Err(e) => return null_errno(errno_of(&e)),
        };
        pd.users.fetch_add(1, Ordering::AcqRel);
        Box::into_raw(Box::new(MwBox {
            c: UnsafeCell::new(IbvMw {
                context: pd.c.context,
                pd: p,
                rkey: mw.rkey(),
                handle: 0,
                mw_type,
            }),
            _mw: mw,
            pd,
        }))
        .cast()
    })
}

/// `ops.dealloc_mw`: 0 or an errno. rverbs' window issues `DEALLOC_MW`
/// when dropped and cannot report a refusal; rxe never refuses it.
unsafe extern "C" fn dealloc_mw(m: *mut IbvMw) -> c_int {
    guard::errno(|| {
        if m.is_null() {
            set_errno(libc::EINVAL);
            return libc::EINVAL;
        }
        // SAFETY: made by Box::into_raw in alloc_mw (C contract: once).
        let b = unsafe { Box::from_raw(m.cast::<MwBox>()) };
        // SAFETY: the PD outlives its windows (dealloc_pd refuses while
        // users > 0).
        unsafe { (*b.pd).users.fetch_sub(1, Ordering::AcqRel) };
        drop(b);
        0
    })
}

/// `ibv_inc_rkey`: the same window index, the next 8-bit key.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ops.bind_mw` (type 1; `verbs.h` checked the type and the MR's PD):
/// posts a signaled-as-asked `IBV_WR_BIND_MW` send to the next rkey, then
/// moves the window's C rkey to it. 0 or an errno (also in errno).
unsafe extern "C" fn bind_mw(q: *mut IbvQp, m: *mut IbvMw, bind: *mut IbvMwBind) -> c_int {
    guard::errno(|| {
        // SAFETY: a readable bind request (C contract).
        let Some(b) = (unsafe { bind.as_ref() }) else {
            set_errno(libc::EINVAL);
            return libc::EINVAL;
        };
        if m.is_null() || b.bind_info.mw_access_flags & ACCESS_ZERO_BASED != 0 {
            set_errno(libc::EINVAL);
            return libc::EINVAL;
        }
        // SAFETY: a window of ours (C contract, non-NULL): its C struct is the
        // box's UnsafeCell, so the member may be read and written through C's
        // pointer; binds of one window are not concurrent (C contract).
        let (rkey, old) = unsafe {
            let r = std::ptr::addr_of_mut!((*m).rkey);
            (r, r.read())
        };
        let new_rkey = inc_rkey(old);
        let mut wr = IbvSendWr {
            wr_id: b.wr_id,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: 0,
            opcode: wr_opcode::BIND_MW,
            send_flags: b.send_flags,
            imm_data: 0,
            wr: IbvSendWrWr {
                rdma: IbvSendWrRdma {
                    remote_addr: 0,
                    rkey: 0,
                },
            },
            xrc_remote_srqn: 0,
            bind_mw_or_tso: IbvSendWrBindMwOrTso {
                bind_mw: IbvSendWrBindMw {
                    mw: m,
                    rkey: new_rkey,
                    bind_info: b.bind_info,
                },
            },
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a QP of ours (C contract); wr is a one-element list that
        // lives across the call; bad is a writable slot.
        let r = unsafe { crate::post::post_send(q, &mut wr, &mut bad) };
        if r != 0 {
            set_errno(r);
            return r;
        }
        // SAFETY: as for the read above.
        unsafe { rkey.write(new_rkey) };
        0
    })
}

/// Fills the context's window slots.
pub(crate) fn fill_ops(ops: &mut IbvContextOps) {
    ops.alloc_mw = Some(alloc_mw);
    ops.dealloc_mw = Some(dealloc_mw);
    ops.bind_mw = Some(bind_mw);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_rkey_keeps_the_index() {
        assert_eq!(inc_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(inc_rkey(0x1234_5601), 0x1234_5602);
    }
}

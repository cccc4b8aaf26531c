//! `ops.bind_mw`, what `verbs.h`'s inline `ibv_bind_mw` calls for a type 1
//! window: an `IBV_WR_BIND_MW` send posted through `ibv_post_send`'s path.
//!
//! The window's C `rkey` is kept as rdma-core's rxe provider keeps it:
//! `ibv_bind_mw` moves it to the next key once the bind is posted (a failed
//! completion leaves it to the caller to undo); a type 2 bind, posted by the
//! program itself, leaves it to the caller, who names the new key in the
//! request.

use crate::abi::*;
use crate::guard;
use crate::ret_errno;
use std::ffi::c_int;

/// `IBV_ACCESS_ZERO_BASED`, which rxe refuses for windows (and rverbs does
/// not offer).
const ACCESS_ZERO_BASED: u32 = 1 << 5;

/// `ibv_inc_rkey`: the same window index, the next 8-bit key.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

/// `ops.bind_mw` (type 1; `verbs.h` checked the type and the MR's PD):
/// posts a signaled-as-asked `IBV_WR_BIND_MW` send to the next rkey, then
/// moves the window's C rkey to it. 0 or an errno (also in errno).
pub(crate) unsafe extern "C" fn bind_mw(
    q: *mut IbvQp,
    m: *mut IbvMw,
    bind: *mut IbvMwBind,
) -> c_int {
    guard::errno(|| {
        // SAFETY: a readable bind request (C contract).
        let Some(b) = (unsafe { bind.as_ref() }) else {
            return ret_errno(libc::EINVAL);
        };
        if m.is_null() || b.bind_info.mw_access_flags & ACCESS_ZERO_BASED != 0 {
            return ret_errno(libc::EINVAL);
        }
        // SAFETY: a window of ours (C contract, non-NULL): its C struct is the
        // box's UnsafeCell, so the member may be read and written through C's
        // pointer; binds of one window are not concurrent (C contract).
        let (rkey, old) = unsafe {
            let r = std::ptr::addr_of_mut!((*m).rkey);
            (r, r.read())
        };
        let new_rkey = inc_rkey(old);
        let mut wr = bind_wr(b, m, new_rkey);
        let mut bad = std::ptr::null_mut();
        // SAFETY: a QP of ours (C contract); wr is a one-element list that
        // lives across the call; bad is a writable slot.
        let r = unsafe { crate::send::post_send(q, &mut wr, &mut bad) };
        if r != 0 {
            return ret_errno(r);
        }
        // SAFETY: as for the read above.
        unsafe { rkey.write(new_rkey) };
        0
    })
}

/// The `IBV_WR_BIND_MW` send of `ibv_bind_mw`: `m` to `new_rkey` over
/// what `b` binds it to.
fn bind_wr(b: &IbvMwBind, m: *mut IbvMw, new_rkey: u32) -> IbvSendWr {
    IbvSendWr {
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
    }
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

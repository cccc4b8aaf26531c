//! The smaller entry points around QPs and CQs: multicast attach/detach,
//! `ibv_resize_cq` and `ibv_get_pkey_index` (the static-rate conversions
//! are in `rate.rs`).

use crate::abi::*;
use crate::device::ctx_of;
use crate::guard;
use crate::verbs::{cq_of, qp_of};
use crate::{errno_of, export, ret_errno, set_errno};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these are held: a poisoned lock is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ibv_attach_mcast` (`ATTACH_MCAST`): 0 or an errno. The group is noted
/// as the kernel notes it on success (once), for `ibv_destroy_qp`.
unsafe extern "C" fn attach_mcast(q: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours and a readable GID (C contract).
        let (Some(b), Some(g)) = (unsafe { qp_of(q) }, unsafe { gid.as_ref() }) else {
            return ret_errno(libc::EINVAL);
        };
        // Held across the command, so the list follows the kernel's order.
        let mut groups = lock(&b.mcast);
        match lock(&b.qp).attach_mcast(&g.raw, lid) {
            Ok(()) => {
                if !groups.contains(&(g.raw, lid)) {
                    groups.push((g.raw, lid));
                }
                0
            }
            Err(e) => ret_errno(errno_of(&e)),
        }
    })
}
export!("ibv_attach_mcast" = attach_mcast);

/// `ibv_detach_mcast` (`DETACH_MCAST`): 0 or an errno. The kernel drops
/// the group from its list whenever it is there, whatever the driver then
/// answers; so does this library's note of it.
unsafe extern "C" fn detach_mcast(q: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours and a readable GID (C contract).
        let (Some(b), Some(g)) = (unsafe { qp_of(q) }, unsafe { gid.as_ref() }) else {
            return ret_errno(libc::EINVAL);
        };
        let mut groups = lock(&b.mcast);
        let r = lock(&b.qp).detach_mcast(&g.raw, lid);
        groups.retain(|&x| x != (g.raw, lid));
        match r {
            Ok(()) => 0,
            Err(e) => ret_errno(errno_of(&e)),
        }
    })
}
export!("ibv_detach_mcast" = detach_mcast);

/// `ibv_resize_cq` (`RESIZE_CQ`): 0 or an errno; on success `cq->cqe` is
/// the new size, as libibverbs sets it.
unsafe extern "C" fn resize_cq(c: *mut IbvCq, cqe: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { cq_of(c) }) else {
            return ret_errno(libc::EINVAL);
        };
        let Ok(n) = u32::try_from(cqe) else {
            return ret_errno(libc::EINVAL);
        };
        let mut cq = lock(&b.cq);
        match cq.resize(n) {
            Ok(()) => {
                let granted = cq.cqe().min(c_int::MAX as u32) as c_int;
                // SAFETY: the C-visible size, in the box's UnsafeCell, written
                // under the CQ's lock.
                unsafe { (*b.c.get()).cqe = granted };
                0
            }
            Err(e) => ret_errno(errno_of(&e)),
        }
    })
}
export!("ibv_resize_cq" = resize_cq);

/// `ibv_get_pkey_index`: the index of `pkey` (big-endian) in the port's
/// table, or -1 with errno (`ENOENT` when it is not there).
unsafe extern "C" fn get_pkey_index(c: *mut IbvContext, port: u8, pkey: u16) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        let want = u16::from_be(pkey);
        // The table ends where sysfs has no more entries (as rdma-core's loop
        // ends at the first failing ibv_query_pkey); bounded by the 16-bit
        // index space.
        for i in 0..=u16::MAX {
            match b.ctx.query_pkey(port, i) {
                Ok(p) if p == want => return c_int::from(i),
                Ok(_) => {}
                Err(e) => {
                    set_errno(errno_of(&e));
                    return -1;
                }
            }
        }
        set_errno(libc::ENOENT);
        -1
    })
}
export!("ibv_get_pkey_index" = get_pkey_index);

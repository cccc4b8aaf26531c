//! The smaller entry points around QPs and CQs: multicast attach/detach,
//! `ibv_resize_cq`, `ibv_get_pkey_index`, and the static-rate conversions
//! (pure tables, as in rdma-core 44's `verbs.c`).

use crate::abi::*;
use crate::device::ctx_of;
use crate::verbs::{cq_of, qp_of};
use crate::{errno_of, export, ret_errno, set_errno};
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these are held: a poisoned lock is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `ibv_attach_mcast` (`ATTACH_MCAST`): 0 or an errno.
unsafe extern "C" fn attach_mcast(q: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    // SAFETY: a QP of ours and a readable GID (C contract).
    let (Some(b), Some(g)) = (unsafe { qp_of(q) }, unsafe { gid.as_ref() }) else {
        return ret_errno(libc::EINVAL);
    };
    match lock(&b.qp).attach_mcast(&g.raw, lid) {
        Ok(()) => 0,
        Err(e) => ret_errno(errno_of(&e)),
    }
}
export!("ibv_attach_mcast" = attach_mcast);

/// `ibv_detach_mcast` (`DETACH_MCAST`): 0 or an errno.
unsafe extern "C" fn detach_mcast(q: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    // SAFETY: a QP of ours and a readable GID (C contract).
    let (Some(b), Some(g)) = (unsafe { qp_of(q) }, unsafe { gid.as_ref() }) else {
        return ret_errno(libc::EINVAL);
    };
    match lock(&b.qp).detach_mcast(&g.raw, lid) {
        Ok(()) => 0,
        Err(e) => ret_errno(errno_of(&e)),
    }
}
export!("ibv_detach_mcast" = detach_mcast);

/// `ibv_resize_cq` (`RESIZE_CQ`): 0 or an errno; on success `cq->cqe` is
/// the new size, as libibverbs sets it.
unsafe extern "C" fn resize_cq(c: *mut IbvCq, cqe: c_int) -> c_int {
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
            // SAFETY: the C-visible size, written under the CQ's lock.
            unsafe { (*c).cqe = granted };
            0
        }
        Err(e) => ret_errno(errno_of(&e)),
    }
}
export!("ibv_resize_cq" = resize_cq);

/// `ibv_get_pkey_index`: the index of `pkey` (big-endian) in the port's
/// table, or -1 with errno (`ENOENT` when it is not there).
unsafe extern "C" fn get_pkey_index(c: *mut IbvContext, port: u8, pkey: u16) -> c_int {
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
}
export!("ibv_get_pkey_index" = get_pkey_index);

/// `enum ibv_rate` → (multiple of 2.5 Gb/s, Mb/s), rdma-core 44's tables;
/// `None` in the first column for the rates `ibv_rate_to_mult` does not
/// know.
const RATES: &[(c_int, Option<c_int>, c_int)] = &[
    (2, Some(1), 2500),
    (5, Some(2), 5000),
    (3, Some(4), 10000),
    (6, Some(8), 20000),
    (4, Some(12), 30000),
    (7, Some(16), 40000),
    (8, Some(24), 60000),
    (9, Some(32), 80000),
    (10, Some(48), 120000),
    (11, None, 14062),
    (12, None, 56250),
    (13, None, 112500),
    (14, None, 168750),
    (15, None, 25781),
    (16, None, 103125),
    (17, None, 206250),
    (18, None, 309375),
    (19, Some(11), 28125),
    (20, Some(20), 53125),
    (21, Some(160), 425000),
    (22, Some(240), 637500),
    (23, Some(320), 850000),
    (24, Some(480), 1275000),
];

/// `IBV_RATE_MAX`: what the reverse conversions answer for an unknown value.
const RATE_MAX: c_int = 0;

extern "C" fn rate_to_mult(rate: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.0 == rate)
        .and_then(|r| r.1)
        .unwrap_or(-1)
}
export!("ibv_rate_to_mult" = rate_to_mult);

extern "C" fn mult_to_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == Some(mult))
        .map_or(RATE_MAX, |r| r.0)
}
export!("mult_to_ibv_rate" = mult_to_rate);

extern "C" fn rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}
export!("ibv_rate_to_mbps" = rate_to_mbps);

extern "C" fn mbps_to_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(RATE_MAX, |r| r.0)
}
export!("mbps_to_ibv_rate" = mbps_to_rate);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_convert_both_ways_as_rdma_core() {
        // IBV_RATE_10_GBPS = 3: 4 x 2.5 Gb/s.
        assert_eq!((rate_to_mult(3), rate_to_mbps(3)), (4, 10000));
        assert_eq!((mult_to_rate(4), mbps_to_rate(10000)), (3, 3));
        // IBV_RATE_100_GBPS has Mb/s but no multiple (as rdma-core).
        assert_eq!((rate_to_mult(16), rate_to_mbps(16)), (-1, 103125));
        // Unknown values.
        assert_eq!((rate_to_mult(0), rate_to_mbps(99)), (-1, -1));
        assert_eq!((mult_to_rate(3), mbps_to_rate(1)), (RATE_MAX, RATE_MAX));
        for r in RATES {
            assert_eq!(mbps_to_rate(rate_to_mbps(r.0)), r.0);
            if let Some(m) = r.1 {
                assert_eq!(mult_to_rate(m), r.0);
            }
        }
    }
}

//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_destroy_srq`, and `ops.post_srq_recv` (in
//! [`crate::post`]), over rverbs' [`Srq`].
//!
//! Lifetimes as libibverbs has them: the kernel refuses DESTROY_SRQ while a
//! QP takes its receives from the SRQ, so the box counts those QPs and
//! refuses with `EBUSY`.

use crate::abi::*;
use crate::guard;
use crate::verbs::{pd_of, PdBox};
use crate::{errno_of, export, member, null_errno, ret_errno};
use rverbs::Srq;
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

#[repr(C)]
pub(crate) struct SrqBox {
    /// In an UnsafeCell: `events_completed` changes while C holds the
    /// pointer and other threads hold shared references to the box.
    pub(crate) c: UnsafeCell<IbvSrq>,
    /// Posting takes `&mut Srq`; the C API lets threads post to one SRQ
    /// concurrently, so a lock per SRQ (rdma-core's rxe takes a spinlock
    /// per queue for the same reason).
    pub(crate) srq: Mutex<Srq>,
    pd: *const PdBox,
    /// SGEs per receive, as granted: posts are checked against it before
    /// their SGE arrays are read.
    pub(crate) max_sge: u32,
    /// QPs that take their receives from this SRQ.
    pub(crate) users: AtomicUsize,
}

pub(crate) fn lock_srq(s: &SrqBox) -> MutexGuard<'_, Srq> {
    // Nothing panics while the lock is held: a poisoned lock is consistent.
    s.srq.lock().unwrap_or_else(|p| p.into_inner())
}

/// The box behind a `struct ibv_srq *` of ours (NULL: `None`).
pub(crate) unsafe fn srq_of<'a>(s: *mut IbvSrq) -> Option<&'a SrqBox> {
    // SAFETY: SRQs come only from create_srq (C contract: not destroyed);
    // `c` is the first field.
    unsafe { s.cast::<SrqBox>().as_ref() }
}

/// `ibv_create_srq`: NULL + errno on failure; on success the granted
/// depth and SGEs are written back into `init->attr`, as rdma-core does.
unsafe extern "C" fn create_srq(p: *mut IbvPd, init: *mut IbvSrqInitAttr) -> *mut IbvSrq {
    guard::null(|| {
        // SAFETY: a PD of ours and a writable init attr (C contract).
        let (Some(pd), Some(a)) = (unsafe { pd_of(p) }, unsafe { init.as_mut() }) else {
            return null_errno(libc::EINVAL);
        };
        if a.attr.max_wr == 0 {
            // The kernel's rule (rxe_srq_chk_init): an SRQ holds something.
            return null_errno(libc::EINVAL);
        }
        let srq = match pd
            .pd
            .create_srq(a.attr.max_wr, a.attr.max_sge, a.attr.srq_limit)
        {
            Ok(s) => s,
            Err(e) => return null_errno(errno_of(&e)),
        };
        // The granted sizes, as rdma-core writes them back: max_wr from the
        // CREATE_SRQ response (on 6.1, QUERY_SRQ answers another number),
        // max_sge from QUERY_SRQ (the Rust API does not keep the response's).
        match srq.query() {
            Ok(q) => {
                a.attr.max_wr = srq.max_wr();
                a.attr.max_sge = q.max_sge;
            }
            Err(e) => return null_errno(errno_of(&e)),
        }
        pd.users.fetch_add(1, Ordering::AcqRel);
        let c = IbvSrq {
            context: pd.c.context,
            srq_context: a.srq_context,
            pd: p,
            handle: 0,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            events_completed: 0,
        };
        let handle = srq.user_handle();
        let b = Box::into_raw(Box::new(SrqBox {
            c: UnsafeCell::new(c),
            srq: Mutex::new(srq),
            pd,
            max_sge: a.attr.max_sge,
            users: AtomicUsize::new(0),
        }));
        // Its async events (SRQ_LIMIT_REACHED, SRQ_ERR) name this C object.
        crate::async_event::register(crate::async_event::Kind::Srq, handle, b.cast());
        b.cast()
    })
}
export!("ibv_create_srq" = create_srq);

/// `ibv_modify_srq`: 0 or an errno. The limit (`IBV_SRQ_LIMIT`) is armed;
/// resizing (`IBV_SRQ_MAX_WR`) is refused with `EOPNOTSUPP`, as the Rust
/// API does not offer it (see `Srq::query`).
unsafe extern "C" fn modify_srq(s: *mut IbvSrq, attr: *mut IbvSrqAttr, mask: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract).
        let Some(b) = (unsafe { srq_of(s) }) else {
            return ret_errno(libc::EINVAL);
        };
        if attr.is_null() || mask & !(srq_mask::MAX_WR | srq_mask::LIMIT) != 0 {
            return ret_errno(libc::EINVAL);
        }
        if mask & srq_mask::MAX_WR != 0 {
            return ret_errno(libc::EOPNOTSUPP);
        }
        if mask & srq_mask::LIMIT != 0 {
            // SAFETY: a readable attr (C contract, non-NULL) whose srq_limit
            // the mask names; its other members may be unset, so not read.
            let limit = unsafe { member!(attr, srq_limit) };
            if let Err(e) = lock_srq(b).set_limit(limit) {
                return ret_errno(errno_of(&e));
            }
        }
        0
    })
}
export!("ibv_modify_srq" = modify_srq);

/// `ibv_query_srq`: 0 or an errno.
unsafe extern "C" fn query_srq(s: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract).
        let Some(b) = (unsafe { srq_of(s) }) else {
            return ret_errno(libc::EINVAL);
        };
        if attr.is_null() {
            return ret_errno(libc::EINVAL);
        }
        match lock_srq(b).query() {
            Ok(q) => {
                // SAFETY: attr is a writable ibv_srq_attr (C contract, non-NULL).
                unsafe {
                    attr.write(IbvSrqAttr {
                        max_wr: q.max_wr,
                        max_sge: q.max_sge,
                        srq_limit: q.srq_limit,
                    })
                };
                0
            }
            Err(e) => ret_errno(errno_of(&e)),
        }
    })
}
export!("ibv_query_srq" = query_srq);

/// `ibv_destroy_srq`: `EBUSY` while a QP uses it, as the kernel answers.
unsafe extern "C" fn destroy_srq(s: *mut IbvSrq) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract).
        let Some(b) = (unsafe { srq_of(s) }) else {
            return ret_errno(libc::EINVAL);
        };
        if b.users.load(Ordering::Acquire) != 0 {
            return ret_errno(libc::EBUSY);
        }
        // SAFETY: the PD, and the context, outlive their SRQs (dealloc_pd
        // refuses while users > 0; C contract: the context is closed last).
        let ctx = unsafe { crate::device::ctx_of((*b.pd).c.context) };
        // Waits for async events handed out for it to be acknowledged, as
        // libibverbs does; no reader of the async fd is between reading an
        // event and counting it until DESTROY_SRQ has dropped those queued.
        let handle = lock_srq(b).user_handle();
        let held =
            crate::async_event::retire_holding(crate::async_event::Kind::Srq, handle, || {
                ctx.map(|x| x.async_reading.lock().unwrap_or_else(|p| p.into_inner()))
            });
        // SAFETY: the PD outlives its SRQs (dealloc_pd refuses while users > 0).
        unsafe { (*b.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: made by Box::into_raw in create_srq; no QP uses it (checked
        // above); the C caller destroys it once.
        drop(unsafe { Box::from_raw(s.cast::<SrqBox>()) });
        drop(held);
        0
    })
}
export!("ibv_destroy_srq" = destroy_srq);

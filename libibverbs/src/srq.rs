//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_destroy_srq`, over rverbs' [`Srq`]; posting to
//! one is the data path's (`recv.rs`).
//!
//! Lifetimes as libibverbs has them: the kernel refuses DESTROY_SRQ while a
//! QP takes its receives from the SRQ, so the box counts those QPs and
//! refuses with `EBUSY`.

use crate::abi::*;
use crate::async_event::{register, retire_async, Kind};
use crate::context::CtxBox;
use crate::convert::c_srq_attr;
use crate::guard;
use crate::obj::{destroy, CObject, Held, Parent, Users};
use crate::pd::PdBox;
use crate::spin::{Spin, SpinGuard};
use crate::{errno_of, export, lock, member, null_errno, ret_errno};
use rverbs::Srq;
use std::cell::UnsafeCell;
use std::ffi::c_int;

#[repr(C)]
pub(crate) struct SrqBox {
    /// In an UnsafeCell: `events_completed` changes while C holds the
    /// pointer and other threads hold shared references to the box.
    c: UnsafeCell<IbvSrq>,
    /// Posting takes `&mut Srq`; the C API lets threads post to one SRQ
    /// concurrently, so a lock per SRQ (rdma-core's rxe takes a spinlock
    /// per queue for the same reason).
    srq: Spin<Srq>,
    pd: Held<PdBox>,
    /// SGEs per receive, as granted: posts are checked against it before
    /// their SGE arrays are read.
    pub(crate) max_sge: u32,
    /// QPs that take their receives from this SRQ.
    users: Users,
}

// SAFETY: repr(C) with the ibv_srq (in its UnsafeCell) first; handed out
// only by create_srq.
unsafe impl CObject for SrqBox {
    type C = IbvSrq;
}

impl Parent for SrqBox {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl SrqBox {
    /// The SRQ, locked (see the field).
    pub(crate) fn lock(&self) -> SpinGuard<'_, Srq> {
        lock(&self.srq)
    }
}

/// `ibv_create_srq`: NULL + errno on failure; on success the granted
/// depth and SGEs are written back into `init->attr`, as rdma-core does.
unsafe extern "C" fn create_srq(p: *mut IbvPd, init: *mut IbvSrqInitAttr) -> *mut IbvSrq {
    guard::null(|| {
        // SAFETY: a PD of ours and a writable init attr (C contract).
        let (Some(pd), Some(a)) = (unsafe { PdBox::of(p) }, unsafe { init.as_mut() }) else {
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
        let b = SrqBox {
            c: UnsafeCell::new(c),
            srq: Spin::new(srq),
            pd: Held::new(pd),
            max_sge: a.attr.max_sge,
            users: Users::default(),
        }
        .into_c();
        // Its async events (SRQ_LIMIT_REACHED, SRQ_ERR) name this C object.
        register(Kind::Srq, handle, b.cast());
        b
    })
}
export!("ibv_create_srq" = create_srq);

/// `ibv_modify_srq`: 0 or an errno. The limit (`IBV_SRQ_LIMIT`) is armed;
/// resizing (`IBV_SRQ_MAX_WR`) is refused with `EOPNOTSUPP`, as the Rust
/// API does not offer it (see `Srq::query`).
unsafe extern "C" fn modify_srq(s: *mut IbvSrq, attr: *mut IbvSrqAttr, mask: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract).
        let Some(b) = (unsafe { SrqBox::of(s) }) else {
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
            if let Err(e) = b.lock().set_limit(limit) {
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
        let Some(b) = (unsafe { SrqBox::of(s) }) else {
            return ret_errno(libc::EINVAL);
        };
        if attr.is_null() {
            return ret_errno(libc::EINVAL);
        }
        match b.lock().query() {
            Ok(q) => {
                // SAFETY: attr is a writable ibv_srq_attr (C contract, non-NULL).
                unsafe { attr.write(c_srq_attr(&q)) };
                0
            }
            Err(e) => ret_errno(errno_of(&e)),
        }
    })
}
export!("ibv_query_srq" = query_srq);

/// `ibv_destroy_srq`: `EBUSY` while a QP uses it, as the kernel answers;
/// else it waits, as libibverbs does, for the async events handed out for
/// it to be acknowledged, and goes.
unsafe extern "C" fn destroy_srq(s: *mut IbvSrq) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract), destroyed once.
        unsafe { destroy(s, retire) }
    })
}
export!("ibv_destroy_srq" = destroy_srq);

/// Decides `ibv_destroy_srq`: once no async event handed out for it is
/// unacknowledged, it leaves the registry, and no reader of the async fd
/// is between reading an event and counting it until `DESTROY_SRQ` has
/// dropped those still queued (the guard returned).
fn retire(b: &SrqBox) -> Result<impl Sized, c_int> {
    b.users.none()?;
    // SAFETY: the context outlives its SRQs (C contract: closed last).
    let ctx = unsafe { CtxBox::of(b.pd.get().c.context) };
    let handle = b.lock().user_handle();
    Ok(retire_async(Kind::Srq, handle, ctx))
}

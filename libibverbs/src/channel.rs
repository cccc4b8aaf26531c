//! Completion channels: `ibv_create_comp_channel`,
//! `ibv_destroy_comp_channel`, and `ibv_get_cq_event`, which reads one
//! (`ibv_ack_cq_events` takes a CQ: `cq.rs`).

use crate::abi::*;
use crate::async_event::{nothing_yet, take_comp_event, try_counted};
use crate::cancel::{self, Step};
use crate::context::CtxBox;
use crate::guard;
use crate::obj::{destroy, CObject, Parent, Users};
use crate::{errno_of, export, minus1_errno, null_errno};
use rverbs::CompChannel;
use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;
use std::sync::Mutex;

#[repr(C)]
pub(crate) struct ChanBox {
    c: IbvCompChannel,
    pub(crate) ch: CompChannel,
    /// The CQs that report to it.
    users: Users,
    /// Held while an event is read and counted, and while a CQ's destroy
    /// decides and destroys (`async_event::try_counted`).
    pub(crate) reading: Mutex<()>,
}

// SAFETY: repr(C) with the ibv_comp_channel first; handed out only by
// create_comp_channel.
unsafe impl CObject for ChanBox {
    type C = IbvCompChannel;
}

impl Parent for ChanBox {
    fn users(&self) -> &Users {
        &self.users
    }
}

unsafe extern "C" fn create_comp_channel(c: *mut IbvContext) -> *mut IbvCompChannel {
    guard::null(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        match b.ctx.create_comp_channel() {
            Ok(ch) => ChanBox {
                c: IbvCompChannel {
                    context: c,
                    fd: ch.fd().as_raw_fd(),
                    refcnt: 0,
                },
                ch,
                users: Users::default(),
                reading: Mutex::new(()),
            }
            .into_c(),
            Err(e) => null_errno(errno_of(&e)),
        }
    })
}
export!("ibv_create_comp_channel" = create_comp_channel);

/// `ibv_destroy_comp_channel`: `EBUSY` while a CQ reports to it.
unsafe extern "C" fn destroy_comp_channel(ch: *mut IbvCompChannel) -> c_int {
    guard::errno(|| {
        // SAFETY: a channel of ours (C contract), destroyed once.
        unsafe { destroy(ch, |b: &ChanBox| b.users.none()) }
    })
}
export!("ibv_destroy_comp_channel" = destroy_comp_channel);

/// `ibv_get_cq_event`: blocks for the next event on the channel; 0, or -1
/// with errno. Cancellable while it waits, as rdma-core's (`cancel.rs`).
unsafe extern "C" fn get_cq_event(
    ch: *mut IbvCompChannel,
    cq_out: *mut *mut IbvCq,
    ctx_out: *mut *mut c_void,
) -> c_int {
    // SAFETY: forwarded C contract.
    cancel::blocking(move || unsafe { cq_event_step(ch, cq_out, ctx_out) })
}

/// One attempt of `ibv_get_cq_event`.
///
/// # Safety
/// `ch` is NULL or a channel of ours; `cq_out` and `ctx_out` NULL or
/// writable (C contract).
unsafe fn cq_event_step(
    ch: *mut IbvCompChannel,
    cq_out: *mut *mut IbvCq,
    ctx_out: *mut *mut c_void,
) -> Step {
    // SAFETY: a channel of ours (C contract).
    let Some(b) = (unsafe { ChanBox::of(ch) }) else {
        return Step::Done(minus1_errno(libc::EINVAL));
    };
    // The lookup counts the event in the same critical section, so the CQ
    // stays until the program acknowledges it, and it is read under the
    // channel's reading lock, so a destroy sees it counted or not read.
    let read_now = || loop {
        let Some(h) = b.ch.get_event_timeout(0).map_err(|e| errno_of(&e))? else {
            return Ok(None);
        };
        // None: a CQ not registered, which a destroy under this lock leaves
        // no event of; dropped, never handed out.
        if let Some(cq) = take_comp_event(h) {
            return Ok(Some(cq));
        }
    };
    let cq = match try_counted(&b.reading, read_now) {
        Ok(Some(cq)) => cq,
        Ok(None) => return nothing_yet(b.ch.fd().as_raw_fd()),
        Err(e) => return Step::Done(minus1_errno(e)),
    };
    if !cq_out.is_null() {
        // SAFETY: a writable pointer slot (C contract).
        unsafe { *cq_out = cq };
    }
    if !ctx_out.is_null() {
        // SAFETY: cq is live until its event is acknowledged (counted
        // above); its C struct is the box's UnsafeCell, read through the
        // pointer; ctx_out is writable (C contract).
        unsafe { *ctx_out = std::ptr::addr_of!((*cq).cq_context).read() };
    }
    Step::Done(0)
}
export!("ibv_get_cq_event" = get_cq_event);

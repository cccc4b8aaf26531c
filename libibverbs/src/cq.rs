//! Completion queues: `ibv_create_cq`, `ibv_create_cq_ex` (the
//! `verbs_context.create_cq_ex` slot `verbs.h`'s inline calls),
//! `ibv_destroy_cq`, `ibv_resize_cq`, `ibv_ack_cq_events`. Polling is the
//! data path's (`poll.rs`).
//!
//! Every CQ box carries the tail of a `struct ibv_cq_ex` right after its
//! `struct ibv_cq` ([`CqEx`], the box's second field), so `ibv_cq_ex_to_cq`
//! (a cast in `verbs.h`) and every `ibv_cq` verb work on it. Both are in
//! `UnsafeCell`s: members change (`cqe`, the event counters, the current
//! completion's `status` and `wr_id`) while C holds the pointer and other
//! threads hold shared references to the box.

use crate::abi::*;
use crate::async_event::{ack_comp_events, register, retire_holding, Kind};
use crate::channel::ChanBox;
use crate::context::CtxBox;
use crate::guard;
use crate::obj::{destroy, CObject, Held, Parent, Users};
use crate::spin::Spin;
use crate::{errno_of, export, lock, member, null_errno, ret_errno};
use rverbs::{Cq, Wc};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::AtomicUsize;

#[repr(C)]
pub(crate) struct CqBox {
    pub(crate) c: UnsafeCell<IbvCq>,
    /// The rest of `struct ibv_cq_ex`, right after the `ibv_cq` as C
    /// expects of a CQ it got from `ibv_create_cq_ex`.
    pub(crate) ex: CqEx,
    pub(crate) cq: Spin<Cq>,
    /// The thread whose poll session (`ibv_start_poll` to `ibv_end_poll`)
    /// holds `cq`, as [`thread_token`], or 0: its `ibv_req_notify_cq` in
    /// between uses the CQ it holds (rdma-core's rxe arms through a
    /// command, under no lock).
    pub(crate) poller: AtomicUsize,
    /// rverbs' user handle: what completion and async events name.
    handle: u64,
    chan: Option<Held<ChanBox>>,
    /// The QPs that complete on it.
    users: Users,
}

// SAFETY: repr(C) with the ibv_cq (in its UnsafeCell) first; handed out
// only by new_cq.
unsafe impl CObject for CqBox {
    type C = IbvCq;
}

impl Parent for CqBox {
    fn users(&self) -> &Users {
        &self.users
    }
}

/// What a CQ box carries for the `ibv_cq_ex` view (its second field).
#[repr(C)]
pub(crate) struct CqEx {
    c: UnsafeCell<IbvCqExTail>,
    /// The completion the `read_*` slots report.
    pub(crate) cur: Spin<Wc>,
}

impl CqEx {
    /// The tail of a CQ whose context gives these slots.
    fn new(ops: IbvCqExOps) -> CqEx {
        CqEx {
            c: UnsafeCell::new(IbvCqExTail {
                comp_mask: 0,
                status: 0,
                wr_id: 0,
                ops,
            }),
            cur: Spin::new(Wc::default()),
        }
    }

    /// Makes `w` the current completion: what the `read_*` slots report,
    /// and the two members C reads directly.
    pub(crate) fn publish(&self, w: &Wc) {
        *lock(&self.cur) = *w;
        let t = self.c.get();
        // SAFETY: `t` points into this live struct, through its
        // UnsafeCell, so writing while C or another thread holds a pointer
        // or a shared reference is allowed; only this CQ's poller writes
        // these members (the polling API is one thread per CQ, C contract).
        unsafe {
            std::ptr::addr_of_mut!((*t).status).write(w.status.0 as c_int);
            std::ptr::addr_of_mut!((*t).wr_id).write(w.wr_id);
        }
    }
}

/// A CQ of `cqe` entries on the context `c` (its box `b`), reporting to
/// `channel` (NULL: none): `ibv_create_cq`, and `ibv_create_cq_ex` once
/// its request is read. NULL + errno on failure.
///
/// # Safety
/// `channel` is NULL or a channel of ours on this context (C contract).
unsafe fn new_cq(
    c: *mut IbvContext,
    b: &CtxBox,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    if cqe <= 0 || comp_vector < 0 {
        return null_errno(libc::EINVAL);
    }
    // SAFETY: NULL or a channel of ours (the caller's contract).
    let chan = unsafe { ChanBox::of(channel) };
    let cq = match b
        .ctx
        .create_cq(cqe as u32, chan.map(|c| &c.ch), comp_vector as u32)
    {
        Ok(cq) => cq,
        Err(e) => return null_errno(errno_of(&e)),
    };
    let handle = cq.user_handle();
    let granted = cq.cqe().min(c_int::MAX as u32) as c_int;
    let p = CqBox {
        c: UnsafeCell::new(IbvCq {
            context: c,
            channel,
            cq_context,
            handle: 0,
            cqe: granted,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            comp_events_completed: 0,
            async_events_completed: 0,
        }),
        ex: CqEx::new(b.ex_ops.cq),
        cq: Spin::new(cq),
        poller: AtomicUsize::new(0),
        handle,
        chan: chan.map(Held::new),
        users: Users::default(),
    }
    .into_c();
    register(Kind::Cq, handle, p.cast());
    p
}

unsafe extern "C" fn create_cq(
    c: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    guard::null(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        // SAFETY: NULL or a channel of ours (C contract).
        unsafe { new_cq(c, b, cqe, cq_context, channel, comp_vector) }
    })
}
export!("ibv_create_cq" = create_cq);

/// What `ibv_create_cq_ex` asks for: (cqe, cq_context, channel,
/// comp_vector).
type CqInit = (c_int, *mut c_void, *mut IbvCompChannel, c_int);

/// Reads the caller's `ibv_cq_init_attr_ex` member by member: those every
/// version has, and `flags` only if `comp_mask` names it (a program built
/// against older headers passes a shorter struct). Timestamps, CVLAN, flow
/// tags, TM info, creation flags and parent domains are refused with
/// `EOPNOTSUPP`.
///
/// # Safety
/// `a` points to a readable struct holding the members up to `comp_mask`
/// and each one `comp_mask` names (C contract).
unsafe fn read_cq_init_ex(a: *const IbvCqInitAttrEx) -> Result<CqInit, c_int> {
    // SAFETY: members every version has (the caller's contract).
    let (cqe, context, channel, vector, wc_flags, mask) = unsafe {
        (
            member!(a, cqe),
            member!(a, cq_context),
            member!(a, channel),
            member!(a, comp_vector),
            member!(a, wc_flags),
            member!(a, comp_mask),
        )
    };
    if wc_flags & !WC_STANDARD_FLAGS != 0 || mask & !CQ_INIT_ATTR_FLAGS != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // IBV_CREATE_CQ_ATTR_SINGLE_THREADED is taken (rdma-core's rxe
    // ignores it, its mlx5 drops its lock for it; ours keeps the lock,
    // which serves one thread as well); IGNORE_OVERRUN is not offered.
    if mask & CQ_INIT_ATTR_FLAGS != 0
        // SAFETY: read only when comp_mask names it (short-circuit).
        && unsafe { member!(a, flags) } & !CREATE_CQ_SINGLE_THREADED != 0
    {
        return Err(libc::EOPNOTSUPP);
    }
    let cqe = c_int::try_from(cqe).map_err(|_| libc::EINVAL)?;
    let vector = c_int::try_from(vector).map_err(|_| libc::EINVAL)?;
    Ok((cqe, context, channel, vector))
}

/// `verbs_context.create_cq_ex`: a CQ of `cqe` entries on `channel`,
/// reporting the standard completion fields ([`read_cq_init_ex`]).
pub(crate) unsafe extern "C" fn create_cq_ex(
    c: *mut IbvContext,
    a: *mut IbvCqInitAttrEx,
) -> *mut IbvCq {
    guard::null(|| {
        if a.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a readable init attr (C contract, non-NULL).
        let (cqe, context, channel, vector) = match unsafe { read_cq_init_ex(a) } {
            Ok(init) => init,
            Err(e) => return null_errno(e),
        };
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        // SAFETY: NULL or a channel of ours (C contract).
        unsafe { new_cq(c, b, cqe, context, channel, vector) }
    })
}

/// `ibv_destroy_cq`: `EBUSY` while a QP completes on it; else it waits,
/// as libibverbs does, for the completion and async events handed out for
/// it to be acknowledged, and goes.
unsafe extern "C" fn destroy_cq(c: *mut IbvCq) -> c_int {
    guard::errno(|| {
        // SAFETY: a CQ of ours (C contract), destroyed once.
        unsafe { destroy(c, retire) }
    })
}
export!("ibv_destroy_cq" = destroy_cq);

/// Decides `ibv_destroy_cq`: once no event handed out for the CQ is
/// unacknowledged, it leaves the registry, and no reader of its channel
/// or of the async fd is between reading an event and counting it until
/// `DESTROY_CQ` has dropped those still queued (the guards returned).
fn retire(b: &CqBox) -> Result<impl Sized, c_int> {
    b.users.none()?;
    // A second hold on the channel, let go after the channel's lock (the
    // tuple's fields drop in order): the box's own hold goes with the box,
    // before the locks, and a destroy of the channel on another thread,
    // which it would then no longer refuse, could free the lock this
    // thread still has to let go.
    let chan = b.chan.as_ref().map(|h| Held::new(h.get()));
    // SAFETY: the context outlives its CQs (C contract: closed last); its
    // pointer is written once, at creation.
    let ctx = unsafe { CtxBox::of((*b.c.get()).context) };
    let chan_ptr = chan.as_ref().map(Held::ptr);
    let locks = retire_holding(Kind::Cq, b.handle, || {
        // SAFETY: the channel is live: `chan` holds it until these go.
        let ch = chan_ptr.map(|ch| unsafe { &*ch });
        (
            ch.map(|ch| lock(&ch.reading)),
            ctx.map(|x| lock(&x.async_reading)),
        )
    });
    Ok((locks, chan))
}

/// `ibv_resize_cq` (`RESIZE_CQ`): 0 or an errno; on success `cq->cqe` is
/// the new size, as libibverbs sets it.
unsafe extern "C" fn resize_cq(c: *mut IbvCq, cqe: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { CqBox::of(c) }) else {
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

/// `ibv_ack_cq_events`: rverbs counts events as it reads them; this keeps
/// the C-visible counter, and the count `ibv_destroy_cq` waits for. Both in
/// one critical section, after which the CQ is not touched: a destroy
/// waiting for this acknowledgement may free it at once.
unsafe extern "C" fn ack_cq_events(c: *mut IbvCq, n: c_uint) {
    guard::void(|| {
        // SAFETY: a CQ of ours (C contract), live until its events are
        // acknowledged.
        if let Some(b) = unsafe { CqBox::of(c) } {
            ack_comp_events(b.handle, n);
        }
    })
}
export!("ibv_ack_cq_events" = ack_cq_events);

/// A number for the calling thread, never 0, that no other live thread
/// has: the address of a thread-local.
pub(crate) fn thread_token() -> usize {
    thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.with(|t| std::ptr::from_ref(t) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Reads member `off` of the tail at `p` as C does: through its own
    /// pointer, at the member's offset.
    fn c_reads<T: Copy>(p: *mut CqEx, off: usize) -> T {
        // SAFETY: p is a live CqEx and `off` the offset of a T in its tail.
        unsafe {
            p.cast::<u8>()
                .add(offset_of!(CqEx, c) + off)
                .cast::<T>()
                .read()
        }
    }

    /// `status` and `wr_id` are written where C reads them while a verb
    /// holds a shared reference to the box: C's pointer and that
    /// reference stay valid together (Miri checks the aliasing).
    #[test]
    fn a_polled_completion_lands_where_c_reads_it() {
        // SAFETY: slots are code pointers; NULL ones are valid values (no
        // test calls them).
        let ops: IbvCqExOps = unsafe { std::mem::zeroed() };
        let p = Box::into_raw(Box::new(CqEx::new(ops)));
        // SAFETY: live until it is freed at the end.
        let ex = unsafe { &*p };
        for (wr_id, status) in [(1u64, 0u32), (2, 5)] {
            ex.publish(&Wc {
                wr_id,
                status: rverbs::WcStatus(status),
                ..Wc::default()
            });
            let st: c_int = c_reads(p, offset_of!(IbvCqExTail, status));
            let id: u64 = c_reads(p, offset_of!(IbvCqExTail, wr_id));
            assert_eq!((st, id), (status as c_int, wr_id));
        }
        assert_eq!(lock(&ex.cur).wr_id, 2, "what the read_* slots report");
        // SAFETY: made by Box::into_raw above; `ex` is not used after.
        drop(unsafe { Box::from_raw(p) });
    }

    /// A program built against older headers passes an
    /// `ibv_cq_init_attr_ex` that ends before `parent_domain`, and sets
    /// `flags` only when `comp_mask` names it: nothing else is read (Miri
    /// reports a read past the caller's bytes or of an unset member).
    #[test]
    fn create_cq_ex_reads_only_the_members_comp_mask_names() {
        let a = crate::testing::Partial::<IbvCqInitAttrEx>::new(offset_of!(
            IbvCqInitAttrEx,
            parent_domain
        ));
        let p = a.ptr();
        let null = std::ptr::null_mut();
        // SAFETY: every member written lies before parent_domain.
        unsafe {
            crate::put!(
                p,
                cqe = 16,
                cq_context = null,
                channel = null.cast(),
                comp_vector = 0,
                wc_flags = WC_STANDARD_FLAGS,
                comp_mask = 0
            );
        }
        // SAFETY: comp_mask names no optional member.
        let got = unsafe { read_cq_init_ex(p) };
        assert_eq!(got, Ok((16, null, null.cast(), 0)));
        // SAFETY: flags lies before parent_domain.
        unsafe { crate::put!(p, comp_mask = CQ_INIT_ATTR_FLAGS, flags = 1) };
        // SAFETY: comp_mask names flags, which is set.
        let got = unsafe { read_cq_init_ex(p) };
        assert_eq!(
            got,
            Ok((16, null, null.cast(), 0)),
            "SINGLE_THREADED is taken"
        );
        // SAFETY: as above.
        unsafe { crate::put!(p, comp_mask = CQ_INIT_ATTR_FLAGS, flags = 2) };
        // SAFETY: as above.
        let got = unsafe { read_cq_init_ex(p) };
        assert_eq!(got, Err(libc::EOPNOTSUPP), "IGNORE_OVERRUN is refused");
    }

    /// The tail lies in a CQ box where C finds `struct ibv_cq_ex`'s
    /// members after those it shares with `struct ibv_cq` (the tail itself
    /// is checked against `verbs.h` in `abi/layout.rs`).
    #[test]
    // Miri cannot run the C compiler.
    #[cfg_attr(miri, ignore)]
    fn structs_match_verbs_h() {
        let at = offset_of!(CqBox, ex) + offset_of!(CqEx, c);
        let checks = [
            ("offsetof(struct ibv_cq_ex, comp_mask)".to_string(), at),
            (
                "sizeof(struct ibv_cq_ex)".to_string(),
                at + size_of::<IbvCqExTail>(),
            ),
        ];
        crate::ctest::assert_c_values("cq-ex", &["infiniband/verbs.h"], &checks);
    }
}

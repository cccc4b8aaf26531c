//! PDs, MRs, completion channels, CQs and QPs: each C struct the first
//! field of a box that owns the rverbs object.
//!
//! Lifetimes as libibverbs has them: the kernel refuses to destroy a PD
//! with MRs or QPs, a CQ with QPs, a channel with CQs (`EBUSY`); rverbs'
//! objects instead keep their parents alive, so the boxes count their
//! C-side users and refuse the same way.
//!
//! A destroy answers 0 only once the kernel object is gone; when it is
//! refused, the errno is returned and the C object stays, as in rdma-core
//! (its memory may still be reached by the device or by peers). Where
//! rverbs destroys by `Drop` alone, the kernel's refusals are foreseen
//! exactly instead: a QP attached to multicast groups (`EBUSY`, as
//! `uverbs_free_qp` answers), and every user count above. See `dereg_mr`
//! for the one refusal that cannot be foreseen (an MR with windows bound).
//!
//! The C structs of CQs and QPs are in `UnsafeCell`s: members of them
//! change (a QP's `state`, a CQ's event counters and `cqe`) while C holds
//! their pointers and other threads hold shared references to the boxes.

use crate::abi::*;
use crate::device::ctx_of;
use crate::guard;
use crate::{errno_of, export, member, null_errno, ret_errno, set_errno};
use rverbs::{Access, CompChannel, Cq, External, Mr, Mtu, Pd, Qp};
use rverbs::{QpAttr, QpCaps, QpInit, QpState, QpType};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic cannot leave these objects half-updated (no panics while
    // held): a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Refuses to destroy an object still in use, as the kernel does.
fn busy(users: &AtomicUsize) -> bool {
    users.load(Ordering::Acquire) != 0
}

#[repr(C)]
pub(crate) struct PdBox {
    pub(crate) c: IbvPd,
    pub(crate) pd: Pd,
    /// MRs, QPs, AHs, SRQs and MWs on this PD (the kernel refuses
    /// DEALLOC_PD while any exists).
    pub(crate) users: AtomicUsize,
}

pub(crate) unsafe fn pd_of<'a>(p: *mut IbvPd) -> Option<&'a PdBox> {
    // SAFETY: PDs come only from alloc_pd (C contract: not deallocated);
    // `c` is the first field.
    unsafe { p.cast::<PdBox>().as_ref() }
}

unsafe extern "C" fn alloc_pd(c: *mut IbvContext) -> *mut IbvPd {
    guard::null(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        match b.ctx.alloc_pd() {
            Ok(pd) => Box::into_raw(Box::new(PdBox {
                c: IbvPd {
                    context: c,
                    handle: 0,
                },
                pd,
                users: AtomicUsize::new(0),
            }))
            .cast(),
            Err(e) => null_errno(errno_of(&e)),
        }
    })
}
export!("ibv_alloc_pd" = alloc_pd);

/// `ibv_dealloc_pd`: `EBUSY` while any MR (a refused one too), QP, AH,
/// SRQ or window of ours is on it, which is when the kernel refuses; else
/// the PD goes (`DEALLOC_PD` once rverbs' last reference does: a refusal
/// there cannot be reported, as rverbs destroys by `Drop`).
unsafe extern "C" fn dealloc_pd(p: *mut IbvPd) -> c_int {
    guard::errno(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(b) = (unsafe { pd_of(p) }) else {
            return ret_errno(libc::EINVAL);
        };
        if busy(&b.users) {
            return ret_errno(libc::EBUSY);
        }
        // SAFETY: made by Box::into_raw in alloc_pd; unused (checked above).
        drop(unsafe { Box::from_raw(p.cast::<PdBox>()) });
        0
    })
}
export!("ibv_dealloc_pd" = dealloc_pd);

#[repr(C)]
struct MrBox {
    c: IbvMr,
    mr: Mutex<MrState>,
    pd: *const PdBox,
}

/// An MR of the C API, as far as the kernel is concerned.
enum MrState {
    Registered(Mr<External>),
    /// The kernel refused `DEREG_MR` with this errno: the MR is still
    /// registered (its keys still reach the memory), but rverbs' `Mr` went
    /// with the refusal, so it cannot be asked again.
    Refused(c_int),
}

/// `IBV_ACCESS_OPTIONAL_RANGE`: hints the device may ignore.
const ACCESS_OPTIONAL: u32 = 0x3ff0_0000;

unsafe fn reg(
    p: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    // SAFETY: a PD of ours (C contract).
    let Some(b) = (unsafe { pd_of(p) }) else {
        return null_errno(libc::EINVAL);
    };
    if iova != addr as u64 {
        // rverbs registers memory at its own address only.
        return null_errno(libc::EOPNOTSUPP);
    }
    let Some(access) = Access::from_bits(access & !ACCESS_OPTIONAL) else {
        return null_errno(libc::EINVAL);
    };
    // SAFETY: the C caller of ibv_reg_mr promises what register_raw asks:
    // the range stays mapped until ibv_dereg_mr, and C code has no Rust
    // references to it.
    let mr = match unsafe { b.pd.register_raw(addr.cast(), len, access) } {
        Ok(m) => m,
        Err(e) => return null_errno(errno_of(&e)),
    };
    b.users.fetch_add(1, Ordering::AcqRel);
    let c = IbvMr {
        context: b.c.context,
        pd: p,
        addr,
        length: len,
        handle: 0,
        lkey: mr.lkey(),
        rkey: mr.rkey(),
    };
    Box::into_raw(Box::new(MrBox {
        c,
        mr: Mutex::new(MrState::Registered(mr)),
        pd: b,
    }))
    .cast()
}

unsafe extern "C" fn reg_mr(
    p: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut IbvMr {
    guard::null(|| {
        // SAFETY: forwarded C contract.
        unsafe { reg(p, addr, len, addr as u64, access as c_uint) }
    })
}
export!("ibv_reg_mr" = reg_mr);

unsafe extern "C" fn reg_mr_iova2(
    p: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    guard::null(|| {
        // SAFETY: forwarded C contract.
        unsafe { reg(p, addr, len, iova, access) }
    })
}
export!("ibv_reg_mr_iova2" = reg_mr_iova2);

unsafe extern "C" fn reg_mr_iova(
    p: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    guard::null(|| {
        // SAFETY: forwarded C contract.
        unsafe { reg(p, addr, len, iova, access as c_uint) }
    })
}
export!("ibv_reg_mr_iova" = reg_mr_iova);

/// `DEREG_MR` of the MR in `state`: `Ok` once the kernel has agreed, or
/// the errno, `state` keeping what is left.
fn deregister(state: &mut MrState) -> Result<(), c_int> {
    use rverbs::DeregisterError as D;
    let mr = match std::mem::replace(state, MrState::Refused(libc::EINVAL)) {
        MrState::Registered(mr) => mr,
        MrState::Refused(e) => {
            *state = MrState::Refused(e);
            return Err(e);
        }
    };
    match mr.deregister() {
        Ok(_) => Ok(()),
        // Neither happens here (the C MR is this library's only handle,
        // and it binds windows by work request), but each leaves the MR.
        Err(D::Shared(mr)) => {
            *state = MrState::Registered(mr);
            Err(libc::EBUSY)
        }
        Err(D::Windows(mr, _)) => {
            *state = MrState::Registered(mr);
            Err(libc::EINVAL)
        }
        Err(D::Kernel(mr, e)) => {
            *state = MrState::Registered(mr);
            Err(errno_of(&e))
        }
    }
}

/// `ibv_dereg_mr`: 0 once the kernel has deregistered the MR; else its
/// errno, and the MR stays (rxe refuses with `EINVAL` while a window is
/// bound to it: the program must not free the memory then). A later call,
/// once the window is gone, deregisters it, as with rdma-core.
unsafe extern "C" fn dereg_mr(m: *mut IbvMr) -> c_int {
    guard::errno(|| {
        // SAFETY: an MR of ours (C contract); `c` is the first field.
        let Some(b) = (unsafe { m.cast::<MrBox>().as_ref() }) else {
            return ret_errno(libc::EINVAL);
        };
        if let Err(e) = deregister(&mut lock(&b.mr)) {
            return ret_errno(e);
        }
        // SAFETY: the PD outlives its MRs: dealloc_pd refuses while users > 0.
        unsafe { (*b.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: made by Box::into_raw in reg; deregistered now, and the C
        // caller deregisters it once.
        drop(unsafe { Box::from_raw(m.cast::<MrBox>()) });
        0
    })
}
export!("ibv_dereg_mr" = dereg_mr);

#[repr(C)]
pub(crate) struct ChanBox {
    c: IbvCompChannel,
    ch: CompChannel,
    users: AtomicUsize,
    /// Held while an event is read and counted, and while a CQ's destroy
    /// decides and destroys (`async_event::read_counted`).
    reading: Mutex<()>,
}

unsafe extern "C" fn create_comp_channel(c: *mut IbvContext) -> *mut IbvCompChannel {
    guard::null(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        match b.ctx.create_comp_channel() {
            Ok(ch) => Box::into_raw(Box::new(ChanBox {
                c: IbvCompChannel {
                    context: c,
                    fd: ch.fd().as_raw_fd(),
                    refcnt: 0,
                },
                ch,
                users: AtomicUsize::new(0),
                reading: Mutex::new(()),
            }))
            .cast(),
            Err(e) => null_errno(errno_of(&e)),
        }
    })
}
export!("ibv_create_comp_channel" = create_comp_channel);

unsafe extern "C" fn destroy_comp_channel(ch: *mut IbvCompChannel) -> c_int {
    guard::errno(|| {
        // SAFETY: a channel of ours (C contract); `c` is the first field.
        let Some(b) = (unsafe { ch.cast::<ChanBox>().as_ref() }) else {
            return ret_errno(libc::EINVAL);
        };
        if busy(&b.users) {
            return ret_errno(libc::EBUSY);
        }
        // SAFETY: made by Box::into_raw; no CQ uses it (checked above).
        drop(unsafe { Box::from_raw(ch.cast::<ChanBox>()) });
        0
    })
}
export!("ibv_destroy_comp_channel" = destroy_comp_channel);

#[repr(C)]
pub(crate) struct CqBox {
    pub(crate) c: UnsafeCell<IbvCq>,
    /// The rest of `struct ibv_cq_ex`, right after the `ibv_cq` as C
    /// expects of a CQ it got from `ibv_create_cq_ex`.
    pub(crate) ex: crate::cq_ex::CqEx,
    pub(crate) cq: Mutex<Cq>,
    /// rverbs' user handle: what completion and async events name.
    handle: u64,
    chan: *const ChanBox,
    users: AtomicUsize,
}

pub(crate) unsafe fn cq_of<'a>(c: *mut IbvCq) -> Option<&'a CqBox> {
    // SAFETY: CQs come only from create_cq (C contract: not destroyed);
    // `c` is the first field.
    unsafe { c.cast::<CqBox>().as_ref() }
}

pub(crate) unsafe extern "C" fn create_cq(
    c: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    guard::null(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        if cqe <= 0 || comp_vector < 0 {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: NULL or a channel of ours (C contract).
        let chan = unsafe { channel.cast::<ChanBox>().as_ref() };
        let cq = match b
            .ctx
            .create_cq(cqe as u32, chan.map(|c| &c.ch), comp_vector as u32)
        {
            Ok(cq) => cq,
            Err(e) => return null_errno(errno_of(&e)),
        };
        let handle = cq.user_handle();
        let granted = cq.cqe().min(c_int::MAX as u32) as c_int;
        let p = Box::into_raw(Box::new(CqBox {
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
            ex: crate::cq_ex::CqEx::new(),
            cq: Mutex::new(cq),
            handle,
            chan: chan.map_or(std::ptr::null(), std::ptr::from_ref),
            users: AtomicUsize::new(0),
        }));
        if let Some(ch) = chan {
            ch.users.fetch_add(1, Ordering::AcqRel);
        }
        crate::async_event::register(crate::async_event::Kind::Cq, handle, p.cast());
        p.cast()
    })
}
export!("ibv_create_cq" = create_cq);

unsafe extern "C" fn destroy_cq(c: *mut IbvCq) -> c_int {
    guard::errno(|| {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { cq_of(c) }) else {
            return ret_errno(libc::EINVAL);
        };
        if busy(&b.users) {
            return ret_errno(libc::EBUSY);
        }
        // SAFETY: the channel outlives its CQs (destroy_comp_channel refuses
        // while users > 0).
        let chan = unsafe { b.chan.as_ref() };
        // SAFETY: the context outlives its CQs (C contract: closed last); its
        // pointer is written once, at creation.
        let ctx = unsafe { ctx_of((*b.c.get()).context) };
        // Waits for the completion and async events handed out for it to be
        // acknowledged; no reader of its channel or of the async fd is between
        // reading an event and counting it until DESTROY_CQ has dropped those
        // still queued.
        let held =
            crate::async_event::retire_holding(crate::async_event::Kind::Cq, b.handle, || {
                (
                    chan.map(|ch| lock(&ch.reading)),
                    ctx.map(|x| lock(&x.async_reading)),
                )
            });
        if let Some(ch) = chan {
            ch.users.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: made by Box::into_raw in create_cq; no QP uses it.
        drop(unsafe { Box::from_raw(c.cast::<CqBox>()) });
        drop(held);
        0
    })
}
export!("ibv_destroy_cq" = destroy_cq);

/// `ibv_get_cq_event`: blocks for the next event on the channel; 0, or -1
/// with errno.
unsafe extern "C" fn get_cq_event(
    ch: *mut IbvCompChannel,
    cq_out: *mut *mut IbvCq,
    ctx_out: *mut *mut c_void,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: a channel of ours (C contract).
        let Some(b) = (unsafe { ch.cast::<ChanBox>().as_ref() }) else {
            set_errno(libc::EINVAL);
            return -1;
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
            if let Some(cq) = crate::async_event::take_comp_event(h) {
                return Ok(Some(cq));
            }
        };
        let cq = match crate::async_event::read_counted(b.ch.fd().as_raw_fd(), &b.reading, read_now)
        {
            Ok(cq) => cq,
            Err(e) => {
                set_errno(e);
                return -1;
            }
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
        0
    })
}
export!("ibv_get_cq_event" = get_cq_event);

/// `ibv_ack_cq_events`: rverbs counts events as it reads them; this keeps
/// the C-visible counter, and the count `ibv_destroy_cq` waits for. Both in
/// one critical section, after which the CQ is not touched: a destroy
/// waiting for this acknowledgement may free it at once.
unsafe extern "C" fn ack_cq_events(c: *mut IbvCq, n: c_uint) {
    guard::void(|| {
        // SAFETY: a CQ of ours (C contract), live until its events are
        // acknowledged.
        if let Some(b) = unsafe { cq_of(c) } {
            crate::async_event::ack_comp_events(b.handle, n);
        }
    })
}
export!("ibv_ack_cq_events" = ack_cq_events);

#[repr(C)]
pub(crate) struct QpBox {
    pub(crate) c: UnsafeCell<IbvQp>,
    /// The rest of `struct ibv_qp_ex`, right after the `ibv_qp` as C
    /// expects of a QP it got from `ibv_create_qp_ex`.
    pub(crate) ex: crate::qp_ex::QpEx,
    pub(crate) qp: Mutex<Qp>,
    /// A UD QP (its sends name an AH).
    pub(crate) ud: bool,
    /// The multicast groups (GID, LID) it is attached to, as the kernel
    /// keeps them (`ib_uverbs_attach_mcast`): it refuses to destroy the QP
    /// while any is left.
    pub(crate) mcast: Mutex<Vec<([u8; 16], u16)>>,
    /// What ibv_query_qp reports beyond the state and caps: the attributes
    /// last set by ibv_modify_qp.
    attr: Mutex<IbvQpAttr>,
    init: IbvQpInitAttr,
    pd: *const PdBox,
    send_cq: *const CqBox,
    recv_cq: *const CqBox,
    srq: *const crate::srq::SrqBox,
}

pub(crate) unsafe fn qp_of<'a>(q: *mut IbvQp) -> Option<&'a QpBox> {
    // SAFETY: QPs come only from create_qp (C contract: not destroyed);
    // `c` is the first field.
    unsafe { q.cast::<QpBox>().as_ref() }
}

pub(crate) unsafe extern "C" fn create_qp(p: *mut IbvPd, init: *mut IbvQpInitAttr) -> *mut IbvQp {
    guard::null(|| {
        // SAFETY: forwarded C contract.
        unsafe { new_qp(p, init, |_| crate::qp_ex::QpEx::new()) }
    })
}
export!("ibv_create_qp" = create_qp);

/// `ibv_create_qp`, with the `ibv_qp_ex` tail `ex` makes from the caps
/// granted (complete before the QP can be named by anything else).
///
/// # Safety
/// `p` is a PD of ours and `init` a readable, writable init attr naming
/// CQs (and an SRQ) of ours (C contract).
pub(crate) unsafe fn new_qp(
    p: *mut IbvPd,
    init: *mut IbvQpInitAttr,
    ex: impl FnOnce(&IbvQpCap) -> crate::qp_ex::QpEx,
) -> *mut IbvQp {
    // SAFETY: a PD of ours and a readable init attr (C contract).
    let (Some(pd), Some(a)) = (unsafe { pd_of(p) }, unsafe { init.as_mut() }) else {
        return null_errno(libc::EINVAL);
    };
    let qp_type = match a.qp_type {
        2 => QpType::Rc,
        3 => QpType::Uc,
        4 => QpType::Ud,
        _ => return null_errno(libc::EOPNOTSUPP),
    };
    // SAFETY: NULL or an SRQ of ours (C contract).
    let srq = unsafe { crate::srq::srq_of(a.srq.cast()) };
    // SAFETY: CQs of ours (C contract).
    let (Some(scq), Some(rcq)) = (unsafe { cq_of(a.send_cq) }, unsafe { cq_of(a.recv_cq) }) else {
        return null_errno(libc::EINVAL);
    };
    let caps = QpCaps {
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
    };
    // Lock the CQs (once if they are one) while the QP borrows them;
    // by address, so two threads creating QPs cannot deadlock.
    let made = if std::ptr::eq(scq, rcq) {
        let g = lock(&scq.cq);
        make_qp(pd, qp_type, &g, &g, caps, a.sq_sig_all != 0, srq)
    } else {
        let first_send = (scq as *const CqBox as usize) < (rcq as *const CqBox as usize);
        let (g1, g2) = if first_send {
            let g1 = lock(&scq.cq);
            (g1, lock(&rcq.cq))
        } else {
            let g2 = lock(&rcq.cq);
            (lock(&scq.cq), g2)
        };
        make_qp(pd, qp_type, &g1, &g2, caps, a.sq_sig_all != 0, srq)
    };
    let qp = match made {
        Ok(q) => q,
        Err(e) => return null_errno(errno_of(&e)),
    };
    let g = qp.caps();
    a.cap = IbvQpCap {
        max_send_wr: g.max_send_wr,
        max_recv_wr: g.max_recv_wr,
        max_send_sge: g.max_send_sge,
        max_recv_sge: g.max_recv_sge,
        max_inline_data: g.max_inline_data,
    };
    for users in [&pd.users, &scq.users, &rcq.users] {
        users.fetch_add(1, Ordering::AcqRel);
    }
    if let Some(s) = srq {
        s.users.fetch_add(1, Ordering::AcqRel);
    }
    let c = IbvQp {
        context: pd.c.context,
        qp_context: a.qp_context,
        pd: p,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        handle: 0,
        qp_num: qp.qpn(),
        state: 0,
        qp_type: a.qp_type,
        mutex: libc::PTHREAD_MUTEX_INITIALIZER,
        cond: libc::PTHREAD_COND_INITIALIZER,
        events_completed: 0,
    };
    let handle = qp.user_handle();
    let q = Box::into_raw(Box::new(QpBox {
        c: UnsafeCell::new(c),
        ex: ex(&a.cap),
        qp: Mutex::new(qp),
        ud: qp_type == QpType::Ud,
        mcast: Mutex::new(Vec::new()),
        attr: Mutex::new(IbvQpAttr::default()),
        init: *a,
        pd,
        send_cq: scq,
        recv_cq: rcq,
        srq: srq.map_or(std::ptr::null(), std::ptr::from_ref),
    }));
    crate::async_event::register(crate::async_event::Kind::Qp, handle, q.cast());
    q.cast()
}

fn make_qp(
    pd: &PdBox,
    qp_type: QpType,
    send_cq: &Cq,
    recv_cq: &Cq,
    caps: QpCaps,
    sq_sig_all: bool,
    srq: Option<&crate::srq::SrqBox>,
) -> rverbs::Result<Qp> {
    let srq = srq.map(|s| crate::srq::lock_srq(s));
    // Without reserving the depths on the CQs: libibverbs accepts a QP
    // deeper than its CQ (an overrun becomes IBV_EVENT_CQ_ERR), and C
    // programs (pyverbs' test_qp) rely on it.
    pd.pd.create_qp_accepting_cq_overrun(&QpInit {
        qp_type,
        send_cq,
        recv_cq,
        caps,
        sq_sig_all,
        srq: srq.as_deref(),
    })
}

fn state_of(s: c_int) -> Option<QpState> {
    Some(match s {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return None,
    })
}

fn state_raw(s: QpState) -> c_int {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Sqd => 4,
        QpState::Sqe => 5,
        QpState::Err => 6,
        QpState::Unknown(v) => v as c_int,
    }
}

/// The `ibv_qp_attr_mask` bits this library translates; any other bit
/// (alternate path, migration, rate limit, resizing) is refused.
const MODIFY_KNOWN: c_int = {
    use qp_mask::*;
    STATE
        | CUR_STATE
        | EN_SQD_ASYNC_NOTIFY
        | ACCESS_FLAGS
        | PKEY_INDEX
        | PORT
        | QKEY
        | AV
        | PATH_MTU
        | TIMEOUT
        | RETRY_CNT
        | RNR_RETRY
        | RQ_PSN
        | MAX_QP_RD_ATOMIC
        | MIN_RNR_TIMER
        | SQ_PSN
        | MAX_DEST_RD_ATOMIC
        | DEST_QPN
};

/// `struct ibv_qp_attr` + mask as rverbs' `QpAttr`.
fn qp_attr(a: &IbvQpAttr, mask: c_int) -> Result<QpAttr, c_int> {
    use qp_mask::*;
    if mask & !MODIFY_KNOWN != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let has = |bit: c_int| mask & bit != 0;
    let mut r = QpAttr::default();
    if has(STATE) {
        r.state = Some(state_of(a.qp_state).ok_or(libc::EINVAL)?);
    }
    if has(CUR_STATE) {
        r.cur_state = Some(state_of(a.cur_qp_state).ok_or(libc::EINVAL)?);
    }
    r.en_sqd_async_notify = has(EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify != 0;
    if has(ACCESS_FLAGS) {
        r.access = Some(Access::from_bits(a.qp_access_flags).ok_or(libc::EINVAL)?);
    }
    r.pkey_index = has(PKEY_INDEX).then_some(a.pkey_index);
    r.port = has(PORT).then_some(a.port_num);
    r.qkey = has(QKEY).then_some(a.qkey);
    if has(AV) {
        r.av = Some(crate::ah::ah_attr(&a.ah_attr));
    }
    if has(PATH_MTU) {
        let m = u8::try_from(a.path_mtu).map_err(|_| libc::EINVAL)?;
        r.path_mtu = Some(Mtu::from_raw(m).ok_or(libc::EINVAL)?);
    }
    r.timeout = has(TIMEOUT).then_some(a.timeout);
    r.retry_cnt = has(RETRY_CNT).then_some(a.retry_cnt);
    r.rnr_retry = has(RNR_RETRY).then_some(a.rnr_retry);
    r.rq_psn = has(RQ_PSN).then_some(a.rq_psn);
    r.max_rd_atomic = has(MAX_QP_RD_ATOMIC).then_some(a.max_rd_atomic);
    r.min_rnr_timer = has(MIN_RNR_TIMER).then_some(a.min_rnr_timer);
    r.sq_psn = has(SQ_PSN).then_some(a.sq_psn);
    r.max_dest_rd_atomic = has(MAX_DEST_RD_ATOMIC).then_some(a.max_dest_rd_atomic);
    r.dest_qpn = has(DEST_QPN).then_some(a.dest_qp_num);
    Ok(r)
}

/// Copies into `dst` the members of the `ibv_qp_attr` at `src` that `mask`
/// names, and only those: a caller need not initialise the others (nor
/// the address vector's `grh` unless its `is_global` is set), so they are
/// never read.
///
/// # Safety
/// `src` points to a readable `ibv_qp_attr` whose members `mask` names are
/// initialised (C contract).
unsafe fn copy_masked(src: *const IbvQpAttr, mask: c_int, dst: &mut IbvQpAttr) {
    use qp_mask::*;
    macro_rules! take {
        ($($bit:ident => $f:ident),* $(,)?) => {
            $(if mask & $bit != 0 {
                dst.$f = member!(src, $f);
            })*
        };
    }
    // SAFETY: the caller's contract: mask names every member read.
    unsafe {
        take!(
            STATE => qp_state, CUR_STATE => cur_qp_state,
            EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify, ACCESS_FLAGS => qp_access_flags,
            PKEY_INDEX => pkey_index, PORT => port_num, QKEY => qkey, PATH_MTU => path_mtu,
            TIMEOUT => timeout, RETRY_CNT => retry_cnt, RNR_RETRY => rnr_retry,
            RQ_PSN => rq_psn, MAX_QP_RD_ATOMIC => max_rd_atomic,
            MIN_RNR_TIMER => min_rnr_timer, SQ_PSN => sq_psn,
            MAX_DEST_RD_ATOMIC => max_dest_rd_atomic, DEST_QPN => dest_qp_num,
        );
        if mask & AV != 0 {
            dst.ah_attr = crate::ah::read_ah_attr(std::ptr::addr_of!((*src).ah_attr));
        }
    }
}

/// `ibv_modify_qp`: 0 or an errno (positive), as libibverbs returns.
unsafe extern "C" fn modify_qp(q: *mut IbvQp, a: *mut IbvQpAttr, mask: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { qp_of(q) }) else {
            return ret_errno(libc::EINVAL);
        };
        if a.is_null() {
            return ret_errno(libc::EINVAL);
        }
        let mut attr = IbvQpAttr::default();
        // SAFETY: a readable attr, set where mask says (C contract, non-NULL).
        unsafe { copy_masked(a, mask, &mut attr) };
        let r = match qp_attr(&attr, mask) {
            Ok(r) => r,
            Err(e) => return ret_errno(e),
        };
        if let Err(e) = lock(&b.qp).modify(&r) {
            return ret_errno(errno_of(&e));
        }
        // Remember what was set, for ibv_query_qp.
        let mut keep = lock(&b.attr);
        // SAFETY: attr is a local, wholly initialised struct.
        unsafe { copy_masked(&attr, mask, &mut keep) };
        if mask & qp_mask::STATE != 0 {
            // SAFETY: the C-visible state member, in the box's UnsafeCell,
            // written under the attr lock.
            unsafe { (*b.c.get()).state = attr.qp_state };
        }
        0
    })
}
export!("ibv_modify_qp" = modify_qp);

/// `ibv_query_qp`: the state from the kernel (`QUERY_QP`), the granted
/// caps, and the other attributes as last set through `ibv_modify_qp`.
unsafe extern "C" fn query_qp(
    q: *mut IbvQp,
    out: *mut IbvQpAttr,
    _mask: c_int,
    init: *mut IbvQpInitAttr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { qp_of(q) }) else {
            return ret_errno(libc::EINVAL);
        };
        if out.is_null() || init.is_null() {
            return ret_errno(libc::EINVAL);
        }
        let qp = lock(&b.qp);
        let state = match qp.query_state() {
            Ok(s) => s,
            Err(e) => return ret_errno(errno_of(&e)),
        };
        let g = qp.caps();
        let cap = IbvQpCap {
            max_send_wr: g.max_send_wr,
            max_recv_wr: g.max_recv_wr,
            max_send_sge: g.max_send_sge,
            max_recv_sge: g.max_recv_sge,
            max_inline_data: g.max_inline_data,
        };
        let mut a = *lock(&b.attr);
        a.qp_state = state_raw(state);
        a.cur_qp_state = a.qp_state;
        a.cap = cap;
        let mut i = b.init;
        i.cap = cap;
        // SAFETY: out and init are writable (C contract, non-NULL); the state
        // member is in the box's UnsafeCell, written under the QP's lock.
        unsafe {
            out.write(a);
            init.write(i);
            (*b.c.get()).state = a.qp_state;
        }
        0
    })
}
export!("ibv_query_qp" = query_qp);

unsafe extern "C" fn destroy_qp(q: *mut IbvQp) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours, not yet freed (C contract).
        let Some(b) = (unsafe { qp_of(q) }) else {
            return ret_errno(libc::EINVAL);
        };
        // The kernel's refusal, foreseen: dropping rverbs' Qp would swallow
        // it (and leak the QP the program still holds).
        if !lock(&b.mcast).is_empty() {
            return ret_errno(libc::EBUSY);
        }
        // SAFETY: the PD, and the context, outlive their QPs (dealloc_pd
        // refuses while users > 0; C contract: the context is closed last).
        let ctx = unsafe { ctx_of((*b.pd).c.context) };
        // Waits for async events handed out for it to be acknowledged; no
        // reader of the async fd is between reading an event and counting it
        // until DESTROY_QP has dropped those still queued.
        let handle = lock(&b.qp).user_handle();
        let held = crate::async_event::retire_holding(crate::async_event::Kind::Qp, handle, || {
            ctx.map(|x| lock(&x.async_reading))
        });
        // SAFETY: made by Box::into_raw in create_qp (C contract: once).
        let b = unsafe { Box::from_raw(q.cast::<QpBox>()) };
        // SAFETY: the PD and CQs outlive their QPs (their destroy refuses
        // while users > 0).
        unsafe {
            (*b.pd).users.fetch_sub(1, Ordering::AcqRel);
            (*b.send_cq).users.fetch_sub(1, Ordering::AcqRel);
            (*b.recv_cq).users.fetch_sub(1, Ordering::AcqRel);
            if let Some(s) = b.srq.as_ref() {
                s.users.fetch_sub(1, Ordering::AcqRel);
            }
        }
        drop(b);
        drop(held);
        0
    })
}
export!("ibv_destroy_qp" = destroy_qp);

#[cfg(test)]
mod tests {
    use super::*;

    /// `ibv_modify_qp` reads only the members its mask names (and the
    /// address vector's `grh` only with `is_global`): the caller's others
    /// are left unset here, and Miri reports a read of any of them.
    #[test]
    fn modify_qp_reads_only_the_members_the_mask_names() {
        use qp_mask::*;
        let a = crate::Partial::<IbvQpAttr>::new(std::mem::size_of::<IbvQpAttr>());
        let p = a.ptr();
        // SAFETY: members of the live allocation.
        unsafe {
            crate::put!(p, qp_state = 2, path_mtu = 3, dest_qp_num = 0x11);
            let av = std::ptr::addr_of_mut!((*p).ah_attr);
            crate::put!(
                av,
                dlid = 7,
                sl = 0,
                src_path_bits = 0,
                static_rate = 0,
                is_global = 0,
                port_num = 1
            );
        }
        let mask = STATE | PATH_MTU | DEST_QPN | AV;
        let mut got = IbvQpAttr::default();
        // SAFETY: the members mask names are set.
        unsafe { copy_masked(p, mask, &mut got) };
        assert_eq!((got.qp_state, got.path_mtu, got.dest_qp_num), (2, 3, 0x11));
        assert_eq!((got.ah_attr.dlid, got.ah_attr.port_num), (7, 1));
        let r = qp_attr(&got, mask).expect("translated");
        assert_eq!(r.dest_qpn, Some(0x11));
        assert!(r.av.is_some_and(|av| av.grh.is_none()));
        assert_eq!(r.qkey, None, "not named, not read");
    }
}

//! `ops.post_recv` and `ops.post_srq_recv`, what `verbs.h`'s inline
//! `ibv_post_recv` and `ibv_post_srq_recv` call: each C request's SGE
//! array viewed in place as rverbs slices, the list posted by the walk
//! every post takes (`walk.rs`), under the queue's lock (as `send.rs`
//! says why).

use crate::abi::*;
use crate::convert::{check_sges, sges};
use crate::guard;
use crate::obj::CObject;
use crate::qp::QpBox;
use crate::srq::SrqBox;
use crate::walk::{refusal, refuse_all, walk, Refusal, Step};
use crate::{lock, member};
use rverbs::{Qp, QpState, RecvWr, Srq};
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;

type Recv = RecvWr<'static>;

/// What the walk's stack array of translated receives starts as.
const BLANK: Recv = RecvWr {
    wr_id: 0,
    sges: &[],
};

/// One C receive request in rverbs' form.
///
/// # Safety
/// `w` is a readable request whose SGEs satisfy `ibv_post_recv`'s
/// contract.
unsafe fn recv_wr(w: *const IbvRecvWr, max_sge: u32) -> Result<Step<Recv>, c_int> {
    // SAFETY: a readable request (C contract); every member is set.
    let (wr_id, list, n) = unsafe { (member!(w, wr_id), member!(w, sg_list), member!(w, num_sge)) };
    // Before the SGE array is viewed (see send.rs's send_wr).
    check_sges(n, max_sge)?;
    Ok(Step::Batch(RecvWr {
        wr_id,
        // SAFETY: the caller's SGE list (C contract).
        sges: unsafe { sges(list, n) }?,
    }))
}

/// Receives have no request that must be posted alone.
fn never<Q>(_: &mut Q, _: *const IbvRecvWr) -> Result<(), Refusal> {
    Err((Some(0), libc::EINVAL))
}

/// `ops.post_recv`.
pub(crate) unsafe extern "C" fn post_recv(
    q: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { QpBox::of(q) }) else {
            return libc::EINVAL;
        };
        let mut qp = lock(&b.qp);
        if qp.last_state() == QpState::Reset {
            // As rdma-core's rxe provider (C10-97.2.1): a QP in RESET takes no
            // receives.
            // SAFETY: the caller's slot (C contract), forwarded.
            return unsafe { refuse_all(bad) };
        }
        let max_sge = qp.caps().max_recv_sge;
        // SAFETY: the caller's list and slot (C contract), forwarded.
        unsafe {
            walk(
                &mut *qp,
                wr,
                bad,
                BLANK,
                |w| recv_wr(w, max_sge),
                never,
                |qp: &mut Qp, wrs| qp.post_recv(wrs).map_err(|e| refusal(&e)),
            )
        }
    })
}

/// `ops.post_srq_recv`.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut c_void,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract).
        let Some(b) = (unsafe { SrqBox::of(srq.cast()) }) else {
            return libc::EINVAL;
        };
        // rdma-core's rxe takes an SRQ's list without checking `bad` or
        // clearing it (it writes it only for a refused request): an empty
        // list answers 0, a NULL `bad` is taken (ours then names a refused
        // request to no one, where rdma-core's write would crash), and on
        // success `*bad` is as the caller left it.
        if wr.is_null() {
            return 0;
        }
        let mut own = std::ptr::null_mut();
        let slot = if bad.is_null() { &raw mut own } else { bad };
        // SAFETY: `slot` is writable (C contract, or ours); what it holds
        // may be uninitialised, so it is copied as MaybeUninit.
        let before = unsafe { slot.cast::<MaybeUninit<*mut IbvRecvWr>>().read() };
        let max_sge = b.max_sge;
        let mut s = b.lock();
        // SAFETY: the caller's list and slot (C contract), forwarded.
        let rc = unsafe {
            walk(
                &mut *s,
                wr,
                slot,
                BLANK,
                |w| recv_wr(w, max_sge),
                never,
                |s: &mut Srq, wrs| s.post_recv(wrs).map_err(|e| refusal(&e)),
            )
        };
        if rc == 0 {
            // SAFETY: as above.
            unsafe { slot.cast::<MaybeUninit<*mut IbvRecvWr>>().write(before) };
        }
        rc
    })
}

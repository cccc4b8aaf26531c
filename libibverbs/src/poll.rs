//! Polling, the data path's other half: `ops.poll_cq` and
//! `ops.req_notify_cq`, what `verbs.h`'s inline `ibv_poll_cq` and
//! `ibv_req_notify_cq` call, and the polling API of `struct ibv_cq_ex`
//! (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`, `ibv_wc_read_*`:
//! inlines that call its function pointers).
//!
//! The extended API reads one completion at a time through rverbs'
//! `Cq::poll`; `status` and `wr_id` are written into the C struct as
//! libibverbs does (`CqEx::publish`), the rest is read through the
//! `read_*` slots.

use crate::abi::{IbvCq, IbvCqExC, IbvCqExOps, IbvWc, Slot};
use crate::convert::put_wc;
use crate::cq::{thread_token, CqBox};
use crate::guard;
use crate::obj::CObject;
use crate::{errno_of, lock};
use rverbs::Wc;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::Ordering;

/// `ops.poll_cq`: how many completions were written (negative on error).
///
/// Each completion is copied into the caller's array as the CQ hands it
/// over (on rxe straight from its ring slot; nothing written past the
/// last one returned):
/// `out` may be uninitialised C memory, so it is written through the
/// pointer, element by element, never viewed as a slice.
pub(crate) unsafe extern "C" fn poll_cq(c: *mut IbvCq, n: c_int, out: *mut IbvWc) -> c_int {
    guard::value(-guard::PANICKED, || {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { CqBox::of(c) }) else {
            return -libc::EINVAL;
        };
        // No room answers 0 (whatever `out`), as rdma-core's providers
        // (their loops run while `npolled < ne`), a NULL array EINVAL.
        if n <= 0 {
            return 0;
        }
        if out.is_null() {
            return -libc::EINVAL;
        }
        let mut at = out;
        // poll_each hands at most n completions: the count fits a c_int.
        lock(&b.cq).poll_each(n as usize, |e| {
            // SAFETY: out has room for n entries (C contract) and
            // poll_each hands at most n, so `at` is one of out's n
            // elements; written, not read (it may be uninitialised).
            unsafe {
                put_wc(at, e.wc());
                at = at.add(1);
            }
        }) as c_int
    })
}

/// `ops.req_notify_cq`: 0 or an errno.
pub(crate) unsafe extern "C" fn req_notify_cq(c: *mut IbvCq, solicited_only: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { CqBox::of(c) }) else {
            return libc::EINVAL;
        };
        let r = if b.poller.load(Ordering::Relaxed) == thread_token() {
            // start_poll stores the token once it keeps the lock, end_poll
            // clears it before letting go, and only this thread stores its
            // own token.
            // SAFETY: so this thread's poll session holds the CQ's lock,
            // and no reference that session handed out is in use now.
            unsafe { b.cq.held() }.req_notify(solicited_only != 0)
        } else {
            lock(&b.cq).req_notify(solicited_only != 0)
        };
        match r {
            Ok(()) => 0,
            Err(e) => errno_of(&e),
        }
    })
}

/// The slots of every CQ's `ibv_cq_ex`, for the context's table of a
/// device of `driver`.
pub(crate) fn cq_ex_ops(driver: rverbs::Driver) -> IbvCqExOps {
    // rdma-core's rxe ignores `ibv_poll_cq_attr` (its `cq_start_poll`
    // never reads it); mlx5 refuses a non-zero `comp_mask`.
    let start = match driver {
        rverbs::Driver::Rxe => start_poll::<false> as Slot,
        _ => start_poll::<true> as Slot,
    };
    IbvCqExOps {
        start_poll: start,
        next_poll: next_poll as Slot,
        end_poll: end_poll as Slot,
        read_opcode: read_opcode as Slot,
        read_vendor_err: read_vendor_err as Slot,
        read_byte_len: read_byte_len as Slot,
        read_imm_data: read_imm_data as Slot,
        read_qp_num: read_qp_num as Slot,
        read_src_qp: read_src_qp as Slot,
        read_wc_flags: read_wc_flags as Slot,
        read_slid: read_slid as Slot,
        read_sl: read_sl as Slot,
        read_dlid_path_bits: read_dlid_path_bits as Slot,
        // Not offered (create_cq_ex refuses the flags that ask for them);
        // present so a stray call returns 0, not a crash.
        read_completion_ts: read_zero as Slot,
        read_cvlan: read_zero as Slot,
        read_flow_tag: read_zero as Slot,
        read_tm_info: read_zero as Slot,
        read_completion_wallclock_ns: read_zero as Slot,
    }
}

/// The CQ box of the `ibv_cq_ex` pointer `c`.
///
/// # Safety
/// The pointer C holds is the CQ box's address (this library hands out
/// nothing else); C contract: not destroyed.
unsafe fn box_of<'a>(c: *mut IbvCqExC) -> Option<&'a CqBox> {
    // SAFETY: the caller's contract.
    unsafe { CqBox::of(c.cast::<IbvCq>()) }
}

/// Polls one completion of `cq` (the box `b`'s, whose lock the caller
/// holds) into the current one: 0, or `ENOENT` if the CQ is empty (as
/// `ibv_start_poll`/`ibv_next_poll` report).
fn poll_one(b: &CqBox, cq: &mut rverbs::Cq) -> c_int {
    let mut w = [Wc::default()];
    if cq.poll(&mut w) == 0 {
        return libc::ENOENT;
    }
    b.ex.publish(&w[0]);
    0
}

/// `start_poll`: takes the CQ's lock and keeps it to `end_poll`, as
/// rdma-core's providers hold their CQ lock from `ibv_start_poll` to
/// `ibv_end_poll`: threads polling one CQ so each see their own
/// completions, and the members C reads (`status`, `wr_id`) are written
/// by the holder alone. An empty CQ answers `ENOENT` and lets go: C then
/// calls no `end_poll` (`verbs.h`'s contract).
/// With `CHECK_ATTR`, a non-zero `comp_mask` (none is defined) is
/// `EINVAL`.
unsafe extern "C" fn start_poll<const CHECK_ATTR: bool>(
    c: *mut IbvCqExC,
    attr: *const u32,
) -> c_int {
    guard::errno(|| {
        // SAFETY: NULL or a readable ibv_poll_cq_attr (C contract).
        if CHECK_ATTR && !attr.is_null() && unsafe { attr.read_unaligned() } != 0 {
            return libc::EINVAL;
        }
        // SAFETY: forwarded C contract.
        let Some(b) = (unsafe { box_of(c) }) else {
            return libc::EINVAL;
        };
        // SAFETY: released below when empty, else by end_poll (C calls
        // it exactly once after a start_poll that answered 0); the value
        // is used by this thread's next_poll calls only until then.
        let cq = unsafe { b.cq.hold() };
        let r = poll_one(b, cq);
        if r != 0 {
            // SAFETY: taken above; `cq` is not used again.
            unsafe { b.cq.release() };
        } else {
            b.poller.store(thread_token(), Ordering::Relaxed);
        }
        r
    })
}

/// `next_poll`: the next completion, under the lock `start_poll` took.
unsafe extern "C" fn next_poll(c: *mut IbvCqExC) -> c_int {
    guard::errno(|| {
        // SAFETY: forwarded C contract.
        let Some(b) = (unsafe { box_of(c) }) else {
            return libc::EINVAL;
        };
        // SAFETY: C calls next_poll only between a start_poll that
        // answered 0 and its end_poll, on that thread (verbs.h's
        // contract, rdma-core's too: its providers touch the CQ there
        // under the lock start_poll took), so this thread holds the lock.
        let cq = unsafe { b.cq.held() };
        poll_one(b, cq)
    })
}

/// `end_poll`: lets go of the lock `start_poll` took.
unsafe extern "C" fn end_poll(c: *mut IbvCqExC) {
    guard::void(|| {
        // SAFETY: forwarded C contract.
        if let Some(b) = unsafe { box_of(c) } {
            b.poller.store(0, Ordering::Relaxed);
            // SAFETY: C calls end_poll once after a start_poll that
            // answered 0, on its thread, which holds the lock since.
            unsafe { b.cq.release() };
        }
    })
}

/// The current completion of `c`.
unsafe fn cur(c: *mut IbvCqExC) -> Wc {
    // SAFETY: forwarded C contract (a CQ of ours).
    match unsafe { CqBox::of(c.cast::<IbvCq>()) } {
        Some(b) => *lock(&b.ex.cur),
        None => Wc::default(),
    }
}

unsafe extern "C" fn read_opcode(c: *mut IbvCqExC) -> c_int {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.opcode.0 as c_int
    })
}

unsafe extern "C" fn read_vendor_err(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.vendor_err
    })
}

unsafe extern "C" fn read_byte_len(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.byte_len
    })
}

/// `read_imm_data`, which `ibv_wc_read_invalidated_rkey` calls too (a
/// `verbs.h` inline): the completion's `ex` member as `struct ibv_wc`
/// carries it, the immediate big-endian or the invalidated rkey, whatever
/// the flags (rdma-core's providers read it so).
unsafe extern "C" fn read_imm_data(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        // `ex` is the member `put_wc` copies to `ibv_wc.imm_data`, as is.
        unsafe { cur(c) }.ex
    })
}

unsafe extern "C" fn read_qp_num(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.qp_num
    })
}

unsafe extern "C" fn read_src_qp(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.src_qp
    })
}

unsafe extern "C" fn read_wc_flags(c: *mut IbvCqExC) -> c_uint {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.flags.bits()
    })
}

unsafe extern "C" fn read_slid(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        u32::from(unsafe { cur(c) }.slid)
    })
}

unsafe extern "C" fn read_sl(c: *mut IbvCqExC) -> u8 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.sl
    })
}

/// `read_dlid_path_bits`: as `ibv_poll_cq` reports it (0 on rxe, the
/// CQE's path bits on mlx5).
unsafe extern "C" fn read_dlid_path_bits(c: *mut IbvCqExC) -> u8 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.dlid_path_bits
    })
}

extern "C" fn read_zero(_c: *mut IbvCqExC) -> u64 {
    guard::value(0, || 0)
}

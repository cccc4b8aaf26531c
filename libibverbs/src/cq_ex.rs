//! Extended CQs: `ibv_create_cq_ex` (the `verbs_context.create_cq_ex`
//! slot `verbs.h`'s inline calls) and the polling API of `struct
//! ibv_cq_ex` (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`,
//! `ibv_wc_read_*`: inlines that call its function pointers).
//!
//! As with QPs, every CQ box carries the tail of a `struct ibv_cq_ex`
//! right after its `struct ibv_cq` ([`CqEx`], the box's second field), so
//! `ibv_cq_ex_to_cq` (a cast in `verbs.h`) and every `ibv_cq` verb work on
//! it. Polling reads one completion at a time through rverbs' `Cq::poll`;
//! `status` and `wr_id` are written into the C struct as libibverbs
//! does, the rest is read through the `read_*` slots.
//!
//! The tail is in an `UnsafeCell`: C reads it through its own pointer
//! while other threads may hold a `&CqBox` (any verb on the same CQ), and
//! this module writes `status` and `wr_id` with such a reference in hand.

use crate::abi::{
    IbvCompChannel, IbvContext, IbvCq, IbvCqExC, IbvCqExOps, IbvCqExTail, IbvCqInitAttrEx, Slot,
    CQ_INIT_ATTR_FLAGS, WC_STANDARD_FLAGS,
};
use crate::guard;
use crate::verbs::cq_of;
use crate::{member, null_errno};
use rverbs::Wc;
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Mutex, MutexGuard};

/// What a CQ box carries for the `ibv_cq_ex` view (its second field).
#[repr(C)]
pub(crate) struct CqEx {
    c: UnsafeCell<IbvCqExTail>,
    /// The completion the `read_*` slots report.
    cur: Mutex<Wc>,
}

impl CqEx {
    pub(crate) fn new() -> CqEx {
        CqEx {
            c: UnsafeCell::new(IbvCqExTail {
                comp_mask: 0,
                status: 0,
                wr_id: 0,
                ops: IbvCqExOps {
                    start_poll: start_poll as Slot,
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
                    // Not offered (create_cq_ex refuses the flags that ask for
                    // them); present so a stray call returns 0, not a crash.
                    read_completion_ts: read_zero as Slot,
                    read_cvlan: read_zero as Slot,
                    read_flow_tag: read_zero as Slot,
                    read_tm_info: read_zero as Slot,
                    read_completion_wallclock_ns: read_zero as Slot,
                },
            }),
            cur: Mutex::new(Wc::default()),
        }
    }

    /// Makes `w` the current completion: what the `read_*` slots report,
    /// and the two members C reads directly.
    fn publish(&self, w: &Wc) {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Polls one completion into the current one: 0, or `ENOENT` if the CQ
/// is empty (as `ibv_start_poll`/`ibv_next_poll` report).
unsafe fn poll_one(c: *mut IbvCqExC) -> c_int {
    // SAFETY: the ibv_cq_ex pointer C holds is the CQ box's address (C
    // contract: not destroyed).
    let Some(b) = (unsafe { cq_of(c.cast::<IbvCq>()) }) else {
        return libc::EINVAL;
    };
    let mut w = [Wc::default()];
    if lock(&b.cq).poll(&mut w) == 0 {
        return libc::ENOENT;
    }
    b.ex.publish(&w[0]);
    0
}

unsafe extern "C" fn start_poll(c: *mut IbvCqExC, attr: *const u32) -> c_int {
    guard::errno(|| {
        // SAFETY: NULL or a readable ibv_poll_cq_attr (C contract), whose
        // comp_mask must be 0 (none defined).
        if !attr.is_null() && unsafe { attr.read_unaligned() } != 0 {
            return libc::EINVAL;
        }
        // SAFETY: forwarded C contract.
        unsafe { poll_one(c) }
    })
}

unsafe extern "C" fn next_poll(c: *mut IbvCqExC) -> c_int {
    guard::errno(|| {
        // SAFETY: forwarded C contract.
        unsafe { poll_one(c) }
    })
}

/// `end_poll`: nothing held between the calls (each poll takes the CQ's
/// lock for itself).
extern "C" fn end_poll(_c: *mut IbvCqExC) {
    guard::void(|| {})
}

/// The current completion of `c`.
unsafe fn cur(c: *mut IbvCqExC) -> Wc {
    // SAFETY: forwarded C contract (a CQ of ours).
    match unsafe { cq_of(c.cast::<IbvCq>()) } {
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

/// `read_imm_data`: big-endian, as in `struct ibv_wc`.
unsafe extern "C" fn read_imm_data(c: *mut IbvCqExC) -> u32 {
    guard::value(0, || {
        // SAFETY: forwarded C contract.
        unsafe { cur(c) }.imm_data.map_or(0, u32::to_be)
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

/// `read_dlid_path_bits`: 0, as `ibv_poll_cq` reports it here.
extern "C" fn read_dlid_path_bits(_c: *mut IbvCqExC) -> u8 {
    guard::value(0, || 0)
}

extern "C" fn read_zero(_c: *mut IbvCqExC) -> u64 {
    guard::value(0, || 0)
}

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
    // SAFETY: read only when comp_mask names it (short-circuit).
    if mask & CQ_INIT_ATTR_FLAGS != 0 && unsafe { member!(a, flags) } != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let cqe = c_int::try_from(cqe).map_err(|_| libc::EINVAL)?;
    let vector = c_int::try_from(vector).map_err(|_| libc::EINVAL)?;
    Ok((cqe, context, channel, vector))
}

/// `verbs_context.create_cq_ex`: a CQ of `cqe` entries on `channel`,
/// reporting the standard completion fields ([`read_cq_init_ex`]).
unsafe extern "C" fn create_cq_ex(c: *mut IbvContext, a: *mut IbvCqInitAttrEx) -> *mut IbvCq {
    guard::null(|| {
        if a.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a readable init attr (C contract, non-NULL).
        match unsafe { read_cq_init_ex(a) } {
            // SAFETY: forwarded C contract (a context and channel of ours).
            Ok((cqe, context, channel, vector)) => unsafe {
                crate::verbs::create_cq(c, cqe, context, channel, vector)
            },
            Err(e) => null_errno(e),
        }
    })
}

/// Fills the `verbs_context` slot this module implements.
pub(crate) fn fill_verbs_ops(v: &mut crate::abi::VerbsContext) {
    v.create_cq_ex = Some(create_cq_ex);
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
        let p = Box::into_raw(Box::new(CqEx::new()));
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
        let a = crate::Partial::<IbvCqInitAttrEx>::new(offset_of!(IbvCqInitAttrEx, parent_domain));
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
        assert_eq!(got, Err(libc::EOPNOTSUPP), "creation flags are refused");
    }

    /// The tail lies in a CQ box where C finds `struct ibv_cq_ex`'s
    /// members after those it shares with `struct ibv_cq` (the tail itself
    /// is checked against `verbs.h` in `abi/layout.rs`).
    #[test]
    // Miri cannot run the C compiler.
    #[cfg_attr(miri, ignore)]
    fn structs_match_verbs_h() {
        let at = offset_of!(crate::verbs::CqBox, ex) + offset_of!(CqEx, c);
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

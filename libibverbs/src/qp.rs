//! Queue pairs: `ibv_create_qp`, `ibv_create_qp_ex` (the
//! `verbs_context.create_qp_ex` slot `verbs.h`'s inline calls),
//! `ibv_qp_to_qp_ex`, `ibv_modify_qp`, `ibv_query_qp`, `ibv_destroy_qp`,
//! `ibv_attach_mcast`, `ibv_detach_mcast`. Posting is the data path's
//! (`send.rs`, `recv.rs`, `wr.rs`).
//!
//! The C struct is in an `UnsafeCell`: its `state` changes while C holds
//! the pointer and other threads hold shared references to the box.

use crate::abi::*;
use crate::async_event::{register, retire_async, Kind};
use crate::context::CtxBox;
use crate::convert::{c_qp_cap, copy_masked, qp_attr, qp_caps, qp_type};
use crate::cq::CqBox;
use crate::guard;
use crate::obj::{destroy, CObject, Held};
use crate::pd::PdBox;
use crate::qp_ex::QpEx;
use crate::spin::Spin;
use crate::srq::SrqBox;
use crate::{errno_of, export, lock, member, members, null_errno, ret_errno};
use rverbs::{Cq, Qp, QpCaps, QpInit, QpType};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Mutex;

#[repr(C)]
pub(crate) struct QpBox {
    c: UnsafeCell<IbvQp>,
    /// The rest of `struct ibv_qp_ex`, right after the `ibv_qp` as C
    /// expects of a QP it got from `ibv_create_qp_ex`.
    pub(crate) ex: QpEx,
    pub(crate) qp: Spin<Qp>,
    /// A UD QP (its sends name an AH).
    pub(crate) ud: bool,
    /// The multicast groups (GID, LID) it is attached to, as the kernel
    /// keeps them (`ib_uverbs_attach_mcast`): it refuses to destroy the QP
    /// while any is left.
    mcast: Mutex<Vec<([u8; 16], u16)>>,
    /// What ibv_query_qp reports beyond the state and caps: the attributes
    /// last set by ibv_modify_qp.
    attr: Mutex<IbvQpAttr>,
    init: IbvQpInitAttr,
    pd: Held<PdBox>,
    _send_cq: Held<CqBox>,
    _recv_cq: Held<CqBox>,
    _srq: Option<Held<SrqBox>>,
}

// SAFETY: repr(C) with the ibv_qp (in its UnsafeCell) first; handed out
// only by new_qp.
unsafe impl CObject for QpBox {
    type C = IbvQp;
}

unsafe extern "C" fn create_qp(p: *mut IbvPd, init: *mut IbvQpInitAttr) -> *mut IbvQp {
    guard::null(|| {
        // SAFETY: forwarded C contract.
        unsafe { new_qp(p, init, None) }
    })
}
export!("ibv_create_qp" = create_qp);

/// `ibv_create_qp`, and `ibv_create_qp_ex` once its request is read: an
/// extended QP (`ibv_qp_to_qp_ex` hands it out) for `send_ops`, with its
/// batch storage sized from the caps granted. Those are written back into
/// `init->cap`.
///
/// # Safety
/// `p` is a PD of ours and `init` a readable, writable init attr naming
/// CQs (and an SRQ) of ours (C contract).
unsafe fn new_qp(p: *mut IbvPd, init: *mut IbvQpInitAttr, send_ops: Option<u64>) -> *mut IbvQp {
    // SAFETY: a PD of ours and a readable init attr (C contract).
    let (Some(pd), Some(a)) = (unsafe { PdBox::of(p) }, unsafe { init.as_mut() }) else {
        return null_errno(libc::EINVAL);
    };
    let Some(kind) = qp_type(a.qp_type) else {
        return null_errno(libc::EOPNOTSUPP);
    };
    // SAFETY: NULL or an SRQ of ours (C contract).
    let srq = unsafe { SrqBox::of(a.srq.cast()) };
    // SAFETY: CQs of ours (C contract).
    let (Some(scq), Some(rcq)) = (unsafe { CqBox::of(a.send_cq) }, unsafe {
        CqBox::of(a.recv_cq)
    }) else {
        return null_errno(libc::EINVAL);
    };
    // SAFETY: the context outlives its PDs (C contract: closed last).
    let Some(ctx) = (unsafe { CtxBox::of(pd.c.context) }) else {
        return null_errno(libc::EINVAL);
    };
    let made = on_cqs(scq, rcq, |s, r| make_qp(pd, kind, s, r, a, srq));
    let qp = match made {
        Ok(q) => q,
        Err(e) => return null_errno(errno_of(&e)),
    };
    a.cap = c_qp_cap(&qp.caps());
    let ex = match send_ops {
        // rxe's builders write into the send queue as they go; mlx5's
        // gather the batch (`wr.rs`).
        Some(ops) => match ctx.dev.dev.driver() {
            rverbs::Driver::Rxe => QpEx::in_ring(ctx.ex_ops.qp_in_ring, ops, &a.cap, libc::ENOSPC),
            _ => QpEx::extended(ctx.ex_ops.qp, ops, &a.cap, full_errno(ctx)),
        },
        None => QpEx::new(ctx.ex_ops.qp),
    };
    let handle = qp.user_handle();
    let q = QpBox {
        c: UnsafeCell::new(c_qp(pd, p, a, &qp)),
        ex,
        qp: Spin::new(qp),
        ud: kind == QpType::Ud,
        mcast: Mutex::new(Vec::new()),
        attr: Mutex::new(IbvQpAttr::default()),
        init: *a,
        pd: Held::new(pd),
        _send_cq: Held::new(scq),
        _recv_cq: Held::new(rcq),
        _srq: srq.map(Held::new),
    }
    .into_c();
    register(Kind::Qp, handle, q.cast());
    q
}

/// The errno of a full `ibv_wr_*` batch from the context's provider in
/// rdma-core: `ENOSPC` from rxe's, `ENOMEM` from mlx5's.
fn full_errno(ctx: &CtxBox) -> c_int {
    match ctx.dev.dev.driver() {
        rverbs::Driver::Rxe => libc::ENOSPC,
        _ => libc::ENOMEM,
    }
}

/// `f` with the CQs `s` and `r` locked (once if they are one), by address,
/// so that two threads creating QPs cannot deadlock.
fn on_cqs<R>(s: &CqBox, r: &CqBox, f: impl FnOnce(&Cq, &Cq) -> R) -> R {
    if std::ptr::eq(s, r) {
        let g = lock(&s.cq);
        return f(&g, &g);
    }
    let (gs, gr) = if std::ptr::from_ref(s) < std::ptr::from_ref(r) {
        let gs = lock(&s.cq);
        (gs, lock(&r.cq))
    } else {
        let gr = lock(&r.cq);
        (lock(&s.cq), gr)
    };
    f(&gs, &gr)
}

/// The rverbs QP `a` asks for, on the CQs given.
fn make_qp(
    pd: &PdBox,
    qp_type: QpType,
    send_cq: &Cq,
    recv_cq: &Cq,
    a: &IbvQpInitAttr,
    srq: Option<&SrqBox>,
) -> rverbs::Result<Qp> {
    let srq = srq.map(SrqBox::lock);
    let caps: QpCaps = qp_caps(&a.cap);
    // Without reserving the depths on the CQs: libibverbs accepts a QP
    // deeper than its CQ (an overrun becomes IBV_EVENT_CQ_ERR), and C
    // programs (pyverbs' test_qp) rely on it.
    pd.pd.create_qp_accepting_cq_overrun(&QpInit {
        qp_type,
        send_cq,
        recv_cq,
        caps,
        sq_sig_all: a.sq_sig_all != 0,
        srq: srq.as_deref(),
    })
}

/// The `struct ibv_qp` of `qp`, made on the PD `p` (its box `pd`) as `a`
/// asked.
fn c_qp(pd: &PdBox, p: *mut IbvPd, a: &IbvQpInitAttr, qp: &Qp) -> IbvQp {
    IbvQp {
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
    }
}

/// What `ibv_create_qp_ex` asks for, read from the caller's struct.
struct InitEx {
    pd: *mut IbvPd,
    init: IbvQpInitAttr,
    send_ops: Option<u64>,
}

/// Reads the caller's `ibv_qp_init_attr_ex` member by member, as rdma-core
/// does: the members every version of the struct has, and each optional
/// one only if `comp_mask` names it. A program built against older headers
/// passes a shorter struct, and need not set members it does not name.
/// `EINVAL` without a PD; `EOPNOTSUPP` for what this library lacks (XRC,
/// RSS, TSO, create flags, source QPNs).
///
/// # Safety
/// `a` points to a readable struct holding the members before `comp_mask`,
/// `comp_mask` itself, and every member `comp_mask` names (C contract).
unsafe fn read_init_ex(a: *const IbvQpInitAttrEx) -> Result<InitEx, c_int> {
    use init_mask::*;
    // SAFETY: comp_mask is in every version (the caller's contract).
    let mask = unsafe { member!(a, comp_mask) };
    if mask & PD == 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: comp_mask names pd, so the caller's struct holds it.
    let pd = unsafe { member!(a, pd) };
    if pd.is_null() {
        return Err(libc::EINVAL);
    }
    if mask & !(PD | CREATE_FLAGS | SEND_OPS_FLAGS) != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    // SAFETY: read only when comp_mask names it (short-circuit).
    if mask & CREATE_FLAGS != 0 && unsafe { member!(a, create_flags) } != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let send_ops = if mask & SEND_OPS_FLAGS != 0 {
        // SAFETY: comp_mask names send_ops_flags.
        let f = unsafe { member!(a, send_ops_flags) };
        if f & !send_ops::SUPPORTED != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        Some(f)
    } else {
        None
    };
    // SAFETY: the members before comp_mask, in every version.
    let init = unsafe {
        members!(a => IbvQpInitAttr {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all
        })
    };
    Ok(InitEx { pd, init, send_ops })
}

/// `verbs_context.create_qp_ex`: what `verbs.h`'s `ibv_create_qp_ex`
/// calls when `comp_mask` is more than `IBV_QP_INIT_ATTR_PD`. RC and UC
/// QPs over a PD, with `send_ops_flags` for the `ibv_wr_*` API (see
/// [`read_init_ex`] for what is refused). On success the granted caps are
/// written back into `cap`, the only member written.
pub(crate) unsafe extern "C" fn create_qp_ex(
    c: *mut IbvContext,
    a: *mut IbvQpInitAttrEx,
) -> *mut IbvQp {
    guard::null(|| {
        if a.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a readable init attr (C contract, non-NULL).
        let mut x = match unsafe { read_init_ex(a) } {
            Ok(x) => x,
            Err(e) => return null_errno(e),
        };
        // SAFETY: a PD of ours (C contract); its first field is the ibv_pd.
        if unsafe { (*x.pd).context } != c {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: an open context of ours (C contract, checked against the PD).
        if unsafe { CtxBox::of(c) }.is_none() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: forwarded C contract (a PD and CQs of ours).
        let q = unsafe { new_qp(x.pd, &mut x.init, x.send_ops) };
        if !q.is_null() {
            // SAFETY: cap is in every version of the caller's writable struct.
            unsafe { std::ptr::addr_of_mut!((*a).cap).write(x.init.cap) };
        }
        q
    })
}

/// `ibv_qp_to_qp_ex`: the QP's `ibv_qp_ex` if it was created with
/// `send_ops_flags`, else NULL (as libibverbs).
unsafe extern "C" fn qp_to_qp_ex(q: *mut IbvQp) -> *mut IbvQp {
    guard::null(|| {
        // SAFETY: a QP of ours (C contract).
        match unsafe { QpBox::of(q) } {
            Some(b) if b.ex.enabled() => q,
            _ => std::ptr::null_mut(),
        }
    })
}
export!("ibv_qp_to_qp_ex" = qp_to_qp_ex);

/// `ibv_modify_qp`: 0 or an errno (positive), as libibverbs returns.
unsafe extern "C" fn modify_qp(q: *mut IbvQp, a: *mut IbvQpAttr, mask: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { QpBox::of(q) }) else {
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
/// A mask with `IBV_QP_RATE_LIMIT` or a later attribute is `EOPNOTSUPP`,
/// as rdma-core's `ibv_cmd_query_qp` answers (those go through the
/// extended command only); the C-visible `state` is refreshed when the
/// mask asks for the state, as rdma-core refreshes it.
unsafe extern "C" fn query_qp(
    q: *mut IbvQp,
    out: *mut IbvQpAttr,
    mask: c_int,
    init: *mut IbvQpInitAttr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { QpBox::of(q) }) else {
            return ret_errno(libc::EINVAL);
        };
        const RATE_LIMIT: c_int = 1 << 25;
        if mask & !(RATE_LIMIT - 1) != 0 {
            return ret_errno(libc::EOPNOTSUPP);
        }
        if out.is_null() || init.is_null() {
            return ret_errno(libc::EINVAL);
        }
        let qp = lock(&b.qp);
        let state = match qp.query_state() {
            Ok(s) => s,
            Err(e) => return ret_errno(errno_of(&e)),
        };
        let cap = c_qp_cap(&qp.caps());
        // The attr lock is held to the state's store: ibv_modify_qp writes
        // that member under it too (not under the QP's lock, which it has
        // let go), so the two stores never race.
        let keep = lock(&b.attr);
        let mut a = *keep;
        a.qp_state = state.raw() as c_int;
        a.cur_qp_state = a.qp_state;
        a.cap = cap;
        let mut i = b.init;
        i.cap = cap;
        // SAFETY: out and init are writable (C contract, non-NULL); the state
        // member is in the box's UnsafeCell, written under the attr lock
        // (`keep`), as ibv_modify_qp writes it.
        unsafe {
            out.write(a);
            init.write(i);
            if mask & crate::abi::qp_mask::STATE != 0 {
                (*b.c.get()).state = a.qp_state;
            }
        }
        drop(keep);
        0
    })
}
export!("ibv_query_qp" = query_qp);

/// `ibv_destroy_qp`: `EBUSY` while it is attached to a multicast group,
/// as the kernel answers; else it waits, as libibverbs does, for the async
/// events handed out for it to be acknowledged, and goes.
unsafe extern "C" fn destroy_qp(q: *mut IbvQp) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract), destroyed once.
        unsafe { destroy(q, retire) }
    })
}
export!("ibv_destroy_qp" = destroy_qp);

/// Decides `ibv_destroy_qp`: the kernel's refusal foreseen (dropping
/// rverbs' Qp would swallow it, and leak the QP the program still holds);
/// then, once no async event handed out for it is unacknowledged, it
/// leaves the registry, and no reader of the async fd is between reading
/// an event and counting it until `DESTROY_QP` has dropped those still
/// queued (the guard returned).
fn retire(b: &QpBox) -> Result<impl Sized, c_int> {
    if !lock(&b.mcast).is_empty() {
        return Err(libc::EBUSY);
    }
    // SAFETY: the context outlives its QPs (C contract: closed last).
    let ctx = unsafe { CtxBox::of(b.pd.get().c.context) };
    let handle = lock(&b.qp).user_handle();
    Ok(retire_async(Kind::Qp, handle, ctx))
}

/// `ibv_attach_mcast` (`ATTACH_MCAST`): 0 or an errno. The group is noted
/// as the kernel notes it on success (once), for `ibv_destroy_qp`.
unsafe extern "C" fn attach_mcast(q: *mut IbvQp, gid: *const IbvGid, lid: u16) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours and a readable GID (C contract).
        let (Some(b), Some(g)) = (unsafe { QpBox::of(q) }, unsafe { gid.as_ref() }) else {
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
        let (Some(b), Some(g)) = (unsafe { QpBox::of(q) }, unsafe { gid.as_ref() }) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// A program built against older headers passes a shorter
    /// `ibv_qp_init_attr_ex`, and sets only the members its `comp_mask`
    /// names: nothing else is read (Miri reports a read past the caller's
    /// bytes or of a member left unset).
    #[test]
    fn create_qp_ex_reads_only_the_members_comp_mask_names() {
        use init_mask::*;
        let pd = std::ptr::NonNull::<IbvPd>::dangling().as_ptr();
        let cap = IbvQpCap {
            max_send_wr: 8,
            ..IbvQpCap::default()
        };
        let cases = [
            // A struct that ends after pd.
            (offset_of!(IbvQpInitAttrEx, xrcd), PD, None),
            // One that ends after create_flags, which it names.
            (
                offset_of!(IbvQpInitAttrEx, max_tso_header),
                PD | CREATE_FLAGS,
                None,
            ),
            // The whole struct: only send_ops_flags named, the members
            // between pd and it left unset.
            (
                std::mem::size_of::<IbvQpInitAttrEx>(),
                PD | SEND_OPS_FLAGS,
                Some(send_ops::SEND),
            ),
        ];
        for (len, mask, send_ops) in cases {
            let a = crate::testing::Partial::<IbvQpInitAttrEx>::new(len);
            let p = a.ptr();
            let null = std::ptr::null_mut();
            // SAFETY: every member written lies within the len bytes.
            unsafe {
                crate::put!(
                    p,
                    qp_context = null,
                    send_cq = null.cast(),
                    recv_cq = null.cast(),
                    srq = null,
                    cap = cap,
                    qp_type = 2,
                    sq_sig_all = 0,
                    comp_mask = mask,
                    pd = pd
                );
                if mask & CREATE_FLAGS != 0 {
                    crate::put!(p, create_flags = 0);
                }
                if let Some(f) = send_ops {
                    crate::put!(p, send_ops_flags = f);
                }
            }
            // SAFETY: the members comp_mask names are set.
            let x = unsafe { read_init_ex(p) }.expect("accepted");
            assert_eq!((x.pd, x.send_ops), (pd, send_ops), "{mask:#x}");
            assert_eq!((x.init.cap.max_send_wr, x.init.qp_type), (8, 2));
        }
    }

    /// The tail lies in a QP box right after its `struct ibv_qp`, where C
    /// finds `struct ibv_qp_ex`'s own members (the tail itself is checked
    /// against `verbs.h` in `abi/layout.rs`).
    #[test]
    // Miri cannot run the C compiler.
    #[cfg_attr(miri, ignore)]
    fn structs_match_verbs_h() {
        let at = offset_of!(QpBox, ex);
        let checks = [
            ("sizeof(struct ibv_qp)".to_string(), at),
            ("offsetof(struct ibv_qp_ex, comp_mask)".to_string(), at),
            (
                "sizeof(struct ibv_qp_ex)".to_string(),
                at + size_of::<IbvQpExTail>(),
            ),
        ];
        crate::ctest::assert_c_values("qp-ex", &["infiniband/verbs.h"], &checks);
    }
}

//! The data path `verbs.h`'s inline functions reach through
//! `ibv_context.ops`: `post_send`, `post_recv`, `post_srq_recv`,
//! `poll_cq`, `req_notify_cq`.
//!
//! Posting walks the C list once ([`walk`]), translating each request
//! into rverbs' form without copying or allocating: a C SGE array *is* a
//! list of rverbs [`Slice`]s (same layout, viewed in place), inline data
//! of one SGE is read in place, and the translated requests wait in a
//! fixed array on the stack until [`CHUNK`] of them are handed to the
//! provider at once (one doorbell per chunk on rxe). Only inline data
//! spread over several SGEs is gathered (into a stack buffer) and posted
//! on its own.
//!
//! Errors as rdma-core's rxe provider reports them: `bad_wr` NULL or an
//! empty list is `EINVAL`; otherwise `*bad_wr` is set to NULL, the
//! requests before the first refused one are posted, it and the rest are
//! not, `*bad_wr` names it and the return is its errno (`EINVAL` for a
//! malformed request, `ENOMEM` for a full queue). A failed doorbell
//! returns its errno with `*bad_wr` left NULL, as rxe's does.
//!
//! Each queue is behind a lock (the QP's, the SRQ's): the C API lets
//! threads post to one QP concurrently, and rdma-core's providers take a
//! spinlock per queue for the same reason. Uncontended, it is one atomic
//! swap each way per call.

use crate::abi::*;
use crate::ah::ah_of;
use crate::guard;
use crate::srq::{lock_srq, srq_of};
use crate::verbs::{cq_of, qp_of};
use crate::{errno_of, member};
use rverbs::wr::Sge;
use rverbs::{Ah, Error, MwBind, Qp, QpState, RecvWr, Remote, SendOp, SendWr, Slice, Wc};
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

/// Fills the context's op table with the data path (and the window
/// operations, which post).
pub(crate) fn fill_ops(ops: &mut IbvContextOps) {
    ops.poll_cq = Some(poll_cq);
    ops.req_notify_cq = Some(req_notify_cq);
    ops.post_send = Some(post_send);
    ops.post_recv = Some(post_recv);
    ops.post_srq_recv = Some(post_srq_recv);
    crate::mw::fill_ops(ops);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these are held: a poisoned lock is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Requests handed to the provider per call: one doorbell each on rxe.
/// Sixteen translated sends are ~1.5 KiB of stack.
const CHUNK: usize = 16;

/// The largest inline payload gathered from several SGEs (a stack
/// buffer); more than any provider rverbs drives grants (rxe: 512 bytes).
const GATHER_MAX: usize = 2048;

/// An element of a C work request list, read through its pointer: a send
/// request's members other than those its opcode uses may be unset, so no
/// reference to a whole request is made.
trait Linked: Sized {
    /// The `next` member of the request at `p`.
    ///
    /// # Safety
    /// `p` points to a readable request.
    unsafe fn next(p: *const Self) -> *mut Self;
}

impl Linked for IbvSendWr {
    unsafe fn next(p: *const Self) -> *mut Self {
        // SAFETY: the caller's contract; every request sets `next`.
        unsafe { member!(p, next) }
    }
}

impl Linked for IbvRecvWr {
    unsafe fn next(p: *const Self) -> *mut Self {
        // SAFETY: the caller's contract; every request sets `next`.
        unsafe { member!(p, next) }
    }
}

/// What one C request translates to.
enum Step<T> {
    /// A request to post with the others of its chunk.
    Batch(T),
    /// A request the translator posts on its own (`alone`).
    Alone,
}

/// Which request of a provider call was refused (`None`: the call failed
/// as a whole, e.g. the doorbell) and its errno.
type Refusal = (Option<usize>, c_int);

/// A refusal from rverbs' post error.
fn refusal(e: &Error) -> Refusal {
    match e {
        Error::QueueFull { index, .. } => (Some(*index), libc::ENOMEM),
        Error::InvalidWorkRequest { index, .. } => (Some(*index), libc::EINVAL),
        e => (None, errno_of(e)),
    }
}

/// Walks the C list at `head`: translates each request, posts them
/// [`CHUNK`] at a time through `post` (or one through `alone`), and
/// reports the first refused one in `*bad` (see the module docs).
///
/// # Safety
/// `head` is a NULL-terminated list of readable requests and `bad` NULL or
/// writable (C contract).
unsafe fn walk<Q, W: Linked, T: Copy>(
    q: &mut Q,
    head: *mut W,
    bad: *mut *mut W,
    blank: T,
    mut translate: impl FnMut(*const W) -> Result<Step<T>, c_int>,
    mut alone: impl FnMut(&mut Q, *const W) -> Result<(), Refusal>,
    mut post: impl FnMut(&mut Q, &[T]) -> Result<(), Refusal>,
) -> c_int {
    if bad.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: bad is writable (C contract, non-NULL).
    unsafe { *bad = std::ptr::null_mut() };
    if head.is_null() {
        return libc::EINVAL;
    }
    let mut batch = [blank; CHUNK];
    let mut ptrs = [std::ptr::null_mut::<W>(); CHUNK];
    let mut n = 0;
    // Hands `batch[..n]` to the provider; a refusal is named in *bad.
    let mut flush = |q: &mut Q, batch: &[T], ptrs: &[*mut W]| -> Result<(), c_int> {
        post(q, batch).map_err(|(i, e)| {
            if let Some(p) = i.and_then(|i| ptrs.get(i)) {
                // SAFETY: bad is writable (checked above).
                unsafe { *bad = *p };
            }
            e
        })
    };
    let mut p = head;
    let r = (|| {
        while !p.is_null() {
            let step = translate(p);
            if !matches!(step, Ok(Step::Batch(_))) && n > 0 {
                // What comes before an alone or refused request is posted
                // first, in order.
                flush(q, &batch[..n], &ptrs[..n])?;
                n = 0;
            }
            match step {
                Ok(Step::Batch(t)) => {
                    batch[n] = t;
                    ptrs[n] = p;
                    n += 1;
                    if n == CHUNK {
                        flush(q, &batch, &ptrs)?;
                        n = 0;
                    }
                }
                Ok(Step::Alone) => alone(q, p).map_err(|(i, e)| {
                    if i.is_some() {
                        // SAFETY: bad is writable (checked above).
                        unsafe { *bad = p };
                    }
                    e
                })?,
                Err(e) => {
                    // SAFETY: bad is writable (checked above).
                    unsafe { *bad = p };
                    return Err(e);
                }
            }
            // SAFETY: a readable request of the caller's list.
            p = unsafe { W::next(p) };
        }
        if n > 0 {
            flush(q, &batch[..n], &ptrs[..n])?;
        }
        Ok(())
    })();
    r.err().unwrap_or(0)
}

/// Refuses a whole list: `EINVAL`, `*bad` NULL (as rxe's provider does
/// for a QP in a state that takes no such requests).
///
/// # Safety
/// `bad` is NULL or writable (C contract).
unsafe fn refuse_all<W>(bad: *mut *mut W) -> c_int {
    if !bad.is_null() {
        // SAFETY: bad is writable (C contract, non-NULL).
        unsafe { *bad = std::ptr::null_mut() };
    }
    libc::EINVAL
}

/// A C SGE array as rverbs slices, in place.
///
/// # Safety
/// `list` points to `n` readable SGEs, each naming memory its lkey's MR
/// covers until the request completes (`ibv_post_send`'s contract).
unsafe fn sges(list: *const IbvSge, n: c_int) -> Result<&'static [Slice<'static>], c_int> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    // SAFETY: the caller's contract, forwarded; IbvSge and Sge are both
    // `struct ibv_sge` (checked against verbs.h and the uapi header).
    unsafe { Slice::list_from_raw_parts(list.cast::<Sge>(), n) }.ok_or(libc::EINVAL)
}

/// `EINVAL` unless `0 <= n <= max` (the queue's granted SGEs).
fn check_sges(n: c_int, max: u32) -> Result<(), c_int> {
    match u32::try_from(n) {
        Ok(n) if n <= max => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// The members every send request sets, whatever its opcode.
struct Head {
    wr_id: u64,
    sg_list: *mut IbvSge,
    num_sge: c_int,
    opcode: c_int,
    send_flags: u32,
}

/// # Safety
/// `w` points to a readable send request (C contract).
unsafe fn head(w: *const IbvSendWr) -> Head {
    // SAFETY: the caller's contract; these members are set for every
    // opcode.
    unsafe {
        Head {
            wr_id: member!(w, wr_id),
            sg_list: member!(w, sg_list),
            num_sge: member!(w, num_sge),
            opcode: member!(w, opcode),
            send_flags: member!(w, send_flags),
        }
    }
}

/// The rverbs operation for a C request of `opcode`. Only the members
/// that opcode uses are read (the immediate, one member of the `wr`
/// union, the bind): the caller need not set the others.
///
/// # Safety
/// `w` points to a readable send request of `opcode` (C contract).
unsafe fn send_op(w: *const IbvSendWr, opcode: c_int) -> Result<SendOp, c_int> {
    use wr_opcode::*;
    // `invalidate_rkey` shares imm_data's bytes, in host order.
    // SAFETY: the member `opcode` uses, set by the caller.
    let imm = || unsafe { member!(w, imm_data) };
    // SAFETY: as above, for the RDMA opcodes.
    let rdma = || unsafe { member!(w, wr.rdma) };
    // SAFETY: as above, for the atomic opcodes.
    let atomic = || unsafe { member!(w, wr.atomic) };
    let remote = |r: IbvSendWrRdma| Remote {
        addr: r.remote_addr,
        rkey: r.rkey,
    };
    let aremote = |a: &IbvSendWrAtomic| Remote {
        addr: a.remote_addr,
        rkey: a.rkey,
    };
    Ok(match opcode {
        SEND => SendOp::Send,
        SEND_WITH_IMM => SendOp::SendWithImm(u32::from_be(imm())),
        RDMA_WRITE => SendOp::Write(remote(rdma())),
        RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm(remote(rdma()), u32::from_be(imm())),
        RDMA_READ => SendOp::Read(remote(rdma())),
        ATOMIC_CMP_AND_SWP => {
            let a = atomic();
            SendOp::CompareSwap {
                remote: aremote(&a),
                compare: a.compare_add,
                swap: a.swap,
            }
        }
        ATOMIC_FETCH_AND_ADD => {
            let a = atomic();
            SendOp::FetchAdd {
                remote: aremote(&a),
                add: a.compare_add,
            }
        }
        LOCAL_INV => SendOp::LocalInv(imm()),
        SEND_WITH_INV => SendOp::SendWithInv(imm()),
        // SAFETY: a BIND_MW request (C contract).
        BIND_MW => SendOp::BindMw(unsafe { bind_of(w) }?),
        _ => return Err(libc::EINVAL),
    })
}

/// The window bind an `IBV_WR_BIND_MW` request carries, as rxe's provider
/// reads it: the window's rkey now, the new one the caller chose, the MR's
/// lkey (none for an unbind).
///
/// # Safety
/// `w` points to a readable `IBV_WR_BIND_MW` request (C contract).
unsafe fn bind_of(w: *const IbvSendWr) -> Result<MwBind, c_int> {
    // SAFETY: the bind_mw member, which the caller set for BIND_MW; plain
    // data.
    let b = unsafe { member!(w, bind_mw_or_tso.bind_mw) };
    // SAFETY: NULL or a live window of ours (C contract).
    unsafe { mw_bind(b.mw, b.rkey, &b.bind_info) }
}

/// A bind of `mw` to `new_rkey` over `info` (shared by `IBV_WR_BIND_MW`
/// and `ibv_wr_bind_mw`): `EINVAL` for no window, or for an MR missing
/// from a bind of a non-zero length.
///
/// # Safety
/// `mw` is NULL or a live window of ours; `info.mr` NULL or a live MR.
pub(crate) unsafe fn mw_bind(
    mw: *mut crate::abi::IbvMw,
    new_rkey: u32,
    info: &crate::abi::IbvMwBindInfo,
) -> Result<MwBind, c_int> {
    if mw.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live window of ours (the caller's contract); its C struct
    // is the box's UnsafeCell (ibv_bind_mw writes the rkey), so it is read
    // through the pointer, not a reference.
    let mw_rkey = unsafe { std::ptr::addr_of!((*mw).rkey).read() };
    // SAFETY: NULL (unbind) or a live MR (C contract).
    let mr_lkey = match unsafe { info.mr.as_ref() } {
        Some(mr) => mr.lkey,
        None if info.length == 0 => 0,
        None => return Err(libc::EINVAL),
    };
    Ok(MwBind {
        mw_rkey,
        new_rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: info.mw_access_flags,
    })
}

type Send = SendWr<'static>;

/// The payload of an inline request of one SGE, read in place.
///
/// # Safety
/// The SGE names memory readable for the call (C contract).
unsafe fn inline_one(s: Option<&Slice<'static>>) -> Result<&'static [u8], c_int> {
    match s {
        Some(s) if !s.is_empty() => {
            if s.addr() == 0 {
                return Err(libc::EINVAL);
            }
            // SAFETY: inline data is read by the CPU now, from memory the
            // caller promises readable for the call (C contract).
            Ok(unsafe {
                std::slice::from_raw_parts(s.addr() as usize as *const u8, s.len() as usize)
            })
        }
        _ => Ok(&[]),
    }
}

/// `r` with the flags of `h` and, on a UD QP, the address `w` names.
///
/// # Safety
/// `w` is a readable request whose AH (UD) is a live AH of ours.
unsafe fn finish<'a>(
    w: *const IbvSendWr,
    h: &Head,
    r: SendWr<'a>,
    ud: bool,
) -> Result<SendWr<'a>, c_int> {
    let mut r = r
        .signaled(h.send_flags & send_flags::SIGNALED != 0)
        .solicited(h.send_flags & send_flags::SOLICITED != 0)
        .fence(h.send_flags & send_flags::FENCE != 0);
    if ud {
        // SAFETY: the ud member, which the caller set for a UD QP.
        let u = unsafe { member!(w, wr.ud) };
        // SAFETY: a live AH of ours (C contract: until the post returns;
        // rxe copies its number into the WQE).
        let ah: &'static Ah = &unsafe { ah_of(u.ah.cast()) }.ok_or(libc::EINVAL)?.ah;
        r = r.to(ah, u.remote_qpn, u.remote_qkey);
    }
    Ok(r)
}

/// One C send request in rverbs' form: `Alone` for inline data over
/// several SGEs (gathered by [`post_gathered`]).
///
/// # Safety
/// `w` is a readable request whose SGEs, inline memory and AH satisfy
/// `ibv_post_send`'s contract; `ud`: the QP is UD.
unsafe fn send_wr(w: *const IbvSendWr, ud: bool, max_sge: u32) -> Result<Step<Send>, c_int> {
    // SAFETY: forwarded C contract.
    let h = unsafe { head(w) };
    // Before the SGE array is viewed: it holds num_sge entries only if
    // the caller kept within the QP's SGEs (rxe's validate_send_wr checks
    // this first too).
    check_sges(h.num_sge, max_sge)?;
    // SAFETY: forwarded C contract.
    let op = unsafe { send_op(w, h.opcode) }?;
    // SAFETY: the caller's SGE list (C contract).
    let list = unsafe { sges(h.sg_list, h.num_sge) }?;
    let r = if h.send_flags & send_flags::INLINE != 0 {
        if h.num_sge > 1 {
            return Ok(Step::Alone);
        }
        // SAFETY: forwarded C contract.
        SendWr::inline(h.wr_id, op, unsafe { inline_one(list.first()) }?)
    } else {
        SendWr::new(h.wr_id, op, list)
    };
    // SAFETY: forwarded C contract.
    unsafe { finish(w, &h, r, ud) }.map(Step::Batch)
}

/// Posts one inline request whose data is spread over several SGEs,
/// gathered into a stack buffer first (the provider copies it into the
/// WQE before this returns).
///
/// # Safety
/// As [`send_wr`].
unsafe fn post_gathered(qp: &mut Qp, w: *const IbvSendWr, ud: bool) -> Result<(), Refusal> {
    let one = |e| (Some(0), e);
    // SAFETY: forwarded C contract.
    let h = unsafe { head(w) };
    // SAFETY: the caller's SGE list (C contract; send_wr checked num_sge).
    let list = unsafe { sges(h.sg_list, h.num_sge) }.map_err(one)?;
    let mut buf = [0u8; GATHER_MAX];
    let mut len = 0usize;
    for s in list {
        let n = s.len() as usize;
        if n == 0 {
            continue;
        }
        let end = len
            .checked_add(n)
            .filter(|&e| e <= GATHER_MAX)
            .ok_or(one(libc::EINVAL))?;
        if s.addr() == 0 {
            return Err(one(libc::EINVAL));
        }
        // SAFETY: inline data is read by the CPU now, from memory the
        // caller promises readable (C contract); n bytes fit buf[len..end].
        let src = unsafe { std::slice::from_raw_parts(s.addr() as usize as *const u8, n) };
        buf[len..end].copy_from_slice(src);
        len = end;
    }
    // SAFETY: forwarded C contract.
    let op = unsafe { send_op(w, h.opcode) }.map_err(one)?;
    let r = SendWr::inline(h.wr_id, op, &buf[..len]);
    // SAFETY: forwarded C contract.
    let r = unsafe { finish(w, &h, r, ud) }.map_err(one)?;
    qp.post_send(&[r]).map_err(|e| refusal(&e))
}

/// `ops.post_send`.
pub(crate) unsafe extern "C" fn post_send(
    q: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { qp_of(q) }) else {
            return libc::EINVAL;
        };
        let ud = b.ud;
        let mut qp = lock(&b.qp);
        if matches!(
            qp.last_state(),
            QpState::Reset | QpState::Init | QpState::Rtr
        ) {
            // What rxe answers (its POST_SEND doorbell refuses a QP before
            // RTS): EINVAL for the whole list, *bad_wr NULL. rverbs refuses
            // before anything reaches the ring.
            // SAFETY: the caller's slot (C contract), forwarded.
            return unsafe { refuse_all(bad) };
        }
        let max_sge = qp.caps().max_send_sge;
        // SAFETY: the caller's list and slot (C contract), forwarded; each
        // request is translated under send_wr's contract, the same one.
        unsafe {
            walk(
                &mut *qp,
                wr,
                bad,
                SendWr::new(0, SendOp::Send, &[]),
                |w| send_wr(w, ud, max_sge),
                |qp: &mut Qp, w| post_gathered(qp, w, ud),
                |qp: &mut Qp, wrs| qp.post_send(wrs).map_err(|e| refusal(&e)),
            )
        }
    })
}

type Recv = RecvWr<'static>;

/// One C receive request in rverbs' form.
///
/// # Safety
/// `w` is a readable request whose SGEs satisfy `ibv_post_recv`'s
/// contract.
unsafe fn recv_wr(w: *const IbvRecvWr, max_sge: u32) -> Result<Step<Recv>, c_int> {
    // SAFETY: a readable request (C contract); every member is set.
    let (wr_id, list, n) = unsafe { (member!(w, wr_id), member!(w, sg_list), member!(w, num_sge)) };
    // Before the SGE array is viewed (see send_wr).
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
unsafe extern "C" fn post_recv(
    q: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: a QP of ours (C contract).
        let Some(b) = (unsafe { qp_of(q) }) else {
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
        let blank = RecvWr {
            wr_id: 0,
            sges: &[],
        };
        // SAFETY: the caller's list and slot (C contract), forwarded.
        unsafe {
            walk(
                &mut *qp,
                wr,
                bad,
                blank,
                |w| recv_wr(w, max_sge),
                never,
                |qp: &mut Qp, wrs| qp.post_recv(wrs).map_err(|e| refusal(&e)),
            )
        }
    })
}

/// `ops.post_srq_recv`.
unsafe extern "C" fn post_srq_recv(
    srq: *mut c_void,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an SRQ of ours (C contract).
        let Some(b) = (unsafe { srq_of(srq.cast()) }) else {
            return libc::EINVAL;
        };
        let max_sge = b.max_sge;
        let mut s = lock_srq(b);
        let blank = RecvWr {
            wr_id: 0,
            sges: &[],
        };
        // SAFETY: the caller's list and slot (C contract), forwarded.
        unsafe {
            walk(
                &mut *s,
                wr,
                bad,
                blank,
                |w| recv_wr(w, max_sge),
                never,
                |s: &mut rverbs::Srq, wrs| s.post_recv(wrs).map_err(|e| refusal(&e)),
            )
        }
    })
}

fn c_wc(w: &Wc) -> IbvWc {
    IbvWc {
        wr_id: w.wr_id,
        status: w.status.0 as c_int,
        opcode: w.opcode.0 as c_int,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        // The union of imm_data (big-endian) and invalidated_rkey.
        imm_data: w
            .imm_data
            .map(u32::to_be)
            .or(w.invalidated_rkey)
            .unwrap_or(0),
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.flags.bits(),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

/// `ops.poll_cq`: how many completions were written (negative on error).
unsafe extern "C" fn poll_cq(c: *mut IbvCq, n: c_int, out: *mut IbvWc) -> c_int {
    guard::value(-guard::PANICKED, || {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { cq_of(c) }) else {
            return -libc::EINVAL;
        };
        if n < 0 || (n > 0 && out.is_null()) {
            return -libc::EINVAL;
        }
        let mut cq = lock(&b.cq);
        let mut buf = [Wc::default(); 16];
        let mut done = 0usize;
        while done < n as usize {
            let want = (n as usize - done).min(buf.len());
            let got = cq.poll(&mut buf[..want]);
            for (i, w) in buf[..got].iter().enumerate() {
                // SAFETY: out has room for n entries (C contract); done + i < n.
                unsafe { out.add(done + i).write(c_wc(w)) };
            }
            done += got;
            if got < want {
                break;
            }
        }
        done as c_int
    })
}

/// `ops.req_notify_cq`: 0 or an errno.
unsafe extern "C" fn req_notify_cq(c: *mut IbvCq, solicited_only: c_int) -> c_int {
    guard::errno(|| {
        // SAFETY: a CQ of ours (C contract).
        let Some(b) = (unsafe { cq_of(c) }) else {
            return libc::EINVAL;
        };
        match lock(&b.cq).req_notify(solicited_only != 0) {
            Ok(()) => 0,
            Err(e) => errno_of(&e),
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What a provider saw: the batches (by wr_id) and the lone posts.
    #[derive(Default)]
    struct Model {
        calls: Vec<Vec<u64>>,
        alone: Vec<u64>,
        /// Refuse the request with this wr_id (its index in the call).
        refuse: Option<(u64, c_int)>,
        /// Fail every call as a whole (a doorbell error).
        fail_all: Option<c_int>,
    }

    /// A C list of receive requests with ids `0..n` ([`run`] links it).
    fn list(n: u64) -> Vec<IbvRecvWr> {
        (0..n)
            .map(|i| IbvRecvWr {
                wr_id: i,
                next: std::ptr::null_mut(),
                sg_list: std::ptr::null_mut(),
                num_sge: 0,
            })
            .collect()
    }

    /// Links `v` in place as C does: each element's `next` is the one
    /// after it. Every address comes from one pointer, so that none is
    /// invalidated by a later reference to another element.
    fn link<W>(v: &mut [W], set: impl Fn(&mut W, *mut W)) {
        let base = v.as_mut_ptr();
        for i in 1..v.len() {
            // SAFETY: i - 1 and i are in bounds of v, reached through base.
            unsafe { set(&mut *base.add(i - 1), base.add(i)) };
        }
    }

    /// Walks `v` through the model: ids >= 1000 fail translation, a
    /// negative num_sge asks to be posted alone.
    fn run(m: &mut Model, v: &mut Vec<IbvRecvWr>, bad: *mut *mut IbvRecvWr) -> c_int {
        // Linked here, last, and walked as C holds it: any `&mut v[..]`
        // after linking would reborrow the elements and invalidate links
        // made from the Vec's pointer.
        link(v, |w, next| w.next = next);
        let head = if v.is_empty() {
            std::ptr::null_mut()
        } else {
            v.as_mut_ptr()
        };
        // SAFETY: v is a linked, live list of initialised requests (which
        // the closures read); bad is NULL or a live slot.
        unsafe {
            walk(
                m,
                head,
                bad,
                0u64,
                |w| match ((*w).wr_id, (*w).num_sge) {
                    (id, _) if id >= 1000 => Err(libc::EINVAL),
                    (_, n) if n < 0 => Ok(Step::Alone),
                    (id, _) => Ok(Step::Batch(id)),
                },
                |m: &mut Model, w| {
                    m.alone.push((*w).wr_id);
                    Ok(())
                },
                |m: &mut Model, ids| {
                    if let Some(e) = m.fail_all {
                        return Err((None, e));
                    }
                    let stop = m
                        .refuse
                        .and_then(|(id, e)| ids.iter().position(|&i| i == id).map(|p| (p, e)));
                    let posted = stop.map_or(ids.len(), |(p, _)| p);
                    m.calls.push(ids[..posted].to_vec());
                    stop.map_or(Ok(()), |(p, e)| Err((Some(p), e)))
                },
            )
        }
    }

    fn ids(calls: &[Vec<u64>]) -> Vec<usize> {
        calls.iter().map(Vec::len).collect()
    }

    #[test]
    fn a_long_list_goes_in_chunks_with_nothing_refused() {
        let (mut m, mut v) = (Model::default(), list(40));
        let mut bad = std::ptr::NonNull::<IbvRecvWr>::dangling().as_ptr();
        assert_eq!(run(&mut m, &mut v, &mut bad), 0);
        assert!(bad.is_null(), "*bad_wr is NULL on success, as rxe's");
        assert_eq!(ids(&m.calls), [16, 16, 8]);
        assert_eq!(m.calls.concat(), (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn no_bad_slot_or_no_list_is_einval_and_posts_nothing() {
        let (mut m, mut v) = (Model::default(), list(3));
        assert_eq!(run(&mut m, &mut v, std::ptr::null_mut()), libc::EINVAL);
        let mut bad = std::ptr::NonNull::<IbvRecvWr>::dangling().as_ptr();
        assert_eq!(run(&mut m, &mut Vec::new(), &mut bad), libc::EINVAL);
        assert!(bad.is_null());
        assert!(m.calls.is_empty());
    }

    #[test]
    fn a_refusal_in_the_second_chunk_names_that_request() {
        let (mut m, mut v) = (Model::default(), list(40));
        m.refuse = Some((19, libc::ENOMEM));
        let mut bad = std::ptr::null_mut();
        assert_eq!(run(&mut m, &mut v, &mut bad), libc::ENOMEM);
        assert_eq!(bad, &mut v[19] as *mut IbvRecvWr);
        assert_eq!(ids(&m.calls), [16, 3], "those before it posted, none after");
    }

    #[test]
    fn a_malformed_request_is_bad_after_those_before_it_are_posted() {
        let (mut m, mut v) = (Model::default(), list(8));
        v[5].wr_id = 1005;
        let mut bad = std::ptr::null_mut();
        assert_eq!(run(&mut m, &mut v, &mut bad), libc::EINVAL);
        assert_eq!(bad, &mut v[5] as *mut IbvRecvWr);
        assert_eq!(m.calls, [vec![0, 1, 2, 3, 4]]);
    }

    #[test]
    fn a_lone_request_keeps_the_order() {
        let (mut m, mut v) = (Model::default(), list(5));
        v[2].num_sge = -1;
        let mut bad = std::ptr::null_mut();
        assert_eq!(run(&mut m, &mut v, &mut bad), 0);
        assert_eq!(m.calls, [vec![0, 1], vec![3, 4]]);
        assert_eq!(m.alone, [2]);
    }

    #[test]
    fn a_failed_doorbell_leaves_bad_null() {
        let (mut m, mut v) = (Model::default(), list(2));
        m.fail_all = Some(libc::EIO);
        let mut bad = std::ptr::null_mut();
        assert_eq!(run(&mut m, &mut v, &mut bad), libc::EIO);
        assert!(bad.is_null());
    }

    /// Counts this thread's heap allocations (the test binary's allocator).
    struct Counting;

    std::thread_local! {
        static ALLOCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    // SAFETY: forwards every call to the system allocator unchanged; the
    // counter is a const-initialised thread-local (no allocation, no
    // destructor), so counting cannot recurse.
    unsafe impl std::alloc::GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
            ALLOCS.with(|n| n.set(n.get() + 1));
            // SAFETY: the caller's layout contract, forwarded.
            unsafe { std::alloc::System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
            // SAFETY: p came from System.alloc with l (forwarded).
            unsafe { std::alloc::System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// This thread's heap allocations so far (for the other modules'
    /// allocation tests).
    pub(crate) fn allocs() -> usize {
        ALLOCS.with(|n| n.get())
    }

    #[test]
    fn translating_and_batching_sends_allocates_nothing() {
        let data = [7u8; 256];
        let mut sges: Vec<IbvSge> = (0..40)
            .map(|i| IbvSge {
                addr: data.as_ptr() as u64 + i,
                length: 8,
                lkey: 1,
            })
            .collect();
        let sge0 = sges.as_mut_ptr();
        let mut wrs: Vec<IbvSendWr> = (0..40)
            .map(|i| IbvSendWr {
                wr_id: i as u64,
                next: std::ptr::null_mut(),
                sg_list: sge0.wrapping_add(i),
                num_sge: 1,
                opcode: if i % 2 == 0 {
                    wr_opcode::SEND
                } else {
                    wr_opcode::RDMA_WRITE
                },
                // Every third inline (one SGE: read in place).
                send_flags: send_flags::SIGNALED | if i % 3 == 0 { send_flags::INLINE } else { 0 },
                imm_data: 0,
                wr: IbvSendWrWr {
                    rdma: IbvSendWrRdma {
                        remote_addr: 4096,
                        rkey: 2,
                    },
                },
                xrc_remote_srqn: 0,
                bind_mw_or_tso: IbvSendWrBindMwOrTso { raw: [0; 6] },
            })
            .collect();
        link(&mut wrs, |w, next| w.next = next);
        let mut posted = (0usize, 0usize); // requests, inline ones
        let mut bad = std::ptr::null_mut();
        let before = ALLOCS.with(|n| n.get());
        // SAFETY: a linked, live list whose SGEs name `data`.
        let rc = unsafe {
            walk(
                &mut posted,
                wrs.as_mut_ptr(),
                &mut bad,
                SendWr::new(0, SendOp::Send, &[]),
                |w| send_wr(w, false, 4),
                |_, _| Err((Some(0), libc::EINVAL)),
                |p: &mut (usize, usize), batch: &[Send]| {
                    p.0 += batch.len();
                    p.1 += batch.iter().filter(|w| w.inline.is_some()).count();
                    Ok(())
                },
            )
        };
        let allocs = ALLOCS.with(|n| n.get()) - before;
        assert_eq!((rc, posted), (0, (40, 14)));
        assert_eq!(allocs, 0, "the post path allocated");
        // The counter does count (so the 0 above means something).
        let v = std::hint::black_box(vec![0u8; 16]);
        assert_eq!(ALLOCS.with(|n| n.get()) - before, 1);
        drop(v);
    }

    /// A send request sets only the members its opcode uses; the others
    /// (the immediate, the `wr` union, the bind) are left unset here and
    /// never read (Miri reports a read of an unset member).
    #[test]
    fn a_send_reads_only_the_members_its_opcode_uses() {
        let data = [1u8; 8];
        let mut sge = IbvSge {
            addr: data.as_ptr() as u64,
            length: 8,
            lkey: 1,
        };
        let sg: *mut IbvSge = &mut sge;
        for op in [
            wr_opcode::SEND,
            wr_opcode::RDMA_WRITE,
            wr_opcode::SEND_WITH_IMM,
        ] {
            let w = crate::Partial::<IbvSendWr>::new(std::mem::size_of::<IbvSendWr>());
            let p = w.ptr();
            // SAFETY: members of the live allocation.
            unsafe {
                crate::put!(
                    p,
                    wr_id = 5,
                    next = std::ptr::null_mut(),
                    sg_list = sg,
                    num_sge = 1,
                    opcode = op,
                    send_flags = send_flags::SIGNALED
                );
                match op {
                    wr_opcode::RDMA_WRITE => {
                        std::ptr::addr_of_mut!((*p).wr.rdma).write(IbvSendWrRdma {
                            remote_addr: 4096,
                            rkey: 2,
                        })
                    }
                    wr_opcode::SEND_WITH_IMM => crate::put!(p, imm_data = 9u32.to_be()),
                    _ => {}
                }
            }
            // SAFETY: a request whose members for `op` are set; its SGE
            // names `data`.
            match unsafe { send_wr(p, false, 1) } {
                Ok(Step::Batch(r)) => {
                    assert_eq!((r.wr_id, r.signaled), (5, true));
                    let want = match op {
                        wr_opcode::RDMA_WRITE => SendOp::Write(Remote {
                            addr: 4096,
                            rkey: 2,
                        }),
                        wr_opcode::SEND_WITH_IMM => SendOp::SendWithImm(9),
                        _ => SendOp::Send,
                    };
                    assert_eq!(format!("{:?}", r.op), format!("{want:?}"));
                }
                _ => panic!("opcode {op} not translated"),
            }
        }
    }

    #[test]
    fn sge_counts_are_checked_before_the_array_is_read() {
        assert_eq!(check_sges(0, 1), Ok(()));
        assert_eq!(check_sges(1, 1), Ok(()));
        assert_eq!(check_sges(2, 1), Err(libc::EINVAL));
        assert_eq!(check_sges(-1, 32), Err(libc::EINVAL));
        // A NULL array of one SGE is refused, not read.
        // SAFETY: n = 1 with a NULL pointer: checked, never dereferenced.
        let r = unsafe { sges(std::ptr::null(), 1) };
        assert_eq!(r.err(), Some(libc::EINVAL));
    }
}

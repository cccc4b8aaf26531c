//! `ops.post_send`, what `verbs.h`'s inline `ibv_post_send` calls: each C
//! request translated in place ([`send_wr`]) and written into the send
//! queue as it is translated, through a [`rverbs::SendList`] (one
//! doorbell for the list, as rdma-core's rxe rings once a call:
//! [`post_chain`]); a list of one request through the one-request post
//! ([`post_one_as`], in the copy of the post for its opcode that
//! [`post_send`] picks), answered the same way. A C SGE array *is* a list of
//! rverbs [`Slice`]s (same layout, viewed in place), and inline data of one
//! SGE is read in place; only inline data spread over several SGEs is
//! gathered (into a stack buffer) first.
//!
//! Errors as rdma-core's rxe provider reports them: `bad_wr` NULL or an
//! empty list is `EINVAL`; otherwise `*bad_wr` is set to NULL, the
//! requests before the first refused one are posted, it and the rest are
//! not, `*bad_wr` names it and the return is its errno (`EINVAL` for a
//! malformed request, `ENOMEM` for a full queue); a failed doorbell's
//! errno is returned before a refusal's, as rxe's `post_send` does.
//!
//! Each queue is behind a lock (the QP's here, the SRQ's for its
//! receives): the C API lets threads post to one QP concurrently, and
//! rdma-core's providers take a spinlock per queue for the same reason.
//! Uncontended, it is one atomic swap each way per call.

use crate::abi::*;
use crate::ah::AhBox;
use crate::convert::{check_sges, send_op, sges, with_flags};
use crate::guard;
use crate::obj::CObject;
use crate::qp::QpBox;
use crate::walk::{refusal, refuse_all, Linked, Refusal, Step};
use crate::{lock, member, members};
use rverbs::{Ah, Qp, SendLoop, SendPush, SendWr, Slice};
use std::ffi::c_int;

/// The largest inline payload gathered from several SGEs (a stack
/// buffer); more than any provider rverbs drives grants (rxe: 512 bytes).
const GATHER_MAX: usize = 2048;

type Send = SendWr<'static>;

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
    unsafe { members!(w => Head { wr_id, sg_list, num_sge, opcode, send_flags }) }
}

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
    let mut r = with_flags(r, h.send_flags);
    if ud {
        // SAFETY: the ud member, which the caller set for a UD QP.
        let u = unsafe { member!(w, wr.ud) };
        // SAFETY: a live AH of ours (C contract: until the post returns;
        // rxe copies its number into the WQE).
        let ah: &'static Ah = &unsafe { AhBox::of(u.ah.cast()) }.ok_or(libc::EINVAL)?.ah;
        r = r.to(ah, u.remote_qpn, u.remote_qkey);
    }
    Ok(r)
}

/// [`send_wr`]'s `OP` for "the opcode the request names".
const ANY_OP: c_int = -1;

/// [`post_send_as`]'s `OP` for a SEND on a UD QP (translated as a SEND).
const UD_SEND: c_int = -2;

/// Calls `f::<Q, OP>(args)` with `OP` the constant `opcode` is for a
/// WRITE or a SEND, or [`ANY_OP`]: each request of a list goes through
/// the copy of the translation and of the provider's WQE writer for its
/// operation, in which the operation is known (no jump table on it). A
/// list of one takes [`post_send`]'s copies instead.
macro_rules! by_opcode {
    ($opcode:expr, $f:ident::<$q:ty, $ud:literal>($($arg:expr),*)) => {{
        use wr_opcode::{RDMA_WRITE, SEND};
        match $opcode {
            RDMA_WRITE => $f::<$q, RDMA_WRITE, $ud>($($arg),*),
            SEND => $f::<$q, SEND, $ud>($($arg),*),
            _ => $f::<$q, ANY_OP, $ud>($($arg),*),
        }
    }};
}

/// One C send request in rverbs' form (`Alone` for inline data over
/// several SGEs, gathered by [`gathered`]), of opcode `OP` (the caller
/// matched it), or of the opcode the request names for [`ANY_OP`]. With
/// the opcode a constant, the translation and the provider's WQE writer
/// inlined after it keep only that operation's code: no jump table on
/// the opcode, here or in the provider ([`by_opcode`]).
///
/// # Safety
/// `w` is a readable request whose SGEs, inline memory and AH satisfy
/// `ibv_post_send`'s contract, of opcode `OP` unless `OP` is [`ANY_OP`];
/// `ud`: the QP is UD.
#[inline(always)]
unsafe fn send_wr<const OP: c_int>(
    w: *const IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> Result<Step<Send>, c_int> {
    // SAFETY: forwarded C contract.
    unsafe { send_wr_as::<OP, EITHER>(w, ud, max_sge) }
}

/// [`send_wr_as`]'s `INLINE` for "as the request's flags say".
const EITHER: u8 = 2;

/// [`send_wr`] of a request whose `IBV_SEND_INLINE` flag is `INLINE`
/// (0 clear, 1 set: the caller tested it), or either ([`EITHER`]): with
/// the flag a constant, the copy for a request of SGEs keeps no code of
/// the inline one, and no test merging the two.
///
/// # Safety
/// As [`send_wr`]; the request's flag is `INLINE` unless [`EITHER`].
#[inline(always)]
unsafe fn send_wr_as<const OP: c_int, const INLINE: u8>(
    w: *const IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> Result<Step<Send>, c_int> {
    // SAFETY: forwarded C contract.
    let mut h = unsafe { head(w) };
    if OP != ANY_OP {
        h.opcode = OP;
    }
    // Before the SGE array is viewed: it holds num_sge entries only if
    // the caller kept within the QP's SGEs (rxe's validate_send_wr checks
    // this first too).
    check_sges(h.num_sge, max_sge)?;
    // SAFETY: forwarded C contract.
    let op = unsafe { send_op(w, h.opcode) }?;
    // SAFETY: the caller's SGE list (C contract).
    let list = unsafe { sges(h.sg_list, h.num_sge) }?;
    let inline = match INLINE {
        0 => false,
        1 => true,
        _ => h.send_flags & send_flags::INLINE != 0,
    };
    let r = if inline {
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

/// Gathers the inline data of the request at `w`, spread over several
/// SGEs, into `buf`, and hands the request over it to `post` (which must
/// copy it into the WQE before returning: the provider does).
///
/// # Safety
/// As [`send_wr`].
unsafe fn gathered<T>(
    w: *const IbvSendWr,
    ud: bool,
    post: impl FnOnce(&SendWr<'_>) -> Result<T, c_int>,
) -> Result<T, c_int> {
    // SAFETY: forwarded C contract.
    let h = unsafe { head(w) };
    // SAFETY: the caller's SGE list (C contract; send_wr checked num_sge).
    let list = unsafe { sges(h.sg_list, h.num_sge) }?;
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
            .ok_or(libc::EINVAL)?;
        if s.addr() == 0 {
            return Err(libc::EINVAL);
        }
        // SAFETY: inline data is read by the CPU now, from memory the
        // caller promises readable (C contract); n bytes fit buf[len..end].
        let src = unsafe { std::slice::from_raw_parts(s.addr() as usize as *const u8, n) };
        buf[len..end].copy_from_slice(src);
        len = end;
    }
    // SAFETY: forwarded C contract.
    let op = unsafe { send_op(w, h.opcode) }?;
    let r = SendWr::inline(h.wr_id, op, &buf[..len]);
    // SAFETY: forwarded C contract.
    let r = unsafe { finish(w, &h, r, ud) }?;
    post(&r)
}

/// `ops.post_send`. A list of one WRITE, READ or SEND (a UD QP's
/// SEND apart) goes to its own copy of the whole post
/// ([`post_send_as`]), in which the operation is a constant: the
/// translation and the provider's WQE writer inlined after it keep only
/// that operation's code, and no jump table on it. Anything else goes to
/// the general copy. The choice is made here, before the QP is locked,
/// so that each copy is a function of its own, with its own registers:
/// inside one function, a third copy cost the others (callgrind, the C
/// program's post of one 64-byte WRITE: 212 -> 230 instructions with a
/// READ copy beside the WRITE and SEND ones; chosen here, with the rest
/// of the change that made it, the WRITE costs 201 and the READ 184,
/// against 212 and 269 before).
pub(crate) unsafe extern "C" fn post_send(
    q: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
) -> c_int {
    guard::errno(|| {
        use wr_opcode::{RDMA_READ, RDMA_WRITE, SEND};
        // The order of the tests is the compiler's (it orders them itself).
        // SAFETY: wr, when not NULL, is a readable request (C contract),
        // and every request sets `next` and `opcode`.
        if !wr.is_null() && !bad.is_null() {
            // SAFETY: as above.
            if !unsafe { member!(wr, next) }.is_null() {
                // SAFETY: q is NULL or a QP of ours (C contract), wr a
                // list and bad writable.
                return unsafe { post_list(q, wr, bad) };
            }
            // SAFETY: as above; q is NULL or a QP of ours (C contract);
            // each copy is called for a list of one of its opcode (and QP
            // type).
            unsafe {
                let op = member!(wr, opcode);
                if op == RDMA_WRITE {
                    return post_send_as::<RDMA_WRITE>(q, wr, bad);
                }
                if op == SEND {
                    // A UD QP's SEND has its copy too, in which `wr.ud` is
                    // always read (callgrind: 241 -> 222 instructions).
                    if QpBox::of(q).is_some_and(|b| b.ud) {
                        return post_send_as::<UD_SEND>(q, wr, bad);
                    }
                    return post_send_as::<SEND>(q, wr, bad);
                }
                if op == RDMA_READ {
                    return post_send_as::<RDMA_READ>(q, wr, bad);
                }
                return post_send_as::<ANY_OP>(q, wr, bad);
            }
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { post_list(q, wr, bad) }
    })
}

/// [`post_send`] for a list of one request of opcode `OP`, or of any
/// opcode ([`ANY_OP`]).
///
/// # Safety
/// `ops.post_send`'s contract; `wr` is one request (`next` NULL), of
/// opcode `OP` unless `OP` is [`ANY_OP`], and `bad` is not NULL.
///
/// Called under [`post_send`]'s guard.
#[inline(never)]
unsafe fn post_send_as<const OP: c_int>(
    q: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
) -> c_int {
    // SAFETY: a QP of ours (C contract).
    let Some(b) = (unsafe { QpBox::of(q) }) else {
        return libc::EINVAL;
    };
    // A WRITE or a READ names no address: on a UD QP, rverbs refuses
    // it as it refuses one that names an AH (EINVAL, the request
    // named), so their copies read no `wr.ud`.
    let ud = match OP {
        UD_SEND => true,
        wr_opcode::RDMA_WRITE | wr_opcode::RDMA_READ => false,
        _ => b.ud,
    };
    let mut qp = lock(&b.qp);
    let max_sge = qp.caps().max_send_sge;
    // No check of the QP's state here: rverbs refuses a post before
    // RTS before anything reaches the ring, and the request is
    // translated first, so a malformed one is named in `*bad_wr` as
    // rdma-core's rxe names it (it validates before its doorbell
    // fails); a valid one gets EINVAL with `*bad_wr` NULL, what rxe's
    // doorbell answers (`walk::refusal`). A list is refused whole
    // (`post_list`). (callgrind, with the `ud` above: WRITE 218 -> 200.)
    let mut sink = Posting { qp: &mut qp, ud };
    // SAFETY: the caller's request and slot (our contract).
    unsafe {
        if OP == UD_SEND {
            post_one_as::<_, { wr_opcode::SEND }>(&mut sink, wr, bad, ud, max_sge)
        } else {
            post_one_as::<_, OP>(&mut sink, wr, bad, ud, max_sge)
        }
    }
}

/// [`post_send`] for any list but one of one request (and for a NULL
/// list or answer slot): a function of its own, with the list's post
/// inlined, where it was called by the general copy of the post of one
/// (callgrind, a list of 16 WRITEs: see the commit).
///
/// # Safety
/// `ops.post_send`'s contract.
///
/// Called under [`post_send`]'s guard.
#[inline(never)]
unsafe fn post_list(q: *mut IbvQp, wr: *mut IbvSendWr, bad: *mut *mut IbvSendWr) -> c_int {
    // SAFETY: a QP of ours (C contract).
    let Some(b) = (unsafe { QpBox::of(q) }) else {
        return libc::EINVAL;
    };
    let mut qp = lock(&b.qp);
    let max_sge = qp.caps().max_send_sge;
    let Ok(mut list) = qp.send_list() else {
        // SAFETY: the caller's slot (C contract), forwarded.
        return unsafe { refuse_all(bad) };
    };
    // The loop runs with the provider chosen once (`SendList::run`).
    list.run(Chain {
        head: wr,
        bad,
        ud: b.ud,
        max_sge,
    })
}

/// [`post_chain`] as a [`SendLoop`]: the caller's list and answer slot.
///
/// Made only by [`post_list`], with its arguments, whose contract (that
/// of [`post_chain`]) holds for the run.
struct Chain {
    head: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
}

impl SendLoop for Chain {
    type Output = c_int;

    #[inline(always)]
    fn run<P: SendPush>(self, list: &mut P) -> c_int {
        let mut sink = Listing { list, ud: self.ud };
        // SAFETY: post_chain's contract holds (Chain's: post_list's
        // caller's list and slot).
        unsafe { post_chain(&mut sink, self.head, self.bad, self.ud, self.max_sge) }
    }
}

/// Where a post of one request hands it: the QP ([`Posting`]), or a
/// test's recorder. A trait, not closures: the QP's one-request post is
/// large, and a closure that large is called out of line, where the
/// request must be stored and loaded back; a trait method marked
/// `inline(always)` is inlined at each call (callgrind: see the commit).
pub(crate) trait OneSink {
    /// Posts one translated request and rings.
    fn post_one(&mut self, w: &Send) -> Result<(), Refusal>;
    /// Posts the request at `w`, whose inline data must be gathered, and
    /// rings.
    ///
    /// # Safety
    /// `w` satisfies [`send_wr`]'s contract.
    unsafe fn alone(&mut self, w: *const IbvSendWr) -> Result<(), Refusal>;
}

/// Where a list post writes its requests as it translates them: a
/// [`rverbs::SendList`] pusher ([`Listing`]), or a test's recorder.
pub(crate) trait ListSink {
    /// Writes one translated request (the device sees it at `finish`).
    fn push(&mut self, w: &Send) -> Result<(), c_int>;
    /// Writes the request at `w`, whose inline data must be gathered.
    ///
    /// # Safety
    /// `w` satisfies [`send_wr`]'s contract.
    unsafe fn push_gathered(&mut self, w: *const IbvSendWr) -> Result<(), c_int>;
    /// Hands what was written to the device (nothing if nothing was).
    fn finish(&mut self) -> Result<(), c_int>;
}

/// A locked QP of ours, posted to.
struct Posting<'a> {
    qp: &'a mut Qp,
    ud: bool,
}

impl OneSink for Posting<'_> {
    /// [`Qp::post_send_one`], inlined here so that the translation is
    /// read where it was made.
    #[inline(always)]
    fn post_one(&mut self, w: &Send) -> Result<(), Refusal> {
        self.qp.post_send_one(w).map_err(|e| refusal(&e))
    }

    unsafe fn alone(&mut self, w: *const IbvSendWr) -> Result<(), Refusal> {
        // SAFETY: forwarded contract.
        let r = unsafe { gathered(w, self.ud, |r| Ok(self.qp.post_send_one(r))) };
        match r {
            Ok(posted) => posted.map_err(|e| refusal(&e)),
            Err(e) => Err((Some(0), e)),
        }
    }
}

/// A locked QP's list of sends, written to through the provider's
/// pusher ([`Chain`]).
struct Listing<'a, P> {
    list: &'a mut P,
    ud: bool,
}

impl<P: SendPush> ListSink for Listing<'_, P> {
    #[inline(always)]
    fn push(&mut self, w: &Send) -> Result<(), c_int> {
        self.list.push(w).map_err(|e| refusal(&e).1)
    }

    unsafe fn push_gathered(&mut self, w: *const IbvSendWr) -> Result<(), c_int> {
        let list = &mut self.list;
        // SAFETY: forwarded contract.
        unsafe { gathered(w, self.ud, |r| list.push(r).map_err(|e| refusal(&e).1)) }
    }

    #[inline(always)]
    fn finish(&mut self) -> Result<(), c_int> {
        // Dropping the list afterwards flushes nothing more: this emptied
        // it.
        self.list.flush().map_err(|e| refusal(&e).1)
    }
}

/// A post of the one request `w` (its `next` NULL) of opcode `OP` (or
/// of any, [`ANY_OP`]), answered as [`post_chain`] answers a list of one:
/// `*bad` NULL, then `w` translated and posted (gathered if it must be),
/// and named in `*bad` if it is refused — a translation error, or a
/// refusal that names a request — with the errno returned; a call that
/// failed as a whole (the doorbell, a QP before RTS) leaves `*bad` NULL.
///
/// # Safety
/// `w` is a readable request satisfying [`send_wr`]'s contract for `OP`
/// whose `next` is NULL; `bad` is writable (C contract).
#[inline(always)]
unsafe fn post_one_as<Q: OneSink, const OP: c_int>(
    q: &mut Q,
    w: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> c_int {
    // SAFETY: bad is writable (the caller's contract).
    unsafe { *bad = std::ptr::null_mut() };
    // SAFETY: the caller's contract, send_wr's.
    let (named, e) = match unsafe { send_wr::<OP>(w, ud, max_sge) } {
        Ok(Step::Batch(r)) => match q.post_one(&r) {
            Ok(()) => return 0,
            Err((i, e)) => (i.is_some(), e),
        },
        // SAFETY: w satisfies send_wr's contract (ours).
        Ok(Step::Alone) => match unsafe { q.alone(w) } {
            Ok(()) => return 0,
            Err((i, e)) => (i.is_some(), e),
        },
        Err(e) => (true, e),
    };
    if named {
        // SAFETY: bad is writable (the caller's contract).
        unsafe { *bad = w };
    }
    e
}

/// Posts the C send list at `head` (see the module docs for the answers):
/// each request translated and written as it comes, the first refused one
/// named in `*bad`, then everything written handed to the device at once.
///
/// # Safety
/// `head` is a NULL-terminated list of readable requests satisfying
/// [`send_wr`]'s contract, `bad` NULL or writable (C contract).
unsafe fn post_chain<Q: ListSink>(
    q: &mut Q,
    head: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> c_int {
    if bad.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: bad is writable (C contract, non-NULL).
    unsafe { *bad = std::ptr::null_mut() };
    if head.is_null() {
        return libc::EINVAL;
    }
    // Whether the QP is UD is a constant in each copy too (callgrind, a
    // list of 16 WRITEs: see the commit).
    // SAFETY: head is a readable request (the caller's contract); each
    // arm's opcode is the first request's, the rest is forwarded.
    unsafe {
        let op = member!(head, opcode);
        if ud {
            by_opcode!(op, post_chain_as::<Q, true>(q, head, bad, max_sge))
        } else {
            by_opcode!(op, post_chain_as::<Q, false>(q, head, bad, max_sge))
        }
    }
}

/// [`post_chain`] of a list whose first request's opcode is `OP` (or any,
/// [`ANY_OP`]): the requests of opcode `OP` go through its copy of the
/// translation and the WQE writer, inlined here, the others through the
/// general copy out of line ([`push_other`]). A list of one operation,
/// the common one, thus runs a loop with one copy in it, where both
/// copies inlined in one loop spilled registers (callgrind, a list of 16
/// WRITEs: 2,825 -> 2,761 instructions a call).
///
/// # Safety
/// As [`post_chain`], `head` not NULL, `*bad` NULL.
#[inline(never)]
unsafe fn post_chain_as<Q: ListSink, const OP: c_int, const UD: bool>(
    q: &mut Q,
    head: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    max_sge: u32,
) -> c_int {
    let mut p = head;
    let mut rc = 0;
    while !p.is_null() {
        // SAFETY: p is a request of the caller's list (send_wr's
        // contract); the copy of OP only for a request of opcode OP.
        let r = unsafe {
            if OP == ANY_OP {
                push_as::<Q, ANY_OP>(q, p, UD, max_sge)
            } else if member!(p, opcode) == OP {
                push_as::<Q, OP>(q, p, UD, max_sge)
            } else {
                push_other(q, p, UD, max_sge)
            }
        };
        if let Err(e) = r {
            // SAFETY: bad is writable (above).
            unsafe { *bad = p };
            rc = e;
            break;
        }
        // SAFETY: a readable request of the caller's list.
        p = unsafe { IbvSendWr::next(p) };
    }
    // What was written before a refusal is posted; a failed doorbell is
    // the answer, as rxe's post_send returns its doorbell's error first.
    match q.finish() {
        Err(e) => e,
        Ok(()) => rc,
    }
}

/// [`push_as`] of any opcode, out of line: the request of a list whose
/// opcode is not its first request's.
///
/// # Safety
/// As [`send_wr`] for [`ANY_OP`].
#[inline(never)]
unsafe fn push_other<Q: ListSink>(
    q: &mut Q,
    p: *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> Result<(), c_int> {
    // SAFETY: the caller's contract, forwarded.
    unsafe { push_as::<Q, ANY_OP>(q, p, ud, max_sge) }
}

/// Translates the request at `p`, of opcode `OP` (or any, [`ANY_OP`]),
/// and pushes it.
///
/// # Safety
/// As [`send_wr`] for `OP`.
#[inline(always)]
unsafe fn push_as<Q: ListSink, const OP: c_int>(
    q: &mut Q,
    p: *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> Result<(), c_int> {
    // SAFETY: p is readable (the caller's contract).
    if unsafe { member!(p, send_flags) } & send_flags::INLINE != 0 {
        // SAFETY: the caller's contract, forwarded; the flag is set.
        unsafe { push_as_inline::<Q, OP, 1>(q, p, ud, max_sge) }
    } else {
        // SAFETY: as above; the flag is clear.
        unsafe { push_as_inline::<Q, OP, 0>(q, p, ud, max_sge) }
    }
}

/// [`push_as`] of a request whose inline flag is `INLINE`.
///
/// # Safety
/// As [`send_wr_as`] for `OP` and `INLINE`.
#[inline(always)]
unsafe fn push_as_inline<Q: ListSink, const OP: c_int, const INLINE: u8>(
    q: &mut Q,
    p: *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> Result<(), c_int> {
    // SAFETY: the caller's contract, forwarded.
    match unsafe { send_wr_as::<OP, INLINE>(p, ud, max_sge) } {
        Ok(Step::Batch(r)) => q.push(&r),
        // SAFETY: as above.
        Ok(Step::Alone) => unsafe { q.push_gathered(p) },
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::walk::tests::link;
    use rverbs::{Remote, SendOp};

    /// A recording sink for the tests: it counts what it is handed and
    /// answers `answer` for each request (a list sink: a refusal naming a
    /// request refuses that push; one naming none fails the doorbell at
    /// `finish`, if something was pushed).
    struct Fake {
        answer: Result<(), Refusal>,
        /// Requests handed over translated, gathered, inline.
        batched: usize,
        alone: usize,
        inline: usize,
        /// Pushed since the last finish; finishes that rang.
        pending: usize,
        rung: usize,
    }

    impl Fake {
        fn new(answer: Result<(), Refusal>) -> Fake {
            Fake {
                answer,
                batched: 0,
                alone: 0,
                inline: 0,
                pending: 0,
                rung: 0,
            }
        }

        fn pushed(&mut self) -> Result<(), c_int> {
            match self.answer {
                Err((Some(_), e)) => Err(e),
                _ => {
                    self.pending += 1;
                    Ok(())
                }
            }
        }
    }

    impl OneSink for Fake {
        fn post_one(&mut self, w: &Send) -> Result<(), Refusal> {
            self.batched += 1;
            self.inline += usize::from(w.inline.is_some());
            self.answer
        }
        unsafe fn alone(&mut self, _: *const IbvSendWr) -> Result<(), Refusal> {
            self.alone += 1;
            self.answer
        }
    }

    impl ListSink for Fake {
        fn push(&mut self, w: &Send) -> Result<(), c_int> {
            self.batched += 1;
            self.inline += usize::from(w.inline.is_some());
            self.pushed()
        }
        unsafe fn push_gathered(&mut self, _: *const IbvSendWr) -> Result<(), c_int> {
            self.alone += 1;
            self.pushed()
        }
        fn finish(&mut self) -> Result<(), c_int> {
            if std::mem::take(&mut self.pending) == 0 {
                return Ok(());
            }
            self.rung += 1;
            match self.answer {
                Err((None, e)) => Err(e),
                _ => Ok(()),
            }
        }
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
        let mut sink = Fake::new(Ok(()));
        let mut bad = std::ptr::null_mut();
        let before = crate::testing::allocs();
        // SAFETY: a linked, live list whose SGEs name `data`.
        let rc = unsafe { post_chain(&mut sink, wrs.as_mut_ptr(), &mut bad, false, 4) };
        let allocs = crate::testing::allocs() - before;
        assert_eq!(
            (rc, sink.batched, sink.inline, sink.rung),
            (0, 40, 14, 1),
            "every request written, one doorbell"
        );
        assert_eq!(allocs, 0, "the post path allocated");
        // The counter does count (so the 0 above means something).
        let v = std::hint::black_box(vec![0u8; 16]);
        assert_eq!(crate::testing::allocs() - before, 1);
        drop(v);
    }

    /// A list of one goes to the provider through the one-request post
    /// (`post_one_as`), and answers as a list does whatever the provider
    /// answers: the return, `*bad_wr`, what was posted (translated or
    /// gathered).
    #[test]
    fn a_list_of_one_answers_as_a_list_does() {
        let data = [3u8; 16];
        let mut sges: Vec<IbvSge> = (0..2)
            .map(|i| IbvSge {
                addr: data.as_ptr() as u64 + 8 * i,
                length: 8,
                lkey: 1,
            })
            .collect();
        let sg = sges.as_mut_ptr();
        // A SEND of one SGE (translated), one of more SGEs than the QP's 2
        // (malformed), an inline one over two SGEs (gathered).
        let requests = [(1, 0), (3, 0), (2, send_flags::INLINE)];
        let answers: [Result<(), Refusal>; 3] =
            [Ok(()), Err((Some(0), libc::ENOMEM)), Err((None, libc::EIO))];
        for (num_sge, flags) in requests {
            for answer in answers {
                let run = |direct: bool| {
                    let mut w = send(7, sg, num_sge, flags);
                    let p: *mut IbvSendWr = &mut w;
                    let mut bad = std::ptr::NonNull::<IbvSendWr>::dangling().as_ptr();
                    let mut sink = Fake::new(answer);
                    // SAFETY: a live request of one whose SGEs name `data`;
                    // bad is a live slot.
                    let rc = unsafe {
                        if direct {
                            // The copy `post_send` takes for a SEND.
                            post_one_as::<_, { wr_opcode::SEND }>(&mut sink, p, &mut bad, false, 2)
                        } else {
                            post_chain(&mut sink, p, &mut bad, false, 2)
                        }
                    };
                    (rc, bad.is_null(), bad == p, sink.batched, sink.alone)
                };
                assert_eq!(
                    run(true),
                    run(false),
                    "num_sge {num_sge}, flags {flags}, provider {answer:?}"
                );
            }
        }
        // No slot, or no list: EINVAL before anything.
        let mut bad = std::ptr::NonNull::<IbvSendWr>::dangling().as_ptr();
        let mut sink = Fake::new(Ok(()));
        // SAFETY: NULL list: not read.
        let rc = unsafe { post_chain(&mut sink, std::ptr::null_mut(), &mut bad, false, 2) };
        assert_eq!((rc, bad.is_null(), sink.batched), (libc::EINVAL, true, 0));
        let mut w = send(1, sg, 1, 0);
        // SAFETY: NULL slot: not written.
        let rc = unsafe { post_chain(&mut sink, &mut w, std::ptr::null_mut(), false, 2) };
        assert_eq!((rc, sink.batched), (libc::EINVAL, 0));
    }

    /// A list stops at its first refused request: the ones before it are
    /// written and rung, `*bad_wr` names it, and its errno is the answer
    /// unless the doorbell failed (rxe's `post_send` returns that first).
    #[test]
    fn a_list_stops_at_its_first_refused_request() {
        let data = [3u8; 16];
        let mut sges = [IbvSge {
            addr: data.as_ptr() as u64,
            length: 8,
            lkey: 1,
        }; 3];
        let sg = sges.as_mut_ptr();
        for (answer, want) in [(Ok(()), libc::EINVAL), (Err((None, libc::EIO)), libc::EIO)] {
            // The third request has more SGEs than the QP's 2.
            let mut wrs: Vec<IbvSendWr> = (0..5)
                .map(|i| send(i, sg, if i == 2 { 3 } else { 1 }, 0))
                .collect();
            link(&mut wrs, |w, next| w.next = next);
            let mut bad = std::ptr::null_mut();
            let mut sink = Fake::new(answer);
            // SAFETY: a linked, live list whose SGEs name `data`.
            let rc = unsafe { post_chain(&mut sink, wrs.as_mut_ptr(), &mut bad, false, 2) };
            assert_eq!(
                (rc, bad, sink.batched, sink.rung),
                (want, std::ptr::addr_of_mut!(wrs[2]), 2, 1),
                "{answer:?}"
            );
        }
    }

    /// What the per-opcode copies' test compares of a request: its id,
    /// operation, signaled flag, inline payload and SGE count.
    type Noted = (u64, SendOp, bool, Option<Vec<u8>>, usize);

    /// Records what it is handed, for the per-opcode copies' test.
    #[derive(Default)]
    struct Recorder(Vec<Noted>);

    fn noted(w: &Send) -> Noted {
        let inline = w.inline.map(<[u8]>::to_vec);
        (w.wr_id, w.op, w.signaled, inline, w.sges.len())
    }

    impl Recorder {
        fn note(&mut self, w: &Send) {
            self.0.push(noted(w));
        }
    }

    impl OneSink for Recorder {
        fn post_one(&mut self, w: &Send) -> Result<(), Refusal> {
            self.note(w);
            Ok(())
        }
        unsafe fn alone(&mut self, _: *const IbvSendWr) -> Result<(), Refusal> {
            unreachable!("no gathered request here")
        }
    }

    impl ListSink for Recorder {
        fn push(&mut self, w: &Send) -> Result<(), c_int> {
            self.note(w);
            Ok(())
        }
        unsafe fn push_gathered(&mut self, _: *const IbvSendWr) -> Result<(), c_int> {
            unreachable!("no gathered request here")
        }
        fn finish(&mut self) -> Result<(), c_int> {
            Ok(())
        }
    }

    /// The copies of the post for one request that `post_send` picks (a
    /// WRITE, a READ, a SEND) and the ones `by_opcode` picks in a list (a
    /// WRITE, a SEND; each with a copy for requests of SGEs and one for
    /// inline requests) hand over what the general one does, and the other
    /// opcodes still go through the general one: the same translation for
    /// each.
    #[test]
    fn each_opcodes_copy_translates_as_the_general_one() {
        let data = [3u8; 8];
        let mut sge = IbvSge {
            addr: data.as_ptr() as u64,
            length: 8,
            lkey: 1,
        };
        // One pointer for every request (a fresh `&mut` each would
        // invalidate the ones before it).
        let sg: *mut IbvSge = &mut sge;
        let ops = [
            wr_opcode::RDMA_WRITE,
            wr_opcode::SEND,
            wr_opcode::RDMA_WRITE_WITH_IMM,
            wr_opcode::SEND_WITH_IMM,
            wr_opcode::RDMA_READ,
        ];
        let mut wrs: Vec<IbvSendWr> = ops
            .iter()
            .chain(ops.iter())
            .enumerate()
            // Each operation twice: of an SGE, then inline from it.
            .map(|(i, &op)| {
                let inline = if i >= ops.len() {
                    send_flags::INLINE
                } else {
                    0
                };
                let mut w = send(i as u64, sg, 1, inline);
                w.opcode = op;
                w.imm_data = (0x100 + i as u32).to_be();
                w.wr = IbvSendWrWr {
                    rdma: IbvSendWrRdma {
                        remote_addr: 4096 * (i as u64 + 1),
                        rkey: 7,
                    },
                };
                w
            })
            .collect();
        let general: Vec<Noted> = wrs
            .iter()
            // SAFETY: a request of `wrs`, its SGE naming `data`.
            .map(|w| match unsafe { send_wr::<ANY_OP>(w, false, 1) } {
                Ok(Step::Batch(r)) => noted(&r),
                _ => panic!("request {} not translated", w.wr_id),
            })
            .collect();
        let mut one = Recorder::default();
        let mut bad = std::ptr::null_mut();
        for w in wrs.iter_mut() {
            // SAFETY: as above, `next` NULL; `bad` writable; each copy
            // for its opcode, as `post_send` picks them.
            let rc = unsafe {
                match w.opcode {
                    wr_opcode::RDMA_WRITE => {
                        post_one_as::<_, { wr_opcode::RDMA_WRITE }>(&mut one, w, &mut bad, false, 1)
                    }
                    wr_opcode::RDMA_READ => {
                        post_one_as::<_, { wr_opcode::RDMA_READ }>(&mut one, w, &mut bad, false, 1)
                    }
                    wr_opcode::SEND => {
                        post_one_as::<_, { wr_opcode::SEND }>(&mut one, w, &mut bad, false, 1)
                    }
                    _ => post_one_as::<_, ANY_OP>(&mut one, w, &mut bad, false, 1),
                }
            };
            assert_eq!(rc, 0);
        }
        assert_eq!(one.0, general);
        // A list takes the copy of its first request's opcode, the others
        // the general one: each opcode first in turn.
        for first in 0..wrs.len() {
            let n = wrs.len();
            let mut turned: Vec<IbvSendWr> = (0..n)
                // SAFETY: a bitwise copy of a live plain C struct (no
                // drop, nothing owned); `next` is set again below.
                .map(|i| unsafe { std::ptr::read(&wrs[(i + first) % n]) })
                .collect();
            let mut want = general.clone();
            want.rotate_left(first);
            link(&mut turned, |w, next| w.next = next);
            let mut list = Recorder::default();
            // SAFETY: the linked requests of `turned`; `bad` writable.
            let rc = unsafe { post_chain(&mut list, turned.as_mut_ptr(), &mut bad, false, 1) };
            assert_eq!((rc, list.0), (0, want), "first: {}", turned[0].opcode);
        }
    }

    /// A SEND request of `num_sge` SGEs at `sg` with `flags`.
    fn send(wr_id: u64, sg: *mut IbvSge, num_sge: c_int, flags: u32) -> IbvSendWr {
        IbvSendWr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: sg,
            num_sge,
            opcode: wr_opcode::SEND,
            send_flags: send_flags::SIGNALED | flags,
            imm_data: 0,
            wr: IbvSendWrWr {
                rdma: IbvSendWrRdma {
                    remote_addr: 0,
                    rkey: 0,
                },
            },
            xrc_remote_srqn: 0,
            bind_mw_or_tso: IbvSendWrBindMwOrTso { raw: [0; 6] },
        }
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
            let w = crate::testing::Partial::<IbvSendWr>::new(std::mem::size_of::<IbvSendWr>());
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
            match unsafe { send_wr::<ANY_OP>(p, false, 1) } {
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
}

//! `ops.post_send`, what `verbs.h`'s inline `ibv_post_send` calls: each C
//! request translated in place ([`send_wr`]), and the list posted by the
//! walk (`walk.rs`, which also says how errors are answered; a list of
//! one request is posted without its chunk, answered the same way:
//! [`post_one`]). A C SGE array *is* a list of rverbs [`Slice`]s (same
//! layout, viewed in place), and inline data of one SGE is read in place;
//! only inline data spread over several SGEs is gathered (into a stack
//! buffer) and posted on its own.
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
use crate::walk::{refusal, refuse_all, walk, Refusal, Step};
use crate::{lock, member, members};
use rverbs::{Ah, Qp, QpState, SendWr, Slice};
use std::ffi::c_int;
use std::mem::MaybeUninit;

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

/// One C send request in rverbs' form: `Alone` for inline data over
/// several SGEs (gathered by [`post_gathered`]).
///
/// # Safety
/// `w` is a readable request whose SGEs, inline memory and AH satisfy
/// `ibv_post_send`'s contract; `ud`: the QP is UD.
#[inline(always)]
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
        let Some(b) = (unsafe { QpBox::of(q) }) else {
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
        unsafe { post_list(&mut Posting { qp: &mut qp, ud }, wr, bad, ud, max_sge) }
    })
}

/// Where a list post hands its requests: the QP ([`Posting`]), or a
/// test's recorder. A trait, not closures: the QP's one-request post is
/// large, and a closure that large is called out of line, where the
/// request must be stored and loaded back; a trait method marked
/// `inline(always)` is inlined at each call (callgrind: see the commit).
pub(crate) trait SendSink {
    /// Posts translated requests.
    fn post(&mut self, wrs: &[Send]) -> Result<(), Refusal>;
    /// Posts one translated request: `post(&[w])`.
    fn post_one(&mut self, w: &Send) -> Result<(), Refusal> {
        self.post(std::slice::from_ref(w))
    }
    /// Posts the request at `w` on its own ([`Step::Alone`]).
    ///
    /// # Safety
    /// `w` satisfies [`send_wr`]'s contract.
    unsafe fn alone(&mut self, w: *const IbvSendWr) -> Result<(), Refusal>;
}

/// A locked QP of ours, posted to.
struct Posting<'a> {
    qp: &'a mut Qp,
    ud: bool,
}

impl SendSink for Posting<'_> {
    fn post(&mut self, wrs: &[Send]) -> Result<(), Refusal> {
        self.qp.post_send(wrs).map_err(|e| refusal(&e))
    }

    /// [`Qp::post_send_one`], inlined here so that the translation is
    /// read where it was made.
    #[inline(always)]
    fn post_one(&mut self, w: &Send) -> Result<(), Refusal> {
        self.qp.post_send_one(w).map_err(|e| refusal(&e))
    }

    unsafe fn alone(&mut self, w: *const IbvSendWr) -> Result<(), Refusal> {
        // SAFETY: forwarded contract.
        unsafe { post_gathered(self.qp, w, self.ud) }
    }
}

/// Posts the C send list at `head`: a list of one request (the common
/// post) is translated and handed to `post` directly ([`post_one`]), a
/// longer one goes through [`walk_sends`]; both answer as [`walk`] does.
///
/// # Safety
/// As [`walk_sends`].
unsafe fn post_list<Q: SendSink>(
    q: &mut Q,
    head: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> c_int {
    // SAFETY: head, when not NULL, is a readable request (C contract),
    // and every request sets `next`.
    if !head.is_null() && !bad.is_null() && unsafe { member!(head, next) }.is_null() {
        // SAFETY: the caller's contract; bad is not NULL, head a list of
        // one.
        return unsafe { post_one(q, head, bad, ud, max_sge) };
    }
    // SAFETY: the caller's contract, forwarded.
    unsafe { walk_sends(q, head, bad, ud, max_sge) }
}

/// What [`walk`] does for a list of the one request `w`, without its
/// chunk of 16: `*bad` NULL, then `w` translated and posted (alone if
/// it asks to be), and named in `*bad` if it is refused — a translation
/// error, a refusal of request 0 by `post`, any refusal that names a
/// request by `alone` — with the errno returned; a call that failed as a
/// whole (no index) leaves `*bad` NULL.
///
/// # Safety
/// `w` is a readable request satisfying [`send_wr`]'s contract whose
/// `next` is NULL; `bad` is writable (C contract).
unsafe fn post_one<Q: SendSink>(
    q: &mut Q,
    w: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> c_int {
    // SAFETY: bad is writable (the caller's contract).
    unsafe { *bad = std::ptr::null_mut() };
    // SAFETY: the caller's contract, send_wr's.
    let (named, e) = match unsafe { send_wr(w, ud, max_sge) } {
        Ok(Step::Batch(r)) => match q.post_one(&r) {
            Ok(()) => return 0,
            // walk names a refused request of its chunk: here only 0.
            Err((i, e)) => (i == Some(0), e),
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

/// [`walk`] over a C send list, each request translated by [`send_wr`].
///
/// The walk's chunk holds its translated requests as `MaybeUninit`: the
/// slots are left unwritten until a request is translated into them (a
/// chunk of 16 `SendWr`s written blank on every call was ~135 instructions
/// of a one-request post), and `post` sees only slots the walk filled.
///
/// # Safety
/// As [`walk`] and [`send_wr`]: `head` a NULL-terminated list of readable
/// requests satisfying `ibv_post_send`'s contract, `bad` NULL or writable.
unsafe fn walk_sends<Q: SendSink>(
    q: &mut Q,
    head: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
    ud: bool,
    max_sge: u32,
) -> c_int {
    let translate = |w: *const IbvSendWr| {
        // SAFETY: w is a request of the caller's list (walk hands
        // `translate` only those), which satisfies send_wr's contract (ours).
        Ok(match unsafe { send_wr(w, ud, max_sge) }? {
            Step::Batch(r) => Step::Batch(MaybeUninit::new(r)),
            Step::Alone => Step::Alone,
        })
    };
    let post_chunk = |q: &mut Q, wrs: &[MaybeUninit<Send>]| {
        // Walk hands `post` only the requests `translate` returned for this
        // chunk (its `Chunk::flush` passes the first n slots, each written
        // by a push of a `Step::Batch` value, a `MaybeUninit::new` above).
        // SAFETY: so every element is initialised, and `MaybeUninit<T>` has
        // T's layout: the slice is one of `Send`s.
        let wrs = unsafe { &*(wrs as *const [MaybeUninit<Send>] as *const [Send]) };
        q.post(wrs)
    };
    let alone = |q: &mut Q, w: *const IbvSendWr| {
        // SAFETY: walk hands `alone` only requests of the caller's list,
        // which satisfy send_wr's contract (ours).
        unsafe { q.alone(w) }
    };
    // SAFETY: the caller's contract, forwarded.
    unsafe {
        walk(
            q,
            head,
            bad,
            MaybeUninit::<Send>::uninit(),
            translate,
            alone,
            post_chunk,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::walk::tests::link;
    use rverbs::{Remote, SendOp};

    /// A sink of two closures over a state `s`, for the tests.
    struct Fns<S, A, P> {
        s: S,
        alone: A,
        post: P,
    }

    impl<S, A, P> SendSink for Fns<S, A, P>
    where
        A: FnMut(&mut S, *const IbvSendWr) -> Result<(), Refusal>,
        P: FnMut(&mut S, &[Send]) -> Result<(), Refusal>,
    {
        fn post(&mut self, wrs: &[Send]) -> Result<(), Refusal> {
            (self.post)(&mut self.s, wrs)
        }
        unsafe fn alone(&mut self, w: *const IbvSendWr) -> Result<(), Refusal> {
            (self.alone)(&mut self.s, w)
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
        // requests, inline ones
        let mut sink = Fns {
            s: (0usize, 0usize),
            alone: |_: &mut (usize, usize), _| Err((Some(0), libc::EINVAL)),
            post: |p: &mut (usize, usize), batch: &[Send]| {
                p.0 += batch.len();
                p.1 += batch.iter().filter(|w| w.inline.is_some()).count();
                Ok(())
            },
        };
        let mut bad = std::ptr::null_mut();
        let before = crate::testing::allocs();
        // SAFETY: a linked, live list whose SGEs name `data`.
        let rc = unsafe { walk_sends(&mut sink, wrs.as_mut_ptr(), &mut bad, false, 4) };
        let allocs = crate::testing::allocs() - before;
        assert_eq!((rc, sink.s), (0, (40, 14)));
        assert_eq!(allocs, 0, "the post path allocated");
        // The counter does count (so the 0 above means something).
        let v = std::hint::black_box(vec![0u8; 16]);
        assert_eq!(crate::testing::allocs() - before, 1);
        drop(v);
    }

    /// A list of one goes to the provider without the walk's chunk
    /// (`post_one`), and answers as the walk does whatever the provider
    /// answers: the return, `*bad_wr`, what was posted (batched or alone).
    #[test]
    fn a_list_of_one_answers_as_the_walk_does() {
        let data = [3u8; 16];
        let mut sges: Vec<IbvSge> = (0..2)
            .map(|i| IbvSge {
                addr: data.as_ptr() as u64 + 8 * i,
                length: 8,
                lkey: 1,
            })
            .collect();
        let sg = sges.as_mut_ptr();
        // A SEND of one SGE (batched), one of more SGEs than the QP's 2
        // (malformed), an inline one over two SGEs (posted alone).
        let requests = [(1, 0), (3, 0), (2, send_flags::INLINE)];
        let answers: [Result<(), Refusal>; 4] = [
            Ok(()),
            Err((Some(0), libc::ENOMEM)),
            Err((None, libc::EIO)),
            Err((Some(1), libc::EINVAL)),
        ];
        for (num_sge, flags) in requests {
            for answer in answers {
                let run = |direct: bool| {
                    let mut w = IbvSendWr {
                        wr_id: 7,
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
                    };
                    let p: *mut IbvSendWr = &mut w;
                    let mut bad = std::ptr::NonNull::<IbvSendWr>::dangling().as_ptr();
                    // (batched requests, lone posts)
                    let mut sink = Fns {
                        s: (0usize, 0usize),
                        alone: |s: &mut (usize, usize), _| {
                            s.1 += 1;
                            answer
                        },
                        post: |s: &mut (usize, usize), b: &[Send]| {
                            s.0 += b.len();
                            answer
                        },
                    };
                    // SAFETY: a live request of one whose SGEs name `data`;
                    // bad is a live slot.
                    let rc = unsafe {
                        if direct {
                            post_one(&mut sink, p, &mut bad, false, 2)
                        } else {
                            walk_sends(&mut sink, p, &mut bad, false, 2)
                        }
                    };
                    (rc, bad.is_null(), bad == p, sink.s)
                };
                assert_eq!(
                    run(true),
                    run(false),
                    "num_sge {num_sge}, flags {flags}, provider {answer:?}"
                );
            }
        }
        // No slot, or no list: EINVAL before anything, as the walk.
        let mut bad = std::ptr::NonNull::<IbvSendWr>::dangling().as_ptr();
        let mut sink = Fns {
            s: 0usize,
            alone: |_: &mut usize, _| Ok(()),
            post: |n: &mut usize, b: &[Send]| {
                *n += b.len();
                Ok(())
            },
        };
        // SAFETY: NULL list and slot: neither is read.
        let rc = unsafe { post_list(&mut sink, std::ptr::null_mut(), &mut bad, false, 2) };
        assert_eq!((rc, bad.is_null(), sink.s), (libc::EINVAL, true, 0));
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
}

//! The walk the receive posts take over a C list of work requests
//! (`ibv_post_recv`, `ibv_post_srq_recv`; sends are written as they are
//! translated, `send.rs`): once, in order, translating each request into
//! rverbs' form without copying or allocating; the translated requests
//! wait in a fixed array on the stack until [`CHUNK`] of them are handed
//! to the provider at once. A request the translator cannot batch is
//! posted on its own, in its place. Also the C lists' shared pieces:
//! [`Linked`], [`Step`], [`refusal`], [`refuse_all`].
//!
//! Errors as rdma-core's rxe provider reports them: `bad_wr` NULL or an
//! empty list is `EINVAL`; otherwise `*bad_wr` is set to NULL, the
//! requests before the first refused one are posted, it and the rest are
//! not, `*bad_wr` names it and the return is its errno (`EINVAL` for a
//! malformed request, `ENOMEM` for a full queue). A failed doorbell
//! returns its errno with `*bad_wr` left NULL, as rxe's does.

use crate::abi::{IbvRecvWr, IbvSendWr};
use crate::{errno_of, member};
use rverbs::{Error, PostError};
use std::ffi::c_int;

/// Requests handed to the provider per call.
const CHUNK: usize = 16;

/// An element of a C work request list, read through its pointer: a send
/// request's members other than those its opcode uses may be unset, so no
/// reference to a whole request is made.
pub(crate) trait Linked: Sized {
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
pub(crate) enum Step<T> {
    /// A request to post with the others of its chunk.
    Batch(T),
    /// A request the translator posts on its own (`alone`).
    Alone,
}

/// Which request of a provider call was refused (`None`: the call failed
/// as a whole, e.g. the doorbell) and its errno.
pub(crate) type Refusal = (Option<usize>, c_int);

/// A refusal from rverbs' post error.
pub(crate) fn refusal(e: &Error) -> Refusal {
    match e {
        Error::QueueFull { index, .. } => (Some(*index), libc::ENOMEM),
        // A send on a QP before RTS, refused before anything reached the
        // ring: the call fails as a whole, as rxe's doorbell refuses it
        // in rdma-core (EINVAL, `*bad_wr` NULL).
        Error::InvalidWorkRequest {
            reason: PostError::NotReady { .. },
            ..
        } => (None, libc::EINVAL),
        Error::InvalidWorkRequest { index, .. } => (Some(*index), libc::EINVAL),
        e => (None, errno_of(e)),
    }
}

/// The translated requests waiting to be handed to the provider, and the
/// C requests they came from (to name a refused one in `*bad`).
struct Chunk<T, W> {
    wrs: [T; CHUNK],
    from: [*mut W; CHUNK],
    n: usize,
    bad: *mut *mut W,
}

impl<T: Copy, W> Chunk<T, W> {
    /// An empty chunk that names a refused request in `*bad`.
    ///
    /// # Safety
    /// `bad` is writable while the chunk lives.
    unsafe fn new(blank: T, bad: *mut *mut W) -> Self {
        Chunk {
            wrs: [blank; CHUNK],
            from: [std::ptr::null_mut(); CHUNK],
            n: 0,
            bad,
        }
    }

    /// Adds `t`, translated from `w`; true once the chunk is full.
    fn push(&mut self, t: T, w: *mut W) -> bool {
        self.wrs[self.n] = t;
        self.from[self.n] = w;
        self.n += 1;
        self.n == CHUNK
    }

    /// Hands what waits to `post` (nothing if nothing does) and empties
    /// the chunk; a request the provider refused is named in `*bad`.
    fn flush<Q>(
        &mut self,
        q: &mut Q,
        post: &mut impl FnMut(&mut Q, &[T]) -> Result<(), Refusal>,
    ) -> Result<(), c_int> {
        let n = std::mem::take(&mut self.n);
        if n == 0 {
            return Ok(());
        }
        post(q, &self.wrs[..n]).map_err(|(i, e)| {
            if let Some(&p) = i.and_then(|i| self.from[..n].get(i)) {
                // SAFETY: bad is writable while the chunk lives (new's
                // contract).
                unsafe { *self.bad = p };
            }
            e
        })
    }
}

/// Walks the C list at `head`: translates each request, posts them
/// [`CHUNK`] at a time through `post` (or one through `alone`), and
/// reports the first refused one in `*bad` (see the module docs).
///
/// # Safety
/// `head` is a NULL-terminated list of readable requests and `bad` NULL or
/// writable (C contract).
pub(crate) unsafe fn walk<Q, W: Linked, T: Copy>(
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
    // SAFETY: bad is writable (above) for the whole call.
    let mut chunk = unsafe { Chunk::new(blank, bad) };
    let mut p = head;
    while !p.is_null() {
        let r = match translate(p) {
            Ok(Step::Batch(t)) => {
                let full = chunk.push(t, p);
                if full {
                    chunk.flush(q, &mut post)
                } else {
                    Ok(())
                }
            }
            // What comes before an alone or refused request is posted
            // first, in order.
            Ok(Step::Alone) => chunk.flush(q, &mut post).and_then(|()| {
                alone(q, p).map_err(|(i, e)| {
                    if i.is_some() {
                        // SAFETY: bad is writable (above).
                        unsafe { *bad = p };
                    }
                    e
                })
            }),
            Err(e) => chunk.flush(q, &mut post).and_then(|()| {
                // SAFETY: bad is writable (above).
                unsafe { *bad = p };
                Err(e)
            }),
        };
        if let Err(e) = r {
            return e;
        }
        // SAFETY: a readable request of the caller's list.
        p = unsafe { W::next(p) };
    }
    chunk.flush(q, &mut post).err().unwrap_or(0)
}

/// Refuses a whole list: `EINVAL`, `*bad` NULL (as rxe's provider does
/// for a QP in a state that takes no such requests).
///
/// # Safety
/// `bad` is NULL or writable (C contract).
pub(crate) unsafe fn refuse_all<W>(bad: *mut *mut W) -> c_int {
    if !bad.is_null() {
        // SAFETY: bad is writable (C contract, non-NULL).
        unsafe { *bad = std::ptr::null_mut() };
    }
    libc::EINVAL
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
    pub(crate) fn link<W>(v: &mut [W], set: impl Fn(&mut W, *mut W)) {
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
}

//! The floor every object of the C API stands on: how a C pointer names a
//! Rust box, how an object counts the objects that use it, and the one way
//! every object goes.
//!
//! Each C object (`struct ibv_pd`, …) lies in a Rust box that owns the
//! rverbs object ([`CObject`]); the C pointer is the box's address (plus an
//! offset for the context, whose `ibv_context` ends a `verbs_context`).
//! rverbs' objects keep their parents alive, but the kernel refuses to
//! destroy a PD with MRs or QPs, a CQ with QPs, a channel with CQs, an SRQ
//! with QPs (`EBUSY`), and C programs see that answer: a parent counts its
//! children ([`Users`]) through the [`Held`] each child's box keeps, and
//! refuses while any is left. [`destroy`] is every `ibv_destroy_*`,
//! `ibv_dealloc_*`, `ibv_dereg_mr` and `ibv_close_device`: decide (a
//! refusal keeps the object), free the box, then let go of what deciding
//! held.

use crate::ret_errno;
use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A box that owns an rverbs object and holds, [`AT`](CObject::AT) bytes
/// in, the C struct `C` whose address C programs hold.
///
/// # Safety
/// The implementing type is `#[repr(C)]` with a `C` (or an
/// `UnsafeCell<C>`) `AT` bytes into it, so that a pointer to the box and
/// a pointer to its C struct differ by `AT`; and every `*mut C` of this
/// type that reaches [`CObject::of`] came from [`CObject::into_c`] (this
/// library hands out no other).
pub(crate) unsafe trait CObject: Sized {
    /// The C struct C programs hold a pointer to.
    type C;
    /// Where that struct lies in the box: 0, the first field, for every
    /// object but the context.
    const AT: usize = 0;

    /// Moves the box to the heap and hands out its C struct's address,
    /// which C holds until it destroys the object ([`destroy`]).
    fn into_c(self) -> *mut Self::C {
        let b = Box::into_raw(Box::new(self));
        // SAFETY: AT bytes into the box just allocated (the trait's
        // contract), so in bounds of it.
        unsafe { b.cast::<u8>().add(Self::AT).cast() }
    }

    /// The box behind a C pointer of this type; `None` for NULL.
    ///
    /// # Safety
    /// `p` is NULL or a pointer of this type that C was handed out and has
    /// not destroyed (the C contract of every verb).
    unsafe fn of<'a>(p: *mut Self::C) -> Option<&'a Self> {
        if p.is_null() {
            return None;
        }
        // SAFETY: p came from into_c (the trait's contract), AT bytes into
        // a box that is live (the caller's contract).
        unsafe { p.cast::<u8>().sub(Self::AT).cast::<Self>().as_ref() }
    }
}

/// Destroys the object at `p` as every destroy of the C API does here:
/// `EINVAL` for NULL; then `decide`, which answers the kernel's refusal
/// (its errno; the object stays, to be destroyed later) or what it held
/// to decide (the locks a destroy keeps until the kernel object is gone);
/// then the box is freed, which destroys the rverbs objects in it and lets
/// go of its parents ([`Held`]); then what `decide` held is let go. 0, or
/// the errno (in `errno` too).
///
/// `decide` cannot hand back a borrow of the box it is shown: what it
/// holds outlives the box.
///
/// # Safety
/// `p` is NULL or a live object of this type, destroyed once (C contract:
/// no other thread uses it any more).
pub(crate) unsafe fn destroy<B: CObject, G>(
    p: *mut B::C,
    decide: impl FnOnce(&B) -> Result<G, c_int>,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(b) = (unsafe { B::of(p) }) else {
        return ret_errno(libc::EINVAL);
    };
    let held = match decide(b) {
        Ok(held) => held,
        Err(e) => return ret_errno(e),
    };
    // SAFETY: made by Box::into_raw in into_c, AT bytes before p; nothing
    // refers to it any more (`b` is not used after this, `held` borrows
    // none of it, and the C caller destroys it once).
    drop(unsafe { Box::from_raw(p.cast::<u8>().sub(B::AT).cast::<B>()) });
    drop(held);
    0
}

/// The objects of the C API that use this one (MRs, QPs, AHs, SRQs and
/// windows of a PD; QPs of a CQ or an SRQ; CQs of a channel).
#[derive(Default)]
pub(crate) struct Users(AtomicUsize);

impl Users {
    /// `Ok` while nothing uses the object; else `EBUSY`, the kernel's
    /// answer to destroying an object in use.
    pub(crate) fn none(&self) -> Result<(), c_int> {
        match self.0.load(Ordering::Acquire) {
            0 => Ok(()),
            _ => Err(libc::EBUSY),
        }
    }
}

/// An object that counts its users (a parent of others).
pub(crate) trait Parent {
    fn users(&self) -> &Users;
}

/// A child's hold on its parent: counted in the parent's [`Users`] from
/// [`Held::new`] until dropped with the child's box. The parent's destroy
/// refuses while it is counted, so the parent outlives every hold on it.
pub(crate) struct Held<P: Parent>(NonNull<P>);

impl<P: Parent> Held<P> {
    pub(crate) fn new(parent: &P) -> Held<P> {
        parent.users().0.fetch_add(1, Ordering::AcqRel);
        Held(NonNull::from(parent))
    }

    /// The parent.
    pub(crate) fn get(&self) -> &P {
        // SAFETY: the parent is live while this hold is counted in it (its
        // destroy refuses until then).
        unsafe { self.0.as_ref() }
    }

    /// The parent's address, for what must reach it after this hold's box
    /// is freed (a destroy's locks, let go right after): live as long as
    /// the program destroys the parent only after the child (C contract).
    pub(crate) fn ptr(&self) -> *const P {
        self.0.as_ptr()
    }
}

impl<P: Parent> Drop for Held<P> {
    fn drop(&mut self) {
        self.get().users().0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    struct Thing {
        c: u64,
        users: Users,
        parent: Option<Held<Thing>>,
    }

    // SAFETY: repr(C), `c` first; the tests hand out only into_c's.
    unsafe impl CObject for Thing {
        type C = u64;
    }

    impl Parent for Thing {
        fn users(&self) -> &Users {
            &self.users
        }
    }

    fn thing(parent: Option<&Thing>) -> *mut u64 {
        Thing {
            c: 7,
            users: Users::default(),
            parent: parent.map(Held::new),
        }
        .into_c()
    }

    /// A destroy that holds its parent's lock past the box (as
    /// `ibv_destroy_cq` holds its channel's `reading`) holds the parent
    /// too, in what it hands back, after the lock: between the box's free
    /// (which lets go of the box's own hold) and the lock's release,
    /// another thread's destroy of the parent is refused, so the lock is
    /// never let go in freed memory (Miri would flag it).
    #[test]
    fn a_lock_held_past_the_box_keeps_its_parent() {
        use crate::lock;
        use std::sync::{mpsc, Mutex};
        #[repr(C)]
        struct Parent {
            c: u64,
            users: Users,
            lock: Mutex<()>,
        }
        // SAFETY: repr(C), `c` first; the test hands out only into_c's.
        unsafe impl CObject for Parent {
            type C = u64;
        }
        impl super::Parent for Parent {
            fn users(&self) -> &Users {
                &self.users
            }
        }
        #[repr(C)]
        struct Child {
            c: u64,
            parent: Held<Parent>,
        }
        // SAFETY: as above.
        unsafe impl CObject for Child {
            type C = u64;
        }
        /// Dropped first of what the child's destroy holds: lets the other
        /// thread try the parent's destroy, and waits for its answer.
        struct Between(mpsc::Sender<()>, mpsc::Receiver<c_int>);
        impl Drop for Between {
            fn drop(&mut self) {
                self.0.send(()).unwrap();
                let answer = self.1.recv().unwrap();
                assert_eq!(answer, libc::EBUSY, "the parent went under the lock");
            }
        }
        let p = Parent {
            c: 1,
            users: Users::default(),
            lock: Mutex::new(()),
        }
        .into_c() as usize;
        // SAFETY: p is live (made above).
        let parent = unsafe { Parent::of(p as *mut u64) }.expect("live");
        let c = Child {
            c: 2,
            parent: Held::new(parent),
        }
        .into_c();
        let (go_tx, go_rx) = mpsc::channel();
        let (ans_tx, ans_rx) = mpsc::channel();
        let other = std::thread::spawn(move || {
            go_rx.recv().unwrap();
            let busy = |b: &Parent| b.users.none();
            // SAFETY: a live parent, destroyed once (if it goes, here).
            ans_tx
                .send(unsafe { destroy::<Parent, _>(p as *mut u64, busy) })
                .unwrap();
            go_rx.recv().unwrap();
            // SAFETY: as above; the child is gone now.
            unsafe { destroy::<Parent, _>(p as *mut u64, busy) }
        });
        let decide = |b: &Child| {
            let keep = Held::new(b.parent.get());
            let ptr = keep.ptr();
            // SAFETY: the parent is live while `keep` counts it.
            let guard = lock(&unsafe { &*ptr }.lock);
            Ok((Between(go_tx.clone(), ans_rx), guard, keep))
        };
        // SAFETY: a live child, destroyed once.
        let r = unsafe { destroy::<Child, _>(c, decide) };
        assert_eq!(r, 0);
        go_tx.send(()).unwrap();
        assert_eq!(other.join().unwrap(), 0, "the parent goes after the child");
    }

    /// A parent refuses (`EBUSY`) while a child holds it, and goes once the
    /// child has; NULL is `EINVAL`; a refusal keeps the object.
    #[test]
    fn a_parent_goes_after_its_children() {
        let p = thing(None);
        // SAFETY: p is live (made above).
        let c = thing(Some(unsafe { Thing::of(p) }.expect("live")));
        let busy = |b: &Thing| b.users.none();
        // SAFETY: live objects of this type, or NULL.
        unsafe {
            assert_eq!(
                destroy::<Thing, _>(std::ptr::null_mut(), busy),
                libc::EINVAL
            );
            assert_eq!(destroy::<Thing, _>(p, busy), libc::EBUSY);
            assert_eq!(Thing::of(p).map(|b| b.c), Some(7), "refused, kept");
            assert_eq!(destroy::<Thing, _>(c, busy), 0);
            assert_eq!(destroy::<Thing, _>(p, busy), 0);
        }
    }
}

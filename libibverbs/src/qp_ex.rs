//! The `struct ibv_qp_ex` every QP box carries right after its `struct
//! ibv_qp` ([`QpEx`], the box's second field), so the QP's C pointer is
//! also its `ibv_qp_ex` pointer, as in libibverbs' `verbs_qp`: the members
//! the program writes before each `wr_<op>`, the slots `verbs.h`'s
//! `ibv_wr_*` inlines call (`wr.rs`), and the batch they fill
//! (`batch.rs`).

use crate::abi::{IbvQpCap, IbvQpExOps, IbvQpExTail};
use crate::batch::Batch;
use crate::spin::{Spin, SpinGuard};
use rverbs::{SendBuilder, SendOp};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::ops::{Deref, DerefMut};

/// What a QP box carries for the `ibv_qp_ex` view (the box's second
/// field, right after its `struct ibv_qp`).
#[repr(C)]
pub(crate) struct QpEx {
    /// In an UnsafeCell: the program writes `wr_id` and `wr_flags` through
    /// its pointer while other threads may hold shared references to the
    /// box (any verb on the same QP).
    c: UnsafeCell<IbvQpExTail>,
    /// Set at creation, before the pointer is handed out.
    enabled: bool,
    send_ops: u64,
    /// The provider's errno for a batch without room.
    full: c_int,
    /// The QP's granted `max_inline_data` (in-ring builders).
    max_inline: usize,
    /// A spin lock, as the queues' (`spin.rs` says why not std's Mutex):
    /// each `ibv_wr_*` call takes it once.
    batch: Spin<Batch>,
    /// A gathered batch's session: held from `wr_start` to `wr_complete`
    /// or `wr_abort` (`wr::Gather`), as rdma-core's mlx5 holds its SQ
    /// lock, so that a second thread's batch waits instead of resetting
    /// this one's.
    session: Spin<()>,
    /// The batch of a QP whose builders write into its send queue as they
    /// go (rxe: `wr::InRing`), held by the thread that holds the QP.
    ring: UnsafeCell<InRing>,
}

/// An rxe QP's `ibv_wr_*` batch: the builder `wr_start` opened on the QP
/// it took the lock of, kept until `wr_complete` or `wr_abort` let go of
/// it, and the first error of a call the builder did not see.
#[derive(Default)]
pub(crate) struct InRing {
    /// `wr_start` holds the QP's lock.
    pub(crate) open: bool,
    /// Borrows the QP in the box, whose lock is held while this is set.
    pub(crate) builder: Option<SendBuilder<'static>>,
    /// The batch's first errno the builder did not see (a NULL AH, an
    /// operation the QP was not created for); 0 for none (an errno never
    /// is): a word, not an `Option`, to which `wr_complete` needs one load
    /// (callgrind). `wr_start` sets it, so `wr_complete` leaves it.
    pub(crate) error: c_int,
}

impl QpEx {
    /// A QP's tail, not an extended QP: every slot set all the same (from
    /// the context's table), so a stray call through one fails the batch
    /// instead of jumping to NULL.
    pub(crate) fn new(ops: IbvQpExOps) -> QpEx {
        QpEx {
            c: UnsafeCell::new(IbvQpExTail {
                comp_mask: 0,
                wr_id: 0,
                wr_flags: 0,
                ops,
            }),
            enabled: false,
            send_ops: 0,
            full: libc::ENOMEM,
            max_inline: 0,
            batch: Spin::new(Batch::default()),
            session: Spin::new(()),
            ring: UnsafeCell::new(InRing::default()),
        }
    }

    /// The tail of a QP created for `send_ops` (`ibv_create_qp_ex` with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`): its batch storage, once, from
    /// the caps granted. A full batch fails with `full` (the provider's
    /// errno for it).
    pub(crate) fn extended(ops: IbvQpExOps, send_ops: u64, cap: &IbvQpCap, full: c_int) -> QpEx {
        QpEx {
            enabled: true,
            send_ops,
            full,
            batch: Spin::new(Batch::sized(
                cap.max_send_wr as usize,
                cap.max_send_sge as usize,
                cap.max_inline_data as usize,
                full,
            )),
            ..QpEx::new(ops)
        }
    }

    /// The tail of a QP created for `send_ops` whose builders write into
    /// its send queue (`wr::InRing`): no batch storage. A batch without
    /// room, or a payload past the QP's caps `cap`, fails with `full`.
    pub(crate) fn in_ring(ops: IbvQpExOps, send_ops: u64, cap: &IbvQpCap, full: c_int) -> QpEx {
        QpEx {
            enabled: true,
            send_ops,
            full,
            max_inline: cap.max_inline_data as usize,
            ..QpEx::new(ops)
        }
    }

    /// Opens a gathered batch (`wr_start` of `wr::Gather`): waits for any
    /// other thread's to end, as rdma-core's mlx5 holds its SQ lock from
    /// `wr_start`, then empties the batch and marks it open.
    pub(crate) fn gather_start(&self) {
        // SAFETY: released once, in gather_end, for the batch marked open
        // here; nothing is borrowed through it.
        unsafe { self.session.hold() };
        let mut b = self.batch();
        b.reset();
        b.open = true;
    }

    /// Ends the gathered batch `gather_start` opened (`wr_complete`,
    /// `wr_abort`): answers what `f` makes of it (the post, or nothing),
    /// empties it and lets the next batch in. With no batch open, answers
    /// `EINVAL` and touches nothing.
    pub(crate) fn gather_end(&self, f: impl FnOnce(&mut Batch) -> c_int) -> c_int {
        let mut b = self.batch();
        if !std::mem::take(&mut b.open) {
            return libc::EINVAL;
        }
        let r = f(&mut b);
        b.reset();
        drop(b);
        // SAFETY: the batch was open, so gather_start holds the session.
        unsafe { self.session.release() };
        r
    }

    /// Whether the QP was created with `send_ops_flags`: the only QPs
    /// `ibv_qp_to_qp_ex` hands out.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The in-ring batch.
    ///
    /// # Safety
    /// The caller is inside an `ibv_wr_*` call on this QP, which C calls
    /// only between `wr_start` and `wr_complete` or `wr_abort`, from the
    /// thread that called `wr_start` (which holds the QP's lock, as
    /// rdma-core's providers hold their SQ lock then); or it holds the QP's
    /// lock itself. Either way no other reference to it is live.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)] // the lock held is what makes it unique
    pub(crate) unsafe fn ring(&self) -> &mut InRing {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.ring.get() }
    }

    /// The provider's errno for a batch without room.
    #[inline(always)]
    pub(crate) fn full(&self) -> c_int {
        self.full
    }

    /// The QP's granted `max_inline_data` (0 unless in-ring).
    #[inline(always)]
    pub(crate) fn max_inline(&self) -> usize {
        self.max_inline
    }

    /// Whether the QP was created for the operation `needs` names.
    #[inline(always)]
    pub(crate) fn takes(&self, needs: u64) -> bool {
        self.send_ops & needs != 0
    }

    /// The program's current `wr_id` and `wr_flags`.
    #[inline(always)]
    pub(crate) fn id_and_flags(&self) -> (u64, u32) {
        let t = self.c.get();
        // SAFETY: `t` is this live struct's tail, in its UnsafeCell: the
        // program writes these plain integers through its own pointer
        // between calls, so they are read through the cell, never a
        // reference.
        unsafe {
            (
                std::ptr::addr_of!((*t).wr_id).read(),
                std::ptr::addr_of!((*t).wr_flags).read(),
            )
        }
    }

    /// Adds a request of `op` (if the QP was created for it) with the
    /// program's current `wr_id` and `wr_flags`.
    pub(crate) fn add(&self, needs: u64, op: SendOp) {
        let t = self.c.get();
        // SAFETY: `t` is this live struct's tail, in its UnsafeCell: the
        // program writes these plain integers through its own pointer
        // between calls, so they are read through the cell, never a
        // reference.
        let (wr_id, flags) = unsafe {
            (
                std::ptr::addr_of!((*t).wr_id).read(),
                std::ptr::addr_of!((*t).wr_flags).read(),
            )
        };
        let mut b = self.batch();
        if self.send_ops & needs == 0 {
            return b.fail(libc::EINVAL);
        }
        b.add(wr_id, flags, op);
    }

    /// The QP's batch. A panic while it was held (caught by the entry
    /// point's guard) may have left it short of a request: then the batch
    /// is failed, so that `wr_complete` posts none of it.
    #[inline(always)]
    pub(crate) fn batch(&self) -> BatchGuard<'_> {
        BatchGuard(self.batch.lock())
    }
}

/// The batch, held. Dropped while unwinding from a panic, it fails the
/// batch, as std's poisoning did; the C builds abort on a panic
/// (`panic = "abort"`), so there the check compiles to nothing.
pub(crate) struct BatchGuard<'a>(SpinGuard<'a, Batch>);

impl Deref for BatchGuard<'_> {
    type Target = Batch;
    #[inline(always)]
    fn deref(&self) -> &Batch {
        &self.0
    }
}

impl DerefMut for BatchGuard<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Batch {
        &mut self.0
    }
}

impl Drop for BatchGuard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(panic = "unwind")]
        if std::thread::panicking() {
            self.0.fail(crate::guard::PANICKED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::send_ops;
    use crate::guard;
    use std::mem::offset_of;

    /// A tail's slots, unused by these tests.
    fn no_ops() -> IbvQpExOps {
        // SAFETY: slots are code pointers; NULL ones are valid values (no
        // test calls them).
        unsafe { std::mem::zeroed() }
    }

    /// A panic in a `wr_*` call while the batch is held (a bug, caught by
    /// the entry point's guard) fails the batch, which then posts nothing.
    #[test]
    fn a_panic_mid_batch_fails_the_batch() {
        let cap = IbvQpCap {
            max_send_wr: 4,
            max_send_sge: 1,
            ..IbvQpCap::default()
        };
        let x = QpEx::extended(no_ops(), send_ops::SEND, &cap, libc::ENOSPC);
        x.add(send_ops::SEND, SendOp::Send);
        guard::void(|| {
            let _held = x.batch();
            panic!("a bug");
        });
        assert_eq!(x.batch().error(), Some(guard::PANICKED));
        x.batch().reset();
        assert_eq!(x.batch().error(), None, "the next batch starts clean");
    }

    /// A gathered batch holds the QP from `wr_start` to its end, as
    /// rdma-core's mlx5 holds its SQ lock: a second thread's `wr_start`
    /// waits, instead of emptying the first's batch under it (which then
    /// posted the second's requests as its own). Ending a batch never
    /// opened touches nothing.
    #[test]
    fn a_gathered_batch_holds_the_qp_until_its_end() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let cap = IbvQpCap {
            max_send_wr: 4,
            max_send_sge: 1,
            ..IbvQpCap::default()
        };
        let x = QpEx::extended(no_ops(), send_ops::SEND, &cap, libc::ENOSPC);
        /// The QP's tail shared by two threads, as C shares a QP's box.
        struct Across<'a>(&'a QpEx);
        // SAFETY: as C programs share a QP: the threads reach the tail
        // through its locks, and write `wr_id` in turn (the second only
        // after the first's batch ended, ordered by the session lock).
        unsafe impl Sync for Across<'_> {}
        let across = Across(&x);
        let x = across.0;
        assert_eq!(x.gather_end(|_| 0), libc::EINVAL, "no batch open");
        let ids = |b: &Batch| b.reqs_ids();
        let second_started = AtomicBool::new(false);
        x.gather_start();
        // SAFETY: the tail's own member, through its cell (the program's
        // store).
        unsafe { std::ptr::addr_of_mut!((*x.c.get()).wr_id).write(1) };
        x.add(send_ops::SEND, SendOp::Send);
        std::thread::scope(|s| {
            let (a, started) = (&across, &second_started);
            let t = s.spawn(move || {
                let x = a.0;
                x.gather_start();
                started.store(true, Ordering::SeqCst);
                // SAFETY: as above.
                unsafe { std::ptr::addr_of_mut!((*x.c.get()).wr_id).write(2) };
                x.add(send_ops::SEND, SendOp::Send);
                x.gather_end(|b| {
                    assert_eq!(ids(b), [2], "the second batch is its own");
                    0
                })
            });
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert!(!second_started.load(Ordering::SeqCst), "the second waits");
            assert_eq!(
                x.gather_end(|b| {
                    assert_eq!(ids(b), [1], "the first batch is its own");
                    7
                }),
                7
            );
            assert_eq!(t.join().unwrap(), 0);
        });
    }

    /// The program sets `wr_id` and `wr_flags` through its own pointer
    /// while a verb holds a shared reference to the box; the next request
    /// takes them, and neither the pointer nor the reference is
    /// invalidated (Miri checks the aliasing).
    #[test]
    fn the_program_sets_wr_id_through_its_pointer() {
        let cap = IbvQpCap {
            max_send_wr: 4,
            max_send_sge: 1,
            ..IbvQpCap::default()
        };
        let p = Box::into_raw(Box::new(QpEx::extended(
            no_ops(),
            send_ops::SEND,
            &cap,
            libc::ENOSPC,
        )));
        // SAFETY: live until it is freed at the end.
        let x = unsafe { &*p };
        for id in [9u64, 10] {
            let tail = p.cast::<u8>().wrapping_add(offset_of!(QpEx, c));
            // SAFETY: the program's stores, through its pointer, to the
            // members at their offsets in the live tail.
            unsafe {
                tail.add(offset_of!(IbvQpExTail, wr_id))
                    .cast::<u64>()
                    .write(id);
                tail.add(offset_of!(IbvQpExTail, wr_flags))
                    .cast::<u32>()
                    .write(crate::abi::send_flags::SIGNALED);
            }
            x.add(send_ops::SEND, SendOp::Send);
        }
        let b = x.batch();
        let got = b.requests();
        assert_eq!(got, [(9, 2), (10, 2)]);
        assert_eq!(b.error(), None);
        drop(b);
        // SAFETY: made by Box::into_raw above; `x` is not used after.
        drop(unsafe { Box::from_raw(p) });
    }
}

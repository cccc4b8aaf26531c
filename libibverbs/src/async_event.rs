//! Async events: `ibv_get_async_event` and `ibv_ack_async_event` over
//! rverbs' [`Context::get_async_event`](rverbs::Context::get_async_event),
//! which reads `ib_uverbs_async_event_desc` from the context's async fd
//! (the fd C programs find in `ibv_context.async_fd` and poll).
//!
//! The kernel names an object by the user handle rverbs gave it at
//! creation; this module keeps the map from (kind, handle) to the C
//! pointer, and per object the events handed out and acknowledged. As in
//! libibverbs, destroying a QP, CQ or SRQ waits until every event handed
//! out for it has been acknowledged (`ibv_cmd_destroy_qp` waits on
//! `events_reported` from the kernel; the kernel counts an event as
//! reported when it is read, which is when this module counts it). CQs
//! wait for their completion events' acknowledgements the same way.
//!
//! An object's C pointer is only handed out, and its counters only
//! changed, under the map's lock, in the same critical section as the
//! lookup: a destroy on another thread either retired the object before
//! (the event is dropped, as the kernel drops the queued events of an
//! object it destroys) or must wait for the event's acknowledgement.
//! Nothing here touches an object after publishing an acknowledgement,
//! which may let its destroy go on and free it.

use crate::abi::{IbvAsyncEvent, IbvContext, IbvCq, IbvQp, IbvSrq};
use crate::cancel::{self, Step};
use crate::context::CtxBox;
use crate::guard;
use crate::obj::CObject;
use crate::{errno_of, export, lock, minus1_errno};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;
use std::sync::{Condvar, Mutex, MutexGuard};

/// What kind of object an event names (user handles are counted per
/// kind in rverbs, so the kind is part of the key).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Kind {
    Qp,
    Cq,
    Srq,
}

/// A registered object's C pointer (the address of its box).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Ptr(*mut c_void);

// SAFETY: only an address; it is dereferenced under the registry's rules
// (module docs), whichever thread holds it.
unsafe impl Send for Ptr {}

/// One registered object: its C pointer, and the events for it handed out
/// (by `ibv_get_async_event`, and for CQs by `ibv_get_cq_event`) and
/// acknowledged so far.
struct Obj {
    ptr: Ptr,
    reported: u32,
    acked: u32,
    comp_reported: u32,
    comp_acked: u32,
}

impl Obj {
    fn settled(&self) -> bool {
        self.acked == self.reported && self.comp_acked == self.comp_reported
    }
}

struct Registry {
    objs: Mutex<BTreeMap<(Kind, u64), Obj>>,
    /// Signalled on every acknowledgement (a destroy may be waiting).
    acked: Condvar,
}

static REG: Registry = Registry {
    objs: Mutex::new(BTreeMap::new()),
    acked: Condvar::new(),
};

fn objs() -> MutexGuard<'static, BTreeMap<(Kind, u64), Obj>> {
    lock(&REG.objs)
}

/// Names the C object `ptr` as the target of events for rverbs' user
/// handle `handle` (called when the object is created).
pub(crate) fn register(kind: Kind, handle: u64, ptr: *mut c_void) {
    objs().insert(
        (kind, handle),
        Obj {
            ptr: Ptr(ptr),
            reported: 0,
            acked: 0,
            comp_reported: 0,
            comp_acked: 0,
        },
    );
}

/// Hands out a completion event for the CQ of user handle `handle`: its C
/// pointer, the event counted in the same critical section, so that the
/// CQ stays until the event is acknowledged. `None` if that CQ is retired
/// (being destroyed): the event is dropped.
pub(crate) fn take_comp_event(handle: u64) -> Option<*mut IbvCq> {
    let mut g = objs();
    let o = g.get_mut(&(Kind::Cq, handle))?;
    o.comp_reported = o.comp_reported.wrapping_add(1);
    Some(o.ptr.0.cast())
}

/// Counts `n` completion events of the CQ of user handle `handle` as
/// acknowledged, in the registry and in the CQ's C counter
/// (`comp_events_completed`) in one critical section; then wakes a destroy
/// waiting for them, without touching the CQ again.
pub(crate) fn ack_comp_events(handle: u64, n: u32) {
    let mut g = objs();
    if let Some(o) = g.get_mut(&(Kind::Cq, handle)) {
        o.comp_acked = o.comp_acked.wrapping_add(n);
        let c = o.ptr.0.cast::<IbvCq>();
        // SAFETY: the CQ is registered, so not freed (its destroy retires
        // it first, under this lock); its C struct is the box's
        // UnsafeCell, and the counter is written only under this lock.
        unsafe {
            let k = std::ptr::addr_of_mut!((*c).comp_events_completed);
            k.write(k.read().wrapping_add(n));
        }
    }
    drop(g);
    REG.acked.notify_all();
}

/// Forgets an object that is being destroyed, first waiting (as
/// libibverbs' destroy does) until every event handed out for it has been
/// acknowledged by `ibv_ack_async_event` (and for a CQ, every completion
/// event by `ibv_ack_cq_events`).
#[cfg(test)]
pub(crate) fn retire(kind: Kind, handle: u64) {
    retire_holding(kind, handle, || ());
}

/// [`retire`], deciding while `hold()`'s guards are held: the reading locks
/// of the fds that carry the object's events ([`read_counted`]), so that no
/// event for it can be read and not yet counted. The guards are returned:
/// the caller keeps them until the kernel object is destroyed, which drops
/// the events still queued for it (so none is read for a retired object).
/// The waiting itself is done without them, so readers go on meanwhile.
pub(crate) fn retire_holding<G>(kind: Kind, handle: u64, hold: impl Fn() -> G) -> G {
    let settled =
        |g: &BTreeMap<(Kind, u64), Obj>| !matches!(g.get(&(kind, handle)), Some(o) if !o.settled());
    loop {
        let mut g = objs();
        while !settled(&g) {
            g = REG.acked.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        drop(g);
        // Readers' locks before the map's, as readers take them.
        let held = hold();
        let mut g = objs();
        if settled(&g) {
            g.remove(&(kind, handle));
            return held;
        }
        // An event was handed out meanwhile: wait for it too.
    }
}

/// [`retire_holding`] for an object whose events come on the async fd
/// alone (a QP, an SRQ), holding the reading lock of its context `ctx`.
pub(crate) fn retire_async(
    kind: Kind,
    handle: u64,
    ctx: Option<&CtxBox>,
) -> Option<MutexGuard<'_, ()>> {
    retire_holding(kind, handle, || ctx.map(|x| lock(&x.async_reading)))
}

/// Reads one event, as `read_now` reads and counts it, under `reading`:
/// what [`retire_holding`] holds to see no event read but not yet
/// counted. `read_now` reads without blocking and gives `None` when
/// nothing is queued; then so does this, and the caller waits outside the
/// lock (`cancel::blocking`), or answers `EAGAIN` for a fd the program made
/// non-blocking, as rdma-core's read does.
pub(crate) fn try_counted<T>(
    reading: &Mutex<()>,
    read_now: impl FnOnce() -> Result<Option<T>, c_int>,
) -> Result<Option<T>, c_int> {
    let _g = lock(reading);
    read_now()
}

/// The step of a blocking read ([`cancel::blocking`]) that found nothing:
/// `EAGAIN` on a non-blocking `fd`, else a wait for it.
pub(crate) fn nothing_yet(fd: std::os::fd::RawFd) -> Step {
    if cancel::nonblocking(fd) {
        return Step::Done(minus1_errno(libc::EAGAIN));
    }
    Step::Wait(fd)
}

/// Which kind of object an `enum ibv_event_type` names; `None` for port
/// and device events, whose element is the port number.
fn kind_of(t: u32) -> Option<Kind> {
    match t {
        0 => Some(Kind::Cq),
        1..=7 | 16 => Some(Kind::Qp),
        14 | 15 => Some(Kind::Srq),
        _ => None,
    }
}

/// What an event names, as `ibv_async_event.element`: the C pointer of a
/// registered object, the event counted in the same critical section; the
/// port number for port events. `None` for an object not registered (none
/// can be, read under the context's reading lock: a destroy retires an
/// object and destroys it under that lock, and the kernel then drops its
/// queued events): dropped, never handed out naming a freed object.
fn element_of(ev: &rverbs::AsyncEvent) -> Option<usize> {
    let Some(kind) = kind_of(ev.event_type.0) else {
        return Some(ev.element as u32 as usize);
    };
    let mut g = objs();
    let o = g.get_mut(&(kind, ev.element))?;
    o.reported = o.reported.wrapping_add(1);
    Some(o.ptr.0 as usize)
}

/// `ibv_get_async_event`: blocks (unless the program made `async_fd`
/// non-blocking) for the next event; 0, or -1 with errno. Cancellable
/// while it waits, as rdma-core's (`cancel.rs`).
unsafe extern "C" fn get_async_event(c: *mut IbvContext, out: *mut IbvAsyncEvent) -> c_int {
    // SAFETY: forwarded C contract.
    cancel::blocking(move || unsafe { async_event_step(c, out) })
}

/// One attempt of `ibv_get_async_event`.
///
/// # Safety
/// `c` is NULL or an open context of ours; `out` NULL or writable (C
/// contract).
unsafe fn async_event_step(c: *mut IbvContext, out: *mut IbvAsyncEvent) -> Step {
    // SAFETY: an open context of ours (C contract).
    let Some(b) = (unsafe { CtxBox::of(c) }) else {
        return Step::Done(minus1_errno(libc::EINVAL));
    };
    if out.is_null() {
        return Step::Done(minus1_errno(libc::EINVAL));
    }
    let read_now = || loop {
        if !b.ctx.wait_async_event(0).map_err(|e| errno_of(&e))? {
            return Ok(None);
        }
        let ev = b.ctx.get_async_event().map_err(|e| errno_of(&e))?;
        if let Some(element) = element_of(&ev) {
            return Ok(Some(IbvAsyncEvent {
                element,
                event_type: ev.event_type.0 as c_int,
            }));
        }
    };
    let ev = match try_counted(&b.async_reading, read_now) {
        Ok(Some(ev)) => ev,
        Ok(None) => return nothing_yet(b.ctx.async_fd().as_raw_fd()),
        Err(e) => return Step::Done(minus1_errno(e)),
    };
    // SAFETY: out is a writable ibv_async_event (C contract, non-NULL).
    unsafe { out.write(ev) };
    Step::Done(0)
}
export!("ibv_get_async_event" = get_async_event);

/// `ibv_ack_async_event`: counts the acknowledgement (in the object's C
/// counter too: `events_completed` / `async_events_completed`) and wakes
/// a destroy waiting for it.
unsafe extern "C" fn ack_async_event(ev: *mut IbvAsyncEvent) {
    guard::void(|| {
        // SAFETY: NULL or an event from ibv_get_async_event (C contract).
        let Some(ev) = (unsafe { ev.as_ref() }) else {
            return;
        };
        let Some(kind) = kind_of(ev.event_type as u32) else {
            return;
        };
        if ev.element == 0 {
            return;
        }
        let mut g = objs();
        let Some(o) = g
            .iter_mut()
            .find(|((k, _), o)| *k == kind && o.ptr.0 as usize == ev.element)
            .map(|(_, o)| o)
        else {
            return;
        };
        o.acked = o.acked.wrapping_add(1);
        // The object is alive: retire() (which precedes its free) cannot
        // finish while acked != reported, and we hold the map's lock. Each C
        // struct is its box's UnsafeCell, so its counter may be written while
        // other threads hold shared references to the box.
        match kind {
            // SAFETY: a live QP of ours (above); the counter is written only
            // under the map's lock.
            Kind::Qp => unsafe {
                let q = o.ptr.0.cast::<IbvQp>();
                (*q).events_completed = (*q).events_completed.wrapping_add(1);
            },
            // SAFETY: a live CQ of ours (above), written under the map's lock.
            Kind::Cq => unsafe {
                let q = o.ptr.0.cast::<IbvCq>();
                (*q).async_events_completed = (*q).async_events_completed.wrapping_add(1);
            },
            // SAFETY: a live SRQ of ours (above), written under the map's lock.
            Kind::Srq => unsafe {
                let q = o.ptr.0.cast::<IbvSrq>();
                (*q).events_completed = (*q).events_completed.wrapping_add(1);
            },
        }
        drop(g);
        REG.acked.notify_all();
    })
}
export!("ibv_ack_async_event" = ack_async_event);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_kinds_follow_enum_ibv_event_type() {
        assert_eq!(kind_of(0), Some(Kind::Cq));
        for t in [1, 2, 3, 4, 5, 6, 7, 16] {
            assert_eq!(kind_of(t), Some(Kind::Qp), "{t}");
        }
        assert_eq!(kind_of(15), Some(Kind::Srq));
        for t in [8, 9, 10, 11, 12, 13, 17, 18, 19, 20, 99] {
            assert_eq!(kind_of(t), None, "{t}");
        }
    }

    #[test]
    fn retire_waits_for_the_acknowledgement() {
        let handle = u64::MAX - 7;
        let mut qp = std::mem::MaybeUninit::<IbvQp>::zeroed();
        let p = qp.as_mut_ptr();
        register(Kind::Qp, handle, p.cast());
        objs().get_mut(&(Kind::Qp, handle)).unwrap().reported = 1;
        let addr = p as usize;
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let mut ev = IbvAsyncEvent {
                element: addr,
                event_type: 1,
            };
            // SAFETY: ev names the registered, zeroed QP above.
            unsafe { ack_async_event(&mut ev) };
        });
        retire(Kind::Qp, handle);
        t.join().unwrap();
        assert!(!objs().contains_key(&(Kind::Qp, handle)));
        // SAFETY: the zeroed struct, written only by the ack above.
        assert_eq!(unsafe { (*p).events_completed }, 1);
    }

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// What the tests' CQs carry as `cq_context`.
    static MARK: u8 = 0;

    fn mark() -> *mut c_void {
        std::ptr::addr_of!(MARK).cast_mut().cast()
    }

    /// A registered CQ as the registry sees it: a box holding an `ibv_cq`
    /// whose `cq_context` is [`mark`]; freed by whoever destroys it.
    fn cq(handle: u64) -> Ptr {
        // SAFETY: every member of ibv_cq is plain data, valid zeroed.
        let mut c: Box<IbvCq> = Box::new(unsafe { std::mem::zeroed() });
        c.cq_context = mark();
        let p = Box::into_raw(c).cast::<c_void>();
        register(Kind::Cq, handle, p);
        Ptr(p)
    }

    /// A destroy of the CQ at `p` on another thread, as `ibv_destroy_cq`
    /// does it: retire under `hold`, then free; `done` once freed.
    fn destroy(
        handle: u64,
        p: Ptr,
        hold: impl Fn() + Send + 'static,
    ) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let t = std::thread::spawn(move || {
            let p = p;
            retire_holding(Kind::Cq, handle, &hold);
            // SAFETY: made by Box::into_raw in cq(); retired, so nothing
            // hands it out any more.
            drop(unsafe { Box::from_raw(p.0.cast::<IbvCq>()) });
            d.store(true, Ordering::SeqCst);
        });
        (t, done)
    }

    fn a_while() {
        std::thread::sleep(Duration::from_millis(100));
    }

    /// The CQ `ibv_get_cq_event` hands out stays until the program
    /// acknowledges the event: the lookup counts it in the same critical
    /// section, so a destroy racing with it waits (a lookup without the
    /// count let the destroy free the CQ before the program read it).
    #[test]
    fn a_handed_out_cq_stays_until_acknowledged() {
        let handle = u64::MAX - 20;
        let p = cq(handle);
        let got = take_comp_event(handle).expect("registered");
        let (t, freed) = destroy(handle, p, || ());
        a_while();
        assert!(!freed.load(Ordering::SeqCst), "destroyed under an event");
        // SAFETY: the CQ is live until the acknowledgement below.
        let ctx = unsafe { std::ptr::addr_of!((*got).cq_context).read() };
        assert_eq!(ctx, mark());
        ack_comp_events(handle, 1);
        t.join().unwrap();
        assert!(freed.load(Ordering::SeqCst));
        assert!(
            take_comp_event(handle).is_none(),
            "a retired CQ's events are dropped"
        );
    }

    /// An event read but not yet counted (the reader holds the channel's
    /// reading lock between the two): the destroy decides under that lock,
    /// so it sees the event counted and waits for its acknowledgement; it
    /// cannot retire the CQ in between and leave the reader an event it
    /// must drop or, worse, a freed CQ.
    #[test]
    fn a_destroy_sees_every_event_read_as_counted() {
        let handle = u64::MAX - 21;
        let p = cq(handle);
        let reading = Arc::new(Mutex::new(()));
        let reader = reading.lock().unwrap();
        // The reader has read an event: now a destroy comes.
        let r = reading.clone();
        let (t, freed) = destroy(handle, p, move || drop(r.lock().unwrap()));
        a_while();
        let got = take_comp_event(handle);
        drop(reader);
        assert!(got.is_some(), "the destroy retired the CQ of an event read");
        a_while();
        assert!(!freed.load(Ordering::SeqCst), "destroyed under an event");
        ack_comp_events(handle, 1);
        t.join().unwrap();
        assert!(freed.load(Ordering::SeqCst));
    }
}

//! Async events: `ibv_get_async_event` and `ibv_ack_async_event` over
//! rverbs' [`Context::get_async_event`](rverbs::Context::get_async_event),
//! which reads `ib_uverbs_async_event_desc` from the context's async fd
//! (the fd C programs find in `ibv_context.async_fd` and poll).
//!
//! The kernel names an object by the user handle rverbs gave it at
//! creation; this module keeps the map from (kind, handle) to the C
//! pointer, and per object the events handed out and acknowledged. As in
//! libibverbs, destroying a QP or CQ waits until every event handed out
//! for it has been acknowledged (`ibv_cmd_destroy_qp` waits on
//! `events_reported` from the kernel; the kernel counts an event as
//! reported when it is read, which is when this module counts it). CQs
//! wait for their completion events' acknowledgements the same way.

use crate::abi::{IbvContext, IbvCq, IbvQp, IbvSrq};
use crate::device::ctx_of;
use crate::{errno_of, export, set_errno};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::{Condvar, Mutex, MutexGuard};

/// What kind of object an event names (user handles are counted per
/// kind in rverbs, so the kind is part of the key).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Kind {
    Qp,
    Cq,
    Srq,
}

/// One registered object: its C pointer, and the events for it handed out
/// (by `ibv_get_async_event`, and for CQs by `ibv_get_cq_event`) and
/// acknowledged so far.
struct Obj {
    ptr: usize,
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
    // No panics while held: a poisoned map is still consistent.
    REG.objs.lock().unwrap_or_else(|p| p.into_inner())
}

/// Names the C object `ptr` as the target of events for rverbs' user
/// handle `handle` (called when the object is created).
pub(crate) fn register(kind: Kind, handle: u64, ptr: *mut c_void) {
    objs().insert(
        (kind, handle),
        Obj {
            ptr: ptr as usize,
            reported: 0,
            acked: 0,
            comp_reported: 0,
            comp_acked: 0,
        },
    );
}

/// Counts a completion event `ibv_get_cq_event` hands out for the CQ of
/// user handle `handle`.
pub(crate) fn comp_event_reported(handle: u64) {
    if let Some(o) = objs().get_mut(&(Kind::Cq, handle)) {
        o.comp_reported = o.comp_reported.wrapping_add(1);
    }
}

/// Counts `n` completion events acknowledged by `ibv_ack_cq_events`, and
/// wakes a destroy waiting for them.
pub(crate) fn comp_events_acked(handle: u64, n: u32) {
    if let Some(o) = objs().get_mut(&(Kind::Cq, handle)) {
        o.comp_acked = o.comp_acked.wrapping_add(n);
    }
    REG.acked.notify_all();
}

/// Forgets an object that is being destroyed, first waiting (as
/// libibverbs' destroy does) until every event handed out for it has been
/// acknowledged by `ibv_ack_async_event` (and for a CQ, every completion
/// event by `ibv_ack_cq_events`).
pub(crate) fn retire(kind: Kind, handle: u64) {
    let mut g = objs();
    while g.get(&(kind, handle)).is_some_and(|o| !o.settled()) {
        g = REG.acked.wait(g).unwrap_or_else(|p| p.into_inner());
    }
    g.remove(&(kind, handle));
}

/// `struct ibv_async_event`: the object (a pointer, or the port number
/// for port events) and `enum ibv_event_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAsyncEvent {
    /// `element`: `cq`/`qp`/`srq`/`wq` pointer, or `port_num` in the low
    /// 4 bytes.
    pub element: usize,
    pub event_type: c_int,
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

/// `ibv_get_async_event`: blocks (unless the program made `async_fd`
/// non-blocking) for the next event; 0, or -1 with errno.
unsafe extern "C" fn get_async_event(c: *mut IbvContext, out: *mut IbvAsyncEvent) -> c_int {
    // SAFETY: an open context of ours (C contract).
    let Some(b) = (unsafe { ctx_of(c) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if out.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    let ev = match b.ctx.get_async_event() {
        Ok(ev) => ev,
        Err(e) => {
            set_errno(errno_of(&e));
            return -1;
        }
    };
    let element = match kind_of(ev.event_type.0) {
        Some(kind) => match objs().get_mut(&(kind, ev.element)) {
            Some(o) => {
                o.reported = o.reported.wrapping_add(1);
                o.ptr
            }
            // Not one of ours (an SRQ this library does not register yet,
            // or a WQ): the event is still reported, naming no object.
            None => 0,
        },
        // Port events: the port number (the kernel's element).
        None => ev.element as u32 as usize,
    };
    // SAFETY: out is a writable ibv_async_event (C contract, non-NULL).
    unsafe {
        out.write(IbvAsyncEvent {
            element,
            event_type: ev.event_type.0 as c_int,
        })
    };
    0
}
export!("ibv_get_async_event" = get_async_event);

/// `ibv_ack_async_event`: counts the acknowledgement (in the object's C
/// counter too: `events_completed` / `async_events_completed`) and wakes
/// a destroy waiting for it.
unsafe extern "C" fn ack_async_event(ev: *mut IbvAsyncEvent) {
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
        .find(|((k, _), o)| *k == kind && o.ptr == ev.element)
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
            let q = o.ptr as *mut IbvQp;
            (*q).events_completed = (*q).events_completed.wrapping_add(1);
        },
        // SAFETY: a live CQ of ours (above), written under the map's lock.
        Kind::Cq => unsafe {
            let q = o.ptr as *mut IbvCq;
            (*q).async_events_completed = (*q).async_events_completed.wrapping_add(1);
        },
        // SAFETY: a live SRQ of ours (above), written under the map's lock.
        Kind::Srq => unsafe {
            let q = o.ptr as *mut IbvSrq;
            (*q).events_completed = (*q).events_completed.wrapping_add(1);
        },
    }
    drop(g);
    REG.acked.notify_all();
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
}

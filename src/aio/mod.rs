//! Async rverbs on tokio (feature `tokio`): completions, rdma_cm and the
//! context's async events awaited through `tokio::io::unix::AsyncFd`.
//!
//! - [`AsyncCq`]: a CQ with a completion channel of its own; `completions`
//!   awaits the next completion(s) into the caller's `&mut [Wc]`, and the
//!   CQ is a [`Stream`](futures_core::Stream) of [`Wc`](crate::wc::Wc).
//! - [`AsyncCmId`], [`AsyncCmListener`]: rdma_cm ids whose `resolve`,
//!   `connect`, `accept` and `disconnect` are awaited, and a stream of
//!   their events ([`AsyncCmId::events`]).
//! - [`AsyncEvents`]: the context's async events (port changes, QP/SRQ
//!   errors, the SRQ limit) as a stream.
//!
//! Nothing here spawns a task or a thread, and nothing polls in a loop: a
//! future that has nothing to return registers with the reactor and
//! sleeps until the kernel makes the fd readable. Everything works on a
//! `current_thread` runtime; the runtime needs IO enabled (as tokio's own
//! sockets do), and outside a runtime the constructors fail with
//! [`Error::InvalidArgument`].
//!
//! # Completions: the arm/poll race
//! A completion channel fires once per arming, for the first completion
//! after it. [`AsyncCq`] keeps whether its CQ is armed and waits only in
//! this state: *armed, and polled empty since it was armed*. To get there
//! it polls; if the CQ is empty and not armed, it arms (`req_notify`) and
//! polls again, because a completion that landed before the arm raises no
//! event. From that state any new completion raises an event that stays
//! queued on the channel until read, so the readiness the future waits
//! for cannot be missed. Reading an event (which is also its
//! acknowledgement: see [`CompChannel::get_event`](crate::cq::CompChannel::get_event))
//! marks the CQ unarmed, and the loop polls again. Since the CQ is armed
//! again only after its event was read, at most one event is ever queued,
//! so the read needs no second read to find the channel empty. A wait
//! costs one `req_notify`, the reactor's `epoll_wait` and one event read;
//! a CQ that keeps finding completions is never armed and makes no system
//! call at all.
//!
//! Each `AsyncCq` has its own completion channel, made by
//! [`AsyncCq::new`] and never handed out: with a shared channel, one CQ's
//! waiter could read (and so take) another CQ's wake-up. An fd per CQ is
//! the price, as a socket per connection is.
//!
//! # rdma_cm: one channel per id
//! Every [`AsyncCmId`] owns an rdma_cm channel (one open of
//! `/dev/infiniband/rdma_cm`) that no other id uses, so every event read
//! from it is that id's, and the future that reads it is the one waiting
//! for it. A connection request arrives on the listener's channel; the new
//! id is moved to a channel of its own (`MIGRATE_ID`, which also moves any
//! event the kernel already queued for it) in the same poll that read the
//! request, before anything can await. The alternative, one channel
//! shared by many ids with a dispatcher that queues each event for its
//! id's waiter, needs a task or a hand-off of the reactor registration
//! between waiters that may be dropped at any time, and a queue that
//! outlives the futures; a channel per id needs neither, at the cost of
//! an fd per connection (as TCP has).
//!
//! # Cancellation safety
//! Every future of this module may be dropped at any await point (by
//! `select!`, a timeout, an aborted task) without losing or duplicating
//! anything, because of how the work is split:
//!
//! - Nothing is taken from the kernel across an await. A future awaits
//!   only readiness; the taking — moving completions from the CQ into the
//!   caller's buffer, reading a completion event, reading an rdma_cm or
//!   async event — happens synchronously inside one `poll` that then
//!   returns it. A future dropped while pending has taken nothing: the
//!   completion is still in the CQ, the rdma_cm event still on its
//!   channel, for the next call. No completion is lost, and none is
//!   returned twice (the CQ hands each out once, into one buffer).
//! - State that must survive a drop lives in the object, not the future:
//!   whether the CQ is armed is a field of [`AsyncCq`], updated in the
//!   same poll as the event read, so a later call neither skips a needed
//!   arm nor waits on an event already consumed.
//! - [`AsyncCq`]'s stream takes exactly one completion per item from the
//!   ring, with no buffer of its own that a drop could discard.
//! - Memory: work requests name only registered memory owned by an
//!   [`Mr`](crate::mr::Mr), never a future's buffer. Dropping a future drops
//!   no memory the device may write: the buffers of outstanding work stay
//!   owned by their `Mr`, which is unmapped only after the kernel has
//!   deregistered it (see [`Mr`](crate::Mr)). The `&mut [Wc]` a future
//!   fills is written by the CPU inside `poll`, never by the device.
//! - The multi-step operations say what a drop leaves behind:
//!   [`AsyncCmId::connect`] dropped after sending the request leaves the
//!   answer (`ESTABLISHED` or an error event) queued for the id's next
//!   event; [`AsyncCmListener::accept`] dropped after taking a request
//!   drops that request's id, which refuses or disconnects that peer.
//!
//! The VM test `vm-tests/tests/async_api.rs` drops futures mid-flight by
//! `tokio::time::timeout` and `tokio::select!` in a loop and checks that
//! every work request completes exactly once.

mod cm;
mod cq;
mod event;

pub use cm::{AsyncCmId, AsyncCmListener, CmEvents, ConnRequest};
pub use cq::AsyncCq;
pub use event::AsyncEvents;

use crate::error::{Errno, Error, Result};
use std::io;

/// Checks that the caller runs inside a tokio runtime: `AsyncFd` panics
/// outside one, and a missing runtime is a usage error worth naming.
fn runtime(what: &str) -> Result<()> {
    tokio::runtime::Handle::try_current()
        .map(drop)
        .map_err(|_| Error::invalid(format!("{what} needs a tokio runtime: call it inside one")))
}

/// The reactor refused to register (or poll) an fd.
fn reactor(what: &'static str, e: io::Error) -> Error {
    Error::Io {
        what: what.into(),
        source: e,
    }
}

/// Maps "nothing queued" (`EAGAIN` on a non-blocking fd) to the
/// `WouldBlock` that makes `AsyncFdReadyGuard::try_io` clear the
/// readiness; any other outcome is handed through.
fn nonblocking<T>(r: Result<T>) -> io::Result<Result<T>> {
    match r {
        Err(e) if e.errno() == Some(Errno(libc::EAGAIN)) => Err(io::ErrorKind::WouldBlock.into()),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_is_an_error_not_a_panic() {
        let e = runtime("AsyncCq::new").expect_err("no runtime on this thread");
        assert!(
            e.to_string().contains("AsyncCq::new needs a tokio runtime"),
            "{e}"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let _in = rt.enter();
        runtime("AsyncCq::new").expect("inside a runtime");
    }

    #[test]
    fn only_eagain_clears_the_readiness() {
        let again: Result<u64> = Err(Error::kernel("read", Errno(libc::EAGAIN)));
        assert_eq!(
            nonblocking(again).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        let other: Result<u64> = Err(Error::kernel("read", Errno(libc::EIO)));
        let e = nonblocking(other).unwrap().unwrap_err();
        assert_eq!(e.errno(), Some(Errno(libc::EIO)));
        assert_eq!(nonblocking(Ok(7u64)).unwrap().unwrap(), 7);
    }

    /// The async objects can move between threads (a multi-threaded
    /// runtime's tasks), and the shared ones be used from several.
    #[test]
    fn async_objects_are_send_and_the_shared_ones_sync() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<AsyncCq>();
        send::<AsyncCmId>();
        sync::<AsyncCmId>();
        send::<AsyncCmListener>();
        sync::<AsyncCmListener>();
        send::<AsyncEvents>();
        sync::<AsyncEvents>();
    }
}

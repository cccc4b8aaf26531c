//! Async rdma_cm: [`AsyncCmId`], [`AsyncCmListener`] (one channel per id:
//! see the [module](super) docs).

use super::{nonblocking, reactor, runtime};
use crate::cm::{CmChannel, CmEvent, CmId, ConnParam, EventType, PortSpace};
use crate::error::{Error, Result};
use crate::sys;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context as TaskCx, Poll};
use tokio::io::unix::AsyncFd;

/// An rdma_cm id on an event channel of its own, whose steps are awaited.
///
/// The blocking-free commands (`bind`, `create_qp`, `context`, addresses)
/// are the [`CmId`]'s: reach it with [`id`](Self::id). Read this id's
/// events only through it (its methods and [`events`](Self::events)),
/// never from [`CmId::channel`] directly.
pub struct AsyncCmId {
    id: CmId,
    /// The id's own channel, registered as it is: nothing else reads it,
    /// so it costs one fd, as rdma-core's does.
    chan: Registered,
    /// `DISCONNECTED` was delivered: a later [`disconnect`](Self::disconnect)
    /// has no event left to wait for.
    disconnected: AtomicBool,
    /// `ESTABLISHED` was delivered: only a connection made ends with a
    /// `DISCONNECTED` (after a reject, an unreachable peer or a connect
    /// error the kernel's disconnect sends nothing and reports nothing).
    established: AtomicBool,
}

impl std::fmt::Debug for AsyncCmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncCmId").field("id", &self.id).finish()
    }
}

/// An id's channel as the reactor holds it.
type Registered = AsyncFd<sys::Held<Arc<CmChannel>>>;

/// A new non-blocking channel, not yet registered with the reactor.
fn new_channel() -> Result<Arc<CmChannel>> {
    let chan = CmChannel::new()?;
    chan.set_nonblocking(true)?;
    Ok(chan)
}

/// Registers `chan` with the reactor. For an id moved onto it, only after
/// `MIGRATE_ID`: the kernel splices the id's queued events onto the
/// channel without waking its waiters, and epoll reports an fd ready when
/// it is added, but not when events appear without a wake-up.
fn register(chan: &Arc<CmChannel>) -> Result<Registered> {
    sys::register_holder(chan.clone(), "rdma_cm channel")
}

// SAFETY: a CmChannel's fd is its EventChannel's OwnedFd, opened once in
// CmChannel::new and closed only when the last Arc drops the channel;
// `fd()` always borrows that one (the promise tokio's registration needs).
#[allow(unsafe_code)]
unsafe impl sys::HoldsFd for Arc<CmChannel> {
    fn held_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

/// `ev` if it is `expected`, else the error naming what came.
fn expect(ev: CmEvent, expected: EventType) -> Result<CmEvent> {
    if ev.kind == expected {
        return Ok(ev);
    }
    Err(Error::CmEvent {
        expected: Some(expected),
        got: ev.kind,
        other_id: false,
        status: ev.status,
        private_data: ev.conn.private_data.clone(),
    })
}

impl AsyncCmId {
    /// Creates an id in port space `ps` on a new channel of its own,
    /// registered with the current tokio runtime.
    pub fn new(ps: PortSpace) -> Result<AsyncCmId> {
        runtime("AsyncCmId::new")?;
        let chan = new_channel()?;
        let fd = register(&chan)?;
        let id = chan.create_id(ps)?;
        Ok(AsyncCmId::wrap(id, fd))
    }

    /// Moves `id` to a new channel of its own (`MIGRATE_ID`: events the
    /// kernel already queued for it move too) and makes it async.
    pub fn from_id(mut id: CmId) -> Result<AsyncCmId> {
        runtime("AsyncCmId::from_id")?;
        let chan = new_channel()?;
        id.migrate(&chan)?;
        let fd = register(&chan)?;
        Ok(AsyncCmId::wrap(id, fd))
    }

    fn wrap(id: CmId, chan: Registered) -> AsyncCmId {
        AsyncCmId {
            id,
            chan,
            disconnected: AtomicBool::new(false),
            established: AtomicBool::new(false),
        }
    }

    /// The id itself, for what needs no waiting (`bind`, `context`,
    /// `create_qp`, `local_addr`, `reject`, ...).
    pub fn id(&self) -> &CmId {
        &self.id
    }

    /// Takes one event if one is queued; `WouldBlock` (through `try_io`)
    /// if not.
    fn read(&self) -> std::io::Result<Result<CmEvent>> {
        nonblocking(self.id.channel().get_event()).map(|r| {
            r.inspect(|ev| match ev.kind {
                EventType::DISCONNECTED => self.disconnected.store(true, Ordering::Relaxed),
                EventType::ESTABLISHED => self.established.store(true, Ordering::Relaxed),
                _ => {}
            })
        })
    }

    /// Waits for this id's next event (processed as
    /// [`CmChannel::get_event`] does). Cancellation safe: the event is read
    /// in the poll that returns it.
    pub async fn next_event(&self) -> Result<CmEvent> {
        loop {
            let mut guard = self
                .chan
                .readable()
                .await
                .map_err(|e| reactor("waiting for an rdma_cm channel", e))?;
            if let Ok(r) = guard.try_io(|_| self.read()) {
                return r.map_err(|e| reactor("reading an rdma_cm channel", e))?;
            }
        }
    }

    /// The poll behind [`events`](Self::events). `&mut`: the reactor keeps
    /// the waker of the last poll only, so two tasks polling one id in
    /// turn would leave the first asleep with an event queued (the
    /// awaiting methods keep every waiter).
    ///
    /// ```compile_fail
    /// fn shared(id: &rverbs::aio::AsyncCmId, cx: &mut std::task::Context<'_>) {
    ///     let _ = id.poll_event(cx);
    /// }
    /// ```
    pub fn poll_event(&mut self, cx: &mut TaskCx<'_>) -> Poll<Result<CmEvent>> {
        loop {
            let mut guard = ready!(self.chan.poll_read_ready(cx))
                .map_err(|e| reactor("waiting for an rdma_cm channel", e))?;
            if let Ok(r) = guard.try_io(|_| self.read()) {
                return Poll::Ready(r.map_err(|e| reactor("reading an rdma_cm channel", e))?);
            }
        }
    }

    /// This id's events as a [`Stream`](futures_core::Stream) (never
    /// ending). Each event goes to one reader: the stream or one of the
    /// awaiting methods.
    pub fn events(&mut self) -> CmEvents<'_> {
        CmEvents { id: self }
    }

    async fn expect_next(&self, expected: EventType) -> Result<CmEvent> {
        expect(self.next_event().await?, expected)
    }

    /// Resolves `dst`'s address (`RESOLVE_ADDR`, then `ADDR_RESOLVED`);
    /// `ADDR_ERROR` is an [`Error::CmEvent`].
    pub async fn resolve_addr(
        &self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        self.id.resolve_addr(src, dst, timeout_ms)?;
        self.expect_next(EventType::ADDR_RESOLVED).await.map(drop)
    }

    /// Resolves the route (`RESOLVE_ROUTE`, then `ROUTE_RESOLVED`).
    pub async fn resolve_route(&self, timeout_ms: u32) -> Result<()> {
        self.id.resolve_route(timeout_ms)?;
        self.expect_next(EventType::ROUTE_RESOLVED).await.map(drop)
    }

    /// Resolves the address, then the route.
    pub async fn resolve(
        &self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        self.resolve_addr(src, dst, timeout_ms).await?;
        self.resolve_route(timeout_ms).await
    }

    /// Connects (after [`resolve`](Self::resolve) and `create_qp`) and
    /// waits until established; returns the peer's parameters. The QP is
    /// moved to RTS on the way, as [`CmId::connect`] says. A reject or an
    /// unreachable peer is an [`Error::CmEvent`] with its status and
    /// private data. Dropped after sending the request, it leaves the
    /// answer queued for the id's next event.
    pub async fn connect(&self, p: &ConnParam) -> Result<ConnParam> {
        self.id.connect(p)?;
        Ok(self.expect_next(EventType::ESTABLISHED).await?.conn)
    }

    /// Accepts this id's connection request (its QP goes to RTS) and waits
    /// until established.
    pub async fn accept(&self, p: &ConnParam) -> Result<()> {
        self.id.accept(p)?;
        self.expect_next(EventType::ESTABLISHED).await.map(drop)
    }

    /// Disconnects (the QP goes to ERR, so outstanding work flushes) and
    /// waits for `DISCONNECTED`. If the peer disconnected first and that
    /// event was already delivered, this answers the peer's request (which
    /// waits for the answer, or times out, before its own `DISCONNECTED`)
    /// and returns at once. So does it on an id never connected (its
    /// `ESTABLISHED` not delivered: a reject, an unreachable peer), for
    /// which the kernel reports no `DISCONNECTED`. Events other than
    /// `DISCONNECTED` met while waiting are dropped: the connection is
    /// going away.
    pub async fn disconnect(&self) -> Result<()> {
        if self.disconnected.load(Ordering::Relaxed) || !self.established.load(Ordering::Relaxed) {
            // Sends the DREP, or (never connected: a reject, an
            // unreachable peer) moves the QP to ERR: no event is left to
            // wait for.
            return self.id.disconnect();
        }
        self.id.disconnect()?;
        while self.next_event().await?.kind != EventType::DISCONNECTED {}
        Ok(())
    }
}

/// The stream of an [`AsyncCmId`]'s events ([`AsyncCmId::events`]).
#[derive(Debug)]
pub struct CmEvents<'a> {
    id: &'a mut AsyncCmId,
}

impl futures_core::Stream for CmEvents<'_> {
    type Item = Result<CmEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Option<Result<CmEvent>>> {
        self.get_mut().id.poll_event(cx).map(Some)
    }
}

/// A connection request taken from a listener: the new id (already on a
/// channel of its own) and the request's event (the peer's parameters and
/// private data in `event.conn`; `event.request` is `None`, the id being
/// `id`). Create the QP on `id.id()`, then [`AsyncCmId::accept`], or
/// `id.id().reject(..)`, or drop it to refuse.
#[derive(Debug)]
pub struct ConnRequest {
    /// The id of the incoming connection.
    pub id: AsyncCmId,
    /// The `CONNECT_REQUEST` event.
    pub event: CmEvent,
}

/// A listening rdma_cm id whose connection requests are awaited.
#[derive(Debug)]
pub struct AsyncCmListener {
    id: AsyncCmId,
}

impl AsyncCmListener {
    /// Binds to `addr` (port 0: the kernel picks one; an unspecified
    /// address: every RDMA device) and listens with `backlog`.
    pub fn bind(addr: &SocketAddr, backlog: u32) -> Result<AsyncCmListener> {
        let id = AsyncCmId::new(PortSpace::TCP)?;
        id.id.bind(addr)?;
        id.id.listen(backlog)?;
        Ok(AsyncCmListener { id })
    }

    /// The listening id.
    pub fn id(&self) -> &CmId {
        &self.id.id
    }

    /// The bound address, with the port the kernel picked.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.id.id.local_addr()
    }

    /// Waits for the next connection request. Cancellation safe: the
    /// request is read, and its id moved to its own channel, in the poll
    /// that returns it. Another event on the listener (`DEVICE_REMOVAL`)
    /// is an [`Error::CmEvent`].
    pub async fn get_request(&self) -> Result<ConnRequest> {
        let mut event = self.id.expect_next(EventType::CONNECT_REQUEST).await?;
        let id = event
            .request
            .take()
            .ok_or_else(|| Error::bad_answer("CONNECT_REQUEST without a new id"))?;
        Ok(ConnRequest {
            id: AsyncCmId::from_id(id)?,
            event,
        })
    }

    /// Waits for a connection request, lets `setup` prepare the new id
    /// (create its QP, post receives: whatever must precede the accept),
    /// accepts with `p` and waits until established. Returns the connected
    /// id, what `setup` returned, and the request's event (the peer's
    /// private data). If `setup` fails, the request is refused (the id is
    /// dropped) and its error returned. Dropped after the request was
    /// taken, the request is refused or the connection dropped; use
    /// [`get_request`](Self::get_request) to keep control of that.
    pub async fn accept<T>(
        &self,
        p: &ConnParam,
        setup: impl FnOnce(&CmId) -> Result<T>,
    ) -> Result<(AsyncCmId, T, CmEvent)> {
        let req = self.get_request().await?;
        let t = setup(req.id.id())?;
        req.id.accept(p).await?;
        Ok((req.id, t, req.event))
    }
}

//! [`AsyncEvents`]: the context's async events as a stream.

use super::{nonblocking, reactor, runtime};
use crate::error::Result;
use crate::sys;
use crate::{AsyncEvent, Context};
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{ready, Context as TaskCx, Poll};
use tokio::io::unix::AsyncFd;

/// The async events of a context (`ib_uverbs_async_event_desc`: port
/// state, QP/CQ/SRQ errors, the SRQ limit, ...), awaited one at a time
/// with [`next`](Self::next) or as a [`Stream`](futures_core::Stream).
/// The stream never ends while the context is open.
///
/// The context's async fd is made non-blocking (the flag belongs to the
/// open file, not the fd number): from then on
/// [`Context::get_async_event`] fails with `EAGAIN` instead of blocking
/// when nothing is queued. Several `AsyncEvents` of one context may live
/// at once (each registers a duplicate of the fd); each event goes to
/// exactly one of them.
pub struct AsyncEvents {
    ctx: Context,
    fd: AsyncFd<OwnedFd>,
}

impl std::fmt::Debug for AsyncEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncEvents")
            .field("device", &self.ctx.device().name())
            .finish()
    }
}

impl AsyncEvents {
    /// Makes `ctx`'s async fd non-blocking and registers a duplicate of it
    /// with the current tokio runtime.
    pub fn new(ctx: &Context) -> Result<AsyncEvents> {
        runtime("AsyncEvents::new")?;
        let afd = ctx.async_fd();
        sys::set_nonblocking(afd, "fcntl(O_NONBLOCK) of the async event fd", true)?;
        let fd = sys::register_readable(afd, "async event fd")?;
        Ok(AsyncEvents {
            ctx: ctx.clone(),
            fd,
        })
    }

    /// Waits for the next async event. Cancellation safe: the event is
    /// read in the poll that returns it.
    pub async fn next(&self) -> Result<AsyncEvent> {
        loop {
            let mut guard = self
                .fd
                .readable()
                .await
                .map_err(|e| reactor("waiting for the async event fd", e))?;
            if let Ok(r) = guard.try_io(|_| nonblocking(self.ctx.get_async_event())) {
                return r.map_err(|e| reactor("reading the async event fd", e))?;
            }
        }
    }

    /// The poll behind the stream. `&mut`: the reactor keeps the waker of
    /// the last poll only, so two tasks polling one `AsyncEvents` in turn
    /// would leave the first asleep with an event queued ([`next`](Self::next),
    /// which keeps every waiter, may be awaited from several).
    ///
    /// ```compile_fail
    /// fn shared(e: &rverbs::aio::AsyncEvents, cx: &mut std::task::Context<'_>) {
    ///     let _ = e.poll_event(cx);
    /// }
    /// ```
    pub fn poll_event(&mut self, cx: &mut TaskCx<'_>) -> Poll<Result<AsyncEvent>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))
                .map_err(|e| reactor("waiting for the async event fd", e))?;
            if let Ok(r) = guard.try_io(|_| nonblocking(self.ctx.get_async_event())) {
                return Poll::Ready(r.map_err(|e| reactor("reading the async event fd", e))?);
            }
        }
    }
}

impl futures_core::Stream for AsyncEvents {
    type Item = Result<AsyncEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Option<Result<AsyncEvent>>> {
        self.get_mut().poll_event(cx).map(Some)
    }
}

//! [`AsyncCq`]: a CQ awaited through its own completion channel (see the
//! [module](super) docs for the arm/poll race and cancellation).

use super::{nonblocking, reactor, runtime};
use crate::error::{Error, Result};
use crate::sys;
use crate::{CompChannel, Context, Cq, Wc};
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::task::{ready, Context as TaskCx, Poll};
use tokio::io::unix::AsyncFd;

// SAFETY: a CompChannel's fd is the OwnedFd of its shared ChannelInner,
// set once at CREATE_COMP_CHANNEL and closed only when the last clone
// drops it; `fd()` always borrows that one (the promise tokio's
// registration needs).
#[allow(unsafe_code)]
unsafe impl sys::HoldsFd for CompChannel {
    fn held_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

/// A completion queue whose completions can be awaited. Build QPs on
/// [`cq`](Self::cq); poll with [`completions`](Self::completions), or use
/// it as a [`Stream`](futures_core::Stream) of [`Wc`] (each item one
/// completion, or the error that stopped the wait).
pub struct AsyncCq {
    cq: Cq,
    /// The CQ's own channel, registered with the reactor as it is (one
    /// fd, as rdma-core's channel: nothing else reads it, so no duplicate
    /// is needed for a second registration).
    chan: AsyncFd<sys::Held<CompChannel>>,
    /// `req_notify` was called and no event has been read since: any
    /// completion from then on raises (or raised) an event.
    armed: bool,
}

impl std::fmt::Debug for AsyncCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncCq")
            .field("cq", &self.cq)
            .field("armed", &self.armed)
            .finish()
    }
}

impl AsyncCq {
    /// Creates a CQ of at least `cqe` entries with a completion channel of
    /// its own (`CREATE_COMP_CHANNEL`, made non-blocking, then
    /// `CREATE_CQ`), registered with the current tokio runtime.
    pub fn new(ctx: &Context, cqe: u32, comp_vector: u32) -> Result<AsyncCq> {
        runtime("AsyncCq::new")?;
        let chan = ctx.create_comp_channel()?;
        chan.set_nonblocking(true)?;
        let cq = ctx.create_cq(cqe, Some(&chan), comp_vector)?;
        let chan = sys::register_holder(chan, "completion channel")?;
        Ok(AsyncCq {
            cq,
            chan,
            armed: false,
        })
    }

    /// The CQ, to create QPs on ([`QpInit`](crate::qp::QpInit) takes `&Cq`).
    pub fn cq(&self) -> &Cq {
        &self.cq
    }

    /// Polls without waiting, as [`Cq::poll`]: no system call.
    pub fn try_poll(&mut self, out: &mut [Wc]) -> usize {
        self.cq.poll(out)
    }

    /// Waits until at least one completion is there and moves up to
    /// `out.len()` of them into `out`; returns how many (at least 1).
    ///
    /// Cancellation safe: the completions are moved in the same poll that
    /// returns them, so a dropped future has taken none.
    pub async fn completions(&mut self, out: &mut [Wc]) -> Result<usize> {
        std::future::poll_fn(|cx| self.poll_completions(cx, out)).await
    }

    /// The poll behind [`completions`](Self::completions), for hand-written
    /// futures: `Ready(Ok(n))` with `n >= 1` completions in `out`, or
    /// `Pending` with the task registered for the channel's readiness.
    pub fn poll_completions(&mut self, cx: &mut TaskCx<'_>, out: &mut [Wc]) -> Poll<Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Err(Error::invalid(
                "AsyncCq::completions into a buffer of 0 completions",
            )));
        }
        loop {
            let n = self.cq.poll(out);
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            if !self.armed {
                // Empty and unarmed: arm, then poll again, since a
                // completion that landed before the arm raises no event.
                self.cq.req_notify(false)?;
                self.armed = true;
                continue;
            }
            // Armed and polled empty since: every completion from here on
            // raises an event, which stays queued until read.
            let mut guard = ready!(self.chan.poll_read_ready(cx))
                .map_err(|e| reactor("waiting for the completion channel", e))?;
            match guard.try_io(|c| nonblocking(c.get_ref().get().get_event())) {
                // The event disarmed the CQ (reading it counted it). The
                // channel is empty now: the CQ is its only one, each arm
                // raises at most one event, and it is armed again only
                // after its event was read. So the readiness is cleared
                // without the read that would fail with EAGAIN; the next
                // event, after the next arm, is a new edge for the reactor.
                Ok(Ok(Ok(_handle))) => {
                    self.armed = false;
                    guard.clear_ready();
                }
                Ok(Ok(Err(e))) => return Poll::Ready(Err(e)),
                Ok(Err(e)) => {
                    return Poll::Ready(Err(reactor("reading the completion channel", e)))
                }
                // Nothing queued: the readiness is cleared, and the next
                // turn registers the task with the reactor.
                Err(_would_block) => {}
            }
        }
    }
}

impl futures_core::Stream for AsyncCq {
    type Item = Result<Wc>;

    /// One completion per item, taken from the ring in the poll that
    /// returns it (no buffer a dropped stream could lose). Never ends.
    fn poll_next(self: Pin<&mut Self>, cx: &mut TaskCx<'_>) -> Poll<Option<Result<Wc>>> {
        let mut one = [Wc::default()];
        self.get_mut()
            .poll_completions(cx, &mut one)
            .map(|r| Some(r.map(|_| one[0])))
    }
}

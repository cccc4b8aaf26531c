//! Completion queues and completion channels (`CREATE_CQ`, `DESTROY_CQ`,
//! `RESIZE_CQ`, `REQ_NOTIFY_CQ`, `CREATE_COMP_CHANNEL`).

mod each;

pub use each::CqEntry;

use crate::cmd::cq::{CqHandle, CqRequest};
use crate::cmd::{self};
use crate::context::{Context, ContextInner};
use crate::error::{Error, Result};
use crate::provider::{CqRing, CqShared};
use crate::sys;
use crate::wc::Wc;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// A completion channel: a pollable fd that becomes readable when an armed
/// CQ gets a completion.
#[derive(Clone)]
pub struct CompChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

pub(crate) struct ChannelInner {
    fd: OwnedFd,
    /// The CQs on this channel, so that `get_event` can count each one's
    /// events (arming on some devices must know how many were read). Only
    /// `get_event` and CQ creation take the lock.
    counted: Mutex<Vec<(u64, Weak<CqInner>)>>,
}

impl std::fmt::Debug for CompChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompChannel")
            .field("fd", &self.inner.fd.as_raw_fd())
            .finish()
    }
}

impl Context {
    /// Creates a completion channel (`CREATE_COMP_CHANNEL`).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        let fd = cmd::cq::create_comp_channel(&self.inner.dev)?;
        Ok(CompChannel {
            inner: Arc::new(ChannelInner {
                fd,
                counted: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Creates a CQ with room for at least `cqe` completions.
    pub fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&CompChannel>,
        comp_vector: u32,
    ) -> Result<Cq> {
        if cqe == 0 {
            return Err(Error::invalid("CQ of 0 entries"));
        }
        let req = CqRequest {
            user_handle: NEXT_HANDLE.fetch_add(1, Ordering::Relaxed),
            cqe,
            comp_vector,
            channel: channel.map(|c| c.inner.fd.as_raw_fd()).unwrap_or(-1),
        };
        let parts = self.inner.provider.create_cq(&self.inner.dev, self, &req)?;
        let inner = Arc::new(CqInner {
            handle: parts.handle,
            ctx: self.inner.clone(),
            user_handle: req.user_handle,
            _channel: channel.map(|c| c.inner.clone()),
            shared: parts.shared,
            events: AtomicU64::new(0),
            cqe: AtomicU32::new(parts.cqe),
            committed: AtomicU32::new(0),
        });
        if let Some(ch) = channel {
            ch.inner.count_events_of(req.user_handle, &inner);
        }
        Ok(Cq {
            inner,
            ring: parts.ring,
            cqe: parts.cqe,
        })
    }
}

/// User handles of CQs (completion events carry them).
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

impl ChannelInner {
    /// Makes `get_event` count the events of `cq` (see `counted`).
    fn count_events_of(&self, handle: u64, cq: &Arc<CqInner>) {
        let mut v = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|(_, w)| w.strong_count() > 0);
        v.push((handle, Arc::downgrade(cq)));
    }
}

/// The part of a CQ its QPs hold: the kernel object (and the memory the
/// device writes, which its control half keeps until DESTROY_CQ).
pub(crate) struct CqInner {
    /// Dropped first: DESTROY_CQ while the context is open.
    pub(crate) handle: CqHandle,
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) user_handle: u64,
    pub(crate) _channel: Option<Arc<ChannelInner>>,
    /// What QPs created on this CQ need of it.
    pub(crate) shared: CqShared,
    /// Completion events read from the channel for this CQ.
    pub(crate) events: AtomicU64,
    /// Entries the kernel gave the CQ (RESIZE_CQ changes it).
    cqe: AtomicU32,
    /// Work requests that can be outstanding at once on the QPs that
    /// report to this CQ: never more than `cqe`, so that the CQ cannot
    /// overrun (rxe would drop completions silently; mlx5 would lose the
    /// whole CQ).
    committed: AtomicU32,
}

impl CqInner {
    /// Reserves room for `n` more outstanding completions, or says why
    /// not.
    pub(crate) fn commit(self: &Arc<Self>, n: u32, what: &str) -> Result<Commitment> {
        let cqe = self.cqe.load(Ordering::Relaxed);
        let mut cur = self.committed.load(Ordering::Relaxed);
        loop {
            let want = cur.checked_add(n).filter(|&w| w <= cqe).ok_or_else(|| {
                Error::invalid(format!(
                    "CREATE_QP: {n} {what} would make {} outstanding completions possible on a CQ of {cqe} entries (it would overrun); make the CQ larger or the queue smaller",
                    u64::from(cur) + u64::from(n)
                ))
            })?;
            match self.committed.compare_exchange_weak(
                cur,
                want,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Ok(Commitment {
                        cq: self.clone(),
                        n,
                    })
                }
                Err(now) => cur = now,
            }
        }
    }
}

/// Room reserved on a CQ for a QP's queue; given back when dropped (after
/// the QP is destroyed).
pub(crate) struct Commitment {
    cq: Arc<CqInner>,
    n: u32,
}

impl Drop for Commitment {
    fn drop(&mut self) {
        self.cq.committed.fetch_sub(self.n, Ordering::Relaxed);
    }
}

/// A completion queue. Polling takes `&mut self`: one poller at a time, no
/// lock. QPs that use it keep its kernel object alive.
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
    ring: CqRing,
    cqe: u32,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("handle", &self.inner.handle.raw())
            .field("cqe", &self.cqe)
            .finish()
    }
}

impl Cq {
    /// The number of entries the kernel gave the CQ.
    pub fn cqe(&self) -> u32 {
        self.cqe
    }

    /// The handle completion events carry (see [`CompChannel::get_event`]).
    pub fn user_handle(&self) -> u64 {
        self.inner.user_handle
    }

    /// Moves up to `out.len()` completions into `out`; returns how many.
    /// Never blocks and makes no system call.
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.ring.poll(out)
    }

    /// CQEs the poller dropped because they named no live QP or no
    /// outstanding request (mlx5: leftovers of a destroyed QP, which
    /// rdma-core removes at destroy time; always 0 on rxe).
    pub fn discarded(&self) -> u64 {
        self.ring.discarded()
    }

    /// Resizes the CQ (`RESIZE_CQ`) to at least `cqe` entries. rxe moves
    /// the completions not yet polled into the new ring, in order.
    ///
    /// The QPs created on the CQ reserved room on it ([`Pd::create_qp`]):
    /// a size below what they reserved is refused before the kernel, since
    /// the CQ could then overrun; the size the kernel grants becomes the
    /// budget later QPs reserve from.
    ///
    /// [`Pd::create_qp`]: crate::pd::Pd::create_qp
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        let inner = &self.inner;
        // `&mut self`: no QP can be created on this CQ meanwhile (that
        // takes `&Cq`), so `committed` can only shrink until we store the
        // new size.
        let committed = inner.committed.load(Ordering::Relaxed);
        if cqe < committed {
            return Err(Error::invalid(format!(
                "RESIZE_CQ to {cqe} entries: the QPs on this CQ reserved {committed} \
                 (it could overrun); destroy or shrink them first"
            )));
        }
        let granted = self.ring.resize(&inner.ctx.dev, inner.handle.raw(), cqe)?;
        inner.cqe.store(granted, Ordering::Relaxed);
        self.cqe = granted;
        Ok(())
    }

    /// Arms the CQ: the channel gets one event for the next completion
    /// (`solicited_only`: the next solicited one). rxe: the
    /// `REQ_NOTIFY_CQ` command; mlx5: the ARM doorbell record and the CQ
    /// doorbell, no system call. `&mut`: arming reads the consumer index
    /// the poller owns.
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        let events = self.inner.events.load(Ordering::Acquire);
        self.ring.arm(
            &self.inner.ctx.dev,
            self.inner.handle.raw(),
            solicited_only,
            events,
        )
    }
}

impl CompChannel {
    /// The fd, for poll()/epoll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// Makes [`get_event`](Self::get_event) fail with `EAGAIN` instead of
    /// blocking when no event is queued (`fcntl(O_NONBLOCK)`), as an event
    /// loop needs; `false` makes it block again. The flag is the channel's:
    /// every clone of this `CompChannel` sees it.
    pub fn set_nonblocking(&self, nonblocking: bool) -> Result<()> {
        sys::set_nonblocking(
            self.inner.fd.as_fd(),
            "fcntl(O_NONBLOCK) of the completion channel",
            nonblocking,
        )
    }

    /// Blocks until an armed CQ on this channel has a completion and returns
    /// that CQ's [`Cq::user_handle`] (on a non-blocking channel, fails with
    /// `EAGAIN` if none is queued). Reading the event is its
    /// acknowledgement: the CQ's event count, which arming needs, is
    /// updated here, so there is no separate `ack_cq_events`.
    pub fn get_event(&self) -> Result<u64> {
        let mut b = [0u8; 8]; // struct ib_uverbs_comp_event_desc { u64 cq_handle; }
        let n = sys::read(
            self.inner.fd.as_fd(),
            "read of the completion channel",
            &mut b,
        )?;
        if n != b.len() {
            return Err(Error::bad_answer(format!("completion event of {n} bytes")));
        }
        let handle = u64::from_ne_bytes(b);
        self.count_event(handle);
        Ok(handle)
    }

    /// Waits up to `timeout_ms` (-1: forever) for an event and returns
    /// the CQ's handle, or `None` if none came in time: the bounded form
    /// of [`CompChannel::get_event`], for programs that must not hang on a
    /// peer that went away.
    pub fn get_event_timeout(&self, timeout_ms: i32) -> Result<Option<u64>> {
        if !sys::poll_readable(
            self.inner.fd.as_fd(),
            "poll of the completion channel",
            timeout_ms,
        )? {
            return Ok(None);
        }
        self.get_event().map(Some)
    }

    fn count_event(&self, handle: u64) {
        let v = self.inner.counted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cq) = v
            .iter()
            .find(|(h, _)| *h == handle)
            .and_then(|(_, w)| w.upgrade())
        {
            cq.events.fetch_add(1, Ordering::Release);
        }
    }
}

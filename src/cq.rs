//! Completion queues and completion channels (`CREATE_CQ`, `DESTROY_CQ`,
//! `REQ_NOTIFY_CQ`, `CREATE_COMP_CHANNEL`), with the rxe ring behind them.

use crate::context::{Context, ContextInner};
use crate::error::{Error, Result};
use crate::sys::Mapping;
use crate::wc::Wc;
use provider_rxe::{CompletionQueue, Queue};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use uverbs_abi::verbs as v;
use zerocopy::{FromBytes, FromZeros};

/// A completion channel: a pollable fd that becomes readable when an armed
/// CQ gets a completion.
#[derive(Clone)]
pub struct CompChannel {
    pub(crate) inner: Arc<ChannelInner>,
}

pub(crate) struct ChannelInner {
    fd: OwnedFd,
    /// CQs whose arming needs to know that an event was read (mlx5: the
    /// arm sequence number advances per event, rdma-core's
    /// `mlx5_cq_event`). Only `get_event` and CQ creation take the lock.
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
        let resp: v::IbUverbsCreateCompChannelResp = self.inner.cmd(
            "CREATE_COMP_CHANNEL",
            v::IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL,
            |response| {
                let mut c = v::IbUverbsCreateCompChannel::new_zeroed();
                c.response = response;
                c
            },
            &[],
            &mut [],
        )?;
        // SAFETY: the kernel created this fd for us and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(resp.fd as i32) };
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
        let user_handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        if self.inner.mlx5.is_some() {
            return crate::mlx5::create_cq(self, cqe, channel, comp_vector, user_handle);
        }
        let mut udata = [0u8; 16]; // struct rxe_create_cq_resp { struct mminfo mi; }
        let resp = create_cq_cmd(
            &self.inner,
            user_handle,
            cqe,
            comp_vector,
            channel,
            &[],
            &mut udata,
        )?;
        let mut inner = CqInner {
            ctx: self.inner.clone(),
            handle: resp.cq_handle,
            cqe: resp.cqe,
            user_handle,
            _channel: channel.map(|c| c.inner.clone()),
            ring: Mutex::new(None),
            mlx5: None,
            events: AtomicU64::new(0),
        };
        let (offset, size) = mminfo(&udata)?;
        let map = Mapping::shared(self.inner.fd.as_fd(), "mmap of the CQ ring", size, offset)?;
        // SAFETY: the mapping is `size` bytes, page aligned, and is stored
        // in `inner.ring` right below, so it outlives the Queue (dropped
        // with the Cq, which holds an Arc<CqInner>).
        let q = unsafe { Queue::new(map.as_ptr(), map.len(), provider_rxe::wqe::WC_SIZE) }
            .map_err(|e| Error::bad_answer(format!("CREATE_CQ ring: {e}")))?;
        inner.ring = Mutex::new(Some(map));
        Ok(Cq {
            cqe: inner.cqe,
            inner: Arc::new(inner),
            ring: Ring::Rxe(CompletionQueue::new(q)),
        })
    }
}

/// `CREATE_CQ` with driver udata; the driver's answer goes to `udata_out`.
pub(crate) fn create_cq_cmd(
    ctx: &ContextInner,
    user_handle: u64,
    cqe: u32,
    comp_vector: u32,
    channel: Option<&CompChannel>,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<v::IbUverbsCreateCqResp> {
    ctx.cmd(
        "CREATE_CQ",
        v::IB_USER_VERBS_CMD_CREATE_CQ,
        |response| {
            let mut c = v::IbUverbsCreateCq::new_zeroed();
            c.response = response;
            c.user_handle = user_handle;
            c.cqe = cqe;
            c.comp_vector = comp_vector;
            c.comp_channel = channel.map(|ch| ch.inner.fd.as_raw_fd()).unwrap_or(-1);
            c
        },
        udata_in,
        udata_out,
    )
}

/// User handles of CQs (completion events carry them).
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

impl ChannelInner {
    /// Makes `get_event` count the events of `cq` (see `counted`).
    pub(crate) fn count_events_of(&self, handle: u64, cq: &Arc<CqInner>) {
        let mut v = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|(_, w)| w.strong_count() > 0);
        v.push((handle, Arc::downgrade(cq)));
    }
}

/// Reads `struct mminfo { u64 offset; u32 size; u32 pad; }` from udata.
pub(crate) fn mminfo(b: &[u8]) -> Result<(u64, usize)> {
    let offset = u64::read_from_prefix(b).map(|(v, _)| v).unwrap_or(0);
    let size = b
        .get(8..12)
        .and_then(|s| u32::read_from_bytes(s).ok())
        .unwrap_or(0);
    if size == 0 {
        return Err(Error::bad_answer("driver returned an empty queue mapping"));
    }
    Ok((offset, size as usize))
}

pub(crate) struct CqInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) handle: u32,
    pub(crate) cqe: u32,
    pub(crate) user_handle: u64,
    pub(crate) _channel: Option<Arc<ChannelInner>>,
    // The ring stays mapped until the kernel has destroyed the CQ (or
    // moved it elsewhere in RESIZE_CQ). A lock, but only control paths
    // (resize, destroy) take it.
    pub(crate) ring: Mutex<Option<Mapping>>,
    /// The mlx5 CQ's memory and QP registry.
    pub(crate) mlx5: Option<crate::mlx5::CqShared>,
    /// Completion events read from the channel for this CQ.
    pub(crate) events: AtomicU64,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        let r: Result<v::IbUverbsDestroyCqResp> = self.ctx.cmd(
            "DESTROY_CQ",
            v::IB_USER_VERBS_CMD_DESTROY_CQ,
            |response| {
                let mut c = v::IbUverbsDestroyCq::new_zeroed();
                c.response = response;
                c.cq_handle = self.handle;
                c
            },
            &[],
            &mut [],
        );
        if r.is_err() {
            // The kernel (or the device) may still write the ring: keep it
            // mapped.
            let ring = self.ring.get_mut().map(|r| r.take()).unwrap_or(None);
            std::mem::forget(ring);
            std::mem::forget(self.mlx5.take());
        }
    }
}

/// A completion queue. Polling takes `&mut self`: one poller at a time, no
/// lock. QPs that use it keep its kernel object (and ring) alive.
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
    ring: Ring,
    cqe: u32,
}

/// The provider's consumer side of the CQ.
pub(crate) enum Ring {
    Rxe(CompletionQueue),
    Mlx5(Box<crate::mlx5::Poller>),
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq")
            .field("handle", &self.inner.handle)
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
    // Out of line so that benchmarks can count the instructions of one
    // call (callgrind attributes inlined code to the caller).
    #[inline(never)]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        let ring = match &mut self.ring {
            Ring::Rxe(r) => r,
            Ring::Mlx5(p) => return p.poll(out, Wc::from_mlx5),
        };
        // One acquire load covers the batch; entries are converted straight
        // into `out`; one release store hands the slots back.
        let prod = ring.load_producer();
        let mut n = 0;
        while n < out.len() {
            match ring.next(prod) {
                Some(r) => out[n] = Wc::from_rxe(&r),
                None => break,
            }
            n += 1;
        }
        if n > 0 {
            ring.commit();
        }
        n
    }

    /// CQEs the poller dropped because they named no live QP or no
    /// outstanding request (mlx5: leftovers of a destroyed QP, which
    /// rdma-core removes at destroy time; always 0 on rxe).
    pub fn discarded(&self) -> u64 {
        match &self.ring {
            Ring::Rxe(_) => 0,
            Ring::Mlx5(p) => p.discarded,
        }
    }

    pub(crate) fn from_parts(inner: Arc<CqInner>, ring: Ring) -> Cq {
        Cq {
            cqe: inner.cqe,
            inner,
            ring,
        }
    }

    /// Resizes the CQ (`RESIZE_CQ`) to at least `cqe` entries. rxe moves
    /// the completions not yet polled into the new ring, in order.
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        if let Ring::Mlx5(_) = self.ring {
            return Err(Error::invalid(
                "RESIZE_CQ: not supported on mlx5 by rverbs yet",
            ));
        }
        let mut udata = [0u8; 16]; // struct rxe_resize_cq_resp { struct mminfo mi; }
        let inner = &self.inner;
        let resp: v::IbUverbsResizeCqResp = inner.ctx.cmd(
            "RESIZE_CQ",
            v::IB_USER_VERBS_CMD_RESIZE_CQ,
            |response| {
                let mut c = v::IbUverbsResizeCq::new_zeroed();
                c.response = response;
                c.cq_handle = inner.handle;
                c.cqe = cqe;
                c
            },
            &[],
            &mut udata,
        )?;
        let (offset, size) = mminfo(&udata)?;
        let map = Mapping::shared(
            inner.ctx.fd.as_fd(),
            "mmap of the resized CQ ring",
            size,
            offset,
        )?;
        // SAFETY: the mapping is stored in inner.ring below, which the Cq's
        // Arc keeps alive for as long as the Queue is used.
        let q = unsafe { Queue::new(map.as_ptr(), map.len(), provider_rxe::wqe::WC_SIZE) }
            .map_err(|e| Error::bad_answer(format!("RESIZE_CQ ring: {e}")))?;
        self.ring = Ring::Rxe(CompletionQueue::new(q));
        // The kernel no longer touches the old ring: unmap it.
        let old = inner
            .ring
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(map);
        drop(old);
        self.cqe = resp.cqe;
        Ok(())
    }

    /// Arms the CQ: the channel gets one event for the next completion
    /// (`solicited_only`: the next solicited one). rxe: the
    /// `REQ_NOTIFY_CQ` command; mlx5: the ARM doorbell record and the CQ
    /// doorbell, no system call. `&mut`: arming reads the consumer index
    /// the poller owns.
    pub fn req_notify(&mut self, solicited_only: bool) -> Result<()> {
        if let Ring::Mlx5(p) = &mut self.ring {
            // Each event read since the last arm advances the arm sequence
            // number (rdma-core's mlx5_cq_event).
            let events = self.inner.events.load(Ordering::Acquire);
            while p.events_seen != events {
                p.cq.ack_event();
                p.events_seen = p.events_seen.wrapping_add(1);
            }
            p.cq.arm(solicited_only);
            return Ok(());
        }
        let mut c = v::IbUverbsReqNotifyCq::new_zeroed();
        c.cq_handle = self.inner.handle;
        c.solicited_only = solicited_only as u32;
        self.inner
            .ctx
            .cmd_no_resp("REQ_NOTIFY_CQ", v::IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, &c)
    }
}

impl CompChannel {
    /// The fd, for poll()/epoll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// Blocks until an armed CQ on this channel has a completion and returns
    /// that CQ's [`Cq::user_handle`].
    pub fn get_event(&self) -> Result<u64> {
        let mut b = [0u8; 8]; // struct ib_uverbs_comp_event_desc { u64 cq_handle; }
        loop {
            // SAFETY: b is 8 writable bytes; the fd is a completion channel.
            let n =
                unsafe { libc::read(self.inner.fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
            if n < 0 {
                let e = crate::error::Errno::last();
                if e.0 == libc::EINTR {
                    continue;
                }
                return Err(Error::kernel("read of the completion channel", e));
            }
            if n as usize != b.len() {
                return Err(Error::bad_answer(format!("completion event of {n} bytes")));
            }
            let handle = u64::from_ne_bytes(b);
            self.count_event(handle);
            return Ok(handle);
        }
    }
}

impl CompChannel {
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

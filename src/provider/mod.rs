//! The provider floor: what differs between drivers. Each provider turns a
//! create into *parts* — the kernel object's control half (from
//! [`crate::cmd`]), the queues its data path runs over, and what other
//! objects need of it — and the public objects assemble those parts. A
//! provider never builds a public object and never names one: work
//! requests reach it as the verbs vocabulary's types (`rverbs-types`),
//! generic over the address handle (`AddressHandle`), and device facts it
//! needs come through [`DeviceInfo`].
//!
//! Adding a provider means one module here and one arm in each enum.

pub(crate) mod mlx5;
pub(crate) mod rxe;

use crate::cmd::ah::AhHandle;
use crate::cmd::context::Opened;
use crate::cmd::cq::{CqHandle, CqRequest};
use crate::cmd::device::{DeviceId, Driver};
use crate::cmd::pd::PdHandle;
use crate::cmd::qp::{Created, QpCaps, QpRequest, QpType};
use crate::cmd::srq::{SrqHandle, SrqRequest};
use crate::cmd::{CommandPath, Dev};
use crate::error::{Error, Result};
use crate::wc::Wc;
use crate::wr::Slice;
use rverbs_types::{AddressHandle, AhAddr, PostError, RecvWr, SendWr};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use uverbs_abi::verbs as v;

/// What a provider may need to know of the device while creating objects,
/// answered by the public context (queries it caches or issues).
pub(crate) trait DeviceInfo {
    /// `max_sge` and `max_cqe` of the device.
    fn sge_and_cqe_limits(&self) -> Result<(u32, u32)>;
    /// The link layer of `port` (`IBV_LINK_LAYER_*`).
    fn link_layer(&self, port: u8) -> Result<u8>;
    /// Whether GID `index` of `port` is a RoCE v2 GID.
    fn gid_is_roce_v2(&self, port: u8, index: u8) -> Result<bool>;
    /// The device's name, for errors.
    fn device_name(&self) -> String;
    /// `device_cap_flags_ex` of QUERY_DEVICE_EX (`IB_UVERBS_DEVICE_*`).
    fn device_cap_flags_ex(&self) -> Result<u64>;
}

/// The per-device state of a provider.
pub(crate) enum Ctx {
    Rxe,
    Mlx5(mlx5::Ctx),
}

/// Opens the provider's context on `fd` (the uverbs character device of
/// `device`): `GET_CONTEXT` as the driver wants it.
pub(crate) fn open(
    device: &DeviceId,
    fd: OwnedFd,
    path: CommandPath,
) -> Result<(Arc<Dev>, Opened, Ctx)> {
    let abi = device.driver_abi;
    let unsupported = |why: String| Error::UnsupportedDriver {
        device: device.name.clone(),
        driver: why,
    };
    match device.driver {
        Driver::Rxe if rxe::ABI.contains(&abi) => rxe::open(device, fd, path),
        Driver::Mlx5 if mlx5::ABI.contains(&abi) => mlx5::open(device, fd),
        Driver::Rxe | Driver::Mlx5 => Err(unsupported(format!(
            "{} with driver ABI {abi}",
            device.driver_name
        ))),
        Driver::Other => Err(unsupported(device.driver_name.clone())),
    }
}

/// A CQ's parts.
pub(crate) struct CqParts {
    pub(crate) handle: CqHandle,
    pub(crate) cqe: u32,
    pub(crate) ring: CqRing,
    pub(crate) shared: CqShared,
}

/// The consumer side of a CQ.
pub(crate) enum CqRing {
    Rxe(rxe::CqRing),
    Mlx5(Box<mlx5::Poller>),
}

/// What the QPs on a CQ need of it.
pub(crate) enum CqShared {
    Rxe,
    Mlx5(mlx5::CqShared),
}

/// What a QP is created with, in provider terms.
pub(crate) struct QpInit<'a> {
    /// The kernel command, handles filled in.
    pub(crate) cmd: QpRequest,
    pub(crate) qp_type: QpType,
    pub(crate) send_cq: &'a CqShared,
    pub(crate) recv_cq: &'a CqShared,
    pub(crate) srq: Option<&'a SrqShared>,
}

/// A QP's parts.
pub(crate) struct QpParts {
    pub(crate) created: Created,
    pub(crate) caps: QpCaps,
    pub(crate) send: SendRing,
    pub(crate) recv: Option<RecvRing>,
    /// Undone after the QP is destroyed (mlx5: its CQs' registries).
    pub(crate) registration: Registration,
}

/// The producer side of a send queue.
pub(crate) enum SendRing {
    Rxe(rxe::Sq),
    Mlx5(provider_mlx5::SendQueue),
}

/// The producer side of a receive queue or SRQ.
pub(crate) enum RecvRing {
    Rxe(rxe::Rq),
    Mlx5(provider_mlx5::RecvQueue),
    Mlx5Srq(provider_mlx5::SharedRecvQueue),
}

/// What a QP registered with its CQs; dropping it retires the QP there.
pub(crate) enum Registration {
    None,
    Mlx5 { _entries: mlx5::Registration },
}

/// An SRQ's parts.
pub(crate) struct SrqParts {
    pub(crate) handle: SrqHandle,
    pub(crate) srqn: u32,
    pub(crate) max_wr: u32,
    pub(crate) ring: RecvRing,
    pub(crate) shared: SrqShared,
}

/// What the QPs on an SRQ need of it.
pub(crate) enum SrqShared {
    Rxe,
    Mlx5(Arc<provider_mlx5::SrqRecords>),
}

/// An AH's parts.
pub(crate) struct AhParts {
    pub(crate) handle: AhHandle,
    pub(crate) addr: AhAddr,
}

impl Ctx {
    /// `ALLOC_PD` (mlx5 answers with udata and needs room for it).
    pub(crate) fn alloc_pd(&self, dev: &Arc<Dev>) -> Result<PdHandle> {
        match self {
            Ctx::Rxe => crate::cmd::pd::alloc(dev, &mut []),
            Ctx::Mlx5(_) => mlx5::alloc_pd(dev),
        }
    }

    pub(crate) fn create_cq(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        req: &CqRequest,
    ) -> Result<CqParts> {
        match self {
            Ctx::Rxe => rxe::create_cq(dev, req),
            Ctx::Mlx5(m) => m.create_cq(dev, info, req),
        }
    }

    pub(crate) fn create_qp(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        init: &QpInit<'_>,
    ) -> Result<QpParts> {
        match self {
            Ctx::Rxe => rxe::create_qp(dev, info, init),
            Ctx::Mlx5(m) => m.create_qp(dev, info, init),
        }
    }

    pub(crate) fn create_srq(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        req: &SrqRequest,
    ) -> Result<SrqParts> {
        match self {
            Ctx::Rxe => rxe::create_srq(dev, req),
            Ctx::Mlx5(m) => m.create_srq(dev, info, req),
        }
    }

    pub(crate) fn create_ah(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        pd: u32,
        attr: &v::IbUverbsAhAttr,
    ) -> Result<AhParts> {
        match self {
            Ctx::Rxe => rxe::create_ah(dev, pd, attr),
            Ctx::Mlx5(m) => m.create_ah(dev, info, pd, attr),
        }
    }

    /// Whether MODIFY_QP to `state` is supported (mlx5 would need its
    /// indices reset at RESET).
    pub(crate) fn check_modify(&self, to_reset: bool) -> Result<()> {
        match self {
            Ctx::Mlx5(_) if to_reset => Err(Error::invalid(
                "MODIFY_QP to RESET: not supported on mlx5 QPs by rverbs yet (destroy and recreate)",
            )),
            _ => Ok(()),
        }
    }
}

/// The error for the request at `index` of a list, refused for `reason`.
#[cold]
fn refused(reason: PostError, queue: &'static str, index: usize) -> Error {
    match reason {
        PostError::QueueFull => Error::QueueFull { queue, index },
        reason => Error::InvalidWorkRequest { index, reason },
    }
}

/// An rxe send list refused at `index`: the requests before it are in
/// the ring and get their doorbell; the refusal is the answer.
#[cold]
#[inline(never)]
fn refused_after(q: &mut rxe::Sq, index: usize, r: PostError) -> Result<()> {
    if index > 0 {
        q.sq.publish();
        q.doorbell.ring()?;
    }
    Err(refused(r, "send queue", index))
}

/// [`SendRing::post_one`] on mlx5, out of line and given its own copy.
#[inline(never)]
fn post_one_mlx5<A: AddressHandle>(
    q: &mut provider_mlx5::SendQueue,
    wr: SendWr<'_, Slice<'_>, A>,
) -> Result<()> {
    mlx5::post_send_list(q, std::slice::from_ref(&wr))
}

/// [`SendRing::push`] on mlx5, out of line and given its own copy.
#[inline(never)]
fn push_mlx5<A: AddressHandle>(
    q: &mut provider_mlx5::SendQueue,
    wr: SendWr<'_, Slice<'_>, A>,
    index: usize,
) -> Result<()> {
    mlx5::push_send(q, &wr).map_err(|r| refused(r, "send queue", index))
}

/// The one post loop: posts `wrs` in order with `post` until one is
/// refused; returns how many were posted and the refusal, named by index.
#[inline(always)]
pub(crate) fn post_list<W>(
    wrs: &[W],
    queue: &'static str,
    mut post: impl FnMut(&W) -> std::result::Result<(), PostError>,
) -> (usize, Option<Error>) {
    for (index, wr) in wrs.iter().enumerate() {
        if let Err(r) = post(wr) {
            return (index, Some(refused(r, queue, index)));
        }
    }
    (wrs.len(), None)
}

impl SendRing {
    /// Checks that every request of `wrs` is valid and that all of them
    /// fit the queue now, writing nothing: what an all-or-nothing post
    /// (`ibv_wr_complete`'s batch) needs before it posts. The room only
    /// grows meanwhile (the device consumes), so a list that fits here
    /// fits when posted.
    pub(crate) fn check_all<A: AddressHandle>(
        &self,
        wrs: &[SendWr<'_, Slice<'_>, A>],
    ) -> Result<()> {
        const QUEUE: &str = "send queue";
        match self {
            SendRing::Rxe(q) => {
                for (index, wr) in wrs.iter().enumerate() {
                    q.sq.validate(wr).map_err(|r| refused(r, QUEUE, index))?;
                }
                let room = q.sq.depth().saturating_sub(q.sq.outstanding()) as usize;
                if wrs.len() > room {
                    return Err(refused(PostError::QueueFull, QUEUE, room));
                }
            }
            SendRing::Mlx5(q) => {
                let (free, mut need) = (q.free_wqebbs(), 0u32);
                for (index, wr) in wrs.iter().enumerate() {
                    need += q.plan(wr).map_err(|r| refused(r, QUEUE, index))?.bbs;
                    if need > free {
                        return Err(refused(PostError::QueueFull, QUEUE, index));
                    }
                }
            }
        }
        Ok(())
    }

    /// Where the next send goes, as (slot, number of slots), for a ring
    /// whose requests name objects the kernel looks up only when it runs
    /// them: rxe's UD sends name their AH by number. `None` where nothing
    /// posted needs keeping (mlx5 copies the address vector into the WQE).
    #[inline(always)]
    pub(crate) fn slot_cursor(&self) -> Option<(u32, u32)> {
        match self {
            SendRing::Rxe(q) => Some((q.sq.producer(), q.sq.capacity() + 1)),
            SendRing::Mlx5(_) => None,
        }
    }

    /// Posts `wrs` in order, then rings the doorbell once for those
    /// accepted (rxe: the `POST_SEND` command; mlx5: doorbell record and
    /// UAR, no system call). A refused request ends the list, named by its
    /// index; the ones before it are posted and rung.
    #[inline(always)]
    pub(crate) fn post<A: AddressHandle>(
        &mut self,
        wrs: &[SendWr<'_, Slice<'_>, A>],
    ) -> Result<()> {
        self.post_each(wrs, |_, _| {})
    }

    /// [`SendRing::post`] of the one request `wr`, inlined into its caller
    /// so that a request built there (the C library's translation of an
    /// `ibv_send_wr`) is read where it was built, not stored and loaded
    /// back. `posted` as for [`SendRing::post_each`].
    #[inline(always)]
    pub(crate) fn post_one<'w, A: AddressHandle>(
        &mut self,
        wr: &'w SendWr<'w, Slice<'w>, A>,
        posted: impl FnOnce(u32, &'w SendWr<'w, Slice<'w>, A>),
    ) -> Result<()> {
        match self {
            SendRing::Rxe(q) => {
                let slot = q.sq.producer();
                if let Err(r) = rxe::post_send(&mut q.sq, wr) {
                    return refused_after(q, 0, r);
                }
                posted(slot, wr);
                q.sq.publish();
                q.doorbell.ring()
            }
            // A copy: the original's address must not reach an out-of-line
            // call, or a request built by the caller stays in memory on
            // rxe's path too (callgrind: see the commit). Not push + flush:
            // written out, rxe's arm is 9 instructions shorter for a UD
            // send (callgrind, the C library's post).
            SendRing::Mlx5(q) => post_one_mlx5(q, *wr),
        }
    }

    /// Writes `wr` into the ring without handing it to the device (what
    /// [`SendRing::flush`] does for every request written so far); a
    /// refusal is named by `index`. `posted` as for [`SendRing::post_each`].
    #[inline(always)]
    pub(crate) fn push<'w, A: AddressHandle>(
        &mut self,
        wr: &'w SendWr<'w, Slice<'w>, A>,
        index: usize,
        posted: impl FnOnce(u32, &'w SendWr<'w, Slice<'w>, A>),
    ) -> Result<()> {
        match self {
            SendRing::Rxe(q) => {
                let slot = q.sq.producer();
                if let Err(r) = rxe::post_send(&mut q.sq, wr) {
                    return Err(refused(r, "send queue", index));
                }
                posted(slot, wr);
                Ok(())
            }
            // A copy, as in post_one.
            SendRing::Mlx5(q) => push_mlx5(q, *wr, index),
        }
    }

    /// Hands every request [`SendRing::push`] wrote to the device: rxe's
    /// release store of the producer index and its doorbell, mlx5's
    /// doorbell record and UAR write.
    #[inline(always)]
    pub(crate) fn flush(&mut self) -> Result<()> {
        match self {
            SendRing::Rxe(q) => {
                q.sq.publish();
                q.doorbell.ring()
            }
            SendRing::Mlx5(q) => {
                q.ring();
                Ok(())
            }
        }
    }

    /// [`SendRing::post`], calling `posted(slot, wr)` for each request
    /// written on rxe, with the SQ slot it went into (what a UD QP needs
    /// to keep the request's AH until the slot is reused); mlx5 copies the
    /// address into the WQE and calls nothing.
    #[inline(always)]
    pub(crate) fn post_each<'w, A: AddressHandle>(
        &mut self,
        wrs: &'w [SendWr<'w, Slice<'w>, A>],
        mut posted: impl FnMut(u32, &'w SendWr<'w, Slice<'w>, A>),
    ) -> Result<()> {
        match self {
            SendRing::Rxe(q) => {
                // Written out rather than through post_list: the per-request
                // post is then inlined here, not called through a closure
                // (a call, six saved registers and a Result in memory per
                // request; callgrind: 250 -> see the commit).
                for (index, wr) in wrs.iter().enumerate() {
                    let slot = q.sq.producer();
                    if let Err(r) = rxe::post_send(&mut q.sq, wr) {
                        return refused_after(q, index, r);
                    }
                    posted(slot, wr);
                }
                if wrs.is_empty() {
                    return Ok(());
                }
                // One release store of the producer index for the list.
                q.sq.publish();
                q.doorbell.ring()
            }
            SendRing::Mlx5(q) => mlx5::post_send_list(q, wrs),
        }
    }
}

/// What an rxe [`RxePusher`] does with each request it wrote: nothing,
/// or keep its AH until the slot is reused (a UD QP: `qp::AhKeep`).
pub(crate) trait Keeper<A> {
    fn put(&mut self, slot: u32, wr: &SendWr<'_, Slice<'_>, A>);
}

impl<A> Keeper<A> for () {
    #[inline(always)]
    fn put(&mut self, _: u32, _: &SendWr<'_, Slice<'_>, A>) {}
}

/// A send list's push and flush for one provider's ring ([`RxePusher`],
/// [`Mlx5Pusher`]), which `SendList::run` hands a loop of pushes.
pub(crate) trait RingPush<A> {
    /// [`SendRing::push`] on this ring.
    fn push(&mut self, wr: &SendWr<'_, Slice<'_>, A>) -> Result<()>;
    /// [`SendRing::flush`] on this ring.
    fn flush(&mut self) -> Result<()>;
}

/// An rxe send list's push and flush, for a loop of pushes that runs with
/// the provider chosen once (`SendList::run`), not at each request.
pub(crate) struct RxePusher<'a, K> {
    pub(crate) q: &'a mut rxe::Sq,
    pub(crate) keep: K,
    /// Requests written since the list started or was last flushed (the
    /// list's count, handed back to it after the loop: by value, one
    /// instruction a request fewer than through a reference).
    pub(crate) pushed: usize,
}

impl<A: AddressHandle, K: Keeper<A>> RingPush<A> for RxePusher<'_, K> {
    #[inline(always)]
    fn push(&mut self, wr: &SendWr<'_, Slice<'_>, A>) -> Result<()> {
        let slot = self.q.sq.producer();
        if let Err(r) = rxe::post_send(&mut self.q.sq, wr) {
            return Err(refused(r, "send queue", self.pushed));
        }
        self.keep.put(slot, wr);
        self.pushed += 1;
        Ok(())
    }

    #[inline(always)]
    fn flush(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pushed) == 0 {
            return Ok(());
        }
        self.q.sq.publish();
        self.q.doorbell.ring()
    }
}

/// [`RxePusher`] for mlx5.
pub(crate) struct Mlx5Pusher<'a> {
    pub(crate) q: &'a mut provider_mlx5::SendQueue,
    pub(crate) pushed: usize,
}

impl<A: AddressHandle> RingPush<A> for Mlx5Pusher<'_> {
    #[inline(always)]
    fn push(&mut self, wr: &SendWr<'_, Slice<'_>, A>) -> Result<()> {
        push_mlx5(self.q, *wr, self.pushed)?;
        self.pushed += 1;
        Ok(())
    }

    #[inline(always)]
    fn flush(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pushed) != 0 {
            self.q.ring();
        }
        Ok(())
    }
}

/// A send prepared for one QP's send queue ([`SendRing::prepare`]).
#[derive(Debug, Clone)]
pub(crate) enum SendTemplate {
    Rxe(provider_rxe::SendTemplate),
    Mlx5(provider_mlx5::SendTemplate),
}

impl SendTemplate {
    /// Whether posts may give a remote address (WRITE and READ).
    pub(crate) fn takes_remote_address(&self) -> bool {
        match self {
            SendTemplate::Rxe(t) => t.takes_remote_address(),
            SendTemplate::Mlx5(t) => t.takes_remote_address(),
        }
    }
}

impl SendRing {
    /// Checks `wr` as a post would and builds its WQE's fixed part.
    pub(crate) fn prepare<A: AddressHandle>(
        &self,
        wr: &SendWr<'_, Slice<'_>, A>,
    ) -> Result<SendTemplate> {
        let refused = |r| refused(r, "send queue", 0);
        match self {
            SendRing::Rxe(q) => q.sq.prepare(wr).map(SendTemplate::Rxe).map_err(refused),
            SendRing::Mlx5(q) => q.prepare(wr).map(SendTemplate::Mlx5).map_err(refused),
        }
    }

    /// Posts the request `t` was prepared for with `wr_id`, `sge` and the
    /// remote address, and rings the doorbell.
    ///
    /// `t` must have been prepared by this ring (the caller checks).
    #[inline(always)]
    pub(crate) fn post_prepared(
        &mut self,
        t: &SendTemplate,
        wr_id: u64,
        sge: Slice<'_>,
        remote_addr: Option<u64>,
    ) -> Result<()> {
        let sge = rverbs_types::Sge {
            addr: sge.addr(),
            length: sge.len(),
            lkey: sge.lkey(),
        };
        match (self, t) {
            (SendRing::Rxe(q), SendTemplate::Rxe(t)) => {
                // SAFETY: the SGE was a `Slice` (see the provider modules'
                // post_send: a range of a live registration, whose memory
                // rverbs gives back only after DEREG_MR and never holds a
                // reference into); `t` is this queue's (the caller's check).
                unsafe { q.sq.post_prepared_unpublished(t, wr_id, sge, remote_addr) }
                    .map_err(|r| refused(r, "send queue", 0))?;
                q.sq.publish();
                q.doorbell.ring()
            }
            (SendRing::Mlx5(q), SendTemplate::Mlx5(t)) => {
                // SAFETY: as above.
                unsafe { q.post_prepared(t, wr_id, sge, remote_addr) }
                    .map_err(|r| refused(r, "send queue", 0))?;
                q.ring();
                Ok(())
            }
            _ => Err(Error::invalid(
                "post_prepared: the send was prepared by a QP of another provider",
            )),
        }
    }
}

impl RecvRing {
    /// Posts receives in order, then publishes them (no system call).
    pub(crate) fn post(
        &mut self,
        wrs: &[RecvWr<'_, Slice<'_>>],
        queue: &'static str,
    ) -> Result<()> {
        match self {
            RecvRing::Rxe(q) => {
                let (_, refused) = post_list(wrs, queue, |wr| rxe::post_recv(&mut q.rq, wr));
                refused.map_or(Ok(()), Err)
            }
            RecvRing::Mlx5(q) => mlx5::post_recv_list(q, wrs, queue),
            RecvRing::Mlx5Srq(q) => mlx5::post_srq_recv_list(q, wrs, queue),
        }
    }
}

/// One completion as the provider holds it, for a reader that decodes
/// only the members it reads (`Cq::poll_each`): rxe's kernel-written
/// `struct ib_uverbs_wc`, copied out of its slot, or a completion the
/// provider decoded already (mlx5 must decode a CQE to match it to its
/// queue).
#[derive(Debug, Clone, Copy)]
pub(crate) enum WcView<'a> {
    Slot(&'a provider_rxe::RawWc),
    Decoded(&'a Wc),
}

/// How many mlx5 completions `CqRing::each` decodes per batch.
const EACH_BATCH: usize = 16;

/// [`CqRing::each`] for mlx5: decoded in batches into a buffer on the
/// stack. Out of line, so that rxe's reader (the C library's `poll_cq`)
/// keeps a small frame and few saved registers (callgrind: 12 instructions
/// a call).
#[inline(never)]
fn each_decoded(p: &mut mlx5::Poller, max: usize, mut f: impl FnMut(WcView<'_>)) -> usize {
    let mut buf = [Wc::default(); EACH_BATCH];
    let mut total = 0;
    while total < max {
        let chunk = (max - total).min(EACH_BATCH);
        let n = p.poll(&mut buf[..chunk]);
        for w in &buf[..n] {
            f(WcView::Decoded(w));
        }
        total += n;
        if n < chunk {
            break;
        }
    }
    total
}

impl CqRing {
    /// Hands up to `max` completions to `f`, oldest first; returns how
    /// many.
    pub(crate) fn each(&mut self, max: usize, mut f: impl FnMut(WcView<'_>)) -> usize {
        match self {
            CqRing::Rxe(r) => r.each(max, |raw| f(WcView::Slot(raw))),
            CqRing::Mlx5(p) => each_decoded(p, max, f),
        }
    }

    /// Moves up to `out.len()` completions into `out`; returns how many.
    #[inline(always)]
    pub(crate) fn poll(&mut self, out: &mut [Wc]) -> usize {
        match self {
            CqRing::Rxe(r) => r.poll(out),
            CqRing::Mlx5(p) => p.poll(out),
        }
    }

    /// CQEs dropped because they named no live QP or request.
    pub(crate) fn discarded(&self) -> u64 {
        match self {
            CqRing::Rxe(_) => 0,
            CqRing::Mlx5(p) => p.discarded(),
        }
    }

    /// Arms the CQ; `events` counts the completion events read for it.
    pub(crate) fn arm(
        &mut self,
        dev: &Dev,
        cq: u32,
        solicited_only: bool,
        events: u64,
    ) -> Result<()> {
        match self {
            CqRing::Rxe(_) => crate::cmd::cq::req_notify(dev, cq, solicited_only),
            CqRing::Mlx5(p) => {
                p.arm(solicited_only, events);
                Ok(())
            }
        }
    }

    /// `RESIZE_CQ`: returns the new size.
    pub(crate) fn resize(&mut self, dev: &Dev, cq: u32, cqe: u32) -> Result<u32> {
        match self {
            CqRing::Rxe(r) => r.resize(dev, cq, cqe),
            CqRing::Mlx5(_) => Err(Error::invalid(
                "RESIZE_CQ: not supported on mlx5 by rverbs yet",
            )),
        }
    }
}

impl SrqShared {
    /// `MODIFY_SRQ` arming the limit at `limit`.
    pub(crate) fn set_limit(&self, dev: &Dev, srq: u32, limit: u32) -> Result<()> {
        use crate::cmd::srq::{modify, SRQ_LIMIT};
        match self {
            SrqShared::Rxe => rxe::modify_srq(dev, srq, SRQ_LIMIT, limit),
            // mlx5 takes no udata here.
            SrqShared::Mlx5(_) => modify(dev, srq, SRQ_LIMIT, limit, &[]),
        }
    }
}

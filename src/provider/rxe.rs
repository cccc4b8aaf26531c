//! rxe (soft-RoCE): the kernel allocates every ring and shares it through
//! `mmap()` (offsets and sizes in the create responses' `struct mminfo`);
//! posting writes the ring, and sends are started with a `POST_SEND`
//! command carrying no work requests (the doorbell). The data path itself
//! is `provider_rxe`'s.

use super::{AhParts, CqParts, CqShared, QpInit, QpParts};
use super::{RecvRing, Registration, SendRing, SrqParts, SrqShared};
use crate::cmd::context::{self, Opened};
use crate::cmd::cq::CqRequest;
use crate::cmd::device::DeviceId;
use crate::cmd::qp::Doorbell;
use crate::cmd::srq::SrqRequest;
use crate::cmd::{self, CommandPath, Dev};
use crate::error::{Error, Result};
use crate::sys::{Mapping, Reservation};
use crate::wc::Wc;
use crate::wr::Slice;
use provider_rxe::{CompletionQueue, Queue, RecvQueue, SendQueue};
use rverbs_types::{as_sges, AddressHandle, AhAddr, PostError, RecvWr, SendWr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use uverbs_abi::ioctl::RdmaDriverId;
use uverbs_abi::rxe::{self, Mminfo};
use uverbs_abi::verbs as v;
use zerocopy::{FromZeros, IntoBytes};

/// The driver ABI versions rverbs speaks (`RXE_UVERBS_ABI_VERSION` 2;
/// 1 differs only in what rverbs does not use).
pub(crate) const ABI: std::ops::RangeInclusive<u32> = 1..=2;

/// `GET_CONTEXT`: the ioctl method where asked for and present, else the
/// write command; rxe takes no driver udata.
pub(crate) fn open(
    id: &DeviceId,
    fd: OwnedFd,
    path: CommandPath,
) -> Result<(Arc<Dev>, Opened, super::Ctx)> {
    let mut dev = Dev::new(fd, &id.name, RdmaDriverId::RXE.0, path);
    let opened = context::get_context(&mut dev, &[], &mut [])?;
    Ok((Arc::new(dev), opened, super::Ctx::Rxe))
}

/// Maps the ring `mi` describes and checks its geometry for `elem` bytes
/// per slot.
fn map_ring(dev: &Dev, what: &'static str, mi: &Mminfo, elem: usize) -> Result<(Queue, Mapping)> {
    ring_of(what, mi, elem, |len, off| {
        Mapping::shared(dev.fd.as_fd(), what, len, off)
    })
}

/// [`map_ring`] into address space held before the command that made
/// the ring ([`Reservation`]).
fn map_ring_in(
    room: Reservation,
    dev: &Dev,
    what: &'static str,
    mi: &Mminfo,
    elem: usize,
) -> Result<(Queue, Mapping)> {
    ring_of(what, mi, elem, |len, off| {
        room.map_shared(dev.fd.as_fd(), what, len, off)
    })
}

/// The ring `mi` describes, mapped by `map(len, offset)`, its geometry
/// checked for `elem` bytes per slot.
fn ring_of(
    what: &'static str,
    mi: &Mminfo,
    elem: usize,
    map: impl FnOnce(usize, u64) -> Result<Mapping>,
) -> Result<(Queue, Mapping)> {
    if mi.size == 0 {
        return Err(Error::bad_answer(format!(
            "{what}: the driver returned an empty queue mapping"
        )));
    }
    let map = map(mi.size as usize, mi.offset)?;
    // SAFETY: the mapping is `size` bytes, page aligned, and is returned
    // with the Queue: every owner keeps both together and drops the Queue
    // first (the kernel's own ring memory stays valid for the kernel
    // whether or not we keep it mapped).
    let q = unsafe { Queue::new(map.as_ptr(), map.len(), elem) }
        .map_err(|e| Error::bad_answer(format!("{what}: {e}")))?;
    Ok((q, map))
}

/// Address space enough for an rxe CQ ring of `cqe` entries, generously:
/// rxe makes `cqe + 1` slots, rounded up to a power of two, of its own
/// `struct rxe_cqe` rounded up to a power of two (a kernel union at least
/// as large as ours), after a header of three cache-line groups, and
/// maps it in whole pages. Four times that, with a page for the header,
/// covers what any of our kernels answers; a larger answer is mapped
/// outside the reservation ([`Reservation::map_shared`]). Sizes past 1 GiB
/// are capped there: rxe refuses such depths (its `max_cqe` is 32,767).
fn ring_bytes(cqe: u32) -> usize {
    let slots = (u64::from(cqe) + 1).next_power_of_two();
    let elem = (provider_rxe::wqe::WC_SIZE as u64).next_power_of_two();
    let bytes = slots.saturating_mul(elem).saturating_mul(4) + 4096;
    bytes.min(1 << 30) as usize
}

/// A CQ's granted size against its ring: rxe grants `slots - 1` entries
/// (one slot stays empty), the ring's `index_mask`. The QPs on the CQ
/// reserve their depths from the granted size, so a size the ring cannot
/// hold would let completions overrun it.
fn cq_fits(what: &str, cqe: u32, mask: u32) -> Result<()> {
    if cqe > mask {
        return Err(Error::bad_answer(format!(
            "{what}: the kernel granted {cqe} entries, its ring holds {mask}"
        )));
    }
    Ok(())
}

/// The consumer side of an rxe CQ: the ring and its mapping.
pub(crate) struct CqRing {
    cq: CompletionQueue,
    _map: Mapping,
}

pub(crate) fn create_cq(dev: &Arc<Dev>, req: &CqRequest) -> Result<CqParts> {
    let mut udata = rxe::RxeCreateCqResp::new_zeroed();
    let (handle, cqe) = cmd::cq::create(dev, req, &[], udata.as_mut_bytes())?;
    let (q, map) = map_ring(
        dev,
        "mmap of the CQ ring",
        &udata.mi,
        provider_rxe::wqe::WC_SIZE,
    )?;
    cq_fits("CREATE_CQ", cqe, q.mask())?;
    Ok(CqParts {
        handle,
        cqe,
        ring: CqRing::wrap(q, map)?,
        shared: CqShared::Rxe,
    })
}

/// The CQ ring's consumer (map_ring checked its slots against `WC_SIZE`
/// already; this refusal is the type's own).
fn completion_queue(q: Queue) -> Result<CompletionQueue> {
    CompletionQueue::new(q).map_err(|e| Error::bad_answer(format!("CQ ring: {e}")))
}

impl CqRing {
    fn wrap(q: Queue, map: Mapping) -> Result<super::CqRing> {
        Ok(super::CqRing::Rxe(CqRing {
            cq: completion_queue(q)?,
            _map: map,
        }))
    }

    #[inline(always)]
    pub(crate) fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.cq.poll(out)
    }

    /// Hands up to `max` completions to `f` undecoded, oldest first;
    /// returns how many (the extended-CQ style reader).
    pub(crate) fn each(&mut self, max: usize, mut f: impl FnMut(&provider_rxe::RawWc)) -> usize {
        let prod = self.cq.load_producer();
        let mut n = 0;
        while n < max {
            let Some(raw) = self.cq.next_raw(prod) else {
                break;
            };
            f(&raw);
            n += 1;
        }
        if n > 0 {
            self.cq.commit();
        }
        n
    }

    /// `RESIZE_CQ`: rxe moves the completions not yet polled into a new
    /// ring, which we map in place of the old one.
    pub(crate) fn resize(&mut self, dev: &Dev, cq: u32, cqe: u32) -> Result<u32> {
        // The kernel copies the entries from its view of the consumer
        // index on: hand back first whatever was read but not yet handed
        // back (a `poll_each` whose reader unwound skips its commit), or
        // the new ring would hold them again.
        self.cq.commit();
        // Once the command succeeds the kernel writes only the new ring: a
        // mapping that failed then would leave this CQ reading a ring
        // nothing writes, its completions lost. So the address space is
        // held first, where a failure still leaves the CQ as it was.
        let room = Reservation::new("RESIZE_CQ: address space for the new ring", ring_bytes(cqe))?;
        let mut udata = rxe::RxeResizeCqResp::new_zeroed();
        let granted = cmd::cq::resize(dev, cq, cqe, udata.as_mut_bytes())?;
        let (q, map) = map_ring_in(
            room,
            dev,
            "mmap of the resized CQ ring",
            &udata.mi,
            provider_rxe::wqe::WC_SIZE,
        )?;
        cq_fits("RESIZE_CQ", granted, q.mask())?;
        // The kernel no longer touches the old ring: it is unmapped here.
        *self = CqRing {
            cq: completion_queue(q)?,
            _map: map,
        };
        Ok(granted)
    }
}

/// rxe's send queue, its mapping and its doorbell.
pub(crate) struct Sq {
    pub(crate) sq: SendQueue,
    pub(crate) doorbell: Box<Doorbell>,
    _map: Mapping,
}

/// rxe's receive queue (of a QP or an SRQ) and its mapping.
pub(crate) struct Rq {
    pub(crate) rq: RecvQueue,
    _map: Mapping,
}

pub(crate) fn create_qp(
    dev: &Arc<Dev>,
    info: &dyn super::DeviceInfo,
    init: &QpInit<'_>,
) -> Result<QpParts> {
    // ATOMIC WRITE and FLUSH came to rxe in Linux 6.2: an older kernel's
    // requester would fail them only after they were posted (and move the
    // QP to ERR), so the SQ refuses them up front where the device does
    // not report them.
    use uverbs_abi::verbs::IbUverbsDeviceCapFlags as F;
    let caps_ex = info.device_cap_flags_ex()?;
    let atomic_write = caps_ex & F::ATOMIC_WRITE.bits() != 0;
    let flush = caps_ex & (F::FLUSH_GLOBAL.bits() | F::FLUSH_PERSISTENT.bits()) != 0;
    let mut udata = rxe::RxeCreateQpResp::new_zeroed();
    let mut req = init.cmd;
    if init.srq.is_some() {
        req.caps.max_recv_wr = 0;
    }
    let created = cmd::qp::create(dev, &req, &[], udata.as_mut_bytes())?;
    let caps = created.caps;
    let bad =
        |what: &str, e: &dyn std::fmt::Display| Error::bad_answer(format!("CREATE_QP {what}: {e}"));
    let (sq_q, sq_map) = map_ring(
        dev,
        "mmap of the SQ ring",
        &udata.sq_mi,
        provider_rxe::wqe::send::PAYLOAD,
    )?;
    let mut sq = SendQueue::new(sq_q, caps.max_send_sge, caps.max_inline_data, init.qp_type)
        .map_err(|e| bad("SQ ring", &e))?;
    sq.set_offered(atomic_write, flush);
    sq.limit_depth(caps.max_send_wr);
    // With an SRQ, rxe gives the QP no receive ring of its own.
    let recv = match init.srq {
        Some(_) => None,
        None => {
            let (rq_q, rq_map) = map_ring(
                dev,
                "mmap of the RQ ring",
                &udata.rq_mi,
                provider_rxe::wqe::recv::SGES,
            )?;
            let mut rq = RecvQueue::new(rq_q, caps.max_recv_sge).map_err(|e| bad("RQ ring", &e))?;
            rq.limit_depth(caps.max_recv_wr);
            Some(RecvRing::Rxe(Rq { rq, _map: rq_map }))
        }
    };
    // SAFETY: the doorbell goes into the QP's send ring (QpParts), and the
    // QP holds an Arc of the context whose device `dev` is.
    let doorbell = unsafe { Doorbell::new(dev, created.handle.raw()) }?;
    Ok(QpParts {
        caps,
        created,
        send: SendRing::Rxe(Sq {
            sq,
            doorbell,
            _map: sq_map,
        }),
        recv,
        registration: Registration::None,
    })
}

pub(crate) fn create_srq(dev: &Arc<Dev>, req: &SrqRequest) -> Result<SrqParts> {
    let mut udata = rxe::RxeCreateSrqResp::new_zeroed();
    let (handle, resp) = cmd::srq::create(dev, req, &[], udata.as_mut_bytes())?;
    let (q, map) = map_ring(
        dev,
        "mmap of the SRQ ring",
        &udata.mi,
        provider_rxe::wqe::recv::SGES,
    )?;
    let mut rq = RecvQueue::new(q, resp.max_sge)
        .map_err(|e| Error::bad_answer(format!("CREATE_SRQ ring: {e}")))?;
    rq.limit_depth(resp.max_wr);
    Ok(SrqParts {
        handle,
        srqn: resp.srqn,
        max_wr: resp.max_wr,
        ring: RecvRing::Rxe(Rq { rq, _map: map }),
        shared: SrqShared::Rxe,
    })
}

/// `MODIFY_SRQ`: rxe reads `struct rxe_modify_srq_cmd { u64
/// mmap_info_addr; }` as udata on every modify, and writes there only when
/// resizing.
pub(crate) fn modify_srq(dev: &Dev, srq: u32, mask: u32, limit: u32) -> Result<()> {
    let mut mi = Mminfo::new_zeroed();
    let udata = rxe::RxeModifySrqCmd {
        mmap_info_addr: mi.as_mut_bytes().as_mut_ptr() as u64,
    };
    cmd::srq::modify(dev, srq, mask, limit, udata.as_bytes())
}

pub(crate) fn create_ah(dev: &Arc<Dev>, pd: u32, attr: &v::IbUverbsAhAttr) -> Result<AhParts> {
    let mut udata = rxe::RxeCreateAhResp::new_zeroed();
    let handle = cmd::ah::create(dev, pd, attr, udata.as_mut_bytes())?;
    let ah_num = udata.ah_num;
    if ah_num == 0 {
        // Kernels before 5.10 gave no AH number and expected the AV in
        // every WQE; rverbs supports only the numbered form.
        return Err(Error::BadKernelAnswer {
            what: "CREATE_AH: rxe returned no AH number (kernel older than 5.10?)".into(),
        });
    }
    Ok(AhParts {
        handle,
        addr: AhAddr::Number(ah_num),
    })
}

/// Writes one send request into the ring as the caller built it,
/// unpublished: the caller publishes the list and rings the doorbell,
/// once per list.
#[inline(always)]
pub(crate) fn post_send<A: AddressHandle>(
    sq: &mut SendQueue,
    wr: &SendWr<'_, Slice<'_>, A>,
) -> std::result::Result<(), PostError> {
    // Every SGE is a `Slice`: a range of a live registration (a safe MR's
    // or dma-buf MR's slice, or one made by the unsafe
    // `Slice::from_raw_parts`, whose caller vouches for it).
    // SAFETY: so each names registered memory, which rverbs gives back only
    // after DEREG_MR succeeded (the device then has no access; a refused
    // one leaks it) and reaches only by raw copies and atomics.
    unsafe { sq.post_unpublished(wr) }
}

/// Gives the request a send builder started last the SGEs `sges`
/// ([`SendQueue::build_sges`]).
#[inline(always)]
pub(crate) fn build_sges(
    sq: &mut SendQueue,
    sges: &[Slice<'_>],
) -> std::result::Result<(), PostError> {
    // SAFETY: as in post_send: every SGE is a `Slice`.
    unsafe { sq.build_sges(rverbs_types::as_sges(sges)) }
}

/// Gives the request a send builder started last the one SGE `sge`, if
/// it is a plain one ([`SendQueue::build_sge_plain`]): whether it did.
#[inline(always)]
pub(crate) fn build_sge_plain(sq: &mut SendQueue, sge: &Slice<'_>) -> bool {
    // SAFETY: as in post_send: the SGE is a `Slice`.
    unsafe { sq.build_sge_plain(&rverbs_types::as_sges(std::slice::from_ref(sge))[0]) }
}

/// Writes one receive request into an RQ or SRQ ring.
#[inline(always)]
pub(crate) fn post_recv(
    rq: &mut RecvQueue,
    wr: &RecvWr<'_, Slice<'_>>,
) -> std::result::Result<(), PostError> {
    // SAFETY: as in post_send: every SGE is a `Slice`.
    unsafe { rq.post(wr.wr_id, as_sges(wr.sges)) }
}

#[cfg(test)]
mod tests {
    use super::cq_fits;
    use crate::Error;

    /// rxe's answers: a ring of 2^n slots holds 2^n - 1, which is what it
    /// grants (or less, on Linux 6.1); a CQ granted more than its ring
    /// holds is a bad answer naming both.
    #[test]
    fn a_cq_granted_more_than_its_ring_holds_is_a_bad_answer() {
        assert!(cq_fits("CREATE_CQ", 255, 255).is_ok());
        assert!(cq_fits("CREATE_CQ", 100, 255).is_ok());
        let e = cq_fits("CREATE_CQ", 256, 255).unwrap_err();
        assert!(matches!(e, Error::BadKernelAnswer { .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("granted 256 entries, its ring holds 255"),
            "{e}"
        );
    }
}

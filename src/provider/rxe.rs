//! rxe (soft-RoCE): the kernel allocates every ring and shares it through
//! `mmap()` (offsets and sizes in the create responses' `struct mminfo`);
//! posting writes the ring, and sends are started with a `POST_SEND`
//! command carrying no work requests (the doorbell). The data path itself
//! is `provider_rxe`'s.

use super::{AhParts, CqParts, CqShared, QpInit, QpParts, Refused};
use super::{RecvRing, Registration, SendRing, SrqParts, SrqShared};
use crate::cmd::context::{self, Opened};
use crate::cmd::cq::CqRequest;
use crate::cmd::qp::{Doorbell, QpType};
use crate::cmd::srq::SrqRequest;
use crate::cmd::{self, CommandPath, Dev};
use crate::error::{Error, Result};
use crate::sys::Mapping;
use crate::wc::Wc;
use crate::wr::Slice;
use provider_rxe::{CompletionQueue, PostError, Queue, RecvQueue, SendQueue};
use rverbs_types::{as_sges, AddressHandle, AhAddr, RecvWr, SendWr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use uverbs_abi::ioctl::RdmaDriverId;
use uverbs_abi::verbs as v;
use zerocopy::FromBytes;

/// The driver ABI versions rverbs speaks (`RXE_UVERBS_ABI_VERSION` 2;
/// 1 differs only in what rverbs does not use).
pub(crate) const ABI: std::ops::RangeInclusive<u32> = 1..=2;

/// `GET_CONTEXT`: the ioctl method where asked for and present, else the
/// write command; rxe takes no driver udata.
pub(crate) fn open(fd: OwnedFd, path: CommandPath) -> Result<(Arc<Dev>, Opened, super::Ctx)> {
    let driver_id = RdmaDriverId::RXE.0;
    let ioctl = match path {
        CommandPath::Ioctl => context::get_context_ioctl(&fd, driver_id)?,
        CommandPath::Write => None,
    };
    let path = if ioctl.is_some() {
        CommandPath::Ioctl
    } else {
        CommandPath::Write
    };
    let dev = Arc::new(Dev {
        fd,
        path,
        driver_id,
    });
    let opened = match ioctl {
        Some(o) => o,
        None => context::get_context_write(&dev, &[], &mut [])?,
    };
    Ok((dev, opened, super::Ctx::Rxe))
}

/// Reads `struct mminfo { u64 offset; u32 size; u32 pad; }` from udata.
fn mminfo(b: &[u8]) -> Result<(u64, usize)> {
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

/// Maps the ring `mi` describes and checks its geometry for `elem` bytes
/// per slot.
fn map_ring(dev: &Dev, what: &'static str, mi: &[u8], elem: usize) -> Result<(Queue, Mapping)> {
    let (offset, size) = mminfo(mi)?;
    let map = Mapping::shared(dev.fd.as_fd(), what, size, offset)?;
    // SAFETY: the mapping is `size` bytes, page aligned, and is returned
    // with the Queue: every owner keeps both together and drops the Queue
    // first (the kernel's own ring memory stays valid for the kernel
    // whether or not we keep it mapped).
    let q = unsafe { Queue::new(map.as_ptr(), map.len(), elem) }
        .map_err(|e| Error::bad_answer(format!("{what}: {e}")))?;
    Ok((q, map))
}

/// The consumer side of an rxe CQ: the ring and its mapping.
pub(crate) struct CqRing {
    cq: CompletionQueue,
    _map: Mapping,
}

pub(crate) fn create_cq(dev: &Arc<Dev>, req: &CqRequest) -> Result<CqParts> {
    let mut udata = [0u8; 16]; // struct rxe_create_cq_resp { struct mminfo mi; }
    let (handle, cqe) = cmd::cq::create(dev, req, &[], &mut udata)?;
    let (q, map) = map_ring(
        dev,
        "mmap of the CQ ring",
        &udata,
        provider_rxe::wqe::WC_SIZE,
    )?;
    Ok(CqParts {
        handle,
        cqe,
        ring: CqRing::wrap(q, map),
        shared: CqShared::Rxe,
    })
}

impl CqRing {
    fn wrap(q: Queue, map: Mapping) -> super::CqRing {
        super::CqRing::Rxe(CqRing {
            cq: CompletionQueue::new(q),
            _map: map,
        })
    }

    #[inline(always)]
    pub(crate) fn poll(&mut self, out: &mut [Wc]) -> usize {
        self.cq.poll(out)
    }

    /// `RESIZE_CQ`: rxe moves the completions not yet polled into a new
    /// ring, which we map in place of the old one.
    pub(crate) fn resize(&mut self, dev: &Dev, cq: u32, cqe: u32) -> Result<u32> {
        let mut udata = [0u8; 16]; // struct rxe_resize_cq_resp { struct mminfo mi; }
        let granted = cmd::cq::resize(dev, cq, cqe, &mut udata)?;
        let (q, map) = map_ring(
            dev,
            "mmap of the resized CQ ring",
            &udata,
            provider_rxe::wqe::WC_SIZE,
        )?;
        // The kernel no longer touches the old ring: it is unmapped here.
        *self = CqRing {
            cq: CompletionQueue::new(q),
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

pub(crate) fn create_qp(dev: &Arc<Dev>, init: &QpInit<'_>) -> Result<QpParts> {
    let mut udata = [0u8; 32]; // struct rxe_create_qp_resp { rq_mi, sq_mi }
    let mut req = init.cmd;
    if init.srq.is_some() {
        req.caps.max_recv_wr = 0;
    }
    let created = cmd::qp::create(dev, &req, &[], &mut udata)?;
    let caps = created.caps;
    let bad =
        |what: &str, e: &dyn std::fmt::Display| Error::bad_answer(format!("CREATE_QP {what}: {e}"));
    let (sq_q, sq_map) = map_ring(
        dev,
        "mmap of the SQ ring",
        &udata[16..],
        provider_rxe::wqe::send::PAYLOAD,
    )?;
    let ud = init.qp_type == QpType::Ud;
    let sq = SendQueue::new(sq_q, caps.max_send_sge, caps.max_inline_data, ud)
        .map_err(|e| bad("SQ ring", &e))?;
    // With an SRQ, rxe gives the QP no receive ring of its own.
    let recv = match init.srq {
        Some(_) => None,
        None => {
            let (rq_q, rq_map) = map_ring(
                dev,
                "mmap of the RQ ring",
                &udata[..16],
                provider_rxe::wqe::recv::SGES,
            )?;
            let rq = RecvQueue::new(rq_q, caps.max_recv_sge).map_err(|e| bad("RQ ring", &e))?;
            Some(RecvRing::Rxe(Rq { rq, _map: rq_map }))
        }
    };
    let doorbell = Doorbell::new(created.handle.raw())?;
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
    let mut udata = [0u8; 24]; // struct rxe_create_srq_resp { mi; srq_num; reserved; }
    let (handle, resp) = cmd::srq::create(dev, req, &[], &mut udata)?;
    let (q, map) = map_ring(
        dev,
        "mmap of the SRQ ring",
        &udata[..16],
        provider_rxe::wqe::recv::SGES,
    )?;
    let rq = RecvQueue::new(q, resp.max_sge)
        .map_err(|e| Error::bad_answer(format!("CREATE_SRQ ring: {e}")))?;
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
    let mut mi = [0u64; 2];
    let udata = (mi.as_mut_ptr() as u64).to_ne_bytes();
    cmd::srq::modify(dev, srq, mask, limit, &udata)
}

pub(crate) fn create_ah(dev: &Arc<Dev>, pd: u32, attr: &v::IbUverbsAhAttr) -> Result<AhParts> {
    let mut udata = [0u8; 8]; // struct rxe_create_ah_resp { ah_num; reserved; }
    let handle = cmd::ah::create(dev, pd, attr, &mut udata)?;
    let ah_num = u32::from_ne_bytes([udata[0], udata[1], udata[2], udata[3]]);
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

fn refused(e: PostError) -> Refused {
    match e {
        PostError::QueueFull => Refused::Full,
        e => Refused::Invalid(e.to_string()),
    }
}

/// Writes one send request into the ring as the caller built it (the
/// doorbell is rung by the caller, once per list).
#[inline(always)]
pub(crate) fn post_send<A: AddressHandle>(
    sq: &mut SendQueue,
    wr: &SendWr<'_, Slice<'_>, A>,
) -> std::result::Result<(), Refused> {
    // SAFETY: every SGE is a `Slice`, which the safe API makes only inside
    // an Mr that owns its mapping and unmaps it only after DEREG_MR (see
    // the mr module), so the device never reaches memory this process
    // reuses.
    unsafe { sq.post(wr) }.map_err(refused)
}

/// Writes one receive request into an RQ or SRQ ring.
#[inline(always)]
pub(crate) fn post_recv(
    rq: &mut RecvQueue,
    wr: &RecvWr<'_, Slice<'_>>,
) -> std::result::Result<(), Refused> {
    // SAFETY: as in post_send: MR slices only.
    unsafe { rq.post(wr.wr_id, as_sges(wr.sges)) }.map_err(refused)
}

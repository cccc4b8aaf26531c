//! rxe (soft-RoCE): the kernel allocates every ring and shares it through
//! `mmap()` (offsets and sizes in the create responses' `struct mminfo`);
//! posting writes the ring, and sends are started with a `POST_SEND`
//! command carrying no work requests (the doorbell). The data path itself
//! is `provider_rxe`'s.

use super::{AhAddr, AhParts, CqParts, CqShared, HasAddr, QpInit, QpParts, Refused};
use super::{RecvRing, Registration, SendRing, SrqParts, SrqShared};
use crate::cmd::context::{self, Opened};
use crate::cmd::cq::CqRequest;
use crate::cmd::qp::{Doorbell, QpType};
use crate::cmd::srq::SrqRequest;
use crate::cmd::{self, CommandPath, Dev};
use crate::error::{Error, Result};
use crate::sys::Mapping;
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::wr::{check_sges, RecvWr, SendOp, SendWr, Slice};
use provider_rxe::wr::{opcode, send_flags};
use provider_rxe::{CompletionQueue, Payload, PostError, Queue, RecvQueue, SendQueue, Sge};
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
        // One acquire load covers the batch; entries are converted straight
        // into `out`; one release store hands the slots back.
        let prod = self.cq.load_producer();
        let mut n = 0;
        while n < out.len() {
            match self.cq.next(prod) {
                Some(r) => out[n] = wc(&r),
                None => break,
            }
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

/// A completion as the safe API reports it, from rxe's CQE (which is
/// `struct ib_uverbs_wc`: the values are the kernel's own).
#[inline(always)]
fn wc(r: &provider_rxe::RawWc) -> Wc {
    let flags = WcFlags::from_bits_retain(r.wc_flags);
    Wc {
        wr_id: r.wr_id,
        status: WcStatus(r.status),
        opcode: WcOpcode(r.opcode),
        vendor_err: r.vendor_err,
        byte_len: r.byte_len,
        // The kernel stores imm_data as it came off the wire (big endian).
        imm_data: flags
            .contains(WcFlags::WITH_IMM)
            .then(|| u32::from_be(r.ex)),
        qp_num: r.qp_num,
        src_qp: r.src_qp,
        flags,
        pkey_index: r.pkey_index,
        slid: r.slid,
        sl: r.sl,
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
        addr: AhAddr::Rxe(ah_num),
    })
}

const _: () = {
    assert!(size_of::<Slice<'static>>() == size_of::<Sge>());
    assert!(align_of::<Slice<'static>>() == align_of::<Sge>());
};

/// rxe's view of a list of slices, without copying.
#[inline(always)]
fn sges<'s>(slices: &'s [Slice<'_>]) -> &'s [Sge] {
    // SAFETY: Slice is repr(C) with the layout of `struct ib_uverbs_sge`
    // (asserted in crate::wr), as is the repr(C) Sge (its size and
    // alignment asserted above); every field is initialised, and the
    // returned slice borrows the same memory for no longer than the input.
    unsafe { std::slice::from_raw_parts(slices.as_ptr().cast(), slices.len()) }
}

fn refused(e: PostError) -> Refused {
    match e {
        PostError::QueueFull => Refused::Full,
        e => Refused::Invalid(e.to_string()),
    }
}

/// Writes one send request into the ring (the doorbell is rung by the
/// caller, once per list). Inlined into the post loop so the provider's
/// request is built in registers.
#[inline(always)]
pub(crate) fn post_send<A: HasAddr>(
    sq: &mut SendQueue,
    wr: &SendWr<'_, A>,
) -> std::result::Result<(), Refused> {
    let payload = match wr.inline {
        Some(data) if wr.sges.is_empty() => Payload::Inline(data),
        Some(_) => return Err(Refused::Invalid("both inline data and SGEs given".into())),
        None => {
            check_sges(wr.sges).map_err(Refused::Invalid)?;
            Payload::Sges(sges(wr.sges))
        }
    };
    let (op, remote, imm, compare_add, swap) = match wr.op {
        SendOp::Send => (opcode::SEND, None, 0, 0, 0),
        SendOp::SendWithImm(i) => (opcode::SEND_WITH_IMM, None, i, 0, 0),
        SendOp::Write(r) => (opcode::RDMA_WRITE, Some(r), 0, 0, 0),
        SendOp::WriteWithImm(r, i) => (opcode::RDMA_WRITE_WITH_IMM, Some(r), i, 0, 0),
        SendOp::Read(r) => (opcode::RDMA_READ, Some(r), 0, 0, 0),
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => (opcode::ATOMIC_CMP_AND_SWP, Some(remote), 0, compare, swap),
        SendOp::FetchAdd { remote, add } => (opcode::ATOMIC_FETCH_AND_ADD, Some(remote), 0, add, 0),
    };
    let mut flags = 0;
    if wr.signaled {
        flags |= send_flags::SIGNALED;
    }
    if wr.solicited {
        flags |= send_flags::SOLICITED;
    }
    if wr.fence {
        flags |= send_flags::FENCE;
    }
    let mut raw = provider_rxe::SendWr::new(wr.wr_id, op, payload);
    raw.flags = flags;
    raw.imm_data = imm.to_be();
    if let Some(r) = remote {
        raw.remote_addr = r.addr;
        raw.rkey = r.rkey;
    }
    raw.compare_add = compare_add;
    raw.swap = swap;
    if let Some(u) = wr.ud {
        let AhAddr::Rxe(ah_num) = *u.ah.addr() else {
            return Err(Refused::Invalid(
                "the address handle was not made on an rxe device".into(),
            ));
        };
        raw.ud = Some(provider_rxe::UdDest {
            remote_qpn: u.remote_qpn,
            remote_qkey: u.remote_qkey,
            ah_num,
        });
    }
    // SAFETY: every SGE came from a `Slice`, which the safe API makes only
    // inside an Mr that owns its mapping and unmaps it only after DEREG_MR
    // (see the mr module), so the device never reaches memory this process
    // reuses.
    unsafe { sq.post(&raw) }.map_err(refused)
}

/// Writes one receive request into an RQ or SRQ ring.
#[inline(always)]
pub(crate) fn post_recv(rq: &mut RecvQueue, wr: &RecvWr<'_>) -> std::result::Result<(), Refused> {
    check_sges(wr.sges).map_err(Refused::Invalid)?;
    // SAFETY: as in post_send: MR slices only.
    unsafe { rq.post(wr.wr_id, sges(wr.sges)) }.map_err(refused)
}

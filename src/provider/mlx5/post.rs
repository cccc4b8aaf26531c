//! Posting onto the mlx5 provider's queues, and completions back: the
//! work request of the safe API written as mlx5 WQEs, a decoded CQE as a
//! [`Wc`]. No system call, no lock, no allocation: the WQEs are written
//! into our own buffer and the device is told through the doorbell record
//! and the UAR page (rung once per list by the caller).

use crate::error::Result as VerbsResult;
use crate::provider::{post_list, Refused};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::wr::{Slice, MAX_SGE};
use rverbs_types::{AddressHandle, AhAddr, SendOp};
use zerocopy::FromBytes;

type SendWr<'a, A> = rverbs_types::SendWr<'a, Slice<'a>, A>;
type RecvWr<'a> = rverbs_types::RecvWr<'a, Slice<'a>>;

/// Checks a work request's SGE count against the safe API's limit (the
/// provider checks the QP's own).
#[inline(always)]
fn check_sges(sges: &[Slice<'_>]) -> Result<(), String> {
    if sges.len() > MAX_SGE {
        return Err(format!(
            "{} SGEs, at most {MAX_SGE} per work request",
            sges.len()
        ));
    }
    Ok(())
}
use provider_mlx5::wr::{Payload, Remote, SendFlags, UdDest};
use provider_mlx5::{PostError, Sge};

const _: () = {
    assert!(size_of::<Slice<'static>>() == size_of::<Sge>());
    assert!(align_of::<Slice<'static>>() == align_of::<Sge>());
};

/// The mlx5 provider's view of a list of slices, without copying.
#[inline(always)]
fn sges<'s>(slices: &'s [Slice<'_>]) -> &'s [Sge] {
    // SAFETY: Slice is repr(C) with the layout of `struct ib_uverbs_sge`
    // (asserted in crate::wr), as is the repr(C) mlx5 Sge (its size and
    // alignment asserted above); every field is initialised, and the
    // returned slice borrows the same memory for no longer than the input.
    unsafe { std::slice::from_raw_parts(slices.as_ptr().cast(), slices.len()) }
}

fn remote(r: rverbs_types::Remote) -> Remote {
    Remote {
        addr: r.addr,
        rkey: r.rkey,
    }
}

fn refused(e: PostError) -> Refused {
    match e {
        PostError::QueueFull => Refused::Full,
        e => Refused::Invalid(e.to_string()),
    }
}

/// Writes one send request into the SQ.
#[inline(always)]
fn post_send<A: AddressHandle>(
    sq: &mut provider_mlx5::SendQueue,
    wr: &SendWr<'_, A>,
) -> Result<(), Refused> {
    use provider_mlx5::SendOp as P;
    let payload = match wr.inline {
        Some(data) if wr.sges.is_empty() => Payload::Inline(data),
        Some(_) => return Err(Refused::Invalid("both inline data and SGEs given".into())),
        None => {
            check_sges(wr.sges).map_err(Refused::Invalid)?;
            Payload::Sges(sges(wr.sges))
        }
    };
    let op = match wr.op {
        SendOp::Send => P::Send,
        SendOp::SendWithImm(imm) => P::SendImm { imm },
        SendOp::Write(r) => P::Write { remote: remote(r) },
        SendOp::WriteWithImm(r, imm) => P::WriteImm {
            remote: remote(r),
            imm,
        },
        SendOp::Read(r) => P::Read { remote: remote(r) },
        SendOp::CompareSwap {
            remote: r,
            compare,
            swap,
        } => P::CompareSwap {
            remote: remote(r),
            compare,
            swap,
        },
        SendOp::FetchAdd { remote: r, add } => P::FetchAdd {
            remote: remote(r),
            add,
        },
    };
    let mut flags = SendFlags::empty();
    flags.set(SendFlags::SIGNALED, wr.signaled);
    flags.set(SendFlags::SOLICITED, wr.solicited);
    flags.set(SendFlags::FENCE, wr.fence);
    let mut out = provider_mlx5::SendWr::new(wr.wr_id, op, payload);
    out.flags = flags;
    let dest;
    if let Some(u) = wr.ud {
        let av = match u.ah.address() {
            AhAddr::Vector(bytes) => provider_mlx5::seg::DatagramSeg::read_from_bytes(bytes)
                .map_err(|_| Refused::Invalid("address vector of the wrong size".into()))?,
            AhAddr::Number(_) => {
                return Err(Refused::Invalid(
                    "the address handle was not made on an mlx5 device".into(),
                ))
            }
        };
        dest = UdDest {
            av,
            remote_qpn: u.remote_qpn,
            qkey: u.remote_qkey,
        };
        out.ud = Some(&dest);
    }
    // SAFETY: every SGE came from a `Slice`, which the safe API makes only
    // inside an Mr that owns its mapping and unmaps it only after DEREG_MR
    // (see the mr module), so the device never reaches memory this process
    // reuses or holds a Rust reference to.
    unsafe { sq.post(&out) }.map_err(refused)
}

/// Writes one receive request into the QP's RQ.
#[inline(always)]
fn post_recv(rq: &mut provider_mlx5::RecvQueue, wr: &RecvWr<'_>) -> Result<(), Refused> {
    check_sges(wr.sges).map_err(Refused::Invalid)?;
    // SAFETY: as in post_send: MR slices only.
    unsafe { rq.post(wr.wr_id, sges(wr.sges)) }.map_err(refused)
}

/// Writes one receive request into an SRQ.
#[inline(always)]
fn post_srq_recv(srq: &mut provider_mlx5::SharedRecvQueue, wr: &RecvWr<'_>) -> Result<(), Refused> {
    check_sges(wr.sges).map_err(Refused::Invalid)?;
    // SAFETY: as in post_send: MR slices only.
    unsafe { srq.post(wr.wr_id, sges(wr.sges)) }.map_err(refused)
}

/// Posts `wrs` in order and rings the doorbell once for those accepted;
/// the first refused one ends the list and is named by its index.
#[inline(always)]
pub(crate) fn post_send_list<A: AddressHandle>(
    sq: &mut provider_mlx5::SendQueue,
    wrs: &[SendWr<'_, A>],
) -> VerbsResult<()> {
    let (_, refused) = post_list(wrs, "send queue", |wr| post_send(sq, wr));
    sq.ring(); // nothing to do if nothing was posted
    refused.map_or(Ok(()), Err)
}

/// Posts receives in order into the QP's RQ, then publishes them.
pub(crate) fn post_recv_list(
    rq: &mut provider_mlx5::RecvQueue,
    wrs: &[RecvWr<'_>],
    queue: &'static str,
) -> VerbsResult<()> {
    let (_, refused) = post_list(wrs, queue, |wr| post_recv(rq, wr));
    rq.ring();
    refused.map_or(Ok(()), Err)
}

/// Posts receives in order into an SRQ, then publishes them.
pub(crate) fn post_srq_recv_list(
    srq: &mut provider_mlx5::SharedRecvQueue,
    wrs: &[RecvWr<'_>],
    queue: &'static str,
) -> VerbsResult<()> {
    let (_, refused) = post_list(wrs, queue, |wr| post_srq_recv(srq, wr));
    srq.ring();
    refused.map_or(Ok(()), Err)
}

/// A completion the mlx5 provider decoded from a CQE, as the safe API
/// reports it.
pub(crate) fn wc(c: &provider_mlx5::Completion) -> Wc {
    use provider_mlx5::{Status as S, WcFlags as F, WcOpcode as O};
    let status = match c.status {
        S::Success => WcStatus::SUCCESS,
        S::LocalLength => WcStatus::LOC_LEN_ERR,
        S::LocalQpOp => WcStatus::LOC_QP_OP_ERR,
        S::LocalProt => WcStatus::LOC_PROT_ERR,
        S::WrFlush => WcStatus::WR_FLUSH_ERR,
        S::MwBind => WcStatus::MW_BIND_ERR,
        S::BadResp => WcStatus::BAD_RESP_ERR,
        S::LocalAccess => WcStatus::LOC_ACCESS_ERR,
        S::RemoteInvalReq => WcStatus::REM_INV_REQ_ERR,
        S::RemoteAccess => WcStatus::REM_ACCESS_ERR,
        S::RemoteOp => WcStatus::REM_OP_ERR,
        S::RetryExceeded => WcStatus::RETRY_EXC_ERR,
        S::RnrRetryExceeded => WcStatus::RNR_RETRY_EXC_ERR,
        S::RemoteAborted => WcStatus::REM_ABORT_ERR,
        // rdma-core reports unnamed syndromes as a general error; the
        // syndrome itself stays in vendor_err. Scatter-to-CQE is never
        // enabled by rverbs (no MLX5_QP_FLAG_SCATTER_CQE at CREATE_QP).
        S::Other(_) | S::ScatteredToCqe => WcStatus::GENERAL_ERR,
    };
    let opcode = match c.opcode {
        O::Send => WcOpcode::SEND,
        O::RdmaWrite => WcOpcode::RDMA_WRITE,
        O::RdmaRead => WcOpcode::RDMA_READ,
        O::CompSwap => WcOpcode::COMP_SWAP,
        O::FetchAdd => WcOpcode::FETCH_ADD,
        O::Recv => WcOpcode::RECV,
        O::RecvRdmaWithImm => WcOpcode::RECV_RDMA_WITH_IMM,
        // Not posted through the safe API; kept distinguishable.
        O::Nop => WcOpcode(0x100), // MLX5_OPCODE_NOP is 0
        O::Other(op) => WcOpcode(0x100 | op as u32),
    };
    let mut flags = WcFlags::empty();
    if c.flags.contains(F::GRH) {
        flags |= WcFlags::GRH;
    }
    if c.flags.contains(F::WITH_IMM) {
        flags |= WcFlags::WITH_IMM;
    }
    if c.flags.contains(F::WITH_INV) {
        flags |= WcFlags::WITH_INVALIDATE;
    }
    Wc {
        wr_id: c.wr_id,
        status,
        opcode,
        vendor_err: c.vendor_err as u32,
        byte_len: c.byte_len,
        imm_data: c.flags.contains(F::WITH_IMM).then_some(c.imm),
        qp_num: c.qpn,
        src_qp: c.src_qp,
        flags,
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
    }
}

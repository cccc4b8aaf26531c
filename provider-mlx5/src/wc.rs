//! Work completions: a CQE decoded straight into the vocabulary's [`Wc`].
//!
//! A software-owned CQE becomes a [`Wc`] by asking the queue that owns the
//! request ([`WorkQueues`]) to retire it by the CQE's `wqe_counter`; only
//! then are the CQE's other fields read into the completion. A CQE naming
//! nothing outstanding is a [`BadCqe`], and then no queue has changed.
//!
//! What mlx5 reports beyond `enum ib_wc_status` / `ib_uverbs_wc_opcode` /
//! `ib_wc_flags` is kept in the same [`Wc`], in values those enums do not
//! use:
//! - `vendor_err` holds the error CQE's `vendor_err_synd` in bits 0..8
//!   (what rdma-core's mlx5 provider reports as `ibv_wc.vendor_err`) and
//!   its `syndrome` in bits 8..16, so that a syndrome with no status of its
//!   own (reported as `GENERAL_ERR`, as rdma-core does) stays visible;
//!   [`Status::of`] decodes it back;
//! - a send opcode that is not an IB verb completes with opcode
//!   `0x100 | MLX5_OPCODE_*` ([`vendor_opcode`]): the NOP
//!   (`MLX5_OPCODE_NOP` is 0) as [`NOP`], 0x100;
//! - the CQE's solicited-event bit is [`SOLICITED`], bit 31 of the flags
//!   (`ib_wc_flags` has no such flag; rdma-core drops the bit).

use crate::cqe::{cqe_opcode, op_own, Cqe64, Status};
use crate::lookup::WorkQueues;
use crate::seg::opcode;
pub use rverbs_types::{Wc, WcFlags, WcOpcode, WcStatus};

/// Where opcodes outside `ib_uverbs_wc_opcode` start: a send completion
/// of mlx5 opcode `op` that is not an IB verb reports `0x100 | op`.
pub const VENDOR_OPCODE: u32 = 0x100;

/// The completion opcode of a NOP ([`crate::SendQueue::post_nop`]).
pub const NOP: WcOpcode = WcOpcode(VENDOR_OPCODE | opcode::NOP as u32);

/// The CQE asked for a solicited event (an mlx5 extra: not an
/// `ib_wc_flags` value).
pub const SOLICITED: WcFlags = WcFlags::from_bits_retain(1 << 31);

/// The completion opcode of a send WQE posted with mlx5 opcode `op`.
#[inline(always)]
pub fn vendor_opcode(op: u8) -> WcOpcode {
    WcOpcode(VENDOR_OPCODE | op as u32)
}

/// The completion opcode of a send WQE posted with mlx5 opcode `op`.
#[inline(always)]
fn send_opcode(op: u8) -> WcOpcode {
    match op {
        opcode::SEND | opcode::SEND_IMM | opcode::SEND_INVAL => WcOpcode::SEND,
        opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM => WcOpcode::RDMA_WRITE,
        opcode::RDMA_READ => WcOpcode::RDMA_READ,
        opcode::ATOMIC_CS => WcOpcode::COMP_SWAP,
        opcode::ATOMIC_FA => WcOpcode::FETCH_ADD,
        other => vendor_opcode(other),
    }
}

/// The syndrome a [`Wc`] from this crate keeps in `vendor_err` (0 when it
/// was not an error CQE).
#[inline]
pub fn syndrome(wc: &Wc) -> u8 {
    (wc.vendor_err >> 8) as u8
}

impl Status {
    /// The `enum ib_wc_status` a completion of this status reports (the
    /// numbering rdma-core's `mlx5_handle_error_cqe` maps syndromes to).
    /// Syndromes it does not name are `GENERAL_ERR`; so is
    /// [`Status::ScatteredToCqe`], whose data is not where it was asked to
    /// go.
    #[inline]
    pub fn wc_status(self) -> WcStatus {
        match self {
            Status::Success => WcStatus::SUCCESS,
            Status::LocalLength => WcStatus::LOC_LEN_ERR,
            Status::LocalQpOp => WcStatus::LOC_QP_OP_ERR,
            Status::LocalProt => WcStatus::LOC_PROT_ERR,
            Status::WrFlush => WcStatus::WR_FLUSH_ERR,
            Status::MwBind => WcStatus::MW_BIND_ERR,
            Status::BadResp => WcStatus::BAD_RESP_ERR,
            Status::LocalAccess => WcStatus::LOC_ACCESS_ERR,
            Status::RemoteInvalReq => WcStatus::REM_INV_REQ_ERR,
            Status::RemoteAccess => WcStatus::REM_ACCESS_ERR,
            Status::RemoteOp => WcStatus::REM_OP_ERR,
            Status::RetryExceeded => WcStatus::RETRY_EXC_ERR,
            Status::RnrRetryExceeded => WcStatus::RNR_RETRY_EXC_ERR,
            Status::RemoteAborted => WcStatus::REM_ABORT_ERR,
            Status::Other(_) | Status::ScatteredToCqe => WcStatus::GENERAL_ERR,
        }
    }

    /// The status a [`Wc`] decoded by this crate stands for: success, the
    /// error its kept syndrome names, or (`GENERAL_ERR` without a
    /// syndrome) a scatter-to-CQE completion.
    pub fn of(wc: &Wc) -> Status {
        if wc.status == WcStatus::SUCCESS {
            return Status::Success;
        }
        match syndrome(wc) {
            0 if wc.status == WcStatus::GENERAL_ERR => Status::ScatteredToCqe,
            s => Status::from_syndrome(s),
        }
    }
}

/// A CQE that cannot be a completion of any request this process posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadCqe {
    /// An opcode this crate does not handle (resize, tag matching,
    /// signature errors, or garbage).
    Opcode {
        /// The CQE opcode.
        opcode: u8,
    },
    /// No queue is known for the QP the CQE names.
    UnknownQueue {
        /// The QP number in the CQE.
        qpn: u32,
        /// Whether a send queue was looked for.
        send: bool,
    },
    /// The `wqe_counter` names no request that is outstanding.
    NotOutstanding {
        /// The QP number in the CQE.
        qpn: u32,
        /// The counter.
        wqe_counter: u16,
    },
}

impl core::fmt::Display for BadCqe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BadCqe::Opcode { opcode } => write!(f, "CQE with unhandled opcode {opcode:#x}"),
            BadCqe::UnknownQueue { qpn, send } => {
                let q = if *send { "send" } else { "receive" };
                write!(f, "CQE for QP {qpn:#x}, which has no known {q} queue")
            }
            BadCqe::NotOutstanding { qpn, wqe_counter } => write!(
                f,
                "CQE for QP {qpn:#x} names WQE {wqe_counter:#x}, which is not outstanding"
            ),
        }
    }
}

impl std::error::Error for BadCqe {}

/// Turns one software-owned CQE into a completion in `c`, retiring its
/// request. On error no queue was changed (and `c` holds nothing of use).
#[inline]
pub(crate) fn decode<Q: WorkQueues + ?Sized>(
    cqe: &Cqe64,
    wqs: &mut Q,
    c: &mut Wc,
) -> Result<(), BadCqe> {
    let (qpn, uidx, ctr) = (cqe.qpn(), cqe.srqn_uidx(), cqe.wqe_counter.get());
    let op = cqe.opcode();
    let flags = if cqe.se() != 0 {
        SOLICITED
    } else {
        WcFlags::empty()
    };
    let not_outstanding = BadCqe::NotOutstanding {
        qpn,
        wqe_counter: ctr,
    };
    match op {
        cqe_opcode::REQ | cqe_opcode::REQ_ERR => {
            let sq = wqs
                .send_queue(qpn, uidx)
                .ok_or(BadCqe::UnknownQueue { qpn, send: true })?;
            let r = sq.complete(ctr).ok_or(not_outstanding)?;
            // Written in place, field by field: the slot is the caller's.
            *c = Wc {
                wr_id: r.wr_id,
                opcode: send_opcode(r.opcode),
                qp_num: qpn,
                flags,
                ..Wc::default()
            };
            if op == cqe_opcode::REQ_ERR {
                set_error(c, cqe);
            } else {
                c.byte_len = match r.opcode {
                    opcode::RDMA_READ => cqe.byte_cnt.get(),
                    opcode::ATOMIC_CS | opcode::ATOMIC_FA => 8,
                    _ => 0,
                };
                // As rdma-core and the kernel's rxe do, the requester's
                // completion carries the flag too; the immediate itself is
                // not in the CQE.
                if matches!(r.opcode, opcode::SEND_IMM | opcode::RDMA_WRITE_IMM) {
                    c.flags |= WcFlags::WITH_IMM;
                    c.imm_data = Some(0);
                }
                check_scatter(c, cqe);
            }
        }
        cqe_opcode::RESP_WR_IMM
        | cqe_opcode::RESP_SEND
        | cqe_opcode::RESP_SEND_IMM
        | cqe_opcode::RESP_SEND_INV
        | cqe_opcode::RESP_ERR => {
            let rq = wqs
                .recv_queue(qpn, uidx)
                .ok_or(BadCqe::UnknownQueue { qpn, send: false })?;
            let wr_id = rq.complete(ctr).ok_or(not_outstanding)?;
            *c = Wc {
                wr_id,
                opcode: WcOpcode::RECV,
                qp_num: qpn,
                flags,
                ..Wc::default()
            };
            if op == cqe_opcode::RESP_ERR {
                set_error(c, cqe);
            } else {
                set_responder(c, cqe);
                check_scatter(c, cqe);
            }
        }
        other => return Err(BadCqe::Opcode { opcode: other }),
    }
    Ok(())
}

fn set_error(c: &mut Wc, cqe: &Cqe64) {
    let s = cqe.syndrome();
    c.status = Status::from_syndrome(s).wc_status();
    c.vendor_err = (s as u32) << 8 | cqe.vendor_err_synd() as u32;
}

#[inline(always)]
fn check_scatter(c: &mut Wc, cqe: &Cqe64) {
    if cqe.op_own & (op_own::INLINE_SCATTER_32 | op_own::INLINE_SCATTER_64) != 0 {
        c.status = Status::ScatteredToCqe.wc_status();
    }
}

/// The receive fields of a successful responder CQE (rdma-core's
/// `handle_responder`).
fn set_responder(c: &mut Wc, cqe: &Cqe64) {
    let imm = cqe.imm_inval_pkey.get();
    match cqe.opcode() {
        cqe_opcode::RESP_WR_IMM => {
            c.opcode = WcOpcode::RECV_RDMA_WITH_IMM;
            c.flags |= WcFlags::WITH_IMM;
            c.imm_data = Some(imm);
        }
        cqe_opcode::RESP_SEND_IMM => {
            c.flags |= WcFlags::WITH_IMM;
            c.imm_data = Some(imm);
        }
        cqe_opcode::RESP_SEND_INV => {
            // The invalidated rkey is in imm_inval_pkey; Wc has no field
            // for it (only `imm_data`, for WITH_IMM).
            c.flags |= WcFlags::WITH_INVALIDATE;
        }
        _ => {}
    }
    let rqpn = cqe.flags_rqpn.get();
    c.byte_len = cqe.byte_cnt.get();
    c.src_qp = rqpn & 0xff_ffff;
    c.sl = ((rqpn >> 24) & 0xf) as u8;
    if (rqpn >> 28) & 3 != 0 {
        c.flags |= WcFlags::GRH;
    }
    c.slid = cqe.slid.get();
    c.pkey_index = (imm & 0xffff) as u16;
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    /// An error CQE of every syndrome decodes to the status rdma-core
    /// reports, with both syndromes kept and the named one recoverable.
    #[test]
    fn every_syndrome_is_kept_in_the_wc() {
        for s in 0..=255u8 {
            let mut cqe = Cqe64::new_zeroed();
            let b = zerocopy::IntoBytes::as_mut_bytes(&mut cqe);
            b[crate::cqe::SYNDROME_OFFSET] = s;
            b[crate::cqe::VENDOR_ERR_SYND_OFFSET] = 0x42;
            let mut wc = Wc::default();
            set_error(&mut wc, &cqe);
            let st = Status::from_syndrome(s);
            assert_eq!(wc.status, st.wc_status());
            assert_eq!((syndrome(&wc), wc.vendor_err & 0xff), (s, 0x42));
            if s != 0 {
                assert_eq!(Status::of(&wc), st);
            }
            assert_eq!(
                wc.status == WcStatus::GENERAL_ERR,
                matches!(st, Status::Other(_)),
                "{s:#x}"
            );
        }
        let mut wc = Wc::default();
        assert_eq!(Status::of(&wc), Status::Success);
        wc.status = Status::ScatteredToCqe.wc_status();
        assert_eq!(Status::of(&wc), Status::ScatteredToCqe);
    }

    #[test]
    fn vendor_opcodes_stay_clear_of_the_kernels() {
        assert_eq!(NOP, WcOpcode(0x100));
        assert_eq!(send_opcode(opcode::NOP), NOP);
        assert_eq!(send_opcode(opcode::RDMA_WRITE_IMM), WcOpcode::RDMA_WRITE);
        assert!(!NOP.is_recv() && NOP != WcOpcode::RECV && NOP != WcOpcode::RECV_RDMA_WITH_IMM);
        assert!(WcFlags::all().bits() & SOLICITED.bits() == 0);
    }
}

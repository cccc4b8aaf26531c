//! Work completions: what a CQE decodes to, and the decoding.
//!
//! A software-owned CQE is turned into a [`Completion`] by asking the queue
//! that owns the request ([`WorkQueues`]) to retire it by the CQE's
//! `wqe_counter`; only then are the CQE's other fields read into the
//! completion. A CQE naming nothing outstanding is a [`BadCqe`], and then
//! no queue has changed.

use crate::cq::WorkQueues;
use crate::cqe::{cqe_opcode, op_own, Cqe64, Status};
use crate::seg::opcode;

/// What a completion reports having done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WcOpcode {
    /// SEND (with or without immediate).
    #[default]
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ.
    RdmaRead,
    /// Compare and swap.
    CompSwap,
    /// Fetch and add.
    FetchAdd,
    /// NOP.
    Nop,
    /// A receive consumed by a SEND.
    Recv,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
    /// A send opcode this crate does not post.
    Other(u8),
}

impl WcOpcode {
    fn from_send(op: u8) -> WcOpcode {
        match op {
            opcode::SEND | opcode::SEND_IMM | opcode::SEND_INVAL => WcOpcode::Send,
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM => WcOpcode::RdmaWrite,
            opcode::RDMA_READ => WcOpcode::RdmaRead,
            opcode::ATOMIC_CS => WcOpcode::CompSwap,
            opcode::ATOMIC_FA => WcOpcode::FetchAdd,
            opcode::NOP => WcOpcode::Nop,
            other => WcOpcode::Other(other),
        }
    }
}

bitflags::bitflags! {
    /// Completion flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct WcFlags: u8 {
        /// `imm` holds immediate data.
        const WITH_IMM = 1;
        /// `imm` holds an invalidated rkey.
        const WITH_INV = 2;
        /// The message carried a GRH.
        const GRH = 4;
        /// The message asked for a solicited event.
        const SOLICITED = 8;
    }
}

/// One decoded completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// Success or the named error.
    pub status: Status,
    /// What completed (send side: the opcode as posted).
    pub opcode: WcOpcode,
    /// The vendor syndrome of an error CQE, kept as is.
    pub vendor_err: u8,
    /// Bytes received, read, or 8 for atomics (0 for sends and writes).
    pub byte_len: u32,
    /// Immediate data (host order) or invalidated rkey, per `flags`.
    pub imm: u32,
    /// The local QP number.
    pub qpn: u32,
    /// The sender's QP number (receives).
    pub src_qp: u32,
    /// Flags.
    pub flags: WcFlags,
    /// Source LID (receives, IB).
    pub slid: u16,
    /// Service level (receives).
    pub sl: u8,
    /// DLID path bits (receives).
    pub dlid_path_bits: u8,
    /// P_Key index (receives without immediate).
    pub pkey_index: u16,
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

/// Turns one software-owned CQE into a completion, retiring its request.
/// On error nothing was changed.
pub(crate) fn decode<Q: WorkQueues + ?Sized>(
    cqe: &Cqe64,
    wqs: &mut Q,
) -> Result<Completion, BadCqe> {
    let (qpn, uidx, ctr) = (cqe.qpn(), cqe.srqn_uidx(), cqe.wqe_counter.get());
    let op = cqe.opcode();
    let mut c = Completion {
        qpn,
        ..Completion::default()
    };
    if cqe.se() != 0 {
        c.flags |= WcFlags::SOLICITED;
    }
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
            c.wr_id = r.wr_id;
            c.opcode = WcOpcode::from_send(r.opcode);
            if op == cqe_opcode::REQ_ERR {
                set_error(&mut c, cqe);
            } else {
                c.byte_len = match r.opcode {
                    opcode::RDMA_READ => cqe.byte_cnt.get(),
                    opcode::ATOMIC_CS | opcode::ATOMIC_FA => 8,
                    _ => 0,
                };
                if matches!(r.opcode, opcode::SEND_IMM | opcode::RDMA_WRITE_IMM) {
                    c.flags |= WcFlags::WITH_IMM;
                }
                check_scatter(&mut c, cqe);
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
            c.wr_id = rq.complete(ctr).ok_or(not_outstanding)?;
            c.opcode = WcOpcode::Recv;
            if op == cqe_opcode::RESP_ERR {
                set_error(&mut c, cqe);
            } else {
                set_responder(&mut c, cqe);
                check_scatter(&mut c, cqe);
            }
        }
        other => return Err(BadCqe::Opcode { opcode: other }),
    }
    Ok(c)
}

fn set_error(c: &mut Completion, cqe: &Cqe64) {
    c.status = Status::from_syndrome(cqe.syndrome());
    c.vendor_err = cqe.vendor_err_synd();
}

fn check_scatter(c: &mut Completion, cqe: &Cqe64) {
    if cqe.op_own & (op_own::INLINE_SCATTER_32 | op_own::INLINE_SCATTER_64) != 0 {
        c.status = Status::ScatteredToCqe;
    }
}

/// The receive fields of a successful responder CQE (rdma-core's
/// `handle_responder`).
fn set_responder(c: &mut Completion, cqe: &Cqe64) {
    let imm = cqe.imm_inval_pkey.get();
    match cqe.opcode() {
        cqe_opcode::RESP_WR_IMM => {
            c.opcode = WcOpcode::RecvRdmaWithImm;
            c.flags |= WcFlags::WITH_IMM;
            c.imm = imm;
        }
        cqe_opcode::RESP_SEND_IMM => {
            c.flags |= WcFlags::WITH_IMM;
            c.imm = imm;
        }
        cqe_opcode::RESP_SEND_INV => {
            c.flags |= WcFlags::WITH_INV;
            c.imm = imm;
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
    c.dlid_path_bits = cqe.ml_path & 0x7f;
    c.pkey_index = (imm & 0xffff) as u16;
}

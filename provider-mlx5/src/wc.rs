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
pub const fn vendor_opcode(op: u8) -> WcOpcode {
    WcOpcode(VENDOR_OPCODE | op as u32)
}

/// The completion opcode of a send WQE posted with mlx5 opcode `op`.
const fn send_opcode(op: u8) -> WcOpcode {
    match op {
        opcode::SEND | opcode::SEND_IMM | opcode::SEND_INVAL => WcOpcode::SEND,
        opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM => WcOpcode::RDMA_WRITE,
        opcode::RDMA_READ => WcOpcode::RDMA_READ,
        opcode::ATOMIC_CS => WcOpcode::COMP_SWAP,
        opcode::ATOMIC_FA => WcOpcode::FETCH_ADD,
        other => vendor_opcode(other),
    }
}

/// [`SEND_KIND`]: the completion opcode (bits 0..9).
const KIND_OPCODE: u32 = 0x1ff;
/// [`SEND_KIND`]: `byte_len` is the CQE's `byte_cnt` (RDMA READ; bit 15).
const KIND_LEN_CQE: u32 = 1 << 15;
/// [`SEND_KIND`]: otherwise `byte_len` is this (bits 16..24): 8 for the
/// atomics (their operand), else 0.
const KIND_LEN_CONST: u32 = 0xff << KIND_LEN_SHIFT;
const KIND_LEN_SHIFT: u32 = 16;
/// [`SEND_KIND`]: the completion carries [`WcFlags::WITH_IMM`] (bit 24;
/// shifted down onto that flag's bit, 1, without a branch).
const KIND_IMM: u32 = 1 << 24;
const KIND_IMM_TO_FLAG: u32 = 23;
const _: () = assert!(KIND_IMM >> KIND_IMM_TO_FLAG == WcFlags::WITH_IMM.bits());
const _: () = assert!(KIND_OPCODE & (KIND_LEN_CQE | KIND_LEN_CONST | KIND_IMM) == 0);
const _: () = assert!(KIND_LEN_CQE & (KIND_LEN_CONST | KIND_IMM) == 0);

/// What a requester completion of each mlx5 send opcode reports, packed
/// (see the `KIND_*` masks), so that decoding one is a single indexed load
/// rather than three matches (callgrind: ~15 instructions per CQE).
static SEND_KIND: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut op = 0;
    while op < 256 {
        let o = op as u8;
        let len = match o {
            opcode::RDMA_READ => KIND_LEN_CQE,
            opcode::ATOMIC_CS | opcode::ATOMIC_FA => 8 << KIND_LEN_SHIFT,
            _ => 0,
        };
        let imm = match o {
            opcode::SEND_IMM | opcode::RDMA_WRITE_IMM => KIND_IMM,
            _ => 0,
        };
        t[op] = send_opcode(o).0 | len | imm;
        op += 1;
    }
    t
};

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
            if op == cqe_opcode::REQ_ERR {
                *c = Wc {
                    wr_id: r.wr_id,
                    opcode: WcOpcode(SEND_KIND[r.opcode as usize] & KIND_OPCODE),
                    qp_num: qpn,
                    flags,
                    ..Wc::default()
                };
                set_error(c, cqe);
            } else {
                req_success(c, r, qpn, cqe.op_own, || cqe.byte_cnt.get());
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

/// A successful requester CQE, written into `c`: what the send opcode
/// reports comes from one table lookup ([`SEND_KIND`]); `byte_cnt` is
/// read only for an RDMA READ, the one opcode whose length is in the CQE.
#[inline(always)]
fn req_success(
    c: &mut Wc,
    r: crate::records::SendRetired,
    qpn: u32,
    op_own: u8,
    byte_cnt: impl FnOnce() -> u32,
) {
    let k = SEND_KIND[r.opcode as usize];
    // A READ's length is in the CQE; an atomic's is 8 (in the table); the
    // rest report 0.
    let byte_len = if k & KIND_LEN_CQE != 0 {
        byte_cnt()
    } else {
        (k & KIND_LEN_CONST) >> KIND_LEN_SHIFT
    };
    // As rdma-core and the kernel's rxe do, the requester's completion
    // carries WITH_IMM too; the immediate itself is not in the CQE (`ex`
    // stays 0).
    let mut flags = WcFlags::from_bits_retain((k & KIND_IMM) >> KIND_IMM_TO_FLAG);
    if op_own & op_own::SE != 0 {
        flags |= SOLICITED;
    }
    // Written in place, each member once: the slot is the caller's.
    *c = Wc {
        wr_id: r.wr_id,
        opcode: WcOpcode(k & KIND_OPCODE),
        byte_len,
        qp_num: qpn,
        flags,
        ..Wc::default()
    };
    if op_own & (op_own::INLINE_SCATTER_32 | op_own::INLINE_SCATTER_64) != 0 {
        c.status = Status::ScatteredToCqe.wc_status();
    }
}

/// The poller's fast path: a successful requester CQE (`MLX5_CQE_REQ`),
/// decoded from the two 8-byte words that hold all it needs — word 4
/// (`srqn_uidx`) and word 7 (`sop_drop_qpn`, `wqe_counter`, `op_own`),
/// as read from the ring — and, for an RDMA READ only, `byte_cnt` from
/// `word5()`. Every other CQE goes through [`decode`], which must agree
/// with this (`fast_and_full_decodes_agree` checks it).
#[inline(always)]
pub(crate) fn decode_req<Q: WorkQueues + ?Sized>(
    w4: u64,
    w7: u64,
    word5: impl FnOnce() -> u64,
    wqs: &mut Q,
    c: &mut Wc,
) -> Result<(), BadCqe> {
    // The words are the ring's bytes: big-endian fields at memory offsets.
    let (b4, b7) = (w4.to_ne_bytes(), w7.to_ne_bytes());
    let qpn = u32::from_be_bytes([b7[0], b7[1], b7[2], b7[3]]) & 0xff_ffff;
    let ctr = u16::from_be_bytes([b7[4], b7[5]]);
    let uidx = u32::from_be_bytes([b4[0], b4[1], b4[2], b4[3]]) & 0xff_ffff;
    let sq = wqs
        .send_queue(qpn, uidx)
        .ok_or(BadCqe::UnknownQueue { qpn, send: true })?;
    let r = sq.complete(ctr).ok_or(BadCqe::NotOutstanding {
        qpn,
        wqe_counter: ctr,
    })?;
    req_success(c, r, qpn, b7[7], || {
        let b5 = word5().to_ne_bytes();
        u32::from_be_bytes([b5[4], b5[5], b5[6], b5[7]])
    });
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
            c.set_imm_data(imm);
        }
        cqe_opcode::RESP_SEND_IMM => c.set_imm_data(imm),
        // The invalidated rkey is in imm_inval_pkey (rdma-core's
        // handle_responder reports it the same way).
        cqe_opcode::RESP_SEND_INV => c.set_invalidated_rkey(imm),
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
    // The destination LID's path bits (low 7 bits of `ml_path`; bit 7 is
    // the multicast flag), as rdma-core reports them: they were left at 0
    // until the differential against rdma-core's mlx5_poll_cq showed it.
    c.dlid_path_bits = cqe.ml_path & 0x7f;
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

    /// The poller's fast path for successful send CQEs decodes exactly
    /// what the full decoder does, for every send opcode, with and without
    /// the solicited and inline-scatter bits, and refuses what it refuses.
    #[test]
    fn fast_and_full_decodes_agree() {
        use crate::lookup::QpQueues;
        use crate::records::SendRecords;
        let words = |cqe: &Cqe64| {
            let b = zerocopy::IntoBytes::as_bytes(cqe);
            let w = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
            (w(4), w(5), w(7))
        };
        let qpn = 0x12_3456;
        // Every byte natively; under Miri (a second a value) the opcodes
        // mlx5 defines (0x00..=0x25) and two it does not.
        let last = if cfg!(miri) { 0x27 } else { 0xff };
        for op in (0..=last).chain(cfg!(miri).then_some(0xff)) {
            for bits in [
                0,
                op_own::SE,
                op_own::INLINE_SCATTER_32,
                op_own::SE | op_own::INLINE_SCATTER_64,
            ] {
                let mut cqe = Cqe64::new_zeroed();
                cqe.sop_drop_qpn.set(u32::from(op) << 24 | qpn);
                cqe.wqe_counter.set(3);
                cqe.byte_cnt.set(0x1234);
                cqe.srqn_uidx.set(0x77);
                cqe.op_own = cqe_opcode::REQ << 4 | bits;
                let (w4, w5, w7) = words(&cqe);
                let mut got = [Wc::default(); 2];
                for (i, fast) in [false, true].into_iter().enumerate() {
                    let recs = SendRecords::new(8);
                    recs.record(3, 1, 0xabc, op, 0);
                    recs.publish(4);
                    let mut qs = [QpQueues {
                        qpn,
                        sq: Some(&recs),
                        rq: None,
                    }];
                    let wqs: &mut [QpQueues<'_>] = &mut qs;
                    let r = if fast {
                        decode_req(w4, w7, || w5, wqs, &mut got[i])
                    } else {
                        decode(&cqe, wqs, &mut got[i])
                    };
                    assert_eq!(r, Ok(()), "op {op:#x}");
                    // Each retired the request: a second time is refused.
                    let again = if fast {
                        decode_req(w4, w7, || w5, wqs, &mut Wc::default())
                    } else {
                        decode(&cqe, wqs, &mut Wc::default())
                    };
                    assert_eq!(
                        again,
                        Err(BadCqe::NotOutstanding {
                            qpn,
                            wqe_counter: 3
                        })
                    );
                }
                assert_eq!(got[0], got[1], "op {op:#x} bits {bits:#x}");
            }
        }
        // An unknown QP: the same refusal from both.
        let mut cqe = Cqe64::new_zeroed();
        cqe.sop_drop_qpn.set(qpn + 1);
        let (w4, w5, w7) = words(&cqe);
        let recs = SendRecords::new(8);
        let mut qs = [QpQueues {
            qpn,
            sq: Some(&recs),
            rq: None,
        }];
        let wqs: &mut [QpQueues<'_>] = &mut qs;
        let want = Err(BadCqe::UnknownQueue {
            qpn: qpn + 1,
            send: true,
        });
        assert_eq!(decode_req(w4, w7, || w5, wqs, &mut Wc::default()), want);
        assert_eq!(decode(&cqe, wqs, &mut Wc::default()), want);
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

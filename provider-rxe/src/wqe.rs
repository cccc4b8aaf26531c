//! Byte layouts of the rxe work-queue entries (`struct rxe_send_wqe`,
//! `struct rxe_recv_wqe`, `struct rxe_sge` in `rdma_user_rxe.h`) and of the
//! CQ entry (`struct ib_uverbs_wc` in `ib_user_verbs.h`).
//!
//! The provider writes entries as plain bytes at these offsets. Every one is
//! `offset_of!` on the `uverbs-abi` types, which that crate's tests compare
//! with the C headers member by member: nothing here is typed in by hand.

use core::mem::{offset_of, size_of};
use uverbs_abi::rxe::offsets::{recv_wqe, send_wqe};
use uverbs_abi::rxe::{RxeDmaInfo, RxeSendWqe, RxeSendWr, RxeSge, RXE_SEND_WR_UNION_LEN};
use uverbs_abi::verbs::IbUverbsWc;

/// Offsets inside `struct rxe_send_wqe`.
#[allow(missing_docs)] // each constant is the C member of the same name
pub mod send {
    use super::*;
    pub const WR_ID: usize = send_wqe::WR_ID;
    pub const WR_RESERVED: usize = offset_of!(RxeSendWqe, wr) + offset_of!(RxeSendWr, reserved);
    pub const OPCODE: usize = send_wqe::OPCODE;
    pub const SEND_FLAGS: usize = send_wqe::SEND_FLAGS;
    pub const EX_IMM: usize = send_wqe::EX;
    /// Start and length of the opcode-specific `wr` union.
    pub const WR_UNION: usize = send_wqe::WR_UNION;
    pub const WR_UNION_LEN: usize = RXE_SEND_WR_UNION_LEN;
    pub const RDMA_REMOTE_ADDR: usize = send_wqe::RDMA_REMOTE_ADDR;
    pub const RDMA_RKEY: usize = send_wqe::RDMA_RKEY;
    pub const ATOMIC_REMOTE_ADDR: usize = send_wqe::ATOMIC_REMOTE_ADDR;
    pub const ATOMIC_COMPARE_ADD: usize = send_wqe::ATOMIC_COMPARE_ADD;
    pub const ATOMIC_SWAP: usize = send_wqe::ATOMIC_SWAP;
    pub const ATOMIC_RKEY: usize = send_wqe::ATOMIC_RKEY;
    pub const UD_REMOTE_QPN: usize = send_wqe::UD_REMOTE_QPN;
    pub const UD_REMOTE_QKEY: usize = send_wqe::UD_REMOTE_QKEY;
    pub const UD_AH_NUM: usize = send_wqe::UD_AH_NUM;
    /// `wr.wr.ud.pkey_index` and the `reserved` u16 after it.
    pub const UD_PKEY_INDEX: usize = send_wqe::UD_PKEY_INDEX;
    pub const FLUSH_REMOTE_ADDR: usize = send_wqe::FLUSH_REMOTE_ADDR;
    pub const FLUSH_LENGTH: usize = send_wqe::FLUSH_LENGTH;
    pub const FLUSH_RKEY: usize = send_wqe::FLUSH_RKEY;
    pub const FLUSH_TYPE: usize = send_wqe::FLUSH_TYPE;
    pub const FLUSH_LEVEL: usize = send_wqe::FLUSH_LEVEL;
    pub const MW_ADDR: usize = send_wqe::MW_ADDR;
    pub const MW_LENGTH: usize = send_wqe::MW_LENGTH;
    pub const MW_MR_LKEY: usize = send_wqe::MW_MR_LKEY;
    pub const MW_MW_RKEY: usize = send_wqe::MW_MW_RKEY;
    pub const MW_RKEY: usize = send_wqe::MW_RKEY;
    pub const MW_ACCESS: usize = send_wqe::MW_ACCESS;
    pub const STATUS: usize = send_wqe::STATUS;
    pub const STATE: usize = send_wqe::STATE;
    pub const IOVA: usize = send_wqe::IOVA;
    pub const MASK: usize = send_wqe::MASK;
    pub const FIRST_PSN: usize = offset_of!(RxeSendWqe, first_psn);
    pub const LAST_PSN: usize = offset_of!(RxeSendWqe, last_psn);
    pub const ACK_LENGTH: usize = offset_of!(RxeSendWqe, ack_length);
    pub const SSN: usize = send_wqe::SSN;
    pub const HAS_RD_ATOMIC: usize = offset_of!(RxeSendWqe, has_rd_atomic);
    pub const DMA_LENGTH: usize = send_wqe::DMA_LENGTH;
    pub const DMA_RESID: usize = send_wqe::DMA_RESID;
    pub const DMA_CUR_SGE: usize = send_wqe::DMA_CUR_SGE;
    pub const DMA_NUM_SGE: usize = send_wqe::DMA_NUM_SGE;
    pub const DMA_SGE_OFFSET: usize = send_wqe::DMA_SGE_OFFSET;
    pub const DMA_RESERVED: usize = send_wqe::DMA + offset_of!(RxeDmaInfo, reserved);
    /// `dma.sge[]` / `dma.inline_data[]`: the SGEs or inline bytes.
    pub const PAYLOAD: usize = send_wqe::PAYLOAD;
}

/// Offsets inside `struct rxe_recv_wqe`.
#[allow(missing_docs)] // each constant is the C member of the same name
pub mod recv {
    use super::*;
    pub const WR_ID: usize = recv_wqe::WR_ID;
    pub const DMA_LENGTH: usize = recv_wqe::DMA_LENGTH;
    pub const DMA_RESID: usize = recv_wqe::DMA_RESID;
    pub const DMA_CUR_SGE: usize = recv_wqe::DMA_CUR_SGE;
    pub const DMA_NUM_SGE: usize = recv_wqe::DMA_NUM_SGE;
    pub const DMA_SGE_OFFSET: usize = recv_wqe::DMA_SGE_OFFSET;
    /// `dma.sge[]`.
    pub const SGES: usize = recv_wqe::PAYLOAD;
}

/// `sizeof(struct rxe_sge)`: addr u64, length u32, lkey u32.
pub const SGE_SIZE: usize = size_of::<RxeSge>();

/// `sizeof(struct ib_uverbs_wc)`, the start of every rxe CQ slot.
pub const WC_SIZE: usize = size_of::<IbUverbsWc>();

/// Offsets inside `struct ib_uverbs_wc`.
#[allow(missing_docs)] // each constant is the C member of the same name
pub mod wc {
    use super::*;
    pub const WR_ID: usize = offset_of!(IbUverbsWc, wr_id);
    pub const STATUS: usize = offset_of!(IbUverbsWc, status);
    pub const OPCODE: usize = offset_of!(IbUverbsWc, opcode);
    pub const VENDOR_ERR: usize = offset_of!(IbUverbsWc, vendor_err);
    pub const BYTE_LEN: usize = offset_of!(IbUverbsWc, byte_len);
    pub const EX: usize = offset_of!(IbUverbsWc, ex);
    pub const QP_NUM: usize = offset_of!(IbUverbsWc, qp_num);
    pub const SRC_QP: usize = offset_of!(IbUverbsWc, src_qp);
    pub const WC_FLAGS: usize = offset_of!(IbUverbsWc, wc_flags);
    pub const PKEY_INDEX: usize = offset_of!(IbUverbsWc, pkey_index);
    pub const SLID: usize = offset_of!(IbUverbsWc, slid);
    pub const SL: usize = offset_of!(IbUverbsWc, sl);
    pub const DLID_PATH_BITS: usize = offset_of!(IbUverbsWc, dlid_path_bits);
    pub const PORT_NUM: usize = offset_of!(IbUverbsWc, port_num);
}

/// Reads the `u32` at `off` of a copied-out entry (native endianness, as
/// the kernel writes these structs).
#[inline(always)]
pub(crate) fn get_u32(buf: &[u8], off: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[off..off + 4]);
    u32::from_ne_bytes(b)
}

#[inline(always)]
pub(crate) fn get_u64(buf: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[off..off + 8]);
    u64::from_ne_bytes(b)
}

#[inline(always)]
pub(crate) fn get_u16(buf: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([buf[off], buf[off + 1]])
}

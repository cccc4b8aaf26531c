//! Byte offsets of the fields a provider reads or writes in shared rxe
//! rings, each named after its C member and checked against
//! `rdma_user_rxe.h` by the layout test (the structs' layouts register
//! these same constants).

use super::wqe::*;
use core::mem::{offset_of, size_of};

/// Inside `struct rxe_queue_buf` (see [`RxeQueueBuf`](crate::rxe::RxeQueueBuf)).
pub mod queue_buf {
    use crate::rxe::RxeQueueBuf;
    use core::mem::offset_of;
    /// `log2_elem_size`.
    pub const LOG2_ELEM_SIZE: usize = offset_of!(RxeQueueBuf, log2_elem_size);
    /// `index_mask`.
    pub const INDEX_MASK: usize = offset_of!(RxeQueueBuf, index_mask);
    /// `producer_index`.
    pub const PRODUCER_INDEX: usize = offset_of!(RxeQueueBuf, producer_index);
    /// `consumer_index`.
    pub const CONSUMER_INDEX: usize = offset_of!(RxeQueueBuf, consumer_index);
    /// `data`: the first slot.
    pub const DATA: usize = crate::rxe::RXE_QUEUE_DATA_OFFSET;
}

/// Inside `struct rxe_sge`.
pub mod sge {
    use super::*;
    /// `addr`.
    pub const ADDR: usize = offset_of!(RxeSge, addr);
    /// `length`.
    pub const LENGTH: usize = offset_of!(RxeSge, length);
    /// `lkey`.
    pub const LKEY: usize = offset_of!(RxeSge, lkey);
    /// `sizeof(struct rxe_sge)`.
    pub const SIZE: usize = size_of::<RxeSge>();
}

/// Inside `struct rxe_dma_info`.
pub mod dma {
    use super::*;
    /// `length`.
    pub const LENGTH: usize = offset_of!(RxeDmaInfo, length);
    /// `resid`.
    pub const RESID: usize = offset_of!(RxeDmaInfo, resid);
    /// `cur_sge`.
    pub const CUR_SGE: usize = offset_of!(RxeDmaInfo, cur_sge);
    /// `num_sge`.
    pub const NUM_SGE: usize = offset_of!(RxeDmaInfo, num_sge);
    /// `sge_offset`.
    pub const SGE_OFFSET: usize = offset_of!(RxeDmaInfo, sge_offset);
    /// `reserved`.
    pub const RESERVED: usize = offset_of!(RxeDmaInfo, reserved);
    /// `sge[]` / `inline_data[]`.
    pub const PAYLOAD: usize = size_of::<RxeDmaInfo>();
}

/// Inside `struct rxe_send_wqe` (`wr.*` are the `struct rxe_send_wr`
/// members, `wr.wr.*` its union).
pub mod send_wqe {
    use super::*;
    const WR: usize = offset_of!(RxeSendWqe, wr);
    /// `wr.wr_id`.
    pub const WR_ID: usize = WR + offset_of!(RxeSendWr, wr_id);
    /// `wr.opcode`.
    pub const OPCODE: usize = WR + offset_of!(RxeSendWr, opcode);
    /// `wr.send_flags`.
    pub const SEND_FLAGS: usize = WR + offset_of!(RxeSendWr, send_flags);
    /// `wr.ex.imm_data` / `wr.ex.invalidate_rkey`.
    pub const EX: usize = WR + offset_of!(RxeSendWr, ex);
    /// `wr.wr`: the union ([`RXE_SEND_WR_UNION_LEN`] bytes).
    pub const WR_UNION: usize = WR + offset_of!(RxeSendWr, wr);
    /// `wr.wr.rdma.remote_addr`.
    pub const RDMA_REMOTE_ADDR: usize = WR_UNION + offset_of!(RxeSendWrRdma, remote_addr);
    /// `wr.wr.rdma.rkey`.
    pub const RDMA_RKEY: usize = WR_UNION + offset_of!(RxeSendWrRdma, rkey);
    /// `wr.wr.atomic.remote_addr`.
    pub const ATOMIC_REMOTE_ADDR: usize = WR_UNION + offset_of!(RxeSendWrAtomic, remote_addr);
    /// `wr.wr.atomic.compare_add`.
    pub const ATOMIC_COMPARE_ADD: usize = WR_UNION + offset_of!(RxeSendWrAtomic, compare_add);
    /// `wr.wr.atomic.swap`.
    pub const ATOMIC_SWAP: usize = WR_UNION + offset_of!(RxeSendWrAtomic, swap);
    /// `wr.wr.atomic.rkey`.
    pub const ATOMIC_RKEY: usize = WR_UNION + offset_of!(RxeSendWrAtomic, rkey);
    /// `wr.wr.ud.remote_qpn`.
    pub const UD_REMOTE_QPN: usize = WR_UNION + offset_of!(RxeSendWrUd, remote_qpn);
    /// `wr.wr.ud.remote_qkey`.
    pub const UD_REMOTE_QKEY: usize = WR_UNION + offset_of!(RxeSendWrUd, remote_qkey);
    /// `wr.wr.ud.pkey_index`.
    pub const UD_PKEY_INDEX: usize = WR_UNION + offset_of!(RxeSendWrUd, pkey_index);
    /// `wr.wr.ud.ah_num`.
    pub const UD_AH_NUM: usize = WR_UNION + offset_of!(RxeSendWrUd, ah_num);
    /// `wr.wr.ud.av`.
    pub const UD_AV: usize = WR_UNION + offset_of!(RxeSendWrUd, av);
    /// `wr.wr.flush.remote_addr` (Linux 6.2; newer than the headers the
    /// layout test compiles against, so placed by hand: the member is
    /// `{ __aligned_u64 remote_addr; __u32 length; __u32 rkey; __u8 type;
    /// __u8 level; }` at the union's start, as in the kernel's
    /// `rdma_user_rxe.h`).
    pub const FLUSH_REMOTE_ADDR: usize = WR_UNION;
    /// `wr.wr.flush.length` (see [`FLUSH_REMOTE_ADDR`]).
    pub const FLUSH_LENGTH: usize = WR_UNION + 8;
    /// `wr.wr.flush.rkey` (see [`FLUSH_REMOTE_ADDR`]).
    pub const FLUSH_RKEY: usize = WR_UNION + 12;
    /// `wr.wr.flush.type` (see [`FLUSH_REMOTE_ADDR`]).
    pub const FLUSH_TYPE: usize = WR_UNION + 16;
    /// `wr.wr.flush.level` (see [`FLUSH_REMOTE_ADDR`]).
    pub const FLUSH_LEVEL: usize = WR_UNION + 17;
    /// `wr.wr.mw.addr`.
    pub const MW_ADDR: usize = WR_UNION + offset_of!(RxeSendWrMw, addr);
    /// `wr.wr.mw.length`.
    pub const MW_LENGTH: usize = WR_UNION + offset_of!(RxeSendWrMw, length);
    /// `wr.wr.mw.mr_lkey`.
    pub const MW_MR_LKEY: usize = WR_UNION + offset_of!(RxeSendWrMw, mr_lkey);
    /// `wr.wr.mw.mw_rkey`.
    pub const MW_MW_RKEY: usize = WR_UNION + offset_of!(RxeSendWrMw, mw_rkey);
    /// `wr.wr.mw.rkey`.
    pub const MW_RKEY: usize = WR_UNION + offset_of!(RxeSendWrMw, rkey);
    /// `wr.wr.mw.access`.
    pub const MW_ACCESS: usize = WR_UNION + offset_of!(RxeSendWrMw, access);
    /// `status`.
    pub const STATUS: usize = offset_of!(RxeSendWqe, status);
    /// `state`.
    pub const STATE: usize = offset_of!(RxeSendWqe, state);
    /// `iova`.
    pub const IOVA: usize = offset_of!(RxeSendWqe, iova);
    /// `mask`.
    pub const MASK: usize = offset_of!(RxeSendWqe, mask);
    /// `ssn`.
    pub const SSN: usize = offset_of!(RxeSendWqe, ssn);
    /// `dma`.
    pub const DMA: usize = offset_of!(RxeSendWqe, dma);
    /// `dma.length`.
    pub const DMA_LENGTH: usize = DMA + dma::LENGTH;
    /// `dma.resid`.
    pub const DMA_RESID: usize = DMA + dma::RESID;
    /// `dma.cur_sge`.
    pub const DMA_CUR_SGE: usize = DMA + dma::CUR_SGE;
    /// `dma.num_sge`.
    pub const DMA_NUM_SGE: usize = DMA + dma::NUM_SGE;
    /// `dma.sge_offset`.
    pub const DMA_SGE_OFFSET: usize = DMA + dma::SGE_OFFSET;
    /// `dma.sge[]` / `dma.inline_data[]`: `sizeof(struct rxe_send_wqe)`.
    pub const PAYLOAD: usize = DMA + dma::PAYLOAD;
}

/// Inside `struct rxe_recv_wqe`.
pub mod recv_wqe {
    use super::*;
    /// `wr_id`.
    pub const WR_ID: usize = offset_of!(RxeRecvWqe, wr_id);
    /// `dma`.
    pub const DMA: usize = offset_of!(RxeRecvWqe, dma);
    /// `dma.length`.
    pub const DMA_LENGTH: usize = DMA + dma::LENGTH;
    /// `dma.resid`.
    pub const DMA_RESID: usize = DMA + dma::RESID;
    /// `dma.cur_sge`.
    pub const DMA_CUR_SGE: usize = DMA + dma::CUR_SGE;
    /// `dma.num_sge`.
    pub const DMA_NUM_SGE: usize = DMA + dma::NUM_SGE;
    /// `dma.sge_offset`.
    pub const DMA_SGE_OFFSET: usize = DMA + dma::SGE_OFFSET;
    /// `dma.sge[]`: `sizeof(struct rxe_recv_wqe)`.
    pub const PAYLOAD: usize = DMA + dma::PAYLOAD;
}

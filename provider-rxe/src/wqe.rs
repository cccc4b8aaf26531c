//! Byte layouts of the rxe work-queue entries (`struct rxe_send_wqe`,
//! `struct rxe_recv_wqe`, `struct rxe_sge` in `rdma_user_rxe.h`) and of the
//! CQ entry (`struct ib_uverbs_wc` in `ib_user_verbs.h`).
//!
//! The provider writes entries as plain bytes at these offsets; the test at
//! the bottom proves every offset equal to `offset_of!` on the `uverbs-abi`
//! types, which are themselves checked against the C headers.

/// Offsets inside `struct rxe_send_wqe`.
#[allow(missing_docs)] // each constant is the C member of the same name
pub mod send {
    pub const WR_ID: usize = 0;
    pub const WR_RESERVED: usize = 8;
    pub const OPCODE: usize = 12;
    pub const SEND_FLAGS: usize = 16;
    pub const EX_IMM: usize = 20;
    /// Start and length of the opcode-specific `wr` union.
    pub const WR_UNION: usize = 24;
    pub const WR_UNION_LEN: usize = 120;
    pub const RDMA_REMOTE_ADDR: usize = 24;
    pub const RDMA_RKEY: usize = 32;
    pub const ATOMIC_REMOTE_ADDR: usize = 24;
    pub const ATOMIC_COMPARE_ADD: usize = 32;
    pub const ATOMIC_SWAP: usize = 40;
    pub const ATOMIC_RKEY: usize = 48;
    pub const UD_REMOTE_QPN: usize = 24;
    pub const UD_REMOTE_QKEY: usize = 28;
    pub const UD_AH_NUM: usize = 36;
    pub const STATUS: usize = 144;
    pub const STATE: usize = 148;
    pub const IOVA: usize = 152;
    pub const MASK: usize = 160;
    pub const FIRST_PSN: usize = 164;
    pub const LAST_PSN: usize = 168;
    pub const ACK_LENGTH: usize = 172;
    pub const SSN: usize = 176;
    pub const HAS_RD_ATOMIC: usize = 180;
    pub const DMA_LENGTH: usize = 184;
    pub const DMA_RESID: usize = 188;
    pub const DMA_CUR_SGE: usize = 192;
    pub const DMA_NUM_SGE: usize = 196;
    pub const DMA_SGE_OFFSET: usize = 200;
    pub const DMA_RESERVED: usize = 204;
    /// `dma.sge[]` / `dma.inline_data[]`: the SGEs or inline bytes.
    pub const PAYLOAD: usize = 208;
}

/// Offsets inside `struct rxe_recv_wqe`.
#[allow(missing_docs)] // each constant is the C member of the same name
pub mod recv {
    pub const WR_ID: usize = 0;
    pub const DMA_LENGTH: usize = 16;
    pub const DMA_RESID: usize = 20;
    pub const DMA_CUR_SGE: usize = 24;
    pub const DMA_NUM_SGE: usize = 28;
    pub const DMA_SGE_OFFSET: usize = 32;
    /// `dma.sge[]`.
    pub const SGES: usize = 40;
}

/// `sizeof(struct rxe_sge)`: addr u64, length u32, lkey u32.
pub const SGE_SIZE: usize = 16;

/// `sizeof(struct ib_uverbs_wc)`, the start of every rxe CQ slot.
pub const WC_SIZE: usize = 48;

/// Offsets inside `struct ib_uverbs_wc`.
#[allow(missing_docs)] // each constant is the C member of the same name
pub mod wc {
    pub const WR_ID: usize = 0;
    pub const STATUS: usize = 8;
    pub const OPCODE: usize = 12;
    pub const VENDOR_ERR: usize = 16;
    pub const BYTE_LEN: usize = 20;
    pub const EX: usize = 24;
    pub const QP_NUM: usize = 28;
    pub const SRC_QP: usize = 32;
    pub const WC_FLAGS: usize = 36;
    pub const PKEY_INDEX: usize = 40;
    pub const SLID: usize = 42;
    pub const SL: usize = 44;
    pub const DLID_PATH_BITS: usize = 45;
    pub const PORT_NUM: usize = 46;
}

/// A WQE slot in a ring, written field by field.
#[derive(Clone, Copy)]
pub(crate) struct Slot(pub(crate) *mut u8);

impl Slot {
    /// # Safety
    /// `off..off + 4` is inside the slot and 4-byte aligned.
    #[inline(always)]
    pub(crate) unsafe fn u32(self, off: usize, v: u32) {
        debug_assert_eq!((self.0 as usize + off) % 4, 0);
        // SAFETY: the caller's contract.
        unsafe { self.0.add(off).cast::<u32>().write(v) }
    }

    /// # Safety
    /// `off..off + 8` is inside the slot and 8-byte aligned.
    #[inline(always)]
    pub(crate) unsafe fn u64(self, off: usize, v: u64) {
        debug_assert_eq!((self.0 as usize + off) % 8, 0);
        // SAFETY: the caller's contract.
        unsafe { self.0.add(off).cast::<u64>().write(v) }
    }
}

/// Stores `v` at `off` of a little scratch buffer (native endianness, as the
/// kernel reads these structs).
#[inline(always)]
pub(crate) fn put_u32(buf: &mut [u8], off: usize, v: u32) {
    buf[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

#[inline(always)]
pub(crate) fn put_u64(buf: &mut [u8], off: usize, v: u64) {
    buf[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

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

//! The send/receive WQE segments of `mlx5dv.h` as typed values.
//!
//! A send WQE is a list of 16-byte segments ("octowords", the unit of the
//! control segment's `ds` count) in 64-byte basic blocks (WQEBBs): a
//! [`CtrlSeg`], then the transport segment (a [`DatagramSeg`] for UD, a
//! [`RaddrSeg`] for RDMA, a [`RaddrSeg`] and an [`AtomicSeg`] for atomics),
//! then the payload as [`DataSeg`]s or one [`InlineSeg`] header followed by
//! the bytes, padded to 16. Receive WQEs are [`DataSeg`]s (after a
//! [`SrqNextSeg`] on an SRQ), ended by [`DataSeg::END`] when short.
//!
//! Every multi-byte field is a big-endian integer type, so building a
//! segment is a few byte swaps and plain stores; each type has exactly the
//! size and field offsets of its C struct (checked against the header by
//! `tests/golden.rs`, together with the bytes each constructor produces
//! against `mlx5dv.h`'s own static-inline setters).

use rverbs_types::AhAddr;
use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes in a send-queue basic block (`MLX5_SEND_WQE_BB`).
pub const WQEBB: usize = 64;
/// Bytes in one `ds` unit of the control segment.
pub const OCTOWORD: usize = 16;
/// The largest `ds` the 6-bit field the device reads can express: a WQE is
/// at most 63 octowords (16 WQEBBs).
pub const MAX_DS: u32 = 0x3f;
/// The lkey that ends a short receive scatter list (`MLX5_INVALID_LKEY`).
pub const INVALID_LKEY: u32 = 0x100;
/// Set in an inline segment's byte count (`MLX5_INLINE_SEG`).
pub const INLINE_SEG: u32 = 0x8000_0000;
/// Set in a UD address vector's `dqp_dct` (`MLX5_EXTENDED_UD_AV`).
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;

/// Send WQE opcodes (`MLX5_OPCODE_*`), the low byte of `opmod_idx_opcode`.
pub mod opcode {
    /// No operation (completes without touching the wire).
    pub const NOP: u8 = 0x00;
    /// SEND with invalidate (not posted by this crate).
    pub const SEND_INVAL: u8 = 0x01;
    /// RDMA WRITE.
    pub const RDMA_WRITE: u8 = 0x08;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    /// SEND.
    pub const SEND: u8 = 0x0a;
    /// SEND with immediate.
    pub const SEND_IMM: u8 = 0x0b;
    /// RDMA READ.
    pub const RDMA_READ: u8 = 0x10;
    /// Atomic compare and swap.
    pub const ATOMIC_CS: u8 = 0x11;
    /// Atomic fetch and add.
    pub const ATOMIC_FA: u8 = 0x12;
}

/// The control segment's `fm_ce_se` bits (`MLX5_WQE_CTRL_*`).
pub mod fm_ce_se {
    /// Generate a CQE for this WQE (`MLX5_WQE_CTRL_CQ_UPDATE`, 2 << 2).
    pub const CQ_UPDATE: u8 = 0x08;
    /// Set the solicited-event bit in the message (`1 << 1`).
    pub const SOLICITED: u8 = 0x02;
    /// Wait for earlier RDMA READs and atomics (`MLX5_WQE_CTRL_FENCE`,
    /// 4 << 5).
    pub const FENCE: u8 = 0x80;
    /// Initiator small fence (`1 << 5`), used by rdma-core after memory
    /// window binds; not set by this crate.
    pub const INITIATOR_SMALL_FENCE: u8 = 0x20;
}

/// `struct mlx5_wqe_ctrl_seg`: the first 16 bytes of every send WQE.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct CtrlSeg {
    /// `opmod << 24 | wqe_index << 8 | opcode`.
    pub opmod_idx_opcode: U32,
    /// `qpn << 8 | ds` (ds: the WQE's size in octowords).
    pub qpn_ds: U32,
    /// WQE signature (0 unless the QP was created with signatures).
    pub signature: u8,
    /// DCI stream channel (DC only; 0).
    pub dci_stream_channel_id: U16,
    /// Fence mode, completion and solicited-event bits ([`fm_ce_se`]).
    pub fm_ce_se: u8,
    /// Immediate data (or invalidated rkey), big-endian on the wire.
    pub imm: U32,
}

impl CtrlSeg {
    /// A control segment, as `mlx5dv_set_ctrl_seg` fills one.
    ///
    /// `pi` is the WQEBB counter of the WQE's first block (it wraps at
    /// 0xffff, whatever the queue's size). `imm` is the host-order value
    /// the receiver will see; it is stored big-endian (the C helper takes
    /// it already in network order).
    #[allow(clippy::too_many_arguments)] // mirrors mlx5dv_set_ctrl_seg
    #[inline(always)]
    pub fn new(
        pi: u16,
        opcode: u8,
        opmod: u8,
        qpn: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
    ) -> CtrlSeg {
        CtrlSeg {
            opmod_idx_opcode: U32::new((opmod as u32) << 24 | (pi as u32) << 8 | opcode as u32),
            qpn_ds: U32::new(qpn << 8 | ds as u32),
            signature,
            dci_stream_channel_id: U16::ZERO,
            fm_ce_se,
            imm: U32::new(imm),
        }
    }
}

/// `struct mlx5_wqe_raddr_seg`: the remote address of an RDMA or atomic.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct RaddrSeg {
    /// Remote virtual address.
    pub raddr: U64,
    /// Remote key.
    pub rkey: U32,
    /// Zero.
    pub reserved: U32,
}

impl RaddrSeg {
    /// The segment for `raddr` under `rkey` (rdma-core's `set_raddr_seg`).
    #[inline(always)]
    pub fn new(raddr: u64, rkey: u32) -> RaddrSeg {
        RaddrSeg {
            raddr: U64::new(raddr),
            rkey: U32::new(rkey),
            reserved: U32::ZERO,
        }
    }
}

/// `struct mlx5_wqe_atomic_seg`: the operands of an atomic.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct AtomicSeg {
    /// The swap value (compare and swap) or the addend (fetch and add).
    pub swap_add: U64,
    /// The compare value (compare and swap; zero for fetch and add).
    pub compare: U64,
}

impl AtomicSeg {
    /// Operands of a compare and swap.
    #[inline(always)]
    pub fn compare_swap(compare: u64, swap: u64) -> AtomicSeg {
        AtomicSeg {
            swap_add: U64::new(swap),
            compare: U64::new(compare),
        }
    }

    /// Operand of a fetch and add.
    #[inline(always)]
    pub fn fetch_add(add: u64) -> AtomicSeg {
        AtomicSeg {
            swap_add: U64::new(add),
            compare: U64::ZERO,
        }
    }
}

/// `struct mlx5_wqe_data_seg`: one gather or scatter entry.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct DataSeg {
    /// Length in bytes (the device reads 0 as 2 GiB: never post 0).
    pub byte_count: U32,
    /// Local key.
    pub lkey: U32,
    /// Virtual address.
    pub addr: U64,
}

impl DataSeg {
    /// The terminator of a short receive scatter list: length 0, lkey
    /// [`INVALID_LKEY`], address 0.
    pub const END: DataSeg = DataSeg {
        byte_count: U32::ZERO,
        lkey: U32::new(INVALID_LKEY),
        addr: U64::ZERO,
    };

    /// An entry, as `mlx5dv_set_data_seg` fills one.
    #[inline(always)]
    pub fn new(length: u32, lkey: u32, addr: u64) -> DataSeg {
        DataSeg {
            byte_count: U32::new(length),
            lkey: U32::new(lkey),
            addr: U64::new(addr),
        }
    }
}

/// `struct mlx5_wqe_inline_seg`: the 4-byte header of inline data; the
/// bytes follow it and the whole is padded to a multiple of 16.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct InlineSeg {
    /// `len | MLX5_INLINE_SEG`.
    pub byte_count: U32,
}

impl InlineSeg {
    /// The header for `len` inline bytes.
    #[inline(always)]
    pub fn new(len: u32) -> InlineSeg {
        InlineSeg {
            byte_count: U32::new(len | INLINE_SEG),
        }
    }

    /// Octowords taken by a header and `len` bytes, padding included (0 for
    /// an empty payload, which gets no segment at all, as in rdma-core).
    #[inline(always)]
    pub const fn octowords(len: usize) -> usize {
        if len == 0 {
            0
        } else {
            (len + 4).div_ceil(OCTOWORD)
        }
    }
}

/// `struct mlx5_wqe_av` (= `struct mlx5_wqe_datagram_seg`): the address
/// vector of a UD send, 48 bytes.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct DatagramSeg {
    /// `key.dc_key`, or `key.qkey.qkey` in the first 4 bytes then 4 zero
    /// bytes (`key.qkey.reserved`).
    pub key: U64,
    /// `ext << 31 | destination QP` (UD) or DCT number (DC).
    pub dqp_dct: U32,
    /// Static rate and SL / Ethernet priority.
    pub stat_rate_sl: u8,
    /// Force loopback and source LID path bits (IB).
    pub fl_mlid: u8,
    /// Remote LID (IB).
    pub rlid: U16,
    /// Reserved, zero.
    pub reserved0: [u8; 4],
    /// Remote MAC (RoCE).
    pub rmac: [u8; 6],
    /// Traffic class / ToS.
    pub tclass: u8,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// GRH present, source GID index and flow label.
    pub grh_gid_fl: U32,
    /// Remote GID (or IP address).
    pub rgid: [u8; 16],
}

impl DatagramSeg {
    /// An address vector, as `mlx5dv_set_dgram_seg` fills one. `key` is
    /// stored as one big-endian 64-bit value: a UD Q_Key goes in its upper
    /// half (see [`DatagramSeg::for_ud`]).
    #[allow(clippy::too_many_arguments)] // mirrors mlx5dv_set_dgram_seg
    pub fn new(
        key: u64,
        dqp_dct: u32,
        ext: bool,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: [u8; 6],
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: [u8; 16],
    ) -> DatagramSeg {
        DatagramSeg {
            key: U64::new(key),
            dqp_dct: U32::new((ext as u32) << 31 | dqp_dct),
            stat_rate_sl,
            fl_mlid,
            rlid: U16::new(rlid),
            reserved0: [0; 4],
            rmac,
            tclass,
            hop_limit,
            grh_gid_fl: U32::new(grh_gid_fl),
            rgid,
        }
    }

    /// This address vector aimed at `remote_qpn` with `qkey`, as rdma-core's
    /// `set_datagram_seg` finishes an AH's vector for each UD send: the
    /// extended-AV bit set, the Q_Key in the first four bytes.
    #[inline(always)]
    pub fn for_ud(mut self, remote_qpn: u32, qkey: u32) -> DatagramSeg {
        self.key = U64::new((qkey as u64) << 32);
        self.dqp_dct = U32::new(remote_qpn | EXTENDED_UD_AV);
        self
    }

    /// This address vector as an address handle's address
    /// ([`AhAddr::Vector`]), the form UD sends read it in
    /// ([`crate::SendQueue::post`]).
    pub fn ah_addr(&self) -> AhAddr {
        AhAddr::Vector(zerocopy::transmute!(*self))
    }
}

/// `struct mlx5_wqe_srq_next_seg`: the first 16 bytes of an SRQ WQE, the
/// link of the SRQ's free list.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct SrqNextSeg {
    /// Reserved, zero.
    pub rsvd0: [u8; 2],
    /// Index of the next WQE in the list.
    pub next_wqe_index: U16,
    /// WQE signature (0).
    pub signature: u8,
    /// Reserved, zero.
    pub rsvd1: [u8; 11],
}

impl SrqNextSeg {
    /// A link to WQE `next`.
    #[inline(always)]
    pub fn new(next: u16) -> SrqNextSeg {
        SrqNextSeg {
            next_wqe_index: U16::new(next),
            ..SrqNextSeg::default()
        }
    }
}

/// Byte offset of `next_wqe_index` in [`SrqNextSeg`].
pub const SRQ_NEXT_WQE_INDEX_OFFSET: usize = 2;

const _: () = {
    assert!(core::mem::size_of::<CtrlSeg>() == 16);
    assert!(core::mem::size_of::<RaddrSeg>() == 16);
    assert!(core::mem::size_of::<AtomicSeg>() == 16);
    assert!(core::mem::size_of::<DataSeg>() == 16);
    assert!(core::mem::size_of::<InlineSeg>() == 4);
    assert!(core::mem::size_of::<DatagramSeg>() == 48);
    assert!(core::mem::size_of::<SrqNextSeg>() == 16);
    assert!(core::mem::offset_of!(SrqNextSeg, next_wqe_index) == SRQ_NEXT_WQE_INDEX_OFFSET);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_bytes_by_hand() {
        let c = CtrlSeg::new(
            0x1234,
            opcode::SEND_IMM,
            0,
            0xabcdef,
            0x0a,
            3,
            0,
            0xdead_beef,
        );
        assert_eq!(
            c.as_bytes(),
            &[
                0x00, 0x12, 0x34, 0x0b, 0xab, 0xcd, 0xef, 0x03, 0, 0, 0, 0x0a, 0xde, 0xad, 0xbe,
                0xef
            ]
        );
    }

    #[test]
    fn inline_octowords() {
        assert_eq!(InlineSeg::octowords(0), 0);
        assert_eq!(InlineSeg::octowords(1), 1);
        assert_eq!(InlineSeg::octowords(12), 1);
        assert_eq!(InlineSeg::octowords(13), 2);
        assert_eq!(InlineSeg::octowords(28), 2);
        assert_eq!(InlineSeg::octowords(29), 3);
    }

    #[test]
    fn end_and_ud() {
        assert_eq!(
            DataSeg::END.as_bytes(),
            &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        let av = DatagramSeg::default().for_ud(0x12, 0x1111_2222);
        assert_eq!(
            &av.as_bytes()[..12],
            &[0x11, 0x11, 0x22, 0x22, 0, 0, 0, 0, 0x80, 0, 0, 0x12]
        );
    }
}

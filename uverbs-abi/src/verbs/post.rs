//! Posting work requests through the kernel: POST_SEND, POST_RECV,
//! POST_SRQ_RECV, with `struct ib_uverbs_send_wr`, `struct ib_uverbs_recv_wr`
//! and `struct ib_uverbs_sge`; the work request opcodes and send flags.
//!
//! Each post command's core request is followed by `wr_count` work
//! requests of `wqe_size` bytes each, then `sge_count` SGEs; the WRs take
//! their SGEs from that list in order. rxe uses POST_SEND with
//! `wr_count == 0` as its send doorbell.

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_enum, abi_flags, abi_layout, Registry};
use crate::verbs::KERNEL_ONLY;

/// `struct ib_uverbs_sge` of `ib_user_verbs.h`: one scatter/gather entry.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsSge {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u32,
    /// `lkey`.
    pub lkey: u32,
}

/// `wr.rdma` of `struct ib_uverbs_send_wr`: RDMA read and write.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsSendWrRdma {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `rkey`.
    pub rkey: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `wr.atomic` of `struct ib_uverbs_send_wr`: compare-and-swap and
/// fetch-and-add.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsSendWrAtomic {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `compare_add`.
    pub compare_add: u64,
    /// `swap`.
    pub swap: u64,
    /// `rkey`.
    pub rkey: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `wr.ud` of `struct ib_uverbs_send_wr`: UD sends.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsSendWrUd {
    /// `ah`: an AH handle.
    pub ah: u32,
    /// `remote_qpn`.
    pub remote_qpn: u32,
    /// `remote_qkey`.
    pub remote_qkey: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// The C union `wr` of `struct ib_uverbs_send_wr` (32 bytes): one of
/// [`IbUverbsSendWrRdma`], [`IbUverbsSendWrAtomic`], [`IbUverbsSendWrUd`]
/// at offset 0, as bytes. The constructors zero what the variant does not
/// cover.
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsSendWrWr {
    /// The union's bytes.
    pub raw: [u8; 32],
}

impl IbUverbsSendWrWr {
    fn from_prefix(bytes: &[u8]) -> Self {
        let mut raw = [0u8; 32];
        raw[..bytes.len()].copy_from_slice(bytes);
        IbUverbsSendWrWr { raw }
    }

    /// The union holding `wr.rdma`.
    pub fn from_rdma(v: IbUverbsSendWrRdma) -> Self {
        Self::from_prefix(v.as_bytes())
    }

    /// The union holding `wr.atomic`.
    pub fn from_atomic(v: IbUverbsSendWrAtomic) -> Self {
        Self::from_prefix(v.as_bytes())
    }

    /// The union holding `wr.ud`.
    pub fn from_ud(v: IbUverbsSendWrUd) -> Self {
        Self::from_prefix(v.as_bytes())
    }

    /// `wr.rdma`.
    pub fn rdma(&self) -> IbUverbsSendWrRdma {
        // 32 bytes always hold it: the fallback is never taken.
        IbUverbsSendWrRdma::read_from_prefix(&self.raw)
            .map_or_else(|_| FromZeros::new_zeroed(), |(v, _)| v)
    }

    /// `wr.atomic`.
    pub fn atomic(&self) -> IbUverbsSendWrAtomic {
        zerocopy::transmute!(self.raw)
    }

    /// `wr.ud`.
    pub fn ud(&self) -> IbUverbsSendWrUd {
        // 32 bytes always hold it: the fallback is never taken.
        IbUverbsSendWrUd::read_from_prefix(&self.raw)
            .map_or_else(|_| FromZeros::new_zeroed(), |(v, _)| v)
    }
}

/// `struct ib_uverbs_send_wr` of `ib_user_verbs.h` (56 bytes).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsSendWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `num_sge`.
    pub num_sge: u32,
    /// `opcode`: an [`IbUverbsWrOpcode`].
    pub opcode: u32,
    /// `send_flags`: [`IbSendFlags`].
    pub send_flags: u32,
    /// `ex`: the C union of `__be32 imm_data` and `__u32 invalidate_rkey`,
    /// as stored (write `imm.to_be()` for an immediate).
    pub ex: u32,
    /// `wr`.
    pub wr: IbUverbsSendWrWr,
}

/// `struct ib_uverbs_post_send` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_POST_SEND`), without its flexible `send_wr[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPostSend {
    /// `response`.
    pub response: u64,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `wr_count`.
    pub wr_count: u32,
    /// `sge_count`.
    pub sge_count: u32,
    /// `wqe_size`: the stride of the WRs that follow, at least
    /// `size_of::<IbUverbsSendWr>()`.
    pub wqe_size: u32,
}

/// `struct ib_uverbs_post_send_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPostSendResp {
    /// `bad_wr`: the index of the first WR not posted, on failure.
    pub bad_wr: u32,
}

/// `struct ib_uverbs_recv_wr` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsRecvWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `num_sge`.
    pub num_sge: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_post_recv` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_POST_RECV`), without its flexible `recv_wr[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPostRecv {
    /// `response`.
    pub response: u64,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `wr_count`.
    pub wr_count: u32,
    /// `sge_count`.
    pub sge_count: u32,
    /// `wqe_size`: at least `size_of::<IbUverbsRecvWr>()`.
    pub wqe_size: u32,
}

/// `struct ib_uverbs_post_recv_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPostRecvResp {
    /// `bad_wr`.
    pub bad_wr: u32,
}

/// `struct ib_uverbs_post_srq_recv` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_POST_SRQ_RECV`), without its flexible `recv[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPostSrqRecv {
    /// `response`.
    pub response: u64,
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `wr_count`.
    pub wr_count: u32,
    /// `sge_count`.
    pub sge_count: u32,
    /// `wqe_size`.
    pub wqe_size: u32,
}

/// `struct ib_uverbs_post_srq_recv_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPostSrqRecvResp {
    /// `bad_wr`.
    pub bad_wr: u32,
}

/// The length of the work requests and SGEs that follow a post command's
/// core request: `wr_count * wqe_size + sge_count * 16`, or `None` on
/// overflow.
pub fn post_tail_len(wr_count: u32, wqe_size: u32, sge_count: u32) -> Option<usize> {
    let wrs = usize::try_from(wr_count)
        .ok()?
        .checked_mul(usize::try_from(wqe_size).ok()?)?;
    let sges = usize::try_from(sge_count)
        .ok()?
        .checked_mul(core::mem::size_of::<IbUverbsSge>())?;
    wrs.checked_add(sges)
}

abi_enum! {
    /// `enum ib_uverbs_wr_opcode` of `ib_user_verbs.h`: `opcode` of
    /// [`IbUverbsSendWr`] (and of rxe's send WQEs).
    pub struct IbUverbsWrOpcode(u32);
    /// RDMA write.
    RDMA_WRITE = 0 => "IB_UVERBS_WR_RDMA_WRITE";
    /// RDMA write with immediate.
    RDMA_WRITE_WITH_IMM = 1 => "IB_UVERBS_WR_RDMA_WRITE_WITH_IMM";
    /// Send.
    SEND = 2 => "IB_UVERBS_WR_SEND";
    /// Send with immediate.
    SEND_WITH_IMM = 3 => "IB_UVERBS_WR_SEND_WITH_IMM";
    /// RDMA read.
    RDMA_READ = 4 => "IB_UVERBS_WR_RDMA_READ";
    /// Atomic compare and swap.
    ATOMIC_CMP_AND_SWP = 5 => "IB_UVERBS_WR_ATOMIC_CMP_AND_SWP";
    /// Atomic fetch and add.
    ATOMIC_FETCH_AND_ADD = 6 => "IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD";
    /// Local invalidate.
    LOCAL_INV = 7 => "IB_UVERBS_WR_LOCAL_INV";
    /// Memory window bind.
    BIND_MW = 8 => "IB_UVERBS_WR_BIND_MW";
    /// Send with invalidate.
    SEND_WITH_INV = 9 => "IB_UVERBS_WR_SEND_WITH_INV";
    /// TCP segmentation offload.
    TSO = 10 => "IB_UVERBS_WR_TSO";
    /// RDMA read with invalidate.
    RDMA_READ_WITH_INV = 11 => "IB_UVERBS_WR_RDMA_READ_WITH_INV";
    /// Masked atomic compare and swap.
    MASKED_ATOMIC_CMP_AND_SWP = 12 => "IB_UVERBS_WR_MASKED_ATOMIC_CMP_AND_SWP";
    /// Masked atomic fetch and add.
    MASKED_ATOMIC_FETCH_AND_ADD = 13 => "IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD";
    /// Flush.
    FLUSH = 14 => "IB_UVERBS_WR_FLUSH" newer "added in v6.2 (RDMA FLUSH)";
    /// Atomic write.
    ATOMIC_WRITE = 15 => "IB_UVERBS_WR_ATOMIC_WRITE" ibv "IBV_WR_ATOMIC_WRITE"
        newer "added in v6.2 (RDMA ATOMIC WRITE)";
}

abi_flags! {
    /// `enum ib_send_flags` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `send_flags` of [`IbUverbsSendWr`] and of rxe's send WQEs.
    pub struct IbSendFlags: u32;
    /// Wait for earlier RDMA reads and atomics.
    FENCE = 1 << 0 => "IB_SEND_FENCE" ibv "IBV_SEND_FENCE" newer KERNEL_ONLY;
    /// Generate a completion.
    SIGNALED = 1 << 1 => "IB_SEND_SIGNALED" ibv "IBV_SEND_SIGNALED" newer KERNEL_ONLY;
    /// Set the solicited event bit.
    SOLICITED = 1 << 2 => "IB_SEND_SOLICITED" ibv "IBV_SEND_SOLICITED" newer KERNEL_ONLY;
    /// The data is inline in the WQE.
    INLINE = 1 << 3 => "IB_SEND_INLINE" ibv "IBV_SEND_INLINE" newer KERNEL_ONLY;
    /// Offload the IP checksum.
    IP_CSUM = 1 << 4 => "IB_SEND_IP_CSUM" ibv "IBV_SEND_IP_CSUM" newer KERNEL_ONLY;
}

/// The C type of the union `wr` (and its members) of
/// `struct ib_uverbs_send_wr`, for the layout test.
macro_rules! send_wr_wr {
    ($($member:literal)?) => {
        concat!("__typeof__(((struct ib_uverbs_send_wr *)0)->wr", $(".", $member,)? ")")
    };
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsSge => "struct ib_uverbs_sge" {
            addr => "addr", length => "length", lkey => "lkey",
        }),
        abi_layout!(IbUverbsSendWrRdma => send_wr_wr!("rdma") => {
            remote_addr => "remote_addr", rkey => "rkey", reserved => "reserved",
        }),
        abi_layout!(IbUverbsSendWrAtomic => send_wr_wr!("atomic") => {
            remote_addr => "remote_addr", compare_add => "compare_add", swap => "swap",
            rkey => "rkey", reserved => "reserved",
        }),
        abi_layout!(IbUverbsSendWrUd => send_wr_wr!("ud") => {
            ah => "ah", remote_qpn => "remote_qpn", remote_qkey => "remote_qkey",
            reserved => "reserved",
        }),
        abi_layout!(IbUverbsSendWrWr => send_wr_wr!() => {
            raw => "rdma", raw => "atomic", raw => "ud",
            raw + 4 => "ud.remote_qpn", raw + 8 => "rdma.rkey", raw + 24 => "atomic.rkey",
        }),
        crate::c_layout!(IbUverbsSendWr => "struct ib_uverbs_send_wr" {
            wr_id => "wr_id", num_sge => "num_sge", opcode => "opcode",
            send_flags => "send_flags", ex => "ex", ex => "ex.imm_data",
            ex => "ex.invalidate_rkey", wr => "wr", wr => "wr.rdma.remote_addr",
            wr => "wr.atomic.remote_addr", wr => "wr.ud.ah",
        }),
        crate::c_layout!(IbUverbsPostSend => "struct ib_uverbs_post_send" {
            response => "response", qp_handle => "qp_handle", wr_count => "wr_count",
            sge_count => "sge_count", wqe_size => "wqe_size",
        }),
        crate::c_layout!(IbUverbsPostSendResp => "struct ib_uverbs_post_send_resp" {
            bad_wr => "bad_wr",
        }),
        crate::c_layout!(IbUverbsRecvWr => "struct ib_uverbs_recv_wr" {
            wr_id => "wr_id", num_sge => "num_sge", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsPostRecv => "struct ib_uverbs_post_recv" {
            response => "response", qp_handle => "qp_handle", wr_count => "wr_count",
            sge_count => "sge_count", wqe_size => "wqe_size",
        }),
        crate::c_layout!(IbUverbsPostRecvResp => "struct ib_uverbs_post_recv_resp" {
            bad_wr => "bad_wr",
        }),
        crate::c_layout!(IbUverbsPostSrqRecv => "struct ib_uverbs_post_srq_recv" {
            response => "response", srq_handle => "srq_handle", wr_count => "wr_count",
            sge_count => "sge_count", wqe_size => "wqe_size",
        }),
        crate::c_layout!(IbUverbsPostSrqRecvResp => "struct ib_uverbs_post_srq_recv_resp" {
            bad_wr => "bad_wr",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    IbUverbsWrOpcode::register(r);
    IbSendFlags::register(r);
}

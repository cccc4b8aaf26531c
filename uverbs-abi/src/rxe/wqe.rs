//! rxe work-queue entries: `struct rxe_send_wr`, `rxe_sge`, `rxe_dma_info`,
//! `rxe_send_wqe` and `rxe_recv_wqe` of `rdma_user_rxe.h`, and the byte
//! offsets of their fields for code that writes them into shared rings.

use core::mem::{align_of, offset_of, size_of};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::offsets;
use super::RxeAv;
use crate::layout::{NewerThanHeaders, StructLayout};

/// The size of the `wr` union of `struct rxe_send_wr` (its largest member is
/// `ud`).
pub const RXE_SEND_WR_UNION_LEN: usize = 120;

/// `struct rxe_send_wr` of `rdma_user_rxe.h`: the work request part of a
/// send WQE.
///
/// The C struct has two unions. `ex` (`imm_data` / `invalidate_rkey`) is one
/// `u32`. `wr` is kept as its raw 120 bytes; read and write it through the
/// typed members with [`rdma`](Self::rdma)/[`set_rdma`](Self::set_rdma) and
/// the like. Opcodes and send flags are the `IB_UVERBS_WR_*` /
/// `IB_UVERBS_SEND_*` values of `ib_user_verbs.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeSendWr {
    /// `wr_id`.
    pub wr_id: u64,
    /// `reserved`.
    pub reserved: u32,
    /// `opcode`: an `IB_UVERBS_WR_*` value.
    pub opcode: u32,
    /// `send_flags`: `IB_UVERBS_SEND_*` bits.
    pub send_flags: u32,
    /// `ex`: `ex.imm_data` (`__be32`: the immediate's bytes in network order,
    /// stored as they are) or `ex.invalidate_rkey`.
    pub ex: u32,
    /// `wr`: the opcode-specific union, as raw bytes (8-aligned).
    pub wr: [u64; RXE_SEND_WR_UNION_LEN / 8],
}

/// `wr.rdma` of `struct rxe_send_wr`: RDMA READ / WRITE targets.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeSendWrRdma {
    /// `remote_addr`.
    pub remote_addr: u64,
    /// `rkey`.
    pub rkey: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `wr.atomic` of `struct rxe_send_wr`: compare-and-swap / fetch-and-add.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeSendWrAtomic {
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

/// `wr.ud` of `struct rxe_send_wr`: the UD destination.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeSendWrUd {
    /// `remote_qpn`.
    pub remote_qpn: u32,
    /// `remote_qkey`.
    pub remote_qkey: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `reserved`.
    pub reserved: u16,
    /// `ah_num`: from [`RxeCreateAhResp`](super::RxeCreateAhResp); when
    /// non-zero the kernel ignores `av`.
    pub ah_num: u32,
    /// `pad`.
    pub pad: [u32; 4],
    /// `av`: the address vector, for kernels without `ah_num`.
    pub av: RxeAv,
}

/// `wr.mw` of `struct rxe_send_wr`: memory window bind.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeSendWrMw {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u64,
    /// `mr_lkey`.
    pub mr_lkey: u32,
    /// `mw_rkey`.
    pub mw_rkey: u32,
    /// `rkey`.
    pub rkey: u32,
    /// `access`.
    pub access: u32,
}

const _: () = {
    assert!(size_of::<RxeSendWrUd>() == RXE_SEND_WR_UNION_LEN);
    assert!(size_of::<RxeSendWrRdma>() <= RXE_SEND_WR_UNION_LEN);
    assert!(size_of::<RxeSendWrAtomic>() <= RXE_SEND_WR_UNION_LEN);
    assert!(size_of::<RxeSendWrMw>() <= RXE_SEND_WR_UNION_LEN);
};

impl RxeSendWr {
    fn member<T: FromBytes>(&self) -> T {
        // Every member fits the union (asserted above), so this never falls
        // back to zeroes.
        T::read_from_prefix(self.wr.as_bytes()).map_or_else(|_| T::new_zeroed(), |(v, _)| v)
    }

    fn set_member<T: IntoBytes + Immutable>(&mut self, m: &T) {
        self.wr = [0; RXE_SEND_WR_UNION_LEN / 8];
        // Fits: asserted above.
        let _fits = m.write_to_prefix(self.wr.as_mut_bytes());
    }

    /// `wr.rdma`.
    pub fn rdma(&self) -> RxeSendWrRdma {
        self.member()
    }
    /// Sets `wr.rdma` (the rest of the union is zeroed).
    pub fn set_rdma(&mut self, m: &RxeSendWrRdma) {
        self.set_member(m)
    }
    /// `wr.atomic`.
    pub fn atomic(&self) -> RxeSendWrAtomic {
        self.member()
    }
    /// Sets `wr.atomic` (the rest of the union is zeroed).
    pub fn set_atomic(&mut self, m: &RxeSendWrAtomic) {
        self.set_member(m)
    }
    /// `wr.ud`.
    pub fn ud(&self) -> RxeSendWrUd {
        self.member()
    }
    /// Sets `wr.ud`.
    pub fn set_ud(&mut self, m: &RxeSendWrUd) {
        self.set_member(m)
    }
    /// `wr.mw`.
    pub fn mw(&self) -> RxeSendWrMw {
        self.member()
    }
    /// Sets `wr.mw` (the rest of the union is zeroed).
    pub fn set_mw(&mut self, m: &RxeSendWrMw) {
        self.set_member(m)
    }
}

/// `struct rxe_sge` of `rdma_user_rxe.h`: one scatter/gather element.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct RxeSge {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u32,
    /// `lkey`.
    pub lkey: u32,
}

/// `struct rxe_dma_info` of `rdma_user_rxe.h`, without its flexible union
/// (`inline_data[]` bytes or `sge[]` [`RxeSge`]s), which follows at
/// [`offsets::dma::PAYLOAD`]. 8-aligned like C, because of `sge[]`.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeDmaInfo {
    /// `length`: total bytes of the request.
    pub length: u32,
    /// `resid`: bytes still to transfer (set to `length` when posting).
    pub resid: u32,
    /// `cur_sge`: 0 when posting.
    pub cur_sge: u32,
    /// `num_sge`: SGEs that follow (0 for inline data).
    pub num_sge: u32,
    /// `sge_offset`: 0 when posting.
    pub sge_offset: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct rxe_send_wqe` of `rdma_user_rxe.h`, without the SGEs or inline
/// bytes that follow `dma` in the slot.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeSendWqe {
    /// `wr`.
    pub wr: RxeSendWr,
    /// `status`: an `IB_UVERBS_WC_*` status, kernel-owned.
    pub status: u32,
    /// `state`: an [`RxeWqeState`]; user space posts with `POSTED` (0).
    pub state: u32,
    /// `iova`: the remote address for RDMA and atomics.
    pub iova: u64,
    /// `mask`: kernel-owned.
    pub mask: u32,
    /// `first_psn`: kernel-owned.
    pub first_psn: u32,
    /// `last_psn`: kernel-owned.
    pub last_psn: u32,
    /// `ack_length`: kernel-owned.
    pub ack_length: u32,
    /// `ssn`: the send sequence number the provider assigns.
    pub ssn: u32,
    /// `has_rd_atomic`: kernel-owned.
    pub has_rd_atomic: u32,
    /// `dma`.
    pub dma: RxeDmaInfo,
}

/// `struct rxe_recv_wqe` of `rdma_user_rxe.h`, without the SGEs that follow.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeRecvWqe {
    /// `wr_id`.
    pub wr_id: u64,
    /// `reserved`.
    pub reserved: u32,
    /// `padding`.
    pub padding: u32,
    /// `dma`.
    pub dma: RxeDmaInfo,
}

/// `enum wqe_state` of the kernel's `drivers/infiniband/sw/rxe/rxe_verbs.h`
/// (not UAPI): the `state` of an [`RxeSendWqe`].
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeWqeState(pub u32);

impl RxeWqeState {
    /// `wqe_state_posted`: what user space writes.
    pub const POSTED: RxeWqeState = RxeWqeState(0);
    /// `wqe_state_processing`.
    pub const PROCESSING: RxeWqeState = RxeWqeState(1);
    /// `wqe_state_pending`.
    pub const PENDING: RxeWqeState = RxeWqeState(2);
    /// `wqe_state_done`.
    pub const DONE: RxeWqeState = RxeWqeState(3);
    /// `wqe_state_error`.
    pub const ERROR: RxeWqeState = RxeWqeState(4);

    /// The C enumerator, or `None` for a value this crate does not know.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "wqe_state_posted",
            1 => "wqe_state_processing",
            2 => "wqe_state_pending",
            3 => "wqe_state_done",
            4 => "wqe_state_error",
            _ => return None,
        })
    }
}

impl core::fmt::Debug for RxeWqeState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "RxeWqeState({})", self.0),
        }
    }
}

macro_rules! member_layout {
    ($ty:ident, $member:literal { $($f:ident),* $(,)? }) => {
        StructLayout {
            rust: stringify!($ty),
            c: concat!("__typeof__(((struct rxe_send_wr *)0)->wr.", $member, ")"),
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: &[$((stringify!($f), offset_of!($ty, $f))),*],
        }
    };
}

pub(super) fn layouts() -> Vec<StructLayout> {
    use offsets::{dma, send_wqe as s};
    vec![
        StructLayout {
            rust: "RxeSendWr",
            c: "struct rxe_send_wr",
            size: size_of::<RxeSendWr>(),
            align: align_of::<RxeSendWr>(),
            fields: &[
                ("wr_id", offset_of!(RxeSendWr, wr_id)),
                ("reserved", offset_of!(RxeSendWr, reserved)),
                ("opcode", offset_of!(RxeSendWr, opcode)),
                ("send_flags", offset_of!(RxeSendWr, send_flags)),
                ("ex.imm_data", offset_of!(RxeSendWr, ex)),
                ("ex.invalidate_rkey", offset_of!(RxeSendWr, ex)),
                ("wr", offset_of!(RxeSendWr, wr)),
                ("wr.rdma", offset_of!(RxeSendWr, wr)),
                ("wr.atomic", offset_of!(RxeSendWr, wr)),
                ("wr.ud", offset_of!(RxeSendWr, wr)),
                ("wr.mw", offset_of!(RxeSendWr, wr)),
            ],
        },
        member_layout!(RxeSendWrRdma, "rdma" { remote_addr, rkey, reserved }),
        member_layout!(RxeSendWrAtomic, "atomic" { remote_addr, compare_add, swap, rkey, reserved }),
        member_layout!(RxeSendWrUd, "ud" {
            remote_qpn, remote_qkey, pkey_index, reserved, ah_num, pad, av
        }),
        member_layout!(RxeSendWrMw, "mw" { addr, length, mr_lkey, mw_rkey, rkey, access }),
        crate::c_layout!(RxeSge => "struct rxe_sge" {
            addr => "addr",
            length => "length",
            lkey => "lkey",
        }),
        StructLayout {
            rust: "RxeDmaInfo",
            c: "struct rxe_dma_info",
            size: size_of::<RxeDmaInfo>(),
            align: align_of::<RxeDmaInfo>(),
            fields: &[
                ("length", dma::LENGTH),
                ("resid", dma::RESID),
                ("cur_sge", dma::CUR_SGE),
                ("num_sge", dma::NUM_SGE),
                ("sge_offset", dma::SGE_OFFSET),
                ("reserved", dma::RESERVED),
                ("inline_data", dma::PAYLOAD),
                ("sge", dma::PAYLOAD),
            ],
        },
        StructLayout {
            rust: "RxeSendWqe",
            c: "struct rxe_send_wqe",
            size: size_of::<RxeSendWqe>(),
            align: align_of::<RxeSendWqe>(),
            fields: &[
                ("wr", offset_of!(RxeSendWqe, wr)),
                ("wr.wr_id", s::WR_ID),
                ("wr.opcode", s::OPCODE),
                ("wr.send_flags", s::SEND_FLAGS),
                ("wr.ex.imm_data", s::EX),
                ("wr.wr", s::WR_UNION),
                ("wr.wr.rdma.remote_addr", s::RDMA_REMOTE_ADDR),
                ("wr.wr.rdma.rkey", s::RDMA_RKEY),
                ("wr.wr.atomic.remote_addr", s::ATOMIC_REMOTE_ADDR),
                ("wr.wr.atomic.compare_add", s::ATOMIC_COMPARE_ADD),
                ("wr.wr.atomic.swap", s::ATOMIC_SWAP),
                ("wr.wr.atomic.rkey", s::ATOMIC_RKEY),
                ("wr.wr.ud.remote_qpn", s::UD_REMOTE_QPN),
                ("wr.wr.ud.remote_qkey", s::UD_REMOTE_QKEY),
                ("wr.wr.ud.pkey_index", s::UD_PKEY_INDEX),
                ("wr.wr.ud.ah_num", s::UD_AH_NUM),
                ("wr.wr.ud.av", s::UD_AV),
                ("wr.wr.mw.addr", s::MW_ADDR),
                ("wr.wr.mw.length", s::MW_LENGTH),
                ("wr.wr.mw.mr_lkey", s::MW_MR_LKEY),
                ("wr.wr.mw.mw_rkey", s::MW_MW_RKEY),
                ("wr.wr.mw.rkey", s::MW_RKEY),
                ("wr.wr.mw.access", s::MW_ACCESS),
                ("status", s::STATUS),
                ("state", s::STATE),
                ("iova", s::IOVA),
                ("mask", s::MASK),
                ("first_psn", offset_of!(RxeSendWqe, first_psn)),
                ("last_psn", offset_of!(RxeSendWqe, last_psn)),
                ("ack_length", offset_of!(RxeSendWqe, ack_length)),
                ("ssn", s::SSN),
                ("has_rd_atomic", offset_of!(RxeSendWqe, has_rd_atomic)),
                ("dma", s::DMA),
                ("dma.length", s::DMA_LENGTH),
                ("dma.resid", s::DMA_RESID),
                ("dma.cur_sge", s::DMA_CUR_SGE),
                ("dma.num_sge", s::DMA_NUM_SGE),
                ("dma.sge_offset", s::DMA_SGE_OFFSET),
                ("dma.sge", s::PAYLOAD),
                ("dma.inline_data", s::PAYLOAD),
            ],
        },
        StructLayout {
            rust: "RxeRecvWqe",
            c: "struct rxe_recv_wqe",
            size: size_of::<RxeRecvWqe>(),
            align: align_of::<RxeRecvWqe>(),
            fields: &[
                ("wr_id", offsets::recv_wqe::WR_ID),
                ("reserved", offset_of!(RxeRecvWqe, reserved)),
                ("padding", offset_of!(RxeRecvWqe, padding)),
                ("dma", offsets::recv_wqe::DMA),
                ("dma.length", offsets::recv_wqe::DMA_LENGTH),
                ("dma.resid", offsets::recv_wqe::DMA_RESID),
                ("dma.cur_sge", offsets::recv_wqe::DMA_CUR_SGE),
                ("dma.num_sge", offsets::recv_wqe::DMA_NUM_SGE),
                ("dma.sge_offset", offsets::recv_wqe::DMA_SGE_OFFSET),
                ("dma.sge", offsets::recv_wqe::PAYLOAD),
            ],
        },
    ]
}

pub(super) fn newer_than_headers() -> Vec<NewerThanHeaders> {
    const WHY: &str = "not in UAPI: drivers/infiniband/sw/rxe/rxe_verbs.h (enum wqe_state)";
    [
        "wqe_state_posted",
        "wqe_state_processing",
        "wqe_state_pending",
        "wqe_state_done",
        "wqe_state_error",
    ]
    .into_iter()
    .map(|c| NewerThanHeaders { c, reason: WHY })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn offsets_match_the_kernel_abi() {
        use offsets::send_wqe as s;
        assert_eq!(size_of::<RxeSendWr>(), 144);
        assert_eq!(s::WR_UNION, 24);
        assert_eq!(s::UD_AH_NUM, 36);
        assert_eq!(s::UD_AV, 56);
        assert_eq!(s::ATOMIC_SWAP, 40);
        assert_eq!(s::STATUS, 144);
        assert_eq!(s::DMA, 184);
        assert_eq!(s::PAYLOAD, 208);
        assert_eq!(size_of::<RxeSendWqe>(), 208);
        assert_eq!(offsets::recv_wqe::PAYLOAD, 40);
        assert_eq!(size_of::<RxeRecvWqe>(), 40);
        assert_eq!(offsets::sge::SIZE, 16);
    }

    #[test]
    fn union_members_land_at_their_offsets() {
        let mut wr = RxeSendWr::new_zeroed();
        wr.set_atomic(&RxeSendWrAtomic {
            remote_addr: 0x1122,
            compare_add: 7,
            swap: 9,
            rkey: 0xabcd,
            reserved: 0,
        });
        let b = wr.as_bytes();
        let at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        let base = offset_of!(RxeSendWr, wr);
        assert_eq!(at(base), 0x1122);
        assert_eq!(at(base + 16), 9);
        assert_eq!(wr.atomic().rkey, 0xabcd);
        wr.set_rdma(&RxeSendWrRdma {
            remote_addr: 5,
            rkey: 6,
            reserved: 0,
        });
        assert_eq!(wr.atomic().swap, 0, "setting a member clears the rest");
        assert_eq!(wr.rdma().rkey, 6);
        let mut ud = RxeSendWrUd::new_zeroed();
        ud.ah_num = 3;
        wr.set_ud(&ud);
        assert_eq!(wr.ud().ah_num, 3);
        assert_eq!(RxeWqeState(3), RxeWqeState::DONE);
        assert_eq!(format!("{:?}", RxeWqeState::POSTED), "wqe_state_posted");
    }
}

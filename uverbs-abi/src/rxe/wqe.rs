//! rxe work-queue entries: `struct rxe_send_wr`, `rxe_sge`, `rxe_dma_info`,
//! `rxe_send_wqe` and `rxe_recv_wqe` of `rdma_user_rxe.h`, and the byte
//! offsets of their fields for code that writes them into shared rings.

use core::mem::size_of;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::RxeAv;

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
/// [`crate::rxe::offsets::dma::PAYLOAD`]. 8-aligned like C, because of `sge[]`.
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

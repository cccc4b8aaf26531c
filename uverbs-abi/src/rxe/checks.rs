//! The rxe WQE types checked against `rdma_user_rxe.h`: their layouts for
//! the header-comparison test, and tests that the offsets the provider
//! writes at are the kernel's. Apart from the types (`wqe`), so that the
//! offsets (`offsets`, computed from the types) and these checks of them
//! do not import each other.

use super::offsets;
use super::wqe::*;
use crate::layout::{NewerThanHeaders, StructLayout};
use core::mem::{align_of, offset_of, size_of};

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
    use zerocopy::{FromZeros, IntoBytes};

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

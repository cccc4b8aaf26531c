//! `mlx5-abi.h`, `mlx5_user_ioctl_cmds.h` and `mlx5_user_ioctl_verbs.h`:
//! the mlx5 driver's user ABI (ConnectX-4 and later).
//!
//! mlx5 hands user space its hardware queues: the provider allocates CQ and
//! QP buffers and doorbell records itself and passes their addresses in the
//! udata structs ([`Mlx5IbCreateCq`], [`Mlx5IbCreateQp`], ...); it rings
//! doorbells through UAR pages mapped with the offsets of
//! [`mlx5_mmap_offset`]. Hardware WQE and CQE formats are not kernel ABI and
//! live with the provider.
//!
//! The driver-namespace ioctl ids (objects, methods and attributes that are
//! `1 << UVERBS_ID_NS_SHIFT` and up) are in [`ioctl`].

use crate::cm::macros::{c_flags, named_values};
use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};

pub mod ioctl;
mod queues;
mod ucontext;

pub use queues::*;
pub use ucontext::*;

/// `MLX5_IB_UVERBS_ABI_VERSION`: the driver ABI version mlx5 reports.
pub const MLX5_IB_UVERBS_ABI_VERSION: u32 = 1;

c_flags! {
    /// `flags` of [`Mlx5IbCreateQp`] (`MLX5_QP_FLAG_*`).
    Mlx5QpFlags: u32, prefix "MLX5_QP_FLAG_" {
        /// `MLX5_QP_FLAG_SIGNATURE`.
        SIGNATURE = 1 << 0;
        /// `MLX5_QP_FLAG_SCATTER_CQE`: small receives land in the CQE.
        SCATTER_CQE = 1 << 1;
        /// `MLX5_QP_FLAG_TUNNEL_OFFLOADS`.
        TUNNEL_OFFLOADS = 1 << 2;
        /// `MLX5_QP_FLAG_BFREG_INDEX`: `bfreg_index` is a dynamic bfreg.
        BFREG_INDEX = 1 << 3;
        /// `MLX5_QP_FLAG_TYPE_DCT`.
        TYPE_DCT = 1 << 4;
        /// `MLX5_QP_FLAG_TYPE_DCI`.
        TYPE_DCI = 1 << 5;
        /// `MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC`.
        TIR_ALLOW_SELF_LB_UC = 1 << 6;
        /// `MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC`.
        TIR_ALLOW_SELF_LB_MC = 1 << 7;
        /// `MLX5_QP_FLAG_ALLOW_SCATTER_CQE`.
        ALLOW_SCATTER_CQE = 1 << 8;
        /// `MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE`.
        PACKET_BASED_CREDIT_MODE = 1 << 9;
        /// `MLX5_QP_FLAG_UAR_PAGE_INDEX`: `bfreg_index` is a UAR page index
        /// (from `MLX5_IB_METHOD_UAR_OBJ_ALLOC`).
        UAR_PAGE_INDEX = 1 << 10;
        /// `MLX5_QP_FLAG_DCI_STREAM`.
        DCI_STREAM = 1 << 11;
    }
}

/// `MLX5_SRQ_FLAG_SIGNATURE`: `flags` of [`Mlx5IbCreateSrq`].
pub const MLX5_SRQ_FLAG_SIGNATURE: u32 = 1;
/// `MLX5_WQ_FLAG_SIGNATURE`: `flags` of [`Mlx5IbCreateWq`].
pub const MLX5_WQ_FLAG_SIGNATURE: u32 = 1;
/// `MLX5_IB_ALLOC_UCTX_DEVX`: `flags` of [`Mlx5IbAllocUcontextReqV2`].
pub const MLX5_IB_ALLOC_UCTX_DEVX: u32 = 1;
/// `MLX5_IB_CREATE_WQ_STRIDING_RQ`: `comp_mask` of [`Mlx5IbCreateWq`].
pub const MLX5_IB_CREATE_WQ_STRIDING_RQ: u32 = 1;
/// `MLX5_IB_PP_SUPPORT_BURST`: `cap_flags` of [`Mlx5PacketPacingCaps`].
pub const MLX5_IB_PP_SUPPORT_BURST: u8 = 1;
/// `MLX5_IB_ALLOW_MPW`: multi-packet send WQEs.
pub const MLX5_IB_ALLOW_MPW: u32 = 1 << 1;
/// `MLX5_IB_SUPPORT_EMPW`: enhanced multi-packet send WQEs.
pub const MLX5_IB_SUPPORT_EMPW: u32 = 1 << 2;
/// `MLX5_RX_HASH_FUNC_TOEPLITZ`: `rx_hash_function` of RSS QPs.
pub const MLX5_RX_HASH_FUNC_TOEPLITZ: u8 = 1;
/// `MLX5_IB_CLOCK_INFO_KERNEL_UPDATING`: bit of [`Mlx5IbClockInfo::sign`].
pub const MLX5_IB_CLOCK_INFO_KERNEL_UPDATING: u32 = 1;
/// `MLX5_IB_CLOCK_INFO_V1`: bit index in `clock_info_versions`.
pub const MLX5_IB_CLOCK_INFO_V1: u32 = 0;

c_flags! {
    /// `enum mlx5_lib_caps`: `lib_caps` of [`Mlx5IbAllocUcontextReqV2`].
    Mlx5LibCaps: u64, prefix "MLX5_LIB_CAP_" {
        /// `MLX5_LIB_CAP_4K_UAR`: the library understands 4 KiB UARs.
        UAR_4K as "MLX5_LIB_CAP_4K_UAR" = 1 << 0;
        /// `MLX5_LIB_CAP_DYN_UAR`: UARs allocated on demand
        /// (`MLX5_IB_METHOD_UAR_OBJ_ALLOC`).
        DYN_UAR = 1 << 1;
    }
}

c_flags! {
    /// `enum mlx5_ib_alloc_ucontext_resp_mask`: `comp_mask` of
    /// [`Mlx5IbAllocUcontextResp`].
    Mlx5IbAllocUcontextRespMask: u32, prefix "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_" {
        /// `..._CORE_CLOCK_OFFSET`.
        CORE_CLOCK_OFFSET = 1 << 0;
        /// `..._DUMP_FILL_MKEY`.
        DUMP_FILL_MKEY = 1 << 1;
        /// `..._ECE`.
        ECE = 1 << 2;
        /// `..._SQD2RTS`.
        SQD2RTS = 1 << 3;
        /// `..._REAL_TIME_TS`.
        REAL_TIME_TS = 1 << 4;
        /// `..._MKEY_UPDATE_TAG`.
        MKEY_UPDATE_TAG = 1 << 5;
    }
}

c_flags! {
    /// `enum mlx5_user_cmds_supp_uhw`: `cmds_supp_uhw` of
    /// [`Mlx5IbAllocUcontextResp`].
    Mlx5UserCmdsSuppUhw: u8, prefix "MLX5_USER_CMDS_SUPP_UHW_" {
        /// `MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE`.
        QUERY_DEVICE = 1 << 0;
        /// `MLX5_USER_CMDS_SUPP_UHW_CREATE_AH`.
        CREATE_AH = 1 << 1;
    }
}

named_values! {
    /// `enum mlx5_user_inline_mode`: `eth_min_inline` of
    /// [`Mlx5IbAllocUcontextResp`], one more than the firmware value.
    Mlx5UserInlineMode(u8) prefix "MLX5_USER_INLINE_MODE_" {
        /// `MLX5_USER_INLINE_MODE_NA`: not reported.
        NA = 0;
        /// `MLX5_USER_INLINE_MODE_NONE`.
        NONE = 1;
        /// `MLX5_USER_INLINE_MODE_L2`.
        L2 = 2;
        /// `MLX5_USER_INLINE_MODE_IP`.
        IP = 3;
        /// `MLX5_USER_INLINE_MODE_TCP_UDP`.
        TCP_UDP = 4;
    }
}

c_flags! {
    /// `flow_action_flags` of [`Mlx5IbAllocUcontextResp`].
    Mlx5UserAllocUcontextFlowActionFlags: u16,
        prefix "MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_" {
        /// `..._ESP_AES_GCM`.
        ESP_AES_GCM = 1 << 0;
        /// `..._ESP_AES_GCM_REQ_METADATA`.
        ESP_AES_GCM_REQ_METADATA = 1 << 1;
        /// `..._ESP_AES_GCM_SPI_STEERING`.
        ESP_AES_GCM_SPI_STEERING = 1 << 2;
        /// `..._ESP_AES_GCM_FULL_OFFLOAD`.
        ESP_AES_GCM_FULL_OFFLOAD = 1 << 3;
        /// `..._ESP_AES_GCM_TX_IV_IS_ESN`.
        ESP_AES_GCM_TX_IV_IS_ESN = 1 << 4;
    }
}

c_flags! {
    /// `enum mlx5_ib_cqe_comp_res_format`.
    Mlx5IbCqeCompResFormat: u32, prefix "MLX5_IB_CQE_RES_FORMAT_" {
        /// `MLX5_IB_CQE_RES_FORMAT_HASH`.
        HASH = 1 << 0;
        /// `MLX5_IB_CQE_RES_FORMAT_CSUM`.
        CSUM = 1 << 1;
        /// `MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX`.
        CSUM_STRIDX = 1 << 2;
    }
}

c_flags! {
    /// `enum mlx5_ib_sw_parsing_offloads`.
    Mlx5IbSwParsingOffloads: u32, prefix "MLX5_IB_SW_PARSING_" {
        /// `MLX5_IB_SW_PARSING`.
        SW_PARSING as "MLX5_IB_SW_PARSING" = 1 << 0;
        /// `MLX5_IB_SW_PARSING_CSUM`.
        CSUM = 1 << 1;
        /// `MLX5_IB_SW_PARSING_LSO`.
        LSO = 1 << 2;
    }
}

c_flags! {
    /// `enum mlx5_ib_query_dev_resp_flags`: `flags` of
    /// [`Mlx5IbQueryDeviceResp`].
    Mlx5IbQueryDevRespFlags: u32, prefix "MLX5_IB_QUERY_DEV_RESP_" {
        /// `MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP`.
        CQE_128B_COMP as "MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP" = 1 << 0;
        /// `MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD`.
        CQE_128B_PAD as "MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD" = 1 << 1;
        /// `MLX5_IB_QUERY_DEV_RESP_PACKET_BASED_CREDIT_MODE`.
        PACKET_BASED_CREDIT_MODE = 1 << 2;
        /// `MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT`.
        SCAT2CQE_DCT as "MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT" = 1 << 3;
    }
}

c_flags! {
    /// `enum mlx5_ib_tunnel_offloads`.
    Mlx5IbTunnelOffloads: u32, prefix "MLX5_IB_TUNNELED_OFFLOADS_" {
        /// `MLX5_IB_TUNNELED_OFFLOADS_VXLAN`.
        VXLAN = 1 << 0;
        /// `MLX5_IB_TUNNELED_OFFLOADS_GRE`.
        GRE = 1 << 1;
        /// `MLX5_IB_TUNNELED_OFFLOADS_GENEVE`.
        GENEVE = 1 << 2;
        /// `MLX5_IB_TUNNELED_OFFLOADS_MPLS_GRE`.
        MPLS_GRE = 1 << 3;
        /// `MLX5_IB_TUNNELED_OFFLOADS_MPLS_UDP`.
        MPLS_UDP = 1 << 4;
    }
}

c_flags! {
    /// `enum mlx5_ib_create_cq_flags`: `flags` of [`Mlx5IbCreateCq`].
    Mlx5IbCreateCqFlags: u16, prefix "MLX5_IB_CREATE_CQ_FLAGS_" {
        /// `MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD`.
        CQE_128B_PAD = 1 << 0;
        /// `MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX`: `uar_page_index` is set.
        UAR_PAGE_INDEX = 1 << 1;
        /// `MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS`.
        REAL_TIME_TS = 1 << 2;
    }
}

c_flags! {
    /// `enum mlx5_rx_hash_fields`: `rx_hash_fields_mask` of RSS QPs.
    Mlx5RxHashFields: u64, prefix "MLX5_RX_HASH_" {
        /// `MLX5_RX_HASH_SRC_IPV4`.
        SRC_IPV4 = 1 << 0;
        /// `MLX5_RX_HASH_DST_IPV4`.
        DST_IPV4 = 1 << 1;
        /// `MLX5_RX_HASH_SRC_IPV6`.
        SRC_IPV6 = 1 << 2;
        /// `MLX5_RX_HASH_DST_IPV6`.
        DST_IPV6 = 1 << 3;
        /// `MLX5_RX_HASH_SRC_PORT_TCP`.
        SRC_PORT_TCP = 1 << 4;
        /// `MLX5_RX_HASH_DST_PORT_TCP`.
        DST_PORT_TCP = 1 << 5;
        /// `MLX5_RX_HASH_SRC_PORT_UDP`.
        SRC_PORT_UDP = 1 << 6;
        /// `MLX5_RX_HASH_DST_PORT_UDP`.
        DST_PORT_UDP = 1 << 7;
        /// `MLX5_RX_HASH_IPSEC_SPI`.
        IPSEC_SPI = 1 << 8;
        /// `MLX5_RX_HASH_INNER`.
        INNER = 1 << 31;
    }
}

c_flags! {
    /// `enum mlx5_ib_create_qp_resp_mask`: `comp_mask` of
    /// [`Mlx5IbCreateQpResp`].
    Mlx5IbCreateQpRespMask: u32, prefix "MLX5_IB_CREATE_QP_RESP_MASK_" {
        /// `MLX5_IB_CREATE_QP_RESP_MASK_TIRN`.
        TIRN = 1 << 0;
        /// `MLX5_IB_CREATE_QP_RESP_MASK_TISN`.
        TISN = 1 << 1;
        /// `MLX5_IB_CREATE_QP_RESP_MASK_RQN`.
        RQN = 1 << 2;
        /// `MLX5_IB_CREATE_QP_RESP_MASK_SQN`.
        SQN = 1 << 3;
        /// `MLX5_IB_CREATE_QP_RESP_MASK_TIR_ICM_ADDR`.
        TIR_ICM_ADDR = 1 << 4;
    }
}

named_values! {
    /// `enum mlx5_ib_mmap_cmd`: the command part of an mlx5 mmap offset
    /// (see [`mlx5_mmap_offset`]).
    Mlx5IbMmapCmd(u32) prefix "MLX5_IB_MMAP_" {
        /// `MLX5_IB_MMAP_REGULAR_PAGE`: a static UAR page, write-combining
        /// when possible.
        REGULAR_PAGE = 0;
        /// `MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES`.
        GET_CONTIGUOUS_PAGES = 1;
        /// `MLX5_IB_MMAP_WC_PAGE`: a static UAR page, write-combining or fail.
        WC_PAGE = 2;
        /// `MLX5_IB_MMAP_NC_PAGE`: a static UAR page, non-cached.
        NC_PAGE = 3;
        /// `MLX5_IB_MMAP_CORE_CLOCK`: the free-running clock (read-only).
        CORE_CLOCK = 5;
        /// `MLX5_IB_MMAP_ALLOC_WC`.
        ALLOC_WC = 6;
        /// `MLX5_IB_MMAP_CLOCK_INFO`: the [`Mlx5IbClockInfo`] page.
        CLOCK_INFO = 7;
        /// `MLX5_IB_MMAP_DEVICE_MEM`.
        DEVICE_MEM = 8;
    }
}

/// `MLX5_IB_MMAP_CMD_SHIFT`: bit position of the command in an mmap page
/// offset. Kernel-internal (`drivers/infiniband/hw/mlx5/mlx5_ib.h`).
pub const MLX5_IB_MMAP_CMD_SHIFT: u32 = 8;
/// `MLX5_IB_MMAP_CMD_MASK`: width mask of the command. Kernel-internal.
pub const MLX5_IB_MMAP_CMD_MASK: u32 = 0xff;

/// The page offset (`vm_pgoff`) that selects `cmd` with argument `index`:
/// the index's low byte in bits 0-7, the command in bits 8-15 and the
/// index's second byte in bits 16-23 (the kernel's `get_extended_index`;
/// commands other than `REGULAR_PAGE`/`WC_PAGE`/`NC_PAGE` read only the low
/// byte).
pub const fn mlx5_mmap_pgoff(cmd: Mlx5IbMmapCmd, index: u16) -> u64 {
    let index = index as u64;
    (index & 0xff)
        | (((cmd.0 & MLX5_IB_MMAP_CMD_MASK) as u64) << MLX5_IB_MMAP_CMD_SHIFT)
        | (((index >> 8) & 0xff) << 16)
}

/// The byte offset to pass to `mmap()` on the uverbs fd for `cmd` and
/// `index`: [`mlx5_mmap_pgoff`] times the system page size.
pub const fn mlx5_mmap_offset(cmd: Mlx5IbMmapCmd, index: u16, page_size: u64) -> u64 {
    mlx5_mmap_pgoff(cmd, index) * page_size
}

/// Every `#[repr(C)]` type of this module, for the header comparison test.
pub fn layouts() -> Vec<StructLayout> {
    let mut v = ucontext::layouts();
    v.extend(queues::layouts());
    v
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    fn table<T: Copy + Into<i128>>(
        t: &'static [(&'static str, T)],
    ) -> impl Iterator<Item = ConstValue> {
        t.iter().map(|&(c, v)| ConstValue { c, value: v.into() })
    }
    let mut v = vec![
        crate::c_const!(MLX5_IB_UVERBS_ABI_VERSION => "MLX5_IB_UVERBS_ABI_VERSION"),
        crate::c_const!(MLX5_SRQ_FLAG_SIGNATURE => "MLX5_SRQ_FLAG_SIGNATURE"),
        crate::c_const!(MLX5_WQ_FLAG_SIGNATURE => "MLX5_WQ_FLAG_SIGNATURE"),
        crate::c_const!(MLX5_IB_ALLOC_UCTX_DEVX => "MLX5_IB_ALLOC_UCTX_DEVX"),
        crate::c_const!(MLX5_IB_CREATE_WQ_STRIDING_RQ => "MLX5_IB_CREATE_WQ_STRIDING_RQ"),
        crate::c_const!(MLX5_IB_PP_SUPPORT_BURST => "MLX5_IB_PP_SUPPORT_BURST"),
        crate::c_const!(MLX5_IB_ALLOW_MPW => "MLX5_IB_ALLOW_MPW"),
        crate::c_const!(MLX5_IB_SUPPORT_EMPW => "MLX5_IB_SUPPORT_EMPW"),
        crate::c_const!(MLX5_RX_HASH_FUNC_TOEPLITZ => "MLX5_RX_HASH_FUNC_TOEPLITZ"),
        crate::c_const!(MLX5_IB_CLOCK_INFO_KERNEL_UPDATING => "MLX5_IB_CLOCK_INFO_KERNEL_UPDATING"),
        crate::c_const!(MLX5_IB_CLOCK_INFO_V1 => "MLX5_IB_CLOCK_INFO_V1"),
    ];
    v.extend(table(Mlx5QpFlags::C_NAMES));
    v.extend(table(Mlx5LibCaps::C_NAMES));
    v.extend(table(Mlx5IbAllocUcontextRespMask::C_NAMES));
    v.extend(table(Mlx5UserCmdsSuppUhw::C_NAMES));
    v.extend(table(Mlx5UserInlineMode::ALL));
    v.extend(table(Mlx5UserAllocUcontextFlowActionFlags::C_NAMES));
    v.extend(table(Mlx5IbCqeCompResFormat::C_NAMES));
    v.extend(table(Mlx5IbSwParsingOffloads::C_NAMES));
    v.extend(table(Mlx5IbQueryDevRespFlags::C_NAMES));
    v.extend(table(Mlx5IbTunnelOffloads::C_NAMES));
    v.extend(table(Mlx5IbCreateCqFlags::C_NAMES));
    v.extend(table(Mlx5RxHashFields::C_NAMES));
    v.extend(table(Mlx5IbCreateQpRespMask::C_NAMES));
    v.extend(table(Mlx5IbMmapCmd::ALL));
    v.extend(ioctl::consts());
    v
}

/// What this module defines that no installed UAPI header has.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    const WHY: &str = "not in UAPI: drivers/infiniband/hw/mlx5/mlx5_ib.h";
    vec![
        NewerThanHeaders {
            c: "MLX5_IB_MMAP_CMD_SHIFT",
            reason: WHY,
        },
        NewerThanHeaders {
            c: "MLX5_IB_MMAP_CMD_MASK",
            reason: WHY,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmap_offsets_encode_command_and_extended_index() {
        assert_eq!(mlx5_mmap_pgoff(Mlx5IbMmapCmd::REGULAR_PAGE, 0), 0);
        assert_eq!(mlx5_mmap_pgoff(Mlx5IbMmapCmd::NC_PAGE, 2), 0x302);
        assert_eq!(mlx5_mmap_pgoff(Mlx5IbMmapCmd::WC_PAGE, 0x1234), 0x12_02_34);
        assert_eq!(
            mlx5_mmap_offset(Mlx5IbMmapCmd::CORE_CLOCK, 0, 4096),
            0x500 * 4096
        );
        assert_eq!(
            Mlx5IbMmapCmd::CLOCK_INFO.name(),
            Some("MLX5_IB_MMAP_CLOCK_INFO")
        );
    }

    #[test]
    fn struct_sizes_match_the_kernel() {
        use core::mem::size_of;
        assert_eq!(size_of::<Mlx5IbAllocUcontextReqV2>(), 32);
        assert_eq!(size_of::<Mlx5IbAllocUcontextResp>(), 72);
        assert_eq!(size_of::<Mlx5IbCreateQp>(), 56);
        assert_eq!(size_of::<Mlx5IbCreateQpResp>(), 40);
        assert_eq!(size_of::<Mlx5IbQueryDeviceResp>(), 104);
        assert_eq!(Mlx5LibCaps::C_NAMES[0], ("MLX5_LIB_CAP_4K_UAR", 1));
    }
}

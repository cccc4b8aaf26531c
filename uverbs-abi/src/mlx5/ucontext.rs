//! `mlx5-abi.h` udata for the context and device: GET_CONTEXT
//! (`mlx5_ib_alloc_ucontext_req*`/`_resp`), ALLOC_PD and the extended
//! QUERY_DEVICE answer with its capability blocks.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;

/// `struct mlx5_ib_alloc_ucontext_req` (GET_CONTEXT udata in, v1).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbAllocUcontextReq {
    /// `total_num_bfregs`: BlueFlame registers wanted.
    pub total_num_bfregs: u32,
    /// `num_low_latency_bfregs`.
    pub num_low_latency_bfregs: u32,
}

/// `struct mlx5_ib_alloc_ucontext_req_v2` (GET_CONTEXT udata in). Older
/// kernels accept a prefix of it.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbAllocUcontextReqV2 {
    /// `total_num_bfregs`.
    pub total_num_bfregs: u32,
    /// `num_low_latency_bfregs`.
    pub num_low_latency_bfregs: u32,
    /// `flags`: `MLX5_IB_ALLOC_UCTX_*`.
    pub flags: u32,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `max_cqe_version`.
    pub max_cqe_version: u8,
    /// `reserved0`.
    pub reserved0: u8,
    /// `reserved1`.
    pub reserved1: u16,
    /// `reserved2`.
    pub reserved2: u32,
    /// `lib_caps`: [`Mlx5LibCaps`](super::Mlx5LibCaps) bits.
    pub lib_caps: u64,
}

/// `struct mlx5_ib_alloc_ucontext_resp` (GET_CONTEXT udata out). Only
/// the first `response_length` bytes are written by older kernels.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbAllocUcontextResp {
    /// `qp_tab_size`.
    pub qp_tab_size: u32,
    /// `bf_reg_size`: BlueFlame register size (two buffers of half).
    pub bf_reg_size: u32,
    /// `tot_bfregs`: static BlueFlame registers allocated.
    pub tot_bfregs: u32,
    /// `cache_line_size`.
    pub cache_line_size: u32,
    /// `max_sq_desc_sz`.
    pub max_sq_desc_sz: u16,
    /// `max_rq_desc_sz`.
    pub max_rq_desc_sz: u16,
    /// `max_send_wqebb`.
    pub max_send_wqebb: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_srq_recv_wr`.
    pub max_srq_recv_wr: u32,
    /// `num_ports`.
    pub num_ports: u16,
    /// `flow_action_flags`: `MLX5_USER_ALLOC_UCONTEXT_FLOW_ACTION_FLAGS_*`.
    pub flow_action_flags: u16,
    /// `comp_mask`: `MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_*`.
    pub comp_mask: u32,
    /// `response_length`: bytes of this struct the kernel filled.
    pub response_length: u32,
    /// `cqe_version`.
    pub cqe_version: u8,
    /// `cmds_supp_uhw`: `MLX5_USER_CMDS_SUPP_UHW_*`.
    pub cmds_supp_uhw: u8,
    /// `eth_min_inline`: `MLX5_USER_INLINE_MODE_*` (off by one: NA = 0).
    pub eth_min_inline: u8,
    /// `clock_info_versions`: bitmap of `MLX5_IB_CLOCK_INFO_V*`.
    pub clock_info_versions: u8,
    /// `hca_core_clock_offset`.
    pub hca_core_clock_offset: u64,
    /// `log_uar_size`.
    pub log_uar_size: u32,
    /// `num_uars_per_page`.
    pub num_uars_per_page: u32,
    /// `num_dyn_bfregs`.
    pub num_dyn_bfregs: u32,
    /// `dump_fill_mkey`.
    pub dump_fill_mkey: u32,
}

/// `struct mlx5_ib_alloc_pd_resp` (ALLOC_PD udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbAllocPdResp {
    /// `pdn`.
    pub pdn: u32,
}

/// `struct mlx5_ib_tso_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbTsoCaps {
    /// `max_tso`.
    pub max_tso: u32,
    /// `supported_qpts`: bit per `IB_QPT_*`.
    pub supported_qpts: u32,
}

/// `struct mlx5_ib_rss_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbRssCaps {
    /// `rx_hash_fields_mask`: `MLX5_RX_HASH_*`.
    pub rx_hash_fields_mask: u64,
    /// `rx_hash_function`: `MLX5_RX_HASH_FUNC_*`.
    pub rx_hash_function: u8,
    /// `reserved`.
    pub reserved: [u8; 7],
}

/// `struct mlx5_ib_cqe_comp_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCqeCompCaps {
    /// `max_num`.
    pub max_num: u32,
    /// `supported_format`: `MLX5_IB_CQE_RES_FORMAT_*`.
    pub supported_format: u32,
}

/// `struct mlx5_packet_pacing_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5PacketPacingCaps {
    /// `qp_rate_limit_min`.
    pub qp_rate_limit_min: u32,
    /// `qp_rate_limit_max` (kbps).
    pub qp_rate_limit_max: u32,
    /// `supported_qpts`.
    pub supported_qpts: u32,
    /// `cap_flags`: `MLX5_IB_PP_SUPPORT_*`.
    pub cap_flags: u8,
    /// `reserved`.
    pub reserved: [u8; 3],
}

/// `struct mlx5_ib_sw_parsing_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbSwParsingCaps {
    /// `sw_parsing_offloads`: `MLX5_IB_SW_PARSING*`.
    pub sw_parsing_offloads: u32,
    /// `supported_qpts`.
    pub supported_qpts: u32,
}

/// `struct mlx5_ib_striding_rq_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbStridingRqCaps {
    /// `min_single_stride_log_num_of_bytes`.
    pub min_single_stride_log_num_of_bytes: u32,
    /// `max_single_stride_log_num_of_bytes`.
    pub max_single_stride_log_num_of_bytes: u32,
    /// `min_single_wqe_log_num_of_strides`.
    pub min_single_wqe_log_num_of_strides: u32,
    /// `max_single_wqe_log_num_of_strides`.
    pub max_single_wqe_log_num_of_strides: u32,
    /// `supported_qpts`.
    pub supported_qpts: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_dci_streams_caps`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbDciStreamsCaps {
    /// `max_log_num_concurent` (sic).
    pub max_log_num_concurent: u8,
    /// `max_log_num_errored`.
    pub max_log_num_errored: u8,
}

/// `struct mlx5_ib_query_device_resp` (QUERY_DEVICE extended udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbQueryDeviceResp {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
    /// `tso_caps`.
    pub tso_caps: Mlx5IbTsoCaps,
    /// `rss_caps`.
    pub rss_caps: Mlx5IbRssCaps,
    /// `cqe_comp_caps`.
    pub cqe_comp_caps: Mlx5IbCqeCompCaps,
    /// `packet_pacing_caps`.
    pub packet_pacing_caps: Mlx5PacketPacingCaps,
    /// `mlx5_ib_support_multi_pkt_send_wqes`: `MLX5_IB_ALLOW_MPW` etc.
    pub mlx5_ib_support_multi_pkt_send_wqes: u32,
    /// `flags`: `MLX5_IB_QUERY_DEV_RESP_*`.
    pub flags: u32,
    /// `sw_parsing_caps`.
    pub sw_parsing_caps: Mlx5IbSwParsingCaps,
    /// `striding_rq_caps`.
    pub striding_rq_caps: Mlx5IbStridingRqCaps,
    /// `tunnel_offloads_caps`: `MLX5_IB_TUNNELED_OFFLOADS_*`.
    pub tunnel_offloads_caps: u32,
    /// `dci_streams_caps`.
    pub dci_streams_caps: Mlx5IbDciStreamsCaps,
    /// `reserved`.
    pub reserved: u16,
}
/// Every struct of this file, for the header comparison test.
pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(Mlx5IbAllocUcontextReq => "struct mlx5_ib_alloc_ucontext_req" {
            total_num_bfregs => "total_num_bfregs",
            num_low_latency_bfregs => "num_low_latency_bfregs",
        }),
        crate::c_layout!(Mlx5IbAllocUcontextReqV2 => "struct mlx5_ib_alloc_ucontext_req_v2" {
            total_num_bfregs => "total_num_bfregs",
            num_low_latency_bfregs => "num_low_latency_bfregs",
            flags => "flags",
            comp_mask => "comp_mask",
            max_cqe_version => "max_cqe_version",
            reserved0 => "reserved0",
            reserved1 => "reserved1",
            reserved2 => "reserved2",
            lib_caps => "lib_caps",
        }),
        crate::c_layout!(Mlx5IbAllocUcontextResp => "struct mlx5_ib_alloc_ucontext_resp" {
            qp_tab_size => "qp_tab_size",
            bf_reg_size => "bf_reg_size",
            tot_bfregs => "tot_bfregs",
            cache_line_size => "cache_line_size",
            max_sq_desc_sz => "max_sq_desc_sz",
            max_rq_desc_sz => "max_rq_desc_sz",
            max_send_wqebb => "max_send_wqebb",
            max_recv_wr => "max_recv_wr",
            max_srq_recv_wr => "max_srq_recv_wr",
            num_ports => "num_ports",
            flow_action_flags => "flow_action_flags",
            comp_mask => "comp_mask",
            response_length => "response_length",
            cqe_version => "cqe_version",
            cmds_supp_uhw => "cmds_supp_uhw",
            eth_min_inline => "eth_min_inline",
            clock_info_versions => "clock_info_versions",
            hca_core_clock_offset => "hca_core_clock_offset",
            log_uar_size => "log_uar_size",
            num_uars_per_page => "num_uars_per_page",
            num_dyn_bfregs => "num_dyn_bfregs",
            dump_fill_mkey => "dump_fill_mkey",
        }),
        crate::c_layout!(Mlx5IbAllocPdResp => "struct mlx5_ib_alloc_pd_resp" {
            pdn => "pdn",
        }),
        crate::c_layout!(Mlx5IbTsoCaps => "struct mlx5_ib_tso_caps" {
            max_tso => "max_tso",
            supported_qpts => "supported_qpts",
        }),
        crate::c_layout!(Mlx5IbRssCaps => "struct mlx5_ib_rss_caps" {
            rx_hash_fields_mask => "rx_hash_fields_mask",
            rx_hash_function => "rx_hash_function",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbCqeCompCaps => "struct mlx5_ib_cqe_comp_caps" {
            max_num => "max_num",
            supported_format => "supported_format",
        }),
        crate::c_layout!(Mlx5PacketPacingCaps => "struct mlx5_packet_pacing_caps" {
            qp_rate_limit_min => "qp_rate_limit_min",
            qp_rate_limit_max => "qp_rate_limit_max",
            supported_qpts => "supported_qpts",
            cap_flags => "cap_flags",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbSwParsingCaps => "struct mlx5_ib_sw_parsing_caps" {
            sw_parsing_offloads => "sw_parsing_offloads",
            supported_qpts => "supported_qpts",
        }),
        crate::c_layout!(Mlx5IbStridingRqCaps => "struct mlx5_ib_striding_rq_caps" {
            min_single_stride_log_num_of_bytes => "min_single_stride_log_num_of_bytes",
            max_single_stride_log_num_of_bytes => "max_single_stride_log_num_of_bytes",
            min_single_wqe_log_num_of_strides => "min_single_wqe_log_num_of_strides",
            max_single_wqe_log_num_of_strides => "max_single_wqe_log_num_of_strides",
            supported_qpts => "supported_qpts",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbDciStreamsCaps => "struct mlx5_ib_dci_streams_caps" {
            max_log_num_concurent => "max_log_num_concurent",
            max_log_num_errored => "max_log_num_errored",
        }),
        crate::c_layout!(Mlx5IbQueryDeviceResp => "struct mlx5_ib_query_device_resp" {
            comp_mask => "comp_mask",
            response_length => "response_length",
            tso_caps => "tso_caps",
            rss_caps => "rss_caps",
            cqe_comp_caps => "cqe_comp_caps",
            packet_pacing_caps => "packet_pacing_caps",
            mlx5_ib_support_multi_pkt_send_wqes => "mlx5_ib_support_multi_pkt_send_wqes",
            flags => "flags",
            sw_parsing_caps => "sw_parsing_caps",
            striding_rq_caps => "striding_rq_caps",
            tunnel_offloads_caps => "tunnel_offloads_caps",
            dci_streams_caps => "dci_streams_caps",
            reserved => "reserved",
        }),
    ]
}

//! `mlx5-abi.h` udata for queues and address handles: CREATE_CQ,
//! RESIZE_CQ, CREATE_SRQ, CREATE_QP, MODIFY_QP, CREATE_WQ, CREATE_AH, plus
//! the clock-info page and the `mlx5_user_ioctl_verbs.h` port query answer.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;

/// `struct mlx5_ib_create_cq` (CREATE_CQ udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateCq {
    /// `buf_addr`: the user CQE buffer (page-aligned).
    pub buf_addr: u64,
    /// `db_addr`: the doorbell record (2 x `__be32`).
    pub db_addr: u64,
    /// `cqe_size`: 64 or 128.
    pub cqe_size: u32,
    /// `cqe_comp_en`.
    pub cqe_comp_en: u8,
    /// `cqe_comp_res_format`.
    pub cqe_comp_res_format: u8,
    /// `flags`: [`Mlx5IbCreateCqFlags`](super::Mlx5IbCreateCqFlags).
    pub flags: u16,
    /// `uar_page_index`: with `UAR_PAGE_INDEX`.
    pub uar_page_index: u16,
    /// `reserved0`.
    pub reserved0: u16,
    /// `reserved1`.
    pub reserved1: u32,
}

/// `struct mlx5_ib_create_cq_resp` (CREATE_CQ udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateCqResp {
    /// `cqn`.
    pub cqn: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_resize_cq` (RESIZE_CQ udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbResizeCq {
    /// `buf_addr`.
    pub buf_addr: u64,
    /// `cqe_size`.
    pub cqe_size: u16,
    /// `reserved0`.
    pub reserved0: u16,
    /// `reserved1`.
    pub reserved1: u32,
}

/// `struct mlx5_ib_create_srq` (CREATE_SRQ udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateSrq {
    /// `buf_addr`.
    pub buf_addr: u64,
    /// `db_addr`.
    pub db_addr: u64,
    /// `flags`: `MLX5_SRQ_FLAG_*`.
    pub flags: u32,
    /// `reserved0`.
    pub reserved0: u32,
    /// `uidx`: user index (with CQE version 1).
    pub uidx: u32,
    /// `reserved1`.
    pub reserved1: u32,
}

/// `struct mlx5_ib_create_srq_resp` (CREATE_SRQ udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateSrqResp {
    /// `srqn`.
    pub srqn: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_create_qp_dci_streams`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateQpDciStreams {
    /// `log_num_concurent` (sic).
    pub log_num_concurent: u8,
    /// `log_num_errored`.
    pub log_num_errored: u8,
}

/// `struct mlx5_ib_create_qp_rss` (CREATE_QP udata in, RSS QPs).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateQpRss {
    /// `rx_hash_fields_mask`.
    pub rx_hash_fields_mask: u64,
    /// `rx_hash_function`.
    pub rx_hash_function: u8,
    /// `rx_key_len`.
    pub rx_key_len: u8,
    /// `reserved`.
    pub reserved: [u8; 6],
    /// `rx_hash_key`.
    pub rx_hash_key: [u8; 128],
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `flags`.
    pub flags: u32,
}

/// `struct mlx5_ib_create_qp_resp` (CREATE_QP udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateQpResp {
    /// `bfreg_index`: the BlueFlame register the QP rings.
    pub bfreg_index: u32,
    /// `ece_options`.
    pub ece_options: u32,
    /// `comp_mask`: [`Mlx5IbCreateQpRespMask`](super::Mlx5IbCreateQpRespMask).
    pub comp_mask: u32,
    /// `tirn`.
    pub tirn: u32,
    /// `tisn`.
    pub tisn: u32,
    /// `rqn`.
    pub rqn: u32,
    /// `sqn`.
    pub sqn: u32,
    /// `reserved1`.
    pub reserved1: u32,
    /// `tir_icm_addr`.
    pub tir_icm_addr: u64,
}

/// `struct mlx5_ib_alloc_mw` (ALLOC_MW udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbAllocMw {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `num_klms`.
    pub num_klms: u8,
    /// `reserved1`.
    pub reserved1: u8,
    /// `reserved2`.
    pub reserved2: u16,
}

/// `struct mlx5_ib_create_wq` (CREATE_WQ udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateWq {
    /// `buf_addr`.
    pub buf_addr: u64,
    /// `db_addr`.
    pub db_addr: u64,
    /// `rq_wqe_count`.
    pub rq_wqe_count: u32,
    /// `rq_wqe_shift`.
    pub rq_wqe_shift: u32,
    /// `user_index`.
    pub user_index: u32,
    /// `flags`: `MLX5_WQ_FLAG_*`.
    pub flags: u32,
    /// `comp_mask`: `MLX5_IB_CREATE_WQ_*`.
    pub comp_mask: u32,
    /// `single_stride_log_num_of_bytes`.
    pub single_stride_log_num_of_bytes: u32,
    /// `single_wqe_log_num_of_strides`.
    pub single_wqe_log_num_of_strides: u32,
    /// `two_byte_shift_en`.
    pub two_byte_shift_en: u32,
}

/// `struct mlx5_ib_create_ah_resp` (CREATE_AH udata out, RoCE).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateAhResp {
    /// `response_length`.
    pub response_length: u32,
    /// `dmac`: the resolved destination MAC.
    pub dmac: [u8; 6],
    /// `reserved`.
    pub reserved: [u8; 6],
}

/// `struct mlx5_ib_burst_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbBurstInfo {
    /// `max_burst_sz`.
    pub max_burst_sz: u32,
    /// `typical_pkt_sz`.
    pub typical_pkt_sz: u16,
    /// `reserved`.
    pub reserved: u16,
}

/// `struct mlx5_ib_modify_qp` (MODIFY_QP extended udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbModifyQp {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `burst_info`.
    pub burst_info: Mlx5IbBurstInfo,
    /// `ece_options`.
    pub ece_options: u32,
}

/// `struct mlx5_ib_modify_qp_resp` (MODIFY_QP extended udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbModifyQpResp {
    /// `response_length`.
    pub response_length: u32,
    /// `dctn`.
    pub dctn: u32,
    /// `ece_options`.
    pub ece_options: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_create_wq_resp` (CREATE_WQ udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateWqResp {
    /// `response_length`.
    pub response_length: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_create_rwq_ind_tbl_resp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateRwqIndTblResp {
    /// `response_length`.
    pub response_length: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_modify_wq` (MODIFY_WQ udata in).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbModifyWq {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct mlx5_ib_clock_info`: the page mapped with
/// `MLX5_IB_MMAP_CLOCK_INFO`, for converting completion timestamps.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbClockInfo {
    /// `sign`: odd while the kernel updates the page
    /// (`MLX5_IB_CLOCK_INFO_KERNEL_UPDATING`).
    pub sign: u32,
    /// `resv`.
    pub resv: u32,
    /// `nsec`.
    pub nsec: u64,
    /// `cycles`.
    pub cycles: u64,
    /// `frac`.
    pub frac: u64,
    /// `mult`.
    pub mult: u32,
    /// `shift`.
    pub shift: u32,
    /// `mask`.
    pub mask: u64,
    /// `overflow_period`.
    pub overflow_period: u64,
}

/// `struct mlx5_ib_uapi_reg` of `mlx5_user_ioctl_verbs.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbUapiReg {
    /// `value`.
    pub value: u32,
    /// `mask`.
    pub mask: u32,
}

/// `struct mlx5_ib_uapi_query_port` of `mlx5_user_ioctl_verbs.h`: the
/// answer of `MLX5_IB_METHOD_QUERY_PORT`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbUapiQueryPort {
    /// `flags`: `MLX5_IB_UAPI_QUERY_PORT_*` (which fields are valid).
    pub flags: u64,
    /// `vport`.
    pub vport: u16,
    /// `vport_vhca_id`.
    pub vport_vhca_id: u16,
    /// `esw_owner_vhca_id`.
    pub esw_owner_vhca_id: u16,
    /// `rsvd0`.
    pub rsvd0: u16,
    /// `vport_steering_icm_rx`.
    pub vport_steering_icm_rx: u64,
    /// `vport_steering_icm_tx`.
    pub vport_steering_icm_tx: u64,
    /// `reg_c0`.
    pub reg_c0: Mlx5IbUapiReg,
}
/// `struct mlx5_ib_create_qp` (CREATE_QP udata in). The C struct has an
/// anonymous union `{ sq_buf_addr; access_key; }`, here the one field
/// `sq_buf_addr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mlx5IbCreateQp {
    /// `buf_addr`: the work queue buffer (RQ first, then SQ).
    pub buf_addr: u64,
    /// `db_addr`: the doorbell record (`[RCV, SND]` `__be32`).
    pub db_addr: u64,
    /// `sq_wqe_count`.
    pub sq_wqe_count: u32,
    /// `rq_wqe_count`.
    pub rq_wqe_count: u32,
    /// `rq_wqe_shift`: log2 of the RQ stride.
    pub rq_wqe_shift: u32,
    /// `flags`: [`Mlx5QpFlags`](super::Mlx5QpFlags).
    pub flags: u32,
    /// `uidx`: user index (CQE version 1), reported in CQEs.
    pub uidx: u32,
    /// `bfreg_index`: with `MLX5_QP_FLAG_BFREG_INDEX` /
    /// `MLX5_QP_FLAG_UAR_PAGE_INDEX`.
    pub bfreg_index: u32,
    /// `sq_buf_addr` (raw packet QPs) or `access_key` (DCT) — one union.
    pub sq_buf_addr: u64,
    /// `ece_options`.
    pub ece_options: u32,
    /// `dci_streams`.
    pub dci_streams: Mlx5IbCreateQpDciStreams,
    /// `reserved`.
    pub reserved: u16,
}

/// Every struct of this file, for the header comparison test.
pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(Mlx5IbCreateCq => "struct mlx5_ib_create_cq" {
            buf_addr => "buf_addr",
            db_addr => "db_addr",
            cqe_size => "cqe_size",
            cqe_comp_en => "cqe_comp_en",
            cqe_comp_res_format => "cqe_comp_res_format",
            flags => "flags",
            uar_page_index => "uar_page_index",
            reserved0 => "reserved0",
            reserved1 => "reserved1",
        }),
        crate::c_layout!(Mlx5IbCreateCqResp => "struct mlx5_ib_create_cq_resp" {
            cqn => "cqn",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbResizeCq => "struct mlx5_ib_resize_cq" {
            buf_addr => "buf_addr",
            cqe_size => "cqe_size",
            reserved0 => "reserved0",
            reserved1 => "reserved1",
        }),
        crate::c_layout!(Mlx5IbCreateSrq => "struct mlx5_ib_create_srq" {
            buf_addr => "buf_addr",
            db_addr => "db_addr",
            flags => "flags",
            reserved0 => "reserved0",
            uidx => "uidx",
            reserved1 => "reserved1",
        }),
        crate::c_layout!(Mlx5IbCreateSrqResp => "struct mlx5_ib_create_srq_resp" {
            srqn => "srqn",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbCreateQpDciStreams => "struct mlx5_ib_create_qp_dci_streams" {
            log_num_concurent => "log_num_concurent",
            log_num_errored => "log_num_errored",
        }),
        crate::c_layout!(Mlx5IbCreateQpRss => "struct mlx5_ib_create_qp_rss" {
            rx_hash_fields_mask => "rx_hash_fields_mask",
            rx_hash_function => "rx_hash_function",
            rx_key_len => "rx_key_len",
            reserved => "reserved",
            rx_hash_key => "rx_hash_key",
            comp_mask => "comp_mask",
            flags => "flags",
        }),
        crate::c_layout!(Mlx5IbCreateQpResp => "struct mlx5_ib_create_qp_resp" {
            bfreg_index => "bfreg_index",
            ece_options => "ece_options",
            comp_mask => "comp_mask",
            tirn => "tirn",
            tisn => "tisn",
            rqn => "rqn",
            sqn => "sqn",
            reserved1 => "reserved1",
            tir_icm_addr => "tir_icm_addr",
        }),
        crate::c_layout!(Mlx5IbAllocMw => "struct mlx5_ib_alloc_mw" {
            comp_mask => "comp_mask",
            num_klms => "num_klms",
            reserved1 => "reserved1",
            reserved2 => "reserved2",
        }),
        crate::c_layout!(Mlx5IbCreateWq => "struct mlx5_ib_create_wq" {
            buf_addr => "buf_addr",
            db_addr => "db_addr",
            rq_wqe_count => "rq_wqe_count",
            rq_wqe_shift => "rq_wqe_shift",
            user_index => "user_index",
            flags => "flags",
            comp_mask => "comp_mask",
            single_stride_log_num_of_bytes => "single_stride_log_num_of_bytes",
            single_wqe_log_num_of_strides => "single_wqe_log_num_of_strides",
            two_byte_shift_en => "two_byte_shift_en",
        }),
        crate::c_layout!(Mlx5IbCreateAhResp => "struct mlx5_ib_create_ah_resp" {
            response_length => "response_length",
            dmac => "dmac",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbBurstInfo => "struct mlx5_ib_burst_info" {
            max_burst_sz => "max_burst_sz",
            typical_pkt_sz => "typical_pkt_sz",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbModifyQp => "struct mlx5_ib_modify_qp" {
            comp_mask => "comp_mask",
            burst_info => "burst_info",
            ece_options => "ece_options",
        }),
        crate::c_layout!(Mlx5IbModifyQpResp => "struct mlx5_ib_modify_qp_resp" {
            response_length => "response_length",
            dctn => "dctn",
            ece_options => "ece_options",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbCreateWqResp => "struct mlx5_ib_create_wq_resp" {
            response_length => "response_length",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbCreateRwqIndTblResp => "struct mlx5_ib_create_rwq_ind_tbl_resp" {
            response_length => "response_length",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbModifyWq => "struct mlx5_ib_modify_wq" {
            comp_mask => "comp_mask",
            reserved => "reserved",
        }),
        crate::c_layout!(Mlx5IbClockInfo => "struct mlx5_ib_clock_info" {
            sign => "sign",
            resv => "resv",
            nsec => "nsec",
            cycles => "cycles",
            frac => "frac",
            mult => "mult",
            shift => "shift",
            mask => "mask",
            overflow_period => "overflow_period",
        }),
        crate::c_layout!(Mlx5IbUapiReg => "struct mlx5_ib_uapi_reg" {
            value => "value",
            mask => "mask",
        }),
        crate::c_layout!(Mlx5IbUapiQueryPort => "struct mlx5_ib_uapi_query_port" {
            flags => "flags",
            vport => "vport",
            vport_vhca_id => "vport_vhca_id",
            esw_owner_vhca_id => "esw_owner_vhca_id",
            rsvd0 => "rsvd0",
            vport_steering_icm_rx => "vport_steering_icm_rx",
            vport_steering_icm_tx => "vport_steering_icm_tx",
            reg_c0 => "reg_c0",
        }),
        crate::c_layout!(Mlx5IbCreateQp => "struct mlx5_ib_create_qp" {
        buf_addr => "buf_addr",
        db_addr => "db_addr",
        sq_wqe_count => "sq_wqe_count",
        rq_wqe_count => "rq_wqe_count",
        rq_wqe_shift => "rq_wqe_shift",
        flags => "flags",
        uidx => "uidx",
        bfreg_index => "bfreg_index",
        sq_buf_addr => "sq_buf_addr",
        sq_buf_addr => "access_key",
        ece_options => "ece_options",
        dci_streams => "dci_streams",
        reserved => "reserved",
        }),
    ]
}

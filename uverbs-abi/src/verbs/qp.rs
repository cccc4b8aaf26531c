//! Queue pairs: CREATE_QP (and extended), OPEN_QP, MODIFY_QP (and
//! extended), QUERY_QP, DESTROY_QP; `struct ib_uverbs_qp_dest`,
//! `struct ib_uverbs_qp_attr`, QP states, path migration states and the
//! attribute mask bits. QP types and create flags are in
//! [`ioctl`](crate::ioctl) (`ib_user_ioctl_verbs.h`).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_consts, abi_enum, abi_flags, Registry};
use crate::verbs::{IbUverbsAhAttr, KERNEL_ONLY};

/// `struct ib_uverbs_qp_attr` of `ib_user_verbs.h` (144 bytes): a QP's
/// attributes as rdma_cm's INIT_QP_ATTR answers them (with
/// [`IbUverbsAhAttr`] address vectors, unlike MODIFY_QP's
/// [`IbUverbsQpDest`]).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQpAttr {
    /// `qp_attr_mask`: [`IbQpAttrMask`].
    pub qp_attr_mask: u32,
    /// `qp_state`: an [`IbQpState`].
    pub qp_state: u32,
    /// `cur_qp_state`.
    pub cur_qp_state: u32,
    /// `path_mtu`: an [`IbMtu`](super::IbMtu).
    pub path_mtu: u32,
    /// `path_mig_state`: an [`IbMigState`].
    pub path_mig_state: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`:
    /// [`IbUverbsAccessFlags`](crate::ioctl::IbUverbsAccessFlags).
    pub qp_access_flags: u32,
    /// `ah_attr`.
    pub ah_attr: IbUverbsAhAttr,
    /// `alt_ah_attr`.
    pub alt_ah_attr: IbUverbsAhAttr,
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
    /// `sq_draining`.
    pub sq_draining: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `reserved`.
    pub reserved: [u8; 5],
}

/// `struct ib_uverbs_create_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CREATE_QP`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateQp {
    /// `response`.
    pub response: u64,
    /// `user_handle`: echoed in async events (`element`).
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `send_cq_handle`.
    pub send_cq_handle: u32,
    /// `recv_cq_handle`.
    pub recv_cq_handle: u32,
    /// `srq_handle`: used when `is_srq` is 1.
    pub srq_handle: u32,
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
    /// `sq_sig_all`: 1 to signal every send.
    pub sq_sig_all: u8,
    /// `qp_type`: an [`IbUverbsQpType`](crate::ioctl::IbUverbsQpType).
    pub qp_type: u8,
    /// `is_srq`.
    pub is_srq: u8,
    /// `reserved`.
    pub reserved: u8,
}

/// `struct ib_uverbs_ex_create_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_EX_CMD_CREATE_QP`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExCreateQp {
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `send_cq_handle`.
    pub send_cq_handle: u32,
    /// `recv_cq_handle`.
    pub recv_cq_handle: u32,
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
    /// `sq_sig_all`.
    pub sq_sig_all: u8,
    /// `qp_type`.
    pub qp_type: u8,
    /// `is_srq`.
    pub is_srq: u8,
    /// `reserved`.
    pub reserved: u8,
    /// `comp_mask`: [`IB_UVERBS_CREATE_QP_MASK_IND_TABLE`].
    pub comp_mask: u32,
    /// `create_flags`:
    /// [`IbUverbsQpCreateFlags`](crate::ioctl::IbUverbsQpCreateFlags).
    pub create_flags: u32,
    /// `rwq_ind_tbl_handle`.
    pub rwq_ind_tbl_handle: u32,
    /// `source_qpn`.
    pub source_qpn: u32,
}

/// `struct ib_uverbs_open_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_OPEN_QP`, answered by [`IbUverbsCreateQpResp`]),
/// without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsOpenQp {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`: the XRCD handle.
    pub pd_handle: u32,
    /// `qpn`.
    pub qpn: u32,
    /// `qp_type`.
    pub qp_type: u8,
    /// `reserved`.
    pub reserved: [u8; 7],
}

/// `struct ib_uverbs_create_qp_resp` of `ib_user_verbs.h` (also OPEN_QP's
/// response), without its `driver_data[0]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateQpResp {
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `qpn`.
    pub qpn: u32,
    /// `max_send_wr`: the actual capacity.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_create_qp_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExCreateQpResp {
    /// `base`.
    pub base: IbUverbsCreateQpResp,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
}

/// `struct ib_uverbs_qp_dest` of `ib_user_verbs.h`: an address vector as
/// MODIFY_QP and QUERY_QP carry it.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQpDest {
    /// `dgid`: network order.
    pub dgid: [u8; 16],
    /// `flow_label`.
    pub flow_label: u32,
    /// `dlid`.
    pub dlid: u16,
    /// `reserved`.
    pub reserved: u16,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
    /// `sl`.
    pub sl: u8,
    /// `src_path_bits`.
    pub src_path_bits: u8,
    /// `static_rate`.
    pub static_rate: u8,
    /// `is_global`.
    pub is_global: u8,
    /// `port_num`.
    pub port_num: u8,
}

/// `struct ib_uverbs_query_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_QUERY_QP`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryQp {
    /// `response`.
    pub response: u64,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `attr_mask`: [`IbQpAttrMask`].
    pub attr_mask: u32,
}

/// `struct ib_uverbs_query_qp_resp` of `ib_user_verbs.h` (128 bytes),
/// without its flexible `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryQpResp {
    /// `dest`.
    pub dest: IbUverbsQpDest,
    /// `alt_dest`.
    pub alt_dest: IbUverbsQpDest,
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`.
    pub qp_access_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `qp_state`: an [`IbQpState`].
    pub qp_state: u8,
    /// `cur_qp_state`.
    pub cur_qp_state: u8,
    /// `path_mtu`.
    pub path_mtu: u8,
    /// `path_mig_state`.
    pub path_mig_state: u8,
    /// `sq_draining`.
    pub sq_draining: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `sq_sig_all`.
    pub sq_sig_all: u8,
    /// `reserved`.
    pub reserved: [u8; 5],
}

/// `struct ib_uverbs_modify_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_MODIFY_QP`, no response; 112 bytes), without its
/// `__aligned_u64 driver_data[0]` (hence 8-aligned). The legacy command
/// accepts only the mask bits up to [`IB_USER_LEGACY_LAST_QP_ATTR_MASK`].
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsModifyQp {
    /// `dest`.
    pub dest: IbUverbsQpDest,
    /// `alt_dest`.
    pub alt_dest: IbUverbsQpDest,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `attr_mask`: [`IbQpAttrMask`].
    pub attr_mask: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `rq_psn`.
    pub rq_psn: u32,
    /// `sq_psn`.
    pub sq_psn: u32,
    /// `dest_qp_num`.
    pub dest_qp_num: u32,
    /// `qp_access_flags`.
    pub qp_access_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `qp_state`: an [`IbQpState`].
    pub qp_state: u8,
    /// `cur_qp_state`.
    pub cur_qp_state: u8,
    /// `path_mtu`: an [`IbMtu`](super::IbMtu).
    pub path_mtu: u8,
    /// `path_mig_state`: an [`IbMigState`].
    pub path_mig_state: u8,
    /// `en_sqd_async_notify`.
    pub en_sqd_async_notify: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `reserved`.
    pub reserved: [u8; 2],
}

/// `struct ib_uverbs_ex_modify_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_EX_CMD_MODIFY_QP`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExModifyQp {
    /// `base`.
    pub base: IbUverbsModifyQp,
    /// `rate_limit` (kbps), with [`IbQpAttrMask::RATE_LIMIT`].
    pub rate_limit: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_modify_qp_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExModifyQpResp {
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
}

/// `struct ib_uverbs_destroy_qp` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DESTROY_QP`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroyQp {
    /// `response`.
    pub response: u64,
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_destroy_qp_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroyQpResp {
    /// `events_reported`: async events the kernel delivered for this QP.
    pub events_reported: u32,
}

abi_consts! { register_masks;
    /// `IB_UVERBS_CREATE_QP_MASK_IND_TABLE` (`enum ib_uverbs_create_qp_mask`):
    /// `rwq_ind_tbl_handle` is valid.
    IB_UVERBS_CREATE_QP_MASK_IND_TABLE: u32 = 1 << 0;
    /// `IB_UVERBS_CREATE_QP_SUP_COMP_MASK`: every `comp_mask` bit the
    /// kernel knows.
    IB_UVERBS_CREATE_QP_SUP_COMP_MASK: u32 = IB_UVERBS_CREATE_QP_MASK_IND_TABLE;
    /// `IB_USER_LEGACY_LAST_QP_ATTR_MASK`: the highest attribute mask bit
    /// the legacy MODIFY_QP accepts ([`IbQpAttrMask::DEST_QPN`]); higher
    /// bits get `EOPNOTSUPP`.
    IB_USER_LEGACY_LAST_QP_ATTR_MASK: u32 = 1 << 20
        => newer "once in ib_user_verbs.h, since removed from UAPI; the kernel checks \
                  MODIFY_QP's attr_mask against bits 0..=20 (uverbs_cmd.c)";
    /// `IB_USER_LAST_QP_ATTR_MASK`: the highest attribute mask bit the
    /// extended MODIFY_QP accepts ([`IbQpAttrMask::RATE_LIMIT`]).
    IB_USER_LAST_QP_ATTR_MASK: u32 = 1 << 25
        => newer "once in ib_user_verbs.h, since removed from UAPI; equal to IB_QP_RATE_LIMIT";
}

abi_enum! {
    /// `enum ib_qp_state` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `qp_state`/`cur_qp_state` of the QP commands.
    pub struct IbQpState(u32);
    /// Reset.
    RESET = 0 => "IB_QPS_RESET" ibv "IBV_QPS_RESET" newer KERNEL_ONLY;
    /// Initialised.
    INIT = 1 => "IB_QPS_INIT" ibv "IBV_QPS_INIT" newer KERNEL_ONLY;
    /// Ready to receive.
    RTR = 2 => "IB_QPS_RTR" ibv "IBV_QPS_RTR" newer KERNEL_ONLY;
    /// Ready to send.
    RTS = 3 => "IB_QPS_RTS" ibv "IBV_QPS_RTS" newer KERNEL_ONLY;
    /// Send queue drained.
    SQD = 4 => "IB_QPS_SQD" ibv "IBV_QPS_SQD" newer KERNEL_ONLY;
    /// Send queue error.
    SQE = 5 => "IB_QPS_SQE" ibv "IBV_QPS_SQE" newer KERNEL_ONLY;
    /// Error.
    ERR = 6 => "IB_QPS_ERR" ibv "IBV_QPS_ERR" newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_mig_state` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `path_mig_state`.
    pub struct IbMigState(u32);
    /// Migrated.
    MIGRATED = 0 => "IB_MIG_MIGRATED" ibv "IBV_MIG_MIGRATED" newer KERNEL_ONLY;
    /// Re-arm.
    REARM = 1 => "IB_MIG_REARM" ibv "IBV_MIG_REARM" newer KERNEL_ONLY;
    /// Armed.
    ARMED = 2 => "IB_MIG_ARMED" ibv "IBV_MIG_ARMED" newer KERNEL_ONLY;
}

abi_flags! {
    /// `enum ib_qp_attr_mask` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// which attributes MODIFY_QP changes, QUERY_QP asks for, and rdma_cm's
    /// INIT_QP_ATTR fills.
    pub struct IbQpAttrMask: u32;
    /// `qp_state`.
    STATE = 1 << 0 => "IB_QP_STATE" ibv "IBV_QP_STATE" newer KERNEL_ONLY;
    /// `cur_qp_state`.
    CUR_STATE = 1 << 1 => "IB_QP_CUR_STATE" ibv "IBV_QP_CUR_STATE" newer KERNEL_ONLY;
    /// `en_sqd_async_notify`.
    EN_SQD_ASYNC_NOTIFY = 1 << 2 => "IB_QP_EN_SQD_ASYNC_NOTIFY"
        ibv "IBV_QP_EN_SQD_ASYNC_NOTIFY" newer KERNEL_ONLY;
    /// `qp_access_flags`.
    ACCESS_FLAGS = 1 << 3 => "IB_QP_ACCESS_FLAGS" ibv "IBV_QP_ACCESS_FLAGS" newer KERNEL_ONLY;
    /// `pkey_index`.
    PKEY_INDEX = 1 << 4 => "IB_QP_PKEY_INDEX" ibv "IBV_QP_PKEY_INDEX" newer KERNEL_ONLY;
    /// `port_num`.
    PORT = 1 << 5 => "IB_QP_PORT" ibv "IBV_QP_PORT" newer KERNEL_ONLY;
    /// `qkey`.
    QKEY = 1 << 6 => "IB_QP_QKEY" ibv "IBV_QP_QKEY" newer KERNEL_ONLY;
    /// The primary address vector.
    AV = 1 << 7 => "IB_QP_AV" ibv "IBV_QP_AV" newer KERNEL_ONLY;
    /// `path_mtu`.
    PATH_MTU = 1 << 8 => "IB_QP_PATH_MTU" ibv "IBV_QP_PATH_MTU" newer KERNEL_ONLY;
    /// `timeout`.
    TIMEOUT = 1 << 9 => "IB_QP_TIMEOUT" ibv "IBV_QP_TIMEOUT" newer KERNEL_ONLY;
    /// `retry_cnt`.
    RETRY_CNT = 1 << 10 => "IB_QP_RETRY_CNT" ibv "IBV_QP_RETRY_CNT" newer KERNEL_ONLY;
    /// `rnr_retry`.
    RNR_RETRY = 1 << 11 => "IB_QP_RNR_RETRY" ibv "IBV_QP_RNR_RETRY" newer KERNEL_ONLY;
    /// `rq_psn`.
    RQ_PSN = 1 << 12 => "IB_QP_RQ_PSN" ibv "IBV_QP_RQ_PSN" newer KERNEL_ONLY;
    /// `max_rd_atomic`.
    MAX_QP_RD_ATOMIC = 1 << 13 => "IB_QP_MAX_QP_RD_ATOMIC"
        ibv "IBV_QP_MAX_QP_RD_ATOMIC" newer KERNEL_ONLY;
    /// The alternate path.
    ALT_PATH = 1 << 14 => "IB_QP_ALT_PATH" ibv "IBV_QP_ALT_PATH" newer KERNEL_ONLY;
    /// `min_rnr_timer`.
    MIN_RNR_TIMER = 1 << 15 => "IB_QP_MIN_RNR_TIMER" ibv "IBV_QP_MIN_RNR_TIMER"
        newer KERNEL_ONLY;
    /// `sq_psn`.
    SQ_PSN = 1 << 16 => "IB_QP_SQ_PSN" ibv "IBV_QP_SQ_PSN" newer KERNEL_ONLY;
    /// `max_dest_rd_atomic`.
    MAX_DEST_RD_ATOMIC = 1 << 17 => "IB_QP_MAX_DEST_RD_ATOMIC"
        ibv "IBV_QP_MAX_DEST_RD_ATOMIC" newer KERNEL_ONLY;
    /// `path_mig_state`.
    PATH_MIG_STATE = 1 << 18 => "IB_QP_PATH_MIG_STATE" ibv "IBV_QP_PATH_MIG_STATE"
        newer KERNEL_ONLY;
    /// The capacities (`max_send_wr`…).
    CAP = 1 << 19 => "IB_QP_CAP" ibv "IBV_QP_CAP" newer KERNEL_ONLY;
    /// `dest_qp_num`.
    DEST_QPN = 1 << 20 => "IB_QP_DEST_QPN" ibv "IBV_QP_DEST_QPN" newer KERNEL_ONLY;
    /// `rate_limit` (extended MODIFY_QP only).
    RATE_LIMIT = 1 << 25 => "IB_QP_RATE_LIMIT" ibv "IBV_QP_RATE_LIMIT" newer KERNEL_ONLY;
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsQpAttr => "struct ib_uverbs_qp_attr" {
            qp_attr_mask => "qp_attr_mask", qp_state => "qp_state",
            cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
            path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn",
            sq_psn => "sq_psn", dest_qp_num => "dest_qp_num",
            qp_access_flags => "qp_access_flags", ah_attr => "ah_attr",
            alt_ah_attr => "alt_ah_attr", max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data",
            pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index",
            en_sqd_async_notify => "en_sqd_async_notify", sq_draining => "sq_draining",
            max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic",
            min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout",
            retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
            alt_timeout => "alt_timeout", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsCreateQp => "struct ib_uverbs_create_qp" {
            response => "response", user_handle => "user_handle", pd_handle => "pd_handle",
            send_cq_handle => "send_cq_handle", recv_cq_handle => "recv_cq_handle",
            srq_handle => "srq_handle", max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data",
            sq_sig_all => "sq_sig_all", qp_type => "qp_type", is_srq => "is_srq",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExCreateQp => "struct ib_uverbs_ex_create_qp" {
            user_handle => "user_handle", pd_handle => "pd_handle",
            send_cq_handle => "send_cq_handle", recv_cq_handle => "recv_cq_handle",
            srq_handle => "srq_handle", max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data",
            sq_sig_all => "sq_sig_all", qp_type => "qp_type", is_srq => "is_srq",
            reserved => "reserved", comp_mask => "comp_mask", create_flags => "create_flags",
            rwq_ind_tbl_handle => "rwq_ind_tbl_handle", source_qpn => "source_qpn",
        }),
        crate::c_layout!(IbUverbsOpenQp => "struct ib_uverbs_open_qp" {
            response => "response", user_handle => "user_handle", pd_handle => "pd_handle",
            qpn => "qpn", qp_type => "qp_type", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsCreateQpResp => "struct ib_uverbs_create_qp_resp" {
            qp_handle => "qp_handle", qpn => "qpn", max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExCreateQpResp => "struct ib_uverbs_ex_create_qp_resp" {
            base => "base", comp_mask => "comp_mask", response_length => "response_length",
        }),
        crate::c_layout!(IbUverbsQpDest => "struct ib_uverbs_qp_dest" {
            dgid => "dgid", flow_label => "flow_label", dlid => "dlid", reserved => "reserved",
            sgid_index => "sgid_index", hop_limit => "hop_limit",
            traffic_class => "traffic_class", sl => "sl", src_path_bits => "src_path_bits",
            static_rate => "static_rate", is_global => "is_global", port_num => "port_num",
        }),
        crate::c_layout!(IbUverbsQueryQp => "struct ib_uverbs_query_qp" {
            response => "response", qp_handle => "qp_handle", attr_mask => "attr_mask",
        }),
        crate::c_layout!(IbUverbsQueryQpResp => "struct ib_uverbs_query_qp_resp" {
            dest => "dest", alt_dest => "alt_dest", max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data",
            qkey => "qkey", rq_psn => "rq_psn", sq_psn => "sq_psn",
            dest_qp_num => "dest_qp_num", qp_access_flags => "qp_access_flags",
            pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index",
            qp_state => "qp_state", cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
            path_mig_state => "path_mig_state", sq_draining => "sq_draining",
            max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic",
            min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout",
            retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
            alt_timeout => "alt_timeout", sq_sig_all => "sq_sig_all", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsModifyQp => "struct ib_uverbs_modify_qp" {
            dest => "dest", alt_dest => "alt_dest", qp_handle => "qp_handle",
            attr_mask => "attr_mask", qkey => "qkey", rq_psn => "rq_psn", sq_psn => "sq_psn",
            dest_qp_num => "dest_qp_num", qp_access_flags => "qp_access_flags",
            pkey_index => "pkey_index", alt_pkey_index => "alt_pkey_index",
            qp_state => "qp_state", cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
            path_mig_state => "path_mig_state", en_sqd_async_notify => "en_sqd_async_notify",
            max_rd_atomic => "max_rd_atomic", max_dest_rd_atomic => "max_dest_rd_atomic",
            min_rnr_timer => "min_rnr_timer", port_num => "port_num", timeout => "timeout",
            retry_cnt => "retry_cnt", rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
            alt_timeout => "alt_timeout", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExModifyQp => "struct ib_uverbs_ex_modify_qp" {
            base => "base", rate_limit => "rate_limit", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExModifyQpResp => "struct ib_uverbs_ex_modify_qp_resp" {
            comp_mask => "comp_mask", response_length => "response_length",
        }),
        crate::c_layout!(IbUverbsDestroyQp => "struct ib_uverbs_destroy_qp" {
            response => "response", qp_handle => "qp_handle", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsDestroyQpResp => "struct ib_uverbs_destroy_qp_resp" {
            events_reported => "events_reported",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    register_masks(r);
    IbQpState::register(r);
    IbMigState::register(r);
    IbQpAttrMask::register(r);
}

//! Shared receive queues: CREATE_SRQ, CREATE_XSRQ, MODIFY_SRQ, QUERY_SRQ,
//! DESTROY_SRQ. SRQ types are in [`ioctl`](crate::ioctl)
//! (`ib_user_ioctl_verbs.h`).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_flags, Registry};
use crate::verbs::KERNEL_ONLY;

/// `struct ib_uverbs_create_srq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CREATE_SRQ`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateSrq {
    /// `response`.
    pub response: u64,
    /// `user_handle`: echoed in async events.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
}

/// `struct ib_uverbs_create_xsrq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CREATE_XSRQ`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateXsrq {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `srq_type`: an [`IbUverbsSrqType`](crate::ioctl::IbUverbsSrqType).
    pub srq_type: u32,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
    /// `max_num_tags` (tag-matching SRQs).
    pub max_num_tags: u32,
    /// `xrcd_handle` (XRC SRQs).
    pub xrcd_handle: u32,
    /// `cq_handle` (XRC and tag-matching SRQs).
    pub cq_handle: u32,
}

/// `struct ib_uverbs_create_srq_resp` of `ib_user_verbs.h`, without its
/// flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateSrqResp {
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `max_wr`: the actual capacity.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srqn`: the SRQ number (XRC).
    pub srqn: u32,
}

/// `struct ib_uverbs_modify_srq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_MODIFY_SRQ`, no response), without its flexible
/// `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsModifySrq {
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `attr_mask`: [`IbSrqAttrMask`].
    pub attr_mask: u32,
    /// `max_wr`: the new size, with [`IbSrqAttrMask::MAX_WR`].
    pub max_wr: u32,
    /// `srq_limit`: the new limit, with [`IbSrqAttrMask::LIMIT`].
    pub srq_limit: u32,
}

/// `struct ib_uverbs_query_srq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_QUERY_SRQ`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQuerySrq {
    /// `response`.
    pub response: u64,
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_query_srq_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQuerySrqResp {
    /// `max_wr`.
    pub max_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `srq_limit`.
    pub srq_limit: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_destroy_srq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DESTROY_SRQ`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroySrq {
    /// `response`.
    pub response: u64,
    /// `srq_handle`.
    pub srq_handle: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_destroy_srq_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroySrqResp {
    /// `events_reported`.
    pub events_reported: u32,
}

abi_flags! {
    /// `enum ib_srq_attr_mask` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `attr_mask` of MODIFY_SRQ.
    pub struct IbSrqAttrMask: u32;
    /// Resize the SRQ to `max_wr`.
    MAX_WR = 1 << 0 => "IB_SRQ_MAX_WR" ibv "IBV_SRQ_MAX_WR" newer KERNEL_ONLY;
    /// Arm the limit event at `srq_limit`.
    LIMIT = 1 << 1 => "IB_SRQ_LIMIT" ibv "IBV_SRQ_LIMIT" newer KERNEL_ONLY;
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsCreateSrq => "struct ib_uverbs_create_srq" {
            response => "response", user_handle => "user_handle", pd_handle => "pd_handle",
            max_wr => "max_wr", max_sge => "max_sge", srq_limit => "srq_limit",
        }),
        crate::c_layout!(IbUverbsCreateXsrq => "struct ib_uverbs_create_xsrq" {
            response => "response", user_handle => "user_handle", srq_type => "srq_type",
            pd_handle => "pd_handle", max_wr => "max_wr", max_sge => "max_sge",
            srq_limit => "srq_limit", max_num_tags => "max_num_tags",
            xrcd_handle => "xrcd_handle", cq_handle => "cq_handle",
        }),
        crate::c_layout!(IbUverbsCreateSrqResp => "struct ib_uverbs_create_srq_resp" {
            srq_handle => "srq_handle", max_wr => "max_wr", max_sge => "max_sge",
            srqn => "srqn",
        }),
        crate::c_layout!(IbUverbsModifySrq => "struct ib_uverbs_modify_srq" {
            srq_handle => "srq_handle", attr_mask => "attr_mask", max_wr => "max_wr",
            srq_limit => "srq_limit",
        }),
        crate::c_layout!(IbUverbsQuerySrq => "struct ib_uverbs_query_srq" {
            response => "response", srq_handle => "srq_handle", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsQuerySrqResp => "struct ib_uverbs_query_srq_resp" {
            max_wr => "max_wr", max_sge => "max_sge", srq_limit => "srq_limit",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsDestroySrq => "struct ib_uverbs_destroy_srq" {
            response => "response", srq_handle => "srq_handle", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsDestroySrqResp => "struct ib_uverbs_destroy_srq_resp" {
            events_reported => "events_reported",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    IbSrqAttrMask::register(r);
}

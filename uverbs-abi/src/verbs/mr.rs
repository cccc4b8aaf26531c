//! Memory regions and windows: REG_MR, REREG_MR, DEREG_MR, ALLOC_MW,
//! DEALLOC_MW. The access flags are
//! [`IbUverbsAccessFlags`](crate::ioctl::IbUverbsAccessFlags)
//! (`ib_user_ioctl_verbs.h`).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_enum, abi_flags, Registry};
use crate::verbs::KERNEL_ONLY;

/// `struct ib_uverbs_reg_mr` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_REG_MR`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsRegMr {
    /// `response`.
    pub response: u64,
    /// `start`: user address of the memory.
    pub start: u64,
    /// `length`.
    pub length: u64,
    /// `hca_va`: the address the MR's users name it by (the iova).
    pub hca_va: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `access_flags`:
    /// [`IbUverbsAccessFlags`](crate::ioctl::IbUverbsAccessFlags).
    pub access_flags: u32,
}

/// `struct ib_uverbs_reg_mr_resp` of `ib_user_verbs.h`, without its
/// flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsRegMrResp {
    /// `mr_handle`.
    pub mr_handle: u32,
    /// `lkey`.
    pub lkey: u32,
    /// `rkey`.
    pub rkey: u32,
}

/// `struct ib_uverbs_rereg_mr` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_REREG_MR`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsReregMr {
    /// `response`.
    pub response: u64,
    /// `mr_handle`.
    pub mr_handle: u32,
    /// `flags`: [`IbMrReregFlags`].
    pub flags: u32,
    /// `start`.
    pub start: u64,
    /// `length`.
    pub length: u64,
    /// `hca_va`.
    pub hca_va: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `access_flags`.
    pub access_flags: u32,
}

/// `struct ib_uverbs_rereg_mr_resp` of `ib_user_verbs.h`, without its
/// flexible `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsReregMrResp {
    /// `lkey`.
    pub lkey: u32,
    /// `rkey`.
    pub rkey: u32,
}

/// `struct ib_uverbs_dereg_mr` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DEREG_MR`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDeregMr {
    /// `mr_handle`.
    pub mr_handle: u32,
}

/// `struct ib_uverbs_alloc_mw` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_ALLOC_MW`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAllocMw {
    /// `response`.
    pub response: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `mw_type`: an [`IbMwType`].
    pub mw_type: u8,
    /// `reserved`.
    pub reserved: [u8; 3],
}

/// `struct ib_uverbs_alloc_mw_resp` of `ib_user_verbs.h`, without its
/// flexible `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAllocMwResp {
    /// `mw_handle`.
    pub mw_handle: u32,
    /// `rkey`.
    pub rkey: u32,
}

/// `struct ib_uverbs_dealloc_mw` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DEALLOC_MW`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDeallocMw {
    /// `mw_handle`.
    pub mw_handle: u32,
}

abi_flags! {
    /// `enum ib_mr_rereg_flags` (kernel-internal,
    /// `include/rdma/ib_verbs.h`): what REREG_MR changes.
    pub struct IbMrReregFlags: u32;
    /// New address range.
    TRANS = 1 << 0 => "IB_MR_REREG_TRANS" ibv "IBV_REREG_MR_CHANGE_TRANSLATION"
        newer KERNEL_ONLY;
    /// New PD.
    PD = 1 << 1 => "IB_MR_REREG_PD" ibv "IBV_REREG_MR_CHANGE_PD" newer KERNEL_ONLY;
    /// New access flags.
    ACCESS = 1 << 2 => "IB_MR_REREG_ACCESS" ibv "IBV_REREG_MR_CHANGE_ACCESS"
        newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_mw_type` (kernel-internal, `include/rdma/ib_verbs.h`).
    pub struct IbMwType(u8);
    /// Type 1: bound by a verb, PD-wide.
    TYPE_1 = 1 => "IB_MW_TYPE_1" ibv "IBV_MW_TYPE_1" newer KERNEL_ONLY;
    /// Type 2: bound by a work request, to a QP.
    TYPE_2 = 2 => "IB_MW_TYPE_2" ibv "IBV_MW_TYPE_2" newer KERNEL_ONLY;
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsRegMr => "struct ib_uverbs_reg_mr" {
            response => "response",
            start => "start",
            length => "length",
            hca_va => "hca_va",
            pd_handle => "pd_handle",
            access_flags => "access_flags",
        }),
        crate::c_layout!(IbUverbsRegMrResp => "struct ib_uverbs_reg_mr_resp" {
            mr_handle => "mr_handle",
            lkey => "lkey",
            rkey => "rkey",
        }),
        crate::c_layout!(IbUverbsReregMr => "struct ib_uverbs_rereg_mr" {
            response => "response",
            mr_handle => "mr_handle",
            flags => "flags",
            start => "start",
            length => "length",
            hca_va => "hca_va",
            pd_handle => "pd_handle",
            access_flags => "access_flags",
        }),
        crate::c_layout!(IbUverbsReregMrResp => "struct ib_uverbs_rereg_mr_resp" {
            lkey => "lkey",
            rkey => "rkey",
        }),
        crate::c_layout!(IbUverbsDeregMr => "struct ib_uverbs_dereg_mr" {
            mr_handle => "mr_handle",
        }),
        crate::c_layout!(IbUverbsAllocMw => "struct ib_uverbs_alloc_mw" {
            response => "response",
            pd_handle => "pd_handle",
            mw_type => "mw_type",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsAllocMwResp => "struct ib_uverbs_alloc_mw_resp" {
            mw_handle => "mw_handle",
            rkey => "rkey",
        }),
        crate::c_layout!(IbUverbsDeallocMw => "struct ib_uverbs_dealloc_mw" {
            mw_handle => "mw_handle",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    IbMrReregFlags::register(r);
    IbMwType::register(r);
}

//! Multicast: ATTACH_MCAST and DETACH_MCAST (no responses).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;

/// `struct ib_uverbs_attach_mcast` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_ATTACH_MCAST`), without its flexible
/// `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAttachMcast {
    /// `gid`: the multicast GID, network order.
    pub gid: [u8; 16],
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `mlid`.
    pub mlid: u16,
    /// `reserved`.
    pub reserved: u16,
}

/// `struct ib_uverbs_detach_mcast` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DETACH_MCAST`), without its flexible
/// `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDetachMcast {
    /// `gid`.
    pub gid: [u8; 16],
    /// `qp_handle`.
    pub qp_handle: u32,
    /// `mlid`.
    pub mlid: u16,
    /// `reserved`.
    pub reserved: u16,
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsAttachMcast => "struct ib_uverbs_attach_mcast" {
            gid => "gid", qp_handle => "qp_handle", mlid => "mlid", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsDetachMcast => "struct ib_uverbs_detach_mcast" {
            gid => "gid", qp_handle => "qp_handle", mlid => "mlid", reserved => "reserved",
        }),
    ]
}

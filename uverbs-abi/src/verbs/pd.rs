//! Protection domains and XRC domains: ALLOC_PD, DEALLOC_PD, OPEN_XRCD,
//! CLOSE_XRCD.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;

/// `struct ib_uverbs_alloc_pd` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_ALLOC_PD`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAllocPd {
    /// `response`.
    pub response: u64,
}

/// `struct ib_uverbs_alloc_pd_resp` of `ib_user_verbs.h`, without its
/// flexible `driver_data[]` (driver udata out starts right after it, at 4).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAllocPdResp {
    /// `pd_handle`.
    pub pd_handle: u32,
}

/// `struct ib_uverbs_dealloc_pd` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DEALLOC_PD`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDeallocPd {
    /// `pd_handle`.
    pub pd_handle: u32,
}

/// `struct ib_uverbs_open_xrcd` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_OPEN_XRCD`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsOpenXrcd {
    /// `response`.
    pub response: u64,
    /// `fd`: a file that names the XRCD to share, or -1 (as `u32`).
    pub fd: u32,
    /// `oflags`: `O_CREAT`/`O_EXCL`.
    pub oflags: u32,
}

/// `struct ib_uverbs_open_xrcd_resp` of `ib_user_verbs.h`, without its
/// flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsOpenXrcdResp {
    /// `xrcd_handle`.
    pub xrcd_handle: u32,
}

/// `struct ib_uverbs_close_xrcd` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CLOSE_XRCD`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCloseXrcd {
    /// `xrcd_handle`.
    pub xrcd_handle: u32,
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsAllocPd => "struct ib_uverbs_alloc_pd" { response => "response" }),
        crate::c_layout!(IbUverbsAllocPdResp => "struct ib_uverbs_alloc_pd_resp" {
            pd_handle => "pd_handle",
        }),
        crate::c_layout!(IbUverbsDeallocPd => "struct ib_uverbs_dealloc_pd" {
            pd_handle => "pd_handle",
        }),
        crate::c_layout!(IbUverbsOpenXrcd => "struct ib_uverbs_open_xrcd" {
            response => "response",
            fd => "fd",
            oflags => "oflags",
        }),
        crate::c_layout!(IbUverbsOpenXrcdResp => "struct ib_uverbs_open_xrcd_resp" {
            xrcd_handle => "xrcd_handle",
        }),
        crate::c_layout!(IbUverbsCloseXrcd => "struct ib_uverbs_close_xrcd" {
            xrcd_handle => "xrcd_handle",
        }),
    ]
}

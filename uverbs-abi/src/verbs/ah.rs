//! Address handles and the address vectors write commands carry:
//! `struct ib_uverbs_global_route`, `struct ib_uverbs_ah_attr`,
//! CREATE_AH, DESTROY_AH.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;

/// `struct ib_uverbs_global_route` of `ib_user_verbs.h`: the GRH fields of
/// an [`IbUverbsAhAttr`].
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsGlobalRoute {
    /// `dgid`: the destination GID, network order.
    pub dgid: [u8; 16],
    /// `flow_label`.
    pub flow_label: u32,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
    /// `reserved`.
    pub reserved: u8,
}

/// `struct ib_uverbs_ah_attr` of `ib_user_verbs.h`: an address vector, in
/// CREATE_AH and in [`IbUverbsQpAttr`](super::IbUverbsQpAttr) (rdma_cm's
/// INIT_QP_ATTR). MODIFY_QP and QUERY_QP use
/// [`IbUverbsQpDest`](super::IbUverbsQpDest) instead, laid out differently.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAhAttr {
    /// `grh`: valid when `is_global` is 1.
    pub grh: IbUverbsGlobalRoute,
    /// `dlid`.
    pub dlid: u16,
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
    /// `reserved`.
    pub reserved: u8,
}

/// `struct ib_uverbs_create_ah` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CREATE_AH`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateAh {
    /// `response`.
    pub response: u64,
    /// `user_handle`.
    pub user_handle: u64,
    /// `pd_handle`.
    pub pd_handle: u32,
    /// `reserved`.
    pub reserved: u32,
    /// `attr`.
    pub attr: IbUverbsAhAttr,
}

/// `struct ib_uverbs_create_ah_resp` of `ib_user_verbs.h`, without its
/// flexible `driver_data[]` (driver udata out starts at 4).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateAhResp {
    /// `ah_handle`.
    pub ah_handle: u32,
}

/// `struct ib_uverbs_destroy_ah` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DESTROY_AH`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroyAh {
    /// `ah_handle`.
    pub ah_handle: u32,
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsGlobalRoute => "struct ib_uverbs_global_route" {
            dgid => "dgid",
            flow_label => "flow_label",
            sgid_index => "sgid_index",
            hop_limit => "hop_limit",
            traffic_class => "traffic_class",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsAhAttr => "struct ib_uverbs_ah_attr" {
            grh => "grh",
            dlid => "dlid",
            sl => "sl",
            src_path_bits => "src_path_bits",
            static_rate => "static_rate",
            is_global => "is_global",
            port_num => "port_num",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsCreateAh => "struct ib_uverbs_create_ah" {
            response => "response",
            user_handle => "user_handle",
            pd_handle => "pd_handle",
            reserved => "reserved",
            attr => "attr",
        }),
        crate::c_layout!(IbUverbsCreateAhResp => "struct ib_uverbs_create_ah_resp" {
            ah_handle => "ah_handle",
        }),
        crate::c_layout!(IbUverbsDestroyAh => "struct ib_uverbs_destroy_ah" {
            ah_handle => "ah_handle",
        }),
    ]
}

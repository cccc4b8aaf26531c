//! Address handles and the addresses they hold: `struct ibv_ah`,
//! `struct ibv_ah_attr`, and the path record of `<infiniband/sa.h>` that
//! librdmacm resolves an address to.

use super::{IbvContext, IbvGid, IbvPd};
use std::ffi::c_int;

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}

/// `struct ibv_grh`: the 40 bytes a UD receive's buffer begins with.
pub const GRH_LEN: usize = 40;

/// `struct ibv_sa_path_rec` of `<infiniband/sa.h>`. `__be` fields hold
/// network-order values, copied as they are.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvSaPathRec {
    pub dgid: IbvGid,
    pub sgid: IbvGid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

//! A device and what is queried of it: `struct ibv_device`, the device and
//! port attributes, GIDs.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `IBV_SYSFS_NAME_MAX`.
pub const SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const SYSFS_PATH_MAX: usize = 256;

/// `struct _ibv_device_ops`: two dead slots kept for the ABI.
#[repr(C)]
pub struct IbvDeviceOps {
    pub dummy1: *const c_void,
    pub dummy2: *const c_void,
}

/// `struct ibv_device`.
#[repr(C)]
pub struct IbvDevice {
    pub ops: IbvDeviceOps,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; SYSFS_NAME_MAX],
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_odp_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvOdpCaps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// `struct ibv_tso_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvTsoCaps {
    pub max_tso: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_rss_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvRssCaps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

/// `struct ibv_packet_pacing_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvPacketPacingCaps {
    pub qp_rate_limit_min: u32,
    pub qp_rate_limit_max: u32,
    pub supported_qpts: u32,
}

/// `struct ibv_tm_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvTmCaps {
    pub max_rndv_hdr_size: u32,
    pub max_num_tags: u32,
    pub flags: u32,
    pub max_ops: u32,
    pub max_sge: u32,
}

/// `struct ibv_cq_moderation_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvCqModerationCaps {
    pub max_cq_count: u16,
    pub max_cq_period: u16,
}

/// `struct ibv_pci_atomic_caps`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvPciAtomicCaps {
    pub fetch_add: u16,
    pub swap: u16,
    pub compare_swap: u16,
}

/// `struct ibv_device_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvDeviceAttrEx {
    pub orig_attr: IbvDeviceAttr,
    pub comp_mask: u32,
    pub odp_caps: IbvOdpCaps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    pub tso_caps: IbvTsoCaps,
    pub rss_caps: IbvRssCaps,
    pub max_wq_type_rq: u32,
    pub packet_pacing_caps: IbvPacketPacingCaps,
    pub raw_packet_caps: u32,
    pub tm_caps: IbvTmCaps,
    pub cq_mod_caps: IbvCqModerationCaps,
    pub max_dm_size: u64,
    pub pci_atomic_caps: IbvPciAtomicCaps,
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

/// `struct ibv_port_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvPortAttr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// Bytes of `struct _compat_ibv_port_attr` (rdma-core's
/// `libibverbs/compat-1_0.c`... the 1.1 layout up to `flags`), what the
/// exported `ibv_query_port` symbol may write: old binaries pass that.
pub const COMPAT_PORT_ATTR_LEN: usize = std::mem::offset_of!(IbvPortAttr, port_cap_flags2);

/// `union ibv_gid`: 16 bytes, 8-aligned (its `global` member is two
/// `__be64`).
#[repr(C, align(8))]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

/// `struct ibv_gid_entry`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvGidEntry {
    pub gid: IbvGid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

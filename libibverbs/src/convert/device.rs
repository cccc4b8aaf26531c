//! A device and its queries in C's form: `struct ibv_device`'s node and
//! transport types and strings, the device and port attributes, GID
//! entries.

use crate::abi::*;
use rverbs::{DeviceAttr, DeviceAttrEx, Driver, GidEntry, GidType, NodeType, PortAttr};
use std::ffi::{c_char, c_int};

/// Copies `s` into a C string member, truncated to leave the terminating
/// NUL, as libibverbs' `strncpy` does.
pub(crate) fn fill(dst: &mut [c_char], s: &str) {
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

/// `enum ibv_node_type`.
pub(crate) fn node_type(n: NodeType) -> c_int {
    match n {
        NodeType::Ca => 1,
        NodeType::Switch => 2,
        NodeType::Router => 3,
        NodeType::Rnic => 4,
        NodeType::Usnic => 5,
        NodeType::UsnicUdp => 6,
        NodeType::Unspecified => 7,
        NodeType::Unknown(_) => -1,
    }
}

/// `enum ibv_transport_type` for a node type, as libibverbs derives it.
pub(crate) fn transport(n: NodeType) -> c_int {
    match n {
        NodeType::Ca | NodeType::Switch | NodeType::Router => 0,
        NodeType::Rnic => 1,
        NodeType::Usnic => 2,
        NodeType::UsnicUdp => 3,
        NodeType::Unspecified => 4,
        NodeType::Unknown(_) => -1,
    }
}

/// `struct ibv_device_attr` of a device `driver` drives.
pub(crate) fn device_attr(driver: Driver, a: &DeviceAttr) -> IbvDeviceAttr {
    let i = |v: u32| v.min(c_int::MAX as u32) as c_int;
    let mut r = IbvDeviceAttr {
        fw_ver: [0; 64],
        node_guid: a.node_guid.to_be(),
        sys_image_guid: a.sys_image_guid.to_be(),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: i(a.max_qp),
        max_qp_wr: i(a.max_qp_wr),
        device_cap_flags: a.device_cap_flags,
        max_sge: i(a.max_sge),
        max_sge_rd: i(a.max_sge_rd),
        max_cq: i(a.max_cq),
        max_cqe: i(a.max_cqe),
        max_mr: i(a.max_mr),
        max_pd: i(a.max_pd),
        max_qp_rd_atom: i(a.max_qp_rd_atom),
        max_ee_rd_atom: i(a.max_ee_rd_atom),
        max_res_rd_atom: i(a.max_res_rd_atom),
        max_qp_init_rd_atom: i(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: i(a.max_ee_init_rd_atom),
        atomic_cap: i(a.atomic_cap),
        max_ee: i(a.max_ee),
        max_rdd: i(a.max_rdd),
        max_mw: i(a.max_mw),
        max_raw_ipv6_qp: i(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: i(a.max_raw_ethy_qp),
        max_mcast_grp: i(a.max_mcast_grp),
        max_mcast_qp_attach: i(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: i(a.max_total_mcast_qp_attach),
        max_ah: i(a.max_ah),
        max_fmr: i(a.max_fmr),
        max_map_per_fmr: i(a.max_map_per_fmr),
        max_srq: i(a.max_srq),
        max_srq_wr: i(a.max_srq_wr),
        max_srq_sge: i(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    };
    fill(&mut r.fw_ver, &driver.format_fw_ver(a.fw_ver));
    r
}

/// `struct ibv_device_attr_ex`. rverbs does not report the TSO, packet
/// pacing and PCI atomic capabilities: 0, as on rxe.
pub(crate) fn device_attr_ex(driver: Driver, a: &DeviceAttrEx) -> IbvDeviceAttrEx {
    IbvDeviceAttrEx {
        orig_attr: device_attr(driver, &a.orig),
        comp_mask: 0,
        odp_caps: IbvOdpCaps {
            general_caps: a.odp_general_caps,
            rc_odp_caps: a.odp_rc_caps,
            uc_odp_caps: a.odp_uc_caps,
            ud_odp_caps: a.odp_ud_caps,
        },
        completion_timestamp_mask: a.completion_timestamp_mask,
        hca_core_clock: a.hca_core_clock,
        device_cap_flags_ex: a.device_cap_flags_ex,
        tso_caps: IbvTsoCaps::default(),
        rss_caps: IbvRssCaps {
            supported_qpts: a.rss_supported_qpts,
            max_rwq_indirection_tables: a.max_rwq_indirection_tables,
            max_rwq_indirection_table_size: a.max_rwq_indirection_table_size,
            ..IbvRssCaps::default()
        },
        max_wq_type_rq: a.max_wq_type_rq,
        packet_pacing_caps: IbvPacketPacingCaps::default(),
        raw_packet_caps: a.raw_packet_caps,
        tm_caps: IbvTmCaps {
            max_rndv_hdr_size: a.tm_max_rndv_hdr_size,
            max_num_tags: a.tm_max_num_tags,
            flags: a.tm_flags,
            max_ops: a.tm_max_ops,
            max_sge: a.tm_max_sge,
        },
        cq_mod_caps: IbvCqModerationCaps {
            max_cq_count: a.max_cq_moderation_count,
            max_cq_period: a.max_cq_moderation_period,
        },
        max_dm_size: a.max_dm_size,
        pci_atomic_caps: IbvPciAtomicCaps::default(),
        xrc_odp_caps: a.odp_xrc_caps,
        phys_port_cnt_ex: u32::from(a.orig.phys_port_cnt),
    }
}

/// `struct ibv_port_attr`.
pub(crate) fn port_attr(p: &PortAttr) -> IbvPortAttr {
    IbvPortAttr {
        state: c_int::from(p.state),
        max_mtu: c_int::from(p.max_mtu),
        active_mtu: c_int::from(p.active_mtu),
        gid_tbl_len: p.gid_tbl_len.min(c_int::MAX as u32) as c_int,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: p.link_layer,
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2,
    }
}

/// One populated GID table entry in C's form.
pub(crate) fn gid_entry(e: &GidEntry) -> IbvGidEntry {
    IbvGidEntry {
        gid: IbvGid { raw: e.gid },
        gid_index: e.index,
        port_num: e.port,
        // enum ibv_gid_type: IB 0, RoCE v1 1, RoCE v2 2.
        gid_type: match e.gid_type {
            GidType::Ib => 0,
            GidType::RoceV1 => 1,
            GidType::RoceV2 => 2,
            GidType::Other(t) => t,
        },
        ndev_ifindex: e.netdev_ifindex,
    }
}

//! Device and port attributes (`QUERY_DEVICE(_EX)`, `QUERY_PORT`), the
//! GID table and the P_Key table. Which kernel interface answers — an
//! ioctl method, the write command, or sysfs — is the command layer's
//! choice (`cmd::port`); each query here is one call to it.

use crate::cmd;
use crate::cmd::port::Gid;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::provider::DeviceInfo;
use uverbs_abi::ioctl::{IbUverbsGidType, IbUverbsQueryPortRespEx};
use uverbs_abi::verbs as v;

/// Device attributes (`ibv_device_attr`), as the kernel reports them.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)] // each field is the ibv_device_attr member of that name
pub struct DeviceAttr {
    pub fw_ver: u64,
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: u32,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub max_ee_init_rd_atom: u32,
    pub atomic_cap: u32,
    pub max_ee: u32,
    pub max_rdd: u32,
    pub max_mw: u32,
    pub max_raw_ipv6_qp: u32,
    pub max_raw_ethy_qp: u32,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_fmr: u32,
    pub max_map_per_fmr: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// Port attributes (`ibv_port_attr`).
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)] // each field is the ibv_port_attr member of that name
pub struct PortAttr {
    pub state: u8,
    pub max_mtu: u8,
    pub active_mtu: u8,
    pub gid_tbl_len: u32,
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
    /// `port_cap_flags2` (the ioctl `QUERY_PORT` only; 0 on the write path).
    pub port_cap_flags2: u16,
    /// `active_speed_ex` (the ioctl `QUERY_PORT` only; 0 on the write path).
    pub active_speed_ex: u32,
}

/// The extended device attributes (`ibv_device_attr_ex`) beyond
/// [`DeviceAttr`], from `QUERY_DEVICE_EX`. Members the kernel's response
/// did not reach (an older kernel) are 0.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)] // each field is the ibv_device_attr_ex member of that name
pub struct DeviceAttrEx {
    /// The legacy attributes (`orig_attr`).
    pub orig: DeviceAttr,
    pub odp_general_caps: u64,
    pub odp_rc_caps: u32,
    pub odp_uc_caps: u32,
    pub odp_ud_caps: u32,
    pub odp_xrc_caps: u32,
    pub completion_timestamp_mask: u64,
    /// In kHz.
    pub hca_core_clock: u64,
    /// All 64 bits (the low 32 are `orig.device_cap_flags`).
    pub device_cap_flags_ex: u64,
    pub rss_supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub max_wq_type_rq: u32,
    pub raw_packet_caps: u32,
    pub tm_max_rndv_hdr_size: u32,
    pub tm_max_num_tags: u32,
    pub tm_flags: u32,
    pub tm_max_ops: u32,
    pub tm_max_sge: u32,
    pub max_cq_moderation_count: u16,
    pub max_cq_moderation_period: u16,
    pub max_dm_size: u64,
    /// How many bytes of the response the kernel filled.
    pub response_length: u32,
}

/// The kind of a GID table entry (`enum ib_uverbs_gid_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, no IP header).
    RoceV1,
    /// RoCE v2 (UDP/IP encapsulated).
    RoceV2,
    /// A value this crate does not know (a newer kernel's), or a sysfs
    /// type string it does not recognise (`u32::MAX`).
    Other(u32),
}

impl GidType {
    fn from_kernel(t: u32) -> GidType {
        match IbUverbsGidType(t) {
            IbUverbsGidType::IB => GidType::Ib,
            IbUverbsGidType::ROCE_V1 => GidType::RoceV1,
            IbUverbsGidType::ROCE_V2 => GidType::RoceV2,
            _ => GidType::Other(t),
        }
    }
}

/// One populated GID table entry (`ibv_gid_entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// The port.
    pub port: u32,
    /// Index in the port's table.
    pub index: u32,
    /// The GID.
    pub gid: [u8; 16],
    /// Its type.
    pub gid_type: GidType,
    /// The ifindex of the netdev it belongs to (RoCE; 0 for none, and on
    /// the sysfs path).
    pub netdev_ifindex: u32,
    /// The name of that netdev.
    pub netdev: Option<String>,
}

impl Context {
    /// Queries the device (`QUERY_DEVICE`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let r = cmd::context::query_device(&self.inner.dev)?;
        Ok(device_attr(&r))
    }

    /// Queries the device's extended attributes (`QUERY_DEVICE_EX`, the
    /// extended write command; `ibv_query_device_ex`).
    pub fn query_device_ex(&self) -> Result<DeviceAttrEx> {
        let r = cmd::context::query_device_ex(&self.inner.dev)?;
        Ok(DeviceAttrEx {
            orig: device_attr(&r.base),
            odp_general_caps: r.odp_caps.general_caps,
            odp_rc_caps: r.odp_caps.rc_odp_caps,
            odp_uc_caps: r.odp_caps.uc_odp_caps,
            odp_ud_caps: r.odp_caps.ud_odp_caps,
            odp_xrc_caps: r.xrc_odp_caps,
            completion_timestamp_mask: r.timestamp_mask,
            hca_core_clock: r.hca_core_clock,
            device_cap_flags_ex: r.device_cap_flags_ex,
            rss_supported_qpts: r.rss_caps.supported_qpts,
            max_rwq_indirection_tables: r.rss_caps.max_rwq_indirection_tables,
            max_rwq_indirection_table_size: r.rss_caps.max_rwq_indirection_table_size,
            max_wq_type_rq: r.max_wq_type_rq,
            raw_packet_caps: r.raw_packet_caps,
            tm_max_rndv_hdr_size: r.tm_caps.max_rndv_hdr_size,
            tm_max_num_tags: r.tm_caps.max_num_tags,
            tm_flags: r.tm_caps.flags,
            tm_max_ops: r.tm_caps.max_ops,
            tm_max_sge: r.tm_caps.max_sge,
            max_cq_moderation_count: r.cq_moderation_caps.max_cq_moderation_count,
            max_cq_moderation_period: r.cq_moderation_caps.max_cq_moderation_period,
            max_dm_size: r.max_dm_size,
            response_length: r.response_length,
        })
    }

    /// Queries a port: the ioctl `QUERY_PORT` (which adds
    /// `port_cap_flags2` and `active_speed_ex`), or the write command where
    /// the context uses the write path or the kernel lacks the method.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        Ok(port_attr(&cmd::port::query_port(&self.inner.dev, port)?))
    }

    /// One GID of a port: the ioctl `QUERY_GID_ENTRY`, or sysfs
    /// `ports/P/gids/I` on the write path.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16]> {
        cmd::port::query_gid(&self.inner.dev, port, index)
    }

    /// One GID table entry with its type and netdev
    /// (`ibv_query_gid_ex`): the ioctl `QUERY_GID_ENTRY`, or the port's
    /// table read from sysfs on the write path. An index with no GID is
    /// the kernel's error (ENODATA / EINVAL), or `InvalidArgument` on the
    /// sysfs path.
    pub fn query_gid_entry(&self, port: u8, index: u32) -> Result<GidEntry> {
        cmd::port::query_gid_entry(&self.inner.dev, port, index).map(gid_entry)
    }

    /// One P_Key of a port's table (`ibv_query_pkey`, which reads it from
    /// sysfs `ports/P/pkeys/I` too: uverbs has no command for it). RoCE
    /// ports have the one default P_Key, 0xffff, at index 0.
    pub fn query_pkey(&self, port: u8, index: u16) -> Result<u16> {
        cmd::port::query_pkey(&self.inner.dev, port, index)
    }

    /// Every populated GID of every port: one ioctl `QUERY_GID_TABLE`
    /// (`ibv_query_gid_table`), or sysfs on the write path. Sorted by port,
    /// then index.
    pub fn query_gid_table(&self) -> Result<Vec<GidEntry>> {
        let table = cmd::port::query_gid_table(&self.inner.dev)?;
        Ok(table.into_iter().map(gid_entry).collect())
    }

    /// The populated entries of one port's GID table.
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let mut all = self.query_gid_table()?;
        all.retain(|e| e.port == u32::from(port));
        Ok(all)
    }
}

fn gid_entry(g: Gid) -> GidEntry {
    GidEntry {
        port: g.port,
        index: g.index,
        gid: g.gid,
        gid_type: GidType::from_kernel(g.gid_type),
        netdev_ifindex: g.netdev_ifindex,
        netdev: g.netdev,
    }
}

fn device_attr(r: &v::IbUverbsQueryDeviceResp) -> DeviceAttr {
    DeviceAttr {
        fw_ver: r.fw_ver,
        // The GUIDs are big-endian on the wire (__be64).
        node_guid: u64::from_be(r.node_guid),
        sys_image_guid: u64::from_be(r.sys_image_guid),
        max_mr_size: r.max_mr_size,
        page_size_cap: r.page_size_cap,
        vendor_id: r.vendor_id,
        vendor_part_id: r.vendor_part_id,
        hw_ver: r.hw_ver,
        max_qp: r.max_qp,
        max_qp_wr: r.max_qp_wr,
        device_cap_flags: r.device_cap_flags,
        max_sge: r.max_sge,
        max_sge_rd: r.max_sge_rd,
        max_cq: r.max_cq,
        max_cqe: r.max_cqe,
        max_mr: r.max_mr,
        max_pd: r.max_pd,
        max_qp_rd_atom: r.max_qp_rd_atom,
        max_ee_rd_atom: r.max_ee_rd_atom,
        max_res_rd_atom: r.max_res_rd_atom,
        max_qp_init_rd_atom: r.max_qp_init_rd_atom,
        max_ee_init_rd_atom: r.max_ee_init_rd_atom,
        atomic_cap: r.atomic_cap,
        max_ee: r.max_ee,
        max_rdd: r.max_rdd,
        max_mw: r.max_mw,
        max_raw_ipv6_qp: r.max_raw_ipv6_qp,
        max_raw_ethy_qp: r.max_raw_ethy_qp,
        max_mcast_grp: r.max_mcast_grp,
        max_mcast_qp_attach: r.max_mcast_qp_attach,
        max_total_mcast_qp_attach: r.max_total_mcast_qp_attach,
        max_ah: r.max_ah,
        max_fmr: r.max_fmr,
        max_map_per_fmr: r.max_map_per_fmr,
        max_srq: r.max_srq,
        max_srq_wr: r.max_srq_wr,
        max_srq_sge: r.max_srq_sge,
        max_pkeys: r.max_pkeys,
        local_ca_ack_delay: r.local_ca_ack_delay,
        phys_port_cnt: r.phys_port_cnt,
    }
}

fn port_attr(ex: &IbUverbsQueryPortRespEx) -> PortAttr {
    let r = &ex.legacy_resp;
    PortAttr {
        state: r.state,
        max_mtu: r.max_mtu,
        active_mtu: r.active_mtu,
        gid_tbl_len: r.gid_tbl_len,
        port_cap_flags: r.port_cap_flags,
        max_msg_sz: r.max_msg_sz,
        bad_pkey_cntr: r.bad_pkey_cntr,
        qkey_viol_cntr: r.qkey_viol_cntr,
        pkey_tbl_len: r.pkey_tbl_len,
        lid: r.lid,
        sm_lid: r.sm_lid,
        lmc: r.lmc,
        max_vl_num: r.max_vl_num,
        sm_sl: r.sm_sl,
        subnet_timeout: r.subnet_timeout,
        init_type_reply: r.init_type_reply,
        active_width: r.active_width,
        active_speed: r.active_speed,
        phys_state: r.phys_state,
        link_layer: r.link_layer,
        flags: r.flags,
        port_cap_flags2: ex.port_cap_flags2,
        active_speed_ex: ex.active_speed_ex,
    }
}

/// What the providers ask of the device while creating objects, answered
/// by the queries above.
impl DeviceInfo for Context {
    fn sge_and_cqe_limits(&self) -> Result<(u32, u32)> {
        let d = self.query_device()?;
        Ok((d.max_sge, d.max_cqe))
    }

    fn link_layer(&self, port: u8) -> Result<u8> {
        Ok(self.query_port(port)?.link_layer)
    }

    fn gid_is_roce_v2(&self, port: u8, index: u8) -> Result<bool> {
        let table = self.gid_table(port)?;
        let e = table
            .iter()
            .find(|e| e.index == u32::from(index))
            .ok_or_else(|| Error::invalid(format!("no GID at index {index} of port {port}")))?;
        Ok(e.gid_type == GidType::RoceV2)
    }

    fn device_name(&self) -> String {
        self.device().name().to_string()
    }

    fn device_cap_flags_ex(&self) -> Result<u64> {
        if let Some(&flags) = self.inner.cap_flags_ex.get() {
            return Ok(flags);
        }
        let flags = self.query_device_ex()?.device_cap_flags_ex;
        // Two threads may both query; they get the same answer.
        Ok(*self.inner.cap_flags_ex.get_or_init(|| flags))
    }
}

//! Device and port attributes (`QUERY_DEVICE`, `QUERY_PORT`) and the GID
//! table (sysfs, which the kernel keeps in step with its own table).

use crate::context::Context;
use crate::error::{Error, Result};
use uverbs_abi::verbs as v;
use zerocopy::FromZeros;

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
}

/// The kind of a GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand (or RoCE v1, which sysfs names the same way).
    IbRoceV1,
    /// RoCE v2 (UDP encapsulated).
    RoceV2,
    /// Something else sysfs reported.
    Other,
}

/// One populated GID table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the port's table.
    pub index: u32,
    /// The GID.
    pub gid: [u8; 16],
    /// Its type.
    pub gid_type: GidType,
    /// The netdev it belongs to (RoCE).
    pub netdev: Option<String>,
}

impl Context {
    /// Queries the device (`QUERY_DEVICE`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let r: v::IbUverbsQueryDeviceResp = self.inner.cmd(
            "QUERY_DEVICE",
            v::IB_USER_VERBS_CMD_QUERY_DEVICE,
            |response| {
                let mut c = v::IbUverbsQueryDevice::new_zeroed();
                c.response = response;
                c
            },
            &[],
            &mut [],
        )?;
        Ok(DeviceAttr {
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
        })
    }

    /// Queries a port (`QUERY_PORT`).
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let r: v::IbUverbsQueryPortResp = self.inner.cmd(
            "QUERY_PORT",
            v::IB_USER_VERBS_CMD_QUERY_PORT,
            |response| {
                let mut c = v::IbUverbsQueryPort::new_zeroed();
                c.response = response;
                c.port_num = port;
                c
            },
            &[],
            &mut [],
        )?;
        Ok(PortAttr {
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
        })
    }

    /// One GID of a port (sysfs `ports/P/gids/I`).
    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16]> {
        let p = format!(
            "/sys/class/infiniband/{}/ports/{port}/gids/{index}",
            self.device().name()
        );
        let s = std::fs::read_to_string(&p).map_err(|e| Error::Io {
            what: format!("reading {p}"),
            source: e,
        })?;
        parse_gid(&s).ok_or_else(|| Error::bad_answer(format!("{p}: {s:?}")))
    }

    /// The populated entries of a port's GID table.
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let len = self.query_port(port)?.gid_tbl_len;
        let base = format!(
            "/sys/class/infiniband/{}/ports/{port}",
            self.device().name()
        );
        let mut out = Vec::new();
        for index in 0..len {
            let Ok(gid) = self.query_gid(port, index) else {
                continue;
            };
            if gid == [0; 16] {
                continue;
            }
            let ty = std::fs::read_to_string(format!("{base}/gid_attrs/types/{index}"))
                .unwrap_or_default();
            let gid_type = match ty.trim() {
                "RoCE v2" => GidType::RoceV2,
                "IB/RoCE v1" => GidType::IbRoceV1,
                _ => GidType::Other,
            };
            let netdev = std::fs::read_to_string(format!("{base}/gid_attrs/ndevs/{index}"))
                .ok()
                .map(|s| s.trim().to_string());
            out.push(GidEntry {
                index,
                gid,
                gid_type,
                netdev,
            });
        }
        Ok(out)
    }
}

/// Parses sysfs's `fe80:0000:…` GID text.
pub(crate) fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let hex: String = s.trim().split(':').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(g)
}

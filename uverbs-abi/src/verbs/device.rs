//! The device and its ports: GET_CONTEXT, QUERY_DEVICE (legacy and
//! extended, with their capability blocks), QUERY_PORT, and the values
//! their responses carry.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_enum, abi_flags, Registry};
use crate::verbs::KERNEL_ONLY;

/// `struct ib_uverbs_get_context` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_GET_CONTEXT`), without its flexible
/// `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsGetContext {
    /// `response`.
    pub response: u64,
}

/// `struct ib_uverbs_get_context_resp` of `ib_user_verbs.h`, without its
/// flexible `driver_data[]` (8-aligned, hence the `align(8)`).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsGetContextResp {
    /// `async_fd`: the new async event file descriptor.
    pub async_fd: u32,
    /// `num_comp_vectors`.
    pub num_comp_vectors: u32,
}

/// `struct ib_uverbs_query_device` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_QUERY_DEVICE`), without its flexible
/// `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryDevice {
    /// `response`.
    pub response: u64,
}

/// `struct ib_uverbs_query_device_resp` of `ib_user_verbs.h` (176 bytes).
/// `node_guid` and `sys_image_guid` are `__be64`: kept as read, see
/// [`IbUverbsQueryDeviceResp::node_guid`].
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryDeviceResp {
    /// `fw_ver`.
    pub fw_ver: u64,
    /// `node_guid`.
    pub node_guid: u64,
    /// `sys_image_guid`.
    pub sys_image_guid: u64,
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// `page_size_cap`.
    pub page_size_cap: u64,
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `vendor_part_id`.
    pub vendor_part_id: u32,
    /// `hw_ver`.
    pub hw_ver: u32,
    /// `max_qp`.
    pub max_qp: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// The low 32 bits of [`IbUverbsDeviceCapFlags`].
    pub device_cap_flags: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_sge_rd`.
    pub max_sge_rd: u32,
    /// `max_cq`.
    pub max_cq: u32,
    /// `max_cqe`.
    pub max_cqe: u32,
    /// `max_mr`.
    pub max_mr: u32,
    /// `max_pd`.
    pub max_pd: u32,
    /// `max_qp_rd_atom`.
    pub max_qp_rd_atom: u32,
    /// `max_ee_rd_atom`.
    pub max_ee_rd_atom: u32,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: u32,
    /// `max_qp_init_rd_atom`.
    pub max_qp_init_rd_atom: u32,
    /// `max_ee_init_rd_atom`.
    pub max_ee_init_rd_atom: u32,
    /// An [`IbAtomicCap`].
    pub atomic_cap: u32,
    /// `max_ee`.
    pub max_ee: u32,
    /// `max_rdd`.
    pub max_rdd: u32,
    /// `max_mw`.
    pub max_mw: u32,
    /// `max_raw_ipv6_qp`.
    pub max_raw_ipv6_qp: u32,
    /// `max_raw_ethy_qp`.
    pub max_raw_ethy_qp: u32,
    /// `max_mcast_grp`.
    pub max_mcast_grp: u32,
    /// `max_mcast_qp_attach`.
    pub max_mcast_qp_attach: u32,
    /// `max_total_mcast_qp_attach`.
    pub max_total_mcast_qp_attach: u32,
    /// `max_ah`.
    pub max_ah: u32,
    /// `max_fmr`.
    pub max_fmr: u32,
    /// `max_map_per_fmr`.
    pub max_map_per_fmr: u32,
    /// `max_srq`.
    pub max_srq: u32,
    /// `max_srq_wr`.
    pub max_srq_wr: u32,
    /// `max_srq_sge`.
    pub max_srq_sge: u32,
    /// `max_pkeys`.
    pub max_pkeys: u16,
    /// `local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
    /// `reserved`.
    pub reserved: [u8; 4],
}

impl IbUverbsQueryDeviceResp {
    /// `node_guid` in host order (the kernel sends it big-endian).
    pub fn node_guid(&self) -> u64 {
        u64::from_be(self.node_guid)
    }

    /// `sys_image_guid` in host order.
    pub fn sys_image_guid(&self) -> u64 {
        u64::from_be(self.sys_image_guid)
    }
}

/// `struct ib_uverbs_ex_query_device` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_EX_CMD_QUERY_DEVICE`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExQueryDevice {
    /// `comp_mask`: 0.
    pub comp_mask: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_odp_caps` of `ib_user_verbs.h`: on-demand paging.
/// The C anonymous `per_transport_caps` struct is flattened into its
/// three members.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsOdpCaps {
    /// `general_caps`: [`IbOdpGeneralCaps`].
    pub general_caps: u64,
    /// `per_transport_caps.rc_odp_caps`: [`IbOdpTransportCaps`].
    pub rc_odp_caps: u32,
    /// `per_transport_caps.uc_odp_caps`.
    pub uc_odp_caps: u32,
    /// `per_transport_caps.ud_odp_caps`.
    pub ud_odp_caps: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_rss_caps` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsRssCaps {
    /// `supported_qpts`: bit `1 << qp_type` per QP type.
    pub supported_qpts: u32,
    /// `max_rwq_indirection_tables`.
    pub max_rwq_indirection_tables: u32,
    /// `max_rwq_indirection_table_size`.
    pub max_rwq_indirection_table_size: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_tm_caps` of `ib_user_verbs.h`: tag matching.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsTmCaps {
    /// `max_rndv_hdr_size`.
    pub max_rndv_hdr_size: u32,
    /// `max_num_tags`.
    pub max_num_tags: u32,
    /// `flags`.
    pub flags: u32,
    /// `max_ops`.
    pub max_ops: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_cq_moderation_caps` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCqModerationCaps {
    /// `max_cq_moderation_count`.
    pub max_cq_moderation_count: u16,
    /// `max_cq_moderation_period` (microseconds).
    pub max_cq_moderation_period: u16,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_query_device_resp` of `ib_user_verbs.h` (304
/// bytes). The kernel fills `response_length` bytes and zeroes nothing
/// beyond what the caller's buffer holds.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExQueryDeviceResp {
    /// `base`: the legacy response.
    pub base: IbUverbsQueryDeviceResp,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`: how many bytes of this struct the kernel wrote.
    pub response_length: u32,
    /// `odp_caps`.
    pub odp_caps: IbUverbsOdpCaps,
    /// `timestamp_mask`.
    pub timestamp_mask: u64,
    /// `hca_core_clock` (kHz).
    pub hca_core_clock: u64,
    /// `device_cap_flags_ex`: [`IbUverbsDeviceCapFlags`].
    pub device_cap_flags_ex: u64,
    /// `rss_caps`.
    pub rss_caps: IbUverbsRssCaps,
    /// `max_wq_type_rq`.
    pub max_wq_type_rq: u32,
    /// `raw_packet_caps`: [`IbUverbsRawPacketCaps`].
    pub raw_packet_caps: u32,
    /// `tm_caps`.
    pub tm_caps: IbUverbsTmCaps,
    /// `cq_moderation_caps`.
    pub cq_moderation_caps: IbUverbsCqModerationCaps,
    /// `max_dm_size`.
    pub max_dm_size: u64,
    /// `xrc_odp_caps`: [`IbOdpTransportCaps`].
    pub xrc_odp_caps: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_query_port` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_QUERY_PORT`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryPort {
    /// `response`.
    pub response: u64,
    /// `port_num` (from 1).
    pub port_num: u8,
    /// `reserved`.
    pub reserved: [u8; 7],
}

/// `struct ib_uverbs_query_port_resp` of `ib_user_verbs.h` (40 bytes).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryPortResp {
    /// `port_cap_flags`:
    /// [`IbUverbsQueryPortCapFlags`](crate::ioctl::IbUverbsQueryPortCapFlags).
    pub port_cap_flags: u32,
    /// `max_msg_sz`.
    pub max_msg_sz: u32,
    /// `bad_pkey_cntr`.
    pub bad_pkey_cntr: u32,
    /// `qkey_viol_cntr`.
    pub qkey_viol_cntr: u32,
    /// `gid_tbl_len`.
    pub gid_tbl_len: u32,
    /// `pkey_tbl_len`.
    pub pkey_tbl_len: u16,
    /// `lid`.
    pub lid: u16,
    /// `sm_lid`.
    pub sm_lid: u16,
    /// `state`: an [`IbPortState`].
    pub state: u8,
    /// `max_mtu`: an [`IbMtu`].
    pub max_mtu: u8,
    /// `active_mtu`: an [`IbMtu`].
    pub active_mtu: u8,
    /// `lmc`.
    pub lmc: u8,
    /// `max_vl_num`.
    pub max_vl_num: u8,
    /// `sm_sl`.
    pub sm_sl: u8,
    /// `subnet_timeout`.
    pub subnet_timeout: u8,
    /// `init_type_reply`.
    pub init_type_reply: u8,
    /// `active_width`.
    pub active_width: u8,
    /// `active_speed`.
    pub active_speed: u8,
    /// `phys_state`.
    pub phys_state: u8,
    /// `link_layer`: an [`IbLinkLayer`].
    pub link_layer: u8,
    /// `flags`:
    /// [`IbUverbsQueryPortFlags`](crate::ioctl::IbUverbsQueryPortFlags).
    pub flags: u8,
    /// `reserved`.
    pub reserved: u8,
}

abi_flags! {
    /// `enum ib_uverbs_device_cap_flags` of `ib_user_verbs.h`: the
    /// `device_cap_flags` (low half) and `device_cap_flags_ex` of
    /// QUERY_DEVICE. Bits 9, 15, 16, 19, 22, 27, 30–33, 35 and 37 may be
    /// set by old kernels and mean nothing.
    pub struct IbUverbsDeviceCapFlags: u64;
    /// Resizing a QP's max WR is supported.
    RESIZE_MAX_WR = 1 << 0 => "IB_UVERBS_DEVICE_RESIZE_MAX_WR";
    /// Bad P_Key counter.
    BAD_PKEY_CNTR = 1 << 1 => "IB_UVERBS_DEVICE_BAD_PKEY_CNTR";
    /// Bad Q_Key counter.
    BAD_QKEY_CNTR = 1 << 2 => "IB_UVERBS_DEVICE_BAD_QKEY_CNTR";
    /// Raw multicast.
    RAW_MULTI = 1 << 3 => "IB_UVERBS_DEVICE_RAW_MULTI";
    /// Automatic path migration.
    AUTO_PATH_MIG = 1 << 4 => "IB_UVERBS_DEVICE_AUTO_PATH_MIG";
    /// Changing a QP's physical port.
    CHANGE_PHY_PORT = 1 << 5 => "IB_UVERBS_DEVICE_CHANGE_PHY_PORT";
    /// UD address vectors' port is enforced.
    UD_AV_PORT_ENFORCE = 1 << 6 => "IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE";
    /// Modify QP honours `cur_qp_state`.
    CURR_QP_STATE_MOD = 1 << 7 => "IB_UVERBS_DEVICE_CURR_QP_STATE_MOD";
    /// Ports can be shut down.
    SHUTDOWN_PORT = 1 << 8 => "IB_UVERBS_DEVICE_SHUTDOWN_PORT";
    /// Port active events.
    PORT_ACTIVE_EVENT = 1 << 10 => "IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT";
    /// System image GUID.
    SYS_IMAGE_GUID = 1 << 11 => "IB_UVERBS_DEVICE_SYS_IMAGE_GUID";
    /// RC RNR NAK generation.
    RC_RNR_NAK_GEN = 1 << 12 => "IB_UVERBS_DEVICE_RC_RNR_NAK_GEN";
    /// SRQs can be resized.
    SRQ_RESIZE = 1 << 13 => "IB_UVERBS_DEVICE_SRQ_RESIZE";
    /// N-notification CQs.
    N_NOTIFY_CQ = 1 << 14 => "IB_UVERBS_DEVICE_N_NOTIFY_CQ";
    /// Memory windows.
    MEM_WINDOW = 1 << 17 => "IB_UVERBS_DEVICE_MEM_WINDOW";
    /// UD IP checksum offload.
    UD_IP_CSUM = 1 << 18 => "IB_UVERBS_DEVICE_UD_IP_CSUM";
    /// XRC.
    XRC = 1 << 20 => "IB_UVERBS_DEVICE_XRC";
    /// Memory management extensions.
    MEM_MGT_EXTENSIONS = 1 << 21 => "IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS";
    /// Type 2A memory windows.
    MEM_WINDOW_TYPE_2A = 1 << 23 => "IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A";
    /// Type 2B memory windows.
    MEM_WINDOW_TYPE_2B = 1 << 24 => "IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B";
    /// RC IP checksum offload.
    RC_IP_CSUM = 1 << 25 => "IB_UVERBS_DEVICE_RC_IP_CSUM";
    /// Deprecated: see [`IbUverbsRawPacketCaps::IP_CSUM`].
    RAW_IP_CSUM = 1 << 26 => "IB_UVERBS_DEVICE_RAW_IP_CSUM";
    /// Managed flow steering.
    MANAGED_FLOW_STEERING = 1 << 29 => "IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING";
    /// Deprecated: see [`IbUverbsRawPacketCaps::SCATTER_FCS`].
    RAW_SCATTER_FCS = 1 << 34 => "IB_UVERBS_DEVICE_RAW_SCATTER_FCS";
    /// PCI write end padding.
    PCI_WRITE_END_PADDING = 1 << 36 => "IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING";
    /// FLUSH to global visibility.
    FLUSH_GLOBAL = 1 << 38 => "IB_UVERBS_DEVICE_FLUSH_GLOBAL"
        newer "added in v6.2 (RDMA FLUSH)";
    /// FLUSH to persistence.
    FLUSH_PERSISTENT = 1 << 39 => "IB_UVERBS_DEVICE_FLUSH_PERSISTENT"
        newer "added in v6.2 (RDMA FLUSH)";
    /// ATOMIC WRITE.
    ATOMIC_WRITE = 1 << 40 => "IB_UVERBS_DEVICE_ATOMIC_WRITE"
        newer "added in v6.2 (RDMA ATOMIC WRITE)";
}

abi_flags! {
    /// `enum ib_uverbs_raw_packet_caps` of `ib_user_verbs.h`.
    pub struct IbUverbsRawPacketCaps: u32;
    /// C-VLAN stripping.
    CVLAN_STRIPPING = 1 << 0 => "IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING";
    /// FCS scattering.
    SCATTER_FCS = 1 << 1 => "IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS";
    /// IP checksum offload.
    IP_CSUM = 1 << 2 => "IB_UVERBS_RAW_PACKET_CAP_IP_CSUM";
    /// Delay drop.
    DELAY_DROP = 1 << 3 => "IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP";
}

abi_flags! {
    /// `enum ib_odp_general_cap_bits` (kernel-internal,
    /// `include/rdma/ib_verbs.h`): `odp_caps.general_caps`.
    pub struct IbOdpGeneralCaps: u64;
    /// On-demand paging.
    SUPPORT = 1 << 0 => "IB_ODP_SUPPORT" ibv "IBV_ODP_SUPPORT" newer KERNEL_ONLY;
    /// Implicit (whole address space) ODP MRs.
    SUPPORT_IMPLICIT = 1 << 1 => "IB_ODP_SUPPORT_IMPLICIT"
        ibv "IBV_ODP_SUPPORT_IMPLICIT" newer KERNEL_ONLY;
}

abi_flags! {
    /// `enum ib_odp_transport_cap_bits` (kernel-internal,
    /// `include/rdma/ib_verbs.h`): the per-transport ODP caps.
    pub struct IbOdpTransportCaps: u32;
    /// Send.
    SEND = 1 << 0 => "IB_ODP_SUPPORT_SEND" ibv "IBV_ODP_SUPPORT_SEND" newer KERNEL_ONLY;
    /// Receive.
    RECV = 1 << 1 => "IB_ODP_SUPPORT_RECV" ibv "IBV_ODP_SUPPORT_RECV" newer KERNEL_ONLY;
    /// RDMA write.
    WRITE = 1 << 2 => "IB_ODP_SUPPORT_WRITE" ibv "IBV_ODP_SUPPORT_WRITE" newer KERNEL_ONLY;
    /// RDMA read.
    READ = 1 << 3 => "IB_ODP_SUPPORT_READ" ibv "IBV_ODP_SUPPORT_READ" newer KERNEL_ONLY;
    /// Atomics.
    ATOMIC = 1 << 4 => "IB_ODP_SUPPORT_ATOMIC" ibv "IBV_ODP_SUPPORT_ATOMIC" newer KERNEL_ONLY;
    /// SRQ receive.
    SRQ_RECV = 1 << 5 => "IB_ODP_SUPPORT_SRQ_RECV"
        ibv "IBV_ODP_SUPPORT_SRQ_RECV" newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_atomic_cap` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `atomic_cap` of QUERY_DEVICE.
    pub struct IbAtomicCap(u32);
    /// No atomics.
    NONE = 0 => "IB_ATOMIC_NONE" ibv "IBV_ATOMIC_NONE" newer KERNEL_ONLY;
    /// Atomic with respect to this HCA only.
    HCA = 1 => "IB_ATOMIC_HCA" ibv "IBV_ATOMIC_HCA" newer KERNEL_ONLY;
    /// Atomic with respect to every agent.
    GLOB = 2 => "IB_ATOMIC_GLOB" ibv "IBV_ATOMIC_GLOB" newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_port_state` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `state` of QUERY_PORT.
    pub struct IbPortState(u8);
    /// No state change.
    NOP = 0 => "IB_PORT_NOP" ibv "IBV_PORT_NOP" newer KERNEL_ONLY;
    /// Down.
    DOWN = 1 => "IB_PORT_DOWN" ibv "IBV_PORT_DOWN" newer KERNEL_ONLY;
    /// Initialising.
    INIT = 2 => "IB_PORT_INIT" ibv "IBV_PORT_INIT" newer KERNEL_ONLY;
    /// Armed.
    ARMED = 3 => "IB_PORT_ARMED" ibv "IBV_PORT_ARMED" newer KERNEL_ONLY;
    /// Active.
    ACTIVE = 4 => "IB_PORT_ACTIVE" ibv "IBV_PORT_ACTIVE" newer KERNEL_ONLY;
    /// Active, deferred.
    ACTIVE_DEFER = 5 => "IB_PORT_ACTIVE_DEFER" ibv "IBV_PORT_ACTIVE_DEFER" newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_mtu` (kernel-internal, `include/rdma/ib_verbs.h`): the
    /// port MTUs of QUERY_PORT and `path_mtu` of a QP.
    pub struct IbMtu(u8);
    /// 256 bytes.
    MTU_256 = 1 => "IB_MTU_256" ibv "IBV_MTU_256" newer KERNEL_ONLY;
    /// 512 bytes.
    MTU_512 = 2 => "IB_MTU_512" ibv "IBV_MTU_512" newer KERNEL_ONLY;
    /// 1024 bytes.
    MTU_1024 = 3 => "IB_MTU_1024" ibv "IBV_MTU_1024" newer KERNEL_ONLY;
    /// 2048 bytes.
    MTU_2048 = 4 => "IB_MTU_2048" ibv "IBV_MTU_2048" newer KERNEL_ONLY;
    /// 4096 bytes.
    MTU_4096 = 5 => "IB_MTU_4096" ibv "IBV_MTU_4096" newer KERNEL_ONLY;
}

impl IbMtu {
    /// The MTU in bytes, or `None` for an unknown value.
    pub const fn bytes(self) -> Option<u32> {
        match self.0 {
            1..=5 => Some(128 << self.0),
            _ => None,
        }
    }
}

abi_enum! {
    /// `enum rdma_link_layer` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `link_layer` of QUERY_PORT.
    pub struct IbLinkLayer(u8);
    /// Unspecified (treated as InfiniBand).
    UNSPECIFIED = 0 => "IB_LINK_LAYER_UNSPECIFIED"
        ibv "IBV_LINK_LAYER_UNSPECIFIED" newer KERNEL_ONLY;
    /// InfiniBand.
    INFINIBAND = 1 => "IB_LINK_LAYER_INFINIBAND"
        ibv "IBV_LINK_LAYER_INFINIBAND" newer KERNEL_ONLY;
    /// Ethernet (RoCE, iWARP).
    ETHERNET = 2 => "IB_LINK_LAYER_ETHERNET" ibv "IBV_LINK_LAYER_ETHERNET" newer KERNEL_ONLY;
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsGetContext => "struct ib_uverbs_get_context" {
            response => "response",
        }),
        crate::c_layout!(IbUverbsGetContextResp => "struct ib_uverbs_get_context_resp" {
            async_fd => "async_fd",
            num_comp_vectors => "num_comp_vectors",
        }),
        crate::c_layout!(IbUverbsQueryDevice => "struct ib_uverbs_query_device" {
            response => "response",
        }),
        crate::c_layout!(IbUverbsQueryDeviceResp => "struct ib_uverbs_query_device_resp" {
            fw_ver => "fw_ver", node_guid => "node_guid", sys_image_guid => "sys_image_guid",
            max_mr_size => "max_mr_size", page_size_cap => "page_size_cap",
            vendor_id => "vendor_id", vendor_part_id => "vendor_part_id", hw_ver => "hw_ver",
            max_qp => "max_qp", max_qp_wr => "max_qp_wr", device_cap_flags => "device_cap_flags",
            max_sge => "max_sge", max_sge_rd => "max_sge_rd", max_cq => "max_cq",
            max_cqe => "max_cqe", max_mr => "max_mr", max_pd => "max_pd",
            max_qp_rd_atom => "max_qp_rd_atom", max_ee_rd_atom => "max_ee_rd_atom",
            max_res_rd_atom => "max_res_rd_atom", max_qp_init_rd_atom => "max_qp_init_rd_atom",
            max_ee_init_rd_atom => "max_ee_init_rd_atom", atomic_cap => "atomic_cap",
            max_ee => "max_ee", max_rdd => "max_rdd", max_mw => "max_mw",
            max_raw_ipv6_qp => "max_raw_ipv6_qp", max_raw_ethy_qp => "max_raw_ethy_qp",
            max_mcast_grp => "max_mcast_grp", max_mcast_qp_attach => "max_mcast_qp_attach",
            max_total_mcast_qp_attach => "max_total_mcast_qp_attach", max_ah => "max_ah",
            max_fmr => "max_fmr", max_map_per_fmr => "max_map_per_fmr", max_srq => "max_srq",
            max_srq_wr => "max_srq_wr", max_srq_sge => "max_srq_sge", max_pkeys => "max_pkeys",
            local_ca_ack_delay => "local_ca_ack_delay", phys_port_cnt => "phys_port_cnt",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExQueryDevice => "struct ib_uverbs_ex_query_device" {
            comp_mask => "comp_mask",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsOdpCaps => "struct ib_uverbs_odp_caps" {
            general_caps => "general_caps",
            rc_odp_caps => "per_transport_caps.rc_odp_caps",
            uc_odp_caps => "per_transport_caps.uc_odp_caps",
            ud_odp_caps => "per_transport_caps.ud_odp_caps",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsRssCaps => "struct ib_uverbs_rss_caps" {
            supported_qpts => "supported_qpts",
            max_rwq_indirection_tables => "max_rwq_indirection_tables",
            max_rwq_indirection_table_size => "max_rwq_indirection_table_size",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsTmCaps => "struct ib_uverbs_tm_caps" {
            max_rndv_hdr_size => "max_rndv_hdr_size",
            max_num_tags => "max_num_tags",
            flags => "flags",
            max_ops => "max_ops",
            max_sge => "max_sge",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsCqModerationCaps => "struct ib_uverbs_cq_moderation_caps" {
            max_cq_moderation_count => "max_cq_moderation_count",
            max_cq_moderation_period => "max_cq_moderation_period",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExQueryDeviceResp => "struct ib_uverbs_ex_query_device_resp" {
            base => "base",
            comp_mask => "comp_mask",
            response_length => "response_length",
            odp_caps => "odp_caps",
            timestamp_mask => "timestamp_mask",
            hca_core_clock => "hca_core_clock",
            device_cap_flags_ex => "device_cap_flags_ex",
            rss_caps => "rss_caps",
            max_wq_type_rq => "max_wq_type_rq",
            raw_packet_caps => "raw_packet_caps",
            tm_caps => "tm_caps",
            cq_moderation_caps => "cq_moderation_caps",
            max_dm_size => "max_dm_size",
            xrc_odp_caps => "xrc_odp_caps",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsQueryPort => "struct ib_uverbs_query_port" {
            response => "response",
            port_num => "port_num",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsQueryPortResp => "struct ib_uverbs_query_port_resp" {
            port_cap_flags => "port_cap_flags", max_msg_sz => "max_msg_sz",
            bad_pkey_cntr => "bad_pkey_cntr", qkey_viol_cntr => "qkey_viol_cntr",
            gid_tbl_len => "gid_tbl_len", pkey_tbl_len => "pkey_tbl_len", lid => "lid",
            sm_lid => "sm_lid", state => "state", max_mtu => "max_mtu",
            active_mtu => "active_mtu", lmc => "lmc", max_vl_num => "max_vl_num",
            sm_sl => "sm_sl", subnet_timeout => "subnet_timeout",
            init_type_reply => "init_type_reply", active_width => "active_width",
            active_speed => "active_speed", phys_state => "phys_state",
            link_layer => "link_layer", flags => "flags", reserved => "reserved",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    IbUverbsDeviceCapFlags::register(r);
    IbUverbsRawPacketCaps::register(r);
    IbOdpGeneralCaps::register(r);
    IbOdpTransportCaps::register(r);
    IbAtomicCap::register(r);
    IbPortState::register(r);
    IbMtu::register(r);
    IbLinkLayer::register(r);
}

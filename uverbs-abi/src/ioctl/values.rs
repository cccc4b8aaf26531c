//! The values and structs of `ib_user_ioctl_verbs.h`: access flags, QP and
//! SRQ types, QP create flags, port capability flags, driver ids, GID
//! types, `struct ib_uverbs_query_port_resp_ex`, `struct ib_uverbs_qp_cap`,
//! `struct ib_uverbs_gid_entry`. (The flow-action ESP structs are left
//! out: rverbs does no flow steering.)

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_consts, abi_enum, abi_flags, Registry};
use crate::verbs::IbUverbsQueryPortResp;

abi_consts! { register_consts;
    /// `IB_UVERBS_ACCESS_OPTIONAL_FIRST`: the first access bit a kernel
    /// may ignore when it does not know it.
    IB_UVERBS_ACCESS_OPTIONAL_FIRST: u32 = 1 << 20;
    /// `IB_UVERBS_ACCESS_OPTIONAL_LAST`: the last such bit.
    IB_UVERBS_ACCESS_OPTIONAL_LAST: u32 = 1 << 29;
    /// `IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM`.
    IB_UVERBS_FLOW_ACTION_ESP_KEYMAT_AES_GCM: u32 = 0;
    /// `IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ`.
    IB_UVERBS_FLOW_ACTION_IV_ALGO_SEQ: u32 = 0;
    /// `IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE`.
    IB_UVERBS_FLOW_ACTION_ESP_REPLAY_NONE: u32 = 0;
    /// `IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP`.
    IB_UVERBS_FLOW_ACTION_ESP_REPLAY_BMP: u32 = 1;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO` (the default).
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO: u32 = 0;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD`.
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD: u32 = 1 << 0;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL` (the default).
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TUNNEL: u32 = 0;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT`.
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_TRANSPORT: u32 = 1 << 1;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT` (the default).
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_DECRYPT: u32 = 0;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT`.
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ENCRYPT: u32 = 1 << 2;
    /// `IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW`.
    IB_UVERBS_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW: u32 = 1 << 3;
    /// `IB_UVERBS_READ_COUNTERS_PREFER_CACHED`
    /// (`enum ib_uverbs_read_counters_flags`).
    IB_UVERBS_READ_COUNTERS_PREFER_CACHED: u32 = 1 << 0;
}

abi_flags! {
    /// `enum ib_uverbs_core_support`: what
    /// `UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT` reports.
    pub struct IbUverbsCoreSupport: u64;
    /// Unknown optional access flags are ignored, not refused.
    OPTIONAL_MR_ACCESS = 1 << 0 => "IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS";
}

abi_flags! {
    /// `enum ib_uverbs_access_flags`: MR and QP access rights.
    pub struct IbUverbsAccessFlags: u32;
    /// Local write.
    LOCAL_WRITE = 1 << 0 => "IB_UVERBS_ACCESS_LOCAL_WRITE" ibv "IBV_ACCESS_LOCAL_WRITE";
    /// Remote write.
    REMOTE_WRITE = 1 << 1 => "IB_UVERBS_ACCESS_REMOTE_WRITE" ibv "IBV_ACCESS_REMOTE_WRITE";
    /// Remote read.
    REMOTE_READ = 1 << 2 => "IB_UVERBS_ACCESS_REMOTE_READ" ibv "IBV_ACCESS_REMOTE_READ";
    /// Remote atomics.
    REMOTE_ATOMIC = 1 << 3 => "IB_UVERBS_ACCESS_REMOTE_ATOMIC" ibv "IBV_ACCESS_REMOTE_ATOMIC";
    /// Memory window binding.
    MW_BIND = 1 << 4 => "IB_UVERBS_ACCESS_MW_BIND" ibv "IBV_ACCESS_MW_BIND";
    /// Zero-based addressing.
    ZERO_BASED = 1 << 5 => "IB_UVERBS_ACCESS_ZERO_BASED" ibv "IBV_ACCESS_ZERO_BASED";
    /// On-demand paging.
    ON_DEMAND = 1 << 6 => "IB_UVERBS_ACCESS_ON_DEMAND" ibv "IBV_ACCESS_ON_DEMAND";
    /// Huge pages.
    HUGETLB = 1 << 7 => "IB_UVERBS_ACCESS_HUGETLB" ibv "IBV_ACCESS_HUGETLB";
    /// FLUSH to global visibility.
    FLUSH_GLOBAL = 1 << 8 => "IB_UVERBS_ACCESS_FLUSH_GLOBAL"
        newer "added in v6.2 (RDMA FLUSH)";
    /// FLUSH to persistence.
    FLUSH_PERSISTENT = 1 << 9 => "IB_UVERBS_ACCESS_FLUSH_PERSISTENT"
        newer "added in v6.2 (RDMA FLUSH)";
    /// Relaxed PCI ordering (optional).
    RELAXED_ORDERING = 1 << 20 => "IB_UVERBS_ACCESS_RELAXED_ORDERING"
        ibv "IBV_ACCESS_RELAXED_ORDERING";
    /// The optional bits, 20 to 29.
    OPTIONAL_RANGE = 0x3ff0_0000 => "IB_UVERBS_ACCESS_OPTIONAL_RANGE";
}

abi_enum! {
    /// `enum ib_uverbs_srq_type`.
    pub struct IbUverbsSrqType(u32);
    /// A plain SRQ.
    BASIC = 0 => "IB_UVERBS_SRQT_BASIC" ibv "IBV_SRQT_BASIC";
    /// An XRC SRQ.
    XRC = 1 => "IB_UVERBS_SRQT_XRC" ibv "IBV_SRQT_XRC";
    /// A tag-matching SRQ.
    TM = 2 => "IB_UVERBS_SRQT_TM" ibv "IBV_SRQT_TM";
}

abi_enum! {
    /// `enum ib_uverbs_wq_type`.
    pub struct IbUverbsWqType(u32);
    /// A receive WQ.
    RQ = 0 => "IB_UVERBS_WQT_RQ";
}

abi_flags! {
    /// `enum ib_uverbs_wq_flags`.
    pub struct IbUverbsWqFlags: u32;
    /// C-VLAN stripping.
    CVLAN_STRIPPING = 1 << 0 => "IB_UVERBS_WQ_FLAGS_CVLAN_STRIPPING";
    /// FCS scattering.
    SCATTER_FCS = 1 << 1 => "IB_UVERBS_WQ_FLAGS_SCATTER_FCS";
    /// Delay drop.
    DELAY_DROP = 1 << 2 => "IB_UVERBS_WQ_FLAGS_DELAY_DROP";
    /// PCI write end padding.
    PCI_WRITE_END_PADDING = 1 << 3 => "IB_UVERBS_WQ_FLAGS_PCI_WRITE_END_PADDING";
}

abi_enum! {
    /// `enum ib_uverbs_qp_type`: the QP types user space may create.
    pub struct IbUverbsQpType(u32);
    /// Reliable connected.
    RC = 2 => "IB_UVERBS_QPT_RC" ibv "IBV_QPT_RC";
    /// Unreliable connected.
    UC = 3 => "IB_UVERBS_QPT_UC" ibv "IBV_QPT_UC";
    /// Unreliable datagram.
    UD = 4 => "IB_UVERBS_QPT_UD" ibv "IBV_QPT_UD";
    /// Raw packet.
    RAW_PACKET = 8 => "IB_UVERBS_QPT_RAW_PACKET" ibv "IBV_QPT_RAW_PACKET";
    /// XRC initiator.
    XRC_INI = 9 => "IB_UVERBS_QPT_XRC_INI" ibv "IBV_QPT_XRC_SEND";
    /// XRC target.
    XRC_TGT = 10 => "IB_UVERBS_QPT_XRC_TGT" ibv "IBV_QPT_XRC_RECV";
    /// A driver-specific type.
    DRIVER = 0xff => "IB_UVERBS_QPT_DRIVER" ibv "IBV_QPT_DRIVER";
}

abi_flags! {
    /// `enum ib_uverbs_qp_create_flags`.
    pub struct IbUverbsQpCreateFlags: u32;
    /// No multicast loopback.
    BLOCK_MULTICAST_LOOPBACK = 1 << 1 => "IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK";
    /// FCS scattering.
    SCATTER_FCS = 1 << 8 => "IB_UVERBS_QP_CREATE_SCATTER_FCS";
    /// C-VLAN stripping.
    CVLAN_STRIPPING = 1 << 9 => "IB_UVERBS_QP_CREATE_CVLAN_STRIPPING";
    /// PCI write end padding.
    PCI_WRITE_END_PADDING = 1 << 11 => "IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING";
    /// Signal every send.
    SQ_SIG_ALL = 1 << 12 => "IB_UVERBS_QP_CREATE_SQ_SIG_ALL";
}

abi_flags! {
    /// `enum ib_uverbs_query_port_cap_flags`: `port_cap_flags` of
    /// QUERY_PORT.
    pub struct IbUverbsQueryPortCapFlags: u32;
    /// Subnet manager.
    SM = 1 << 1 => "IB_UVERBS_PCF_SM";
    /// Notice supported.
    NOTICE_SUP = 1 << 2 => "IB_UVERBS_PCF_NOTICE_SUP";
    /// Trap supported.
    TRAP_SUP = 1 << 3 => "IB_UVERBS_PCF_TRAP_SUP";
    /// Optional IPD supported.
    OPT_IPD_SUP = 1 << 4 => "IB_UVERBS_PCF_OPT_IPD_SUP";
    /// Automatic migration supported.
    AUTO_MIGR_SUP = 1 << 5 => "IB_UVERBS_PCF_AUTO_MIGR_SUP";
    /// SL map supported.
    SL_MAP_SUP = 1 << 6 => "IB_UVERBS_PCF_SL_MAP_SUP";
    /// M_Key NVRAM.
    MKEY_NVRAM = 1 << 7 => "IB_UVERBS_PCF_MKEY_NVRAM";
    /// P_Key NVRAM.
    PKEY_NVRAM = 1 << 8 => "IB_UVERBS_PCF_PKEY_NVRAM";
    /// LED info supported.
    LED_INFO_SUP = 1 << 9 => "IB_UVERBS_PCF_LED_INFO_SUP";
    /// SM disabled.
    SM_DISABLED = 1 << 10 => "IB_UVERBS_PCF_SM_DISABLED";
    /// System image GUID supported.
    SYS_IMAGE_GUID_SUP = 1 << 11 => "IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP";
    /// P_Key switch external port trap supported.
    PKEY_SW_EXT_PORT_TRAP_SUP = 1 << 12 => "IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP";
    /// Extended speeds supported.
    EXTENDED_SPEEDS_SUP = 1 << 14 => "IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP";
    /// CM supported.
    CM_SUP = 1 << 16 => "IB_UVERBS_PCF_CM_SUP";
    /// SNMP tunnelling supported.
    SNMP_TUNNEL_SUP = 1 << 17 => "IB_UVERBS_PCF_SNMP_TUNNEL_SUP";
    /// Reinit supported.
    REINIT_SUP = 1 << 18 => "IB_UVERBS_PCF_REINIT_SUP";
    /// Device management supported.
    DEVICE_MGMT_SUP = 1 << 19 => "IB_UVERBS_PCF_DEVICE_MGMT_SUP";
    /// Vendor class supported.
    VENDOR_CLASS_SUP = 1 << 20 => "IB_UVERBS_PCF_VENDOR_CLASS_SUP";
    /// DR notice supported.
    DR_NOTICE_SUP = 1 << 21 => "IB_UVERBS_PCF_DR_NOTICE_SUP";
    /// Capability mask notice supported.
    CAP_MASK_NOTICE_SUP = 1 << 22 => "IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP";
    /// Boot management supported.
    BOOT_MGMT_SUP = 1 << 23 => "IB_UVERBS_PCF_BOOT_MGMT_SUP";
    /// Link latency supported.
    LINK_LATENCY_SUP = 1 << 24 => "IB_UVERBS_PCF_LINK_LATENCY_SUP";
    /// Client reregistration supported.
    CLIENT_REG_SUP = 1 << 25 => "IB_UVERBS_PCF_CLIENT_REG_SUP";
    /// Link speed/width table supported.
    LINK_SPEED_WIDTH_TABLE_SUP = 1 << 27 => "IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP";
    /// Vendor-specific MADs table supported.
    VENDOR_SPECIFIC_MADS_TABLE_SUP = 1 << 28 => "IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP";
    /// Multicast P_Key trap suppression supported.
    MCAST_PKEY_TRAP_SUPPRESSION_SUP = 1 << 29
        => "IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP";
    /// Multicast FDB top supported.
    MCAST_FDB_TOP_SUP = 1 << 30 => "IB_UVERBS_PCF_MCAST_FDB_TOP_SUP";
    /// Hierarchy info supported.
    HIERARCHY_INFO_SUP = 1 << 31 => "IB_UVERBS_PCF_HIERARCHY_INFO_SUP";
    /// The GIDs are IP based (RoCE); an internal flag, not an IBA one.
    IP_BASED_GIDS = 1 << 26 => "IB_UVERBS_PCF_IP_BASED_GIDS";
}

abi_flags! {
    /// `enum ib_uverbs_query_port_flags`: `flags` of QUERY_PORT.
    pub struct IbUverbsQueryPortFlags: u8;
    /// Address handles on this port need a GRH (RoCE).
    GRH_REQUIRED = 1 << 0 => "IB_UVERBS_QPF_GRH_REQUIRED";
}

abi_enum! {
    /// `enum ib_uverbs_advise_mr_advice`.
    pub struct IbUverbsAdviseMrAdvice(u32);
    /// Prefetch for reading.
    PREFETCH = 0 => "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH";
    /// Prefetch for writing.
    PREFETCH_WRITE = 1 => "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE";
    /// Prefetch without faulting.
    PREFETCH_NO_FAULT = 2 => "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT";
}

abi_flags! {
    /// `enum ib_uverbs_advise_mr_flag`.
    pub struct IbUverbsAdviseMrFlag: u32;
    /// Wait for the advice to complete.
    FLUSH = 1 << 0 => "IB_UVERBS_ADVISE_MR_FLAG_FLUSH";
}

abi_enum! {
    /// `enum rdma_driver_id`: the kernel driver behind a uverbs device
    /// (netlink `RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID`, and the `driver_id`
    /// of [`IbUverbsIoctlHdr`](super::IbUverbsIoctlHdr)).
    pub struct RdmaDriverId(u32);
    /// Unknown.
    UNKNOWN = 0 => "RDMA_DRIVER_UNKNOWN";
    /// Mellanox ConnectX-4 and later.
    MLX5 = 1 => "RDMA_DRIVER_MLX5";
    /// Mellanox ConnectX-3.
    MLX4 = 2 => "RDMA_DRIVER_MLX4";
    /// Chelsio T3.
    CXGB3 = 3 => "RDMA_DRIVER_CXGB3";
    /// Chelsio T4 and later.
    CXGB4 = 4 => "RDMA_DRIVER_CXGB4";
    /// Mellanox InfiniHost.
    MTHCA = 5 => "RDMA_DRIVER_MTHCA";
    /// Broadcom NetXtreme-E.
    BNXT_RE = 6 => "RDMA_DRIVER_BNXT_RE";
    /// Emulex OneConnect.
    OCRDMA = 7 => "RDMA_DRIVER_OCRDMA";
    /// Intel NetEffect.
    NES = 8 => "RDMA_DRIVER_NES";
    /// Intel X722 (and `RDMA_DRIVER_IRDMA`, the same value).
    I40IW = 9 => "RDMA_DRIVER_I40IW";
    /// Intel Ethernet RDMA (alias of `I40IW`).
    IRDMA = 9 => "RDMA_DRIVER_IRDMA";
    /// VMware paravirtual RDMA.
    VMW_PVRDMA = 10 => "RDMA_DRIVER_VMW_PVRDMA";
    /// QLogic FastLinQ.
    QEDR = 11 => "RDMA_DRIVER_QEDR";
    /// HiSilicon.
    HNS = 12 => "RDMA_DRIVER_HNS";
    /// Cisco usNIC.
    USNIC = 13 => "RDMA_DRIVER_USNIC";
    /// Soft-RoCE.
    RXE = 14 => "RDMA_DRIVER_RXE";
    /// Intel Omni-Path.
    HFI1 = 15 => "RDMA_DRIVER_HFI1";
    /// QLogic InfiniPath.
    QIB = 16 => "RDMA_DRIVER_QIB";
    /// Amazon EFA.
    EFA = 17 => "RDMA_DRIVER_EFA";
    /// Soft-iWARP.
    SIW = 18 => "RDMA_DRIVER_SIW";
    /// Alibaba elastic RDMA.
    ERDMA = 19 => "RDMA_DRIVER_ERDMA";
    /// Microsoft Azure Network Adapter.
    MANA = 20 => "RDMA_DRIVER_MANA" newer "added in v6.2 (mana_ib)";
}

abi_enum! {
    /// `enum ib_uverbs_gid_type`: `gid_type` of [`IbUverbsGidEntry`].
    pub struct IbUverbsGidType(u32);
    /// InfiniBand.
    IB = 0 => "IB_UVERBS_GID_TYPE_IB";
    /// RoCE v1.
    ROCE_V1 = 1 => "IB_UVERBS_GID_TYPE_ROCE_V1";
    /// RoCE v2.
    ROCE_V2 = 2 => "IB_UVERBS_GID_TYPE_ROCE_V2";
}

/// `struct ib_uverbs_query_port_resp_ex` of `ib_user_ioctl_verbs.h` (48
/// bytes): what `UVERBS_METHOD_QUERY_PORT` answers. The v6.1 header has
/// `reserved[6]` after `port_cap_flags2`; v6.7 split it into
/// `reserved[2]` and `active_speed_ex`, which this struct follows (the
/// size is unchanged; older kernels leave it 0).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQueryPortRespEx {
    /// `legacy_resp`.
    pub legacy_resp: IbUverbsQueryPortResp,
    /// `port_cap_flags2`.
    pub port_cap_flags2: u16,
    /// `reserved`.
    pub reserved: [u8; 2],
    /// `active_speed_ex` (v6.7+): the active speed, beyond `u8`.
    pub active_speed_ex: u32,
}

/// `struct ib_uverbs_qp_cap` of `ib_user_ioctl_verbs.h`: the
/// `UVERBS_ATTR_CREATE_QP_CAP` and `_RESP_CAP` attributes.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsQpCap {
    /// `max_send_wr`.
    pub max_send_wr: u32,
    /// `max_recv_wr`.
    pub max_recv_wr: u32,
    /// `max_send_sge`.
    pub max_send_sge: u32,
    /// `max_recv_sge`.
    pub max_recv_sge: u32,
    /// `max_inline_data`.
    pub max_inline_data: u32,
}

/// `struct ib_uverbs_gid_entry` of `ib_user_ioctl_verbs.h` (32 bytes): one
/// GID, as `UVERBS_METHOD_QUERY_GID_ENTRY`/`_TABLE` answer.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsGidEntry {
    /// `gid`: the 16 GID bytes in network order, as two `__aligned_u64`.
    pub gid: [u64; 2],
    /// `gid_index`.
    pub gid_index: u32,
    /// `port_num`.
    pub port_num: u32,
    /// `gid_type`: an [`IbUverbsGidType`].
    pub gid_type: u32,
    /// `netdev_ifindex`: 0 when no netdev is associated.
    pub netdev_ifindex: u32,
}

impl IbUverbsGidEntry {
    /// The GID's 16 bytes, network order.
    pub fn gid_bytes(&self) -> [u8; 16] {
        zerocopy::transmute!(self.gid)
    }
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsQueryPortRespEx => "struct ib_uverbs_query_port_resp_ex" {
            legacy_resp => "legacy_resp",
            port_cap_flags2 => "port_cap_flags2",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsQpCap => "struct ib_uverbs_qp_cap" {
            max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr",
            max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge",
            max_inline_data => "max_inline_data",
        }),
        crate::c_layout!(IbUverbsGidEntry => "struct ib_uverbs_gid_entry" {
            gid => "gid",
            gid_index => "gid_index",
            port_num => "port_num",
            gid_type => "gid_type",
            netdev_ifindex => "netdev_ifindex",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    register_consts(r);
    IbUverbsCoreSupport::register(r);
    IbUverbsAccessFlags::register(r);
    IbUverbsSrqType::register(r);
    IbUverbsWqType::register(r);
    IbUverbsWqFlags::register(r);
    IbUverbsQpType::register(r);
    IbUverbsQpCreateFlags::register(r);
    IbUverbsQueryPortCapFlags::register(r);
    IbUverbsQueryPortFlags::register(r);
    IbUverbsAdviseMrAdvice::register(r);
    IbUverbsAdviseMrFlag::register(r);
    RdmaDriverId::register(r);
    IbUverbsGidType::register(r);
    r.newer_field(
        "ib_uverbs_query_port_resp_ex.active_speed_ex",
        "added in v6.7 (XDR speeds), in what was reserved[6]; same size",
    );
}

//! Completion channels and queues: CREATE_COMP_CHANNEL, CREATE_CQ (and
//! extended), RESIZE_CQ, DESTROY_CQ, POLL_CQ, REQ_NOTIFY_CQ, MODIFY_CQ
//! (extended), and the work completion `struct ib_uverbs_wc` with its
//! status, opcode and flag values.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_enum, abi_flags, Registry};
use crate::verbs::KERNEL_ONLY;

/// `struct ib_uverbs_create_comp_channel` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateCompChannel {
    /// `response`.
    pub response: u64,
}

/// `struct ib_uverbs_create_comp_channel_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateCompChannelResp {
    /// `fd`: the new completion channel; `read()` gives
    /// [`IbUverbsCompEventDesc`](super::IbUverbsCompEventDesc)s.
    pub fd: u32,
}

/// `struct ib_uverbs_create_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_CREATE_CQ`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateCq {
    /// `response`.
    pub response: u64,
    /// `user_handle`: echoed in completion events (`cq_handle`).
    pub user_handle: u64,
    /// `cqe`: the minimum number of entries.
    pub cqe: u32,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `comp_channel`: a completion channel fd, or -1.
    pub comp_channel: i32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_ex_create_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_EX_CMD_CREATE_CQ`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExCreateCq {
    /// `user_handle`.
    pub user_handle: u64,
    /// `cqe`.
    pub cqe: u32,
    /// `comp_vector`.
    pub comp_vector: u32,
    /// `comp_channel`: a completion channel fd, or -1.
    pub comp_channel: i32,
    /// `comp_mask`: 0.
    pub comp_mask: u32,
    /// `flags`: [`IbUverbsExCreateCqFlags`].
    pub flags: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_create_cq_resp` of `ib_user_verbs.h`, without its
/// `__aligned_u64 driver_data[0]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCreateCqResp {
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `cqe`: the actual number of entries.
    pub cqe: u32,
}

/// `struct ib_uverbs_ex_create_cq_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExCreateCqResp {
    /// `base`.
    pub base: IbUverbsCreateCqResp,
    /// `comp_mask`.
    pub comp_mask: u32,
    /// `response_length`.
    pub response_length: u32,
}

/// `struct ib_uverbs_resize_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_RESIZE_CQ`), without its flexible `driver_data[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsResizeCq {
    /// `response`.
    pub response: u64,
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `cqe`.
    pub cqe: u32,
}

/// `struct ib_uverbs_resize_cq_resp` of `ib_user_verbs.h`, without its
/// flexible `__aligned_u64 driver_data[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsResizeCqResp {
    /// `cqe`.
    pub cqe: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_poll_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_POLL_CQ`). The response is an
/// [`IbUverbsPollCqResp`] followed by up to `ne` [`IbUverbsWc`]s, so the
/// response buffer is `8 + 48 * ne` bytes (pass `48 * ne` as the udata out
/// length when encoding).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPollCq {
    /// `response`.
    pub response: u64,
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `ne`: the most completions to return.
    pub ne: u32,
}

/// `struct ib_uverbs_wc` of `ib_user_verbs.h` (48 bytes): one work
/// completion, as POLL_CQ returns it and as rxe lays out its CQ slots.
///
/// The members are the raw integers the kernel writes; the accessors give
/// them types.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsWc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `status`: an [`IbWcStatus`].
    pub status: u32,
    /// `opcode`: an [`IbWcOpcode`].
    pub opcode: u32,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// `ex`: the C union of `__be32 imm_data` and `__u32 invalidate_rkey`,
    /// as stored; see [`IbUverbsWc::imm_data`].
    pub ex: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `src_qp`.
    pub src_qp: u32,
    /// `wc_flags`: [`IbWcFlags`].
    pub wc_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
    /// `port_num`.
    pub port_num: u8,
    /// `reserved`.
    pub reserved: u8,
}

impl IbUverbsWc {
    /// `status`.
    pub fn status(&self) -> IbWcStatus {
        IbWcStatus(self.status)
    }

    /// `opcode`.
    pub fn opcode(&self) -> IbWcOpcode {
        IbWcOpcode(self.opcode)
    }

    /// `wc_flags`, unknown bits kept.
    pub fn flags(&self) -> IbWcFlags {
        IbWcFlags::from_bits_retain(self.wc_flags)
    }

    /// `ex.imm_data` in host order (valid with [`IbWcFlags::WITH_IMM`]).
    pub fn imm_data(&self) -> u32 {
        u32::from_be(self.ex)
    }

    /// `ex.invalidate_rkey` (valid with [`IbWcFlags::WITH_INVALIDATE`]).
    pub fn invalidate_rkey(&self) -> u32 {
        self.ex
    }
}

/// `struct ib_uverbs_poll_cq_resp` of `ib_user_verbs.h`, without its
/// flexible `struct ib_uverbs_wc wc[]` (hence 8-aligned).
#[repr(C, align(8))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsPollCqResp {
    /// `count`: how many [`IbUverbsWc`] follow.
    pub count: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_req_notify_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsReqNotifyCq {
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `solicited_only`: 1 to be notified of solicited completions only.
    pub solicited_only: u32,
}

/// `struct ib_uverbs_destroy_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_CMD_DESTROY_CQ`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroyCq {
    /// `response`.
    pub response: u64,
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct ib_uverbs_destroy_cq_resp` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsDestroyCqResp {
    /// `comp_events_reported`: completion events the kernel delivered.
    pub comp_events_reported: u32,
    /// `async_events_reported`.
    pub async_events_reported: u32,
}

/// `struct ib_uverbs_cq_moderation` of `ib_user_verbs.h`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCqModeration {
    /// `cq_count`: completions per event.
    pub cq_count: u16,
    /// `cq_period`: microseconds per event.
    pub cq_period: u16,
}

/// `struct ib_uverbs_ex_modify_cq` of `ib_user_verbs.h`
/// (`IB_USER_VERBS_EX_CMD_MODIFY_CQ`, no response).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExModifyCq {
    /// `cq_handle`.
    pub cq_handle: u32,
    /// `attr_mask`: [`IbCqAttrMask`].
    pub attr_mask: u32,
    /// `attr`.
    pub attr: IbUverbsCqModeration,
    /// `reserved`.
    pub reserved: u32,
}

abi_flags! {
    /// `enum ib_uverbs_ex_create_cq_flags` of `ib_user_verbs.h`.
    pub struct IbUverbsExCreateCqFlags: u32;
    /// Completions carry a timestamp.
    TIMESTAMP_COMPLETION = 1 << 0 => "IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION";
    /// The CQ may overrun without an error.
    IGNORE_OVERRUN = 1 << 1 => "IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN";
}

abi_flags! {
    /// `enum ib_cq_attr_mask` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `attr_mask` of MODIFY_CQ.
    pub struct IbCqAttrMask: u32;
    /// `attr` holds new moderation values.
    MODERATE = 1 << 0 => "IB_CQ_MODERATE" ibv "IBV_CQ_ATTR_MODERATE" newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_wc_status` (kernel-internal, `include/rdma/ib_verbs.h`;
    /// no UAPI header names it): `status` of [`IbUverbsWc`]. Unknown values
    /// are possible and must be treated as errors.
    pub struct IbWcStatus(u32);
    /// Success.
    SUCCESS = 0 => "IB_WC_SUCCESS" ibv "IBV_WC_SUCCESS" newer KERNEL_ONLY;
    /// Local length error.
    LOC_LEN_ERR = 1 => "IB_WC_LOC_LEN_ERR" ibv "IBV_WC_LOC_LEN_ERR" newer KERNEL_ONLY;
    /// Local QP operation error.
    LOC_QP_OP_ERR = 2 => "IB_WC_LOC_QP_OP_ERR" ibv "IBV_WC_LOC_QP_OP_ERR" newer KERNEL_ONLY;
    /// Local EE context operation error.
    LOC_EEC_OP_ERR = 3 => "IB_WC_LOC_EEC_OP_ERR" ibv "IBV_WC_LOC_EEC_OP_ERR" newer KERNEL_ONLY;
    /// Local protection error.
    LOC_PROT_ERR = 4 => "IB_WC_LOC_PROT_ERR" ibv "IBV_WC_LOC_PROT_ERR" newer KERNEL_ONLY;
    /// Flushed: the QP is in the error state.
    WR_FLUSH_ERR = 5 => "IB_WC_WR_FLUSH_ERR" ibv "IBV_WC_WR_FLUSH_ERR" newer KERNEL_ONLY;
    /// Memory window bind error.
    MW_BIND_ERR = 6 => "IB_WC_MW_BIND_ERR" ibv "IBV_WC_MW_BIND_ERR" newer KERNEL_ONLY;
    /// Bad response.
    BAD_RESP_ERR = 7 => "IB_WC_BAD_RESP_ERR" ibv "IBV_WC_BAD_RESP_ERR" newer KERNEL_ONLY;
    /// Local access error.
    LOC_ACCESS_ERR = 8 => "IB_WC_LOC_ACCESS_ERR" ibv "IBV_WC_LOC_ACCESS_ERR" newer KERNEL_ONLY;
    /// Remote invalid request.
    REM_INV_REQ_ERR = 9 => "IB_WC_REM_INV_REQ_ERR" ibv "IBV_WC_REM_INV_REQ_ERR"
        newer KERNEL_ONLY;
    /// Remote access error.
    REM_ACCESS_ERR = 10 => "IB_WC_REM_ACCESS_ERR" ibv "IBV_WC_REM_ACCESS_ERR" newer KERNEL_ONLY;
    /// Remote operation error.
    REM_OP_ERR = 11 => "IB_WC_REM_OP_ERR" ibv "IBV_WC_REM_OP_ERR" newer KERNEL_ONLY;
    /// Transport retry counter exceeded.
    RETRY_EXC_ERR = 12 => "IB_WC_RETRY_EXC_ERR" ibv "IBV_WC_RETRY_EXC_ERR" newer KERNEL_ONLY;
    /// RNR retry counter exceeded.
    RNR_RETRY_EXC_ERR = 13 => "IB_WC_RNR_RETRY_EXC_ERR" ibv "IBV_WC_RNR_RETRY_EXC_ERR"
        newer KERNEL_ONLY;
    /// Local RDD violation.
    LOC_RDD_VIOL_ERR = 14 => "IB_WC_LOC_RDD_VIOL_ERR" ibv "IBV_WC_LOC_RDD_VIOL_ERR"
        newer KERNEL_ONLY;
    /// Remote invalid RD request.
    REM_INV_RD_REQ_ERR = 15 => "IB_WC_REM_INV_RD_REQ_ERR" ibv "IBV_WC_REM_INV_RD_REQ_ERR"
        newer KERNEL_ONLY;
    /// Remote aborted.
    REM_ABORT_ERR = 16 => "IB_WC_REM_ABORT_ERR" ibv "IBV_WC_REM_ABORT_ERR" newer KERNEL_ONLY;
    /// Invalid EE context number.
    INV_EECN_ERR = 17 => "IB_WC_INV_EECN_ERR" ibv "IBV_WC_INV_EECN_ERR" newer KERNEL_ONLY;
    /// Invalid EE context state.
    INV_EEC_STATE_ERR = 18 => "IB_WC_INV_EEC_STATE_ERR" ibv "IBV_WC_INV_EEC_STATE_ERR"
        newer KERNEL_ONLY;
    /// Fatal error.
    FATAL_ERR = 19 => "IB_WC_FATAL_ERR" ibv "IBV_WC_FATAL_ERR" newer KERNEL_ONLY;
    /// Response timeout.
    RESP_TIMEOUT_ERR = 20 => "IB_WC_RESP_TIMEOUT_ERR" ibv "IBV_WC_RESP_TIMEOUT_ERR"
        newer KERNEL_ONLY;
    /// General error.
    GENERAL_ERR = 21 => "IB_WC_GENERAL_ERR" ibv "IBV_WC_GENERAL_ERR" newer KERNEL_ONLY;
}

abi_enum! {
    /// `enum ib_uverbs_wc_opcode` of `ib_user_verbs.h` (the send side),
    /// with the receive opcodes of the kernel's `enum ib_wc_opcode`
    /// (`include/rdma/ib_verbs.h`): `opcode` of [`IbUverbsWc`]. Receive
    /// completions have bit 7 ([`IbWcOpcode::RECV`]) set.
    pub struct IbWcOpcode(u32);
    /// Send.
    SEND = 0 => "IB_UVERBS_WC_SEND";
    /// RDMA write.
    RDMA_WRITE = 1 => "IB_UVERBS_WC_RDMA_WRITE";
    /// RDMA read.
    RDMA_READ = 2 => "IB_UVERBS_WC_RDMA_READ";
    /// Compare and swap.
    COMP_SWAP = 3 => "IB_UVERBS_WC_COMP_SWAP";
    /// Fetch and add.
    FETCH_ADD = 4 => "IB_UVERBS_WC_FETCH_ADD";
    /// Memory window bind.
    BIND_MW = 5 => "IB_UVERBS_WC_BIND_MW";
    /// Local invalidate.
    LOCAL_INV = 6 => "IB_UVERBS_WC_LOCAL_INV";
    /// TCP segmentation offload.
    TSO = 7 => "IB_UVERBS_WC_TSO";
    /// Flush.
    FLUSH = 8 => "IB_UVERBS_WC_FLUSH" newer "added in v6.2 (RDMA FLUSH)";
    /// Atomic write.
    ATOMIC_WRITE = 9 => "IB_UVERBS_WC_ATOMIC_WRITE" ibv "IBV_WC_ATOMIC_WRITE"
        newer "added in v6.2 (RDMA ATOMIC WRITE)";
    /// Receive (a send arrived).
    RECV = 1 << 7 => "IB_WC_RECV" ibv "IBV_WC_RECV" newer KERNEL_ONLY;
    /// An RDMA write with immediate arrived.
    RECV_RDMA_WITH_IMM = (1 << 7) + 1 => "IB_WC_RECV_RDMA_WITH_IMM"
        ibv "IBV_WC_RECV_RDMA_WITH_IMM" newer KERNEL_ONLY;
}

impl IbWcOpcode {
    /// Whether this is a receive completion (bit 7).
    pub const fn is_recv(self) -> bool {
        self.0 & Self::RECV.0 != 0
    }
}

abi_flags! {
    /// `enum ib_wc_flags` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `wc_flags` of [`IbUverbsWc`], as the kernel numbers them. libibverbs'
    /// `enum ibv_wc_flags` swaps bits 2 and 3 (`IBV_WC_IP_CSUM_OK` is
    /// `1 << 2`, `IBV_WC_WITH_INV` is `1 << 3`), so only the first two are
    /// checked against it.
    pub struct IbWcFlags: u32;
    /// A GRH is in the first 40 bytes of the receive buffer.
    GRH = 1 << 0 => "IB_WC_GRH" ibv "IBV_WC_GRH" newer KERNEL_ONLY;
    /// `imm_data` is valid.
    WITH_IMM = 1 << 1 => "IB_WC_WITH_IMM" ibv "IBV_WC_WITH_IMM" newer KERNEL_ONLY;
    /// `invalidate_rkey` is valid.
    WITH_INVALIDATE = 1 << 2 => "IB_WC_WITH_INVALIDATE" newer KERNEL_ONLY;
    /// The IP checksum was verified.
    IP_CSUM_OK = 1 << 3 => "IB_WC_IP_CSUM_OK" newer KERNEL_ONLY;
    /// The source MAC is valid (kernel consumers).
    WITH_SMAC = 1 << 4 => "IB_WC_WITH_SMAC" newer KERNEL_ONLY;
    /// The VLAN id is valid (kernel consumers).
    WITH_VLAN = 1 << 5 => "IB_WC_WITH_VLAN" newer KERNEL_ONLY;
    /// The network header type is valid (kernel consumers).
    WITH_NETWORK_HDR_TYPE = 1 << 6 => "IB_WC_WITH_NETWORK_HDR_TYPE" newer KERNEL_ONLY;
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsCreateCompChannel => "struct ib_uverbs_create_comp_channel" {
            response => "response",
        }),
        crate::c_layout!(IbUverbsCreateCompChannelResp =>
            "struct ib_uverbs_create_comp_channel_resp" { fd => "fd" }),
        crate::c_layout!(IbUverbsCreateCq => "struct ib_uverbs_create_cq" {
            response => "response",
            user_handle => "user_handle",
            cqe => "cqe",
            comp_vector => "comp_vector",
            comp_channel => "comp_channel",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsExCreateCq => "struct ib_uverbs_ex_create_cq" {
            user_handle => "user_handle",
            cqe => "cqe",
            comp_vector => "comp_vector",
            comp_channel => "comp_channel",
            comp_mask => "comp_mask",
            flags => "flags",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsCreateCqResp => "struct ib_uverbs_create_cq_resp" {
            cq_handle => "cq_handle",
            cqe => "cqe",
        }),
        crate::c_layout!(IbUverbsExCreateCqResp => "struct ib_uverbs_ex_create_cq_resp" {
            base => "base",
            comp_mask => "comp_mask",
            response_length => "response_length",
        }),
        crate::c_layout!(IbUverbsResizeCq => "struct ib_uverbs_resize_cq" {
            response => "response",
            cq_handle => "cq_handle",
            cqe => "cqe",
        }),
        crate::c_layout!(IbUverbsResizeCqResp => "struct ib_uverbs_resize_cq_resp" {
            cqe => "cqe",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsPollCq => "struct ib_uverbs_poll_cq" {
            response => "response",
            cq_handle => "cq_handle",
            ne => "ne",
        }),
        crate::c_layout!(IbUverbsWc => "struct ib_uverbs_wc" {
            wr_id => "wr_id",
            status => "status",
            opcode => "opcode",
            vendor_err => "vendor_err",
            byte_len => "byte_len",
            ex => "ex",
            ex => "ex.imm_data",
            ex => "ex.invalidate_rkey",
            qp_num => "qp_num",
            src_qp => "src_qp",
            wc_flags => "wc_flags",
            pkey_index => "pkey_index",
            slid => "slid",
            sl => "sl",
            dlid_path_bits => "dlid_path_bits",
            port_num => "port_num",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsPollCqResp => "struct ib_uverbs_poll_cq_resp" {
            count => "count",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsReqNotifyCq => "struct ib_uverbs_req_notify_cq" {
            cq_handle => "cq_handle",
            solicited_only => "solicited_only",
        }),
        crate::c_layout!(IbUverbsDestroyCq => "struct ib_uverbs_destroy_cq" {
            response => "response",
            cq_handle => "cq_handle",
            reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsDestroyCqResp => "struct ib_uverbs_destroy_cq_resp" {
            comp_events_reported => "comp_events_reported",
            async_events_reported => "async_events_reported",
        }),
        crate::c_layout!(IbUverbsCqModeration => "struct ib_uverbs_cq_moderation" {
            cq_count => "cq_count",
            cq_period => "cq_period",
        }),
        crate::c_layout!(IbUverbsExModifyCq => "struct ib_uverbs_ex_modify_cq" {
            cq_handle => "cq_handle",
            attr_mask => "attr_mask",
            attr => "attr",
            reserved => "reserved",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    IbUverbsExCreateCqFlags::register(r);
    IbCqAttrMask::register(r);
    IbWcStatus::register(r);
    IbWcOpcode::register(r);
    IbWcFlags::register(r);
}

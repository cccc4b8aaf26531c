//! The structs of `<infiniband/verbs.h>` (rdma-core 44) that C programs
//! read and write directly, or that the header's static-inline functions
//! dispatch through. Names are the C names in Rust case, so a reader can
//! grep across; every one is proved against the installed header by the
//! compiled layout test at the bottom (sizes and the offset of every field
//! defined here).
//!
//! Unions are modelled by their largest member, or by the member this
//! library reads, with the other members' offsets checked against it.

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

/// `verbs_context.query_device_ex`.
pub type QueryDeviceExFn =
    unsafe extern "C" fn(*mut IbvContext, *const c_void, *mut IbvDeviceAttrEx, usize) -> c_int;
/// `ops.poll_cq`.
pub type PollCqFn = unsafe extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int;
/// `ops.req_notify_cq`.
pub type ReqNotifyFn = unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int;
/// `ops.post_send`.
pub type PostSendFn =
    unsafe extern "C" fn(*mut IbvQp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int;
/// `ops.post_recv`.
pub type PostRecvFn =
    unsafe extern "C" fn(*mut IbvQp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;
/// `ops.post_srq_recv`.
pub type PostSrqRecvFn =
    unsafe extern "C" fn(*mut c_void, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;
/// `verbs_context.query_port`.
pub type QueryPortFn = unsafe extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr, usize) -> c_int;

/// `struct ibv_context_ops`: the table `verbs.h`'s inline data-path
/// functions call through. The `_compat_*` slots are dead in rdma-core 44
/// (always NULL there too).
#[repr(C)]
pub struct IbvContextOps {
    /// `_compat_query_device` … `_compat_dereg_mr` (7 slots).
    pub compat_a: [*const c_void; 7],
    pub alloc_mw: *const c_void,
    pub bind_mw: *const c_void,
    pub dealloc_mw: *const c_void,
    pub compat_create_cq: *const c_void,
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyFn>,
    /// `_compat_cq_event` … `_compat_destroy_srq` (7 slots).
    pub compat_b: [*const c_void; 7],
    pub post_srq_recv: Option<PostSrqRecvFn>,
    /// `_compat_create_qp` … `_compat_destroy_qp` (4 slots).
    pub compat_c: [*const c_void; 4],
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    /// `_compat_create_ah` … `_compat_async_event` (5 slots).
    pub compat_d: [*const c_void; 5],
}

/// `pthread_mutex_t` (x86-64 glibc: 40 bytes), which libibverbs keeps in
/// its objects for itself; C programs do not touch it.
pub type PthreadMutex = libc::pthread_mutex_t;
/// `pthread_cond_t`.
pub type PthreadCond = libc::pthread_cond_t;

/// `struct ibv_context`.
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: IbvContextOps,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: PthreadMutex,
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: `abi_compat` says a `verbs_context` lies
/// before the `ibv_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `struct verbs_context`: the extended operations, laid out *before* the
/// `ibv_context` that ends it. `verbs_get_ctx_op()` in `verbs.h` uses an
/// operation only if `sz` reaches it and the slot is non-NULL, so NULL
/// slots make the inline functions fall back or fail with `EOPNOTSUPP`.
#[repr(C)]
pub struct VerbsContext {
    pub query_port: Option<QueryPortFn>,
    /// `advise_mr` … `create_cq_ex` (25 slots).
    pub ops_a: [*const c_void; 25],
    pub priv_: *mut c_void,
    pub query_device_ex: Option<QueryDeviceExFn>,
    /// `ibv_destroy_flow` … `close_xrcd` (10 slots).
    pub ops_b: [*const c_void; 10],
    pub abi_placeholder3: u64,
    pub sz: usize,
    pub context: IbvContext,
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

/// `struct ibv_pd`.
#[repr(C)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

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

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpAttr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (big-endian) / `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrRdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `wr.atomic` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrAtomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `wr.ud` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrUd {
    pub ah: *mut c_void,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// The `wr` union of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrWr {
    pub rdma: IbvSendWrRdma,
    pub atomic: IbvSendWrAtomic,
    pub ud: IbvSendWrUd,
}

/// `struct ibv_send_wr`.
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// `imm_data` (big-endian) / `invalidate_rkey`.
    pub imm_data: u32,
    pub wr: IbvSendWrWr,
    /// `qp_type.xrc.remote_srqn`.
    pub xrc_remote_srqn: u32,
    /// The `bind_mw` / `tso` union.
    pub bind_mw_or_tso: IbvSendWrBindMwOrTso,
}

/// `struct ibv_mw_bind_info`: what a window is bound to.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvMwBindInfo {
    pub mr: *mut IbvMr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `bind_mw` of `struct ibv_send_wr` (`IBV_WR_BIND_MW`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrBindMw {
    pub mw: *mut IbvMw,
    pub rkey: u32,
    pub bind_info: IbvMwBindInfo,
}

/// The `bind_mw` / `tso` union of `struct ibv_send_wr` (TSO, raw-packet
/// QPs only, is not read here: its bytes are the filler).
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrBindMwOrTso {
    pub bind_mw: IbvSendWrBindMw,
    pub raw: [u64; 6],
}

/// `struct ibv_mw`.
#[repr(C)]
pub struct IbvMw {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`: 1 or 2.
    pub mw_type: c_int,
}

/// `struct ibv_mw_bind` (`ibv_bind_mw`'s request).
#[repr(C)]
pub struct IbvMwBind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: IbvMwBindInfo,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvSrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
pub struct IbvSrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
}

/// `enum ibv_srq_attr_mask`.
pub mod srq_mask {
    pub const MAX_WR: i32 = 1;
    pub const LIMIT: i32 = 1 << 1;
}

/// `struct ibv_grh`: the 40 bytes a UD receive's buffer begins with.
pub const GRH_LEN: usize = 40;

/// `enum ibv_wc_flags`: `IBV_WC_GRH`.
pub const WC_GRH: c_uint = 1 << 0;

/// `struct ibv_recv_wr`.
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `enum ibv_wr_opcode` values this library posts.
pub mod wr_opcode {
    pub const RDMA_WRITE: i32 = 0;
    pub const RDMA_WRITE_WITH_IMM: i32 = 1;
    pub const SEND: i32 = 2;
    pub const SEND_WITH_IMM: i32 = 3;
    pub const RDMA_READ: i32 = 4;
    pub const ATOMIC_CMP_AND_SWP: i32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: i32 = 6;
    pub const LOCAL_INV: i32 = 7;
    pub const BIND_MW: i32 = 8;
    pub const SEND_WITH_INV: i32 = 9;
}

/// `enum ibv_send_flags`.
pub mod send_flags {
    pub const FENCE: u32 = 1;
    pub const SIGNALED: u32 = 1 << 1;
    pub const SOLICITED: u32 = 1 << 2;
    pub const INLINE: u32 = 1 << 3;
}

/// `enum ibv_qp_attr_mask` (the bits this library reads).
pub mod qp_mask {
    pub const STATE: i32 = 1;
    pub const CUR_STATE: i32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: i32 = 1 << 2;
    pub const ACCESS_FLAGS: i32 = 1 << 3;
    pub const PKEY_INDEX: i32 = 1 << 4;
    pub const PORT: i32 = 1 << 5;
    pub const QKEY: i32 = 1 << 6;
    pub const AV: i32 = 1 << 7;
    pub const PATH_MTU: i32 = 1 << 8;
    pub const TIMEOUT: i32 = 1 << 9;
    pub const RETRY_CNT: i32 = 1 << 10;
    pub const RNR_RETRY: i32 = 1 << 11;
    pub const RQ_PSN: i32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: i32 = 1 << 13;
    pub const MIN_RNR_TIMER: i32 = 1 << 15;
    pub const SQ_PSN: i32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: i32 = 1 << 17;
    pub const CAP: i32 = 1 << 19;
    pub const DEST_QPN: i32 = 1 << 20;
}

#[cfg(test)]
mod layout_test {
    //! Every struct above against `<infiniband/verbs.h>`, by a C program
    //! compiled with the system `cc` at test time (a test-time use of C
    //! only, as in `uverbs-abi`). Fails, never skips, without `cc` or the
    //! header.
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    struct L {
        rust: &'static str,
        c: &'static str,
        size: usize,
        align: usize,
        fields: Vec<(&'static str, usize)>,
    }

    macro_rules! l {
        ($ty:ident => $c:literal { $($f:ident $(. $g:ident)* => $cf:literal),* $(,)? }) => {
            L {
                rust: stringify!($ty),
                c: $c,
                size: size_of::<$ty>(),
                align: align_of::<$ty>(),
                fields: vec![$(($cf, offset_of!($ty, $f $(. $g)*))),*],
            }
        };
    }

    fn layouts() -> Vec<L> {
        vec![
            l!(IbvDeviceOps => "struct _ibv_device_ops" { dummy1 => "_dummy1", dummy2 => "_dummy2" }),
            l!(IbvDevice => "struct ibv_device" { ops => "_ops", node_type => "node_type",
                transport_type => "transport_type", name => "name", dev_name => "dev_name",
                dev_path => "dev_path", ibdev_path => "ibdev_path" }),
            l!(IbvContextOps => "struct ibv_context_ops" { compat_a => "_compat_query_device",
                alloc_mw => "alloc_mw", bind_mw => "bind_mw", dealloc_mw => "dealloc_mw",
                compat_create_cq => "_compat_create_cq", poll_cq => "poll_cq",
                req_notify_cq => "req_notify_cq", compat_b => "_compat_cq_event",
                post_srq_recv => "post_srq_recv", compat_c => "_compat_create_qp",
                post_send => "post_send", post_recv => "post_recv",
                compat_d => "_compat_create_ah" }),
            l!(IbvContext => "struct ibv_context" { device => "device", ops => "ops",
                cmd_fd => "cmd_fd", async_fd => "async_fd", num_comp_vectors => "num_comp_vectors",
                mutex => "mutex", abi_compat => "abi_compat" }),
            l!(VerbsContext => "struct verbs_context" { query_port => "query_port",
                ops_a => "advise_mr", priv_ => "priv", query_device_ex => "query_device_ex",
                ops_b => "ibv_destroy_flow", abi_placeholder3 => "_ABI_placeholder3",
                sz => "sz", context => "context" }),
            l!(IbvDeviceAttr => "struct ibv_device_attr" { fw_ver => "fw_ver",
                node_guid => "node_guid", sys_image_guid => "sys_image_guid",
                max_mr_size => "max_mr_size", page_size_cap => "page_size_cap",
                vendor_id => "vendor_id", vendor_part_id => "vendor_part_id", hw_ver => "hw_ver",
                max_qp => "max_qp", max_qp_wr => "max_qp_wr",
                device_cap_flags => "device_cap_flags", max_sge => "max_sge",
                max_sge_rd => "max_sge_rd", max_cq => "max_cq", max_cqe => "max_cqe",
                max_mr => "max_mr", max_pd => "max_pd", max_qp_rd_atom => "max_qp_rd_atom",
                max_ee_rd_atom => "max_ee_rd_atom", max_res_rd_atom => "max_res_rd_atom",
                max_qp_init_rd_atom => "max_qp_init_rd_atom",
                max_ee_init_rd_atom => "max_ee_init_rd_atom", atomic_cap => "atomic_cap",
                max_ee => "max_ee", max_rdd => "max_rdd", max_mw => "max_mw",
                max_raw_ipv6_qp => "max_raw_ipv6_qp", max_raw_ethy_qp => "max_raw_ethy_qp",
                max_mcast_grp => "max_mcast_grp", max_mcast_qp_attach => "max_mcast_qp_attach",
                max_total_mcast_qp_attach => "max_total_mcast_qp_attach", max_ah => "max_ah",
                max_fmr => "max_fmr", max_map_per_fmr => "max_map_per_fmr",
                max_srq => "max_srq", max_srq_wr => "max_srq_wr", max_srq_sge => "max_srq_sge",
                max_pkeys => "max_pkeys", local_ca_ack_delay => "local_ca_ack_delay",
                phys_port_cnt => "phys_port_cnt" }),
            l!(IbvOdpCaps => "struct ibv_odp_caps" { general_caps => "general_caps",
                rc_odp_caps => "per_transport_caps.rc_odp_caps",
                uc_odp_caps => "per_transport_caps.uc_odp_caps",
                ud_odp_caps => "per_transport_caps.ud_odp_caps" }),
            l!(IbvTsoCaps => "struct ibv_tso_caps" { max_tso => "max_tso",
                supported_qpts => "supported_qpts" }),
            l!(IbvRssCaps => "struct ibv_rss_caps" { supported_qpts => "supported_qpts",
                max_rwq_indirection_tables => "max_rwq_indirection_tables",
                max_rwq_indirection_table_size => "max_rwq_indirection_table_size",
                rx_hash_fields_mask => "rx_hash_fields_mask",
                rx_hash_function => "rx_hash_function" }),
            l!(IbvPacketPacingCaps => "struct ibv_packet_pacing_caps" {
                qp_rate_limit_min => "qp_rate_limit_min", qp_rate_limit_max => "qp_rate_limit_max",
                supported_qpts => "supported_qpts" }),
            l!(IbvTmCaps => "struct ibv_tm_caps" { max_rndv_hdr_size => "max_rndv_hdr_size",
                max_num_tags => "max_num_tags", flags => "flags", max_ops => "max_ops",
                max_sge => "max_sge" }),
            l!(IbvCqModerationCaps => "struct ibv_cq_moderation_caps" {
                max_cq_count => "max_cq_count", max_cq_period => "max_cq_period" }),
            l!(IbvPciAtomicCaps => "struct ibv_pci_atomic_caps" { fetch_add => "fetch_add",
                swap => "swap", compare_swap => "compare_swap" }),
            l!(IbvDeviceAttrEx => "struct ibv_device_attr_ex" { orig_attr => "orig_attr",
                comp_mask => "comp_mask", odp_caps => "odp_caps",
                completion_timestamp_mask => "completion_timestamp_mask",
                hca_core_clock => "hca_core_clock", device_cap_flags_ex => "device_cap_flags_ex",
                tso_caps => "tso_caps", rss_caps => "rss_caps", max_wq_type_rq => "max_wq_type_rq",
                packet_pacing_caps => "packet_pacing_caps", raw_packet_caps => "raw_packet_caps",
                tm_caps => "tm_caps", cq_mod_caps => "cq_mod_caps", max_dm_size => "max_dm_size",
                pci_atomic_caps => "pci_atomic_caps", xrc_odp_caps => "xrc_odp_caps",
                phys_port_cnt_ex => "phys_port_cnt_ex" }),
            l!(IbvPortAttr => "struct ibv_port_attr" { state => "state", max_mtu => "max_mtu",
                active_mtu => "active_mtu", gid_tbl_len => "gid_tbl_len",
                port_cap_flags => "port_cap_flags", max_msg_sz => "max_msg_sz",
                bad_pkey_cntr => "bad_pkey_cntr", qkey_viol_cntr => "qkey_viol_cntr",
                pkey_tbl_len => "pkey_tbl_len", lid => "lid", sm_lid => "sm_lid", lmc => "lmc",
                max_vl_num => "max_vl_num", sm_sl => "sm_sl", subnet_timeout => "subnet_timeout",
                init_type_reply => "init_type_reply", active_width => "active_width",
                active_speed => "active_speed", phys_state => "phys_state",
                link_layer => "link_layer", flags => "flags",
                port_cap_flags2 => "port_cap_flags2" }),
            l!(IbvPd => "struct ibv_pd" { context => "context", handle => "handle" }),
            l!(IbvMr => "struct ibv_mr" { context => "context", pd => "pd", addr => "addr",
                length => "length", handle => "handle", lkey => "lkey", rkey => "rkey" }),
            l!(IbvCompChannel => "struct ibv_comp_channel" { context => "context", fd => "fd",
                refcnt => "refcnt" }),
            l!(IbvCq => "struct ibv_cq" { context => "context", channel => "channel",
                cq_context => "cq_context", handle => "handle", cqe => "cqe", mutex => "mutex",
                cond => "cond", comp_events_completed => "comp_events_completed",
                async_events_completed => "async_events_completed" }),
            l!(IbvQpCap => "struct ibv_qp_cap" { max_send_wr => "max_send_wr",
                max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
                max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data" }),
            l!(IbvQp => "struct ibv_qp" { context => "context", qp_context => "qp_context",
                pd => "pd", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq",
                handle => "handle", qp_num => "qp_num", state => "state", qp_type => "qp_type",
                mutex => "mutex", cond => "cond", events_completed => "events_completed" }),
            l!(IbvQpInitAttr => "struct ibv_qp_init_attr" { qp_context => "qp_context",
                send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap",
                qp_type => "qp_type", sq_sig_all => "sq_sig_all" }),
            l!(IbvGid => "union ibv_gid" { raw => "raw" }),
            l!(IbvGidEntry => "struct ibv_gid_entry" { gid => "gid", gid_index => "gid_index",
                port_num => "port_num", gid_type => "gid_type", ndev_ifindex => "ndev_ifindex" }),
            l!(IbvGlobalRoute => "struct ibv_global_route" { dgid => "dgid",
                flow_label => "flow_label", sgid_index => "sgid_index", hop_limit => "hop_limit",
                traffic_class => "traffic_class" }),
            l!(IbvAhAttr => "struct ibv_ah_attr" { grh => "grh", dlid => "dlid", sl => "sl",
                src_path_bits => "src_path_bits", static_rate => "static_rate",
                is_global => "is_global", port_num => "port_num" }),
            l!(IbvQpAttr => "struct ibv_qp_attr" { qp_state => "qp_state",
                cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
                path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn",
                sq_psn => "sq_psn", dest_qp_num => "dest_qp_num",
                qp_access_flags => "qp_access_flags", cap => "cap", ah_attr => "ah_attr",
                alt_ah_attr => "alt_ah_attr", pkey_index => "pkey_index",
                alt_pkey_index => "alt_pkey_index", en_sqd_async_notify => "en_sqd_async_notify",
                sq_draining => "sq_draining", max_rd_atomic => "max_rd_atomic",
                max_dest_rd_atomic => "max_dest_rd_atomic", min_rnr_timer => "min_rnr_timer",
                port_num => "port_num", timeout => "timeout", retry_cnt => "retry_cnt",
                rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
                alt_timeout => "alt_timeout", rate_limit => "rate_limit" }),
            l!(IbvWc => "struct ibv_wc" { wr_id => "wr_id", status => "status",
                opcode => "opcode", vendor_err => "vendor_err", byte_len => "byte_len",
                imm_data => "imm_data", imm_data => "invalidated_rkey", qp_num => "qp_num",
                src_qp => "src_qp", wc_flags => "wc_flags", pkey_index => "pkey_index",
                slid => "slid", sl => "sl", dlid_path_bits => "dlid_path_bits" }),
            l!(IbvSge => "struct ibv_sge" { addr => "addr", length => "length", lkey => "lkey" }),
            l!(IbvSendWrRdma => "struct { uint64_t remote_addr; uint32_t rkey; }"
                { remote_addr => "remote_addr", rkey => "rkey" }),
            l!(IbvSendWr => "struct ibv_send_wr" { wr_id => "wr_id", next => "next",
                sg_list => "sg_list", num_sge => "num_sge", opcode => "opcode",
                send_flags => "send_flags", imm_data => "imm_data",
                imm_data => "invalidate_rkey",
                wr.rdma.remote_addr => "wr.rdma.remote_addr", wr.rdma.rkey => "wr.rdma.rkey",
                wr.atomic.remote_addr => "wr.atomic.remote_addr",
                wr.atomic.compare_add => "wr.atomic.compare_add",
                wr.atomic.swap => "wr.atomic.swap", wr.atomic.rkey => "wr.atomic.rkey",
                wr.ud.ah => "wr.ud.ah", wr.ud.remote_qpn => "wr.ud.remote_qpn",
                wr.ud.remote_qkey => "wr.ud.remote_qkey",
                xrc_remote_srqn => "qp_type.xrc.remote_srqn",
                bind_mw_or_tso => "bind_mw.mw",
                bind_mw_or_tso.bind_mw.rkey => "bind_mw.rkey",
                bind_mw_or_tso.bind_mw.bind_info => "bind_mw.bind_info",
                bind_mw_or_tso.bind_mw.bind_info.length => "bind_mw.bind_info.length" }),
            l!(IbvRecvWr => "struct ibv_recv_wr" { wr_id => "wr_id", next => "next",
                sg_list => "sg_list", num_sge => "num_sge" }),
            l!(IbvMwBindInfo => "struct ibv_mw_bind_info" { mr => "mr", addr => "addr",
                length => "length", mw_access_flags => "mw_access_flags" }),
            l!(IbvMw => "struct ibv_mw" { context => "context", pd => "pd", rkey => "rkey",
                handle => "handle", mw_type => "type" }),
            l!(IbvMwBind => "struct ibv_mw_bind" { wr_id => "wr_id", send_flags => "send_flags",
                bind_info => "bind_info" }),
            l!(IbvAh => "struct ibv_ah" { context => "context", pd => "pd", handle => "handle" }),
            l!(IbvSrq => "struct ibv_srq" { context => "context", srq_context => "srq_context",
                pd => "pd", handle => "handle", mutex => "mutex", cond => "cond",
                events_completed => "events_completed" }),
            l!(IbvSrqAttr => "struct ibv_srq_attr" { max_wr => "max_wr", max_sge => "max_sge",
                srq_limit => "srq_limit" }),
            l!(IbvSrqInitAttr => "struct ibv_srq_init_attr" { srq_context => "srq_context",
                attr => "attr" }),
        ]
    }

    /// The C program: for every layout, `NAME size align` and then one
    /// `NAME.member offset` line per field, from the header.
    fn c_program(ls: &[L]) -> String {
        let mut s = String::from(
            "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\n\
             typedef struct { uint64_t remote_addr; uint32_t rkey; } rdma_t;\n\
             int main(void) {\n",
        );
        for l in ls {
            // The anonymous `wr.rdma` struct: checked through a typedef of
            // the same shape (and its offsets inside ibv_send_wr below).
            let c = if l.c.starts_with("struct {") {
                "rdma_t"
            } else {
                l.c
            };
            s += &format!(
                "printf(\"{} %zu %zu\\n\", sizeof({c}), _Alignof({c}));\n",
                l.rust
            );
            for (f, _) in &l.fields {
                let f = if *f == "raw" && l.rust == "IbvGid" {
                    "raw[0]"
                } else {
                    f
                };
                s += &format!("printf(\"{}.{f} %zu\\n\", offsetof({c}, {f}));\n", l.rust);
            }
        }
        s += "return 0; }\n";
        s
    }

    #[test]
    // Miri cannot run the C compiler.
    #[cfg_attr(miri, ignore)]
    fn structs_match_verbs_h() {
        let ls = layouts();
        let text = crate::ctest::run_c("libibverbs-layout", &c_program(&ls), false);
        let mut lines = text.lines();
        let (mut structs, mut fields) = (0, 0);
        for l in &ls {
            let want = format!("{} {} {}", l.rust, l.size, l.align);
            assert_eq!(
                lines.next(),
                Some(want.as_str()),
                "size/align of {} ({})",
                l.rust,
                l.c
            );
            structs += 1;
            for (f, off) in &l.fields {
                let f = if *f == "raw" && l.rust == "IbvGid" {
                    "raw[0]"
                } else {
                    f
                };
                let want = format!("{}.{f} {off}", l.rust);
                assert_eq!(lines.next(), Some(want.as_str()), "offset in {}", l.c);
                fields += 1;
            }
        }
        // The prefix the exported (compat) ibv_query_port writes.
        assert_eq!(COMPAT_PORT_ATTR_LEN, 48);
        eprintln!("libibverbs layout: {structs} structs, {fields} members checked against verbs.h");
    }
}

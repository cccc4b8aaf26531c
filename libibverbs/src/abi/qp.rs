//! Queue pairs: `struct ibv_qp`, its creation and modification attributes,
//! and the extended QP (`struct ibv_qp_ex`) of the `ibv_wr_*` API.

use super::{IbvAhAttr, IbvContext, IbvCq, IbvPd, PthreadCond, PthreadMutex, Slot};
use std::ffi::{c_int, c_uint, c_void};

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

/// `struct ibv_rx_hash_conf`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvRxHashConf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut IbvPd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: IbvRxHashConf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `enum ibv_qp_init_attr_mask` bits.
pub mod init_mask {
    pub const PD: u32 = 1;
    pub const CREATE_FLAGS: u32 = 1 << 2;
    pub const SEND_OPS_FLAGS: u32 = 1 << 6;
}

/// `enum ibv_qp_create_send_ops_flags` this library posts.
pub mod send_ops {
    pub const RDMA_WRITE: u64 = 1;
    pub const RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
    pub const SEND: u64 = 1 << 2;
    pub const SEND_WITH_IMM: u64 = 1 << 3;
    pub const RDMA_READ: u64 = 1 << 4;
    pub const ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
    pub const ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
    pub const LOCAL_INV: u64 = 1 << 7;
    pub const BIND_MW: u64 = 1 << 8;
    pub const SEND_WITH_INV: u64 = 1 << 9;
    pub const ATOMIC_WRITE: u64 = 1 << 12;
    pub const SUPPORTED: u64 = RDMA_WRITE
        | RDMA_WRITE_WITH_IMM
        | SEND
        | SEND_WITH_IMM
        | RDMA_READ
        | ATOMIC_CMP_AND_SWP
        | ATOMIC_FETCH_AND_ADD
        | LOCAL_INV
        | BIND_MW
        | SEND_WITH_INV
        | ATOMIC_WRITE;
}

/// The function slots of `struct ibv_qp_ex`, in the header's order (each
/// has its own C signature; stored untyped, as C sees a slot).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpExOps {
    pub wr_atomic_cmp_swp: Slot,
    pub wr_atomic_fetch_add: Slot,
    pub wr_bind_mw: Slot,
    pub wr_local_inv: Slot,
    pub wr_rdma_read: Slot,
    pub wr_rdma_write: Slot,
    pub wr_rdma_write_imm: Slot,
    pub wr_send: Slot,
    pub wr_send_imm: Slot,
    pub wr_send_inv: Slot,
    pub wr_send_tso: Slot,
    pub wr_set_ud_addr: Slot,
    pub wr_set_xrc_srqn: Slot,
    pub wr_set_inline_data: Slot,
    pub wr_set_inline_data_list: Slot,
    pub wr_set_sge: Slot,
    pub wr_set_sge_list: Slot,
    pub wr_start: Slot,
    pub wr_complete: Slot,
    pub wr_abort: Slot,
    pub wr_atomic_write: Slot,
}

/// `struct ibv_qp_ex` after its `qp_base`: `comp_mask`, the `wr_id` and
/// `wr_flags` the program sets before each `wr_<op>`, and the slots.
#[repr(C)]
pub struct IbvQpExTail {
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: u32,
    pub ops: IbvQpExOps,
}

/// The `struct ibv_qp_ex` C passes to its slots: a QP box's address.
#[repr(C)]
pub struct IbvQpExC {
    _private: [u8; 0],
}

//! Completion queues: `struct ibv_cq`, its channel, the completion C
//! reads (`struct ibv_wc`), and the extended CQ (`struct ibv_cq_ex`) that
//! `ibv_create_cq_ex` returns.

use super::{IbvContext, IbvPd, PthreadCond, PthreadMutex, Slot};
use std::ffi::{c_int, c_uint, c_void};

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

/// `enum ibv_wc_flags`: `IBV_WC_GRH`.
pub const WC_GRH: c_uint = 1 << 0;

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvCqInitAttrEx {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut IbvCompChannel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut IbvPd,
}

/// `IBV_WC_STANDARD_FLAGS`: byte_len, imm, qp_num, src_qp, slid, sl,
/// dlid_path_bits: what a `struct ibv_wc` holds, so what rverbs reports.
pub const WC_STANDARD_FLAGS: u64 = 0x7f;

/// `enum ibv_cq_init_attr_mask`: `IBV_CQ_INIT_ATTR_MASK_FLAGS`.
pub const CQ_INIT_ATTR_FLAGS: u32 = 1;

/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` of `enum ibv_create_cq_attr_flags`.
pub const CREATE_CQ_SINGLE_THREADED: u32 = 1 << 0;

/// The function slots of `struct ibv_cq_ex`, in the header's order (each
/// has its own C signature; stored untyped, as C sees a slot).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvCqExOps {
    pub start_poll: Slot,
    pub next_poll: Slot,
    pub end_poll: Slot,
    pub read_opcode: Slot,
    pub read_vendor_err: Slot,
    pub read_byte_len: Slot,
    pub read_imm_data: Slot,
    pub read_qp_num: Slot,
    pub read_src_qp: Slot,
    pub read_wc_flags: Slot,
    pub read_slid: Slot,
    pub read_sl: Slot,
    pub read_dlid_path_bits: Slot,
    pub read_completion_ts: Slot,
    pub read_cvlan: Slot,
    pub read_flow_tag: Slot,
    pub read_tm_info: Slot,
    pub read_completion_wallclock_ns: Slot,
}

/// `struct ibv_cq_ex` after the members it shares with `struct ibv_cq`.
#[repr(C)]
pub struct IbvCqExTail {
    pub comp_mask: u32,
    /// `enum ibv_wc_status` of the current completion.
    pub status: c_int,
    pub wr_id: u64,
    pub ops: IbvCqExOps,
}

/// The `struct ibv_cq_ex` C passes to its slots: a CQ box's address.
#[repr(C)]
pub struct IbvCqExC {
    _private: [u8; 0],
}

//! Work requests: `struct ibv_send_wr` and `struct ibv_recv_wr` with
//! their SGEs, and the data buffers of `ibv_wr_set_inline_data_list`.

use super::{IbvMw, IbvMwBindInfo};
use std::ffi::{c_int, c_uint, c_void};

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

/// `struct ibv_data_buf`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvDataBuf {
    pub addr: *mut c_void,
    pub length: usize,
}

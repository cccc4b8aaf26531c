//! Shared receive queues: `struct ibv_srq` and its attributes.

use super::{IbvContext, IbvPd, PthreadCond, PthreadMutex};
use std::ffi::c_void;

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

//! A protection domain and what is registered or allocated on one: MRs
//! and memory windows.

use super::IbvContext;
use std::ffi::{c_int, c_uint, c_void};

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

/// `struct ibv_mw_bind_info`: what a window is bound to.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvMwBindInfo {
    pub mr: *mut IbvMr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

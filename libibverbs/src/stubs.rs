//! Exported functions this library does not implement yet. Each fails the
//! way libibverbs reports that kind of failure, with `EOPNOTSUPP`: NULL +
//! errno for constructors, the errno for calls that return one, -1 +
//! errno for calls that return -1. Never a crash: the functions take no
//! arguments in Rust (the caller's are ignored, which the C calling
//! convention allows: the caller cleans up its own arguments).

use crate::{export, null_errno, set_errno};
use std::ffi::{c_int, c_void};

extern "C" fn null_eopnotsupp() -> *mut c_void {
    null_errno(libc::EOPNOTSUPP)
}

extern "C" fn errno_eopnotsupp() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    libc::EOPNOTSUPP
}

extern "C" fn minus1_eopnotsupp() -> c_int {
    set_errno(libc::EOPNOTSUPP);
    -1
}

extern "C" fn neg_eopnotsupp() -> isize {
    set_errno(libc::EOPNOTSUPP);
    -(libc::EOPNOTSUPP as isize)
}

/// Calls with nothing to report (`void`), or whose work rverbs does not
/// need (fork ranges: the kernels rverbs supports copy pinned pages on
/// fork, so there is nothing to mark): they succeed doing nothing.
extern "C" fn nothing() -> c_int {
    0
}

// Constructors: NULL + errno.
export!("ibv_create_ah" = null_eopnotsupp);
export!("ibv_create_ah_from_wc" = null_eopnotsupp);
export!("ibv_create_srq" = null_eopnotsupp);
export!("ibv_rereg_mr" = errno_eopnotsupp);
export!("ibv_qp_to_qp_ex" = null_eopnotsupp);
export!("ibv_import_device" = null_eopnotsupp);
export!("ibv_import_mr" = null_eopnotsupp);
export!("ibv_import_pd" = null_eopnotsupp);
export!("ibv_import_dm" = null_eopnotsupp);
export!("ibv_reg_dmabuf_mr" = null_eopnotsupp);
export!("ibv_get_sysfs_path" = null_eopnotsupp);
// Calls that return an errno.
export!("ibv_destroy_ah" = errno_eopnotsupp);
export!("ibv_destroy_srq" = errno_eopnotsupp);
export!("ibv_modify_srq" = errno_eopnotsupp);
export!("ibv_query_srq" = errno_eopnotsupp);
export!("ibv_attach_mcast" = errno_eopnotsupp);
export!("ibv_detach_mcast" = errno_eopnotsupp);
export!("ibv_resize_cq" = errno_eopnotsupp);
export!("ibv_query_ece" = errno_eopnotsupp);
export!("ibv_set_ece" = errno_eopnotsupp);
export!("ibv_init_ah_from_wc" = errno_eopnotsupp);
export!("ibv_resolve_eth_l2_from_gid" = errno_eopnotsupp);
export!("ibv_query_qp_data_in_order" = nothing);
export!("_ibv_query_gid_ex" = errno_eopnotsupp);
// Calls that return -1 (or a negative errno) on failure.
export!("ibv_get_async_event" = minus1_eopnotsupp);
export!("ibv_get_pkey_index" = minus1_eopnotsupp);
export!("ibv_rate_to_mult" = minus1_eopnotsupp);
export!("ibv_rate_to_mbps" = minus1_eopnotsupp);
export!("mult_to_ibv_rate" = nothing);
export!("mbps_to_ibv_rate" = nothing);
export!("_ibv_query_gid_table" = neg_eopnotsupp);
// void, or nothing to do.
export!("ibv_ack_async_event" = nothing);
export!("ibv_unimport_mr" = nothing);
export!("ibv_unimport_pd" = nothing);
export!("ibv_unimport_dm" = nothing);
export!("ibv_dofork_range" = nothing);
export!("ibv_dontfork_range" = nothing);
export!("ibv_copy_qp_attr_from_kern" = nothing);
export!("ibv_copy_ah_attr_from_kern" = nothing);
export!("ibv_copy_path_rec_from_kern" = nothing);
export!("ibv_copy_path_rec_to_kern" = nothing);

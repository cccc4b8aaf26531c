//! Exported functions with nothing to do here: those this library does
//! not implement yet, and the fork helpers rverbs does not need. Each
//! unimplemented one fails the way libibverbs reports that kind of
//! failure, with `EOPNOTSUPP`: NULL + errno for constructors, the errno for
//! calls that return one, -1 + errno for calls that return -1. Never a
//! crash: the functions take no arguments in Rust (the caller's are
//! ignored, which the C calling convention allows: the caller cleans up
//! its own arguments).

use crate::guard;
use crate::{export, null_errno, set_errno};
use std::ffi::{c_int, c_void};

extern "C" fn null_eopnotsupp() -> *mut c_void {
    guard::null(|| null_errno(libc::EOPNOTSUPP))
}

extern "C" fn errno_eopnotsupp() -> c_int {
    guard::errno(|| {
        set_errno(libc::EOPNOTSUPP);
        libc::EOPNOTSUPP
    })
}

extern "C" fn minus1_eopnotsupp() -> c_int {
    guard::minus1(|| {
        set_errno(libc::EOPNOTSUPP);
        -1
    })
}

/// Calls with nothing to report (`void`), or whose work rverbs does not
/// need (fork ranges: the kernels rverbs supports copy pinned pages on
/// fork, so there is nothing to mark): they succeed doing nothing.
extern "C" fn nothing() -> c_int {
    guard::errno(|| 0)
}

/// `ibv_fork_init`: rverbs needs no fork preparation on the kernels it
/// supports (5.13+ copies pinned pages on fork); 0, as libibverbs returns
/// when the kernel is fork-safe.
extern "C" fn fork_init() -> c_int {
    guard::errno(|| 0)
}
export!("ibv_fork_init" = fork_init);

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED` (2).
extern "C" fn is_fork_initialized() -> c_int {
    guard::value(2, || 2)
}
export!("ibv_is_fork_initialized" = is_fork_initialized);

// Constructors: NULL + errno.
export!("ibv_import_device" = null_eopnotsupp);
export!("ibv_import_mr" = null_eopnotsupp);
export!("ibv_import_pd" = null_eopnotsupp);
export!("ibv_import_dm" = null_eopnotsupp);
// Calls that return an errno.
export!("ibv_query_ece" = errno_eopnotsupp);
export!("ibv_set_ece" = errno_eopnotsupp);
export!("ibv_query_qp_data_in_order" = nothing);
// Calls that return -1 (or a negative errno) on failure: a caller tests
// for a negative answer.
export!("ibv_resolve_eth_l2_from_gid" = minus1_eopnotsupp);
// void, or nothing to do.
export!("ibv_unimport_mr" = nothing);
export!("ibv_unimport_pd" = nothing);
export!("ibv_unimport_dm" = nothing);
export!("ibv_dofork_range" = nothing);
export!("ibv_dontfork_range" = nothing);

// Provider-facing IBVERBS_PRIVATE_34 symbols. rdma-core's C providers
// (libmlx5.so.1, libefa.so.1: pyverbs links them) need them to load;
// rverbs' providers are its own Rust ones, so a C provider that registers
// itself is ignored, and a command it issues is refused.
export!("verbs_uninit_context" = nothing);
export!("ibv_cmd_create_counters" = errno_eopnotsupp);
export!("ibv_cmd_dealloc_mw" = errno_eopnotsupp);
export!("_verbs_init_and_alloc_context" = null_eopnotsupp);
export!("verbs_register_driver_34" = nothing);
export!("ibv_cmd_modify_qp_ex" = errno_eopnotsupp);
export!("ibv_cmd_reg_dm_mr" = errno_eopnotsupp);
export!("__ioctl_final_num_attrs" = nothing);
export!("ibv_cmd_create_flow_action_esp" = errno_eopnotsupp);
export!("ibv_cmd_open_qp" = errno_eopnotsupp);
export!("ibv_cmd_query_context" = errno_eopnotsupp);
export!("ibv_cmd_destroy_ah" = errno_eopnotsupp);
export!("ibv_cmd_advise_mr" = errno_eopnotsupp);
export!("ibv_cmd_rereg_mr" = errno_eopnotsupp);
export!("execute_ioctl" = errno_eopnotsupp);
export!("ibv_cmd_alloc_mw" = errno_eopnotsupp);
export!("ibv_cmd_read_counters" = errno_eopnotsupp);
export!("ibv_cmd_create_cq_ex" = errno_eopnotsupp);
export!("verbs_set_ops" = nothing);
export!("ibv_cmd_req_notify_cq" = errno_eopnotsupp);
export!("ibv_cmd_modify_cq" = errno_eopnotsupp);
export!("ibv_cmd_destroy_qp" = errno_eopnotsupp);
export!("ibv_cmd_modify_wq" = errno_eopnotsupp);
export!("verbs_open_device" = null_eopnotsupp);
export!("ibv_cmd_destroy_flow_action" = errno_eopnotsupp);
export!("ibv_cmd_post_send" = errno_eopnotsupp);
export!("ibv_cmd_reg_mr" = errno_eopnotsupp);
export!("verbs_init_cq" = nothing);
export!("ibv_cmd_post_recv" = errno_eopnotsupp);
export!("ibv_cmd_query_qp" = errno_eopnotsupp);
export!("ibv_cmd_query_mr" = errno_eopnotsupp);
export!("ibv_cmd_destroy_flow" = errno_eopnotsupp);
export!("ibv_cmd_query_port" = errno_eopnotsupp);
export!("ibv_read_ibdev_sysfs_file" = minus1_eopnotsupp);
export!("ibv_cmd_post_srq_recv" = errno_eopnotsupp);
export!("ibv_cmd_dereg_mr" = errno_eopnotsupp);
export!("ibv_cmd_get_context" = errno_eopnotsupp);
export!("ibv_cmd_create_srq" = errno_eopnotsupp);
export!("ibv_cmd_destroy_counters" = errno_eopnotsupp);
export!("ibv_cmd_create_cq" = errno_eopnotsupp);
export!("ibv_cmd_destroy_rwq_ind_table" = errno_eopnotsupp);
export!("ibv_cmd_create_flow" = errno_eopnotsupp);
export!("__verbs_log" = nothing);
export!("ibv_cmd_modify_flow_action_esp" = errno_eopnotsupp);
export!("ibv_cmd_close_xrcd" = errno_eopnotsupp);
export!("ibv_cmd_create_wq" = errno_eopnotsupp);
export!("ibv_cmd_create_qp_ex" = errno_eopnotsupp);
export!("ibv_cmd_create_rwq_ind_table" = errno_eopnotsupp);
export!("ibv_cmd_poll_cq" = errno_eopnotsupp);
export!("ibv_cmd_free_dm" = errno_eopnotsupp);
export!("ibv_cmd_modify_srq" = errno_eopnotsupp);
export!("ibv_cmd_create_qp_ex2" = errno_eopnotsupp);
export!("ibv_cmd_resize_cq" = errno_eopnotsupp);
export!("ibv_cmd_query_srq" = errno_eopnotsupp);
export!("ibv_cmd_dealloc_pd" = errno_eopnotsupp);
export!("ibv_cmd_detach_mcast" = errno_eopnotsupp);
export!("ibv_cmd_open_xrcd" = errno_eopnotsupp);
export!("ibv_cmd_destroy_cq" = errno_eopnotsupp);
export!("ibv_cmd_modify_qp" = errno_eopnotsupp);
export!("ibv_cmd_destroy_wq" = errno_eopnotsupp);
export!("ibv_cmd_alloc_pd" = errno_eopnotsupp);
export!("ibv_cmd_query_device_any" = errno_eopnotsupp);
export!("ibv_cmd_alloc_dm" = errno_eopnotsupp);
export!("ibv_cmd_create_ah" = errno_eopnotsupp);
export!("ibv_cmd_attach_mcast" = errno_eopnotsupp);
export!("ibv_cmd_destroy_srq" = errno_eopnotsupp);
export!("ibv_cmd_create_srq_ex" = errno_eopnotsupp);
export!("ibv_cmd_create_qp" = errno_eopnotsupp);
export!("ibv_cmd_reg_dmabuf_mr" = errno_eopnotsupp);

// `bool verbs_allow_disassociate_destroy` (a data object providers read):
// false, as in rdma-core unless a program sets it.
#[cfg(target_arch = "x86_64")]
::std::arch::global_asm!(
    ".pushsection .bss.rverbs_exports,\"aw\",@nobits",
    ".globl verbs_allow_disassociate_destroy",
    ".type verbs_allow_disassociate_destroy,@object",
    ".size verbs_allow_disassociate_destroy, 1",
    "verbs_allow_disassociate_destroy:",
    ".zero 1",
    ".popsection",
);

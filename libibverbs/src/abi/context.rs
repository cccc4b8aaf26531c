//! An open device: `struct ibv_context`, the `struct verbs_context` laid
//! out before it, the two tables of operations `verbs.h`'s inline
//! functions call through, and `struct ibv_async_event`.

use super::{
    IbvCq, IbvCqInitAttrEx, IbvDevice, IbvDeviceAttrEx, IbvMw, IbvMwBind, IbvPd, IbvPortAttr,
    IbvQp, IbvQpInitAttrEx, IbvRecvWr, IbvSendWr, IbvWc,
};
use std::ffi::{c_int, c_void};

/// `verbs_context.query_device_ex`.
pub type QueryDeviceExFn =
    unsafe extern "C" fn(*mut IbvContext, *const c_void, *mut IbvDeviceAttrEx, usize) -> c_int;
/// `verbs_context.query_port`.
pub type QueryPortFn = unsafe extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr, usize) -> c_int;
/// `verbs_context.create_cq_ex`.
pub type CreateCqExFn = unsafe extern "C" fn(*mut IbvContext, *mut IbvCqInitAttrEx) -> *mut IbvCq;
/// `verbs_context.create_qp_ex`.
pub type CreateQpExFn = unsafe extern "C" fn(*mut IbvContext, *mut IbvQpInitAttrEx) -> *mut IbvQp;
/// `ops.alloc_mw`.
pub type AllocMwFn = unsafe extern "C" fn(*mut IbvPd, c_int) -> *mut IbvMw;
/// `ops.bind_mw`.
pub type BindMwFn = unsafe extern "C" fn(*mut IbvQp, *mut IbvMw, *mut IbvMwBind) -> c_int;
/// `ops.dealloc_mw`.
pub type DeallocMwFn = unsafe extern "C" fn(*mut IbvMw) -> c_int;
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

/// `struct ibv_context_ops`: the table `verbs.h`'s inline data-path
/// functions call through. The `_compat_*` slots are dead in rdma-core 44
/// (always NULL there too).
#[repr(C)]
pub struct IbvContextOps {
    /// `_compat_query_device` … `_compat_dereg_mr` (7 slots).
    pub compat_a: [*const c_void; 7],
    pub alloc_mw: Option<AllocMwFn>,
    pub bind_mw: Option<BindMwFn>,
    pub dealloc_mw: Option<DeallocMwFn>,
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
    /// `advise_mr` … `query_rt_values` (24 slots).
    pub ops_a: [*const c_void; 24],
    pub create_cq_ex: Option<CreateCqExFn>,
    pub priv_: *mut c_void,
    pub query_device_ex: Option<QueryDeviceExFn>,
    /// `ibv_destroy_flow` … `open_qp` (5 slots).
    pub ops_b: [*const c_void; 5],
    pub create_qp_ex: Option<CreateQpExFn>,
    /// `get_srq_num` … `close_xrcd` (4 slots).
    pub ops_c: [*const c_void; 4],
    pub abi_placeholder3: u64,
    pub sz: usize,
    pub context: IbvContext,
}

/// `struct ibv_async_event`: the object (a pointer, or the port number
/// for port events) and `enum ibv_event_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAsyncEvent {
    /// `element`: `cq`/`qp`/`srq`/`wq` pointer, or `port_num` in the low
    /// 4 bytes.
    pub element: usize,
    pub event_type: c_int,
}

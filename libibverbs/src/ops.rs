//! The top: `ibv_open_device` makes a context and fills the tables C
//! calls through, from the modules below; `ibv_close_device` frees it.
//! No other file names another's entry points for C, so everything below
//! depends only downward.
//!
//! The context is a `struct verbs_context` (ending with the `ibv_context`
//! C holds; `abi_compat` = `__VERBS_ABI_IS_EXTENDED`, `sz` set), so that
//! `verbs.h`'s inline `ibv_query_port`, `ibv_query_device_ex`,
//! `ibv_create_cq_ex` and `ibv_create_qp_ex` dispatch through it; the
//! inline `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`,
//! `ibv_req_notify_cq` and the window verbs through `ibv_context.ops`;
//! `ibv_start_poll` … and `ibv_wr_*` through the slots of each CQ's and
//! QP's extended struct, copied from the context's ([`ExOps`]).

use crate::abi::*;
use crate::context::{query_device_ex, query_port_ex, CtxBox, ExOps};
use crate::device::DevBox;
use crate::obj::{destroy, CObject};
use crate::{bind, cq, guard, mw, poll, qp, recv, send, wr};
use crate::{errno_of, export, null_errno};
use rverbs::Context;
use std::ffi::c_int;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// `struct ibv_context_ops`: the data path and the window verbs.
fn context_ops() -> IbvContextOps {
    IbvContextOps {
        compat_a: [std::ptr::null(); 7],
        alloc_mw: Some(mw::alloc_mw),
        bind_mw: Some(bind::bind_mw),
        dealloc_mw: Some(mw::dealloc_mw),
        compat_create_cq: std::ptr::null(),
        poll_cq: Some(poll::poll_cq),
        req_notify_cq: Some(poll::req_notify_cq),
        compat_b: [std::ptr::null(); 7],
        post_srq_recv: Some(recv::post_srq_recv),
        compat_c: [std::ptr::null(); 4],
        post_send: Some(send::post_send),
        post_recv: Some(recv::post_recv),
        compat_d: [std::ptr::null(); 5],
    }
}

/// `struct verbs_context` around `context`: the extended verbs this
/// library offers; every other slot NULL, so `verbs.h`'s inlines answer
/// `EOPNOTSUPP` for them.
fn verbs_context(context: IbvContext) -> VerbsContext {
    VerbsContext {
        query_port: Some(query_port_ex),
        ops_a: [std::ptr::null(); 24],
        create_cq_ex: Some(cq::create_cq_ex),
        priv_: std::ptr::null_mut(),
        query_device_ex: Some(query_device_ex),
        ops_b: [std::ptr::null(); 5],
        create_qp_ex: Some(qp::create_qp_ex),
        ops_c: [std::ptr::null(); 4],
        abi_placeholder3: 0,
        sz: std::mem::size_of::<VerbsContext>(),
        context,
    }
}

unsafe extern "C" fn open_device(d: *mut IbvDevice) -> *mut IbvContext {
    guard::null(|| {
        // SAFETY: a device of ours (C contract).
        let Some(dev) = (unsafe { DevBox::of_static(d) }) else {
            return null_errno(libc::EINVAL);
        };
        let ctx = match Context::open(&dev.dev) {
            Ok(c) => c,
            Err(e) => return null_errno(errno_of(&e)),
        };
        let c = IbvContext {
            device: d,
            ops: context_ops(),
            // rverbs does not hand out its command fd: C code that issues
            // commands itself is not supported.
            cmd_fd: -1,
            async_fd: ctx.async_fd().as_raw_fd(),
            num_comp_vectors: ctx.num_comp_vectors() as c_int,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            abi_compat: VERBS_ABI_IS_EXTENDED,
        };
        CtxBox {
            v: verbs_context(c),
            ctx,
            dev,
            async_reading: Mutex::new(()),
            ex_ops: ExOps {
                cq: poll::cq_ex_ops(dev.dev.driver()),
                qp: wr::qp_ex_ops::<wr::Gather>(),
                qp_in_ring: wr::qp_ex_ops::<wr::InRing>(),
            },
        }
        .into_c()
    })
}
export!("ibv_open_device" = open_device);

/// `ibv_close_device`: 0, as rdma-core answers whatever is left open (the
/// kernel objects go with the last of rverbs' references to the context).
unsafe extern "C" fn close_device(c: *mut IbvContext) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract), closed once.
        unsafe { destroy(c, |_: &CtxBox| Ok(())) }
    })
}
export!("ibv_close_device" = close_device);

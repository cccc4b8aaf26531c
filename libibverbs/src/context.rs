//! An open device, and what is queried of it: `ibv_query_device` (and the
//! `_ex` form `verbs.h` reaches through `verbs_context`), `ibv_query_port`,
//! the GID queries, `ibv_get_pkey_index`. The context itself is made and
//! closed on top, where its tables are filled (`ops.rs`).

use crate::abi::*;
use crate::convert::{device_attr, device_attr_ex, gid_entry, port_attr};
use crate::device::DevBox;
use crate::guard;
use crate::obj::CObject;
use crate::{errno_of, export, minus1_errno, ret_errno};
use rverbs::Context;
use std::ffi::{c_int, c_void};
use std::mem::offset_of;
use std::sync::Mutex;

/// An open device: `struct verbs_context` (which ends with the
/// `struct ibv_context` C programs hold) first, then the rverbs context.
#[repr(C)]
pub(crate) struct CtxBox {
    pub(crate) v: VerbsContext,
    pub(crate) ctx: Context,
    pub(crate) dev: &'static DevBox,
    /// Held while an async event is read and counted, and while a destroy
    /// decides and destroys (`async_event::try_counted`).
    pub(crate) async_reading: Mutex<()>,
    /// The function slots of the `ibv_cq_ex` and `ibv_qp_ex` every CQ and
    /// QP of this context carries (copied into each at its creation).
    pub(crate) ex_ops: ExOps,
}

/// The slots of the extended CQ and QP structs, as the context's tables
/// give them.
pub(crate) struct ExOps {
    pub(crate) cq: IbvCqExOps,
    /// Of a QP that gathers its `ibv_wr_*` batch (mlx5).
    pub(crate) qp: IbvQpExOps,
    /// Of a QP whose builders write into its send queue (rxe).
    pub(crate) qp_in_ring: IbvQpExOps,
}

// SAFETY: repr(C); the ibv_context C holds lies AT bytes in, at the end
// of the verbs_context, and is handed out only by ibv_open_device.
unsafe impl CObject for CtxBox {
    type C = IbvContext;
    const AT: usize = offset_of!(CtxBox, v) + offset_of!(VerbsContext, context);
}

unsafe extern "C" fn query_device(c: *mut IbvContext, out: *mut IbvDeviceAttr) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return ret_errno(libc::EINVAL);
        };
        if out.is_null() {
            return ret_errno(libc::EINVAL);
        }
        match b.ctx.query_device() {
            // SAFETY: out is a writable ibv_device_attr (C contract, non-NULL).
            Ok(a) => unsafe { out.write(device_attr(b.dev.dev.driver(), &a)) },
            Err(e) => return ret_errno(errno_of(&e)),
        }
        0
    })
}
export!("ibv_query_device" = query_device);

/// `verbs_context.query_device_ex`, what `verbs.h`'s inline
/// `ibv_query_device_ex` calls (`QUERY_DEVICE_EX`): writes the first
/// `len` bytes (the caller's `sizeof`).
pub(crate) unsafe extern "C" fn query_device_ex(
    c: *mut IbvContext,
    input: *const c_void,
    out: *mut IbvDeviceAttrEx,
    len: usize,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return libc::EINVAL;
        };
        // SAFETY: NULL or a readable ibv_query_device_ex_input, whose first
        // member is `comp_mask` (u32); none is defined.
        if !input.is_null() && unsafe { input.cast::<u32>().read_unaligned() } != 0 {
            return libc::EINVAL;
        }
        if out.is_null() || len < std::mem::size_of::<IbvDeviceAttr>() {
            return libc::EINVAL;
        }
        match b.ctx.query_device_ex() {
            Ok(a) => {
                let r = device_attr_ex(b.dev.dev.driver(), &a);
                // SAFETY: out has room for len bytes (C contract).
                unsafe { write_prefix(&r, out, len) };
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// Copies the first `len` bytes of `a` to `out`, at most the whole
/// struct (callers built against older headers pass a shorter one).
///
/// # Safety
/// `out` has room for `len` bytes, or for a whole `T` (C contract).
unsafe fn write_prefix<T>(a: &T, out: *mut T, len: usize) {
    let len = len.min(std::mem::size_of::<T>());
    // SAFETY: out has room for len bytes (the caller's contract; len is at
    // most the struct's size), and `a` is a distinct local.
    unsafe {
        std::ptr::copy_nonoverlapping(std::ptr::from_ref(a).cast::<u8>(), out.cast::<u8>(), len)
    };
}

/// `verbs_context.query_port`: what `verbs.h`'s inline `ibv_query_port`
/// calls, with the caller's `sizeof(struct ibv_port_attr)`.
pub(crate) unsafe extern "C" fn query_port_ex(
    c: *mut IbvContext,
    port: u8,
    out: *mut IbvPortAttr,
    len: usize,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return ret_errno(libc::EINVAL);
        };
        if out.is_null() {
            return ret_errno(libc::EINVAL);
        }
        match b.ctx.query_port(port) {
            // SAFETY: out has room for len bytes (C contract).
            Ok(p) => unsafe { write_prefix(&port_attr(&p), out, len) },
            Err(e) => return ret_errno(errno_of(&e)),
        }
        0
    })
}

/// The exported `ibv_query_port`: the 1.1 ABI's shorter struct.
unsafe extern "C" fn query_port_compat(
    c: *mut IbvContext,
    port: u8,
    out: *mut IbvPortAttr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: the compat struct is COMPAT_PORT_ATTR_LEN bytes (C contract).
        unsafe { query_port_ex(c, port, out, COMPAT_PORT_ATTR_LEN) }
    })
}
export!("ibv_query_port" = query_port_compat);

/// `ibv_query_gid`: 0, or -1 with errno. An empty entry (the kernel's
/// `ENODATA`) reads as the zero GID, as rdma-core keeps for its API; an
/// index past the table or a port the device lacks (`EINVAL`) is an
/// error, which ends the scans that look for a GID index
/// (`ibv_find_gid_index`'s).
unsafe extern "C" fn query_gid(
    c: *mut IbvContext,
    port: u8,
    index: c_int,
    gid: *mut IbvGid,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return minus1_errno(libc::EINVAL);
        };
        if gid.is_null() || index < 0 {
            return minus1_errno(libc::EINVAL);
        }
        let raw = match b.ctx.query_gid(port, index as u32) {
            Ok(g) => g,
            Err(e) if errno_of(&e) == libc::ENODATA => [0; 16],
            Err(e) => return minus1_errno(errno_of(&e)),
        };
        // SAFETY: gid is a writable union ibv_gid (C contract, non-NULL).
        unsafe { gid.write(IbvGid { raw }) };
        0
    })
}
export!("ibv_query_gid" = query_gid);

/// `_ibv_query_gid_ex` (what `verbs.h`'s `ibv_query_gid_ex` calls): one
/// populated entry, or `ENODATA` for an empty one; an errno return.
unsafe extern "C" fn query_gid_ex(
    c: *mut IbvContext,
    port: u32,
    index: u32,
    out: *mut IbvGidEntry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return libc::EINVAL;
        };
        if flags != 0 || out.is_null() || entry_size < std::mem::size_of::<IbvGidEntry>() {
            return libc::EINVAL;
        }
        let Ok(port8) = u8::try_from(port) else {
            return libc::EINVAL;
        };
        // The kernel's answer (QUERY_GID_ENTRY): ENODATA for an empty
        // entry, EINVAL for an index past the table or a missing port.
        match b.ctx.query_gid_entry(port8, index) {
            Ok(e) => {
                // SAFETY: out has room for entry_size >= size_of bytes (C contract).
                unsafe { out.write_unaligned(gid_entry(&e)) };
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}
export!("_ibv_query_gid_ex" = query_gid_ex);

/// `_ibv_query_gid_table` (what `ibv_query_gid_table` calls): every
/// populated entry of every port, `entry_size` apart; the count, or a
/// negative errno (`EINVAL` if they do not fit, as the kernel answers).
unsafe extern "C" fn query_gid_table(
    c: *mut IbvContext,
    out: *mut IbvGidEntry,
    max: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard::value(-(guard::PANICKED as isize), || {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return -(libc::EINVAL as isize);
        };
        if flags != 0
            || entry_size < std::mem::size_of::<IbvGidEntry>()
            || (max > 0 && out.is_null())
        {
            return -(libc::EINVAL as isize);
        }
        let table = match b.ctx.query_gid_table() {
            Ok(t) => t,
            Err(e) => return -(errno_of(&e) as isize),
        };
        if table.len() > max {
            return -(libc::EINVAL as isize);
        }
        for (i, e) in table.iter().enumerate() {
            // SAFETY: out has room for max entries of entry_size bytes (C
            // contract); i < table.len() <= max.
            unsafe {
                out.cast::<u8>()
                    .add(i * entry_size)
                    .cast::<IbvGidEntry>()
                    .write_unaligned(gid_entry(e))
            };
        }
        table.len() as isize
    })
}
export!("_ibv_query_gid_table" = query_gid_table);

/// `ibv_get_pkey_index`: the index of `pkey` (big-endian) in the port's
/// table, or -1 with errno (`ENOENT` when it is not there).
unsafe extern "C" fn get_pkey_index(c: *mut IbvContext, port: u8, pkey: u16) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return minus1_errno(libc::EINVAL);
        };
        let want = u16::from_be(pkey);
        // The table ends where sysfs has no more entries (as rdma-core's loop
        // ends at the first failing ibv_query_pkey); bounded by the 16-bit
        // index space.
        for i in 0..=u16::MAX {
            match b.ctx.query_pkey(port, i) {
                Ok(p) if p == want => return c_int::from(i),
                Ok(_) => {}
                Err(e) => return minus1_errno(errno_of(&e)),
            }
        }
        minus1_errno(libc::ENOENT)
    })
}
export!("ibv_get_pkey_index" = get_pkey_index);

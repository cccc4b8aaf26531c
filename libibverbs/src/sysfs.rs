//! What libibverbs reads from sysfs, and its sysfs helpers:
//! `ibv_query_pkey`, `ibv_query_gid_type`, `ibv_read_sysfs_file`,
//! `ibv_get_sysfs_path` (librdmacm reads the rdma_cm ABI version through
//! the last two).

use crate::abi::IbvContext;
use crate::context::CtxBox;
use crate::guard;
use crate::obj::CObject;
use crate::{export, minus1_errno};
use std::ffi::{c_char, c_int, c_uint, CStr};

/// The text of `ports/<path>` of the context's device in sysfs, its
/// trailing newline dropped; the errno of a failed read.
fn port_file(b: &CtxBox, path: &str) -> Result<String, c_int> {
    let dev = b.dev.dev.name();
    std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/ports/{path}"))
        .map(|s| s.trim_end_matches('\n').to_string())
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// `ibv_query_pkey`: from sysfs `ports/P/pkeys/I`, as rdma-core reads it;
/// written big-endian.
unsafe extern "C" fn query_pkey(
    c: *mut IbvContext,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return minus1_errno(libc::EINVAL);
        };
        let v = port_file(b, &format!("{port}/pkeys/{index}")).and_then(|s| {
            u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).map_err(|_| libc::EINVAL)
        });
        match v {
            Ok(v) if !pkey.is_null() => {
                // SAFETY: pkey is a writable __be16 (C contract, non-NULL).
                unsafe { pkey.write(v.to_be()) };
                0
            }
            Ok(_) => minus1_errno(libc::EINVAL),
            Err(e) => minus1_errno(e),
        }
    })
}
export!("ibv_query_pkey" = query_pkey);

/// `ibv_query_gid_type` (IBVERBS_PRIVATE_34, which `ibv_devinfo` calls):
/// `enum ibv_gid_type_sysfs` from sysfs `gid_attrs/types/I`. An entry the
/// kernel reports no type for (empty: the read fails with `EINVAL`) is
/// RoCE v1, as rdma-core answers for an empty one; an index past the table
/// or a missing port (no such file) is -1 with `EINVAL`, rdma-core's
/// answer (the kernel's, through `QUERY_GID_ENTRY`).
unsafe extern "C" fn query_gid_type(
    c: *mut IbvContext,
    port: u8,
    index: c_uint,
    out: *mut c_int,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return minus1_errno(libc::EINVAL);
        };
        let t = match port_file(b, &format!("{port}/gid_attrs/types/{index}")) {
            Ok(s) if s == "RoCE v2" => 1,
            Ok(s) if s == "IB/RoCE v1" => 0,
            Ok(_) => return minus1_errno(libc::EOPNOTSUPP),
            Err(libc::EINVAL) => 0,
            Err(libc::ENOENT) => return minus1_errno(libc::EINVAL),
            Err(e) => return minus1_errno(e),
        };
        if out.is_null() {
            return minus1_errno(libc::EINVAL);
        }
        // SAFETY: out is a writable enum (C contract, non-NULL).
        unsafe { out.write(t) };
        0
    })
}
export!("ibv_query_gid_type" = query_gid_type);

/// `ibv_read_sysfs_file(dir, file, buf, size)`: the file's bytes, a
/// trailing newline replaced by NUL; the length, or -1.
unsafe extern "C" fn read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard::minus1(|| {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            return minus1_errno(libc::EINVAL);
        }
        // SAFETY: dir and file are NUL-terminated strings (C contract).
        let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let path = format!("{}/{}", d.to_string_lossy(), f.to_string_lossy());
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => return minus1_errno(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        let mut len = data.len().min(size);
        // SAFETY: buf has room for size bytes (C contract); len <= size.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<c_char>(), buf, len) };
        if len > 0 && data[len - 1] == b'\n' {
            len -= 1;
            // SAFETY: len < size here.
            unsafe { *buf.add(len) = 0 };
        } else if len < size {
            // SAFETY: len < size.
            unsafe { *buf.add(len) = 0 };
        }
        len as c_int
    })
}
export!("ibv_read_sysfs_file" = read_sysfs_file);

/// `ibv_get_sysfs_path`: where sysfs is mounted; `$SYSFS_PATH` if set (as
/// libibverbs honours it), else `/sys`. A static string, as in C.
extern "C" fn get_sysfs_path() -> *const c_char {
    guard::value(c"/sys".as_ptr(), || {
        static PATH: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
        PATH.get_or_init(|| {
            let p = std::env::var("SYSFS_PATH")
                .ok()
                .map(|s| s.trim_end_matches('/').to_string())
                .filter(|s| !s.is_empty() && !s.contains('\0'))
                .unwrap_or_else(|| "/sys".to_string());
            std::ffi::CString::new(p).unwrap_or_else(|_| c"/sys".to_owned())
        })
        .as_ptr()
    })
}
export!("ibv_get_sysfs_path" = get_sysfs_path);

//! The `ibv_*_str` helpers: static, NUL-terminated English names, the
//! same text rdma-core prints (programs compare output with it).

use crate::export;
use crate::guard;
use std::ffi::{c_char, c_int, CStr};

fn s(c: &'static CStr) -> *const c_char {
    c.as_ptr()
}

extern "C" fn node_type_str(t: c_int) -> *const c_char {
    guard::value(c"unknown".as_ptr(), || {
        s(match t {
            1 => c"InfiniBand channel adapter",
            2 => c"InfiniBand switch",
            3 => c"InfiniBand router",
            4 => c"iWARP NIC",
            5 => c"usNIC",
            6 => c"usNIC UDP",
            _ => c"unknown",
        })
    })
}
export!("ibv_node_type_str" = node_type_str);

extern "C" fn port_state_str(t: c_int) -> *const c_char {
    guard::value(c"unknown".as_ptr(), || {
        s(match t {
            0 => c"no state change (NOP)",
            1 => c"down",
            2 => c"init",
            3 => c"armed",
            4 => c"active",
            5 => c"active defer",
            _ => c"unknown",
        })
    })
}
export!("ibv_port_state_str" = port_state_str);

extern "C" fn event_type_str(t: c_int) -> *const c_char {
    guard::value(c"unknown".as_ptr(), || {
        s(match t {
            0 => c"CQ error",
            1 => c"local work queue catastrophic error",
            2 => c"invalid request local work queue error",
            3 => c"local access violation work queue error",
            4 => c"communication established",
            5 => c"send queue drained",
            6 => c"path migrated",
            7 => c"path migration request error",
            8 => c"local catastrophic error",
            9 => c"port active",
            10 => c"port error",
            11 => c"LID change",
            12 => c"P_Key change",
            13 => c"SM change",
            14 => c"SRQ catastrophic error",
            15 => c"SRQ limit reached",
            16 => c"last WQE reached",
            17 => c"client reregistration",
            18 => c"GID table change",
            _ => c"unknown",
        })
    })
}
export!("ibv_event_type_str" = event_type_str);

extern "C" fn wc_status_str(t: c_int) -> *const c_char {
    guard::value(c"unknown".as_ptr(), || {
        s(match t {
            0 => c"success",
            1 => c"local length error",
            2 => c"local QP operation error",
            3 => c"local EE context operation error",
            4 => c"local protection error",
            5 => c"Work Request Flushed Error",
            6 => c"memory management operation error",
            7 => c"bad response error",
            8 => c"local access error",
            9 => c"remote invalid request error",
            10 => c"remote access error",
            11 => c"remote operation error",
            12 => c"transport retry counter exceeded",
            13 => c"RNR retry counter exceeded",
            14 => c"local RDD violation error",
            15 => c"remote invalid RD request",
            16 => c"aborted error",
            17 => c"invalid EE context number",
            18 => c"invalid EE context state",
            19 => c"fatal error",
            20 => c"response timeout error",
            21 => c"general error",
            _ => c"unknown",
        })
    })
}
export!("ibv_wc_status_str" = wc_status_str);

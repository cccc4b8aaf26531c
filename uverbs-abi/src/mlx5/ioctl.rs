//! mlx5's driver-namespace ioctl ids (`mlx5_user_ioctl_cmds.h`) and their
//! values (`mlx5_user_ioctl_verbs.h`): the objects, and the methods and
//! attributes rverbs uses — dynamic UAR allocation, PD and port queries,
//! and the raw context query.
//!
//! Driver ids start at `1 << UVERBS_ID_NS_SHIFT` (0x1000), so they never
//! collide with the core ids of `ib_user_ioctl_cmds.h`.

use crate::cm::macros::c_flags;
use crate::layout::ConstValue;

/// `1U << UVERBS_ID_NS_SHIFT`: the first driver-namespace id.
const NS: u16 = 1 << 12;

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident = $v:expr;)*) => {
        $($(#[$doc])* pub const $name: u16 = $v;)*
        /// `(C name, value)` of every id of this module.
        pub const MLX5_IOCTL_IDS: &[(&str, u16)] = &[$((stringify!($name), $name)),*];
    };
}

ids! {
    /// `MLX5_IB_OBJECT_DEVX` (`enum mlx5_ib_objects`).
    MLX5_IB_OBJECT_DEVX = NS;
    /// `MLX5_IB_OBJECT_DEVX_OBJ`.
    MLX5_IB_OBJECT_DEVX_OBJ = NS + 1;
    /// `MLX5_IB_OBJECT_DEVX_UMEM`.
    MLX5_IB_OBJECT_DEVX_UMEM = NS + 2;
    /// `MLX5_IB_OBJECT_FLOW_MATCHER`.
    MLX5_IB_OBJECT_FLOW_MATCHER = NS + 3;
    /// `MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD`.
    MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD = NS + 4;
    /// `MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD`.
    MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD = NS + 5;
    /// `MLX5_IB_OBJECT_VAR`.
    MLX5_IB_OBJECT_VAR = NS + 6;
    /// `MLX5_IB_OBJECT_PP`.
    MLX5_IB_OBJECT_PP = NS + 7;
    /// `MLX5_IB_OBJECT_UAR`: dynamically allocated UAR pages.
    MLX5_IB_OBJECT_UAR = NS + 8;
    /// `MLX5_IB_OBJECT_STEERING_ANCHOR`.
    MLX5_IB_OBJECT_STEERING_ANCHOR = NS + 9;

    /// `MLX5_IB_METHOD_UAR_OBJ_ALLOC` (`enum mlx5_ib_uar_obj_methods`).
    MLX5_IB_METHOD_UAR_OBJ_ALLOC = NS;
    /// `MLX5_IB_METHOD_UAR_OBJ_DESTROY`.
    MLX5_IB_METHOD_UAR_OBJ_DESTROY = NS + 1;
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE`: IDR, new object.
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE = NS;
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE`: const in,
    /// `MLX5_IB_UAPI_UAR_ALLOC_TYPE_*` (u32).
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE = NS + 1;
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET`: out, u64 mmap offset.
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET = NS + 2;
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH`: out, u32.
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH = NS + 3;
    /// `MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID`: out, u32 (the UAR page index
    /// for `MLX5_QP_FLAG_UAR_PAGE_INDEX` / `UAR_PAGE_INDEX` CQs).
    MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID = NS + 4;
    /// `MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE`.
    MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE = NS;

    /// `MLX5_IB_METHOD_PD_QUERY` (`enum mlx5_ib_pd_methods`).
    MLX5_IB_METHOD_PD_QUERY = NS;
    /// `MLX5_IB_ATTR_QUERY_PD_HANDLE`.
    MLX5_IB_ATTR_QUERY_PD_HANDLE = NS;
    /// `MLX5_IB_ATTR_QUERY_PD_RESP_PDN`: out, u32.
    MLX5_IB_ATTR_QUERY_PD_RESP_PDN = NS + 1;

    /// `MLX5_IB_METHOD_QUERY_PORT` (`enum mlx5_ib_device_methods`, on
    /// `UVERBS_OBJECT_DEVICE`).
    MLX5_IB_METHOD_QUERY_PORT = NS;
    /// `MLX5_IB_ATTR_QUERY_PORT_PORT_NUM`: const in, u32.
    MLX5_IB_ATTR_QUERY_PORT_PORT_NUM = NS;
    /// `MLX5_IB_ATTR_QUERY_PORT`: out,
    /// [`Mlx5IbUapiQueryPort`](super::Mlx5IbUapiQueryPort).
    MLX5_IB_ATTR_QUERY_PORT = NS + 1;
    /// `MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX`: driver attr of
    /// `UVERBS_METHOD_QUERY_CONTEXT`, out,
    /// [`Mlx5IbAllocUcontextResp`](super::Mlx5IbAllocUcontextResp).
    MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX = NS;
}

/// `MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF`: a BlueFlame (write-combining) UAR.
pub const MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF: u32 = 0;
/// `MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC`: a non-cached UAR.
pub const MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC: u32 = 1;

c_flags! {
    /// `enum mlx5_ib_uapi_query_port_flags`: which fields of
    /// [`Mlx5IbUapiQueryPort`](super::Mlx5IbUapiQueryPort) are valid.
    Mlx5IbUapiQueryPortFlags: u64, prefix "MLX5_IB_UAPI_QUERY_PORT_" {
        /// `MLX5_IB_UAPI_QUERY_PORT_VPORT`.
        VPORT = 1 << 0;
        /// `MLX5_IB_UAPI_QUERY_PORT_VPORT_VHCA_ID`.
        VPORT_VHCA_ID = 1 << 1;
        /// `MLX5_IB_UAPI_QUERY_PORT_VPORT_STEERING_ICM_RX`.
        VPORT_STEERING_ICM_RX = 1 << 2;
        /// `MLX5_IB_UAPI_QUERY_PORT_VPORT_STEERING_ICM_TX`.
        VPORT_STEERING_ICM_TX = 1 << 3;
        /// `MLX5_IB_UAPI_QUERY_PORT_VPORT_REG_C0`.
        VPORT_REG_C0 = 1 << 4;
        /// `MLX5_IB_UAPI_QUERY_PORT_ESW_OWNER_VHCA_ID`.
        ESW_OWNER_VHCA_ID = 1 << 5;
    }
}

/// The constants of this file.
pub(super) fn consts() -> Vec<ConstValue> {
    let mut v: Vec<ConstValue> = MLX5_IOCTL_IDS
        .iter()
        .map(|&(c, value)| ConstValue {
            c,
            value: value.into(),
        })
        .collect();
    v.extend(
        Mlx5IbUapiQueryPortFlags::C_NAMES
            .iter()
            .map(|&(c, value)| ConstValue {
                c,
                value: value.into(),
            }),
    );
    v.push(crate::c_const!(MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF => "MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF"));
    v.push(crate::c_const!(MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC => "MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC"));
    v
}

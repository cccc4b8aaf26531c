//! What the event file descriptors deliver: `struct ib_uverbs_comp_event_desc`
//! on a completion channel, `struct ib_uverbs_async_event_desc` on the async
//! event fd, and the async event types.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_enum, Registry};
use crate::verbs::KERNEL_ONLY;

/// `struct ib_uverbs_async_event_desc` of `ib_user_verbs.h`: one `read()`
/// of the async event fd.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAsyncEventDesc {
    /// `element`: the `user_handle` of the CQ, QP, SRQ or WQ the event is
    /// about, or the port number for port events.
    pub element: u64,
    /// `event_type`: an [`IbEventType`].
    pub event_type: u32,
    /// `reserved`.
    pub reserved: u32,
}

impl IbUverbsAsyncEventDesc {
    /// `event_type`.
    pub fn event_type(&self) -> IbEventType {
        IbEventType(self.event_type)
    }
}

/// `struct ib_uverbs_comp_event_desc` of `ib_user_verbs.h`: one `read()`
/// of a completion channel.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCompEventDesc {
    /// `cq_handle`: the CQ's `user_handle`.
    pub cq_handle: u64,
}

abi_enum! {
    /// `enum ib_event_type` (kernel-internal, `include/rdma/ib_verbs.h`):
    /// `event_type` of [`IbUverbsAsyncEventDesc`].
    pub struct IbEventType(u32);
    /// CQ error (overrun).
    CQ_ERR = 0 => "IB_EVENT_CQ_ERR" ibv "IBV_EVENT_CQ_ERR" newer KERNEL_ONLY;
    /// QP fatal error.
    QP_FATAL = 1 => "IB_EVENT_QP_FATAL" ibv "IBV_EVENT_QP_FATAL" newer KERNEL_ONLY;
    /// Invalid request on a QP.
    QP_REQ_ERR = 2 => "IB_EVENT_QP_REQ_ERR" ibv "IBV_EVENT_QP_REQ_ERR" newer KERNEL_ONLY;
    /// Access violation on a QP.
    QP_ACCESS_ERR = 3 => "IB_EVENT_QP_ACCESS_ERR" ibv "IBV_EVENT_QP_ACCESS_ERR"
        newer KERNEL_ONLY;
    /// Communication established.
    COMM_EST = 4 => "IB_EVENT_COMM_EST" ibv "IBV_EVENT_COMM_EST" newer KERNEL_ONLY;
    /// Send queue drained.
    SQ_DRAINED = 5 => "IB_EVENT_SQ_DRAINED" ibv "IBV_EVENT_SQ_DRAINED" newer KERNEL_ONLY;
    /// Path migrated.
    PATH_MIG = 6 => "IB_EVENT_PATH_MIG" ibv "IBV_EVENT_PATH_MIG" newer KERNEL_ONLY;
    /// Path migration failed.
    PATH_MIG_ERR = 7 => "IB_EVENT_PATH_MIG_ERR" ibv "IBV_EVENT_PATH_MIG_ERR"
        newer KERNEL_ONLY;
    /// Device fatal error.
    DEVICE_FATAL = 8 => "IB_EVENT_DEVICE_FATAL" ibv "IBV_EVENT_DEVICE_FATAL"
        newer KERNEL_ONLY;
    /// Port became active.
    PORT_ACTIVE = 9 => "IB_EVENT_PORT_ACTIVE" ibv "IBV_EVENT_PORT_ACTIVE" newer KERNEL_ONLY;
    /// Port error.
    PORT_ERR = 10 => "IB_EVENT_PORT_ERR" ibv "IBV_EVENT_PORT_ERR" newer KERNEL_ONLY;
    /// LID changed.
    LID_CHANGE = 11 => "IB_EVENT_LID_CHANGE" ibv "IBV_EVENT_LID_CHANGE" newer KERNEL_ONLY;
    /// P_Key table changed.
    PKEY_CHANGE = 12 => "IB_EVENT_PKEY_CHANGE" ibv "IBV_EVENT_PKEY_CHANGE" newer KERNEL_ONLY;
    /// SM changed.
    SM_CHANGE = 13 => "IB_EVENT_SM_CHANGE" ibv "IBV_EVENT_SM_CHANGE" newer KERNEL_ONLY;
    /// SRQ error.
    SRQ_ERR = 14 => "IB_EVENT_SRQ_ERR" ibv "IBV_EVENT_SRQ_ERR" newer KERNEL_ONLY;
    /// SRQ limit reached.
    SRQ_LIMIT_REACHED = 15 => "IB_EVENT_SRQ_LIMIT_REACHED" ibv "IBV_EVENT_SRQ_LIMIT_REACHED"
        newer KERNEL_ONLY;
    /// Last WQE reached on a QP with an SRQ.
    QP_LAST_WQE_REACHED = 16 => "IB_EVENT_QP_LAST_WQE_REACHED"
        ibv "IBV_EVENT_QP_LAST_WQE_REACHED" newer KERNEL_ONLY;
    /// Client re-registration requested.
    CLIENT_REREGISTER = 17 => "IB_EVENT_CLIENT_REREGISTER" ibv "IBV_EVENT_CLIENT_REREGISTER"
        newer KERNEL_ONLY;
    /// GID table changed.
    GID_CHANGE = 18 => "IB_EVENT_GID_CHANGE" ibv "IBV_EVENT_GID_CHANGE" newer KERNEL_ONLY;
    /// WQ fatal error.
    WQ_FATAL = 19 => "IB_EVENT_WQ_FATAL" ibv "IBV_EVENT_WQ_FATAL" newer KERNEL_ONLY;
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsAsyncEventDesc => "struct ib_uverbs_async_event_desc" {
            element => "element", event_type => "event_type", reserved => "reserved",
        }),
        crate::c_layout!(IbUverbsCompEventDesc => "struct ib_uverbs_comp_event_desc" {
            cq_handle => "cq_handle",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    IbEventType::register(r);
}

//! Asynchronous events (`ib_uverbs_async_event_desc` read from the
//! context's async fd): port state changes, QP/CQ/SRQ errors, SRQ limit.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::sys;
use std::os::fd::AsFd;
use uverbs_abi::verbs as v;
use zerocopy::FromBytes;

/// An async event type (`enum ib_event_type`); unknown values are kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventType(pub u32);

impl EventType {
    /// A CQ overran or hit an error.
    pub const CQ_ERR: EventType = EventType(0);
    /// A QP went to the error state.
    pub const QP_FATAL: EventType = EventType(1);
    /// A QP saw an invalid request.
    pub const QP_REQ_ERR: EventType = EventType(2);
    /// A QP saw an access violation.
    pub const QP_ACCESS_ERR: EventType = EventType(3);
    /// Communication established on a QP.
    pub const COMM_EST: EventType = EventType(4);
    /// A QP's send queue drained (SQD).
    pub const SQ_DRAINED: EventType = EventType(5);
    /// The device is unusable (e.g. removed).
    pub const DEVICE_FATAL: EventType = EventType(8);
    /// A port became active.
    pub const PORT_ACTIVE: EventType = EventType(9);
    /// A port went down.
    pub const PORT_ERR: EventType = EventType(10);
    /// An SRQ hit an error.
    pub const SRQ_ERR: EventType = EventType(14);
    /// An SRQ fell below its armed limit.
    pub const SRQ_LIMIT_REACHED: EventType = EventType(15);
    /// The last WQE of a QP attached to an SRQ was consumed.
    pub const QP_LAST_WQE_REACHED: EventType = EventType(16);
    /// The GID table changed.
    pub const GID_CHANGE: EventType = EventType(18);

    /// The kernel's name (`"SRQ_LIMIT_REACHED"`), if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "CQ_ERR",
            1 => "QP_FATAL",
            2 => "QP_REQ_ERR",
            3 => "QP_ACCESS_ERR",
            4 => "COMM_EST",
            5 => "SQ_DRAINED",
            6 => "PATH_MIG",
            7 => "PATH_MIG_ERR",
            8 => "DEVICE_FATAL",
            9 => "PORT_ACTIVE",
            10 => "PORT_ERR",
            11 => "LID_CHANGE",
            12 => "PKEY_CHANGE",
            13 => "SM_CHANGE",
            14 => "SRQ_ERR",
            15 => "SRQ_LIMIT_REACHED",
            16 => "QP_LAST_WQE_REACHED",
            17 => "CLIENT_REREGISTER",
            18 => "GID_CHANGE",
            19 => "WQ_FATAL",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "EventType({})", self.0),
        }
    }
}

/// One async event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// What happened.
    pub event_type: EventType,
    /// To what: the object's user handle ([`crate::srq::Srq::user_handle`],
    /// [`crate::cq::Cq::user_handle`], QP handles), or the port number for
    /// port events.
    pub element: u64,
}

impl Context {
    /// Reads one async event, blocking until there is one (poll
    /// [`Context::async_fd`] first to avoid blocking).
    pub fn get_async_event(&self) -> Result<AsyncEvent> {
        let mut b = [0u8; 16];
        let n = sys::read(
            self.inner.async_fd.as_fd(),
            "read of the async event fd",
            &mut b,
        )?;
        let d = v::IbUverbsAsyncEventDesc::read_from_bytes(&b[..n])
            .map_err(|_| Error::bad_answer(format!("async event of {n} bytes")))?;
        Ok(AsyncEvent {
            event_type: EventType(d.event_type),
            element: d.element,
        })
    }

    /// Waits up to `timeout_ms` for the async fd to be readable.
    pub fn wait_async_event(&self, timeout_ms: i32) -> Result<bool> {
        sys::poll_readable(
            self.inner.async_fd.as_fd(),
            "poll of the async event fd",
            timeout_ms,
        )
    }
}

//! The rdma_cm ABI client: `/dev/infiniband/rdma_cm` without librdmacm.
//!
//! An [`EventChannel`] is one open of the rdma_cm character device: every
//! command is a `write()` on it, and every event of the ids created through
//! it is read from it (`GET_EVENT`). An [`Id`] is a kernel `rdma_cm_id`
//! handle on a channel; dropping it destroys the kernel id.
//!
//! This crate is mechanism only: it issues the commands and decodes the
//! events. The policy librdmacm layers on top — moving a QP through
//! INIT/RTR/RTS from `INIT_QP_ATTR`, the RTU after a connect response,
//! opening the verbs device an id is bound to — lives in the `rverbs`
//! crate's `cm` module, which owns QPs.
//!
//! Every response buffer is our own stack or heap memory whose address is
//! passed to the kernel inside the command; the kernel writes it during the
//! `write()` and never after.

#![deny(unsafe_code)]

// Writes commands that carry response pointers for the kernel to fill.
#[allow(unsafe_code)]
mod channel;
mod error;
mod event;
mod id;
mod mcast;
mod option;
// The syscall boundary.
#[allow(unsafe_code)]
mod sys;

pub use channel::EventChannel;
pub use error::{Errno, Error, Result};
pub use event::{ConnParam, Event, UdParam};
pub use id::{AddrInfo, Id};
pub use mcast::JoinFlags;
pub use option::IdOption;
pub use uverbs_abi::cm::{RdmaCmEventType as EventType, RdmaUcmPortSpace as PortSpace};

/// `RDMA_MAX_INIT_DEPTH` / `RDMA_MAX_RESP_RES` of librdmacm: "as many as
/// the device allows" in a [`ConnParam`].
pub const MAX_DEPTH: u8 = 0xff;

// Ids and channels move between threads (a server hands connections to
// workers); keep it that way.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<EventChannel>();
    send_sync::<Id>();
};

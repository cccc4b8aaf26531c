//! The rxe (soft-RoCE) userspace provider, in Rust.
//!
//! rxe shares each queue with userspace as one mmapped ring ([`queue`]): the
//! SQ and RQ/SRQ rings are produced here and consumed by the kernel, the CQ
//! ring the reverse. This crate runs that data path over memory it is handed
//! — it opens no files and makes no system calls; the caller maps the rings
//! (with the offsets and sizes the kernel's create responses give) and rings
//! the SQ doorbell (a `POST_SEND` command) after posting.
//!
//! Nothing read from a ring is trusted: the geometry is checked once against
//! the mapping's length and every index is masked before it forms an address.
#![warn(missing_docs)]
// Unsafe code is opted into per module: `queue` (the shared mapping: header
// atomics, slot addresses and reads) and `slot` (the bounds-checked stores
// into one slot). The posts are `unsafe fn`s for their callers' promise
// about the SGEs, and allow it on their declarations only.
#![deny(unsafe_code)]

pub mod cq;
pub mod queue;
pub mod rq;
mod slot;
pub mod sq;
pub mod wqe;
pub mod wr;

pub use cq::{CompletionQueue, Producer, RawWc};
pub use queue::{Queue, QueueError};
pub use rq::RecvQueue;
pub use rverbs_types::{Wc, WcFlags, WcOpcode, WcStatus};
pub use sq::{SendQueue, SendTemplate};
pub use wr::{
    AddressHandle, AhAddr, AsSge, FlushLevel, FlushType, MwBind, RecvWr, Remote, SendOp, SendWr,
    Sge, Ud,
};

/// A ring the kernel sized too small for the queue's capabilities: its
/// slots cannot hold a WQE with every SGE (or inline byte) the QP was
/// granted (a corrupted header, since the kernel sizes them to fit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingError {
    /// The slot size.
    pub elem_size: usize,
    /// What the capabilities need.
    pub need: usize,
}

impl core::fmt::Display for RingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "ring slots of {} bytes cannot hold the {} bytes the capabilities need",
            self.elem_size, self.need
        )
    }
}

impl std::error::Error for RingError {}

#[cfg(test)]
#[allow(unsafe_code)] // the tests call the unsafe posts
mod tests;

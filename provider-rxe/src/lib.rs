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

pub use cq::{CompletionQueue, RawWc};
pub use queue::{Queue, QueueError};
pub use rq::RecvQueue;
pub use rverbs_types::{Wc, WcFlags, WcOpcode, WcStatus};
pub use sq::SendQueue;
pub use wr::{
    AddressHandle, AhAddr, AsSge, FlushLevel, FlushType, MwBind, RecvWr, Remote, SendOp, SendWr,
    Sge, Ud,
};

/// Why a work request was not posted. Nothing was written to the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// The ring has no free slot.
    QueueFull,
    /// More SGEs than the queue was created for.
    TooManySges {
        /// SGEs in the request.
        given: usize,
        /// The queue's limit.
        max: u32,
    },
    /// More inline bytes than the QP's `max_inline_data`.
    InlineTooLong {
        /// Bytes in the request.
        given: usize,
        /// The QP's limit.
        max: u32,
    },
    /// Inline payloads are for sends and writes only.
    InlineNotAllowed {
        /// The opcode.
        opcode: u32,
    },
    /// Both inline data and SGEs were given.
    InlineAndSges,
    /// A UD QP sends datagrams (SEND, SEND with immediate) only.
    NotOnUd {
        /// The opcode.
        opcode: u32,
    },
    /// The UD destination's address handle was not made by rxe (it
    /// carries no AH number).
    ForeignAddressHandle,
    /// The total length does not fit 32 bits.
    TooLong {
        /// The total.
        length: u64,
    },
    /// Atomics need an 8-byte local buffer and an 8-aligned remote address.
    BadAtomic,
    /// A UD destination on a connected QP, or none on a UD QP.
    UdMismatch {
        /// Whether the QP is UD.
        qp_is_ud: bool,
    },
    /// The operation takes no SGEs or inline data (local invalidate,
    /// window bind, FLUSH, and ATOMIC WRITE, whose bytes are in the
    /// operation).
    NoPayload {
        /// The opcode.
        opcode: u32,
    },
    /// The kernel does not offer the operation (ATOMIC WRITE and FLUSH
    /// came to rxe in Linux 6.2; see [`SendQueue::set_offered`]).
    NotOffered {
        /// The opcode.
        opcode: u32,
    },
    /// The kernel's slots are too small for the QP's capabilities.
    RingTooSmall {
        /// The slot size.
        elem_size: usize,
        /// What the capabilities need.
        need: usize,
    },
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PostError::QueueFull => write!(f, "queue full"),
            PostError::TooManySges { given, max } => {
                write!(f, "{given} SGEs, the queue takes at most {max}")
            }
            PostError::InlineTooLong { given, max } => {
                write!(f, "{given} inline bytes, the QP takes at most {max}")
            }
            PostError::InlineNotAllowed { opcode } => {
                write!(f, "opcode {opcode} cannot carry inline data")
            }
            PostError::InlineAndSges => write!(f, "both inline data and SGEs given"),
            PostError::NotOnUd { opcode } => {
                write!(
                    f,
                    "opcode {opcode} is not available on a UD QP (sends only)"
                )
            }
            PostError::ForeignAddressHandle => {
                write!(f, "the address handle was not made on an rxe device")
            }
            PostError::TooLong { length } => write!(f, "total length {length} exceeds 2^32 - 1"),
            PostError::BadAtomic => write!(
                f,
                "atomics need an 8-byte local buffer and an 8-byte aligned remote address"
            ),
            PostError::UdMismatch { qp_is_ud: true } => {
                write!(f, "a UD QP needs a destination (address handle)")
            }
            PostError::UdMismatch { qp_is_ud: false } => {
                write!(f, "a connected QP takes no UD destination")
            }
            PostError::NoPayload { opcode } => {
                write!(f, "opcode {opcode} takes no SGEs or inline data")
            }
            PostError::NotOffered { opcode } => write!(
                f,
                "opcode {opcode} is not offered by this kernel's rxe (ATOMIC WRITE and FLUSH need Linux 6.2)"
            ),
            PostError::RingTooSmall { elem_size, need } => {
                write!(f, "ring slots of {elem_size} bytes cannot hold the {need} bytes the capabilities need")
            }
        }
    }
}

impl std::error::Error for PostError {}

#[cfg(test)]
#[allow(unsafe_code)] // the tests call the unsafe posts
mod tests;

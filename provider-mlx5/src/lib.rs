//! The mlx5 (NVIDIA/Mellanox ConnectX) userspace data path, in Rust.
//!
//! mlx5 hands the data path to userspace outright: the process allocates the
//! queue buffers and doorbell records, the kernel only registers them
//! (`CREATE_QP`/`CREATE_CQ`/`CREATE_SRQ` with `buf_addr`/`db_addr` in the
//! driver udata) and maps a UAR page whose BlueFlame registers ring the
//! device. After that, posting and polling involve no system call:
//!
//! - [`SendQueue`]: send WQEs built from typed segments ([`seg`]) in 64-byte
//!   basic blocks, possibly several per WQE and wrapping at the ring's end;
//!   [`SendQueue::ring`] publishes them (DMA barrier, SND doorbell record,
//!   a 64-bit doorbell or BlueFlame copy to write-combining MMIO, flush).
//! - [`RecvQueue`] / [`SharedRecvQueue`]: scatter lists, the RCV (or SRQ)
//!   doorbell record; the SRQ keeps its free list of WQEs.
//! - [`CompletionQueue`]: CQEs taken by the owner-bit rule, decoded
//!   straight into the vocabulary's [`Wc`]s ([`wc`]) whose wr_ids come from
//!   the owning queue's records (through [`WorkQueues`]), the SET_CI
//!   record, and arming. The records ([`records`]) are shared between the
//!   posting queue and the poller on atomics, so a QP and its CQ can be
//!   driven from different threads.
//! - [`registry`]: a CQ's table of the QPs on it ([`Registry`]) and the
//!   [`Poller`] that resolves CQEs against it without a lock, including
//!   those of QPs destroyed with completions still in the ring.
//!
//! Work requests and completions are the verbs vocabulary of
//! `rverbs-types` ([`wr`], [`wc`]), which the safe API posts and reads as
//! they are: [`SendQueue::post`] takes a [`SendWr`] over any SGE-shaped
//! elements and any address handle carrying an mlx5 address vector. The
//! mlx5 NOP, not an IB verb, is [`SendQueue::post_nop`].
//!
//! The barriers between those steps are named for their purpose
//! ([`barrier`]), after rdma-core's `udma_barrier.h`.
//!
//! This crate only runs that data path over memory it is handed — it opens
//! no files and makes no system calls. The caller allocates the buffers,
//! issues the create commands and maps the UAR (with the offsets and sizes
//! the kernel's responses give), then passes pointers and lengths to the
//! `unsafe` constructors, whose `# Safety` sections state what must stay
//! true. Posting requests that name memory by address is `unsafe` too; ring,
//! poll and arm are safe once the queues exist.
//!
//! Trust: memory the device writes (CQEs) is read with volatile copies and
//! never trusted: every index taken from it is masked to its ring, and every
//! `wqe_counter` must name a request that is actually outstanding before it
//! yields a wr_id. Indices this crate owns never live in shared memory.
//!
//! Not supported: scatter-to-CQE (create QPs without
//! `MLX5_QP_FLAG_SCATTER_CQE`; such CQEs complete with `GENERAL_ERR`,
//! [`Status::ScatteredToCqe`]), WQE signatures, memory-window and UMR work
//! requests, send-with-invalidate, XRC, DC, raw packet QPs, CQE compression,
//! CQ resize, the SRQ wait queue rdma-core keeps for ODP page faults,
//! inline data gathered from several buffers (inline takes one slice), and
//! multiple threads posting to one queue or polling one CQ (every hot-path
//! method takes `&mut self` and no lock).
//!
//! **Nothing in this crate has run on real ConnectX hardware.** The
//! segment builders, CQE accessors, layouts and whole WQEs are checked byte
//! for byte against `mlx5dv.h`'s own static-inline helpers by a C program
//! compiled at test time (`tests/golden.rs`), and the queues against a
//! software model of the device (the `provider-mlx5-model` crate, driven by
//! `tests/model_*.rs`), which implements the semantics as read from
//! rdma-core and the headers, not as observed on a device. The barriers are the instructions rdma-core uses on x86_64;
//! other architectures get a generic fence that is not proven for DMA.
#![warn(missing_docs)]
// Unsafe code is opted into per module (memory shared with the device);
// the segment, CQE and completion types need none.
#![deny(unsafe_code)]

pub mod av;
pub mod barrier;

pub mod cq;
pub mod cqe;
pub mod lookup;
pub mod records;
pub mod registry;
pub mod rq;
pub mod seg;
pub mod setup;
pub mod sq;
pub mod srq;
mod sync;
pub mod wc;
pub mod wqe;
pub mod wr;

pub use cq::{CompletionQueue, CqConfig, CqScan};
pub use cqe::Status;
pub use lookup::{QpQueues, RecvTarget, WorkQueues};
pub use records::{RecvRecords, SendRecords, SendRetired, SrqRecords};
pub use registry::{next_id, Poller, QpEntry, RecvRecs, Registry};
pub use rq::RecvQueue;
pub use sq::{SendQueue, SendTemplate, SqConfig};
pub use srq::SharedRecvQueue;
pub use wc::{BadCqe, Wc, WcFlags, WcOpcode, WcStatus};
pub use wqe::Plan;
pub use wr::{AddressHandle, AhAddr, AsSge, RecvWr, Remote, SendOp, SendWr, Sge, Ud};

// The verbs vocabulary's refusal and transport: one definition for every
// provider (rverbs-types).
pub use rverbs_types::{PostError, QpType};

/// Why memory handed to a constructor cannot be used as a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutError {
    /// A pointer is not aligned as the device and the stores need.
    Misaligned {
        /// Which pointer.
        what: &'static str,
    },
    /// The buffer is shorter than its entries.
    TooShort {
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        len: usize,
    },
    /// An entry count that is not a power of two, or out of range.
    BadCount {
        /// The count.
        count: u32,
    },
    /// An entry size out of range.
    BadStride {
        /// log2 of the size.
        shift: u32,
    },
    /// A BlueFlame size that is not a multiple of 64 (or 0 with BlueFlame).
    BadBlueFlameSize {
        /// The size.
        size: u32,
    },
    /// The capabilities allow requests larger than a WQE or the ring.
    CapsTooLarge {
        /// The size they allow (octowords, or SGEs for receive queues).
        ds: u32,
    },
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LayoutError::Misaligned { what } => write!(f, "{what} is misaligned"),
            LayoutError::TooShort { need, len } => {
                write!(f, "buffer of {len} bytes, the queue needs {need}")
            }
            LayoutError::BadCount { count } => {
                write!(f, "entry count {count} is not a power of two in range")
            }
            LayoutError::BadStride { shift } => write!(f, "entry size 2^{shift} is out of range"),
            LayoutError::BadBlueFlameSize { size } => {
                write!(f, "BlueFlame size {size} is not a non-zero multiple of 64")
            }
            LayoutError::CapsTooLarge { ds } => {
                write!(f, "capabilities allow {ds}, more than the queue holds")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

#[cfg(test)]
mod tests;

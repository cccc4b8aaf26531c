//! rverbs: RDMA verbs in Rust, straight on the kernel's uverbs ABI.
//!
//! No rdma-core, no libibverbs: this crate opens `/dev/infiniband/uverbsN`,
//! issues the kernel's commands itself (`uverbs-abi`), maps the queues the
//! kernel shares, and runs the provider's data path in Rust
//! (`provider-rxe`, `provider-mlx5`).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod device;
pub mod error;
mod sys;

pub use device::{format_guid, Device, Driver, NodeType};
pub use error::{Errno, Error, Result};

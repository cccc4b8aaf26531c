//! The structs of `<infiniband/verbs.h>` (rdma-core 44) that C programs
//! read and write directly, or that the header's static-inline functions
//! dispatch through, one file per object as the header groups them. Names
//! are the C names in Rust case, so a reader can grep across; every one is
//! proved against the installed header by the compiled layout test
//! (`layout.rs`: sizes and the offset of every field defined here).
//!
//! Unions are modelled by their largest member, or by the member this
//! library reads, with the other members' offsets checked against it.
//! Nothing here has behaviour: this is the floor every other module of
//! the crate stands on.

mod ah;
mod context;
mod cq;
mod device;
#[cfg(test)]
mod layout;
mod pd;
mod qp;
mod srq;
mod wr;

pub use ah::*;
pub use context::*;
pub use cq::*;
pub use device::*;
pub use pd::*;
pub use qp::*;
pub use srq::*;
pub use wr::*;

/// A function slot of `struct ibv_cq_ex` or `struct ibv_qp_ex` (each has
/// its own C signature; stored as an untyped code pointer, as C sees it).
pub type Slot = *const std::ffi::c_void;

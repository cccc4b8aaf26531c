//! The verbs vocabulary: what a work request and a work completion are,
//! defined once and spoken by both providers (`provider-rxe`,
//! `provider-mlx5`) and the safe API (`rverbs`). A work request reaches a
//! provider's ring as the caller built it, and a provider decodes a CQE
//! straight into a [`Wc`]: there is no translation layer in between.
//!
//! The values are the kernel's: send opcodes and flags are
//! `enum ib_uverbs_wr_opcode` / `ib_uverbs_send_flags`, completion statuses
//! `enum ib_wc_status` (the numbering every provider and the kernel share),
//! completion opcodes `enum ib_uverbs_wc_opcode`.
//!
//! Work requests are generic over two things the safe API chooses and the
//! providers only read: the type of a scatter/gather element (anything laid
//! out as an [`Sge`], see [`AsSge`]) and the type of an address handle
//! (anything that gives an [`AhAddr`], see [`AddressHandle`]).
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod access;
mod post;
mod qp;
mod wc;
mod wr;

pub use access::Access;
pub use post::{check_payload, check_preparable, check_send, PostError, SendLimits};
pub use qp::QpType;

pub use wc::{Wc, WcFlags, WcOpcode, WcStatus};
pub use wr::{
    as_sges, AddressHandle, AhAddr, AsSge, FlushLevel, FlushType, MwBind, RecvWr, Remote, SendOp,
    SendWr, Sge, Ud, AV_LEN,
};

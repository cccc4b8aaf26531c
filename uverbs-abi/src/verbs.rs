//! `ib_user_verbs.h`: the uverbs write() command ABI.
//!
//! Every command is one `write()` on `/dev/infiniband/uverbsN` (or the same
//! bytes tunnelled through the ioctl method
//! [`UVERBS_METHOD_INVOKE_WRITE`](crate::ioctl::UVERBS_METHOD_INVOKE_WRITE)):
//! see [Framing](#framing), [`cmds`] for the per-command
//! descriptors. The structs are grouped by kernel object: device and ports,
//! PDs, MRs, CQs and work completions, QPs, SRQs, AHs, posting, multicast,
//! events.
//!
//! # Conventions
//!
//! - Each struct is the C struct in Rust case (`struct ib_uverbs_create_cq`
//!   is [`IbUverbsCreateCq`]), with the C member names. A flexible
//!   `driver_data[]` is left out; where it is `__aligned_u64` and the rest
//!   of the struct is not 8-aligned, the Rust struct is `align(8)` so that
//!   sizes match the kernel's (which is where driver udata starts).
//! - Members are the raw C integers, so that any value the kernel writes
//!   reads back unchanged. The values they take are integer newtypes
//!   ([`IbWcStatus`], [`IbQpState`]…) for kernel-extensible enums and
//!   `bitflags` types ([`IbQpAttrMask`]…) for masks.
//! - Values only the kernel's internal `include/rdma/ib_verbs.h` defines
//!   (work completion statuses, QP states and attribute masks, event types,
//!   send flags…) are listed by `newer_than_headers()`, and checked against
//!   libibverbs' `<infiniband/verbs.h>`, whose values are the kernel's by
//!   design, where it names them.
//!
//! # Framing
//!
//! [`encode_write`] / [`encode_ex_write`] produce the bytes of one command
//! from a descriptor type, the core request, the driver udata in and the
//! response address; [`parse_write`] / [`parse_ex_write`] read them back as
//! the kernel does. Nothing here touches a file descriptor or dereferences
//! an address.

pub(crate) mod macros;

mod ah;
mod cmd;
pub mod cmds;
mod cq;
mod device;
mod event;
mod frame;
mod mcast;
mod mr;
mod pd;
mod post;
mod qp;
mod srq;

#[cfg(test)]
mod tests;

pub use ah::*;
pub use cmd::*;
pub use cq::*;
pub use device::*;
pub use event::*;
pub use frame::*;
pub use mcast::*;
pub use mr::*;
pub use pd::*;
pub use post::*;
pub use qp::*;
pub use srq::*;

use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};
use macros::Registry;

/// The reason given for values the UAPI headers do not have because they
/// are the kernel's internal definitions.
pub(crate) const KERNEL_ONLY: &str = "kernel-internal (include/rdma/ib_verbs.h), in no UAPI \
     header; passed to user space unchanged (checked against libibverbs' verbs.h where it \
     names the value)";

/// Every `#[repr(C)]` type of this module, for the header comparison test.
pub fn layouts() -> Vec<StructLayout> {
    let mut v = cmd::layouts();
    v.extend(device::layouts());
    v.extend(pd::layouts());
    v.extend(mr::layouts());
    v.extend(cq::layouts());
    v.extend(qp::layouts());
    v.extend(srq::layouts());
    v.extend(ah::layouts());
    v.extend(post::layouts());
    v.extend(mcast::layouts());
    v.extend(event::layouts());
    v
}

fn registry() -> Registry {
    let mut r = Registry::default();
    cmd::register(&mut r);
    device::register(&mut r);
    mr::register(&mut r);
    cq::register(&mut r);
    qp::register(&mut r);
    srq::register(&mut r);
    post::register(&mut r);
    event::register(&mut r);
    r
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    registry().consts
}

/// Constants and fields newer than the installed headers (or kept out of
/// them by the kernel).
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    registry().newer
}

/// `(libibverbs name, value)` pairs checked against
/// `<infiniband/verbs.h>` by the layout test.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn libibverbs_consts() -> Vec<ConstValue> {
    registry().ibv
}

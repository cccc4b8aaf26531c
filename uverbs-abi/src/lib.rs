//! The Linux kernel's RDMA user ABI, as Rust types.
//!
//! Everything rverbs sends to or reads from the kernel is described here, and
//! nothing else: no policy, no device logic, no file descriptors. Each module
//! mirrors one UAPI header under `/usr/include/rdma/` and keeps the kernel's
//! names in Rust case, so that a reader can grep from one to the other:
//!
//! | module | header |
//! | --- | --- |
//! | [`verbs`] | `ib_user_verbs.h` (the write() command ABI) |
//! | [`ioctl`] | `rdma_user_ioctl_cmds.h`, `ib_user_ioctl_cmds.h`, `ib_user_ioctl_verbs.h` |
//! | [`rxe`] | `rdma_user_rxe.h` |
//! | [`mlx5`] | `mlx5-abi.h`, `mlx5_user_ioctl_cmds.h`, `mlx5_user_ioctl_verbs.h` |
//! | [`cm`] | `rdma_user_cm.h` |
//! | [`netlink`] | `rdma_netlink.h` (the NLDEV part) |
//! | [`sysfs`] | `Documentation/ABI/stable/sysfs-class-infiniband` (the text of the attributes read) |
//! | [`errno`] | `asm-generic/errno-base.h`, `asm-generic/errno.h` ([`Errno`]) |
//!
//! Structs are `#[repr(C)]` with zerocopy derives, so reading a kernel
//! response is a checked copy, never a transmute. Values the kernel may extend
//! (opcodes, statuses, event types) are integer newtypes, not Rust enums: a new
//! kernel value must never be undefined behaviour. Every struct's size,
//! alignment and field offsets, and every constant, are compared with the C
//! headers by the test in [`layout`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod layout;

pub mod cm;
pub mod errno;
pub mod ioctl;
pub mod mlx5;
pub mod netlink;
pub mod rxe;
pub mod sysfs;
pub mod verbs;

pub use errno::Errno;

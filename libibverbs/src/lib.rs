//! `libibverbs.so.1` in Rust: rdma-core's C ABI over the rverbs API, so
//! that C programs built against rdma-core's `<infiniband/verbs.h>` run
//! unchanged on rverbs' own rxe and mlx5 providers with
//! `LD_LIBRARY_PATH` pointing here.
//!
//! # Where it sits
//! On the public rverbs Rust API (`Context`, `Pd`, `Mr`, `Cq`, `Qp`), not
//! on the provider seam beneath it: the safe API already owns the object
//! lifetimes, the command path fallbacks and both providers' data paths,
//! and sitting on it means the shim cannot change what Rust users see.
//! Each C object (`struct ibv_pd`, …) is the first field of a Rust-owned
//! box holding the rverbs object; the C pointer is the box's address.
//!
//! # Layout
//! Dependencies point one way, down: `ops.rs` on top makes the context and
//! fills the tables C calls through (`ibv_context_ops`, `verbs_context`,
//! the slots of each `ibv_cq_ex` and `ibv_qp_ex`); below it the data path
//! (`walk.rs`, `send.rs`, `recv.rs`, `poll.rs`, `wr.rs`, `bind.rs`); below
//! that one file per object (`device.rs`, `context.rs`, `pd.rs`, `mr.rs`,
//! `mw.rs`, `channel.rs`, `cq.rs`, `qp.rs`, `srq.rs`, `ah.rs`, and the
//! async event registry); on the floor the C structs (`abi/`), the boxes'
//! pointer casts and the one destroy (`obj.rs`), the panic guard, and every
//! conversion between a C struct and rverbs' (`convert/`).
//!
//! # Exports
//! `symbols.txt` lists every exported name and its rdma-core 44 version
//! node; `build.rs` turns it into the linker's version script. The
//! functions themselves are Rust items reached through a one-instruction
//! trampoline per symbol ([`export!`]): rustc's own version script names
//! `#[no_mangle]` items as unversioned, so a versioned name must be a
//! symbol rustc does not list.
//!
//! What is implemented is listed in the crate's docs (`docs/libibverbs.md`);
//! every other exported function fails the C way (NULL + `errno`, or an
//! errno return) with `EOPNOTSUPP`, never a crash.
//!
//! # Panics
//! No panic unwinds into C: every `extern "C"` function runs its body
//! under a guard ([`guard`]) that answers the C failure instead, and the
//! library is meant to be built with `panic = "abort"` as a backstop.

// This crate is the C boundary: every module takes raw pointers from C.
// Each unsafe block still names its invariant (the workspace's clippy
// lint), and `unsafe_op_in_unsafe_fn` keeps them explicit.
#![allow(clippy::missing_safety_doc)]

// The floor: the C structs, the boxes C pointers name and the one way
// objects go, the panic guard, the conversions between C and rverbs.
pub mod abi;
mod convert;
mod guard;
mod obj;
mod spin;

// One file per object: its box, its verbs. (`qp_ex` and `batch`: the
// `ibv_qp_ex` a QP box carries and the `ibv_wr_*` batch it holds.)
mod ah;
mod async_event;
mod batch;
mod cancel;
mod channel;
mod context;
mod cq;
mod device;
mod mr;
mod mw;
mod pd;
mod qp;
mod qp_ex;
mod srq;
mod sysfs;

// The data path: the walk every post takes, the posts, polling, the
// `ibv_wr_*` API, type 1 window binds.
mod bind;
mod poll;
mod recv;
mod send;
mod walk;
mod wr;

// On top: the context, with the tables C calls through.
mod ops;

// Entry points that stand alone: librdmacm's copies, rates, strings,
// what is not implemented.
mod marshall;
mod rate;
mod strs;
mod stubs;

#[cfg(test)]
mod ctest;
#[cfg(test)]
mod testing;

use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard};

/// Exports `$c` (a C name in `symbols.txt`) as a jump to the Rust
/// function `$f`: a tail jump keeps every argument register as the caller
/// set it, so `$f` sees exactly the C call.
macro_rules! export {
    ($c:literal = $f:path) => {
        #[cfg(target_arch = "x86_64")]
        ::std::arch::global_asm!(
            ".pushsection .text.rverbs_exports,\"ax\",@progbits",
            concat!(".globl ", $c),
            concat!(".type ", $c, ",@function"),
            ".p2align 4",
            concat!($c, ":"),
            "jmp {f}",
            concat!(".size ", $c, ", .-", $c),
            ".popsection",
            f = sym $f,
        );
        #[cfg(target_arch = "aarch64")]
        ::std::arch::global_asm!(
            ".pushsection .text.rverbs_exports,\"ax\",%progbits",
            concat!(".globl ", $c),
            concat!(".type ", $c, ",%function"),
            ".p2align 4",
            concat!($c, ":"),
            "b {f}",
            concat!(".size ", $c, ", .-", $c),
            ".popsection",
            f = sym $f,
        );
    };
}
pub(crate) use export;

/// Reads member `$f` of the C struct at `$p` (a raw pointer) on its own:
/// never a reference to, or a copy of, the whole struct, whose other
/// members the caller may have left uninitialised or, in an older (shorter)
/// version of the struct, not have at all. Used inside an `unsafe` block
/// whose comment says why that member is there and initialised.
macro_rules! member {
    ($p:expr, $($f:tt)+) => {
        ::std::ptr::addr_of!((*$p).$($f)+).read()
    };
}
pub(crate) use member;

/// Builds a `$T` from the members of the same names of the C struct at
/// `$p`, each read on its own ([`member!`]). Inside an `unsafe` block
/// whose comment says why each member is there and initialised.
macro_rules! members {
    ($p:expr => $T:ident { $($f:ident),* $(,)? }) => {
        $T { $($f: $crate::member!($p, $f)),* }
    };
}
pub(crate) use members;

/// Writes each `member = value` into the C struct at `$p`, one member at a
/// time: the struct's other members (and padding) are left as the caller
/// had them, and it is never read. Inside an `unsafe` block whose comment
/// says why `$p` is writable.
macro_rules! put {
    ($p:expr, $($f:ident = $v:expr),* $(,)?) => {{
        $(::std::ptr::addr_of_mut!((*$p).$f).write_unaligned($v);)*
    }};
}
pub(crate) use put;

/// Sets the calling thread's `errno` (libibverbs reports most failures
/// there as well as, or instead of, in the return value).
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot,
    // valid for the thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// The errno an rverbs error stands for, as libibverbs would report it.
pub(crate) fn errno_of(e: &rverbs::Error) -> c_int {
    use rverbs::Error as E;
    if let Some(n) = e.errno() {
        return n.0;
    }
    match e {
        E::Unsupported { .. } | E::UnsupportedDriver { .. } => libc::EOPNOTSUPP,
        E::NoDevice { .. } => libc::ENODEV,
        E::QueueFull { .. } => libc::ENOMEM,
        E::DeviceInUse { .. } => libc::EBUSY,
        E::BadKernelAnswer { .. } => libc::EIO,
        _ => libc::EINVAL,
    }
}

/// Fails a call that returns a pointer: NULL with `errno` set.
pub(crate) fn null_errno<T>(e: c_int) -> *mut T {
    set_errno(e);
    std::ptr::null_mut()
}

/// Fails a call that returns an errno: sets `errno` to it too, which
/// rdma-core does not promise but programs sometimes read.
pub(crate) fn ret_errno(e: c_int) -> c_int {
    set_errno(e);
    e
}

/// Fails a call that returns 0 (or a count) or -1: -1 with `errno` set.
pub(crate) fn minus1_errno(e: c_int) -> c_int {
    set_errno(e);
    -1
}

/// Locks `m`: a `Mutex` whether or not a panic poisoned it, or a data
/// path [`spin::Spin`]. No lock of this crate is held across a statement
/// that leaves what it guards half-updated, so a poisoned one is still
/// consistent (see [`guard`] for where panics go).
#[inline(always)]
pub(crate) fn lock<L: Lock>(m: &L) -> L::Guard<'_> {
    m.acquire()
}

/// What [`lock`] takes.
pub(crate) trait Lock {
    type Guard<'a>
    where
        Self: 'a;
    fn acquire(&self) -> Self::Guard<'_>;
}

impl<T> Lock for Mutex<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;
    fn acquire(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T> Lock for spin::Spin<T> {
    type Guard<'a>
        = spin::SpinGuard<'a, T>
    where
        T: 'a;
    #[inline(always)]
    fn acquire(&self) -> spin::SpinGuard<'_, T> {
        self.lock()
    }
}

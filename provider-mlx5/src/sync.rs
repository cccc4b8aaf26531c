//! The atomics the shared records ([`crate::records`]) are built on:
//! `core`'s, or, when the crate is built with `--cfg loom`, loom's, so that
//! `tests/loom_records.rs` can explore every interleaving of a poster and
//! its pollers over the real records. Nothing else changes under loom, and
//! a normal build compiles exactly the `core` types. Only that test is
//! meant to run under loom: loom's atomics panic outside `loom::model`, so
//! every other test that makes a queue fails in a loom build.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

//! Work completions: what a polled CQ entry says. The types are the verbs
//! vocabulary's (`rverbs-types`), which the providers decode CQEs into
//! directly: statuses are `enum ib_wc_status` values, opcodes
//! `ib_uverbs_wc_opcode`, flags `ib_wc_flags`, unknown values kept, never a
//! panic.

pub use rverbs_types::{Wc, WcFlags, WcOpcode, WcStatus};

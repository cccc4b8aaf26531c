//! (being written)

use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};

/// Every `#[repr(C)]` type of this module, for the header comparison test.
pub fn layouts() -> Vec<StructLayout> {
    Vec::new()
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    Vec::new()
}

/// Constants and fields newer than the installed headers.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    Vec::new()
}

//! Layout records that tie each Rust type and constant to its C original.
//!
//! Every module of this crate lists, in a `layouts()` and a `consts()`
//! function, each `#[repr(C)]` type it defines (with every field) and each
//! constant, next to the C spelling. The test at the bottom of this file
//! writes a C program that prints the same facts from the installed headers,
//! compiles it with the system `cc` (a test-time use of C only), and compares.
//! It also scans the crate's sources so that a `#[repr(C)]` type that is not
//! listed fails the test.

/// The layout of one Rust struct, paired with the C type it mirrors.
#[derive(Debug, Clone)]
pub struct StructLayout {
    /// The Rust type's name as written in the source (last path segment).
    pub rust: &'static str,
    /// The C type, e.g. `"struct ib_uverbs_cmd_hdr"`.
    pub c: &'static str,
    /// `size_of` of the Rust type.
    pub size: usize,
    /// `align_of` of the Rust type.
    pub align: usize,
    /// `(C member designator, Rust offset)` for every field; the designator
    /// may be nested (`"hdr.length"`) as C's `offsetof` allows.
    pub fields: &'static [(&'static str, usize)],
}

/// One constant's value, paired with the C macro or enumerator it mirrors.
#[derive(Debug, Clone)]
pub struct ConstValue {
    /// The C name (macro or enumerator), e.g. `"IB_USER_VERBS_CMD_POST_SEND"`.
    pub c: &'static str,
    /// The Rust value, widened.
    pub value: i128,
}

/// Something this crate defines that the installed headers are too old to
/// have (they come from `linux-libc-dev` 6.1; the VM runs 6.12). Checked
/// against the value written in the kernel sources by hand, listed so that
/// nothing is silently unchecked.
#[derive(Debug, Clone)]
pub struct NewerThanHeaders {
    /// The C name in the newer kernel.
    pub c: &'static str,
    /// Why it is not in the installed headers (kernel version that added it).
    pub reason: &'static str,
}

/// Builds a [`StructLayout`] from a Rust type, its C name and the pairs of
/// Rust field and C member designator.
#[macro_export]
macro_rules! c_layout {
    ($ty:ident => $c:literal { $($field:ident => $cf:literal),* $(,)? }) => {
        $crate::layout::StructLayout {
            rust: stringify!($ty),
            c: $c,
            size: ::core::mem::size_of::<$ty>(),
            align: ::core::mem::align_of::<$ty>(),
            fields: &[$(($cf, ::core::mem::offset_of!($ty, $field))),*],
        }
    };
}

/// Builds a [`ConstValue`] from a Rust expression and the C name.
#[macro_export]
macro_rules! c_const {
    ($value:expr => $c:literal) => {
        $crate::layout::ConstValue {
            c: $c,
            value: ($value) as i128,
        }
    };
}

//! Definition macros of the `verbs` and `ioctl` modules: plain constants,
//! integer newtypes and bitflags that remember their C names, so that the
//! layout test compares each value with the installed header, or lists it
//! as newer than the headers with the reason.
//!
//! Every value takes an optional `ibv "IBV_NAME"` clause: the same number in
//! libibverbs' `<infiniband/verbs.h>`, which the layout test checks too. It
//! is the only check for values the kernel keeps out of its UAPI headers
//! (work-completion statuses, QP states, event types…), which rdma-core
//! passes through unchanged.

use crate::layout::{ConstValue, NewerThanHeaders};

/// Where each named value of a module is checked.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Values the installed UAPI headers have.
    pub consts: Vec<ConstValue>,
    /// Values they lack, with the reason.
    pub newer: Vec<NewerThanHeaders>,
    /// `(libibverbs name, value)`: checked against `<infiniband/verbs.h>`.
    pub ibv: Vec<ConstValue>,
}

impl Registry {
    /// Files one value under its C name.
    pub fn add(
        &mut self,
        c: &'static str,
        value: i128,
        newer: Option<&'static str>,
        ibv: Option<&'static str>,
    ) {
        match newer {
            None => self.consts.push(ConstValue { c, value }),
            Some(reason) => self.newer.push(NewerThanHeaders { c, reason }),
        }
        if let Some(c) = ibv {
            self.ibv.push(ConstValue { c, value });
        }
    }

    /// Files a struct member the installed headers lack
    /// (`"struct_name.member"`).
    pub fn newer_field(&mut self, c: &'static str, reason: &'static str) {
        self.newer.push(NewerThanHeaders { c, reason });
    }
}

/// `None`, or `Some(x)`.
macro_rules! opt {
    () => {
        None
    };
    ($e:expr) => {
        Some($e)
    };
}
pub(crate) use opt;

/// Plain constants, named exactly as in C, and a function `$reg` that
/// files them all in a [`Registry`].
///
/// `NAME: type = value;` is checked against the header;
/// `NAME: type = value => newer "reason";` is listed as newer.
macro_rules! abi_consts {
    ($reg:ident;
     $($(#[$doc:meta])* $name:ident: $ty:ty = $v:expr $(=> newer $why:expr)?;)*) => {
        $($(#[$doc])* pub const $name: $ty = $v;)*

        /// Files every constant of this block.
        fn $reg(r: &mut $crate::verbs::macros::Registry) {
            $(r.add(
                stringify!($name),
                $name as i128,
                $crate::verbs::macros::opt!($($why)?),
                None,
            );)*
        }
    };
}
pub(crate) use abi_consts;

/// An integer newtype for a value the kernel may extend, with one
/// associated constant per C enumerator, `name()` and a `Debug` that
/// prints the C name (or the number).
macro_rules! abi_enum {
    (
        $(#[$doc:meta])*
        pub struct $name:ident($int:ty);
        $(
            $(#[$vdoc:meta])*
            $c:ident = $v:expr => $cname:literal $(ibv $ibv:literal)? $(newer $why:expr)?;
        )*
    ) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(
            Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default,
            zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout,
        )]
        pub struct $name(pub $int);

        impl $name {
            $($(#[$vdoc])* #[doc = concat!("\n\nC: `", $cname, "`.")]
            pub const $c: $name = $name($v);)*

            /// `(C name, value)` of every named value, in header order.
            pub const ALL: &'static [(&'static str, $int)] = &[$(($cname, $v)),*];

            /// The C name of this value, or `None` for a value this crate
            /// does not know (a newer kernel's, or a driver's).
            pub const fn name(self) -> Option<&'static str> {
                let mut i = 0;
                while i < Self::ALL.len() {
                    if Self::ALL[i].1 == self.0 {
                        return Some(Self::ALL[i].0);
                    }
                    i += 1;
                }
                None
            }

            /// The name of this value's constant here (`REM_ACCESS_ERR` for
            /// `IB_WC_REM_ACCESS_ERR`), what a Rust program writes, or `None`
            /// for a value this crate does not know.
            pub const fn rust_name(self) -> Option<&'static str> {
                const RUST: &[(&str, $int)] = &[$((stringify!($c), $v)),*];
                let mut i = 0;
                while i < RUST.len() {
                    if RUST[i].1 == self.0 {
                        return Some(RUST[i].0);
                    }
                    i += 1;
                }
                None
            }

            /// Files every named value for the layout test.
            #[allow(dead_code)]
            pub(crate) fn register(r: &mut $crate::verbs::macros::Registry) {
                $(r.add(
                    $cname,
                    Self::$c.0 as i128,
                    $crate::verbs::macros::opt!($($why)?),
                    $crate::verbs::macros::opt!($($ibv)?),
                );)*
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self, f)
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $int {
            fn from(v: $name) -> $int {
                v.0
            }
        }
    };
}
pub(crate) use abi_enum;

/// A `bitflags` type whose flags are C enumerators, with a `C_NAMES`
/// table and registration for the layout test. Unknown bits are kept
/// (`from_bits_retain`) by the caller's choice, never dropped silently.
macro_rules! abi_flags {
    (
        $(#[$doc:meta])*
        pub struct $name:ident: $int:ty;
        $(
            $(#[$($fdoc:tt)*])*
            $f:ident = $v:expr => $cname:literal $(ibv $ibv:literal)? $(newer $why:expr)?;
        )*
    ) => {
        bitflags::bitflags! {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
            pub struct $name: $int {
                $($(#[$($fdoc)*])* #[doc = concat!("\n\nC: `", $cname, "`.")]
                const $f = $v;)*
            }
        }

        impl $name {
            /// `(C name, value)` of every flag, in header order.
            pub const C_NAMES: &'static [(&'static str, $int)] = &[$(($cname, $v)),*];

            /// Files every flag for the layout test.
            #[allow(dead_code)]
            pub(crate) fn register(r: &mut $crate::verbs::macros::Registry) {
                $(r.add(
                    $cname,
                    Self::$f.bits() as i128,
                    $crate::verbs::macros::opt!($($why)?),
                    $crate::verbs::macros::opt!($($ibv)?),
                );)*
            }
        }
    };
}
pub(crate) use abi_flags;

/// Like [`c_layout!`](crate::c_layout), and also takes
/// `field + delta => "c.member"` for a C member that sits `delta` bytes
/// into a Rust field (a union member, or one byte of a byte array the Rust
/// side keeps whole), and a C type given as any string expression (e.g. a
/// `__typeof__` for an anonymous C union).
macro_rules! abi_layout {
    ($ty:ident => $c:expr => { $($field:ident $(+ $d:literal)? => $cf:literal),* $(,)? }) => {
        $crate::layout::StructLayout {
            rust: stringify!($ty),
            c: $c,
            size: ::core::mem::size_of::<$ty>(),
            align: ::core::mem::align_of::<$ty>(),
            fields: &[$(($cf, const { ::core::mem::offset_of!($ty, $field) $(+ $d)? })),*],
        }
    };
}
pub(crate) use abi_layout;

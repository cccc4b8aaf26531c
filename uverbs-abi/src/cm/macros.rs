//! Small definition macros shared by this crate's driver and rdma_cm
//! modules (`cm`, `mlx5`, `netlink`, `rxe`): integer newtypes with named
//! values, and bitflags that remember their C names.

/// Defines an integer newtype for a kernel-extensible value with named
/// associated constants and a `Debug` that prints the name.
macro_rules! named_values {
    ($(#[$doc:meta])* $name:ident($int:ty) prefix $prefix:literal {
        $($(#[$cdoc:meta])* $c:ident = $v:expr;)*
    }) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(
            Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout,
        )]
        pub struct $name(pub $int);

        impl $name {
            $($(#[$cdoc])* pub const $c: $name = $name($v);)*

            /// The C name, or `None` for a value this crate does not know.
            pub const fn name(self) -> Option<&'static str> {
                $(if self.0 == $v { return Some(concat!($prefix, stringify!($c))); })*
                None
            }

            /// `(C name, value)` of every named value.
            pub const ALL: &'static [(&'static str, $int)] =
                &[$((concat!($prefix, stringify!($c)), $v)),*];
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, concat!(stringify!($name), "({})"), self.0),
                }
            }
        }

        /// The C name, as librdmacm's `rdma_event_str` prints it.
        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self, f)
            }
        }
    };
}

pub(crate) use named_values;

/// Defines a `bitflags` type whose flags are the C enumerators
/// `$prefix$FLAG` (or the name given with `as "C_NAME"`), with a `C_NAMES`
/// table of `(C name, value)` for the header comparison test.
macro_rules! c_flags {
    ($(#[$doc:meta])* $name:ident: $int:ty, prefix $prefix:literal {
        $($(#[$($fdoc:tt)*])* $f:ident $(as $cname:literal)? = $v:expr;)*
    }) => {
        bitflags::bitflags! {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub struct $name: $int {
                $($(#[$($fdoc)*])* const $f = $v;)*
            }
        }

        impl $name {
            /// `(C name, value)` of every flag.
            pub const C_NAMES: &'static [(&'static str, $int)] =
                &[$(($crate::cm::macros::c_name!($prefix, $f $(, $cname)?), $v)),*];
        }
    };
}
pub(crate) use c_flags;

/// `concat!(prefix, stringify!(name))`, or the explicit C name if given.
macro_rules! c_name {
    ($prefix:literal, $f:ident) => {
        concat!($prefix, stringify!($f))
    };
    ($prefix:literal, $f:ident, $cname:literal) => {
        $cname
    };
}
pub(crate) use c_name;

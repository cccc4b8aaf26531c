//! `errno` values (`<asm-generic/errno-base.h>`, `<asm-generic/errno.h>`):
//! what every failed kernel call answers, in one type that the command
//! layers of verbs and rdma_cm share.

use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};
use core::fmt;

/// An `errno` value from the kernel, printable by name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Errno(pub i32);

macro_rules! errnos {
    ($($name:ident = $v:literal),* $(,)?) => {
        impl Errno {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub const $name: Errno = Errno($v);
            )*

            /// The symbolic name (`"EINVAL"`), where known.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($v => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }

        /// The errno constants, against the headers' macros.
        pub fn consts() -> Vec<ConstValue> {
            vec![$(ConstValue { c: stringify!($name), value: $v }),*]
        }
    };
}

// The generic Linux numbering, which x86_64 and arm64 both use (alpha,
// mips, parisc and sparc differ; rverbs runs on none of them).
errnos! {
    EPERM = 1,
    ENOENT = 2,
    ESRCH = 3,
    EINTR = 4,
    EIO = 5,
    ENXIO = 6,
    E2BIG = 7,
    EBADF = 9,
    EAGAIN = 11,
    ENOMEM = 12,
    EACCES = 13,
    EFAULT = 14,
    EBUSY = 16,
    EEXIST = 17,
    ENODEV = 19,
    EINVAL = 22,
    ENFILE = 23,
    EMFILE = 24,
    ENOTTY = 25,
    ENOSPC = 28,
    ERANGE = 34,
    ENOSYS = 38,
    ENODATA = 61,
    EPROTO = 71,
    EOVERFLOW = 75,
    EPROTONOSUPPORT = 93,
    EOPNOTSUPP = 95,
    EADDRINUSE = 98,
    EADDRNOTAVAIL = 99,
    ENETUNREACH = 101,
    ECONNABORTED = 103,
    ECONNRESET = 104,
    ETIMEDOUT = 110,
    ECONNREFUSED = 111,
    EHOSTUNREACH = 113,
    EALREADY = 114,
    EINPROGRESS = 115,
}

impl Errno {
    /// The calling thread's current `errno`.
    pub fn last() -> Errno {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// The errno of a negative kernel return (`-EINVAL` as many kernel
    /// interfaces answer), or `None` for anything that is not one: 0,
    /// positive values, and values below -4095 (the kernel's errnos are
    /// below 4096; `-i32::MIN` does not exist).
    pub fn from_negative(ret: i64) -> Option<Errno> {
        (-4095..0).contains(&ret).then(|| Errno(-ret as i32))
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "errno {}", self.0),
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = std::io::Error::from_raw_os_error(self.0);
        match self.name() {
            Some(n) => write!(f, "{n} ({msg})"),
            None => write!(f, "errno {} ({msg})", self.0),
        }
    }
}

/// No structs here.
pub fn layouts() -> Vec<StructLayout> {
    Vec::new()
}

/// Nothing newer than the headers.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_print_and_negative_returns_convert() {
        assert_eq!(format!("{:?}", Errno::EINVAL), "EINVAL");
        assert_eq!(format!("{:?}", Errno(4000)), "errno 4000");
        assert!(Errno::EOPNOTSUPP.to_string().starts_with("EOPNOTSUPP ("));
        assert_eq!(Errno::from_negative(-22), Some(Errno::EINVAL));
        for bad in [0, 5, -4096, i64::from(i32::MIN), i64::MIN] {
            assert_eq!(Errno::from_negative(bad), None, "{bad}");
        }
    }
}

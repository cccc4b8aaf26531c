//! The ioctl methods rverbs issues, and what each device's kernel said
//! about them: rdma-core's fallback rule (`cmd_fallback.c`), decided once
//! per method and device instead of at every call.
//!
//! An ioctl that fails with `ENOTTY` means the kernel has no ioctl
//! interface at all: every method is marked. `EPROTONOSUPPORT` means the
//! interface is there but not this method (or a mandatory attribute of
//! it): that method is marked. A marked method is not issued again; the
//! call fails at once with the errno that marked it, so the caller sees
//! the error the kernel gave and takes its fallback (the write command,
//! sysfs) as it did the first time. `EOPNOTSUPP` is the driver's answer to
//! this call, which may depend on its arguments (rdma-core does not cache
//! it either): it is never marked.

use crate::error::Errno;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicI32, Ordering};
use uverbs_abi::ioctl::{self as io, AttrArray};

/// One ioctl method: its object and method ids, and the name errors give
/// it. Its position is its slot in [`Support`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// `UVERBS_METHOD_GET_CONTEXT` (the write command of the same name is
    /// its fallback).
    GetContext,
    /// `UVERBS_METHOD_ASYNC_EVENT_ALLOC`.
    AsyncEventAlloc,
    /// `UVERBS_METHOD_QUERY_PORT` (the write command is its fallback).
    QueryPort,
    /// `UVERBS_METHOD_QUERY_GID_TABLE` (sysfs is its fallback).
    QueryGidTable,
    /// `UVERBS_METHOD_QUERY_GID_ENTRY` (sysfs is its fallback).
    QueryGidEntry,
    /// `UVERBS_METHOD_ADVISE_MR` (no fallback: its absence is the answer).
    AdviseMr,
    /// `UVERBS_METHOD_REG_DMABUF_MR` (no write() form either).
    RegDmabufMr,
}

impl Method {
    /// How many methods there are.
    const COUNT: usize = 7;

    /// `(object id, method id, name)`. The methods that share their name
    /// with a write() command say `(ioctl)`.
    const fn spec(self) -> (u16, u16, &'static str) {
        use io::*;
        match self {
            Method::GetContext => (
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_GET_CONTEXT,
                "GET_CONTEXT (ioctl)",
            ),
            Method::AsyncEventAlloc => (
                UVERBS_OBJECT_ASYNC_EVENT,
                UVERBS_METHOD_ASYNC_EVENT_ALLOC,
                "ASYNC_EVENT_ALLOC",
            ),
            Method::QueryPort => (
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_QUERY_PORT,
                "QUERY_PORT (ioctl)",
            ),
            Method::QueryGidTable => (
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_QUERY_GID_TABLE,
                "QUERY_GID_TABLE",
            ),
            Method::QueryGidEntry => (
                UVERBS_OBJECT_DEVICE,
                UVERBS_METHOD_QUERY_GID_ENTRY,
                "QUERY_GID_ENTRY",
            ),
            Method::AdviseMr => (UVERBS_OBJECT_MR, UVERBS_METHOD_ADVISE_MR, "ADVISE_MR"),
            Method::RegDmabufMr => (
                UVERBS_OBJECT_MR,
                UVERBS_METHOD_REG_DMABUF_MR,
                "REG_DMABUF_MR",
            ),
        }
    }

    /// The name errors give the method.
    pub(crate) const fn name(self) -> &'static str {
        self.spec().2
    }
}

/// One ioctl call being built: the method and its attribute array, made
/// together so that the name an error gives cannot be another method's.
/// Dereferences to the array, to add attributes.
pub(crate) struct Call<'b> {
    pub(crate) method: Method,
    attrs: AttrArray<'b>,
}

impl<'b> Call<'b> {
    /// A call of `method` on a device of `driver_id`, its attributes in
    /// `storage`.
    pub(crate) fn new(method: Method, storage: &'b mut [u64], driver_id: u32) -> Call<'b> {
        let (object, id, _) = method.spec();
        Call {
            method,
            attrs: AttrArray::new(storage, object, id, driver_id),
        }
    }
}

impl<'b> Deref for Call<'b> {
    type Target = AttrArray<'b>;
    fn deref(&self) -> &AttrArray<'b> {
        &self.attrs
    }
}

impl<'b> DerefMut for Call<'b> {
    fn deref_mut(&mut self) -> &mut AttrArray<'b> {
        &mut self.attrs
    }
}

/// Per method, the errno with which the kernel said it lacks it, or 0
/// while it has not. A race between two threads only costs one more
/// ioctl that fails the same way: relaxed loads and stores do.
pub(crate) struct Support([AtomicI32; Method::COUNT]);

impl Support {
    /// Nothing known yet.
    pub(crate) fn new() -> Support {
        Support(std::array::from_fn(|_| AtomicI32::new(0)))
    }

    /// The errno that marked `m`, if the kernel said it lacks it.
    pub(crate) fn lacks(&self, m: Method) -> Option<Errno> {
        match self.0[m as usize].load(Ordering::Relaxed) {
            0 => None,
            e => Some(Errno(e)),
        }
    }

    /// Learns from the kernel's failure of `m` with `errno` (see the
    /// module docs for which errnos mark what).
    pub(crate) fn learn(&self, m: Method, errno: Errno) {
        match errno.0 {
            libc::ENOTTY => self
                .0
                .iter()
                .for_each(|s| s.store(errno.0, Ordering::Relaxed)),
            libc::EPROTONOSUPPORT => self.0[m as usize].store(errno.0, Ordering::Relaxed),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Method; Method::COUNT] = [
        Method::GetContext,
        Method::AsyncEventAlloc,
        Method::QueryPort,
        Method::QueryGidTable,
        Method::QueryGidEntry,
        Method::AdviseMr,
        Method::RegDmabufMr,
    ];

    #[test]
    fn every_method_has_its_own_slot_ids_and_name() {
        for (i, m) in ALL.iter().enumerate() {
            assert_eq!(*m as usize, i);
        }
        let mut specs: Vec<_> = ALL.iter().map(|m| (m.spec().0, m.spec().1)).collect();
        specs.sort_unstable();
        specs.dedup();
        assert_eq!(specs.len(), ALL.len());
        let mut names: Vec<_> = ALL.iter().map(|m| m.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn enotty_marks_every_method_eprotonosupport_one_eopnotsupp_none() {
        let s = Support::new();
        assert!(ALL.iter().all(|&m| s.lacks(m).is_none()));
        s.learn(Method::AdviseMr, Errno(libc::EOPNOTSUPP));
        s.learn(Method::QueryPort, Errno(libc::EINVAL));
        assert!(ALL.iter().all(|&m| s.lacks(m).is_none()));
        s.learn(Method::QueryGidTable, Errno(libc::EPROTONOSUPPORT));
        assert_eq!(
            s.lacks(Method::QueryGidTable),
            Some(Errno(libc::EPROTONOSUPPORT))
        );
        assert!(s.lacks(Method::QueryGidEntry).is_none());
        s.learn(Method::GetContext, Errno(libc::ENOTTY));
        assert!(ALL.iter().all(|&m| s.lacks(m) == Some(Errno(libc::ENOTTY))));
    }
}

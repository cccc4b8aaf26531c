//! An owned `mmap()` of memory the kernel shares with us (a queue ring) or
//! that we hand to the device (an MR's buffer).

use super::netlink;
use crate::error::{Errno, Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::OnceLock;
use uverbs_abi::netlink as nl;

/// Whether the kernel copies pinned pages into a child at fork
/// (`RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`, Linux 5.13 on), which decides how
/// device memory is mapped ([`Mapping::for_device`]). Asked once per
/// process (`RDMA_NLDEV_CMD_SYS_GET`); a kernel that does not say is taken
/// not to.
pub fn kernel_copies_on_fork() -> bool {
    static ANSWER: OnceLock<bool> = OnceLock::new();
    *ANSWER.get_or_init(|| {
        let sys_get = nl::RDMA_NLDEV_CMD_SYS_GET;
        let Ok(reply) = netlink::transact("RDMA_NLDEV_CMD_SYS_GET", sys_get, 0, |r| r) else {
            return false;
        };
        let mut attrs = reply.messages().flatten();
        attrs.any(|a| a.kind() == nl::RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK && a.u8() == Some(1))
    })
}

/// An owned mapping, unmapped on drop.
///
/// The bytes are never exposed as `&[u8]`/`&mut [u8]`: the kernel or the
/// device may write them at any time, so all access goes through raw
/// pointers (copies, atomics, volatile reads) in the code that knows the
/// layout.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is an address range owned by this value; nothing in it is
// tied to the creating thread.
unsafe impl Send for Mapping {}
// SAFETY: &Mapping only gives out the base address and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`, shared and read-write, as the
    /// uverbs drivers expect for their queue mmap cookies.
    pub fn shared(
        fd: BorrowedFd<'_>,
        op: &'static str,
        len: usize,
        offset: u64,
    ) -> Result<Mapping> {
        Self::map_shared(fd, op, len, offset, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// Maps `len` bytes of `fd` at `offset`, shared and write-only: a
    /// device register page (mlx5 UAR), which is never read.
    pub fn shared_write_only(
        fd: BorrowedFd<'_>,
        op: &'static str,
        len: usize,
        offset: u64,
    ) -> Result<Mapping> {
        Self::map_shared(fd, op, len, offset, libc::PROT_WRITE)
    }

    fn map_shared(
        fd: BorrowedFd<'_>,
        op: &'static str,
        len: usize,
        offset: u64,
        prot: libc::c_int,
    ) -> Result<Mapping> {
        if len == 0 {
            return Err(Error::bad_answer(format!("{op}: zero-length mapping")));
        }
        let off = libc::off_t::try_from(offset).map_err(|_| {
            Error::bad_answer(format!("{op}: mmap offset {offset:#x} out of range"))
        })?;
        // SAFETY: a fresh mapping at an address of the kernel's choosing
        // aliases nothing in this process.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        Self::from_mmap(p, len, op)
    }

    /// Maps `len` bytes of fresh zeroed anonymous memory, page-aligned.
    pub fn anonymous(op: &'static str, len: usize) -> Result<Mapping> {
        if len == 0 {
            return Err(Error::invalid(format!("{op}: zero-length buffer")));
        }
        // SAFETY: as above, a fresh private anonymous mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        Self::from_mmap(p, len, op)
    }

    /// Like [`Mapping::anonymous`], for memory the device will access
    /// (MR buffers, queues, doorbell records). Where the kernel does not
    /// copy pinned pages on fork ([`kernel_copies_on_fork`]) the range is
    /// marked `MADV_DONTFORK`, as rdma-core's `ibv_fork_init` does: a child
    /// gets no copy of it, so the parent's pages never become
    /// copy-on-write, which would leave the device writing a page the
    /// parent no longer sees.
    pub fn for_device(op: &'static str, len: usize) -> Result<Mapping> {
        let dont_fork = !kernel_copies_on_fork();
        let m = Self::anonymous(op, len)?;
        if dont_fork {
            m.dont_fork()?;
        }
        Ok(m)
    }

    /// Like [`Mapping::for_device`], in 2 MiB huge pages (`MAP_HUGETLB`):
    /// `len` must be a multiple of 2 MiB. The kernel takes the pages from
    /// its reserved pool (`vm.nr_hugepages`); with too few free, `mmap`
    /// fails with `ENOMEM`, which the caller turns into advice.
    pub fn huge_for_device(op: &'static str, len: usize) -> Result<Mapping> {
        const HUGE_2M: usize = 2 << 20;
        let dont_fork = !kernel_copies_on_fork();
        if len == 0 || len % HUGE_2M != 0 {
            return Err(Error::invalid(format!(
                "{op}: {len} bytes is not a whole number of 2 MiB huge pages"
            )));
        }
        // MAP_HUGE_2MB: log2(2 MiB) in the size field, so that a system
        // whose default huge page is 1 GiB still gives 2 MiB pages.
        let huge_2mb = 21 << libc::MAP_HUGE_SHIFT;
        // SAFETY: a fresh private anonymous mapping, as in anonymous().
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | huge_2mb,
                -1,
                0,
            )
        };
        let m = Self::from_mmap(p, len, op)?;
        if dont_fork {
            m.dont_fork()?;
        }
        Ok(m)
    }

    /// `MADV_DONTFORK` over the whole mapping.
    fn dont_fork(&self) -> Result<()> {
        // SAFETY: the range is this mapping, owned by `self`; the advice
        // changes what a child inherits, not what this process sees.
        let r = unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_DONTFORK) };
        if r != 0 {
            return Err(Error::kernel("madvise(MADV_DONTFORK)", Errno::last()));
        }
        Ok(())
    }

    fn from_mmap(p: *mut libc::c_void, len: usize, op: &'static str) -> Result<Mapping> {
        if p == libc::MAP_FAILED {
            return Err(Error::kernel(op, Errno::last()));
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::bad_answer(format!("{op}: mmap returned NULL")))?;
        Ok(Mapping { ptr, len })
    }

    /// The first byte.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this value owns; nothing borrows
        // into it past this point (no references to it are ever handed out).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

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
        Self::private(op, len, libc::PROT_READ | libc::PROT_WRITE, 0)
    }

    /// A fresh private anonymous mapping of `len` bytes with `prot`, and
    /// `flags` beside `MAP_PRIVATE | MAP_ANONYMOUS`.
    fn private(
        op: &'static str,
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
    ) -> Result<Mapping> {
        if len == 0 {
            return Err(Error::invalid(format!("{op}: zero-length buffer")));
        }
        // SAFETY: as above, a fresh private anonymous mapping.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
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

/// Address space held for a mapping the kernel will offer only after a
/// command that cannot be taken back (rxe's `RESIZE_CQ` swaps the rings
/// before it answers where the new one is): private, anonymous,
/// `PROT_NONE` and `MAP_NORESERVE`, so it costs address space and no
/// memory. Reserving first moves the likely failure (`ENOMEM`: the
/// address-space limit, the map count) to before the command.
#[derive(Debug)]
pub struct Reservation {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: as Mapping's: an address range owned by this value.
unsafe impl Send for Reservation {}

impl Reservation {
    /// Holds `len` bytes of address space.
    pub fn new(op: &'static str, len: usize) -> Result<Reservation> {
        let m = Mapping::private(op, len, libc::PROT_NONE, libc::MAP_NORESERVE)?;
        let r = Reservation { ptr: m.ptr, len };
        std::mem::forget(m); // owned by the reservation now
        Ok(r)
    }

    /// Maps `len` bytes of `fd` at `offset`, shared and read-write, in the
    /// reserved range (`MAP_FIXED` over our own reservation), and gives the
    /// rest of the range back; a mapping larger than the reservation is
    /// made elsewhere, as [`Mapping::shared`] makes it.
    pub fn map_shared(
        self,
        fd: BorrowedFd<'_>,
        op: &'static str,
        len: usize,
        offset: u64,
    ) -> Result<Mapping> {
        let page = super::page_size();
        let Some(used) = len
            .checked_next_multiple_of(page)
            .filter(|&u| u <= self.len)
        else {
            drop(self);
            return Mapping::shared(fd, op, len, offset);
        };
        if len == 0 {
            return Err(Error::bad_answer(format!("{op}: zero-length mapping")));
        }
        let off = libc::off_t::try_from(offset).map_err(|_| {
            Error::bad_answer(format!("{op}: mmap offset {offset:#x} out of range"))
        })?;
        let (base, total) = (self.ptr, self.len);
        // The range is ours from here on: either the new mapping's and the
        // tail given back below, or (on failure) left held.
        std::mem::forget(self);
        // SAFETY: MAP_FIXED replaces only [base, base + len), which is our
        // own PROT_NONE reservation: nothing in the process refers to it.
        let p = unsafe {
            libc::mmap(
                base.as_ptr().cast(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            // A failed MAP_FIXED may have unmapped the range already, and
            // another thread may map there at once: unmapping it now could
            // take that thread's mapping. The range is left as it is (at
            // worst address space held until exit).
            return Err(Error::kernel(op, Errno::last()));
        }
        if used < total {
            // SAFETY: the reservation's tail, past the new mapping: ours,
            // and nothing refers to it.
            unsafe { libc::munmap(base.as_ptr().add(used).cast(), total - used) };
        }
        Mapping::from_mmap(p, len, op)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: the reserved range this value owns; nothing refers to it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    /// A memfd of `len` bytes whose first byte is `tag`.
    fn memfd(len: usize, tag: u8) -> OwnedFd {
        // SAFETY: plain calls; the fd is owned once created.
        unsafe {
            let fd = libc::memfd_create(c"reservation-test".as_ptr(), 0);
            assert!(fd >= 0);
            let fd = OwnedFd::from_raw_fd(fd);
            assert_eq!(libc::ftruncate(fd.as_raw_fd(), len as _), 0);
            assert_eq!(libc::pwrite(fd.as_raw_fd(), [tag].as_ptr().cast(), 1, 0), 1);
            fd
        }
    }

    /// Whether `addr` is mapped (`mincore` answers ENOMEM for a page that
    /// is not).
    fn mapped(addr: *mut u8) -> bool {
        let mut v = 0u8;
        // SAFETY: mincore only inspects the page table for this page.
        unsafe { libc::mincore(addr.cast(), 1, &mut v) == 0 }
    }

    /// A ring mapped into a reservation lands at its start, and the rest of
    /// the reservation is given back; one larger than the reservation is
    /// mapped elsewhere; dropping an unused reservation gives it all back.
    #[test]
    #[cfg_attr(miri, ignore)] // mmap
    fn a_reservation_takes_the_mapping_and_gives_back_the_rest() {
        // Whether a range was given back can be seen only where nothing
        // else maps meanwhile (the kernel hands a freed range to the next
        // mmap, another test's thread, at once): the test runs itself
        // again, alone in a process of its own, and checks it passed.
        const CHILD: &str = "RVERBS_TEST_RESERVATION_ALONE";
        const NAME: &str =
            "sys::mapping::tests::a_reservation_takes_the_mapping_and_gives_back_the_rest";
        if std::env::var_os(CHILD).is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--test-threads=1"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{text}");
            assert!(text.contains("1 passed"), "the test ran alone: {text}");
            return;
        }
        let page = super::super::page_size();
        let fd = memfd(page, 7);
        let r = Reservation::new("test", 4 * page).unwrap();
        let base = r.ptr.as_ptr();
        let m = r.map_shared(fd.as_fd(), "test", page, 0).unwrap();
        assert_eq!(m.as_ptr().as_ptr(), base);
        // SAFETY: the mapping's first byte, shared with the memfd.
        assert_eq!(unsafe { m.as_ptr().as_ptr().read_volatile() }, 7);
        // SAFETY: pointer arithmetic inside the reserved range, only inspected.
        let tail = unsafe { base.add(page) };
        assert!(!mapped(tail), "the reservation's tail was given back");
        drop(m);
        assert!(!mapped(base));

        let big = memfd(8 * page, 9);
        let r = Reservation::new("test", 2 * page).unwrap();
        let base = r.ptr.as_ptr();
        let m = r.map_shared(big.as_fd(), "test", 8 * page, 0).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { m.as_ptr().as_ptr().read_volatile() }, 9);
        assert_eq!(m.len(), 8 * page);
        if m.as_ptr().as_ptr() != base {
            assert!(!mapped(base), "the reservation was given back");
        }

        let r = Reservation::new("test", page).unwrap();
        let base = r.ptr.as_ptr();
        assert!(mapped(base));
        drop(r);
        assert!(!mapped(base));
    }
}

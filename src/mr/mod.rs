//! Memory regions (`REG_MR` / `DEREG_MR`), and the soundness rule for
//! memory the device can touch.
//!
//! # Why MR memory is never a Rust reference to plain bytes
//! Once registered, a buffer can be read or written by the device at any
//! time: by a local work request until its completion is polled, and by any
//! peer holding the rkey (RDMA WRITE/READ, atomics) for as long as the MR
//! exists. No `&[u8]` or `&mut [u8]` into such memory can be sound, so the
//! safe API never creates one. An [`Mr`] owns its buffer and offers
//! - copies in and out ([`Mr::write`], [`Mr::read`]) made of atomic
//!   accesses, as one treats memory shared with another process;
//! - views as atomic cells ([`Mr::cells`]): `&[AtomicU8]` admits writes by
//!   another agent at any time, so a program builds a message in place and
//!   reads a received one without a copy and without `unsafe`.
//!
//! Work requests name memory as ([`Mr`], offset, length) triples checked
//! against the MR's bounds ([`Mr::slice`]).
//!
//! # Whose memory
//! - [`Pd::alloc_mr`] maps fresh zeroed pages for the MR;
//!   [`Pd::alloc_mr_huge`] maps 2 MiB huge pages.
//! - [`Pd::register`] takes a buffer the program owns (`Vec<u8>`,
//!   `Box<[u8]>`, a `memmap2::MmapMut` with the `memmap2` feature — see
//!   [`MrBuffer`]) and [`Mr::deregister`] gives it back, only after
//!   `DEREG_MR` has returned: from then on the device cannot reach it.
//! - [`Pd::register_raw`] registers memory rverbs does not own, under a
//!   contract the caller signs with `unsafe`.
//!
//! There is deliberately no safe registration of a borrowed `&'a mut [u8]`:
//! its safety would rest on the MR's `Drop` running before the borrow ends,
//! and `std::mem::forget` skips `Drop` in safe code — the device would keep
//! the rkey to memory Rust has handed back. Ownership (or `unsafe`) is the
//! only sound shape.
//!
//! # Freeing
//! The buffer is unmapped or returned only after `DEREG_MR` has succeeded:
//! from then on the kernel grants no new access through the keys. If the
//! kernel refuses the deregistration, the buffer is leaked, never reused.
//!
//! # Addresses: the IOVA
//! Work requests and peers address an MR's bytes by its I/O virtual
//! address ([`Mr::iova`]), which is the buffer's own address unless it was
//! registered with [`Pd::register_iova`] (`ibv_reg_mr_iova`): a chosen
//! address, 0 for a zero-based MR. [`Mr::slice`] gives IOVA-based SGEs, so
//! work requests follow it.
//!
//! # fork()
//! Registered pages are pinned. Linux 5.13 and later copy pinned pages into
//! a child at `fork()` (the kernel reports it as `COPY_ON_FORK`, and every
//! kernel rverbs is tested on does), so the parent keeps its pages and the
//! device keeps writing where the parent reads; the child gets a private
//! copy it may touch freely. On an older kernel, memory rverbs maps itself
//! is marked `MADV_DONTFORK` (rdma-core's `ibv_fork_init`), so the child
//! has none of it; memory the program registers is not marked (it may
//! share pages with unrelated heap data the child needs), and a program
//! that forks on such a kernel must not write to it in the parent while a
//! child lives.

use crate::cmd::{self, mr::MrHandle};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use bitflags::bitflags;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

mod buffer;
mod shared;

pub use crate::wr::Slice;
pub use buffer::{BoxParts, External, MrBuffer, Pages, VecParts};

bitflags! {
    /// MR access rights (`enum ib_uverbs_access_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access: u32 {
        /// The local device may write (needed for receives, READ, atomics).
        const LOCAL_WRITE = 1;
        /// Peers may RDMA WRITE.
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// Peers may perform atomics (the device must offer atomics).
        const REMOTE_ATOMIC = 1 << 3;
        /// Memory windows may be bound to the MR (the device must offer
        /// memory windows).
        const MW_BIND = 1 << 4;
        /// Zero-based addressing for windows bound to the MR (the MR's own
        /// addressing is its IOVA: see [`Pd::register_iova`]). rxe refuses
        /// it for MRs (named [`Error::Unsupported`]).
        const ZERO_BASED = 1 << 5;
        /// On-demand paging: pages are faulted in when the device touches
        /// them, not pinned at registration (the device must offer ODP;
        /// rxe does from Linux 6.14).
        const ON_DEMAND = 1 << 6;
        /// The memory is in huge pages (a hint some drivers use; rxe
        /// refuses it, and needs none: [`Pd::alloc_mr_huge`] works without).
        const HUGETLB = 1 << 7;
        /// Peers may FLUSH to global visibility (Linux 6.2; the device must
        /// offer it).
        const FLUSH_GLOBAL = 1 << 8;
        /// Peers may FLUSH to persistence (Linux 6.2; the device must offer
        /// it, and the memory must be persistent).
        const FLUSH_PERSISTENT = 1 << 9;
        /// PCIe relaxed ordering. One of the kernel's *optional* flags:
        /// a device that lacks it ignores it (the kernel's rule, which
        /// rdma-core keeps), so it is never refused.
        const RELAXED_ORDERING = 1 << 20;
    }
}

/// A registered memory region that owns its buffer `B`: memory rverbs
/// mapped ([`Pages`], the default), or a buffer the program handed over
/// ([`Pd::register`]). Clones share the registration; the last one to go
/// deregisters it.
pub struct Mr<B: MrBuffer = Pages> {
    pub(crate) inner: Arc<MrInner<B>>,
}

impl<B: MrBuffer> Clone for Mr<B> {
    fn clone(&self) -> Self {
        Mr {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct MrInner<B: MrBuffer> {
    /// DEREG_MR, in Drop or in deregister(); then the buffer is put back
    /// together (see the module docs).
    handle: Option<MrHandle>,
    /// The buffer, taken apart while registered.
    raw: Option<B::Raw>,
    /// Dropped after the MR (field order): DEREG_MR before DEALLOC_PD.
    _pd: Arc<PdInner>,
    lkey: u32,
    rkey: u32,
    /// Where the bytes are in this process (valid while `raw` is held).
    ptr: NonNull<u8>,
    /// Where work requests and peers say they are.
    iova: u64,
    len: usize,
    access: Access,
}

// SAFETY: the pointer is to memory the MR owns through `raw` (Send + Sync
// by MrBuffer's bound) and reaches only by atomic accesses; the rest is
// plain data and Arcs.
unsafe impl<B: MrBuffer> Send for MrInner<B> {}
// SAFETY: as for Send: &MrInner gives out only atomic access to the bytes.
unsafe impl<B: MrBuffer> Sync for MrInner<B> {}

impl<B: MrBuffer> MrInner<B> {
    /// The PD the MR was registered in.
    pub(crate) fn pd(&self) -> &Arc<PdInner> {
        &self._pd
    }

    /// Deregisters now; the buffer back if the kernel agreed, or None
    /// (leaked: the device may still reach it).
    fn deregister(&mut self) -> Result<Option<B>> {
        let Some(handle) = self.handle.take() else {
            return Ok(None);
        };
        match handle.close() {
            Ok(()) => Ok(self.raw.take().map(|raw| {
                // SAFETY: `raw` came from B::into_raw in register(), and
                // DEREG_MR has just succeeded: the device cannot reach it.
                unsafe { B::from_raw(raw) }
            })),
            Err(e) => {
                std::mem::forget(self.raw.take());
                Err(e)
            }
        }
    }
}

impl<B: MrBuffer> Drop for MrInner<B> {
    fn drop(&mut self) {
        // Dropping the buffer frees it; a failed DEREG_MR leaks it.
        let _ = self.deregister();
    }
}

impl<B: MrBuffer> std::fmt::Debug for Mr<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("iova", &format_args!("{:#x}", self.iova()))
            .field("len", &self.inner.len)
            .field("lkey", &self.inner.lkey)
            .field("rkey", &self.inner.rkey)
            .field("access", &self.inner.access)
            .finish()
    }
}

/// Why [`Mr::deregister`] gave no buffer back.
#[derive(Debug)]
pub enum DeregisterError<B: MrBuffer> {
    /// Other clones of the MR still exist: nothing was done; here it is.
    Shared(Mr<B>),
    /// The kernel refused `DEREG_MR`: the buffer is leaked, since the
    /// device may still reach it.
    Kernel(Error),
}

impl<B: MrBuffer> std::fmt::Display for DeregisterError<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeregisterError::Shared(_) => {
                write!(f, "DEREG_MR not attempted: other clones of the MR exist")
            }
            DeregisterError::Kernel(e) => write!(f, "{e} (the buffer is leaked)"),
        }
    }
}

impl<B: MrBuffer + std::fmt::Debug> std::error::Error for DeregisterError<B> {}

/// For `?` in functions returning [`Error`]: the kernel's error, or an
/// invalid argument naming the clones (the MR itself is then dropped,
/// which deregisters it once the last clone goes).
impl<B: MrBuffer> From<DeregisterError<B>> for Error {
    fn from(e: DeregisterError<B>) -> Error {
        match e {
            DeregisterError::Shared(_) => {
                Error::invalid("deregister: other clones of the MR still exist")
            }
            DeregisterError::Kernel(e) => e,
        }
    }
}

impl Pd {
    /// Allocates `len` bytes of zeroed, page-aligned memory and registers it
    /// (`REG_MR`) with `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        let map = crate::netlink::device_memory("mmap of MR memory", len)?;
        self.register(Pages { map }, access)
    }

    /// Like [`Pd::alloc_mr`], in 2 MiB huge pages: `len` is rounded up to a
    /// whole number of them. The pages come from the kernel's reserved pool;
    /// with too few free the error says how many are and how to reserve
    /// more.
    pub fn alloc_mr_huge(&self, len: usize, access: Access) -> Result<Mr> {
        const HUGE: usize = 2 << 20;
        let rounded = len
            .checked_next_multiple_of(HUGE)
            .filter(|&r| r > 0)
            .ok_or_else(|| Error::invalid(format!("huge-page MR of {len} bytes")))?;
        let dont_fork = !crate::netlink::kernel_copies_on_fork();
        let op = "mmap(MAP_HUGETLB) of MR memory";
        let map = crate::sys::Mapping::huge_for_device(op, rounded, dont_fork).map_err(|e| {
            match e.errno() {
                Some(errno) if errno.0 == libc::ENOMEM => Error::ResourceLimit {
                    op,
                    errno,
                    what: format!(
                        "{rounded} bytes need {} free 2 MiB huge pages and {}; reserve                          them with `sysctl vm.nr_hugepages=N` (or hugepages=N on the                          kernel command line)",
                        rounded / HUGE,
                        crate::sys::free_huge_pages()
                            .map_or("the number free is unknown".into(), |n| format!(
                                "{n} are free"
                            ))
                    ),
                },
                _ => e,
            }
        })?;
        self.register(Pages { map }, access)
    }

    /// Registers a buffer the program owns (`REG_MR`): the MR owns it until
    /// [`Mr::deregister`] gives it back after `DEREG_MR`, or frees it when
    /// the last clone is dropped. Work requests and peers address it by its
    /// own address ([`Mr::iova`]). On failure the buffer is dropped.
    pub fn register<B: MrBuffer>(&self, buf: B, access: Access) -> Result<Mr<B>> {
        self.register_at(buf, access, None)
    }

    /// Like [`Pd::register`], but work requests and peers address the
    /// buffer from `iova` on (`ibv_reg_mr_iova`); 0 makes a zero-based MR.
    /// `iova` must have the buffer's offset within its page, since devices
    /// translate the IOVA page by page and keep the low bits (rxe does so,
    /// and so do mlx5's page tables): a page-aligned buffer can take any
    /// page-aligned IOVA.
    pub fn register_iova<B: MrBuffer>(&self, buf: B, access: Access, iova: u64) -> Result<Mr<B>> {
        self.register_at(buf, access, Some(iova))
    }

    /// Registers `len` bytes at `ptr`, memory rverbs does not own.
    ///
    /// # Safety
    /// The caller promises that, from this call until the MR is
    /// deregistered — until [`Mr::deregister`] returns `Ok`, or the last
    /// clone of the `Mr` is dropped, or **forever** if the `Mr` is leaked
    /// (`std::mem::forget` skips the deregistration) —
    /// - `ptr..ptr + len` stays allocated, mapped and writable, and is not
    ///   moved (no reallocation, no `munmap`, no `mremap`);
    /// - no Rust reference (`&[u8]`, `&mut [u8]`, `&T` over it) is used to
    ///   reach any of it, since the device and peers may write it at any
    ///   time; only raw pointers, volatile or atomic accesses, or this
    ///   `Mr`'s own methods;
    /// - if the process forks on a kernel older than 5.13, the memory is
    ///   not written by the parent while the child lives (see the module
    ///   docs).
    ///
    /// The promise ends at deregistration, not at the end of a borrow, which
    /// is why no lifetime ties the `Mr` to the memory: a borrow would end
    /// whether or not the `Mr` was dropped.
    pub unsafe fn register_raw(
        &self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Mr<External>> {
        let ptr =
            NonNull::new(ptr).ok_or_else(|| Error::invalid("register_raw of a null pointer"))?;
        self.register_at(External { ptr, len }, access, None)
    }

    fn register_at<B: MrBuffer>(&self, buf: B, access: Access, iova: Option<u64>) -> Result<Mr<B>> {
        check_access(self, access)?;
        let (raw, ptr, len) = buf.into_raw();
        // From here on a failure must put the buffer back together (it was
        // never registered, so that is sound) for it to be freed.
        let give_back = |e: Error, raw: B::Raw| {
            // SAFETY: raw came from into_raw just now and REG_MR did not
            // succeed: the device never had it.
            drop(unsafe { B::from_raw(raw) });
            e
        };
        if len == 0 {
            return Err(give_back(
                Error::invalid("registering an empty buffer"),
                raw,
            ));
        }
        let start = ptr.as_ptr() as u64;
        let iova = iova.unwrap_or(start);
        let page = crate::sys::page_size() as u64;
        if iova % page != start % page {
            return Err(give_back(
                Error::invalid(format!(
                    "IOVA {iova:#x} for a buffer at {start:#x}: the IOVA must have the                      buffer's offset in its page ({:#x})",
                    start % page
                )),
                raw,
            ));
        }
        let pd = &self.inner;
        let r = match cmd::mr::reg(
            &pd.ctx.dev,
            pd.handle.raw(),
            start,
            len as u64,
            iova,
            access.bits(),
        ) {
            Ok(r) => r,
            Err(e) => return Err(give_back(reg_hint(e, self, access, len), raw)),
        };
        Ok(Mr {
            inner: Arc::new(MrInner {
                handle: Some(r.handle),
                raw: Some(raw),
                _pd: pd.clone(),
                lkey: r.lkey,
                rkey: r.rkey,
                ptr,
                iova,
                len,
                access,
            }),
        })
    }
}

/// Refuses, by name, an access flag the device lacks, before the kernel
/// answers a bare errno (or, for a flag it does not check, accepts it and
/// fails later on the wire).
fn check_access(pd: &Pd, access: Access) -> Result<()> {
    // The kernel rejects remote write or atomic access without local
    // write (IB spec); say so before asking it.
    if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
        && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(Error::invalid(format!(
            "MR access {access:?}: remote write and atomic access need LOCAL_WRITE"
        )));
    }
    let needs_device = Access::REMOTE_ATOMIC
        | Access::MW_BIND
        | Access::ON_DEMAND
        | Access::FLUSH_GLOBAL
        | Access::FLUSH_PERSISTENT;
    if !access.intersects(needs_device) {
        return Ok(());
    }
    let ctx = pd.context();
    let attr = ctx.query_device_ex()?;
    let caps = attr.device_cap_flags_ex;
    use uverbs_abi::verbs::{IbAtomicCap, IbOdpGeneralCaps, IbUverbsDeviceCapFlags as F};
    let lacks = |flag: Access, has: bool, what: &str| -> Result<()> {
        if access.contains(flag) && !has {
            return Err(Error::Unsupported {
                device: ctx.device().name().to_string(),
                what: format!("MR access {flag:?}: {what}"),
            });
        }
        Ok(())
    };
    lacks(
        Access::REMOTE_ATOMIC,
        attr.orig.atomic_cap != IbAtomicCap::NONE.0,
        "the device offers no atomics (atomic_cap is IB_ATOMIC_NONE)",
    )?;
    lacks(
        Access::MW_BIND,
        caps & (F::MEM_WINDOW.bits() | F::MEM_WINDOW_TYPE_2A.bits() | F::MEM_WINDOW_TYPE_2B.bits())
            != 0,
        "the device offers no memory windows",
    )?;
    lacks(
        Access::ON_DEMAND,
        attr.odp_general_caps & IbOdpGeneralCaps::SUPPORT.bits() != 0,
        "the device offers no on-demand paging (rxe gains it in Linux 6.14)",
    )?;
    lacks(
        Access::FLUSH_GLOBAL,
        caps & F::FLUSH_GLOBAL.bits() != 0,
        "the device offers no FLUSH to global visibility (Linux 6.2 on)",
    )?;
    lacks(
        Access::FLUSH_PERSISTENT,
        caps & F::FLUSH_PERSISTENT.bits() != 0,
        "the device offers no FLUSH to persistence (Linux 6.2 on)",
    )
}

/// REG_MR's errnos that have a cause rverbs can name: locked memory
/// (ENOMEM under `RLIMIT_MEMLOCK`), access flags the driver does not take
/// for MRs (EOPNOTSUPP: rxe refuses ZERO_BASED and HUGETLB), and
/// FLUSH_PERSISTENT over memory that is not persistent (EINVAL).
fn reg_hint(e: Error, pd: &Pd, access: Access, len: usize) -> Error {
    let e = memlock_hint(e, len);
    let Error::Kernel { op, errno } = &e else {
        return e;
    };
    let basic = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let extra = access - basic;
    let device = pd.inner.ctx.device.name().to_string();
    match errno.0 {
        libc::EOPNOTSUPP if !extra.is_empty() => Error::Unsupported {
            device,
            what: format!(
                "MR access {extra:?}: {op} failed with {errno}: the driver does not take \
                 these flags for MRs"
            ),
        },
        libc::EINVAL if access.contains(Access::FLUSH_PERSISTENT) => Error::Unsupported {
            device,
            what: format!(
                "MR access FLUSH_PERSISTENT: {op} failed with {errno}: the buffer is not \
                 persistent memory (pmem), which FLUSH to persistence needs"
            ),
        },
        _ => e,
    }
}

/// REG_MR pins the pages, which counts against `RLIMIT_MEMLOCK` for an
/// unprivileged process: say so when the kernel answers only ENOMEM.
fn memlock_hint(e: Error, len: usize) -> Error {
    match (&e, crate::sys::memlock_limit()) {
        (Error::Kernel { op, errno }, Some(limit)) if errno.0 == libc::ENOMEM => {
            Error::ResourceLimit {
                op,
                errno: *errno,
                what: format!(
                    "registering {len} bytes pins them, and RLIMIT_MEMLOCK is {limit} bytes \
                     (raise it with ulimit -l, or run with CAP_IPC_LOCK)"
                ),
            }
        }
        _ => e,
    }
}

impl<B: MrBuffer> Mr<B> {
    fn base(&self) -> *mut u8 {
        // The buffer's bytes, held by `raw` for as long as this Mr exists.
        self.inner.ptr.as_ptr()
    }

    /// Where work requests and peers address the first byte (the I/O
    /// virtual address; the buffer's own address unless registered with
    /// [`Pd::register_iova`]). What to send a peer with the rkey.
    #[inline]
    pub fn iova(&self) -> u64 {
        self.inner.iova
    }

    /// Same as [`Mr::iova`] (kept for the name rdma-core's `ibv_mr` uses).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.inner.iova
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the MR is empty (never: registration needs one byte).
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.inner.lkey
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        self.inner.rkey
    }

    /// The access rights it was registered with.
    pub fn access(&self) -> Access {
        self.inner.access
    }

    /// Deregisters the MR now (`DEREG_MR`) and gives the buffer back, once
    /// the kernel has agreed — so the device can never reach memory the
    /// program can. Refused, with the MR handed back, while other clones
    /// exist.
    pub fn deregister(self) -> std::result::Result<B, DeregisterError<B>> {
        let mut inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(inner) => return Err(DeregisterError::Shared(Mr { inner })),
        };
        match inner.deregister() {
            Ok(Some(buf)) => Ok(buf),
            // The handle is taken only here and in Drop: this is the first.
            Ok(None) => Err(DeregisterError::Kernel(Error::invalid(
                "MR already deregistered",
            ))),
            Err(e) => Err(DeregisterError::Kernel(e)),
        }
    }

    /// `len` bytes at `offset`, checked against the MR's bounds, as an SGE
    /// in the MR's IOVA space.
    pub fn slice(&self, offset: usize, len: u32) -> Result<Slice<'_>> {
        self.check(offset, len as usize)?;
        Ok(Slice::checked(
            self.iova() + offset as u64,
            len,
            self.inner.lkey,
        ))
    }

    /// The whole MR (its length must fit an SGE's 32 bits).
    pub fn all(&self) -> Result<Slice<'_>> {
        let len = u32::try_from(self.inner.len)
            .map_err(|_| Error::invalid("MR longer than 4 GiB: use slice()"))?;
        Ok(Slice::checked(self.iova(), len, self.inner.lkey))
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.inner.len => Ok(()),
            _ => Err(Error::invalid(format!(
                "range {offset}+{len} is outside the {}-byte MR",
                self.inner.len
            ))),
        }
    }

    /// `len` bytes at `offset` as atomic cells: zero-copy access without
    /// `unsafe`. An `AtomicU8` may be written by another agent at any time
    /// (the device, a peer's RDMA WRITE), so a view is sound while the
    /// device works; build a message in place with `store`s, read a
    /// received one with `load`s (`Acquire` on a flag byte a peer writes
    /// last, then `Relaxed` for the rest).
    ///
    /// The cells are bytes. [`Mr::write`] and [`Mr::read`] move aligned
    /// runs as 8-byte atomics; racing those with byte accesses to the same
    /// bytes from another thread mixes access sizes, which Rust's memory
    /// model leaves undefined — synchronise the threads, as any racing
    /// writers must be for the data to mean anything.
    pub fn cells(&self, offset: usize, len: usize) -> Result<&[AtomicU8]> {
        self.check(offset, len)?;
        // SAFETY: offset..offset+len is inside the buffer (check above),
        // which stays mapped while &self lives; AtomicU8 has u8's size and
        // alignment and every bit pattern is valid; no non-atomic Rust
        // access to these bytes is ever made by the safe API.
        Ok(unsafe { std::slice::from_raw_parts(self.base().add(offset).cast::<AtomicU8>(), len) })
    }

    /// Copies `data` into the MR at `offset`.
    ///
    /// The copy is made of relaxed atomic stores (8 bytes at a time where
    /// aligned): two threads copying into and out of the same bytes, or
    /// the device writing them meanwhile (a peer's RDMA WRITE), give torn
    /// data — `Mr` is `Sync` and no reference to plain bytes of the buffer
    /// exists. On x86_64 these are plain moves.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: offset + len is inside the buffer (check above), which
        // lives as long as self and is only ever accessed atomically
        // through the safe API.
        unsafe { shared::copy_in(self.base().add(offset), data) };
        Ok(())
    }

    /// Copies bytes at `offset` out of the MR into `out` (relaxed atomic
    /// loads; see [`Mr::write`]).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: as in write(): in bounds of the live buffer.
        unsafe { shared::copy_out(self.base().add(offset), out) };
        Ok(())
    }

    /// Reads the byte at `offset` with an acquire load: for spinning on a
    /// byte a peer's RDMA WRITE will change (a plain copy could be hoisted
    /// out of the loop by the compiler).
    pub fn read_volatile_u8(&self, offset: usize) -> Result<u8> {
        Ok(self.cells(offset, 1)?[0].load(std::sync::atomic::Ordering::Acquire))
    }

    /// Reads a native-endian u64 at `offset` (atomics' results).
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// Fills `len` bytes at `offset` with `byte` (relaxed atomic stores).
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.check(offset, len)?;
        // SAFETY: in bounds of the live buffer (check above).
        unsafe { shared::fill(self.base().add(offset), len, byte) };
        Ok(())
    }

    /// A raw pointer to the buffer, for zero-copy users.
    ///
    /// # Safety
    /// The caller must not create references to the memory while the device
    /// may access it, and must not use the pointer after the last clone of
    /// this `Mr` is dropped.
    pub unsafe fn as_ptr(&self) -> *mut u8 {
        self.base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Errno;

    /// An ENOMEM from REG_MR under a finite RLIMIT_MEMLOCK names the limit;
    /// other errors pass through untouched.
    #[test]
    fn reg_mr_enomem_names_the_memlock_limit() {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: get then set this process's own limit, lowering only the
        // soft value (always permitted).
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r), 0);
            let low = libc::rlimit {
                rlim_cur: 65536.min(r.rlim_max),
                rlim_max: r.rlim_max,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &low), 0);
        }
        let enomem = Error::Kernel {
            op: "REG_MR",
            errno: Errno(libc::ENOMEM),
        };
        let e = memlock_hint(enomem, 1 << 20);
        assert!(
            matches!(&e, Error::ResourceLimit { what, .. } if what.contains("RLIMIT_MEMLOCK")),
            "{e}"
        );
        assert_eq!(e.errno(), Some(Errno(libc::ENOMEM)));
        let einval = Error::Kernel {
            op: "REG_MR",
            errno: Errno(libc::EINVAL),
        };
        assert!(matches!(memlock_hint(einval, 1), Error::Kernel { .. }));
        // SAFETY: restores the limit read above.
        unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) };
    }
}

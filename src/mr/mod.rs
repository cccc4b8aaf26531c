//! Memory regions (`REG_MR` / `DEREG_MR`), and the soundness rule for
//! memory the device can touch.
//!
//! What a program needs to know is on [`Mr`].

use crate::cmd::{self, mr::MrHandle};
use crate::error::{Error, Feature, Limit, Result};
use crate::pd::{Pd, PdInner};
use std::ptr::NonNull;
use std::sync::Arc;

mod buffer;
mod cells;
mod dmabuf;
mod shared;

pub use crate::wr::Slice;
pub use buffer::{BoxParts, External, MrBuffer, MrMemory, Pages, Released, VecParts};
pub use cells::{ByteCell, CellIter, Cells};
pub use dmabuf::DmabufMr;
pub use rverbs_types::Access;

/// A registered memory region that owns its buffer `B`: memory rverbs
/// mapped ([`Pages`], the default), or a buffer the program handed over
/// ([`Pd::register`]). Clones share the registration; the last one to go
/// deregisters it.
///
/// # Why MR memory is never a Rust reference to plain bytes
/// Once registered, a buffer can be read or written by the device at any
/// time: by a local work request until its completion is polled, and by any
/// peer holding the rkey (RDMA WRITE/READ, atomics) for as long as the MR
/// exists. No `&[u8]` or `&mut [u8]` into such memory can be sound, so the
/// safe API never creates one. An [`Mr`] owns its buffer and offers
/// - copies in and out ([`Mr::write`], [`Mr::read`]) made of atomic
///   accesses, as one treats memory shared with another process;
/// - views as atomic byte cells ([`Mr::cells`]), which admit writes by
///   another agent at any time, so a program builds a message in place and
///   reads a received one without a copy and without `unsafe`.
///
/// Each byte is reached with one atomic access size, fixed by the buffer
/// (8-byte words inside it, single bytes at its unaligned ends), whichever
/// copy or cell reaches it: Rust leaves racing atomics of different sizes
/// undefined, and an `Mr` is `Clone + Sync`.
///
/// Work requests name memory as ([`Mr`], offset, length) triples checked
/// against the MR's bounds ([`Mr::slice`]).
///
/// # Whose memory
/// - [`Pd::alloc_mr`] maps fresh zeroed pages for the MR;
///   [`Pd::alloc_mr_huge`] maps 2 MiB huge pages.
/// - [`Pd::register`] takes a buffer the program owns (`Vec<u8>`,
///   `Box<[u8]>`, a `memmap2::MmapMut` with the `memmap2` feature — see
///   [`MrBuffer`]) and [`Mr::deregister`] gives it back, only after
///   `DEREG_MR` has returned: from then on the device cannot reach it.
/// - [`Pd::register_raw`] registers memory rverbs does not own, under a
///   contract the caller signs with `unsafe`.
///
/// There is deliberately no safe registration of a borrowed `&'a mut [u8]`:
/// its safety would rest on the MR's `Drop` running before the borrow ends,
/// and `std::mem::forget` skips `Drop` in safe code — the device would keep
/// the rkey to memory Rust has handed back. Ownership (or `unsafe`) is the
/// only sound shape.
///
/// # Freeing
/// The buffer is unmapped or returned only after `DEREG_MR` has succeeded:
/// from then on the kernel grants no new access through the keys. If the
/// kernel refuses the deregistration, the buffer is leaked, never reused.
///
/// # Addresses: the IOVA
/// Work requests and peers address an MR's bytes by its I/O virtual
/// address ([`Mr::iova`]), which is the buffer's own address unless it was
/// registered with [`Pd::register_iova`] (`ibv_reg_mr_iova`): a chosen
/// address, 0 for a zero-based MR. [`Mr::slice`] gives IOVA-based SGEs, so
/// work requests follow it.
///
/// # fork()
/// Registered pages are pinned. Linux 5.13 and later copy pinned pages into
/// a child at `fork()` (the kernel reports it as `COPY_ON_FORK`, and every
/// kernel rverbs is tested on does), so the parent keeps its pages and the
/// device keeps writing where the parent reads; the child gets a private
/// copy it may touch freely. On an older kernel, memory rverbs maps itself
/// is marked `MADV_DONTFORK` (rdma-core's `ibv_fork_init`), so the child
/// has none of it; memory the program registers is not marked (it may
/// share pages with unrelated heap data the child needs), and a program
/// that forks on such a kernel must not write to it in the parent while a
/// child lives.
pub struct Mr<B: MrMemory = Pages> {
    pub(crate) inner: Arc<MrInner<B>>,
}

impl<B: MrMemory> Clone for Mr<B> {
    fn clone(&self) -> Self {
        Mr {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct MrInner<B: MrMemory> {
    /// DEREG_MR, in Drop or in deregister(); then the buffer is put back
    /// together (see the module docs).
    handle: Option<MrHandle>,
    /// The buffer, taken apart while registered.
    raw: Option<B::Held>,
    /// Dropped after the MR (field order): DEREG_MR before DEALLOC_PD.
    _pd: Arc<PdInner>,
    lkey: u32,
    rkey: u32,
    /// Where the bytes are in this process (valid while `raw` is held).
    ptr: NonNull<u8>,
    /// The same bytes as the safe API reaches them: one access size per
    /// byte (see `shared`).
    region: shared::Region,
    /// The indices (rkey >> 8) of the memory windows that keep this MR
    /// ([`crate::mw::Mw`]), so that a refused deregistration can name them.
    windows: std::sync::Mutex<Vec<u32>>,
    /// Where work requests and peers say they are.
    iova: u64,
    len: usize,
    access: Access,
}

// SAFETY: the pointer is to memory the MR owns through `raw` (Send + Sync
// by MrMemory's bound) or that register_raw's caller vouched for, reached
// only by atomic accesses; the rest is plain data and Arcs.
unsafe impl<B: MrMemory> Send for MrInner<B> {}
// SAFETY: as for Send: &MrInner gives out only atomic access to the bytes.
unsafe impl<B: MrMemory> Sync for MrInner<B> {}

impl<B: MrMemory> MrInner<B> {
    /// The PD the MR was registered in.
    pub(crate) fn pd(&self) -> &Arc<PdInner> {
        &self._pd
    }

    /// Deregisters now; the buffer back if the kernel agreed (`None` if
    /// it was already), or the kernel's error with the MR still
    /// registered and its buffer still held, so that it can be tried
    /// again.
    fn deregister(&mut self) -> Result<Option<B::Back>> {
        let Some(handle) = self.handle.as_mut() else {
            return Ok(None);
        };
        handle.try_close()?;
        self.handle = None;
        Ok(self.raw.take().map(|raw| {
            // SAFETY: `raw` was taken from B for ptr..ptr + len in
            // register_at(), and DEREG_MR has just succeeded: the device
            // cannot reach it.
            unsafe { B::give_back(raw, self.ptr, self.len) }
        }))
    }
}

impl<B: MrMemory> Drop for MrInner<B> {
    fn drop(&mut self) {
        // Dropping the buffer frees it; a failed DEREG_MR leaks it (the
        // handle's drop tries once more and leaks what it keeps).
        if self.deregister().is_err() {
            std::mem::forget(self.raw.take());
        }
    }
}

impl<B: MrMemory> std::fmt::Debug for Mr<B> {
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
pub enum DeregisterError<B: MrMemory> {
    /// Other clones of the MR still exist: nothing was done; here it is.
    Shared(Mr<B>),
    /// Memory windows bound to the MR keep it ([`crate::mw::Mw`] keeps every
    /// MR it was bound to until `DEALLOC_MW`): nothing was done; here it
    /// is, with the windows' indices (their rkeys shifted right by 8).
    Windows(Mr<B>, Vec<u32>),
    /// The kernel refused `DEREG_MR` (rxe: a window is bound to the MR):
    /// the MR is still registered, and here it is, to try again once the
    /// cause is gone (as `ibv_dereg_mr` leaves a C program its MR). If it
    /// is dropped while the kernel still refuses, its buffer is leaked,
    /// since the device may still reach it.
    Kernel(Mr<B>, Error),
}

impl<B: MrMemory> std::fmt::Display for DeregisterError<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeregisterError::Shared(_) => {
                write!(f, "DEREG_MR not attempted: other clones of the MR exist")
            }
            DeregisterError::Windows(_, w) => write!(f, "{}", windows_text(w)),
            DeregisterError::Kernel(_, e) => write!(f, "{e} (the MR is still registered)"),
        }
    }
}

fn windows_text(w: &[u32]) -> String {
    let list: Vec<String> = w.iter().map(|i| format!("{i:#x}")).collect();
    format!(
        "DEREG_MR not attempted: memory window(s) with index {} keep the MR until they \
         are deallocated (drop the Mw first)",
        list.join(", ")
    )
}

impl<B: MrMemory + std::fmt::Debug> std::error::Error for DeregisterError<B> {}

/// For `?` in functions returning [`Error`]: the kernel's error, or an
/// invalid argument naming the clones or windows (the MR itself is then
/// dropped, which deregisters it once the last reference goes).
impl<B: MrMemory> From<DeregisterError<B>> for Error {
    fn from(e: DeregisterError<B>) -> Error {
        match e {
            DeregisterError::Shared(_) => {
                Error::invalid("deregister: other clones of the MR still exist")
            }
            DeregisterError::Windows(_, w) => Error::invalid(windows_text(&w)),
            DeregisterError::Kernel(_, e) => e,
        }
    }
}

impl Pd {
    /// Allocates `len` bytes of zeroed, page-aligned memory and registers it
    /// (`REG_MR`) with `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        let map = crate::sys::Mapping::for_device("mmap of MR memory", len)?;
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
        let op = "mmap(MAP_HUGETLB) of MR memory";
        let map =
            crate::sys::Mapping::huge_for_device(op, rounded).map_err(|e| match e.errno() {
                Some(errno) if errno.0 == libc::ENOMEM => Error::ResourceLimit {
                    op,
                    errno,
                    limit: Limit::HugePages {
                        len: rounded,
                        pages: rounded / HUGE,
                        free: crate::sys::free_huge_pages(),
                    },
                },
                _ => e,
            })?;
        self.register(Pages { map }, access)
    }

    /// Registers a buffer the program owns (`REG_MR`): the MR owns it until
    /// [`Mr::deregister`] gives it back after `DEREG_MR`, or frees it when
    /// the last clone is dropped. Work requests and peers address it by its
    /// own address ([`Mr::iova`]). On failure the buffer is dropped.
    pub fn register<B: MrBuffer>(&self, buf: B, access: Access) -> Result<Mr<B>> {
        self.register_buffer(buf, access, None)
    }

    /// Like [`Pd::register`], but work requests and peers address the
    /// buffer from `iova` on (`ibv_reg_mr_iova`); 0 makes a zero-based MR.
    /// `iova` must have the buffer's offset within its page, since devices
    /// translate the IOVA page by page and keep the low bits (rxe does so,
    /// and so do mlx5's page tables): a page-aligned buffer can take any
    /// page-aligned IOVA. The MR's last byte must have an IOVA too
    /// (`iova + len - 1 <= u64::MAX`).
    pub fn register_iova<B: MrBuffer>(&self, buf: B, access: Access, iova: u64) -> Result<Mr<B>> {
        self.register_buffer(buf, access, Some(iova))
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
    ///   time; only this `Mr`'s own methods, or raw-pointer, volatile or
    ///   atomic accesses that never race with them (the `Mr`'s copies
    ///   access each byte with a size of their own choosing, and Rust
    ///   leaves racing accesses of different sizes undefined);
    /// - no other `Mr` over any of these bytes is in use meanwhile;
    /// - if the process forks on a kernel older than 5.13, the memory is
    ///   not written by the parent while the child lives (see the module
    ///   docs).
    ///
    /// The promise ends at deregistration, not at the end of a borrow, which
    /// is why no lifetime ties the `Mr` to the memory: a borrow would end
    /// whether or not the `Mr` was dropped. What deregistration gives back
    /// is a [`Released`] receipt, not a buffer: registering the memory
    /// again needs this function, and a new promise, again.
    pub unsafe fn register_raw(
        &self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Mr<External>> {
        let ptr =
            NonNull::new(ptr).ok_or_else(|| Error::invalid("register_raw of a null pointer"))?;
        // Nothing to give back on failure: the memory is the caller's.
        // SAFETY: the caller's contract above is register_at's.
        unsafe { self.register_at::<External>((), ptr, len, access, None, drop) }
    }

    /// Takes an owned buffer apart and registers it; on failure the
    /// buffer is put back together and dropped.
    fn register_buffer<B: MrBuffer>(
        &self,
        buf: B,
        access: Access,
        iova: Option<u64>,
    ) -> Result<Mr<B>> {
        let (raw, ptr, len) = buf.into_raw();
        let give_back = |raw: B::Raw| {
            // SAFETY: raw came from into_raw just now and REG_MR did not
            // succeed: the device never had it.
            drop(unsafe { B::from_raw(raw) });
        };
        // SAFETY: into_raw's contract (MrBuffer) is the memory promise
        // register_at needs, and the buffer gave up every other way in.
        unsafe { self.register_at::<B>(raw, ptr, len, access, iova, give_back) }
    }

    /// `REG_MR` of `len` bytes at `ptr`, held as `held`; `fail` gets
    /// `held` back if registration fails.
    ///
    /// # Safety
    /// `ptr..ptr + len` keeps [`Pd::register_raw`]'s promise for as long
    /// as `held` is held.
    unsafe fn register_at<B: MrMemory>(
        &self,
        held: B::Held,
        ptr: NonNull<u8>,
        len: usize,
        access: Access,
        iova: Option<u64>,
        fail: impl FnOnce(B::Held),
    ) -> Result<Mr<B>> {
        let start = ptr.as_ptr() as u64;
        let iova = iova.unwrap_or(start);
        if let Err(e) = check_access(self, access).and_then(|()| check_span(start, len, iova)) {
            fail(held);
            return Err(e);
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
            Err(e) => {
                fail(held);
                return Err(reg_hint(e, self, access, len));
            }
        };
        Ok(Mr {
            inner: Arc::new(MrInner {
                handle: Some(r.handle),
                raw: Some(held),
                _pd: pd.clone(),
                lkey: r.lkey,
                rkey: r.rkey,
                ptr,
                // SAFETY: the memory promise (this function's contract)
                // holds while `raw` is held, which outlives every use of
                // the region (MrInner owns both); each Mr is its only way in.
                region: unsafe { shared::Region::new(ptr.as_ptr(), len) },
                windows: std::sync::Mutex::new(Vec::new()),
                iova,
                len,
                access,
            }),
        })
    }
}

/// Checks an MR's length and IOVA before `REG_MR`: not empty, the IOVA
/// with the buffer's offset in its page, and every byte's IOVA (and the
/// end of the buffer) representable, so that slicing never overflows.
fn check_span(start: u64, len: usize, iova: u64) -> Result<()> {
    if len == 0 {
        return Err(Error::invalid("registering an empty buffer"));
    }
    let page = crate::sys::page_size() as u64;
    if iova % page != start % page {
        return Err(Error::invalid(format!(
            "IOVA {iova:#x} for a buffer at {start:#x}: the IOVA must have the buffer's \
             offset in its page ({:#x})",
            start % page
        )));
    }
    if iova.checked_add(len as u64 - 1).is_none() {
        return Err(Error::invalid(format!(
            "IOVA {iova:#x} for {len} bytes: the MR's last byte would lie beyond the 64-bit \
             address space"
        )));
    }
    Ok(())
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
    let lacks = |flag: Access, has: bool, needs: &'static str| -> Result<()> {
        if access.contains(flag) && !has {
            return Err(Error::Unsupported {
                device: ctx.device().name().to_string(),
                feature: Feature::MrAccess {
                    access: flag,
                    needs,
                },
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
    let Error::Kernel { errno, .. } = &e else {
        return e;
    };
    let basic = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let extra = access - basic;
    let device = pd.inner.ctx.device.name().to_string();
    match errno.0 {
        libc::EOPNOTSUPP if !extra.is_empty() => Error::Unsupported {
            device,
            feature: Feature::MrAccessRefused {
                access: extra,
                errno: *errno,
                why: "the driver does not take these flags for MRs",
            },
        },
        libc::EINVAL if access.contains(Access::FLUSH_PERSISTENT) => Error::Unsupported {
            device,
            feature: Feature::MrAccessRefused {
                access: Access::FLUSH_PERSISTENT,
                errno: *errno,
                why: "the buffer is not persistent memory (pmem), which FLUSH to persistence \
                      needs",
            },
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
                limit: Limit::Memlock { len, limit },
            }
        }
        _ => e,
    }
}

impl<B: MrMemory> Mr<B> {
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
    /// exist or a memory window keeps it. An `Mr<External>` gives back a
    /// [`Released`] receipt rather than a buffer.
    pub fn deregister(self) -> std::result::Result<B::Back, DeregisterError<B>> {
        let mut inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            Err(inner) => {
                let windows = inner
                    .windows
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let mr = Mr { inner };
                return Err(if windows.is_empty() {
                    DeregisterError::Shared(mr)
                } else {
                    DeregisterError::Windows(mr, windows)
                });
            }
        };
        match inner.deregister() {
            Ok(Some(buf)) => Ok(buf),
            // The handle is taken only here and in Drop: this is the first.
            Ok(None) => Err(DeregisterError::Kernel(
                Mr {
                    inner: Arc::new(inner),
                },
                Error::invalid("MR already deregistered"),
            )),
            Err(e) => Err(DeregisterError::Kernel(
                Mr {
                    inner: Arc::new(inner),
                },
                e,
            )),
        }
    }

    /// `len` bytes at `offset`, checked against the MR's bounds, as an SGE
    /// in the MR's IOVA space.
    pub fn slice(&self, offset: usize, len: u32) -> Result<Slice<'_>> {
        self.check(offset, len as usize)?;
        Ok(Slice::checked(
            slice_addr(self.iova(), offset as u64)?,
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
        in_bounds(offset, len, self.inner.len)
    }

    /// `len` bytes at `offset` as atomic byte cells: zero-copy access
    /// without `unsafe`. A cell may be written by another agent at any
    /// time (the device, a peer's RDMA WRITE, another thread), so a view
    /// is sound while the device works; build a message in place with
    /// `store`s, read a received one with `load`s (`Acquire` on a flag
    /// byte a peer writes last, then `Relaxed` for the rest).
    ///
    /// Each cell reaches its byte with the access size the MR fixed for it
    /// (see [`Cells`]), the same as [`Mr::write`] and [`Mr::read`] use, so
    /// cells and copies may race from any threads without undefined
    /// behaviour (racing writers still tear each other's data).
    pub fn cells(&self, offset: usize, len: usize) -> Result<Cells<'_>> {
        self.check(offset, len)?;
        Ok(Cells::new(&self.inner.region, offset, len))
    }

    /// Copies `data` into the MR at `offset`.
    ///
    /// The copy is made of relaxed atomic stores, 8 bytes at a time except
    /// at the buffer's unaligned ends: two threads copying into and out of
    /// the same bytes, or the device writing them meanwhile (a peer's RDMA
    /// WRITE), give torn data, never undefined behaviour — `Mr` is `Sync`
    /// and no reference to plain bytes of the buffer exists. On x86_64
    /// these are plain moves (and a `lock cmpxchg` for each 8-byte word
    /// the range covers only in part).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        self.inner.region.write(offset, data);
        Ok(())
    }

    /// Copies bytes at `offset` out of the MR into `out` (relaxed atomic
    /// loads; see [`Mr::write`]).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        self.inner.region.read(offset, out);
        Ok(())
    }

    /// Reads the byte at `offset` with an acquire load: for spinning on a
    /// byte a peer's RDMA WRITE will change (a plain copy could be hoisted
    /// out of the loop by the compiler).
    pub fn read_volatile_u8(&self, offset: usize) -> Result<u8> {
        self.check(offset, 1)?;
        Ok(self
            .inner
            .region
            .load_u8(offset, std::sync::atomic::Ordering::Acquire))
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
        self.inner.region.fill(offset, len, byte);
        Ok(())
    }

    /// A raw pointer to the buffer, for zero-copy users.
    ///
    /// # Safety
    /// The caller must not create references to the memory while the device
    /// may access it, must not race this `Mr`'s own accesses (its copies
    /// and cells) with accesses of another size (Rust leaves that
    /// undefined), and must not use the pointer after the last clone of
    /// this `Mr` is dropped.
    pub unsafe fn as_ptr(&self) -> *mut u8 {
        self.base()
    }

    /// Notes that the window with index `index` keeps this MR until it is
    /// deallocated; the guard undoes it.
    pub(crate) fn held_by_window(&self, index: u32) -> WindowHold<B> {
        let mut w = self.inner.windows.lock().unwrap_or_else(|p| p.into_inner());
        w.push(index);
        WindowHold {
            mr: self.inner.clone(),
            index,
        }
    }
}

/// A memory window's reference to an MR (see [`Mr::held_by_window`]).
pub(crate) struct WindowHold<B: MrMemory> {
    mr: Arc<MrInner<B>>,
    index: u32,
}

impl<B: MrMemory> Drop for WindowHold<B> {
    fn drop(&mut self) {
        let mut w = self.mr.windows.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = w.iter().position(|&x| x == self.index) {
            w.swap_remove(i);
        }
    }
}

/// Whether `offset..offset + len` lies inside `size` bytes (overflow
/// included), or the error that says where it does not.
/// The IOVA of a slice at `offset` (in bounds) of an MR at `iova`. Every
/// byte's fits (check_span), but an empty slice at the very end of an MR
/// that ends at 2^64 has no address: refused, not wrapped or panicked.
pub(crate) fn slice_addr(iova: u64, offset: u64) -> Result<u64> {
    iova.checked_add(offset).ok_or_else(|| {
        Error::invalid(format!(
            "an empty slice at offset {offset} of an MR ending at 2^64 has no address"
        ))
    })
}

fn in_bounds(offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::invalid(format!(
            "range {offset}+{len} is outside the {size}-byte MR"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Errno;

    /// An ENOMEM from REG_MR under a finite RLIMIT_MEMLOCK names the limit;
    /// other errors pass through untouched.
    #[test]
    #[cfg_attr(miri, ignore)] // setrlimit: a system call Miri does not run
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
            matches!(&e, Error::ResourceLimit { limit: Limit::Memlock { len: 1_048_576, .. }, .. }
                if e.to_string().contains("RLIMIT_MEMLOCK")),
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

    /// An IOVA whose MR would run past the end of the 64-bit space is
    /// refused before REG_MR, so that no slice or bind address of the MR
    /// can overflow (issue 25, item 5: `register_iova` near `u64::MAX`,
    /// then `slice()`, panicked in debug builds and wrapped in release).
    #[test]
    fn an_iova_span_past_u64_max_is_refused() {
        let page = crate::sys::page_size() as u64;
        let top = u64::MAX - (page - 1); // the last page
        assert!(check_span(0x10000, page as usize, top).is_ok());
        let e = check_span(0x10000, page as usize + 1, top).unwrap_err();
        assert!(e.to_string().contains("64-bit"), "{e}");
        assert!(check_span(0x10000, 2 * page as usize, top).is_err());
        assert!(check_span(0x10000, 0, 0).is_err());
        assert!(check_span(0x10001, 1, 0x2000).is_err());
        // The largest offset a non-empty slice of an accepted span can
        // take is len - 1 from the IOVA: it fits; an empty one at len does
        // not, and is refused by name.
        assert_eq!(slice_addr(top, page - 1).unwrap(), u64::MAX);
        let e = slice_addr(top, page).unwrap_err();
        assert!(e.to_string().contains("2^64"), "{e}");
    }

    /// Bounds checks do not overflow on huge offsets or lengths.
    #[test]
    fn ranges_outside_the_mr_are_refused_without_overflow() {
        assert!(in_bounds(0, 64, 64).is_ok());
        assert!(in_bounds(64, 0, 64).is_ok());
        assert!(in_bounds(63, 2, 64).is_err());
        assert!(in_bounds(usize::MAX, 2, 64).is_err());
        assert!(in_bounds(1, usize::MAX, 64).is_err());
    }
}

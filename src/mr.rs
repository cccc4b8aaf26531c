//! Memory regions (`REG_MR` / `DEREG_MR`), and the soundness rule for
//! memory the device can touch.
//!
//! # Why MR memory is never a Rust reference
//! Once registered, a buffer can be read or written by the device at any
//! time: by a local work request until its completion is polled, and by any
//! peer holding the rkey (RDMA WRITE/READ, atomics) for as long as the MR
//! exists. No `&[u8]` or `&mut [u8]` into such memory can be sound, so the
//! safe API never creates one. An [`Mr`] owns its buffer — a private
//! anonymous mapping made for it — and offers copies in and out
//! ([`Mr::write`], [`Mr::read`]) through raw pointers, as one treats memory
//! shared with another process. Work requests name memory as
//! ([`Mr`], offset, length) triples checked against the MR's bounds
//! ([`Mr::slice`]).
//!
//! The buffer is unmapped only after `DEREG_MR` has succeeded: from then on
//! the kernel grants no new access through the keys, and pages it still has
//! pinned for an access in flight are no longer mapped in this process, so
//! the device can never write into memory this process reuses.

use crate::cmd::{self, mr::MrHandle};
use crate::error::{Error, Result};
use crate::pd::{Pd, PdInner};
use bitflags::bitflags;
use std::sync::Arc;

pub use crate::wr::Slice;

bitflags! {
    /// MR access rights (`IB_UVERBS_ACCESS_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access: u32 {
        /// The local device may write (needed for receives, READ, atomics).
        const LOCAL_WRITE = 1;
        /// Peers may RDMA WRITE.
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// Peers may perform atomics.
        const REMOTE_ATOMIC = 1 << 3;
    }
}

/// A registered memory region that owns its buffer.
#[derive(Clone)]
pub struct Mr {
    pub(crate) inner: Arc<MrInner>,
}

pub(crate) struct MrInner {
    /// DEREG_MR on drop, then the buffer is unmapped (it keeps it; see the
    /// module docs). Dropped before the PD.
    _handle: MrHandle,
    _pd: Arc<PdInner>,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    /// The buffer's address (mapped while `handle` lives).
    addr: u64,
    len: usize,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.inner.len)
            .field("lkey", &self.inner.lkey)
            .field("rkey", &self.inner.rkey)
            .finish()
    }
}

impl Pd {
    /// Allocates `len` bytes of zeroed, page-aligned memory and registers it
    /// (`REG_MR`) with `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        // The kernel rejects remote write or atomic access without local
        // write (IB spec); say so before asking it.
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(Error::invalid(format!(
                "MR access {access:?}: remote write and atomic access need LOCAL_WRITE"
            )));
        }
        let mem = crate::netlink::device_memory("mmap of MR memory", len)?;
        let start = mem.as_ptr().as_ptr() as u64;
        let pd = &self.inner;
        let mut r = cmd::mr::reg(
            &pd.ctx.dev,
            pd.handle.raw(),
            start,
            len as u64,
            access.bits(),
        )
        .map_err(|e| memlock_hint(e, len))?;
        r.handle.keep(mem);
        Ok(Mr {
            inner: Arc::new(MrInner {
                _handle: r.handle,
                _pd: pd.clone(),
                lkey: r.lkey,
                rkey: r.rkey,
                addr: start,
                len,
            }),
        })
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

impl Mr {
    fn base(&self) -> *mut u8 {
        // The mapping made in alloc_mr, kept by the control half for as
        // long as this Mr exists.
        self.inner.addr as usize as *mut u8
    }

    /// The buffer's address (what peers use with the rkey).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.inner.addr
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

    /// `len` bytes at `offset`, checked against the MR's bounds.
    pub fn slice(&self, offset: usize, len: u32) -> Result<Slice<'_>> {
        self.check(offset, len as usize)?;
        Ok(Slice::checked(
            self.addr() + offset as u64,
            len,
            self.inner.lkey,
        ))
    }

    /// The whole MR (its length must fit an SGE's 32 bits).
    pub fn all(&self) -> Result<Slice<'_>> {
        let len = u32::try_from(self.inner.len)
            .map_err(|_| Error::invalid("MR longer than 4 GiB: use slice()"))?;
        Ok(Slice::checked(self.addr(), len, self.inner.lkey))
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

    /// Copies `data` into the MR at `offset`.
    ///
    /// The copy is made of relaxed atomic stores (8 bytes at a time where
    /// aligned): two threads copying into and out of the same bytes, or
    /// the device writing them meanwhile (a peer's RDMA WRITE), give torn
    /// data, never undefined behaviour — `Mr` is `Sync` and no reference
    /// to the buffer exists. On x86_64 these are plain moves.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: offset + len is inside the mapping (check above), which
        // lives as long as self and is only ever accessed atomically
        // through the safe API.
        unsafe { shared::copy_in(self.base().add(offset), data) };
        Ok(())
    }

    /// Copies bytes at `offset` out of the MR into `out` (relaxed atomic
    /// loads; see [`Mr::write`]).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: as in write(): in bounds of the live mapping.
        unsafe { shared::copy_out(self.base().add(offset), out) };
        Ok(())
    }

    /// Reads the byte at `offset` with an acquire load: for spinning on a
    /// byte a peer's RDMA WRITE will change (a plain copy could be hoisted
    /// out of the loop by the compiler).
    pub fn read_volatile_u8(&self, offset: usize) -> Result<u8> {
        self.check(offset, 1)?;
        // SAFETY: in bounds of the live mapping (check above); a u8 needs
        // no alignment, and every safe access to the buffer is atomic.
        let b = unsafe { std::sync::atomic::AtomicU8::from_ptr(self.base().add(offset)) };
        Ok(b.load(std::sync::atomic::Ordering::Acquire))
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
        // SAFETY: in bounds of the live mapping (check above).
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

/// Copies in and out of memory other threads and the device may access at
/// the same time: every access is a relaxed atomic, 8 bytes at a time
/// between the unaligned edges.
mod shared {
    use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};

    /// Splits `len` bytes at `p` into a byte-wise head, 8-byte words and a
    /// byte-wise tail.
    fn split(p: *const u8, len: usize) -> (usize, usize, usize) {
        let head = p.align_offset(8).min(len);
        let words = (len - head) / 8;
        (head, words, len - head - words * 8)
    }

    /// # Safety
    /// `dst..dst + src.len()` is inside a live mapping that is accessed
    /// only atomically while this runs.
    pub(super) unsafe fn copy_in(dst: *mut u8, src: &[u8]) {
        let (head, words, _) = split(dst, src.len());
        let mut i = 0;
        while i < src.len() {
            // SAFETY: dst + i is inside the range (the caller's contract);
            // in the word run dst + i is 8-aligned (split) and i + 8 <=
            // head + words * 8 <= len.
            unsafe {
                if i >= head && i < head + words * 8 {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&src[i..i + 8]);
                    AtomicU64::from_ptr(dst.add(i).cast()).store(u64::from_ne_bytes(w), Relaxed);
                    i += 8;
                } else {
                    AtomicU8::from_ptr(dst.add(i)).store(src[i], Relaxed);
                    i += 1;
                }
            }
        }
    }

    /// # Safety
    /// As for [`copy_in`], for `src..src + dst.len()`.
    pub(super) unsafe fn copy_out(src: *mut u8, dst: &mut [u8]) {
        let (head, words, _) = split(src, dst.len());
        let mut i = 0;
        while i < dst.len() {
            // SAFETY: as in copy_in.
            unsafe {
                if i >= head && i < head + words * 8 {
                    let w = AtomicU64::from_ptr(src.add(i).cast()).load(Relaxed);
                    dst[i..i + 8].copy_from_slice(&w.to_ne_bytes());
                    i += 8;
                } else {
                    dst[i] = AtomicU8::from_ptr(src.add(i)).load(Relaxed);
                    i += 1;
                }
            }
        }
    }

    /// # Safety
    /// As for [`copy_in`], for `dst..dst + len`.
    pub(super) unsafe fn fill(dst: *mut u8, len: usize, byte: u8) {
        let (head, words, _) = split(dst, len);
        let word = u64::from_ne_bytes([byte; 8]);
        let mut i = 0;
        while i < len {
            // SAFETY: as in copy_in.
            unsafe {
                if i >= head && i < head + words * 8 {
                    AtomicU64::from_ptr(dst.add(i).cast()).store(word, Relaxed);
                    i += 8;
                } else {
                    AtomicU8::from_ptr(dst.add(i)).store(byte, Relaxed);
                    i += 1;
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Every alignment and length around a few words: what goes in
        /// comes out, and nothing outside the range is touched.
        #[test]
        fn copies_match_at_every_alignment() {
            let mut buf = vec![0u64; 8]; // 64 bytes, 8-aligned
            let base = buf.as_mut_ptr().cast::<u8>();
            for off in 0..9 {
                for len in 0..30 {
                    let src: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(7) | 1).collect();
                    // SAFETY: off + len <= 39 < 64 bytes of `buf`, used
                    // only here.
                    unsafe {
                        fill(base, 64, 0xee);
                        copy_in(base.add(off), &src);
                        let mut out = vec![0u8; len];
                        copy_out(base.add(off), &mut out);
                        assert_eq!(out, src, "off {off} len {len}");
                        let mut all = vec![0u8; 64];
                        copy_out(base, &mut all);
                        assert!(all[..off].iter().all(|&b| b == 0xee));
                        assert!(all[off + len..].iter().all(|&b| b == 0xee));
                    }
                }
            }
        }
    }
}

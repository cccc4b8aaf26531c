//! Memory the model shares with the provider, and registered regions.
//!
//! Everything the provider and the model both touch is a [`SharedBuf`]: a
//! raw allocation accessed only through its raw pointer (never through a
//! Rust reference), so the provider's pointers and the model's reads and
//! writes never invalidate one another.
#![allow(unsafe_code)] // the allocation itself; each block says why it is sound

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// A zeroed, aligned allocation shared with the provider.
pub struct SharedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl SharedBuf {
    /// `len` zero bytes aligned to `align`.
    pub fn new(len: usize, align: usize) -> SharedBuf {
        let layout = Layout::from_size_align(len.max(1), align).unwrap();
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        SharedBuf {
            ptr: NonNull::new(p).expect("allocation"),
            layout,
        }
    }

    /// The base pointer, for the provider.
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// The base as a u32 pointer (doorbell records).
    pub fn ptr32(&self) -> NonNull<u32> {
        self.ptr.cast()
    }

    /// The base address (for SGEs).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    // Never 0 (`new` allocates at least one byte), so no `is_empty`.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Copies `dst.len()` bytes from `off`.
    pub fn read_into(&self, off: usize, dst: &mut [u8]) {
        assert!(off + dst.len() <= self.len(), "model read out of bounds");
        // SAFETY: in bounds (asserted); single-threaded tests, so no
        // concurrent writer.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// `n` bytes from `off`.
    pub fn read(&self, off: usize, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.read_into(off, &mut v);
        v
    }

    /// Writes `src` at `off`.
    pub fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len(), "model write out of bounds");
        // SAFETY: in bounds (asserted); no concurrent access.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        }
    }

    /// Fills `n` bytes at `off` with `b`.
    pub fn fill(&self, off: usize, n: usize, b: u8) {
        self.write(off, &vec![b; n]);
    }

    /// A big-endian u16 at `off`.
    pub fn be16(&self, off: usize) -> u16 {
        u16::from_be_bytes(self.read(off, 2).try_into().unwrap())
    }

    /// A big-endian u32 at `off`.
    pub fn be32(&self, off: usize) -> u32 {
        u32::from_be_bytes(self.read(off, 4).try_into().unwrap())
    }
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Access rights of a region (`IBV_ACCESS_*`, local read always allowed).
pub mod access {
    pub const LOCAL_WRITE: u8 = 1;
    pub const REMOTE_WRITE: u8 = 2;
    pub const REMOTE_READ: u8 = 4;
    pub const REMOTE_ATOMIC: u8 = 8;
    pub const ALL: u8 = 15;
}

/// A registered memory region.
pub struct Mr {
    pub buf: SharedBuf,
    pub lkey: u32,
    pub rkey: u32,
    pub access: u8,
}

/// Every region of the model.
#[derive(Default)]
pub struct Memory {
    pub mrs: Vec<Mr>,
}

impl Memory {
    /// Registers a new zeroed region of `len` bytes; returns its index.
    pub fn reg(&mut self, len: usize, access: u8) -> usize {
        let i = self.mrs.len() as u32;
        self.mrs.push(Mr {
            buf: SharedBuf::new(len, 64),
            lkey: 0x1000 | i << 4 | 1,
            rkey: 0x2000 | i << 4 | 2,
            access,
        });
        i as usize
    }

    /// Finds the region `key` names (as an lkey or an rkey) and checks that
    /// `addr..addr + len` lies inside it with `need` rights. Returns the
    /// region and the offset.
    pub fn check(
        &self,
        key: u32,
        remote: bool,
        addr: u64,
        len: usize,
        need: u8,
    ) -> Option<(&Mr, usize)> {
        let mr = self
            .mrs
            .iter()
            .find(|m| if remote { m.rkey == key } else { m.lkey == key })?;
        let off = addr.checked_sub(mr.buf.addr())? as usize;
        if off.checked_add(len)? > mr.buf.len() || mr.access & need != need {
            return None;
        }
        Some((mr, off))
    }
}

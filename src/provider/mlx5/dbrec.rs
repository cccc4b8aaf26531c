//! Doorbell records: the few bytes per CQ, QP and SRQ that the device reads
//! (and, for CQs, software writes the consumer index into), carved as
//! 64-byte slots out of pages the context keeps (rdma-core's
//! `mlx5_alloc_dbrec`). The kernel pins the page of each record it is
//! given (`mlx5_ib_db_map_user`, once per page and context), so sharing
//! pages keeps the pinned memory to a page per 64 objects instead of a page
//! per object; a slot per cache line keeps objects driven from different
//! threads off each other's lines.

use crate::error::Result;
use crate::sys::Mapping;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Bytes per record slot: a cache line.
pub(crate) const SLOT: usize = 64;

/// The context's record pages and free slots.
pub(crate) struct DbPool {
    page_size: usize,
    inner: Mutex<Pool>,
}

struct Pool {
    /// Never unmapped before the pool itself goes (every record holds it).
    pages: Vec<Mapping>,
    /// Addresses of free slots.
    free: Vec<usize>,
}

/// One record slot, returned to the pool on drop. Drop it only after the
/// kernel destroyed the object using it; forget it if the kernel refused.
pub(crate) struct DbRecord {
    ptr: NonNull<u8>,
    pool: Arc<DbPool>,
}

// SAFETY: a DbRecord is the exclusive owner of its slot (taken from the
// free list under the lock, put back on drop); it only hands out the
// address, and the pool's pages stay mapped while it holds the pool.
unsafe impl Send for DbRecord {}
// SAFETY: as above; &DbRecord only gives the address.
unsafe impl Sync for DbRecord {}

impl DbPool {
    pub(crate) fn new(page_size: usize) -> DbPool {
        DbPool {
            page_size,
            inner: Mutex::new(Pool {
                pages: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    /// A zeroed record slot (the queues start with both words at 0, as
    /// rdma-core sets them before the create command).
    pub(crate) fn alloc(self: &Arc<DbPool>) -> Result<DbRecord> {
        let mut p = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if p.free.is_empty() {
            let page = Mapping::for_device("mlx5 doorbell record page", self.page_size)?;
            let base = page.as_ptr().as_ptr() as usize;
            // Handed out from the page's start.
            p.free
                .extend((0..self.page_size / SLOT).rev().map(|i| base + i * SLOT));
            p.pages.push(page);
        }
        let addr = p.free.pop().expect("a page was just added");
        drop(p);
        let ptr = NonNull::new(addr as *mut u8).expect("mapped addresses are not null");
        // SAFETY: the slot is SLOT bytes inside a mapped page of the pool,
        // ours alone (just taken from the free list), and no kernel object
        // uses it (its last user was destroyed before the slot came back).
        unsafe { ptr.as_ptr().write_bytes(0, SLOT) };
        Ok(DbRecord {
            ptr,
            pool: self.clone(),
        })
    }
}

impl DbRecord {
    /// The record's address (64-byte aligned, `SLOT` bytes).
    pub(crate) fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for DbRecord {
    fn drop(&mut self) {
        let mut p = self.pool.inner.lock().unwrap_or_else(|e| e.into_inner());
        p.free.push(self.ptr.as_ptr() as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_aligned_zeroed_and_reused() {
        let pool = Arc::new(DbPool::new(4096));
        let recs: Vec<DbRecord> = (0..70).map(|_| pool.alloc().unwrap()).collect();
        let mut addrs: Vec<usize> = recs.iter().map(|r| r.as_ptr().as_ptr() as usize).collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert_eq!(addrs.len(), 70, "no slot handed out twice");
        assert!(addrs.iter().all(|a| a % SLOT == 0));
        assert_eq!(pool.inner.lock().unwrap().pages.len(), 2, "64 per page");
        let last = recs[69].as_ptr();
        // SAFETY: the slot is ours and mapped.
        unsafe { last.as_ptr().write_bytes(0xab, SLOT) };
        drop(recs); // in order: slot 69 is freed last
        let again = pool.alloc().unwrap();
        assert_eq!(again.as_ptr(), last, "the most recently freed slot first");
        let bytes: Vec<u8> = (0..SLOT)
            // SAFETY: inside the slot, which is ours.
            .map(|i| unsafe { again.as_ptr().as_ptr().add(i).read() })
            .collect();
        assert!(bytes.iter().all(|&b| b == 0));
        assert_eq!(
            pool.inner.lock().unwrap().pages.len(),
            2,
            "pages are reused"
        );
    }
}

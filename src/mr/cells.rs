//! A view of MR bytes as atomic cells ([`Mr::cells`](super::Mr::cells)).
//!
//! Not `&[AtomicU8]`: the MR reaches most of its bytes as 8-byte words
//! (see `shared`), and a byte-sized access racing a word-sized one is
//! undefined in Rust. A cell reaches its byte the way the MR fixed for it
//! — a byte atomic at the buffer's unaligned ends, an 8-byte atomic (a
//! compare-and-swap for a store) inside — so cells, copies and other
//! threads' cells can all race soundly.

use super::shared::Region;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

/// `len` bytes of an MR as atomic cells, borrowed from the MR.
#[derive(Clone, Copy)]
pub struct Cells<'a> {
    region: Region,
    start: usize,
    len: usize,
    _mr: PhantomData<&'a ()>,
}

impl std::fmt::Debug for Cells<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cells")
            .field("offset", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl<'a> Cells<'a> {
    /// `start..start + len` of `region`, which the caller checked, for as
    /// long as `'a` borrows the MR that owns the region.
    pub(super) fn new(region: &'a Region, start: usize, len: usize) -> Cells<'a> {
        debug_assert!(start + len <= region.len());
        Cells {
            region: *region,
            start,
            len,
            _mr: PhantomData,
        }
    }

    /// The number of cells.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cell at `i`, if `i < len`.
    pub fn get(&self, i: usize) -> Option<ByteCell<'a>> {
        (i < self.len).then(|| ByteCell {
            region: self.region,
            at: self.start + i,
            _mr: PhantomData,
        })
    }

    /// The cells in order.
    pub fn iter(&self) -> CellIter<'a> {
        CellIter {
            cells: *self,
            next: 0,
        }
    }
}

impl<'a> IntoIterator for Cells<'a> {
    type Item = ByteCell<'a>;
    type IntoIter = CellIter<'a>;
    fn into_iter(self) -> CellIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Cells<'a> {
    type Item = ByteCell<'a>;
    type IntoIter = CellIter<'a>;
    fn into_iter(self) -> CellIter<'a> {
        self.iter()
    }
}

/// The cells of a [`Cells`] in order.
#[derive(Debug, Clone)]
pub struct CellIter<'a> {
    cells: Cells<'a>,
    next: usize,
}

impl<'a> Iterator for CellIter<'a> {
    type Item = ByteCell<'a>;
    fn next(&mut self) -> Option<ByteCell<'a>> {
        let c = self.cells.get(self.next)?;
        self.next += 1;
        Some(c)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.cells.len - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for CellIter<'_> {}

/// One byte of an MR, reached atomically.
#[derive(Clone, Copy)]
pub struct ByteCell<'a> {
    region: Region,
    at: usize,
    _mr: PhantomData<&'a ()>,
}

impl std::fmt::Debug for ByteCell<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ByteCell({:#04x})", self.load(Ordering::Relaxed))
    }
}

impl ByteCell<'_> {
    /// Loads the byte (`Relaxed`, `Acquire` or `SeqCst`).
    ///
    /// # Panics
    /// With `Release` or `AcqRel`, as `AtomicU8::load` does.
    #[inline]
    pub fn load(&self, order: Ordering) -> u8 {
        self.region.load_u8(self.at, order)
    }

    /// Stores the byte (`Relaxed`, `Release` or `SeqCst`).
    ///
    /// # Panics
    /// With `Acquire` or `AcqRel`, as `AtomicU8::store` does.
    #[inline]
    pub fn store(&self, v: u8, order: Ordering) {
        assert!(
            !matches!(order, Ordering::Acquire | Ordering::AcqRel),
            "there is no such ordering for an atomic store"
        );
        self.region.store_u8(self.at, v, order)
    }
}

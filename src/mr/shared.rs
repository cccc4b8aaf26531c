//! Copies in and out of memory that other threads and the device may
//! access at the same time.
//!
//! # One access size per byte, fixed by the buffer
//! Rust's memory model (C++20's) leaves racing atomic accesses of
//! different sizes to the same bytes undefined, unless both are reads. An
//! `Mr` is `Clone + Sync`, so two threads may copy into overlapping,
//! differently aligned ranges at once; if each copy chose its own access
//! sizes from its own range (8 bytes where *its* range is aligned, bytes
//! at *its* edges), they would mix sizes. So the size is chosen by the
//! buffer, never by the access: every 8-byte word that lies wholly inside
//! the buffer (an *interior word*) is only ever accessed as one
//! `AtomicU64`, and the few bytes before the first and after the last
//! interior word (the *edges*, fewer than 8 at each end) only ever as
//! `AtomicU8`. A copy that covers part of an interior word merges its
//! bytes into the word with a compare-and-swap, so it too is an 8-byte
//! access. Any two accesses the safe API makes to the same byte then have
//! the same size and address.
//!
//! The device is not a Rust thread: its writes are like another process's
//! through shared memory, which atomics admit at any time.
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering, Ordering::Relaxed};

const W: usize = 8;

/// A buffer's bytes and the geometry that fixes each byte's access size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    base: *mut u8,
    len: usize,
    /// Offsets of the first interior word and of the end of the last
    /// (equal when there is none).
    words: (usize, usize),
}

impl Region {
    /// The region of `len` bytes at `base`.
    ///
    /// # Safety
    /// `base..base + len` is live memory, for as long as the region (and
    /// every copy of it) is used, that Rust reaches only through regions
    /// made with this same `base` and `len` (so every access agrees on the
    /// geometry) or by reads and writes that cannot race with them.
    pub(crate) unsafe fn new(base: *mut u8, len: usize) -> Region {
        let head = base.align_offset(W).min(len);
        let n = (len - head) / W;
        Region {
            base,
            len,
            words: (head, head + n * W),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at >= self.words.0 && at + W <= self.words.1 && at % W == self.words.0 % W);
        // SAFETY: `at` starts an interior word (callers step through
        // `words` in whole words), which is inside the live buffer and
        // 8-aligned (`new`); every access to it is this 8-byte atomic.
        unsafe { AtomicU64::from_ptr(self.base.add(at).cast()) }
    }

    fn byte(&self, at: usize) -> &AtomicU8 {
        debug_assert!(at < self.len && (at < self.words.0 || at >= self.words.1));
        // SAFETY: `at` is an edge byte inside the live buffer (callers
        // pass only offsets outside `words`), only ever accessed as this
        // 1-byte atomic.
        unsafe { AtomicU8::from_ptr(self.base.add(at)) }
    }

    /// How `at..at + n` (inside the region, checked by the caller) splits
    /// into access units: edge bytes before the interior words, a part of
    /// the first word, whole words, a part of the last word, edge bytes
    /// after.
    #[inline(always)]
    fn plan(&self, at: usize, n: usize) -> Plan {
        let end = at + n;
        let (w0, w1) = self.words;
        let mut p = Plan {
            pre: at..end.min(w0).max(at),
            head: None,
            words: 0..0,
            tail: None,
            post: at.max(w1).min(end)..end,
        };
        // The part among the interior words.
        let (mut i, stop) = (at.max(w0), end.min(w1));
        if i >= stop {
            return p;
        }
        let lo = (i - w0) % W;
        if lo != 0 || stop - i < W {
            let start = i - lo;
            let hi = (stop - start).min(W);
            p.head = Some((start, lo, hi));
            i = start + hi;
        }
        let whole = stop.saturating_sub(i) / W * W;
        p.words = i..i + whole;
        i += whole;
        if i < stop {
            p.tail = Some((i, 0, stop - i));
        }
        p
    }

    /// Calls `f` for each access unit overlapping `at..at + n`, in order
    /// (the plan unrolled: for tests).
    #[cfg(test)]
    fn units(&self, at: usize, n: usize, mut f: impl FnMut(Unit)) {
        let p = self.plan(at, n);
        p.pre.for_each(|o| f(Unit::Byte(o)));
        if let Some((o, lo, hi)) = p.head {
            f(Unit::Word(o, lo, hi));
        }
        p.words.step_by(W).for_each(|o| f(Unit::Word(o, 0, W)));
        if let Some((o, lo, hi)) = p.tail {
            f(Unit::Word(o, lo, hi));
        }
        p.post.for_each(|o| f(Unit::Byte(o)));
    }

    /// Copies `src` in at `at` (relaxed).
    pub(crate) fn write(&self, at: usize, src: &[u8]) {
        let p = self.plan(at, src.len());
        let (pre, s) = src.split_at(p.pre.len());
        for (o, b) in p.pre.zip(pre) {
            self.byte(o).store(*b, Relaxed);
        }
        let s = match p.head {
            Some((o, lo, hi)) => {
                let (part, rest) = s.split_at(hi - lo);
                merge(self.word(o), lo, part, Relaxed);
                rest
            }
            None => s,
        };
        let (whole, s) = s.split_at(p.words.len());
        for (k, w) in whole.chunks_exact(W).enumerate() {
            let v = u64::from_ne_bytes(w.try_into().unwrap_or([0; W]));
            self.word(p.words.start + k * W).store(v, Relaxed);
        }
        let s = match p.tail {
            Some((o, lo, hi)) => {
                let (part, rest) = s.split_at(hi - lo);
                merge(self.word(o), lo, part, Relaxed);
                rest
            }
            None => s,
        };
        for (o, b) in p.post.zip(s) {
            self.byte(o).store(*b, Relaxed);
        }
    }

    /// Copies out from `at` into `dst` (relaxed).
    pub(crate) fn read(&self, at: usize, dst: &mut [u8]) {
        let p = self.plan(at, dst.len());
        let (pre, d) = dst.split_at_mut(p.pre.len());
        for (o, b) in p.pre.zip(pre) {
            *b = self.byte(o).load(Relaxed);
        }
        let d = match p.head {
            Some((o, lo, hi)) => {
                let (part, rest) = d.split_at_mut(hi - lo);
                part.copy_from_slice(&self.word(o).load(Relaxed).to_ne_bytes()[lo..hi]);
                rest
            }
            None => d,
        };
        let (whole, d) = d.split_at_mut(p.words.len());
        for (k, w) in whole.chunks_exact_mut(W).enumerate() {
            let v = self.word(p.words.start + k * W).load(Relaxed);
            w.copy_from_slice(&v.to_ne_bytes());
        }
        let d = match p.tail {
            Some((o, lo, hi)) => {
                let (part, rest) = d.split_at_mut(hi - lo);
                part.copy_from_slice(&self.word(o).load(Relaxed).to_ne_bytes()[lo..hi]);
                rest
            }
            None => d,
        };
        for (o, b) in p.post.zip(d) {
            *b = self.byte(o).load(Relaxed);
        }
    }

    /// Stores `byte` at `at..at + n` (relaxed).
    pub(crate) fn fill(&self, at: usize, n: usize, byte: u8) {
        let p = self.plan(at, n);
        let all = [byte; W];
        for o in p.pre.chain(p.post) {
            self.byte(o).store(byte, Relaxed);
        }
        for (o, lo, hi) in p.head.into_iter().chain(p.tail) {
            merge(self.word(o), lo, &all[..hi - lo], Relaxed);
        }
        let v = u64::from_ne_bytes(all);
        for o in p.words.step_by(W) {
            self.word(o).store(v, Relaxed);
        }
    }

    /// The byte at `at` (< len), loaded with `order`.
    pub(crate) fn load_u8(&self, at: usize, order: Ordering) -> u8 {
        let (w0, w1) = self.words;
        if at < w0 || at >= w1 {
            return self.byte(at).load(order);
        }
        let start = at - (at - w0) % W;
        self.word(start).load(order).to_ne_bytes()[at - start]
    }

    /// Stores `v` at `at` (< len) with `order` (a store ordering).
    pub(crate) fn store_u8(&self, at: usize, v: u8, order: Ordering) {
        let (w0, w1) = self.words;
        if at < w0 || at >= w1 {
            return self.byte(at).store(v, order);
        }
        let start = at - (at - w0) % W;
        merge(self.word(start), at - start, &[v], order);
    }
}

// SAFETY: a Region is an address range that every user reaches only
// through atomics (`new`'s contract); it owns nothing and is tied to no
// thread.
unsafe impl Send for Region {}
// SAFETY: as for Send: &Region gives out only atomic accesses.
unsafe impl Sync for Region {}

/// How a range splits into access units (see [`Region::plan`]): offsets
/// of edge bytes, `(word start, lo, hi)` for a word the range covers only
/// bytes `lo..hi` of, and the span of whole words.
struct Plan {
    pre: std::ops::Range<usize>,
    head: Option<(usize, usize, usize)>,
    words: std::ops::Range<usize>,
    tail: Option<(usize, usize, usize)>,
    post: std::ops::Range<usize>,
}

/// One access unit of a copy, for the tests (see [`Region::units`]).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Byte(usize),
    Word(usize, usize, usize),
}

/// Replaces bytes `lo..lo + part.len()` of `word` and keeps the others,
/// as one 8-byte atomic read-modify-write.
#[inline]
fn merge(word: &AtomicU64, lo: usize, part: &[u8], order: Ordering) {
    let _ = word.fetch_update(order, Relaxed, |cur| {
        let mut b = cur.to_ne_bytes();
        b[lo..lo + part.len()].copy_from_slice(part);
        Some(u64::from_ne_bytes(b))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A heap buffer of 8-aligned words, viewed as bytes from `skew` on.
    fn region(words: &mut [u64], skew: usize, len: usize) -> Region {
        assert!(skew + len <= words.len() * W);
        // SAFETY: skew + len bytes lie inside `words`, which the test keeps
        // alive and reaches only through this region.
        unsafe { Region::new(words.as_mut_ptr().cast::<u8>().add(skew), len) }
    }

    /// Every buffer alignment, range start and length around a few words:
    /// what goes in comes out, nothing outside the range is touched, and
    /// byte loads and stores agree with the copies.
    #[test]
    fn copies_match_at_every_alignment() {
        let mut buf = vec![0u64; 8];
        let (skews, offs, lens) = if cfg!(miri) { (2, 9, 17) } else { (8, 17, 30) };
        for skew in 0..skews {
            let r = region(&mut buf, skew, 56);
            for off in 0..offs {
                for len in 0..lens.min(56 - off) {
                    let src: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(7) | 1).collect();
                    r.fill(0, 56, 0xee);
                    r.write(off, &src);
                    let mut out = vec![0u8; len];
                    r.read(off, &mut out);
                    assert_eq!(out, src, "skew {skew} off {off} len {len}");
                    let mut all = vec![0u8; 56];
                    r.read(0, &mut all);
                    assert!(all[..off].iter().all(|&b| b == 0xee));
                    assert!(all[off + len..].iter().all(|&b| b == 0xee));
                    for (i, b) in src.iter().enumerate() {
                        assert_eq!(r.load_u8(off + i, Relaxed), *b);
                    }
                    if len > 0 {
                        r.store_u8(off, 0x5a, Relaxed);
                        let mut one = [0u8; 1];
                        r.read(off, &mut one);
                        assert_eq!(one[0], 0x5a);
                    }
                }
            }
        }
    }

    /// The units of any range cover it exactly once, in order, and every
    /// byte is reached by one unit kind whatever range reaches it.
    #[test]
    fn every_byte_has_one_access_size_whatever_the_range() {
        let mut buf = vec![0u64; 8];
        // Under Miri (minutes otherwise): fewer skews over a shorter buffer.
        let (skews, len) = if cfg!(miri) { (3, 21) } else { (8, 45) };
        for skew in 0..skews {
            let r = region(&mut buf, skew, len);
            let mut kind = vec![None; len];
            for at in 0..len {
                for n in 0..=len - at {
                    let mut next = at;
                    r.units(at, n, |u| {
                        let (first, count, k) = match u {
                            Unit::Byte(o) => (o, 1, (1, o)),
                            Unit::Word(o, lo, hi) => (o + lo, hi - lo, (8, o)),
                        };
                        assert_eq!(first, next, "skew {skew} at {at} n {n}");
                        for b in first..first + count {
                            let seen = kind[b].get_or_insert(k);
                            assert_eq!(*seen, k, "byte {b}: two access sizes");
                        }
                        next = first + count;
                    });
                    assert_eq!(next, at + n);
                }
            }
        }
    }

    /// Two threads copy into overlapping, differently aligned ranges at
    /// once, and a third reads across both (the trigger of issue 25's
    /// item 2: `mr.write(0, &[0; 16])` racing `mr.write(4, &[1; 8])`).
    /// Under Miri this fails if any two of the racing accesses differ in
    /// size, as the copies that chose sizes by their own range did.
    #[test]
    fn racing_copies_of_different_alignment_use_one_size() {
        let mut buf = vec![0u64; 4];
        let r = region(&mut buf, 0, 32);
        std::thread::scope(|s| {
            s.spawn(|| r.write(0, &[0; 16]));
            s.spawn(|| {
                r.write(4, &[1; 8]);
                r.fill(13, 3, 2);
            });
            let mut out = [0u8; 20];
            r.read(2, &mut out);
            r.store_u8(5, 9, Ordering::Release);
            let _ = r.load_u8(12, Ordering::Acquire);
        });
        // Each byte is one of the values written to it: the copies may
        // interleave, but a byte is never torn.
        let mut all = [0u8; 32];
        r.read(0, &mut all);
        assert!(all[..4].iter().all(|&v| v == 0));
        assert!([0, 1, 9].contains(&all[5]));
        assert!(all[13..16].iter().all(|&v| v == 0 || v == 2));
    }
}

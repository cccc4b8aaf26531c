//! Copies in and out of memory other threads and the device may access at
//! the same time: every access is a relaxed atomic, 8 bytes at a time
//! between the unaligned edges.
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
pub(crate) unsafe fn copy_in(dst: *mut u8, src: &[u8]) {
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
pub(crate) unsafe fn copy_out(src: *mut u8, dst: &mut [u8]) {
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
pub(crate) unsafe fn fill(dst: *mut u8, len: usize, byte: u8) {
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

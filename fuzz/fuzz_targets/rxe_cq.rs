//! The rxe CQE decoder: a `CompletionQueue` over a fake ring whose bytes
//! come from the fuzzer — the indices (which must be masked before use),
//! the completions, and sometimes the header's geometry itself (which
//! `Queue::new` must check against the mapping) — polled while the
//! "kernel" publishes producer indices the fuzzer also chooses. Nothing may
//! be read outside the ring (the address sanitizer watches) and nothing may
//! panic.
#![no_main]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use libfuzzer_sys::fuzz_target;
use provider_rxe::queue::{
    Queue, DATA_OFFSET, INDEX_MASK_OFFSET, LOG2_ELEM_SIZE_OFFSET, PRODUCER_OFFSET,
};
use provider_rxe::wqe::WC_SIZE;
use provider_rxe::{CompletionQueue, Wc};

fuzz_target!(|data: &[u8]| {
    // Byte 0 chooses the geometry: bits 0-2 log2 of the slot count (1 to
    // 128), bit 3 the slot size (64 or 128 bytes), bit 6 a mapping shorter
    // than the slots need (by byte 1), bit 7 a header left as the fuzzer
    // wrote it. Then the ring's bytes; what is left are producer indices
    // to publish in turn.
    let Some((&[how, short], rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let log2_slots = u32::from(how & 7);
    let log2_elem = 6 + u32::from(how >> 3 & 1);
    let mut len = DATA_OFFSET + (1usize << (log2_slots + log2_elem));
    if how & 0x40 != 0 {
        len -= usize::from(short) + 1;
    }
    let (ring, moves) = rest.split_at(len.min(rest.len()));
    // An 8-aligned buffer of `len` bytes (u64 elements), zero past the
    // fuzzer's bytes.
    let mut buf = vec![0u64; len.div_ceil(8)];
    let Some(base) = NonNull::new(buf.as_mut_ptr().cast::<u8>()) else {
        return;
    };
    let at = |off: usize| base.as_ptr().wrapping_add(off);
    // SAFETY: the buffer has at least `len` >= ring.len() bytes.
    unsafe { core::ptr::copy_nonoverlapping(ring.as_ptr(), at(0), ring.len()) };
    if how & 0x80 == 0 {
        // SAFETY: offsets 0 and 4 are 4-aligned in the 8-aligned buffer
        // and below its length (at least 384 + 64 - 256 = 192 bytes).
        unsafe {
            at(LOG2_ELEM_SIZE_OFFSET).cast::<u32>().write(log2_elem);
            at(INDEX_MASK_OFFSET)
                .cast::<u32>()
                .write((1 << log2_slots) - 1);
        }
    }
    // SAFETY: `base` points to `len` readable and writable bytes (the
    // buffer), which outlive the queue (dropped before the buffer).
    let Ok(q) = (unsafe { Queue::new(base, len, WC_SIZE) }) else {
        return;
    };
    // Queue::new checked that the slots hold WC_SIZE bytes, which is all
    // CompletionQueue::new checks: it cannot refuse this ring.
    let mut cq = CompletionQueue::new(q).expect("a ring Queue::new took for WC_SIZE entries");
    let slots = cq.slots() as usize;
    let mut out = [Wc::default(); 8];
    let mut polled = cq.poll(&mut out);
    // SAFETY: PRODUCER_OFFSET + 4 <= DATA_OFFSET <= len (Queue::new
    // checked the header fits) and is 4-aligned in the 8-aligned buffer.
    let prod = unsafe { AtomicU32::from_ptr(at(PRODUCER_OFFSET).cast()) };
    for m in moves.chunks(4) {
        let mut v = [0u8; 4];
        v[..m.len()].copy_from_slice(m);
        prod.store(u32::from_le_bytes(v), Ordering::Release);
        let _ = cq.has_completion();
        // Each publication hands over fewer entries than the ring has.
        let before = polled;
        while cq.has_completion() {
            polled += cq.poll(&mut out);
        }
        assert!(polled - before < slots.max(2));
    }
    drop(cq);
    drop(buf);
});

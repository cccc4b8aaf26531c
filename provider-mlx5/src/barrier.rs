//! Named DMA barriers and MMIO stores, after rdma-core's
//! `util/udma_barrier.h` and `util/mmio.h`.
//!
//! Each barrier has one narrow purpose and its name says which; a call site
//! reads as documentation of the ordering it needs. Two streams are ordered:
//! the CPU's accesses to memory, and the device's DMA reads and writes (PCIe
//! MemRd/MemWr TLPs) of that memory or the CPU's stores to the device's
//! registers (MMIO).
//!
//! | barrier | rdma-core | x86_64 | aarch64 | elsewhere (fallback) | under Miri |
//! | --- | --- | --- | --- | --- | --- |
//! | [`to_device`] | `udma_to_device_barrier` | compiler fence | `dmb oshst` | `fence(SeqCst)` | compiler fence |
//! | [`from_device`] | `udma_from_device_barrier` | `lfence` | `dmb oshld` | `fence(SeqCst)` | `fence(Acquire)` |
//! | [`wc_start`] | `mmio_wc_start` | `sfence` | `dsb st` | `fence(SeqCst)` | `fence(Release)` |
//! | [`wc_flush`] | `mmio_flush_writes` | `sfence` | `dsb st` | `fence(SeqCst)` | `fence(Release)` |
//! | [`reads_before_release`] | (none) | compiler fence | `dmb oshld` | `fence(SeqCst)` | compiler fence |
//!
//! The x86_64 and aarch64 columns are exactly what `udma_barrier.h` emits
//! (the last row is ours; see its function). aarch64's barriers name the
//! **outer-shareable** domain (`osh`), which the device's DMA belongs to:
//! the inner-shareable `dmb ish` that `fence(SeqCst)` becomes there orders
//! the CPU's accesses only as other CPUs see them, not as the device does.
//! `cargo xtask test` builds this crate for aarch64 and disassembles each
//! barrier (with the MMIO stores) to check these instructions are what the
//! compiler emitted (`xtask/src/barriers.rs`). The fallback, on any other
//! architecture, is a full fence of the Rust memory model; it is **not**
//! what a weakly ordered CPU needs for DMA, so this crate should be ported
//! with real instructions before it drives hardware on such a CPU.
//!
//! The last column is for Miri only (`cargo xtask test` runs the provider's
//! tests over the device model under it): Miri cannot execute inline
//! assembly, so `lfence` and `sfence` become the fences of the Rust memory
//! model that order what the instruction orders — earlier loads before later
//! accesses (Acquire), earlier stores before later stores (Release) — and
//! no stronger, so that Miri's race detector is not shown more
//! synchronisation than the real build has. They order nothing for a
//! device; no build that drives hardware is ever made with `cfg(miri)`.
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

/// Makes every store the CPU has made to DMA-able memory (WQEs, doorbell
/// records) visible to the device before any later store that could start
/// DMA (a doorbell record update or an MMIO doorbell).
///
/// x86_64: the CPU already keeps stores to write-back memory in program
/// order (TSO) and DMA reads snoop the caches, so only the compiler must be
/// stopped from sinking the WQE stores below the doorbell store. As
/// `udma_barrier.h` notes, this does not order non-temporal stores or stores
/// to other memory types; none are made here.
///
/// aarch64: `dmb oshst` — earlier stores before later stores, as observed
/// in the outer-shareable domain, where the device's reads are.
#[inline(always)]
pub fn to_device() {
    #[cfg(any(target_arch = "x86_64", miri))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction: it touches no memory or registers
    // (the asm block is still a compiler barrier for memory accesses).
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", miri)))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Makes the reads after it see everything the device wrote before the
/// write the CPU has just observed (a CQE's owner bit): placed between the
/// ownership check of a CQE and the reads of its other fields.
///
/// x86_64: `lfence`, as `udma_barrier.h` has it. TSO alone already keeps
/// loads from write-back memory in order; the reference uses `lfence` to be
/// safe for any memory type, and so does this crate. It also acts as a
/// compiler barrier (the `asm!` block may touch memory).
///
/// aarch64: `dmb oshld` — the owner byte's load before every later load
/// (and store), in the device's domain.
#[inline(always)]
pub fn from_device() {
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `lfence` only orders loads; it touches no memory and no
    // registers, and is part of SSE2, which every x86_64 CPU has.
    unsafe {
        core::arch::asm!("lfence", options(nostack, preserves_flags));
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    dmb_oshld();
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", miri)))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// Orders earlier stores (the doorbell record, which lives in ordinary
/// memory) before the stores to write-combining MMIO that follow (the
/// BlueFlame register): placed just before the MMIO doorbell.
///
/// x86_64: `sfence` (rdma-core's `mmio_wc_start` is `mmio_flush_writes`).
/// WC stores are weakly ordered even on x86, so a compiler fence is not
/// enough. aarch64: `dsb st`, likewise `mmio_flush_writes`: a `dmb` orders
/// accesses only among themselves, while the register store must not leave
/// before the record's store has completed.
#[inline(always)]
pub fn wc_start() {
    flush_writes();
}

/// Flushes the CPU's write-combining buffers so the MMIO stores before it
/// leave the core promptly and are not merged with later ones: placed right
/// after the doorbell/BlueFlame stores, before the BlueFlame offset toggles
/// (so two doorbells can never be combined or reordered).
///
/// x86_64: `sfence`. aarch64: `dsb st`.
#[inline(always)]
pub fn wc_flush() {
    flush_writes();
}

/// rdma-core's `mmio_flush_writes`.
#[inline(always)]
fn flush_writes() {
    #[cfg(miri)]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` only orders stores; it touches no memory and no
    // registers, and is part of SSE, which every x86_64 CPU has.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: a barrier instruction: it waits for earlier stores to
    // complete and touches no memory or registers.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", miri)))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// `dmb oshld`: earlier loads before later loads and stores, as the
/// outer-shareable domain observes them.
#[cfg(all(target_arch = "aarch64", not(miri)))]
#[inline(always)]
fn dmb_oshld() {
    // SAFETY: a barrier instruction: it touches no memory or registers
    // (the asm block is still a compiler barrier for memory accesses).
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags));
    }
}

/// Orders the reads of CQEs just consumed before the store that hands their
/// slots back to the device (the CQ's consumer-index record), so the device
/// cannot overwrite a CQE the CPU is still reading.
///
/// x86_64: a compiler fence; TSO never lets a load pass a later store.
/// rdma-core's `update_cons_index` has no barrier on any architecture,
/// which is right only under TSO: aarch64 may make a store visible before
/// an earlier load is satisfied, so here it is `dmb oshld`, which orders
/// the earlier loads before the later store.
#[inline(always)]
pub fn reads_before_release() {
    #[cfg(any(target_arch = "x86_64", miri))]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    dmb_oshld();
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", miri)))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

/// One 64-bit store of `bytes`, in the order given, to an MMIO register.
///
/// This is `mmio_write64_be`: the register receives the 8 bytes exactly as
/// they sit in `bytes`, in one aligned store (a volatile `u64` store, which
/// is one `mov` on x86_64), never split and never elided.
///
/// # Safety
/// `reg` must be 8-byte aligned and valid for an 8-byte write (a mapped
/// UAR/BlueFlame register, or ordinary memory in tests).
#[inline(always)]
pub unsafe fn mmio_write64(reg: *mut u8, bytes: [u8; 8]) {
    // SAFETY: the caller guarantees `reg` is 8-aligned and writable for 8
    // bytes; volatile keeps the store single and present.
    unsafe { reg.cast::<u64>().write_volatile(u64::from_ne_bytes(bytes)) }
}

/// Copies one 64-byte chunk to a BlueFlame register as eight ascending
/// 64-bit stores (`mmio_memcpy_x64` for one block: never `memcpy`, whose
/// string instructions do not promise the order of the stores).
///
/// # Safety
/// `dst` must be 8-aligned and writable for 64 bytes; `src` must be
/// 8-aligned and readable for 64 bytes, and not written concurrently.
#[inline(always)]
pub unsafe fn mmio_copy64(dst: *mut u8, src: *const u8) {
    for i in 0..8 {
        // SAFETY: i < 8, so both accesses stay within the 64 bytes the
        // caller vouches for, at 8-aligned offsets of 8-aligned bases.
        unsafe {
            let v = src.cast::<u64>().add(i).read();
            dst.cast::<u64>().add(i).write_volatile(v);
        }
    }
}

/// Out-of-line copies of the barriers and MMIO stores, under fixed symbol
/// names, for the build check that disassembles them (`cargo xtask test`
/// builds this crate for aarch64 and x86_64 with the feature
/// `barrier-probes`). Not part of the API.
#[cfg(feature = "barrier-probes")]
#[doc(hidden)]
pub mod probes {
    /// [`super::to_device`].
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn rverbs_probe_to_device() {
        super::to_device()
    }
    /// [`super::from_device`].
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn rverbs_probe_from_device() {
        super::from_device()
    }
    /// [`super::wc_start`].
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn rverbs_probe_wc_start() {
        super::wc_start()
    }
    /// [`super::wc_flush`].
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn rverbs_probe_wc_flush() {
        super::wc_flush()
    }
    /// [`super::reads_before_release`].
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn rverbs_probe_reads_before_release() {
        super::reads_before_release()
    }
    /// [`super::mmio_write64`].
    ///
    /// # Safety
    /// As for [`super::mmio_write64`].
    #[no_mangle]
    #[inline(never)]
    pub unsafe extern "C" fn rverbs_probe_mmio_write64(reg: *mut u8, v: u64) {
        // SAFETY: forwarded contract.
        unsafe { super::mmio_write64(reg, v.to_ne_bytes()) }
    }
    /// [`super::mmio_copy64`].
    ///
    /// # Safety
    /// As for [`super::mmio_copy64`].
    #[no_mangle]
    #[inline(never)]
    pub unsafe extern "C" fn rverbs_probe_mmio_copy64(dst: *mut u8, src: *const u8) {
        // SAFETY: forwarded contract.
        unsafe { super::mmio_copy64(dst, src) }
    }
}

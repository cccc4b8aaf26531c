//! The completion queue: CQEs the device writes, the `[SET_CI, ARM]`
//! doorbell record and the CQ doorbell register.
//!
//! Index convention: `ci` is a free-running count of CQEs consumed. The CQE
//! for `ci` sits in slot `ci & (ncqe - 1)`; the device flips the owner bit
//! it writes on every pass over the ring, so the entry belongs to software
//! when its opcode is not INVALID and its owner bit equals
//! `(ci & ncqe) != 0`. With 128-byte CQEs the 64-byte CQE is the second
//! half of the slot.
//!
//! Trust: the ring is written by the device. Each CQE is copied out with
//! volatile reads after the ownership check and a [`barrier::from_device`];
//! the QP number it names is resolved through a [`WorkQueues`] (a CQ's
//! [`crate::registry`], or a fixed list of [`QpQueues`](crate::lookup::QpQueues)) and its
//! `wqe_counter` is masked and checked by the owning queue, so a corrupt
//! CQE yields a [`BadCqe`], never an out-of-bounds access or a second
//! completion of one request.
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

use crate::barrier;
use crate::cqe::{cqe_opcode, op_own, Cqe64, CQE64_SIZE};
use crate::lookup::WorkQueues;
use crate::wc::{decode, decode_req, BadCqe, Wc};
use crate::LayoutError;
use core::ptr::NonNull;

/// Index of the SET_CI word in the CQ doorbell record.
pub const SET_CI_DBR: usize = 0;
/// Index of the ARM word in the CQ doorbell record.
pub const ARM_DBR: usize = 1;
/// Offset of the CQ doorbell in the CQ's UAR page (`MLX5_CQ_DOORBELL`).
pub const CQ_DOORBELL: usize = 0x20;
/// Arm command: notify on the next completion (`MLX5_CQ_DB_REQ_NOT`).
pub const ARM_NEXT: u32 = 0;
/// Arm command: notify on the next solicited or error completion
/// (`MLX5_CQ_DB_REQ_NOT_SOL`).
pub const ARM_SOLICITED: u32 = 1 << 24;

/// Fixed properties of a CQ, from its creation.
#[derive(Debug, Clone, Copy)]
pub struct CqConfig {
    /// Entries in the ring: a power of two.
    pub ncqe: u32,
    /// 64 or 128.
    pub cqe_size: usize,
    /// The CQ number (from the create response).
    pub cqn: u32,
}

// The decoder reads nothing before `slid` (byte 22): words 0 and 1 of a
// CQE are never read (CqeWords::rest).
const _: () = assert!(core::mem::offset_of!(Cqe64, slid) >= 16);
// The fast path's words: srqn_uidx in word 4, byte_cnt in the second half
// of word 5, sop_drop_qpn / wqe_counter / op_own in word 7.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Cqe64, srqn_uidx) == 32);
    assert!(offset_of!(Cqe64, byte_cnt) == 44);
    assert!(offset_of!(Cqe64, sop_drop_qpn) == 56);
    assert!(offset_of!(Cqe64, wqe_counter) == 60);
};

/// The consumer side of an mlx5 CQ.
#[derive(Debug)]
pub struct CompletionQueue {
    buf: NonNull<u8>,
    dbrec: NonNull<u32>,
    uar: NonNull<u8>,
    cfg: CqConfig,
    ci: u32,
    arm_sn: u32,
}

/// A CQ ring's geometry (see [`CompletionQueue::new`], which checked it).
#[derive(Debug, Clone, Copy)]
struct Ring {
    buf: NonNull<u8>,
    ncqe: u32,
    cqe_size: usize,
}

impl Ring {
    /// The 64-byte CQE of entry `i` (masked).
    #[inline(always)]
    fn cqe_ptr(self, i: u32) -> *mut u8 {
        let slot = (i & (self.ncqe - 1)) as usize * self.cqe_size;
        // SAFETY: slot + cqe_size <= ncqe * cqe_size <= len (new()), and
        // the 64-byte CQE is the last 64 bytes of the slot.
        unsafe { self.buf.as_ptr().add(slot + self.cqe_size - CQE64_SIZE) }
    }

    /// The CQE at `ci`, if the device has handed it to software (and after
    /// the barrier that orders reading it after that check).
    #[inline(always)]
    fn owned(self, ci: u32) -> Option<CqeWords> {
        if !self.is_owned(ci) {
            return None;
        }
        barrier::from_device();
        Some(CqeWords(self.cqe_ptr(ci).cast::<u64>()))
    }

    /// Whether the device has handed entry `ci` to software (no barrier:
    /// reading the CQE needs [`Ring::owned`]).
    #[inline(always)]
    fn is_owned(self, ci: u32) -> bool {
        // SAFETY: byte 63 of the CQE, inside the ring (cqe_ptr); volatile
        // because the device writes it concurrently.
        let own = unsafe { self.cqe_ptr(ci).add(CQE64_SIZE - 1).read_volatile() };
        let sw_owner = ((ci & self.ncqe) != 0) as u8;
        own >> 4 != cqe_opcode::INVALID && own & op_own::OWNER == sw_owner
    }
}

/// A software-owned CQE in the ring, read as 8-byte words. Each word the
/// poller uses is read once (volatile: device memory), so no field can
/// change between its check and its use, whatever the device does.
#[derive(Clone, Copy)]
struct CqeWords(*const u64);

impl CqeWords {
    /// Word `i` (< 8), as the ring holds it (the bytes in memory order).
    #[inline(always)]
    fn word(self, i: usize) -> u64 {
        debug_assert!(i < CQE64_SIZE / 8);
        // SAFETY: i < 8 words of a 64-byte CQE inside the ring (owned()),
        // which is 64-aligned (new() checks the base; slots are multiples
        // of 64), so the word is aligned. Volatile: device memory.
        unsafe { self.0.add(i).read_volatile() }
    }

    /// The whole CQE, given words 4 and 7 already read: one copy out of
    /// the ring. Words 0 and 1 hold only what this poller never reads
    /// (the striding-RQ WQE id, the DLID path bits of `ml_path`) and stay
    /// zero.
    #[inline(always)]
    fn rest(self, w4: u64, w7: u64) -> Cqe64 {
        let raw = [
            0,
            0,
            self.word(2),
            self.word(3),
            w4,
            self.word(5),
            self.word(6),
            w7,
        ];
        // The same 64 bytes reinterpreted in place (both types are plain
        // bytes of one size).
        zerocopy::transmute!(raw)
    }
}

// SAFETY: the ring and doorbell record are used by this object alone; the
// CQ doorbell register may be shared by every CQ of the context, which is
// why it is only ever written with single 64-bit stores carrying the CQ
// number (as rdma-core does, without a lock), from any thread.
unsafe impl Send for CompletionQueue {}

impl CompletionQueue {
    /// Wraps the CQ ring at `buf` (`len >= ncqe * cqe_size` bytes), its
    /// doorbell record `dbrec` (`[SET_CI, ARM]`, big-endian) and the
    /// context's CQ UAR page `uar` (the doorbell is at `uar + 0x20`), and
    /// marks every entry invalid (`op_own = 0xF0`), as rdma-core does when it
    /// allocates the buffer: call it before the CQ is created in the kernel.
    ///
    /// # Safety
    /// For as long as the queue exists: `buf..buf + len` must be readable
    /// and writable, written by nothing but the device (and this call);
    /// `dbrec` must be valid for 8-byte writes by this queue alone; `uar`
    /// must be valid for an 8-byte write at offset 0x20.
    pub unsafe fn new(
        buf: NonNull<u8>,
        len: usize,
        dbrec: NonNull<u32>,
        uar: NonNull<u8>,
        cfg: CqConfig,
    ) -> Result<CompletionQueue, LayoutError> {
        if !cfg.ncqe.is_power_of_two() || cfg.ncqe > 1 << 22 {
            return Err(LayoutError::BadCount { count: cfg.ncqe });
        }
        if cfg.cqe_size != 64 && cfg.cqe_size != 128 {
            return Err(LayoutError::BadStride {
                shift: cfg.cqe_size.trailing_zeros(),
            });
        }
        let need = cfg.ncqe as usize * cfg.cqe_size;
        if len < need {
            return Err(LayoutError::TooShort { need, len });
        }
        if buf.as_ptr() as usize % CQE64_SIZE != 0 {
            return Err(LayoutError::Misaligned { what: "CQ buffer" });
        }
        if dbrec.as_ptr() as usize % 4 != 0 || uar.as_ptr() as usize % 8 != 0 {
            return Err(LayoutError::Misaligned {
                what: "CQ doorbell",
            });
        }
        let cq = CompletionQueue {
            buf,
            dbrec,
            uar,
            cfg,
            ci: 0,
            arm_sn: 0,
        };
        for i in 0..cfg.ncqe {
            // SAFETY: op_own_ptr() is inside the ring; the device writes
            // nothing yet (contract).
            unsafe { cq.op_own_ptr(i).write_volatile(cqe_opcode::INVALID << 4) };
        }
        Ok(cq)
    }

    /// Sets the CQ number, which the kernel assigns only after the ring
    /// was initialised (see [`CompletionQueue::new`]); arming sends it.
    pub fn set_cqn(&mut self, cqn: u32) {
        self.cfg.cqn = cqn;
    }

    /// The configuration.
    pub fn config(&self) -> &CqConfig {
        &self.cfg
    }

    /// CQEs consumed so far (free-running).
    pub fn consumer_index(&self) -> u32 {
        self.ci
    }

    /// The 64-byte CQE of entry `i` (masked).
    #[inline(always)]
    fn cqe_ptr(&self, i: u32) -> *mut u8 {
        let slot = (i & (self.cfg.ncqe - 1)) as usize * self.cfg.cqe_size;
        // SAFETY: slot + cqe_size <= ncqe * cqe_size <= len (new()), and
        // the 64-byte CQE is the last 64 bytes of the slot.
        unsafe { self.buf.as_ptr().add(slot + self.cfg.cqe_size - CQE64_SIZE) }
    }

    #[inline(always)]
    fn op_own_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: byte 63 of the CQE cqe_ptr() found in the ring.
        unsafe { self.cqe_ptr(i).add(CQE64_SIZE - 1) }
    }

    /// The ring's geometry, as a value the poll loop keeps in registers.
    #[inline(always)]
    fn ring(&self) -> Ring {
        Ring {
            buf: self.buf,
            ncqe: self.cfg.ncqe,
            cqe_size: self.cfg.cqe_size,
        }
    }

    /// Polls up to `out.len()` completions, oldest first, resolving each to
    /// its request through `wqs` and decoding it into a [`Wc`] in place,
    /// and returns how many were written (entries after those may have
    /// been overwritten too).
    ///
    /// A CQE that resolves to no outstanding request ends the batch: if it
    /// is the first, it is consumed and returned as the error; otherwise
    /// the completions before it are returned and it is left for the next
    /// call. After the batch the SET_CI doorbell record is updated.
    #[inline]
    pub fn poll<Q: WorkQueues + ?Sized>(
        &mut self,
        wqs: &mut Q,
        out: &mut [Wc],
    ) -> Result<usize, BadCqe> {
        // An empty CQ is the common answer of a busy poller: it costs one
        // ownership check, not the batch loop's set-up (callgrind: 73 ->
        // see the commit).
        if out.is_empty() || !self.ring().is_owned(self.ci) {
            return Ok(0);
        }
        self.poll_batch(wqs, out)
    }

    /// [`CompletionQueue::poll`] once a CQE is known to be there.
    #[inline]
    fn poll_batch<Q: WorkQueues + ?Sized>(
        &mut self,
        wqs: &mut Q,
        out: &mut [Wc],
    ) -> Result<usize, BadCqe> {
        let start = self.ci;
        // The consumer index and the geometry in locals, not re-read
        // through `self` on every CQE (callgrind: ~8 per CQE).
        let ring = self.ring();
        let mut ci = start;
        let mut n = 0;
        let mut bad = None;
        while n < out.len() {
            let Some(q) = ring.owned(ci) else { break };
            wqs.at(ci);
            let (w4, w7) = (q.word(4), q.word(7));
            // A successful send completion, the common CQE, is decoded from
            // those two words (and byte_cnt for a READ); the rest are
            // copied out whole.
            let r = if w7.to_ne_bytes()[7] >> 4 == cqe_opcode::REQ {
                decode_req(w4, w7, || q.word(5), wqs, &mut out[n])
            } else {
                decode(&q.rest(w4, w7), wqs, &mut out[n])
            };
            match r {
                Ok(()) => {}
                Err(e) => {
                    if n == 0 {
                        ci = ci.wrapping_add(1);
                        bad = Some(e);
                    }
                    break;
                }
            }
            n += 1;
            ci = ci.wrapping_add(1);
        }
        self.ci = ci;
        if ci != start {
            wqs.releasing(ci);
            self.update_ci();
        }
        match bad {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    #[inline]
    fn update_ci(&mut self) {
        barrier::reads_before_release();
        // SAFETY: dbrec is 4-aligned, valid for 8 bytes and ours (new()).
        unsafe {
            let v = (self.ci & 0xff_ffff).to_be();
            self.dbrec.as_ptr().add(SET_CI_DBR).write_volatile(v);
        }
    }

    /// Asks for a completion event (`ibv_req_notify_cq`): on the next
    /// completion, or with `solicited_only` on the next solicited or error
    /// completion. Writes the ARM doorbell record, then the 64-bit CQ
    /// doorbell `(sn << 28 | cmd | ci) << 32 | cqn`, big-endian.
    pub fn arm(&mut self, solicited_only: bool) {
        let sn = self.arm_sn & 3;
        let cmd = if solicited_only {
            ARM_SOLICITED
        } else {
            ARM_NEXT
        };
        let word = sn << 28 | cmd | (self.ci & 0xff_ffff);
        // SAFETY: dbrec is valid for 8 bytes, 4-aligned, ours (new()).
        unsafe {
            self.dbrec
                .as_ptr()
                .add(ARM_DBR)
                .write_volatile(word.to_be())
        };
        barrier::wc_start();
        let db = ((word as u64) << 32 | self.cfg.cqn as u64).to_be_bytes();
        // SAFETY: uar + 0x20 is 8-aligned (uar is, checked in new()) and
        // valid for an 8-byte write (new()'s contract).
        unsafe { barrier::mmio_write64(self.uar.as_ptr().add(CQ_DOORBELL), db) };
        barrier::wc_flush();
    }

    /// A view of the ring for another thread: where the CQEs the device has
    /// handed to software end (see [`CqScan`]).
    ///
    /// # Safety
    /// The scan reads the ring: use it only while the ring memory given to
    /// [`CompletionQueue::new`] stays mapped.
    pub unsafe fn scanner(&self) -> CqScan {
        CqScan {
            buf: self.buf,
            ncqe: self.cfg.ncqe,
            cqe_size: self.cfg.cqe_size,
        }
    }

    /// Records that a completion event for this CQ was read from the
    /// completion channel (rdma-core's `mlx5_cq_event`): the next arm uses
    /// the next sequence number.
    pub fn ack_event(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }

    /// The arm sequence number the next [`CompletionQueue::arm`] sends (2
    /// bits).
    pub fn arm_sn(&self) -> u32 {
        self.arm_sn & 3
    }
}

/// Reads the ownership of a CQ's entries from any thread, to find where
/// the CQEs written so far end (rdma-core's `__mlx5_cq_clean` walks the
/// same way from the consumer index to the first entry the device still
/// owns). Made by [`CompletionQueue::scanner`].
#[derive(Debug, Clone, Copy)]
pub struct CqScan {
    buf: NonNull<u8>,
    ncqe: u32,
    cqe_size: usize,
}

// SAFETY: a CqScan only reads single bytes of the ring with volatile loads
// (which the device writes concurrently anyway), and scanner()'s contract
// keeps the ring mapped while it is used.
unsafe impl Send for CqScan {}
// SAFETY: as above; it has no interior state.
unsafe impl Sync for CqScan {}

impl CqScan {
    /// The position (free-running, like the consumer index) of the first
    /// entry at or after `from` that the device has not yet handed to
    /// software: every CQE written before the call lies in `from..` that.
    /// `from` must be at most `ncqe` entries behind the consumer's true
    /// index (the published consumer index is).
    pub fn software_owned_end(&self, from: u32) -> u32 {
        let mut pos = from;
        for _ in 0..self.ncqe {
            let slot = (pos & (self.ncqe - 1)) as usize * self.cqe_size;
            // SAFETY: slot + cqe_size <= ncqe * cqe_size, inside the ring
            // (CompletionQueue::new checked it), mapped (scanner()'s
            // contract); byte 63 of the slot's 64-byte CQE is op_own.
            let own = unsafe {
                self.buf
                    .as_ptr()
                    .add(slot + self.cqe_size - 1)
                    .read_volatile()
            };
            let sw_owner = ((pos & self.ncqe) != 0) as u8;
            if own >> 4 == cqe_opcode::INVALID || own & op_own::OWNER != sw_owner {
                break;
            }
            pos = pos.wrapping_add(1);
        }
        pos
    }
}

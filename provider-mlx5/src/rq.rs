//! The receive queue of a QP: scatter lists in the RQ ring and the RCV
//! doorbell record.
//!
//! Index convention: `head` counts receives posted, `tail` (in the
//! [`RecvRecords`] shared with the CQ poller) receives completed; both run
//! free and slot `i` is `i & (wqe_cnt - 1)`. The RQ
//! consumes in order, so a receive completion belongs to `tail`; the CQE's
//! `wqe_counter` is only cross-checked against it (masked), never used to
//! pick a wr_id.
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

use crate::barrier;
use crate::records::RecvRecords;
use crate::seg::{DataSeg, OCTOWORD};
use crate::wr::Sge;
use crate::{LayoutError, PostError};
use core::ptr::NonNull;
use std::sync::Arc;
use zerocopy::IntoBytes;

/// Index of the RCV word in the QP doorbell record.
pub const RCV_DBR: usize = 0;

/// The producer side of an mlx5 RQ.
#[derive(Debug)]
pub struct RecvQueue {
    buf: NonNull<u8>,
    dbrec: NonNull<u32>,
    wqe_cnt: u32,
    wqe_shift: u32,
    max_sge: u32,
    records: Arc<RecvRecords>,
    head: u32,
    rung: u32,
}

// SAFETY: as for SendQueue: the ring and the RCV doorbell word are used by
// this object alone, which may move between threads with them.
unsafe impl Send for RecvQueue {}

impl RecvQueue {
    /// Wraps the RQ ring at `buf` (`len` bytes: `wqe_cnt` WQEs of
    /// `1 << wqe_shift` bytes) and the QP's doorbell record `dbrec`
    /// (`[RCV, SND]`; this queue writes the first word). `max_sge` is the
    /// QP's receive SGE limit, at most `(1 << wqe_shift) / 16`.
    ///
    /// # Safety
    /// For as long as the queue exists, `buf..buf + len` must be writable
    /// memory used by nothing else but the device's reads, and `dbrec` must
    /// be valid for 4-byte writes, its first word written by nothing else.
    pub unsafe fn new(
        buf: NonNull<u8>,
        len: usize,
        dbrec: NonNull<u32>,
        wqe_cnt: u32,
        wqe_shift: u32,
        max_sge: u32,
    ) -> Result<RecvQueue, LayoutError> {
        check_ring(buf, len, wqe_cnt, wqe_shift)?;
        if dbrec.as_ptr() as usize % 4 != 0 {
            return Err(LayoutError::Misaligned {
                what: "doorbell record",
            });
        }
        let cap = (1u32 << wqe_shift) / OCTOWORD as u32;
        if max_sge > cap {
            return Err(LayoutError::CapsTooLarge { ds: max_sge });
        }
        Ok(RecvQueue {
            buf,
            dbrec,
            wqe_cnt,
            wqe_shift,
            max_sge,
            records: Arc::new(RecvRecords::new(wqe_cnt)),
            head: 0,
            rung: 0,
        })
    }

    /// Receives posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.head.wrapping_sub(self.records.tail())
    }

    /// The records a CQ poller completes this queue's receives through.
    pub fn records(&self) -> &RecvRecords {
        &self.records
    }

    /// A shared handle on [`RecvQueue::records`].
    pub fn shared_records(&self) -> Arc<RecvRecords> {
        self.records.clone()
    }

    /// WQE slots in the ring.
    pub fn capacity(&self) -> u32 {
        self.wqe_cnt
    }

    /// Writes a receive WQE for `sges` (zero-length entries skipped, a
    /// terminator after a short list). It reaches the device at the next
    /// [`RecvQueue::ring`]. On error nothing is written.
    ///
    /// # Safety
    /// Every SGE names memory registered under its lkey. The device may
    /// write it until the receive completes or the registration is gone:
    /// until then the caller keeps it allocated, and reaches it only in
    /// ways the device's concurrent writes cannot make undefined (no Rust
    /// references into it).
    pub unsafe fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), PostError> {
        check_sges(sges, self.max_sge)?;
        if self.outstanding() >= self.wqe_cnt {
            return Err(PostError::QueueFull);
        }
        let idx = self.head & (self.wqe_cnt - 1);
        let stride = 1usize << self.wqe_shift;
        // SAFETY: idx < wqe_cnt and check_ring made wqe_cnt << wqe_shift <=
        // len, so the slot's stride bytes are in the ring (ours to write,
        // new()'s contract); write_scatter writes at most stride bytes.
        unsafe { write_scatter(self.buf.as_ptr().add(idx as usize * stride), stride, sges) };
        self.records.record(self.head, wr_id);
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// Publishes the receives posted since the last ring: DMA barrier, then
    /// the RCV doorbell record (`head & 0xffff`).
    pub fn ring(&mut self) {
        if self.rung == self.head {
            return;
        }
        self.records.publish(self.head);
        barrier::to_device();
        // SAFETY: dbrec is 4-aligned and its first word is ours (new()).
        unsafe {
            let v = (self.head & 0xffff).to_be();
            self.dbrec.as_ptr().add(RCV_DBR).write_volatile(v);
        }
        self.rung = self.head;
    }

    /// Completes the oldest receive (see [`RecvRecords::complete`]).
    pub fn complete(&self, wqe_counter: u16) -> Option<u64> {
        self.records.complete(wqe_counter)
    }
}

/// Checks a ring of `wqe_cnt` WQEs of `1 << wqe_shift` bytes at `buf`.
pub(crate) fn check_ring(
    buf: NonNull<u8>,
    len: usize,
    wqe_cnt: u32,
    wqe_shift: u32,
) -> Result<(), LayoutError> {
    if !wqe_cnt.is_power_of_two() || wqe_cnt > 1 << 15 {
        return Err(LayoutError::BadCount { count: wqe_cnt });
    }
    if !(4..=12).contains(&wqe_shift) {
        return Err(LayoutError::BadStride { shift: wqe_shift });
    }
    let need = (wqe_cnt as usize) << wqe_shift;
    if len < need {
        return Err(LayoutError::TooShort { need, len });
    }
    if buf.as_ptr() as usize % OCTOWORD != 0 {
        return Err(LayoutError::Misaligned { what: "RQ buffer" });
    }
    Ok(())
}

/// Validates a scatter list against `max_sge`.
pub(crate) fn check_sges(sges: &[Sge], max_sge: u32) -> Result<(), PostError> {
    if sges.len() > max_sge as usize {
        return Err(PostError::TooManySges {
            given: sges.len(),
            max: max_sge,
        });
    }
    let length: u64 = sges.iter().map(|s| s.length as u64).sum();
    if length > crate::wqe::MAX_LENGTH {
        return Err(PostError::TooLong {
            length,
            max: crate::wqe::MAX_LENGTH,
        });
    }
    Ok(())
}

/// Writes `sges` as data segments at `dst`, then the terminator if they do
/// not fill the `room` bytes.
///
/// # Safety
/// `dst` must be writable for `room` bytes, and `sges` (after dropping
/// zero-length entries) must take at most `room / 16` segments.
pub(crate) unsafe fn write_scatter(dst: *mut u8, room: usize, sges: &[Sge]) {
    let mut off = 0;
    for s in sges.iter().filter(|s| s.length != 0) {
        let seg = DataSeg::new(s.length, s.lkey, s.addr);
        // SAFETY: off + 16 <= room by the caller's bound on the count.
        unsafe { core::ptr::copy_nonoverlapping(seg.as_bytes().as_ptr(), dst.add(off), 16) };
        off += OCTOWORD;
    }
    if off < room {
        // SAFETY: off + 16 <= room (off < room, both multiples of 16).
        unsafe {
            core::ptr::copy_nonoverlapping(DataSeg::END.as_bytes().as_ptr(), dst.add(off), 16)
        };
    }
}

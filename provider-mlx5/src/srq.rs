//! A shared receive queue: WQEs linked into a free list through their
//! `struct mlx5_wqe_srq_next_seg`, and a one-word doorbell record.
//!
//! The device takes posted WQEs in list order starting from WQE 0 and
//! following `next_wqe_index`; completions may come back in any order
//! (QPs share the SRQ), each naming its WQE by `wqe_counter`. Software keeps
//! the list: `head` is the next free WQE to post into, `tail` the last free
//! one, and a completed WQE is appended after `tail` — by the posting side,
//! which takes completed WQEs back from the [`SrqRecords`] it shares with
//! the CQ poller, so the list and the buffer have one writer. One WQE always stays
//! in the list (`head == tail` means full), as in rdma-core. The links are
//! shadowed in a private array and only ever written to the shared buffer,
//! never read back from it; a `wqe_counter` is masked and must name a WQE
//! that is currently posted.
//!
//! The doorbell record is one big-endian word: the count of WQEs posted
//! (16 bits, wrapping).
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

use crate::barrier;
use crate::records::SrqRecords;
use crate::rq::{check_ring, check_sges, write_scatter};
use crate::seg::{SrqNextSeg, OCTOWORD};
use crate::wr::Sge;
use crate::{LayoutError, PostError};
use core::ptr::NonNull;
use std::sync::Arc;
use zerocopy::IntoBytes;

/// The producer side of an mlx5 SRQ.
#[derive(Debug)]
pub struct SharedRecvQueue {
    buf: NonNull<u8>,
    dbrec: NonNull<u32>,
    wqe_cnt: u32,
    wqe_shift: u32,
    max_sge: u32,
    records: Arc<SrqRecords>,
    next: Box<[u16]>,
    head: u16,
    tail: u16,
    /// Receives posted, free-running; the doorbell record takes its low
    /// 16 bits.
    posted: u32,
    rung: u32,
    /// Completions taken back from the records so far.
    freed: u32,
}

// SAFETY: the ring and doorbell word are used by this object alone.
unsafe impl Send for SharedRecvQueue {}

impl SharedRecvQueue {
    /// Wraps the SRQ ring at `buf` (`wqe_cnt` WQEs of `1 << wqe_shift`
    /// bytes: a 16-byte next segment and then up to `max_sge` data
    /// segments) and its doorbell record `dbrec`, and links every WQE into
    /// the free list (rdma-core's `set_srq_buf_ll`). Call it before the SRQ
    /// is created in the kernel or while it holds no receives.
    ///
    /// # Safety
    /// For as long as the queue exists, `buf..buf + len` must be writable
    /// memory used by nothing else but the device's reads, and `dbrec`
    /// valid for 4-byte writes by this queue alone.
    pub unsafe fn new(
        buf: NonNull<u8>,
        len: usize,
        dbrec: NonNull<u32>,
        wqe_cnt: u32,
        wqe_shift: u32,
        max_sge: u32,
    ) -> Result<SharedRecvQueue, LayoutError> {
        check_ring(buf, len, wqe_cnt, wqe_shift)?;
        if wqe_cnt < 2 {
            return Err(LayoutError::BadCount { count: wqe_cnt });
        }
        if wqe_shift < 5 {
            return Err(LayoutError::BadStride { shift: wqe_shift });
        }
        if dbrec.as_ptr() as usize % 4 != 0 {
            return Err(LayoutError::Misaligned {
                what: "doorbell record",
            });
        }
        let cap = ((1u32 << wqe_shift) - OCTOWORD as u32) / OCTOWORD as u32;
        if max_sge > cap {
            return Err(LayoutError::CapsTooLarge { ds: max_sge });
        }
        let n = wqe_cnt as usize;
        let mut srq = SharedRecvQueue {
            buf,
            dbrec,
            wqe_cnt,
            wqe_shift,
            max_sge,
            records: Arc::new(SrqRecords::new(wqe_cnt)),
            next: vec![0; n].into_boxed_slice(),
            head: 0,
            tail: (wqe_cnt - 1) as u16,
            posted: 0,
            rung: 0,
            freed: 0,
        };
        for i in 0..wqe_cnt - 1 {
            srq.link(i as u16, (i + 1) as u16);
        }
        Ok(srq)
    }

    /// Receives that can be outstanding at once (`wqe_cnt - 1`).
    pub fn capacity(&self) -> u32 {
        self.wqe_cnt - 1
    }

    /// Receives posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.posted.wrapping_sub(self.records.freed_head())
    }

    /// The records a CQ poller completes this SRQ's receives through.
    pub fn records(&self) -> &SrqRecords {
        &self.records
    }

    /// A shared handle on [`SharedRecvQueue::records`].
    pub fn shared_records(&self) -> Arc<SrqRecords> {
        self.records.clone()
    }

    /// Appends the WQEs the poller completed since the last call to the
    /// free list, in completion order (rdma-core links each one as it
    /// completes; here the list belongs to the posting side alone).
    fn take_back(&mut self) {
        // In ticket order; a ticket taken but not yet published (its
        // consumer is between the two steps) waits for the next call.
        while let Some(i) = self.records.freed(self.freed) {
            self.link(self.tail, i);
            self.tail = i;
            self.freed = self.freed.wrapping_add(1);
        }
    }

    fn wqe(&self, idx: u16) -> *mut u8 {
        let i = (idx as u32 & (self.wqe_cnt - 1)) as usize;
        // SAFETY: i < wqe_cnt and check_ring made wqe_cnt << wqe_shift <=
        // len, so the WQE is inside the ring.
        unsafe { self.buf.as_ptr().add(i << self.wqe_shift) }
    }

    /// Makes `next` follow `idx` in the list, in the shadow and in the WQE.
    fn link(&mut self, idx: u16, next: u16) {
        self.next[(idx as u32 & (self.wqe_cnt - 1)) as usize] = next;
        let seg = SrqNextSeg::new(next);
        // SAFETY: wqe() is inside the ring, whose WQEs are >= 32 bytes
        // (wqe_shift >= 5 checked in new()); the ring is ours to write. WQE
        // idx is free, so the device is not reading its scatter list.
        unsafe { core::ptr::copy_nonoverlapping(seg.as_bytes().as_ptr(), self.wqe(idx), 16) };
    }

    /// Writes a receive into the head of the free list. It reaches the
    /// device at the next [`SharedRecvQueue::ring`]. On error nothing is
    /// written.
    ///
    /// # Safety
    /// As for [`crate::RecvQueue::post`].
    pub unsafe fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), PostError> {
        check_sges(sges, self.max_sge)?;
        if self.head == self.tail {
            self.take_back();
        }
        if self.head == self.tail {
            return Err(PostError::QueueFull);
        }
        let idx = self.head;
        let room = (1usize << self.wqe_shift) - OCTOWORD;
        // SAFETY: the WQE is inside the ring (wqe()), its scatter list of
        // room bytes starts after the 16-byte next segment, and
        // check_sges bounded the list by max_sge <= room / 16.
        unsafe { write_scatter(self.wqe(idx).add(OCTOWORD), room, sges) };
        let i = (idx as u32 & (self.wqe_cnt - 1)) as usize;
        self.records.record(idx, self.posted, wr_id);
        self.head = self.next[i];
        self.posted = self.posted.wrapping_add(1);
        Ok(())
    }

    /// Publishes the receives posted since the last ring: DMA barrier, then
    /// the doorbell record (the 16-bit post counter).
    pub fn ring(&mut self) {
        if self.rung == self.posted {
            return;
        }
        self.records.publish(self.posted);
        barrier::to_device();
        // SAFETY: dbrec is 4-aligned and ours (new()).
        unsafe {
            self.dbrec
                .as_ptr()
                .write_volatile((self.posted & 0xffff).to_be())
        };
        self.rung = self.posted;
    }

    /// Completes the receive in WQE `wqe_counter` (see
    /// [`SrqRecords::complete`]); the WQE rejoins the free list at the next
    /// post that needs it.
    pub fn complete(&self, wqe_counter: u16) -> Option<u64> {
        self.records.complete(wqe_counter)
    }
}

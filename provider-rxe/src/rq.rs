//! The receive queue of a QP, or an SRQ: `rxe_recv_wqe`s in a shared ring.
//! Posting needs no system call: the kernel's responder reads the ring when
//! a message arrives.

use crate::queue::Queue;
use crate::wqe::{put_u32, put_u64, recv, SGE_SIZE};
use crate::wr::Sge;
use crate::PostError;

/// The producer side of an rxe RQ or SRQ.
#[derive(Debug)]
pub struct RecvQueue {
    q: Queue,
    prod: u32,
    max_sge: u32,
}

impl RecvQueue {
    /// Wraps a validated RQ/SRQ ring; fails if a slot cannot hold `max_sge`
    /// SGEs.
    pub fn new(q: Queue, max_sge: u32) -> Result<RecvQueue, PostError> {
        let need = recv::SGES + max_sge as usize * SGE_SIZE;
        if q.elem_size() < need {
            return Err(PostError::RingTooSmall {
                elem_size: q.elem_size(),
                need,
            });
        }
        let prod = q.load_producer();
        Ok(RecvQueue { q, prod, max_sge })
    }

    /// Slots that can hold work requests.
    pub fn capacity(&self) -> u32 {
        self.q.mask()
    }

    /// Receives posted and not yet consumed by the kernel.
    pub fn outstanding(&self) -> u32 {
        self.prod.wrapping_sub(self.q.load_consumer()) & self.q.mask()
    }

    /// Checks a receive against the queue's limits.
    pub fn validate(&self, sges: &[Sge]) -> Result<u32, PostError> {
        if sges.len() > self.max_sge as usize {
            return Err(PostError::TooManySges {
                given: sges.len(),
                max: self.max_sge,
            });
        }
        let length: u64 = sges.iter().map(|s| s.length as u64).sum();
        u32::try_from(length).map_err(|_| PostError::TooLong { length })
    }

    /// Posts one receive.
    ///
    /// # Safety
    /// Every SGE must name memory registered with its lkey that stays
    /// allocated while the device may write it.
    pub unsafe fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), PostError> {
        let length = self.validate(sges)?;
        let next = self.q.next(self.prod);
        if next == self.q.load_consumer() {
            return Err(PostError::QueueFull);
        }
        let mut h = [0u8; recv::SGES];
        put_u64(&mut h, recv::WR_ID, wr_id);
        put_u32(&mut h, recv::DMA_LENGTH, length);
        put_u32(&mut h, recv::DMA_RESID, length);
        put_u32(&mut h, recv::DMA_CUR_SGE, 0);
        put_u32(&mut h, recv::DMA_NUM_SGE, sges.len() as u32);
        put_u32(&mut h, recv::DMA_SGE_OFFSET, 0);
        let slot = self.q.slot(self.prod);
        // SAFETY: the slot is elem_size() bytes in the mapping and new()
        // checked it holds the header and max_sge SGEs (validate() bounds
        // sges.len()); the kernel reads it only after the release below.
        unsafe {
            core::ptr::copy_nonoverlapping(h.as_ptr(), slot, recv::SGES);
            for (i, s) in sges.iter().enumerate() {
                let mut e = [0u8; SGE_SIZE];
                put_u64(&mut e, 0, s.addr);
                put_u32(&mut e, 8, s.length);
                put_u32(&mut e, 12, s.lkey);
                core::ptr::copy_nonoverlapping(
                    e.as_ptr(),
                    slot.add(recv::SGES + i * SGE_SIZE),
                    SGE_SIZE,
                );
            }
        }
        self.prod = next;
        self.q.store_producer(next);
        Ok(())
    }
}

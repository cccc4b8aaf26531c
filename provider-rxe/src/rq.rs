//! The receive queue of a QP, or an SRQ: `rxe_recv_wqe`s in a shared ring.
//! Posting needs no system call: the kernel's responder reads the ring when
//! a message arrives.

use crate::queue::{Queue, SlotRing};
use crate::slot::Refused;
use crate::wqe::{recv, SGE_SIZE};
use crate::wr::Sge;
use crate::RingError;
use rverbs_types::PostError;
use uverbs_abi::rxe::{RxeDmaInfo, RxeRecvWqe};

/// Bytes of a receive WQE before its SGEs.
const HEADER: usize = recv::SGES;
const _: () = assert!(core::mem::size_of::<RxeRecvWqe>() == HEADER);

/// The producer side of an rxe RQ or SRQ.
#[derive(Debug)]
pub struct RecvQueue {
    q: SlotRing<HEADER>,
    prod: u32,
    max_sge: u32,
    /// Slots of the ring past the granted depth, which the queue never
    /// fills ([`RecvQueue::limit_depth`]).
    unused: u32,
    /// Slots known free: refilled from the consumer index only when it
    /// runs out (the kernel only ever frees more), as the send queue's.
    room: u32,
}

impl RecvQueue {
    /// Wraps a validated RQ/SRQ ring; fails if a slot cannot hold `max_sge`
    /// SGEs.
    pub fn new(q: Queue, max_sge: u32) -> Result<RecvQueue, RingError> {
        let need = HEADER + max_sge as usize * SGE_SIZE;
        let elem_size = q.elem_size();
        let too_small = RingError { elem_size, need };
        if elem_size < need {
            return Err(too_small);
        }
        let q = SlotRing::new(q).map_err(|_| too_small)?;
        let prod = q.queue().load_producer();
        Ok(RecvQueue {
            q,
            prod,
            max_sge,
            unused: 0,
            room: 0,
        })
    }

    /// Receives the queue may hold at once: the ring's slots less the one
    /// that stays empty, or the granted depth ([`RecvQueue::limit_depth`]).
    pub fn capacity(&self) -> u32 {
        self.q.queue().mask() - self.unused
    }

    /// Holds at most `max_wr` receives at once, where the ring holds more:
    /// the granted `max_recv_wr` (or an SRQ's `max_wr`), which is what the
    /// CQs were sized for (Linux 6.1's rxe makes the ring larger).
    pub fn limit_depth(&mut self, max_wr: u32) {
        let mask = self.q.queue().mask();
        self.unused = mask - max_wr.min(mask);
        self.room = 0;
    }

    /// Receives posted and not yet consumed by the kernel.
    pub fn outstanding(&self) -> u32 {
        let q = self.q.queue();
        self.prod.wrapping_sub(q.load_consumer()) & q.mask()
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
        u32::try_from(length).map_err(|_| PostError::TooLong {
            length,
            max: u32::MAX.into(),
        })
    }

    /// Posts one receive.
    ///
    /// # Safety
    /// Every SGE names memory registered under its lkey. The device may
    /// write it until the receive completes or the registration is gone:
    /// until then the caller keeps it allocated, and reaches it only in
    /// ways the device's concurrent writes cannot make undefined (no Rust
    /// references into it).
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    #[inline]
    pub unsafe fn post(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), PostError> {
        self.post_checked(wr_id, sges)
    }

    /// [`RecvQueue::post`]: validate, build, publish.
    #[inline(always)]
    fn post_checked(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), PostError> {
        let length = self.validate(sges)?;
        let q = self.q.queue();
        let next = q.next(self.prod);
        if self.room == 0 {
            // The ring's free slots, less those past the depth (a consumer
            // index that claims more in flight than the depth, untrusted,
            // leaves none).
            let free = q.mask() - (self.prod.wrapping_sub(q.load_consumer()) & q.mask());
            if free <= self.unused {
                return Err(PostError::QueueFull);
            }
            self.room = free - self.unused;
        }
        let mut w = self.q.slot_mut(self.prod);
        let elem_size = w.len();
        let refused = |r: Refused| PostError::WqeTooLarge {
            bytes: r.end(),
            max: elem_size,
        };
        // The whole header, reserved fields included, then the SGEs (new()
        // checked that max_sge of them fit, validate() bounds the count).
        // The kernel reads the slot only after the release store below.
        let header = RxeRecvWqe {
            wr_id,
            reserved: 0,
            padding: 0,
            dma: RxeDmaInfo {
                length,
                resid: length,
                cur_sge: 0,
                num_sge: sges.len() as u32,
                sge_offset: 0,
                reserved: 0,
            },
        };
        w.put(0, header).map_err(refused)?;
        w.sges(HEADER, sges).map_err(refused)?;
        self.prod = next;
        self.room -= 1;
        self.q.queue().store_producer(next);
        Ok(())
    }
}

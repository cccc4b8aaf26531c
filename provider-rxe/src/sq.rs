//! The send queue: build `rxe_send_wqe`s in the shared SQ ring.
//!
//! Posting writes the producer slot and release-stores the producer index;
//! the kernel only looks at the ring when told to, so the caller must then
//! ring the doorbell (a `POST_SEND` command with no work requests, which
//! makes rxe run its requester for this QP). One doorbell may cover a whole
//! list of posts.

use crate::queue::Queue;
use crate::wqe::{put_u32, put_u64, send, SGE_SIZE};
use crate::wr::{opcode, send_flags, Payload, SendWr};
use crate::PostError;

/// Bytes of a send WQE before its SGEs / inline data.
const HEADER: usize = send::PAYLOAD;

/// The producer side of an rxe SQ.
#[derive(Debug)]
pub struct SendQueue {
    q: Queue,
    prod: u32,
    ssn: u32,
    max_sge: u32,
    max_inline: u32,
    ud: bool,
}

impl SendQueue {
    /// Wraps a validated SQ ring with the QP's negotiated capabilities.
    ///
    /// Fails if the ring's slots cannot hold a WQE with `max_sge` SGEs or
    /// `max_inline` bytes (the kernel sized them; a smaller slot would mean
    /// a corrupted header).
    pub fn new(q: Queue, max_sge: u32, max_inline: u32, ud: bool) -> Result<SendQueue, PostError> {
        let need = HEADER + (max_sge as usize * SGE_SIZE).max(max_inline as usize);
        if q.elem_size() < need {
            return Err(PostError::RingTooSmall {
                elem_size: q.elem_size(),
                need,
            });
        }
        // Start where the ring is: a fresh QP's indices are 0, but taking
        // the header's value keeps us in step with the kernel either way.
        let prod = q.load_producer();
        Ok(SendQueue {
            q,
            prod,
            ssn: 0,
            max_sge,
            max_inline,
            ud,
        })
    }

    /// Slots that can hold work requests (one of the ring's stays empty).
    pub fn capacity(&self) -> u32 {
        self.q.mask()
    }

    /// Work requests posted but not yet consumed by the kernel.
    pub fn outstanding(&self) -> u32 {
        self.prod.wrapping_sub(self.q.load_consumer()) & self.q.mask()
    }

    /// Validates `wr` against the queue's limits without posting it.
    pub fn validate(&self, wr: &SendWr<'_>) -> Result<u32, PostError> {
        let length: u64 = match wr.payload {
            Payload::Sges(sges) => {
                if sges.len() > self.max_sge as usize {
                    return Err(PostError::TooManySges {
                        given: sges.len(),
                        max: self.max_sge,
                    });
                }
                sges.iter().map(|s| s.length as u64).sum()
            }
            Payload::Inline(data) => {
                if data.len() > self.max_inline as usize {
                    return Err(PostError::InlineTooLong {
                        given: data.len(),
                        max: self.max_inline,
                    });
                }
                if matches!(
                    wr.opcode,
                    opcode::RDMA_READ | opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD
                ) {
                    return Err(PostError::InlineNotAllowed { opcode: wr.opcode });
                }
                data.len() as u64
            }
        };
        let length = u32::try_from(length).map_err(|_| PostError::TooLong { length })?;
        match wr.opcode {
            opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD => {
                if length < 8 || wr.remote_addr & 7 != 0 {
                    return Err(PostError::BadAtomic);
                }
            }
            opcode::RDMA_WRITE
            | opcode::RDMA_WRITE_WITH_IMM
            | opcode::SEND
            | opcode::SEND_WITH_IMM
            | opcode::RDMA_READ => {}
            other => return Err(PostError::UnsupportedOpcode { opcode: other }),
        }
        if self.ud != wr.ud.is_some() {
            return Err(PostError::UdMismatch { qp_is_ud: self.ud });
        }
        Ok(length)
    }

    /// Posts one work request: validates it, writes the WQE into the
    /// producer slot and publishes it. The caller rings the doorbell.
    ///
    /// # Safety
    /// Every SGE of an `Sges` payload must name memory registered with the
    /// lkey it gives (the kernel checks lkeys and bounds, but the caller's
    /// promise is what keeps the memory alive and unaliased while the
    /// device uses it).
    pub unsafe fn post(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        let length = self.validate(wr)?;
        let next = self.q.next(self.prod);
        if next == self.q.load_consumer() {
            return Err(PostError::QueueFull);
        }
        let mut h = [0u8; HEADER];
        put_u64(&mut h, send::WR_ID, wr.wr_id);
        put_u32(&mut h, send::OPCODE, wr.opcode);
        let inline = matches!(wr.payload, Payload::Inline(_));
        let flags = (wr.flags & !send_flags::INLINE) | if inline { send_flags::INLINE } else { 0 };
        put_u32(&mut h, send::SEND_FLAGS, flags);
        put_u32(&mut h, send::EX_IMM, wr.imm_data);
        match wr.opcode {
            opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD => {
                put_u64(&mut h, send::ATOMIC_REMOTE_ADDR, wr.remote_addr);
                put_u64(&mut h, send::ATOMIC_COMPARE_ADD, wr.compare_add);
                put_u64(&mut h, send::ATOMIC_SWAP, wr.swap);
                put_u32(&mut h, send::ATOMIC_RKEY, wr.rkey);
            }
            opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM | opcode::RDMA_READ => {
                put_u64(&mut h, send::RDMA_REMOTE_ADDR, wr.remote_addr);
                put_u32(&mut h, send::RDMA_RKEY, wr.rkey);
            }
            _ => {
                if let Some(ud) = wr.ud {
                    put_u32(&mut h, send::UD_REMOTE_QPN, ud.remote_qpn);
                    put_u32(&mut h, send::UD_REMOTE_QKEY, ud.remote_qkey);
                    put_u32(&mut h, send::UD_AH_NUM, ud.ah_num);
                }
            }
        }
        // status and state stay 0 (posted); the kernel fills the rest.
        put_u64(&mut h, send::IOVA, wr.remote_addr);
        put_u32(&mut h, send::SSN, self.ssn);
        put_u32(&mut h, send::DMA_LENGTH, length);
        put_u32(&mut h, send::DMA_RESID, length);
        put_u32(&mut h, send::DMA_CUR_SGE, 0);
        put_u32(&mut h, send::DMA_SGE_OFFSET, 0);
        let slot = self.q.slot(self.prod);
        // SAFETY: slot is elem_size() bytes inside the mapping (Queue::slot)
        // and SendQueue::new checked elem_size >= HEADER + the largest
        // payload validate() accepts; the kernel does not read this slot
        // until the producer index below publishes it.
        unsafe {
            core::ptr::copy_nonoverlapping(h.as_ptr(), slot, HEADER);
            match wr.payload {
                Payload::Sges(sges) => {
                    let num = sges.len() as u32;
                    core::ptr::copy_nonoverlapping(
                        num.to_ne_bytes().as_ptr(),
                        slot.add(send::DMA_NUM_SGE),
                        4,
                    );
                    for (i, s) in sges.iter().enumerate() {
                        let mut e = [0u8; SGE_SIZE];
                        put_u64(&mut e, 0, s.addr);
                        put_u32(&mut e, 8, s.length);
                        put_u32(&mut e, 12, s.lkey);
                        core::ptr::copy_nonoverlapping(
                            e.as_ptr(),
                            slot.add(HEADER + i * SGE_SIZE),
                            SGE_SIZE,
                        );
                    }
                }
                Payload::Inline(data) => {
                    // rdma-core reports the caller's SGE count here; the
                    // kernel's inline path reads only length/resid, so one
                    // piece is the honest count.
                    core::ptr::copy_nonoverlapping(
                        1u32.to_ne_bytes().as_ptr(),
                        slot.add(send::DMA_NUM_SGE),
                        4,
                    );
                    core::ptr::copy_nonoverlapping(data.as_ptr(), slot.add(HEADER), data.len());
                }
            }
        }
        self.ssn = self.ssn.wrapping_add(1);
        self.prod = next;
        self.q.store_producer(next);
        Ok(())
    }
}

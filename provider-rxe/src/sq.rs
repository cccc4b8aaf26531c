//! The send queue: build `rxe_send_wqe`s in the shared SQ ring.
//!
//! Posting writes the producer slot and release-stores the producer index;
//! the kernel only looks at the ring when told to, so the caller must then
//! ring the doorbell (a `POST_SEND` command with no work requests, which
//! makes rxe run its requester for this QP). One doorbell may cover a whole
//! list of posts.

use crate::queue::Queue;
use crate::wqe::{send, Slot, SGE_SIZE};
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

    /// Validates `wr` against the queue's limits without posting it, and
    /// returns its total length.
    #[inline]
    pub fn validate(&self, wr: &SendWr<'_>) -> Result<u32, PostError> {
        self.check(wr)?;
        let length: u64 = match wr.payload {
            Payload::Sges(sges) => sges.iter().map(|s| s.length as u64).sum(),
            Payload::Inline(data) => data.len() as u64,
        };
        check_length(wr, length)
    }

    /// Every check that does not need the total length: SGE count, inline
    /// size and opcode, the opcode itself, UD-ness.
    #[inline(always)]
    fn check(&self, wr: &SendWr<'_>) -> Result<(), PostError> {
        match wr.payload {
            Payload::Sges(sges) => {
                if sges.len() > self.max_sge as usize {
                    return Err(PostError::TooManySges {
                        given: sges.len(),
                        max: self.max_sge,
                    });
                }
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
            }
        }
        match wr.opcode {
            opcode::ATOMIC_CMP_AND_SWP
            | opcode::ATOMIC_FETCH_AND_ADD
            | opcode::RDMA_WRITE
            | opcode::RDMA_WRITE_WITH_IMM
            | opcode::SEND
            | opcode::SEND_WITH_IMM
            | opcode::RDMA_READ => {}
            other => return Err(PostError::UnsupportedOpcode { opcode: other }),
        }
        if self.ud != wr.ud.is_some() {
            return Err(PostError::UdMismatch { qp_is_ud: self.ud });
        }
        Ok(())
    }

    /// Posts one work request: validates it, writes the WQE into the
    /// producer slot and publishes it. The caller rings the doorbell.
    ///
    /// # Safety
    /// Every SGE of an `Sges` payload must name memory registered with the
    /// lkey it gives (the kernel checks lkeys and bounds, but the caller's
    /// promise is what keeps the memory alive and unaliased while the
    /// device uses it).
    #[inline]
    pub unsafe fn post(&mut self, wr: &SendWr<'_>) -> Result<(), PostError> {
        self.check(wr)?;
        let next = self.q.next(self.prod);
        if next == self.q.load_consumer() {
            return Err(PostError::QueueFull);
        }
        let slot = self.q.slot(self.prod);
        let inline = matches!(wr.payload, Payload::Inline(_));
        let flags = (wr.flags & !send_flags::INLINE) | if inline { send_flags::INLINE } else { 0 };
        // Alignment: the base is 8-aligned (Queue::new checks), data starts
        // at 384 and elem_size is a power of two >= 256, so the slot and
        // every field offset below are naturally aligned. Plain stores
        // suffice: the kernel reads the slot only after the release store
        // of the producer index below.
        // SAFETY: the slot is elem_size() bytes inside the mapping, which
        // SendQueue::new checked holds HEADER + the largest valid payload.
        unsafe {
            let w = Slot(slot);
            // Zero the opcode-specific union as rdma-core does, so that no
            // field of another opcode carries a stale value from the slot's
            // last use.
            core::ptr::write_bytes(slot.add(send::WR_UNION), 0, send::WR_UNION_LEN);
            w.u64(send::WR_ID, wr.wr_id);
            w.u32(send::WR_RESERVED, 0);
            w.u32(send::OPCODE, wr.opcode);
            w.u32(send::SEND_FLAGS, flags);
            w.u32(send::EX_IMM, wr.imm_data);
            match wr.opcode {
                opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD => {
                    w.u64(send::ATOMIC_REMOTE_ADDR, wr.remote_addr);
                    w.u64(send::ATOMIC_COMPARE_ADD, wr.compare_add);
                    w.u64(send::ATOMIC_SWAP, wr.swap);
                    w.u32(send::ATOMIC_RKEY, wr.rkey);
                }
                opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM | opcode::RDMA_READ => {
                    w.u64(send::RDMA_REMOTE_ADDR, wr.remote_addr);
                    w.u32(send::RDMA_RKEY, wr.rkey);
                }
                _ => {
                    if let Some(ud) = wr.ud {
                        w.u32(send::UD_REMOTE_QPN, ud.remote_qpn);
                        w.u32(send::UD_REMOTE_QKEY, ud.remote_qkey);
                        w.u32(send::UD_AH_NUM, ud.ah_num);
                    }
                }
            }
            // Posted state; the kernel's requester fills its own fields,
            // which start from zero as in a fresh WQE.
            w.u32(send::STATUS, 0);
            w.u32(send::STATE, 0);
            w.u64(send::IOVA, wr.remote_addr);
            w.u32(send::MASK, 0);
            w.u32(send::FIRST_PSN, 0);
            w.u32(send::LAST_PSN, 0);
            w.u32(send::ACK_LENGTH, 0);
            w.u32(send::SSN, self.ssn);
            w.u32(send::HAS_RD_ATOMIC, 0);
            w.u32(send::DMA_CUR_SGE, 0);
            w.u32(send::DMA_SGE_OFFSET, 0);
            w.u32(send::DMA_RESERVED, 0);
            // The SGEs are copied and summed in one pass; the length
            // checks come after, and a failure leaves the slot unpublished.
            let total: u64 = match wr.payload {
                Payload::Sges(sges) => {
                    w.u32(send::DMA_NUM_SGE, sges.len() as u32);
                    let mut total = 0u64;
                    for (i, s) in sges.iter().enumerate() {
                        let off = HEADER + i * SGE_SIZE;
                        w.u64(off, s.addr);
                        w.u32(off + 8, s.length);
                        w.u32(off + 12, s.lkey);
                        total += s.length as u64;
                    }
                    total
                }
                Payload::Inline(data) => {
                    // rdma-core reports the caller's SGE count here; the
                    // kernel's inline path reads only length/resid, so one
                    // piece is the honest count.
                    w.u32(send::DMA_NUM_SGE, 1);
                    core::ptr::copy_nonoverlapping(data.as_ptr(), slot.add(HEADER), data.len());
                    data.len() as u64
                }
            };
            let length = check_length(wr, total)?;
            w.u32(send::DMA_LENGTH, length);
            w.u32(send::DMA_RESID, length);
        }
        self.ssn = self.ssn.wrapping_add(1);
        self.prod = next;
        self.q.store_producer(next);
        Ok(())
    }
}

/// The checks that need the work request's total length.
#[inline(always)]
fn check_length(wr: &SendWr<'_>, length: u64) -> Result<u32, PostError> {
    let length = u32::try_from(length).map_err(|_| PostError::TooLong { length })?;
    if matches!(
        wr.opcode,
        opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD
    ) && (length < 8 || wr.remote_addr & 7 != 0)
    {
        return Err(PostError::BadAtomic);
    }
    Ok(length)
}

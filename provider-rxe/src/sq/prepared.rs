//! Prepared sends: a WQE built and checked once, posted many times.
//!
//! A program whose sends repeat one shape (the same operation, flags,
//! rkey or destination; another buffer, remote address and id each time)
//! pays for the checks and the operation's dispatch once, in
//! [`SendQueue::prepare`]. Each post then copies the fixed part of
//! `struct rxe_send_wqe` and stores what varies: the work request id, the
//! send sequence number, the one SGE, its length, and the remote address
//! of a WRITE or READ. The bytes in the slot are those [`SendQueue::post`]
//! writes for the same request (the tests compare them).

use super::{write_wqe, SendQueue, HEADER};
use crate::slot::SlotMut;
use crate::wqe::{send, SGE_SIZE};
use crate::wr::{AddressHandle, AsSge, SendWr, Sge};
use rverbs_types::{check_preparable, PostError};

/// Words of the WQE's fixed part.
const WORDS: usize = HEADER / 8;
const _: () = assert!(HEADER % 8 == 0);

/// A send WQE prepared for one queue's requests of one shape.
#[derive(Debug, Clone)]
pub struct SendTemplate {
    /// The fixed part, as [`SendQueue::post`] would write it for the
    /// prepared request (id, SSN, lengths and SGE replaced at each post).
    wqe: [u64; WORDS],
    /// The operation names remote memory: a post may move its address.
    remote: bool,
    /// `enum ib_uverbs_wr_opcode`, for errors.
    opcode: u32,
}

impl SendTemplate {
    /// Whether posts may give a remote address (WRITE and READ).
    pub fn takes_remote_address(&self) -> bool {
        self.remote
    }
}

impl SendQueue {
    /// Checks `wr` as [`SendQueue::post`] would and builds its WQE's fixed
    /// part, for [`SendQueue::post_prepared_unpublished`]. Its shape must be
    /// one [`check_preparable`] accepts: SEND, SEND with immediate, WRITE,
    /// WRITE with immediate or READ, one SGE, no inline data. Its SGE
    /// names no memory yet: each post gives one.
    pub fn prepare<S: AsSge, A: AddressHandle>(
        &self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<SendTemplate, PostError> {
        let remote = check_preparable(wr)?;
        self.check(wr)?;
        // The fixed part and one SGE, built where the ring's own would be.
        let mut buf = [0u64; WORDS + SGE_SIZE / 8];
        let mut w = SlotMut::<HEADER>::over_words(&mut buf);
        write_wqe(&mut w, wr, 0).map_err(|e| e.post_error(HEADER + SGE_SIZE))?;
        let mut wqe = [0u64; WORDS];
        wqe.copy_from_slice(&buf[..WORDS]);
        Ok(SendTemplate {
            wqe,
            remote,
            opcode: wr.op.opcode(),
        })
    }

    /// Posts the request `t` was prepared for, with work request id
    /// `wr_id`, the payload `sge`, and for a WRITE or READ the remote
    /// address `remote_addr` (`None`: the prepared one), without publishing
    /// it ([`SendQueue::publish`]; then the doorbell).
    ///
    /// Refused: a remote address for a SEND
    /// ([`PostError::NoRemoteAddress`]), and a full queue.
    ///
    /// # Safety
    /// As for [`SendQueue::post`], for `sge`; and `t` was
    /// prepared by this queue (another queue's limits, transport or AH
    /// numbers may differ).
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    pub unsafe fn post_prepared_unpublished(
        &mut self,
        t: &SendTemplate,
        wr_id: u64,
        sge: Sge,
        remote_addr: Option<u64>,
    ) -> Result<(), PostError> {
        if remote_addr.is_some() && !t.remote {
            return Err(PostError::NoRemoteAddress { opcode: t.opcode });
        }
        self.ensure_room()?;
        let next = self.q.queue().next(self.prod);
        let mut w = self.q.slot_mut(self.prod);
        let elem_size = w.len();
        w.fixed(&t.wqe);
        // Constant offsets inside the fixed part: checked at compile time.
        let fits = |r: crate::slot::Refused| PostError::WqeTooLarge {
            bytes: r.end(),
            max: elem_size,
        };
        w.u64(send::WR_ID, wr_id).map_err(fits)?;
        w.u32(send::SSN, self.ssn).map_err(fits)?;
        w.u32(send::DMA_LENGTH, sge.length).map_err(fits)?;
        w.u32(send::DMA_RESID, sge.length).map_err(fits)?;
        if let Some(addr) = remote_addr {
            w.u64(send::RDMA_REMOTE_ADDR, addr).map_err(fits)?;
            w.u64(send::IOVA, addr).map_err(fits)?;
        }
        // The one store past the fixed part, checked against the slot (a
        // queue of no SGEs refused the request at prepare).
        w.sges(send::PAYLOAD, core::slice::from_ref(&sge))
            .map_err(fits)?;
        self.ssn = self.ssn.wrapping_add(1);
        self.prod = next;
        // As `post` does: a batch's pieces never reach this slot.
        self.build.posted(next);
        self.room -= 1;
        Ok(())
    }
}

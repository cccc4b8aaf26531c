//! Prepared sends: a request checked and laid out once, then posted many
//! times with only what changes (rdma-core's `ibv_wr_*` builders serve
//! the same need; here the unchanging part is built once, not per post).

use super::{Qp, SendWr};
use crate::ah::Ah;
use crate::error::{Error, Result};
use crate::provider::SendTemplate;
use crate::wr::Slice;

/// A send request whose shape repeats, prepared by [`Qp::prepare_send`]
/// for that QP: its operation, flags, immediate data, rkey and, on a UD
/// QP, its destination. [`Qp::post_prepared`] posts it with a work request
/// id, one MR slice and, for a WRITE or READ, a remote address.
///
/// It holds no memory of the program's: the slice each post names is
/// borrowed for that post only, as with [`Qp::post_send`]. On a UD QP it
/// holds its address handle, and the QP keeps that AH for every send
/// posted with it until the send has completed, as for [`Qp::post_send`].
#[derive(Debug, Clone)]
pub struct PreparedSend {
    /// The user handle of the QP that prepared it (unique in the process).
    qp: u64,
    template: SendTemplate,
    ah: Option<Ah>,
}

impl PreparedSend {
    /// Whether a post may give a remote address (WRITE and READ).
    pub fn takes_remote_address(&self) -> bool {
        self.template.takes_remote_address()
    }
}

impl Qp {
    /// Checks `wr` as [`Qp::post_send`] would and prepares it to be posted
    /// many times by [`Qp::post_prepared`].
    ///
    /// The shape is one of SEND, SEND with immediate, RDMA WRITE, WRITE
    /// with immediate and RDMA READ, with exactly one SGE (its slice shows
    /// the shape; each post names its own) and no inline data; anything
    /// else is refused by name ([`crate::PostError::NotPreparable`]), as is
    /// whatever [`Qp::post_send`] would refuse.
    pub fn prepare_send(&self, wr: &SendWr<'_>) -> Result<PreparedSend> {
        let template = self.send.prepare(wr)?;
        Ok(PreparedSend {
            qp: self.inner.user_handle,
            template,
            ah: wr.ud.map(|u| u.ah.clone()),
        })
    }

    /// Posts the send `p` was prepared for, with work request id `wr_id`,
    /// the payload `local`, and for a WRITE or READ the remote address
    /// `remote_addr` (`None`: the one it was prepared with), then rings the
    /// doorbell: [`Qp::post_send`] of that request, without building it.
    ///
    /// Refused as [`Qp::post_send`] refuses (a QP not yet in RTS, a full
    /// queue), and: a send prepared by another QP, a remote address for a
    /// SEND ([`crate::PostError::NoRemoteAddress`]).
    #[inline]
    pub fn post_prepared(
        &mut self,
        p: &PreparedSend,
        wr_id: u64,
        local: Slice<'_>,
        remote_addr: Option<u64>,
    ) -> Result<()> {
        if p.qp != self.inner.user_handle {
            return Err(another_qp());
        }
        if !self.inner.can_send() {
            return Err(self.not_ready());
        }
        let slot = self.send.slot_cursor();
        self.send
            .post_prepared(&p.template, wr_id, local, remote_addr)?;
        if let (Some(keep), Some((slot, _))) = (&mut self.ahs, slot) {
            // Posted: the slot now holds a send naming the AH, which must
            // outlive it (it is reused only after the send completed).
            keep.put_ah(slot, p.ah.as_ref());
        }
        Ok(())
    }
}

#[cold]
fn another_qp() -> Error {
    Error::invalid("post_prepared: the send was prepared by another QP")
}

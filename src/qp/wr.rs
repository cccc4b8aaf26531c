//! Work requests of the safe API: memory is named by checked MR slices.

use crate::mr::Slice;
use provider_rxe::wr::{opcode, send_flags};
use provider_rxe::{Payload, Sge};

/// A remote buffer: address and rkey, as the peer advertised them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The peer's virtual address.
    pub addr: u64,
    /// The peer MR's rkey.
    pub rkey: u32,
}

/// What a send work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data (host order; sent big-endian).
    SendWithImm(u32),
    /// RDMA WRITE to `Remote`.
    Write(Remote),
    /// RDMA WRITE with immediate (consumes a receive at the peer).
    WriteWithImm(Remote, u32),
    /// RDMA READ from `Remote` into the SGEs.
    Read(Remote),
    /// 64-bit compare-and-swap at `remote`; the old value lands in the SGE.
    CompareSwap {
        /// Where (8-byte aligned).
        remote: Remote,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 64-bit fetch-and-add at `remote`; the old value lands in the SGE.
    FetchAdd {
        /// Where (8-byte aligned).
        remote: Remote,
        /// Addend.
        add: u64,
    },
}

/// The destination of a UD send.
#[derive(Debug, Clone, Copy)]
pub struct Ud<'a> {
    /// Where the peer is.
    pub ah: &'a crate::Ah,
    /// The peer's QP number.
    pub remote_qpn: u32,
    /// The peer's Q_Key.
    pub remote_qkey: u32,
}

/// One send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local memory to gather from (or scatter into, for READ/atomics).
    pub sges: &'a [Slice<'a>],
    /// Bytes to copy into the WQE instead of `sges` (sends and writes).
    pub inline: Option<&'a [u8]>,
    /// Generate a completion.
    pub signaled: bool,
    /// Set the solicited-event bit.
    pub solicited: bool,
    /// Wait for earlier READs and atomics first.
    pub fence: bool,
    /// The destination, on a UD QP.
    pub ud: Option<Ud<'a>>,
}

impl<'a> SendWr<'a> {
    /// A signaled work request of `op` over `sges`.
    pub fn new(wr_id: u64, op: SendOp, sges: &'a [Slice<'a>]) -> SendWr<'a> {
        SendWr {
            wr_id,
            op,
            sges,
            inline: None,
            signaled: true,
            solicited: false,
            fence: false,
            ud: None,
        }
    }

    /// A signaled work request of `op` whose payload is copied at post time.
    pub fn inline(wr_id: u64, op: SendOp, data: &'a [u8]) -> SendWr<'a> {
        SendWr {
            inline: Some(data),
            ..SendWr::new(wr_id, op, &[])
        }
    }

    /// Sets whether the work request generates a completion.
    pub fn signaled(mut self, yes: bool) -> Self {
        self.signaled = yes;
        self
    }

    /// Sets the solicited-event bit.
    pub fn solicited(mut self, yes: bool) -> Self {
        self.solicited = yes;
        self
    }

    /// Sends to `ah`/`remote_qpn`/`remote_qkey` (UD QPs).
    pub fn to(mut self, ah: &'a crate::Ah, remote_qpn: u32, remote_qkey: u32) -> Self {
        self.ud = Some(Ud {
            ah,
            remote_qpn,
            remote_qkey,
        });
        self
    }

    /// Sets the fence bit.
    pub fn fence(mut self, yes: bool) -> Self {
        self.fence = yes;
        self
    }

    /// The provider's view, with SGEs written into `sges`. Inlined into
    /// post_send so the intermediate struct never reaches memory.
    #[inline(always)]
    pub(crate) fn as_rxe(&self) -> Result<provider_rxe::SendWr<'a>, String> {
        let payload = match self.inline {
            Some(data) => {
                if !self.sges.is_empty() {
                    return Err("both inline data and SGEs given".into());
                }
                Payload::Inline(data)
            }
            None => Payload::Sges(sges_of(self.sges)?),
        };
        let (op, remote, imm, compare_add, swap) = match self.op {
            SendOp::Send => (opcode::SEND, None, 0, 0, 0),
            SendOp::SendWithImm(i) => (opcode::SEND_WITH_IMM, None, i, 0, 0),
            SendOp::Write(r) => (opcode::RDMA_WRITE, Some(r), 0, 0, 0),
            SendOp::WriteWithImm(r, i) => (opcode::RDMA_WRITE_WITH_IMM, Some(r), i, 0, 0),
            SendOp::Read(r) => (opcode::RDMA_READ, Some(r), 0, 0, 0),
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            } => (opcode::ATOMIC_CMP_AND_SWP, Some(remote), 0, compare, swap),
            SendOp::FetchAdd { remote, add } => {
                (opcode::ATOMIC_FETCH_AND_ADD, Some(remote), 0, add, 0)
            }
        };
        let mut flags = 0;
        if self.signaled {
            flags |= send_flags::SIGNALED;
        }
        if self.solicited {
            flags |= send_flags::SOLICITED;
        }
        if self.fence {
            flags |= send_flags::FENCE;
        }
        let mut wr = provider_rxe::SendWr::new(self.wr_id, op, payload);
        wr.flags = flags;
        wr.imm_data = imm.to_be();
        if let Some(r) = remote {
            wr.remote_addr = r.addr;
            wr.rkey = r.rkey;
        }
        wr.compare_add = compare_add;
        wr.swap = swap;
        wr.ud = self.ud.map(|u| provider_rxe::UdDest {
            remote_qpn: u.remote_qpn,
            remote_qkey: u.remote_qkey,
            ah_num: u.ah.inner.ah_num,
        });
        Ok(wr)
    }
}

/// One receive work request.
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message lands.
    pub sges: &'a [Slice<'a>],
}

/// The SGE list of a work request's slices (checked against the safe
/// API's limit), without copying.
#[inline(always)]
pub(crate) fn sges_of<'s>(from: &'s [Slice<'_>]) -> Result<&'s [Sge], String> {
    if from.len() > super::MAX_SGE {
        return Err(format!(
            "{} SGEs, at most {} per work request",
            from.len(),
            super::MAX_SGE
        ));
    }
    Ok(crate::mr::as_sges(from))
}

//! Work requests as this provider takes them: raw addresses and keys. The
//! safe API above builds these from memory regions it has checked.

use crate::seg::{opcode, DatagramSeg};

/// One gather/scatter element (`struct ibv_sge`).
#[repr(C)] // the root crate lays its MR slices out as this
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address inside a registered memory region.
    pub addr: u64,
    /// Length in bytes. Zero-length elements are skipped when the WQE is
    /// built (the device would read a zero byte count as 2 GiB).
    pub length: u32,
    /// The region's lkey.
    pub lkey: u32,
}

/// Where an RDMA or atomic operation acts on the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Remote {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// The operation of a send work request, with its operands.
///
/// Immediate data is the host-order value the receiver's completion will
/// report; it travels big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm {
        /// The immediate.
        imm: u32,
    },
    /// RDMA WRITE.
    Write {
        /// Destination.
        remote: Remote,
    },
    /// RDMA WRITE with immediate (consumes a receive at the peer).
    WriteImm {
        /// Destination.
        remote: Remote,
        /// The immediate.
        imm: u32,
    },
    /// RDMA READ into the local scatter list.
    Read {
        /// Source.
        remote: Remote,
    },
    /// 64-bit compare and swap; the original value lands in the local SGE.
    CompareSwap {
        /// Target (8-byte aligned).
        remote: Remote,
        /// Compared with the target.
        compare: u64,
        /// Stored if equal.
        swap: u64,
    },
    /// 64-bit fetch and add; the original value lands in the local SGE.
    FetchAdd {
        /// Target (8-byte aligned).
        remote: Remote,
        /// Added to the target.
        add: u64,
    },
    /// No operation: a WQE that only completes (useful to retire a run of
    /// unsignaled WQEs).
    Nop,
}

impl SendOp {
    /// The mlx5 opcode (`MLX5_OPCODE_*`).
    pub fn opcode(&self) -> u8 {
        match self {
            SendOp::Send => opcode::SEND,
            SendOp::SendImm { .. } => opcode::SEND_IMM,
            SendOp::Write { .. } => opcode::RDMA_WRITE,
            SendOp::WriteImm { .. } => opcode::RDMA_WRITE_IMM,
            SendOp::Read { .. } => opcode::RDMA_READ,
            SendOp::CompareSwap { .. } => opcode::ATOMIC_CS,
            SendOp::FetchAdd { .. } => opcode::ATOMIC_FA,
            SendOp::Nop => opcode::NOP,
        }
    }

    /// The immediate carried in the control segment (0 when none).
    pub fn imm(&self) -> u32 {
        match *self {
            SendOp::SendImm { imm } | SendOp::WriteImm { imm, .. } => imm,
            _ => 0,
        }
    }

    /// The remote operand, for RDMA and atomics.
    pub fn remote(&self) -> Option<Remote> {
        match *self {
            SendOp::Write { remote }
            | SendOp::WriteImm { remote, .. }
            | SendOp::Read { remote }
            | SendOp::CompareSwap { remote, .. }
            | SendOp::FetchAdd { remote, .. } => Some(remote),
            _ => None,
        }
    }

    /// True for the two atomics.
    pub fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }
}

bitflags::bitflags! {
    /// Per-request flags (`IBV_SEND_*` without INLINE: the payload says
    /// that).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct SendFlags: u8 {
        /// Generate a completion. Unsignaled requests complete silently
        /// when a later signaled one does.
        const SIGNALED = 1;
        /// Raise a solicited event at the receiver.
        const SOLICITED = 2;
        /// Wait for earlier RDMA READs and atomics to finish first.
        const FENCE = 4;
    }
}

/// The data of a send work request.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// Gather from (or, for READ and atomics, scatter to) registered memory.
    Sges(&'a [Sge]),
    /// Copy these bytes into the WQE at post time (`IBV_SEND_INLINE`):
    /// SEND and WRITE only.
    Inline(&'a [u8]),
}

/// Where a UD send goes: the address handle's vector and the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// The address vector built when the address handle was created.
    pub av: DatagramSeg,
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub qkey: u32,
}

/// One send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// What to do.
    pub op: SendOp,
    /// Signaled, solicited, fence.
    pub flags: SendFlags,
    /// The data.
    pub payload: Payload<'a>,
    /// The destination of a UD send (`None` on connected QPs).
    pub ud: Option<&'a UdDest>,
}

impl<'a> SendWr<'a> {
    /// A signaled request with no UD destination.
    pub fn new(wr_id: u64, op: SendOp, payload: Payload<'a>) -> SendWr<'a> {
        SendWr {
            wr_id,
            op,
            flags: SendFlags::SIGNALED,
            payload,
            ud: None,
        }
    }
}

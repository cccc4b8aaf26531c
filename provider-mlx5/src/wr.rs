//! Work requests as this provider takes them: the verbs vocabulary of
//! `rverbs-types`, over any SGE-shaped elements and any address handle
//! that carries an mlx5 address vector ([`AhAddr::Vector`]). The safe API
//! posts its own requests here unchanged.
//!
//! The one mlx5 operation that is not an IB verb, the NOP (a WQE that
//! only completes), has its own method, [`crate::SendQueue::post_nop`].

pub use rverbs_types::{
    as_sges, AddressHandle, AhAddr, AsSge, FlushLevel, FlushType, MwBind, RecvWr, Remote, SendOp,
    SendWr, Sge, Ud, AV_LEN,
};

use crate::seg::opcode;

/// The mlx5 opcode (`MLX5_OPCODE_*`) a send operation is posted with.
#[inline(always)]
pub fn mlx5_opcode(op: &SendOp) -> u8 {
    match op {
        SendOp::Send => opcode::SEND,
        SendOp::SendWithImm(_) => opcode::SEND_IMM,
        SendOp::Write(_) => opcode::RDMA_WRITE,
        SendOp::WriteWithImm(..) => opcode::RDMA_WRITE_IMM,
        SendOp::Read(_) => opcode::RDMA_READ,
        SendOp::CompareSwap { .. } => opcode::ATOMIC_CS,
        SendOp::FetchAdd { .. } => opcode::ATOMIC_FA,
        SendOp::SendWithInv(_) => opcode::SEND_INVAL,
        // Not implemented here: `plan` refuses every extended operation
        // (PostError::NotImplemented) before an opcode is needed, so these
        // name no WQE this crate writes.
        SendOp::LocalInv(_)
        | SendOp::AtomicWrite { .. }
        | SendOp::Flush { .. }
        | SendOp::BindMw(_) => opcode::NOP,
    }
}

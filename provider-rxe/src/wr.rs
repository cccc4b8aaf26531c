//! Work requests as the rxe provider takes them: raw addresses and keys.
//! The safe API above builds these from registered memory it has checked.

/// One scatter/gather element (`struct rxe_sge` / `ibv_sge`). `repr(C)`:
/// callers may lay their own types out identically and pass them as these.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address inside a registered MR.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The MR's lkey.
    pub lkey: u32,
}

/// Send opcodes (`enum ib_uverbs_wr_opcode`, the values rxe's SQ carries).
pub mod opcode {
    /// RDMA WRITE.
    pub const RDMA_WRITE: u32 = 0;
    /// RDMA WRITE with immediate.
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    /// SEND.
    pub const SEND: u32 = 2;
    /// SEND with immediate.
    pub const SEND_WITH_IMM: u32 = 3;
    /// RDMA READ.
    pub const RDMA_READ: u32 = 4;
    /// Atomic compare and swap.
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    /// Atomic fetch and add.
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
}

/// Send flags (`enum ib_uverbs_send_flags`).
pub mod send_flags {
    /// Wait for earlier RDMA READs and atomics before this one.
    pub const FENCE: u32 = 1;
    /// Generate a completion.
    pub const SIGNALED: u32 = 2;
    /// Set the solicited-event bit.
    pub const SOLICITED: u32 = 4;
    /// Copy the payload into the WQE.
    pub const INLINE: u32 = 8;
}

/// Where a UD send goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
    /// The AH's number from `rxe_create_ah_resp`.
    pub ah_num: u32,
}

/// The payload of a send work request.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// Gather from registered memory.
    Sges(&'a [Sge]),
    /// Copy these bytes into the WQE at post time (`IBV_SEND_INLINE`).
    Inline(&'a [u8]),
}

/// One send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// One of [`opcode`].
    pub opcode: u32,
    /// [`send_flags`], without INLINE (the payload says that).
    pub flags: u32,
    /// Immediate data, already in network byte order.
    pub imm_data: u32,
    /// Remote address (RDMA and atomics).
    pub remote_addr: u64,
    /// Remote key (RDMA and atomics).
    pub rkey: u32,
    /// Compare value (CAS) or addend (FAA).
    pub compare_add: u64,
    /// Swap value (CAS).
    pub swap: u64,
    /// UD destination.
    pub ud: Option<UdDest>,
    /// What to send, or where to read into.
    pub payload: Payload<'a>,
}

impl<'a> SendWr<'a> {
    /// A SEND of `payload` with every other field zero.
    pub fn new(wr_id: u64, opcode: u32, payload: Payload<'a>) -> SendWr<'a> {
        SendWr {
            wr_id,
            opcode,
            flags: 0,
            imm_data: 0,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ud: None,
            payload,
        }
    }
}

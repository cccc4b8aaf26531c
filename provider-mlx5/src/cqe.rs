//! The 64-byte completion queue entry (`struct mlx5_cqe64`, and its error
//! form `struct mlx5_err_cqe`) and its decoding.
//!
//! A CQE is copied out of the ring into a [`Cqe64`] (plain bytes: every
//! value is possible) and read through typed big-endian fields; nothing in
//! it is trusted beyond being a number.

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes in the CQE the device writes (the second half of a 128-byte CQE).
pub const CQE64_SIZE: usize = 64;

/// CQE opcodes (`MLX5_CQE_*`), the high nibble of `op_own`.
pub mod cqe_opcode {
    /// Requester completion (send queue).
    pub const REQ: u8 = 0;
    /// Responder: RDMA WRITE with immediate.
    pub const RESP_WR_IMM: u8 = 1;
    /// Responder: SEND.
    pub const RESP_SEND: u8 = 2;
    /// Responder: SEND with immediate.
    pub const RESP_SEND_IMM: u8 = 3;
    /// Responder: SEND with invalidate.
    pub const RESP_SEND_INV: u8 = 4;
    /// CQ resize marker.
    pub const RESIZE_CQ: u8 = 5;
    /// Tag matching without data.
    pub const NO_PACKET: u8 = 6;
    /// Signature error.
    pub const SIG_ERR: u8 = 12;
    /// Requester error.
    pub const REQ_ERR: u8 = 13;
    /// Responder error.
    pub const RESP_ERR: u8 = 14;
    /// Not yet written by the device.
    pub const INVALID: u8 = 15;
}

/// `op_own` bits besides the opcode.
pub mod op_own {
    /// The owner bit.
    pub const OWNER: u8 = 0x01;
    /// Solicited event.
    pub const SE: u8 = 0x02;
    /// Payload scattered into this 64-byte CQE (`MLX5_INLINE_SCATTER_32`).
    pub const INLINE_SCATTER_32: u8 = 0x04;
    /// Payload scattered into the preceding 64 bytes
    /// (`MLX5_INLINE_SCATTER_64`).
    pub const INLINE_SCATTER_64: u8 = 0x08;
}

/// `struct mlx5_cqe64` (the plain-completion arm of its leading union).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct Cqe64 {
    /// Reserved.
    pub rsvd0: [u8; 2],
    /// Striding-RQ WQE id.
    pub wqe_id: U16,
    /// Reserved.
    pub rsvd4: [u8; 13],
    /// Migration state and DLID path bits.
    pub ml_path: u8,
    /// Reserved.
    pub rsvd20: [u8; 4],
    /// Source LID.
    pub slid: U16,
    /// SL (bits 24..28), GRH (bits 28..30) and source QP (bits 0..24).
    pub flags_rqpn: U32,
    /// Header/IP extension bits.
    pub hds_ip_ext: u8,
    /// L4 header type etc.
    pub l4_hdr_type_etc: u8,
    /// VLAN.
    pub vlan_info: U16,
    /// SRQ number or user index (low 24 bits).
    pub srqn_uidx: U32,
    /// Immediate data, invalidated rkey, or P_Key index (low 16 bits).
    pub imm_inval_pkey: U32,
    /// Application id.
    pub app: u8,
    /// Application opcode.
    pub app_op: u8,
    /// Application info.
    pub app_info: U16,
    /// Bytes transferred.
    pub byte_cnt: U32,
    /// Timestamp; in an error CQE its last two bytes are the vendor
    /// syndrome and the syndrome.
    pub timestamp: U64,
    /// Send opcode (bits 24..32, requester) and QP number (bits 0..24).
    pub sop_drop_qpn: U32,
    /// The WQE counter of the completed WQE.
    pub wqe_counter: U16,
    /// Signature.
    pub signature: u8,
    /// Opcode (high nibble), inline-scatter, SE and owner bits.
    pub op_own: u8,
}

/// Byte offset of `vendor_err_synd` (`struct mlx5_err_cqe`).
pub const VENDOR_ERR_SYND_OFFSET: usize = 54;
/// Byte offset of `syndrome` (`struct mlx5_err_cqe`).
pub const SYNDROME_OFFSET: usize = 55;

const _: () = {
    assert!(core::mem::size_of::<Cqe64>() == CQE64_SIZE);
    assert!(core::mem::offset_of!(Cqe64, op_own) == 63);
    assert!(core::mem::offset_of!(Cqe64, timestamp) == 48);
};

impl Cqe64 {
    /// The CQE opcode (`mlx5dv_get_cqe_opcode`).
    pub fn opcode(&self) -> u8 {
        self.op_own >> 4
    }
    /// The owner bit (`mlx5dv_get_cqe_owner`).
    pub fn owner(&self) -> u8 {
        self.op_own & op_own::OWNER
    }
    /// The solicited-event bit (`mlx5dv_get_cqe_se`).
    pub fn se(&self) -> u8 {
        (self.op_own >> 1) & 1
    }
    /// The CQE format (`mlx5dv_get_cqe_format`).
    pub fn format(&self) -> u8 {
        (self.op_own >> 2) & 3
    }
    /// The local QP number.
    pub fn qpn(&self) -> u32 {
        self.sop_drop_qpn.get() & 0xff_ffff
    }
    /// The send opcode a requester CQE reports.
    pub fn send_opcode(&self) -> u8 {
        (self.sop_drop_qpn.get() >> 24) as u8
    }
    /// The SRQ number or user index.
    pub fn srqn_uidx(&self) -> u32 {
        self.srqn_uidx.get() & 0xff_ffff
    }
    /// The error syndrome (meaningful in REQ_ERR/RESP_ERR CQEs).
    pub fn syndrome(&self) -> u8 {
        self.as_bytes()[SYNDROME_OFFSET]
    }
    /// The vendor error syndrome (REQ_ERR/RESP_ERR CQEs).
    pub fn vendor_err_synd(&self) -> u8 {
        self.as_bytes()[VENDOR_ERR_SYND_OFFSET]
    }
}

/// The status of a completion: success, or the error its CQE's syndrome
/// (`MLX5_CQE_SYNDROME_*`) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Status {
    /// Success.
    #[default]
    Success,
    /// 0x01: local length error.
    LocalLength,
    /// 0x02: local QP operation error.
    LocalQpOp,
    /// 0x04: local protection error (bad lkey or bounds).
    LocalProt,
    /// 0x05: flushed because the QP is in the error state.
    WrFlush,
    /// 0x06: memory window bind error.
    MwBind,
    /// 0x10: bad response.
    BadResp,
    /// 0x11: local access error.
    LocalAccess,
    /// 0x12: remote invalid request.
    RemoteInvalReq,
    /// 0x13: remote access error (bad rkey, bounds or rights).
    RemoteAccess,
    /// 0x14: remote operation error.
    RemoteOp,
    /// 0x15: transport retry counter exceeded.
    RetryExceeded,
    /// 0x16: RNR retry counter exceeded.
    RnrRetryExceeded,
    /// 0x22: remote aborted.
    RemoteAborted,
    /// A syndrome this crate does not name (rdma-core: general error).
    Other(u8),
    /// Not an error syndrome: the device scattered the payload into the
    /// CQE (scatter-to-CQE), which this crate does not copy out; the
    /// request is retired but its data is not where it was asked to go.
    /// Create QPs without `MLX5_QP_FLAG_SCATTER_CQE`.
    ScatteredToCqe,
}

impl Status {
    /// The status an error CQE's syndrome names.
    pub fn from_syndrome(s: u8) -> Status {
        match s {
            0x01 => Status::LocalLength,
            0x02 => Status::LocalQpOp,
            0x04 => Status::LocalProt,
            0x05 => Status::WrFlush,
            0x06 => Status::MwBind,
            0x10 => Status::BadResp,
            0x11 => Status::LocalAccess,
            0x12 => Status::RemoteInvalReq,
            0x13 => Status::RemoteAccess,
            0x14 => Status::RemoteOp,
            0x15 => Status::RetryExceeded,
            0x16 => Status::RnrRetryExceeded,
            0x22 => Status::RemoteAborted,
            other => Status::Other(other),
        }
    }

    /// The syndrome value (0 for success).
    pub fn syndrome(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::LocalLength => 0x01,
            Status::LocalQpOp => 0x02,
            Status::LocalProt => 0x04,
            Status::WrFlush => 0x05,
            Status::MwBind => 0x06,
            Status::BadResp => 0x10,
            Status::LocalAccess => 0x11,
            Status::RemoteInvalReq => 0x12,
            Status::RemoteAccess => 0x13,
            Status::RemoteOp => 0x14,
            Status::RetryExceeded => 0x15,
            Status::RnrRetryExceeded => 0x16,
            Status::RemoteAborted => 0x22,
            Status::Other(s) => s,
            Status::ScatteredToCqe => 0,
        }
    }

    /// True for [`Status::Success`].
    pub fn is_ok(self) -> bool {
        self == Status::Success
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_syndrome_round_trips() {
        for s in 0..=255u8 {
            let st = Status::from_syndrome(s);
            if s == 0 {
                assert_eq!(st, Status::Other(0));
            } else {
                assert_eq!(st.syndrome(), s);
            }
        }
        assert_eq!(Status::from_syndrome(0x13), Status::RemoteAccess);
        assert_eq!(Status::from_syndrome(0x22), Status::RemoteAborted);
    }
}

//! Work completions.

pub use uverbs_abi::verbs::{IbWcFlags as WcFlags, IbWcOpcode as WcOpcode, IbWcStatus as WcStatus};

/// One work completion, as a provider decodes it from its CQE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// How it ended (`enum ib_wc_status`; unknown values are kept).
    pub status: WcStatus,
    /// What completed (meaningful for every status but flush errors).
    pub opcode: WcOpcode,
    /// The provider's error syndrome, when `status` is an error.
    pub vendor_err: u32,
    /// Bytes received, read or atomically returned.
    pub byte_len: u32,
    /// Immediate data in host order, when [`WcFlags::WITH_IMM`].
    pub imm_data: Option<u32>,
    /// The rkey a SEND with invalidate invalidated here, when
    /// [`WcFlags::WITH_INVALIDATE`] (`ex.invalidate_rkey`).
    pub invalidated_rkey: Option<u32>,
    /// The local QP number.
    pub qp_num: u32,
    /// The sender's QP number (UD receives).
    pub src_qp: u32,
    /// Flags (`enum ib_wc_flags`, as the kernel numbers them).
    pub flags: WcFlags,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// The destination LID's path bits (`dlid_path_bits`; 0 on RoCE).
    pub dlid_path_bits: u8,
}

impl Wc {
    /// Whether the status is SUCCESS.
    pub fn is_ok(&self) -> bool {
        self.status == WcStatus::SUCCESS
    }

    /// Whether a UD receive's buffer begins with the 40 bytes of a GRH
    /// ([`WcFlags::GRH`]; on RoCE always, holding the IP header).
    pub fn has_grh(&self) -> bool {
        self.flags.contains(WcFlags::GRH)
    }
}

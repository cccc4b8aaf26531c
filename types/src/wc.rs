//! Work completions.

pub use uverbs_abi::verbs::{IbWcFlags as WcFlags, IbWcOpcode as WcOpcode, IbWcStatus as WcStatus};

/// One work completion, as a provider decodes it from its CQE.
///
/// Its `Debug` names the status and opcode as a program writes them
/// (`WcStatus::REM_ACCESS_ERR`), not as the C header does.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
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

/// A value printed as `Type::CONSTANT` (or `Type(raw)` if unnamed).
struct Named(&'static str, Option<&'static str>, u32);

impl core::fmt::Debug for Named {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.1 {
            Some(n) => write!(f, "{}::{n}", self.0),
            None => write!(f, "{}({})", self.0, self.2),
        }
    }
}

impl core::fmt::Debug for Wc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Wc")
            .field("wr_id", &self.wr_id)
            .field(
                "status",
                &Named("WcStatus", self.status.rust_name(), self.status.0),
            )
            .field(
                "opcode",
                &Named("WcOpcode", self.opcode.rust_name(), self.opcode.0),
            )
            .field("vendor_err", &self.vendor_err)
            .field("byte_len", &self.byte_len)
            .field("imm_data", &self.imm_data)
            .field("invalidated_rkey", &self.invalidated_rkey)
            .field("qp_num", &self.qp_num)
            .field("src_qp", &self.src_qp)
            .field("flags", &self.flags)
            .field("pkey_index", &self.pkey_index)
            .field("slid", &self.slid)
            .field("sl", &self.sl)
            .field("dlid_path_bits", &self.dlid_path_bits)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_names_what_a_program_writes() {
        let wc = Wc {
            status: WcStatus::REM_ACCESS_ERR,
            opcode: WcOpcode::RDMA_WRITE,
            ..Wc::default()
        };
        let s = format!("{wc:?}");
        assert!(s.contains("status: WcStatus::REM_ACCESS_ERR"), "{s}");
        assert!(s.contains("opcode: WcOpcode::RDMA_WRITE"), "{s}");
        let odd = Wc {
            status: WcStatus(99),
            ..Wc::default()
        };
        assert!(format!("{odd:?}").contains("WcStatus(99)"));
    }
}

//! Work completions.

pub use uverbs_abi::verbs::{IbWcFlags as WcFlags, IbWcOpcode as WcOpcode, IbWcStatus as WcStatus};

/// One work completion, as a provider decodes it from its CQE.
///
/// Its layout is the kernel's `struct ib_uverbs_wc` (and rdma-core's
/// `struct ibv_wc`), member for member, 48 bytes: an rxe CQ slot *is* one,
/// so its poll is a 48-byte copy, not a decode ([`Wc::from_uverbs`]). The
/// one member the two stacks store differently from the number a program
/// wants is the `ex` union: read it through [`Wc::imm_data`] and
/// [`Wc::invalidated_rkey`], which look at the flags.
///
/// Its `Debug` names the status and opcode as a program writes them
/// (`WcStatus::REM_ACCESS_ERR`), not as the C header does.
#[repr(C)]
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
    /// The `ex` union as `ib_uverbs_wc` holds it: with
    /// [`WcFlags::WITH_IMM`] the immediate as it came off the wire
    /// (big-endian), with [`WcFlags::WITH_INVALIDATE`] the invalidated rkey
    /// (host order). [`Wc::imm_data`] and [`Wc::invalidated_rkey`] read it.
    pub ex: u32,
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
    /// The port (`port_num`; 0 where the provider does not say).
    pub port_num: u8,
    /// `reserved` in `ib_uverbs_wc`, kept so the layouts match.
    pub reserved: u8,
}

/// `size_of::<Wc>()`: the size of `struct ib_uverbs_wc`.
pub const WC_BYTES: usize = 48;

// The layout is the kernel's, member for member (`from_uverbs` reads at
// these offsets, and the C ABI hands `Wc`s to C as `struct ibv_wc`).
const _: () = {
    use core::mem::{offset_of, size_of};
    use uverbs_abi::verbs::IbUverbsWc as K;
    assert!(size_of::<Wc>() == WC_BYTES && size_of::<K>() == WC_BYTES);
    // No padding: the members' sizes add up to the whole (from_uverbs
    // reads every byte as a member's).
    assert!(size_of::<u64>() + size_of::<[u32; 8]>() + size_of::<[u16; 2]>() + 4 == WC_BYTES);
    assert!(size_of::<WcStatus>() == 4 && size_of::<WcOpcode>() == 4 && size_of::<WcFlags>() == 4);
    assert!(offset_of!(Wc, wr_id) == offset_of!(K, wr_id));
    assert!(offset_of!(Wc, status) == offset_of!(K, status));
    assert!(offset_of!(Wc, opcode) == offset_of!(K, opcode));
    assert!(offset_of!(Wc, vendor_err) == offset_of!(K, vendor_err));
    assert!(offset_of!(Wc, byte_len) == offset_of!(K, byte_len));
    assert!(offset_of!(Wc, ex) == offset_of!(K, ex));
    assert!(offset_of!(Wc, qp_num) == offset_of!(K, qp_num));
    assert!(offset_of!(Wc, src_qp) == offset_of!(K, src_qp));
    assert!(offset_of!(Wc, flags) == offset_of!(K, wc_flags));
    assert!(offset_of!(Wc, pkey_index) == offset_of!(K, pkey_index));
    assert!(offset_of!(Wc, slid) == offset_of!(K, slid));
    assert!(offset_of!(Wc, sl) == offset_of!(K, sl));
    assert!(offset_of!(Wc, dlid_path_bits) == offset_of!(K, dlid_path_bits));
    assert!(offset_of!(Wc, port_num) == offset_of!(K, port_num));
};

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

    /// The immediate data in host order, when [`WcFlags::WITH_IMM`].
    #[inline(always)]
    pub fn imm_data(&self) -> Option<u32> {
        self.flags
            .contains(WcFlags::WITH_IMM)
            .then(|| u32::from_be(self.ex))
    }

    /// The rkey a SEND with invalidate invalidated here, when
    /// [`WcFlags::WITH_INVALIDATE`] (`ex.invalidate_rkey`).
    #[inline(always)]
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.flags
            .contains(WcFlags::WITH_INVALIDATE)
            .then_some(self.ex)
    }

    /// Sets the immediate (host order) and [`WcFlags::WITH_IMM`].
    #[inline(always)]
    pub fn set_imm_data(&mut self, imm: u32) {
        self.flags |= WcFlags::WITH_IMM;
        self.ex = imm.to_be();
    }

    /// Sets the invalidated rkey and [`WcFlags::WITH_INVALIDATE`].
    #[inline(always)]
    pub fn set_invalidated_rkey(&mut self, rkey: u32) {
        self.flags |= WcFlags::WITH_INVALIDATE;
        self.ex = rkey;
    }

    /// A completion from the bytes of a `struct ib_uverbs_wc` (host
    /// endian, as the kernel writes it into an rxe CQ slot). Every bit
    /// pattern is a `Wc`: unknown statuses, opcodes and flags are kept.
    /// The loads and stores are at the same offsets on both sides, so the
    /// compiler makes this a 48-byte copy.
    #[inline(always)]
    #[allow(unsafe_code)] // one unaligned read of a plain-integer struct (SAFETY below)
    pub fn from_uverbs(b: &[u8; WC_BYTES]) -> Wc {
        // One read of the 48 bytes rather than a struct built member by
        // member: the compiler then moves them in three 16-byte chunks
        // (member by member, it split the copy 8 + 16 + 16 + 8, which
        // took two more registers, and their saves, in every poll loop).
        // Wc is repr(C) without padding (size and offsets asserted above),
        // every member an integer or a transparent wrapper of one.
        // SAFETY: `b` is size_of::<Wc>() readable bytes; every bit pattern
        // is a valid Wc (above); read_unaligned needs no alignment.
        unsafe { core::ptr::read_unaligned(b.as_ptr().cast::<Wc>()) }
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
            .field("imm_data", &self.imm_data())
            .field("invalidated_rkey", &self.invalidated_rkey())
            .field("qp_num", &self.qp_num)
            .field("src_qp", &self.src_qp)
            .field("flags", &self.flags)
            .field("pkey_index", &self.pkey_index)
            .field("slid", &self.slid)
            .field("sl", &self.sl)
            .field("dlid_path_bits", &self.dlid_path_bits)
            .field("port_num", &self.port_num)
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

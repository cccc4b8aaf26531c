//! Work completions: what a polled CQ entry says, with named statuses and
//! opcodes that keep the kernel's value when it is one we do not know.

/// A completion status (`enum ib_wc_status`; the values every provider and
/// the kernel share). Unknown values are kept, never a panic.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcStatus(pub u32);

macro_rules! named {
    ($ty:ident { $($name:ident = $val:expr, $text:literal;)* }) => {
        impl $ty {
            $(#[doc = $text] pub const $name: $ty = $ty($val);)*
            /// The kernel's name of this value (`"WR_FLUSH_ERR"`), if known.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{n}({})", self.0),
                    None => write!(f, "{}({})", stringify!($ty), self.0),
                }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }
    };
}

named!(WcStatus {
    SUCCESS = 0, "The work request completed.";
    LOC_LEN_ERR = 1, "Local length error (e.g. a receive too small).";
    LOC_QP_OP_ERR = 2, "Local QP operation error.";
    LOC_EEC_OP_ERR = 3, "Local EE context operation error.";
    LOC_PROT_ERR = 4, "Local protection error (bad lkey or range).";
    WR_FLUSH_ERR = 5, "Flushed: the QP went to the error state.";
    MW_BIND_ERR = 6, "Memory window bind error.";
    BAD_RESP_ERR = 7, "Bad response.";
    LOC_ACCESS_ERR = 8, "Local access error.";
    REM_INV_REQ_ERR = 9, "Remote invalid request.";
    REM_ACCESS_ERR = 10, "Remote access error (bad rkey, range or rights).";
    REM_OP_ERR = 11, "Remote operation error.";
    RETRY_EXC_ERR = 12, "Transport retry counter exceeded.";
    RNR_RETRY_EXC_ERR = 13, "Receiver-not-ready retry counter exceeded.";
    LOC_RDD_VIOL_ERR = 14, "Local RDD violation.";
    REM_INV_RD_REQ_ERR = 15, "Remote invalid RD request.";
    REM_ABORT_ERR = 16, "Remote aborted.";
    INV_EECN_ERR = 17, "Invalid EE context number.";
    INV_EEC_STATE_ERR = 18, "Invalid EE context state.";
    FATAL_ERR = 19, "Fatal error.";
    RESP_TIMEOUT_ERR = 20, "Response timeout.";
    GENERAL_ERR = 21, "General error.";
});

/// A completion opcode (`enum ib_uverbs_wc_opcode`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WcOpcode(pub u32);

named!(WcOpcode {
    SEND = 0, "A send completed.";
    RDMA_WRITE = 1, "An RDMA WRITE completed.";
    RDMA_READ = 2, "An RDMA READ completed.";
    COMP_SWAP = 3, "A compare-and-swap completed.";
    FETCH_ADD = 4, "A fetch-and-add completed.";
    BIND_MW = 5, "A memory-window bind completed.";
    LOCAL_INV = 6, "A local invalidate completed.";
    TSO = 7, "A TSO send completed.";
    RECV = 128, "A receive completed.";
    RECV_RDMA_WITH_IMM = 129, "An RDMA WRITE with immediate consumed a receive.";
});

bitflags::bitflags! {
    /// Completion flags (`IB_WC_*` in `wc_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct WcFlags: u32 {
        /// A GRH is present in the receive buffer (UD).
        const GRH = 1;
        /// `imm_data` is valid.
        const WITH_IMM = 1 << 1;
        /// The IP checksum was verified.
        const IP_CSUM_OK = 1 << 3;
        /// An rkey was invalidated.
        const WITH_INVALIDATE = 1 << 4;
    }
}

/// One work completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// What completed (meaningful for every status but flush errors).
    pub opcode: WcOpcode,
    /// The provider's error syndrome, when `status` is an error.
    pub vendor_err: u32,
    /// Bytes received, read or atomically returned.
    pub byte_len: u32,
    /// Immediate data in host order, when [`WcFlags::WITH_IMM`].
    pub imm_data: Option<u32>,
    /// The local QP number.
    pub qp_num: u32,
    /// The sender's QP number (UD receives).
    pub src_qp: u32,
    /// Flags.
    pub flags: WcFlags,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
}

impl Wc {
    /// Whether the status is SUCCESS.
    pub fn is_ok(&self) -> bool {
        self.status == WcStatus::SUCCESS
    }
}

//! The write() command framing of `ib_user_verbs.h`: command numbers,
//! `struct ib_uverbs_cmd_hdr` and `struct ib_uverbs_ex_cmd_hdr`.
//!
//! A non-extended command is
//! `ib_uverbs_cmd_hdr | core request | driver udata in`, with `in_words`
//! the whole length in 4-byte words (header included) and `out_words` the
//! response buffer's length in 4-byte words (core response + driver udata
//! out). The core request of a command that answers begins with
//! `__aligned_u64 response`, the user address the kernel writes the core
//! response to; the driver udata out follows it at
//! `response + sizeof(core response)`.
//!
//! An extended command is
//! `ib_uverbs_cmd_hdr | ib_uverbs_ex_cmd_hdr | core request | driver udata in`,
//! with `command | IB_USER_VERBS_CMD_FLAG_EXTENDED`, and every count in
//! 8-byte words that exclude both headers: `in_words` the core request,
//! `out_words` the core response, `provider_in_words`/`provider_out_words`
//! the driver udata. The write is exactly
//! `8 + 16 + (in_words + provider_in_words) * 8` bytes (the kernel's
//! `verify_hdr()`: any other length is `EINVAL`). The response address is
//! in the extended header, and must be 0 when there is no output.
//!
//! [`encode_write`](super::encode_write) and its siblings (in `frame.rs`)
//! produce and parse these bytes.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::StructLayout;
use crate::verbs::macros::{abi_consts, Registry};

abi_consts! { register_ids;
    /// `IB_USER_VERBS_ABI_VERSION`: the uverbs ABI version the kernel
    /// reports in `/sys/class/infiniband_verbs/abi_version`.
    IB_USER_VERBS_ABI_VERSION: u32 = 6;
    /// `IB_USER_VERBS_CMD_THRESHOLD`: the first extended-only command
    /// number.
    IB_USER_VERBS_CMD_THRESHOLD: u32 = 50;
    /// `IB_USER_VERBS_CMD_COMMAND_MASK`: the command number bits of
    /// `ib_uverbs_cmd_hdr.command`.
    IB_USER_VERBS_CMD_COMMAND_MASK: u32 = 0xff;
    /// `IB_USER_VERBS_CMD_FLAG_EXTENDED`: marks an extended command.
    IB_USER_VERBS_CMD_FLAG_EXTENDED: u32 = 0x8000_0000;
    /// `IB_DEVICE_NAME_MAX`: the longest device name, with its NUL.
    IB_DEVICE_NAME_MAX: usize = 64;
    /// `IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE`: the largest log2 size of an
    /// RWQ indirection table.
    IB_USER_VERBS_MAX_LOG_IND_TBL_SIZE: u32 = 0x0d;

    /// `IB_USER_VERBS_CMD_GET_CONTEXT` (`enum ib_uverbs_write_cmds`).
    IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
    /// `IB_USER_VERBS_CMD_QUERY_DEVICE`.
    IB_USER_VERBS_CMD_QUERY_DEVICE: u32 = 1;
    /// `IB_USER_VERBS_CMD_QUERY_PORT`.
    IB_USER_VERBS_CMD_QUERY_PORT: u32 = 2;
    /// `IB_USER_VERBS_CMD_ALLOC_PD`.
    IB_USER_VERBS_CMD_ALLOC_PD: u32 = 3;
    /// `IB_USER_VERBS_CMD_DEALLOC_PD`.
    IB_USER_VERBS_CMD_DEALLOC_PD: u32 = 4;
    /// `IB_USER_VERBS_CMD_CREATE_AH`.
    IB_USER_VERBS_CMD_CREATE_AH: u32 = 5;
    /// `IB_USER_VERBS_CMD_MODIFY_AH` (never implemented by the kernel).
    IB_USER_VERBS_CMD_MODIFY_AH: u32 = 6;
    /// `IB_USER_VERBS_CMD_QUERY_AH` (never implemented by the kernel).
    IB_USER_VERBS_CMD_QUERY_AH: u32 = 7;
    /// `IB_USER_VERBS_CMD_DESTROY_AH`.
    IB_USER_VERBS_CMD_DESTROY_AH: u32 = 8;
    /// `IB_USER_VERBS_CMD_REG_MR`.
    IB_USER_VERBS_CMD_REG_MR: u32 = 9;
    /// `IB_USER_VERBS_CMD_REG_SMR` (never implemented by the kernel).
    IB_USER_VERBS_CMD_REG_SMR: u32 = 10;
    /// `IB_USER_VERBS_CMD_REREG_MR`.
    IB_USER_VERBS_CMD_REREG_MR: u32 = 11;
    /// `IB_USER_VERBS_CMD_QUERY_MR` (never implemented by the kernel).
    IB_USER_VERBS_CMD_QUERY_MR: u32 = 12;
    /// `IB_USER_VERBS_CMD_DEREG_MR`.
    IB_USER_VERBS_CMD_DEREG_MR: u32 = 13;
    /// `IB_USER_VERBS_CMD_ALLOC_MW`.
    IB_USER_VERBS_CMD_ALLOC_MW: u32 = 14;
    /// `IB_USER_VERBS_CMD_BIND_MW` (never implemented by the kernel).
    IB_USER_VERBS_CMD_BIND_MW: u32 = 15;
    /// `IB_USER_VERBS_CMD_DEALLOC_MW`.
    IB_USER_VERBS_CMD_DEALLOC_MW: u32 = 16;
    /// `IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL`.
    IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: u32 = 17;
    /// `IB_USER_VERBS_CMD_CREATE_CQ`.
    IB_USER_VERBS_CMD_CREATE_CQ: u32 = 18;
    /// `IB_USER_VERBS_CMD_RESIZE_CQ`.
    IB_USER_VERBS_CMD_RESIZE_CQ: u32 = 19;
    /// `IB_USER_VERBS_CMD_DESTROY_CQ`.
    IB_USER_VERBS_CMD_DESTROY_CQ: u32 = 20;
    /// `IB_USER_VERBS_CMD_POLL_CQ`.
    IB_USER_VERBS_CMD_POLL_CQ: u32 = 21;
    /// `IB_USER_VERBS_CMD_PEEK_CQ` (never implemented by the kernel).
    IB_USER_VERBS_CMD_PEEK_CQ: u32 = 22;
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`.
    IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u32 = 23;
    /// `IB_USER_VERBS_CMD_CREATE_QP`.
    IB_USER_VERBS_CMD_CREATE_QP: u32 = 24;
    /// `IB_USER_VERBS_CMD_QUERY_QP`.
    IB_USER_VERBS_CMD_QUERY_QP: u32 = 25;
    /// `IB_USER_VERBS_CMD_MODIFY_QP`.
    IB_USER_VERBS_CMD_MODIFY_QP: u32 = 26;
    /// `IB_USER_VERBS_CMD_DESTROY_QP`.
    IB_USER_VERBS_CMD_DESTROY_QP: u32 = 27;
    /// `IB_USER_VERBS_CMD_POST_SEND`.
    IB_USER_VERBS_CMD_POST_SEND: u32 = 28;
    /// `IB_USER_VERBS_CMD_POST_RECV`.
    IB_USER_VERBS_CMD_POST_RECV: u32 = 29;
    /// `IB_USER_VERBS_CMD_ATTACH_MCAST`.
    IB_USER_VERBS_CMD_ATTACH_MCAST: u32 = 30;
    /// `IB_USER_VERBS_CMD_DETACH_MCAST`.
    IB_USER_VERBS_CMD_DETACH_MCAST: u32 = 31;
    /// `IB_USER_VERBS_CMD_CREATE_SRQ`.
    IB_USER_VERBS_CMD_CREATE_SRQ: u32 = 32;
    /// `IB_USER_VERBS_CMD_MODIFY_SRQ`.
    IB_USER_VERBS_CMD_MODIFY_SRQ: u32 = 33;
    /// `IB_USER_VERBS_CMD_QUERY_SRQ`.
    IB_USER_VERBS_CMD_QUERY_SRQ: u32 = 34;
    /// `IB_USER_VERBS_CMD_DESTROY_SRQ`.
    IB_USER_VERBS_CMD_DESTROY_SRQ: u32 = 35;
    /// `IB_USER_VERBS_CMD_POST_SRQ_RECV`.
    IB_USER_VERBS_CMD_POST_SRQ_RECV: u32 = 36;
    /// `IB_USER_VERBS_CMD_OPEN_XRCD`.
    IB_USER_VERBS_CMD_OPEN_XRCD: u32 = 37;
    /// `IB_USER_VERBS_CMD_CLOSE_XRCD`.
    IB_USER_VERBS_CMD_CLOSE_XRCD: u32 = 38;
    /// `IB_USER_VERBS_CMD_CREATE_XSRQ`.
    IB_USER_VERBS_CMD_CREATE_XSRQ: u32 = 39;
    /// `IB_USER_VERBS_CMD_OPEN_QP`.
    IB_USER_VERBS_CMD_OPEN_QP: u32 = 40;

    /// `IB_USER_VERBS_EX_CMD_QUERY_DEVICE` (extended commands).
    IB_USER_VERBS_EX_CMD_QUERY_DEVICE: u32 = 1;
    /// `IB_USER_VERBS_EX_CMD_CREATE_CQ`.
    IB_USER_VERBS_EX_CMD_CREATE_CQ: u32 = 18;
    /// `IB_USER_VERBS_EX_CMD_CREATE_QP`.
    IB_USER_VERBS_EX_CMD_CREATE_QP: u32 = 24;
    /// `IB_USER_VERBS_EX_CMD_MODIFY_QP`.
    IB_USER_VERBS_EX_CMD_MODIFY_QP: u32 = 26;
    /// `IB_USER_VERBS_EX_CMD_CREATE_FLOW`.
    IB_USER_VERBS_EX_CMD_CREATE_FLOW: u32 = 50;
    /// `IB_USER_VERBS_EX_CMD_DESTROY_FLOW`.
    IB_USER_VERBS_EX_CMD_DESTROY_FLOW: u32 = 51;
    /// `IB_USER_VERBS_EX_CMD_CREATE_WQ`.
    IB_USER_VERBS_EX_CMD_CREATE_WQ: u32 = 52;
    /// `IB_USER_VERBS_EX_CMD_MODIFY_WQ`.
    IB_USER_VERBS_EX_CMD_MODIFY_WQ: u32 = 53;
    /// `IB_USER_VERBS_EX_CMD_DESTROY_WQ`.
    IB_USER_VERBS_EX_CMD_DESTROY_WQ: u32 = 54;
    /// `IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL`.
    IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL: u32 = 55;
    /// `IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL`.
    IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL: u32 = 56;
    /// `IB_USER_VERBS_EX_CMD_MODIFY_CQ`.
    IB_USER_VERBS_EX_CMD_MODIFY_CQ: u32 = 57;
}

/// `struct ib_uverbs_cmd_hdr` of `ib_user_verbs.h`: the first 8 bytes of
/// every write() command.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsCmdHdr {
    /// `command`: `IB_USER_VERBS_CMD_*`, or'ed with
    /// [`IB_USER_VERBS_CMD_FLAG_EXTENDED`] for an extended command.
    pub command: u32,
    /// `in_words`: non-extended, the whole write in 4-byte words, this
    /// header included; extended, the core request in 8-byte words.
    pub in_words: u16,
    /// `out_words`: non-extended, the response buffer in 4-byte words;
    /// extended, the core response in 8-byte words.
    pub out_words: u16,
}

/// `struct ib_uverbs_ex_cmd_hdr` of `ib_user_verbs.h`: follows
/// [`IbUverbsCmdHdr`] in an extended command.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsExCmdHdr {
    /// `response`: user address of the response buffer (0 if none).
    pub response: u64,
    /// `provider_in_words`: driver udata in, in 8-byte words.
    pub provider_in_words: u16,
    /// `provider_out_words`: driver udata out, in 8-byte words.
    pub provider_out_words: u16,
    /// `cmd_hdr_reserved`: must be 0.
    pub cmd_hdr_reserved: u32,
}

pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbUverbsCmdHdr => "struct ib_uverbs_cmd_hdr" {
            command => "command",
            in_words => "in_words",
            out_words => "out_words",
        }),
        crate::c_layout!(IbUverbsExCmdHdr => "struct ib_uverbs_ex_cmd_hdr" {
            response => "response",
            provider_in_words => "provider_in_words",
            provider_out_words => "provider_out_words",
            cmd_hdr_reserved => "cmd_hdr_reserved",
        }),
    ]
}

pub(super) fn register(r: &mut Registry) {
    register_ids(r);
}

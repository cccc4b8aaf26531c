//! RDMA netlink: the NLDEV part of `rdma_netlink.h`, with the generic
//! netlink framing of `<linux/netlink.h>` it travels in.
//!
//! A request is one `nlmsghdr` whose type is
//! [`rdma_nl_get_type`]`(`[`RDMA_NL_NLDEV`]`, RDMA_NLDEV_CMD_*)`, followed
//! directly by attributes (there is no genetlink header), sent on a
//! `socket(AF_NETLINK, SOCK_RAW, `[`NETLINK_RDMA`]`)`. [`NlMsgBuilder`]
//! writes requests; [`ReplyReader`] and the checked views of [`parse`]
//! read the kernel's answers — multi-part dumps ending in `NLMSG_DONE`,
//! acknowledgements and `NLMSG_ERROR` with its errno — without any path to
//! a panic on malformed input.
//!
//! The attribute numbers of `enum rdma_nldev_attr` are positional; all of
//! them are listed (in [`ids`]) and checked against the header.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::cm::macros::named_values;
use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};

mod build;
pub mod ids;
pub mod parse;

pub use build::{FixedBuf, NlBuf, NlBuildError, NlMsgBuilder};
pub use ids::*;
pub use parse::{
    Attr, Attrs, NlMessage, NlMsg, NlMsgIter, NlParseError, NlReplyError, ReplyReader,
};

/// `NETLINK_RDMA` (`<linux/netlink.h>`): the netlink protocol of RDMA.
pub const NETLINK_RDMA: i32 = 20;

/// `RDMA_NL_IWCM`: the iWARP connection manager client.
pub const RDMA_NL_IWCM: u16 = 2;
/// `RDMA_NL_RSVD`.
pub const RDMA_NL_RSVD: u16 = 3;
/// `RDMA_NL_LS`: RDMA local services (SA path resolution).
pub const RDMA_NL_LS: u16 = 4;
/// `RDMA_NL_NLDEV`: the RDMA device interface this module describes.
pub const RDMA_NL_NLDEV: u16 = 5;

/// `RDMA_NL_GET_TYPE(client, op)`: the `nlmsg_type` of operation `op` of a
/// client.
pub const fn rdma_nl_get_type(client: u16, op: u16) -> u16 {
    (client << 10) + op
}

/// `RDMA_NL_GET_CLIENT(type)`: the client of an `nlmsg_type`.
pub const fn rdma_nl_get_client(nlmsg_type: u16) -> u16 {
    (nlmsg_type & (((1 << 6) - 1) << 10)) >> 10
}

/// `RDMA_NL_GET_OP(type)`: the operation of an `nlmsg_type`.
pub const fn rdma_nl_get_op(nlmsg_type: u16) -> u16 {
    nlmsg_type & ((1 << 10) - 1)
}

/// `RDMA_NLA_F_MANDATORY`: attribute type flag (requests only).
pub const RDMA_NLA_F_MANDATORY: u16 = 1 << 13;
/// `RDMA_NLA_TYPE_MASK`: the type bits of an RDMA netlink attribute.
pub const RDMA_NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER | RDMA_NLA_F_MANDATORY);

/// `RDMA_NLDEV_PRINT_TYPE_UNSPEC`: `RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE` value.
pub const RDMA_NLDEV_PRINT_TYPE_UNSPEC: u8 = 0;
/// `RDMA_NLDEV_PRINT_TYPE_HEX`.
pub const RDMA_NLDEV_PRINT_TYPE_HEX: u8 = 1;

named_values! {
    /// `RDMA_NODE_*` of `rdma_netlink.h`: the value of
    /// `RDMA_NLDEV_ATTR_DEV_NODE_TYPE` (u8).
    RdmaNodeType(u8) prefix "RDMA_NODE_" {
        /// `RDMA_NODE_IB_CA`: an InfiniBand or RoCE channel adapter.
        IB_CA = 1;
        /// `RDMA_NODE_IB_SWITCH`.
        IB_SWITCH = 2;
        /// `RDMA_NODE_IB_ROUTER`.
        IB_ROUTER = 3;
        /// `RDMA_NODE_RNIC`: iWARP.
        RNIC = 4;
        /// `RDMA_NODE_USNIC`.
        USNIC = 5;
        /// `RDMA_NODE_USNIC_UDP`.
        USNIC_UDP = 6;
        /// `RDMA_NODE_UNSPECIFIED`.
        UNSPECIFIED = 7;
    }
}

// ---- <linux/netlink.h> ----

/// `NLM_F_REQUEST`: a request.
pub const NLM_F_REQUEST: u16 = 0x01;
/// `NLM_F_MULTI`: part of a multi-part reply ending in `NLMSG_DONE`.
pub const NLM_F_MULTI: u16 = 0x02;
/// `NLM_F_ACK`: reply with an `NLMSG_ERROR` carrying 0 or an errno.
pub const NLM_F_ACK: u16 = 0x04;
/// `NLM_F_ECHO`: echo this request.
pub const NLM_F_ECHO: u16 = 0x08;
/// `NLM_F_DUMP_INTR`: the dump was inconsistent.
pub const NLM_F_DUMP_INTR: u16 = 0x10;
/// `NLM_F_DUMP_FILTERED`: the dump was filtered as requested.
pub const NLM_F_DUMP_FILTERED: u16 = 0x20;
/// `NLM_F_ROOT` (GET requests).
pub const NLM_F_ROOT: u16 = 0x100;
/// `NLM_F_MATCH` (GET requests).
pub const NLM_F_MATCH: u16 = 0x200;
/// `NLM_F_ATOMIC` (GET requests).
pub const NLM_F_ATOMIC: u16 = 0x400;
/// `NLM_F_DUMP`: `NLM_F_ROOT | NLM_F_MATCH`, list everything.
pub const NLM_F_DUMP: u16 = NLM_F_ROOT | NLM_F_MATCH;
/// `NLM_F_REPLACE` (NEW requests).
pub const NLM_F_REPLACE: u16 = 0x100;
/// `NLM_F_EXCL` (NEW requests).
pub const NLM_F_EXCL: u16 = 0x200;
/// `NLM_F_CREATE` (NEW requests).
pub const NLM_F_CREATE: u16 = 0x400;
/// `NLM_F_APPEND` (NEW requests).
pub const NLM_F_APPEND: u16 = 0x800;
/// `NLM_F_CAPPED` (acks): the original request is not echoed beyond its
/// header.
pub const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS` (acks): extended ack attributes follow.
pub const NLM_F_ACK_TLVS: u16 = 0x200;

/// `NLMSG_NOOP`: nothing; skip.
pub const NLMSG_NOOP: u16 = 0x1;
/// `NLMSG_ERROR`: an [`NlMsgErr`]; error 0 is an acknowledgement.
pub const NLMSG_ERROR: u16 = 0x2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 0x3;
/// `NLMSG_OVERRUN`: data lost.
pub const NLMSG_OVERRUN: u16 = 0x4;
/// `NLMSG_MIN_TYPE`: types below are control messages.
pub const NLMSG_MIN_TYPE: u16 = 0x10;

/// `NLMSG_ALIGNTO`: messages are padded to this.
pub const NLMSG_ALIGNTO: usize = 4;
/// `NLMSG_HDRLEN`: the aligned size of [`NlMsgHdr`].
pub const NLMSG_HDRLEN: usize = 16;
/// `NLA_ALIGNTO`: attributes are padded to this.
pub const NLA_ALIGNTO: usize = 4;
/// `NLA_HDRLEN`: the aligned size of [`NlAttr`].
pub const NLA_HDRLEN: usize = 4;
/// `NLA_F_NESTED`: the attribute holds attributes.
pub const NLA_F_NESTED: u16 = 1 << 15;
/// `NLA_F_NET_BYTEORDER`: the payload is big-endian.
pub const NLA_F_NET_BYTEORDER: u16 = 1 << 14;
/// `NLA_TYPE_MASK`: the type bits of an attribute.
pub const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER);

/// `NETLINK_CAP_ACK` (`SOL_NETLINK` option): do not echo requests in acks.
pub const NETLINK_CAP_ACK: i32 = 10;
/// `NETLINK_EXT_ACK` (`SOL_NETLINK` option): extended acks with messages.
pub const NETLINK_EXT_ACK: i32 = 11;
/// `NETLINK_GET_STRICT_CHK` (`SOL_NETLINK` option).
pub const NETLINK_GET_STRICT_CHK: i32 = 12;

/// `NLMSGERR_ATTR_MSG`: extended ack attribute, the error text (string).
pub const NLMSGERR_ATTR_MSG: u16 = 1;
/// `NLMSGERR_ATTR_OFFS`: extended ack attribute, offset of the bad
/// attribute in the request (u32).
pub const NLMSGERR_ATTR_OFFS: u16 = 2;

/// `NLMSG_ALIGN(len)` / `NLA_ALIGN(len)`: `len` rounded up to 4.
pub const fn nl_align(len: usize) -> usize {
    (len + NLA_ALIGNTO - 1) & !(NLA_ALIGNTO - 1)
}

/// `struct nlmsghdr` of `<linux/netlink.h>`: 16 bytes, host byte order.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct NlMsgHdr {
    /// `nlmsg_len`: the message length including this header.
    pub nlmsg_len: u32,
    /// `nlmsg_type`.
    pub nlmsg_type: u16,
    /// `nlmsg_flags`: `NLM_F_*`.
    pub nlmsg_flags: u16,
    /// `nlmsg_seq`: echoed in replies.
    pub nlmsg_seq: u32,
    /// `nlmsg_pid`: sender port id (0 from the kernel).
    pub nlmsg_pid: u32,
}

/// `struct nlattr` of `<linux/netlink.h>`: 4 bytes, then the payload,
/// padded to [`NLA_ALIGNTO`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct NlAttr {
    /// `nla_len`: header plus payload, without the padding.
    pub nla_len: u16,
    /// `nla_type`: the type and `NLA_F_*` flags.
    pub nla_type: u16,
}

/// `struct nlmsgerr` of `<linux/netlink.h>`: the payload of `NLMSG_ERROR`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct NlMsgErr {
    /// `error`: a negative errno, or 0 for an acknowledgement.
    pub error: i32,
    /// `msg`: the header of the request it answers (followed by the
    /// request's payload unless `NLM_F_CAPPED`).
    pub msg: NlMsgHdr,
}

/// Decodes the `huge_encode_dev()` value of `RDMA_NLDEV_ATTR_CHARDEV` into
/// `(major, minor)`: major = `(v & 0xfff00) >> 8`,
/// minor = `(v & 0xff) | ((v >> 12) & 0xfff00)`.
pub const fn huge_decode_dev(v: u64) -> (u32, u32) {
    let major = ((v & 0xfff00) >> 8) as u32;
    let minor = ((v & 0xff) | ((v >> 12) & 0xfff00)) as u32;
    (major, minor)
}

/// Every `#[repr(C)]` type of this module, for the header comparison test
/// (the three from `<linux/netlink.h>`).
pub fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(NlMsgHdr => "struct nlmsghdr" {
            nlmsg_len => "nlmsg_len",
            nlmsg_type => "nlmsg_type",
            nlmsg_flags => "nlmsg_flags",
            nlmsg_seq => "nlmsg_seq",
            nlmsg_pid => "nlmsg_pid",
        }),
        crate::c_layout!(NlAttr => "struct nlattr" {
            nla_len => "nla_len",
            nla_type => "nla_type",
        }),
        crate::c_layout!(NlMsgErr => "struct nlmsgerr" {
            error => "error",
            msg => "msg",
        }),
    ]
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    let mut v = vec![
        crate::c_const!(NETLINK_RDMA => "NETLINK_RDMA"),
        crate::c_const!(RDMA_NL_IWCM => "RDMA_NL_IWCM"),
        crate::c_const!(RDMA_NL_RSVD => "RDMA_NL_RSVD"),
        crate::c_const!(RDMA_NL_LS => "RDMA_NL_LS"),
        crate::c_const!(RDMA_NL_NLDEV => "RDMA_NL_NLDEV"),
        crate::c_const!(RDMA_NLA_F_MANDATORY => "RDMA_NLA_F_MANDATORY"),
        // C computes the mask in `int`: compare the same expression.
        crate::c_const!(
            !(i32::from(NLA_F_NESTED) | i32::from(NLA_F_NET_BYTEORDER)
                | i32::from(RDMA_NLA_F_MANDATORY)) => "RDMA_NLA_TYPE_MASK"
        ),
        crate::c_const!(!(i32::from(NLA_F_NESTED) | i32::from(NLA_F_NET_BYTEORDER)) => "NLA_TYPE_MASK"),
        crate::c_const!(RDMA_NLDEV_PRINT_TYPE_UNSPEC => "RDMA_NLDEV_PRINT_TYPE_UNSPEC"),
        crate::c_const!(RDMA_NLDEV_PRINT_TYPE_HEX => "RDMA_NLDEV_PRINT_TYPE_HEX"),
        crate::c_const!(NLM_F_REQUEST => "NLM_F_REQUEST"),
        crate::c_const!(NLM_F_MULTI => "NLM_F_MULTI"),
        crate::c_const!(NLM_F_ACK => "NLM_F_ACK"),
        crate::c_const!(NLM_F_ECHO => "NLM_F_ECHO"),
        crate::c_const!(NLM_F_DUMP_INTR => "NLM_F_DUMP_INTR"),
        crate::c_const!(NLM_F_DUMP_FILTERED => "NLM_F_DUMP_FILTERED"),
        crate::c_const!(NLM_F_ROOT => "NLM_F_ROOT"),
        crate::c_const!(NLM_F_MATCH => "NLM_F_MATCH"),
        crate::c_const!(NLM_F_ATOMIC => "NLM_F_ATOMIC"),
        crate::c_const!(NLM_F_DUMP => "NLM_F_DUMP"),
        crate::c_const!(NLM_F_REPLACE => "NLM_F_REPLACE"),
        crate::c_const!(NLM_F_EXCL => "NLM_F_EXCL"),
        crate::c_const!(NLM_F_CREATE => "NLM_F_CREATE"),
        crate::c_const!(NLM_F_APPEND => "NLM_F_APPEND"),
        crate::c_const!(NLM_F_CAPPED => "NLM_F_CAPPED"),
        crate::c_const!(NLM_F_ACK_TLVS => "NLM_F_ACK_TLVS"),
        crate::c_const!(NLMSG_NOOP => "NLMSG_NOOP"),
        crate::c_const!(NLMSG_ERROR => "NLMSG_ERROR"),
        crate::c_const!(NLMSG_DONE => "NLMSG_DONE"),
        crate::c_const!(NLMSG_OVERRUN => "NLMSG_OVERRUN"),
        crate::c_const!(NLMSG_MIN_TYPE => "NLMSG_MIN_TYPE"),
        crate::c_const!(NLMSG_ALIGNTO => "NLMSG_ALIGNTO"),
        crate::c_const!(NLMSG_HDRLEN => "NLMSG_HDRLEN"),
        crate::c_const!(NLA_ALIGNTO => "NLA_ALIGNTO"),
        crate::c_const!(NLA_HDRLEN => "NLA_HDRLEN"),
        crate::c_const!(NLA_F_NESTED => "NLA_F_NESTED"),
        crate::c_const!(NLA_F_NET_BYTEORDER => "NLA_F_NET_BYTEORDER"),
        crate::c_const!(NETLINK_CAP_ACK => "NETLINK_CAP_ACK"),
        crate::c_const!(NETLINK_EXT_ACK => "NETLINK_EXT_ACK"),
        crate::c_const!(NETLINK_GET_STRICT_CHK => "NETLINK_GET_STRICT_CHK"),
        crate::c_const!(NLMSGERR_ATTR_MSG => "NLMSGERR_ATTR_MSG"),
        crate::c_const!(NLMSGERR_ATTR_OFFS => "NLMSGERR_ATTR_OFFS"),
    ];
    let table = RDMA_NLDEV_CMDS.iter().chain(RDMA_NLDEV_ATTRS);
    v.extend(table.map(|&(c, value)| ConstValue {
        c,
        value: value.into(),
    }));
    v.extend(RdmaNodeType::ALL.iter().map(|&(c, value)| ConstValue {
        c,
        value: value.into(),
    }));
    v
}

/// The NLDEV attributes newer than the installed headers (Debian 12's
/// linux-libc-dev is 6.1), with the kernel version that added each.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    RDMA_NLDEV_ATTRS_NEWER
        .iter()
        .map(|&(c, _)| NewerThanHeaders {
            c,
            reason: match c {
                "RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE" => {
                    "added in v6.6 (privileged Q_Key mode)"
                }
                "RDMA_NLDEV_ATTR_DRIVER_DETAILS" | "RDMA_NLDEV_ATTR_RES_SUBTYPE" => {
                    "added in v6.9 (driver-specific QPs in `rdma res`)"
                }
                // The layout test rejects a newer name without a reason.
                _ => "",
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_macros_round_trip() {
        let t = rdma_nl_get_type(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV);
        assert_eq!(t, (5 << 10) | 15);
        assert_eq!(rdma_nl_get_client(t), RDMA_NL_NLDEV);
        assert_eq!(rdma_nl_get_op(t), RDMA_NLDEV_CMD_GET_CHARDEV);
        assert_eq!(RDMA_NLA_TYPE_MASK, 0x1fff);
        assert_eq!(NLA_TYPE_MASK, 0x3fff);
    }

    #[test]
    fn chardev_numbers_decode_like_the_kernel() {
        // huge_encode_dev(MKDEV(231, 192)) = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
        assert_eq!(huge_decode_dev((231 << 8) | 192), (231, 192));
        let enc = |major: u64, minor: u64| (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        assert_eq!(huge_decode_dev(enc(511, 0x12345)), (511, 0x12345));
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(nl_align(0), 0);
        assert_eq!(nl_align(5), 8);
        assert_eq!(nl_align(8), 8);
        assert_eq!(core::mem::size_of::<NlMsgErr>(), 20);
    }
}

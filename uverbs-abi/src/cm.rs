//! `rdma_user_cm.h` (and the path records of `ib_user_sa.h`): the rdma_cm
//! command ABI of `/dev/infiniband/rdma_cm`.
//!
//! Every command is one `write()` of an [`RdmaUcmCmdHdr`] followed by the
//! command struct. Unlike uverbs, `in` and `out` count **bytes**: `in` is the
//! size of the command struct (the header excluded), `out` the size of the
//! response buffer. The response is not part of the write: commands that
//! answer carry a `response` field holding the user address the kernel
//! writes to. [`encode_cmd`] builds the bytes of such a write. The ABI
//! version (`/sys/class/misc/rdma_cm/abi_version`) is
//! [`RDMA_USER_CM_ABI_VERSION`].
//!
//! Addresses are [`SockaddrIn6`] (legacy `*_IP` commands) or
//! [`KernelSockaddrStorage`] with a separate size, converted from and to
//! [`std::net::SocketAddr`] by the helpers of [`sockaddr`].

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};
use macros::named_values;

mod cmds;
pub(crate) mod macros;
mod resp;
pub mod sa;
pub mod sockaddr;

pub use cmds::*;
pub use resp::*;
pub use sa::{IbPathFlags, IbPathRecData, IbUserPathRec};
pub use sockaddr::{
    read_sockaddr, sockaddr_len, write_sockaddr, KernelSockaddrStorage, SockaddrError, SockaddrIn,
    SockaddrIn6,
};

/// `RDMA_USER_CM_ABI_VERSION`: the rdma_cm ABI this module describes.
pub const RDMA_USER_CM_ABI_VERSION: u32 = 4;
/// `RDMA_MAX_PRIVATE_DATA`: the size of the private data arrays.
pub const RDMA_MAX_PRIVATE_DATA: usize = 256;

macro_rules! cmd_ids {
    ($($(#[$doc:meta])* $name:ident = $v:expr;)*) => {
        $($(#[$doc])* pub const $name: u32 = $v;)*
        /// `(C name, value)` of every `RDMA_USER_CM_CMD_*`.
        pub const RDMA_USER_CM_CMDS: &[(&str, u32)] = &[$((stringify!($name), $name)),*];
    };
}

cmd_ids! {
    /// `RDMA_USER_CM_CMD_CREATE_ID`: [`RdmaUcmCreateId`] → [`RdmaUcmCreateIdResp`].
    RDMA_USER_CM_CMD_CREATE_ID = 0;
    /// `RDMA_USER_CM_CMD_DESTROY_ID`: [`RdmaUcmDestroyId`] → [`RdmaUcmDestroyIdResp`].
    RDMA_USER_CM_CMD_DESTROY_ID = 1;
    /// `RDMA_USER_CM_CMD_BIND_IP`: [`RdmaUcmBindIp`].
    RDMA_USER_CM_CMD_BIND_IP = 2;
    /// `RDMA_USER_CM_CMD_RESOLVE_IP`: [`RdmaUcmResolveIp`].
    RDMA_USER_CM_CMD_RESOLVE_IP = 3;
    /// `RDMA_USER_CM_CMD_RESOLVE_ROUTE`: [`RdmaUcmResolveRoute`].
    RDMA_USER_CM_CMD_RESOLVE_ROUTE = 4;
    /// `RDMA_USER_CM_CMD_QUERY_ROUTE`: [`RdmaUcmQuery`] → [`RdmaUcmQueryRouteResp`].
    RDMA_USER_CM_CMD_QUERY_ROUTE = 5;
    /// `RDMA_USER_CM_CMD_CONNECT`: [`RdmaUcmConnect`].
    RDMA_USER_CM_CMD_CONNECT = 6;
    /// `RDMA_USER_CM_CMD_LISTEN`: [`RdmaUcmListen`].
    RDMA_USER_CM_CMD_LISTEN = 7;
    /// `RDMA_USER_CM_CMD_ACCEPT`: [`RdmaUcmAccept`].
    RDMA_USER_CM_CMD_ACCEPT = 8;
    /// `RDMA_USER_CM_CMD_REJECT`: [`RdmaUcmReject`].
    RDMA_USER_CM_CMD_REJECT = 9;
    /// `RDMA_USER_CM_CMD_DISCONNECT`: [`RdmaUcmDisconnect`].
    RDMA_USER_CM_CMD_DISCONNECT = 10;
    /// `RDMA_USER_CM_CMD_INIT_QP_ATTR`: [`RdmaUcmInitQpAttr`] → `struct ib_uverbs_qp_attr`.
    RDMA_USER_CM_CMD_INIT_QP_ATTR = 11;
    /// `RDMA_USER_CM_CMD_GET_EVENT`: [`RdmaUcmGetEvent`] → [`RdmaUcmEventResp`].
    RDMA_USER_CM_CMD_GET_EVENT = 12;
    /// `RDMA_USER_CM_CMD_GET_OPTION`: not implemented by the kernel.
    RDMA_USER_CM_CMD_GET_OPTION = 13;
    /// `RDMA_USER_CM_CMD_SET_OPTION`: [`RdmaUcmSetOption`].
    RDMA_USER_CM_CMD_SET_OPTION = 14;
    /// `RDMA_USER_CM_CMD_NOTIFY`: [`RdmaUcmNotify`].
    RDMA_USER_CM_CMD_NOTIFY = 15;
    /// `RDMA_USER_CM_CMD_JOIN_IP_MCAST`: [`RdmaUcmJoinIpMcast`] → [`RdmaUcmCreateIdResp`].
    RDMA_USER_CM_CMD_JOIN_IP_MCAST = 16;
    /// `RDMA_USER_CM_CMD_LEAVE_MCAST`: [`RdmaUcmDestroyId`] → [`RdmaUcmDestroyIdResp`].
    RDMA_USER_CM_CMD_LEAVE_MCAST = 17;
    /// `RDMA_USER_CM_CMD_MIGRATE_ID`: [`RdmaUcmMigrateId`] → [`RdmaUcmMigrateResp`].
    RDMA_USER_CM_CMD_MIGRATE_ID = 18;
    /// `RDMA_USER_CM_CMD_QUERY`: [`RdmaUcmQuery`] → by `option`
    /// ([`RdmaUcmQueryAddrResp`], [`RdmaUcmQueryPathResp`] + paths).
    RDMA_USER_CM_CMD_QUERY = 19;
    /// `RDMA_USER_CM_CMD_BIND`: [`RdmaUcmBind`].
    RDMA_USER_CM_CMD_BIND = 20;
    /// `RDMA_USER_CM_CMD_RESOLVE_ADDR`: [`RdmaUcmResolveAddr`].
    RDMA_USER_CM_CMD_RESOLVE_ADDR = 21;
    /// `RDMA_USER_CM_CMD_JOIN_MCAST`: [`RdmaUcmJoinMcast`] → [`RdmaUcmCreateIdResp`].
    RDMA_USER_CM_CMD_JOIN_MCAST = 22;
}

/// `RDMA_USER_CM_QUERY_ADDR`: `option` of [`RdmaUcmQuery`] for
/// [`RdmaUcmQueryAddrResp`].
pub const RDMA_USER_CM_QUERY_ADDR: u32 = 0;
/// `RDMA_USER_CM_QUERY_PATH`: for [`RdmaUcmQueryPathResp`] and its paths.
pub const RDMA_USER_CM_QUERY_PATH: u32 = 1;
/// `RDMA_USER_CM_QUERY_GID`: like ADDR, with GIDs (`sockaddr_ib`) as
/// addresses.
pub const RDMA_USER_CM_QUERY_GID: u32 = 2;

/// `RDMA_MC_JOIN_FLAG_FULLMEMBER`: `join_flags` of [`RdmaUcmJoinMcast`].
pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: u16 = 0;
/// `RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`.
pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: u16 = 1;
/// `RDMA_MC_JOIN_FLAG_RESERVED`: the first invalid value.
pub const RDMA_MC_JOIN_FLAG_RESERVED: u16 = 2;

/// `RDMA_OPTION_ID`: option level of the id itself ([`RdmaUcmSetOption`]).
pub const RDMA_OPTION_ID: u32 = 0;
/// `RDMA_OPTION_IB`: InfiniBand option level.
pub const RDMA_OPTION_IB: u32 = 1;
/// `RDMA_OPTION_ID_TOS`: type of service (u8).
pub const RDMA_OPTION_ID_TOS: u32 = 0;
/// `RDMA_OPTION_ID_REUSEADDR`: allow address reuse (int).
pub const RDMA_OPTION_ID_REUSEADDR: u32 = 1;
/// `RDMA_OPTION_ID_AFONLY`: IPv6 only (int).
pub const RDMA_OPTION_ID_AFONLY: u32 = 2;
/// `RDMA_OPTION_ID_ACK_TIMEOUT`: QP ack timeout exponent (u8).
pub const RDMA_OPTION_ID_ACK_TIMEOUT: u32 = 3;
/// `RDMA_OPTION_IB_PATH`: set path records (`ib_path_rec_data[]`).
pub const RDMA_OPTION_IB_PATH: u32 = 1;

named_values! {
    /// `enum rdma_ucm_port_space` of `rdma_user_cm.h` (`ps` of
    /// [`RdmaUcmCreateId`]): IBTA Annex A11 service-ID bytes 4 and 5.
    RdmaUcmPortSpace(u16) prefix "RDMA_PS_" {
        /// `RDMA_PS_IPOIB`.
        IPOIB = 0x0002;
        /// `RDMA_PS_IB`: any QP type, native IB addressing.
        IB = 0x013f;
        /// `RDMA_PS_TCP`: reliable connected.
        TCP = 0x0106;
        /// `RDMA_PS_UDP`: unreliable datagram.
        UDP = 0x0111;
    }
}

named_values! {
    /// `enum rdma_cm_event_type` of the kernel's `include/rdma/rdma_cm.h`
    /// (not UAPI): `event` of [`RdmaUcmEventResp`].
    RdmaCmEventType(u32) prefix "RDMA_CM_EVENT_" {
        /// `RDMA_CM_EVENT_ADDR_RESOLVED`.
        ADDR_RESOLVED = 0;
        /// `RDMA_CM_EVENT_ADDR_ERROR`.
        ADDR_ERROR = 1;
        /// `RDMA_CM_EVENT_ROUTE_RESOLVED`.
        ROUTE_RESOLVED = 2;
        /// `RDMA_CM_EVENT_ROUTE_ERROR`.
        ROUTE_ERROR = 3;
        /// `RDMA_CM_EVENT_CONNECT_REQUEST`: `id` of the event is a new id.
        CONNECT_REQUEST = 4;
        /// `RDMA_CM_EVENT_CONNECT_RESPONSE`.
        CONNECT_RESPONSE = 5;
        /// `RDMA_CM_EVENT_CONNECT_ERROR`.
        CONNECT_ERROR = 6;
        /// `RDMA_CM_EVENT_UNREACHABLE`.
        UNREACHABLE = 7;
        /// `RDMA_CM_EVENT_REJECTED`: `status` is the reject reason.
        REJECTED = 8;
        /// `RDMA_CM_EVENT_ESTABLISHED`.
        ESTABLISHED = 9;
        /// `RDMA_CM_EVENT_DISCONNECTED`.
        DISCONNECTED = 10;
        /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
        DEVICE_REMOVAL = 11;
        /// `RDMA_CM_EVENT_MULTICAST_JOIN`.
        MULTICAST_JOIN = 12;
        /// `RDMA_CM_EVENT_MULTICAST_ERROR`.
        MULTICAST_ERROR = 13;
        /// `RDMA_CM_EVENT_ADDR_CHANGE`.
        ADDR_CHANGE = 14;
        /// `RDMA_CM_EVENT_TIMEWAIT_EXIT`.
        TIMEWAIT_EXIT = 15;
    }
}

named_values! {
    /// The reject reasons of `enum ib_cm_rej_reason` (kernel
    /// `include/rdma/ib_cm.h`, not UAPI) that `RDMA_USER_CM_CMD_REJECT`
    /// accepts in `reason` (0 means `CONSUMER_DEFINED`); also the `status`
    /// of a `REJECTED` event on InfiniBand/RoCE.
    IbCmRejReason(u8) prefix "IB_CM_REJ_" {
        /// `IB_CM_REJ_CONSUMER_DEFINED`.
        CONSUMER_DEFINED = 28;
        /// `IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED`: ECE refused.
        VENDOR_OPTION_NOT_SUPPORTED = 35;
    }
}

/// `struct rdma_ucm_cmd_hdr` of `rdma_user_cm.h`: the start of every write
/// to the rdma_cm device.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmCmdHdr {
    /// `cmd`: an `RDMA_USER_CM_CMD_*`.
    pub cmd: u32,
    /// `in`: bytes of the command struct after this header.
    pub r#in: u16,
    /// `out`: bytes of the response buffer at the command's `response`.
    pub out: u16,
}

/// Command or response too large for the 16-bit `in`/`out` of
/// [`RdmaUcmCmdHdr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcmLengthOverflow(pub usize);

impl core::fmt::Display for UcmLengthOverflow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "rdma_cm length {} does not fit 16 bits", self.0)
    }
}

impl std::error::Error for UcmLengthOverflow {}

/// The bytes of one rdma_cm write: the header (`in` = `size_of::<T>()`,
/// `out` = `out_len`) followed by `cmd`. The command's `response` field, if
/// any, must already hold the address of a buffer of `out_len` bytes.
pub fn encode_cmd<T: IntoBytes + Immutable>(
    cmd: u32,
    payload: &T,
    out_len: usize,
) -> Result<Vec<u8>, UcmLengthOverflow> {
    let body = payload.as_bytes();
    let hdr = RdmaUcmCmdHdr {
        cmd,
        r#in: u16::try_from(body.len()).map_err(|_| UcmLengthOverflow(body.len()))?,
        out: u16::try_from(out_len).map_err(|_| UcmLengthOverflow(out_len))?,
    };
    let mut v = Vec::with_capacity(core::mem::size_of::<RdmaUcmCmdHdr>() + body.len());
    v.extend_from_slice(hdr.as_bytes());
    v.extend_from_slice(body);
    Ok(v)
}

/// Every `#[repr(C)]` type of this module, for the header comparison test.
pub fn layouts() -> Vec<StructLayout> {
    let mut v = vec![
        crate::c_layout!(RdmaUcmCmdHdr => "struct rdma_ucm_cmd_hdr" {
            cmd => "cmd",
            r#in => "in",
            out => "out",
        }),
    ];
    v.extend(cmds::layouts());
    v.extend(resp::layouts());
    v.extend(sa::layouts());
    v.extend(sockaddr::layouts());
    v
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    let mut v = vec![
        crate::c_const!(RDMA_USER_CM_ABI_VERSION => "RDMA_USER_CM_ABI_VERSION"),
        crate::c_const!(RDMA_MAX_PRIVATE_DATA => "RDMA_MAX_PRIVATE_DATA"),
        crate::c_const!(RDMA_USER_CM_QUERY_ADDR => "RDMA_USER_CM_QUERY_ADDR"),
        crate::c_const!(RDMA_USER_CM_QUERY_PATH => "RDMA_USER_CM_QUERY_PATH"),
        crate::c_const!(RDMA_USER_CM_QUERY_GID => "RDMA_USER_CM_QUERY_GID"),
        crate::c_const!(RDMA_MC_JOIN_FLAG_FULLMEMBER => "RDMA_MC_JOIN_FLAG_FULLMEMBER"),
        crate::c_const!(
            RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER => "RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER"
        ),
        crate::c_const!(RDMA_MC_JOIN_FLAG_RESERVED => "RDMA_MC_JOIN_FLAG_RESERVED"),
        crate::c_const!(RDMA_OPTION_ID => "RDMA_OPTION_ID"),
        crate::c_const!(RDMA_OPTION_IB => "RDMA_OPTION_IB"),
        crate::c_const!(RDMA_OPTION_ID_TOS => "RDMA_OPTION_ID_TOS"),
        crate::c_const!(RDMA_OPTION_ID_REUSEADDR => "RDMA_OPTION_ID_REUSEADDR"),
        crate::c_const!(RDMA_OPTION_ID_AFONLY => "RDMA_OPTION_ID_AFONLY"),
        crate::c_const!(RDMA_OPTION_ID_ACK_TIMEOUT => "RDMA_OPTION_ID_ACK_TIMEOUT"),
        crate::c_const!(RDMA_OPTION_IB_PATH => "RDMA_OPTION_IB_PATH"),
    ];
    v.extend(RDMA_USER_CM_CMDS.iter().map(|&(c, value)| ConstValue {
        c,
        value: value.into(),
    }));
    v.extend(RdmaUcmPortSpace::ALL.iter().map(|&(c, value)| ConstValue {
        c,
        value: value.into(),
    }));
    v.extend(sa::consts());
    v
}

/// What this module defines that no installed UAPI header has.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    let events = RdmaCmEventType::ALL.iter().map(|&(c, _)| NewerThanHeaders {
        c,
        reason: "not in UAPI: include/rdma/rdma_cm.h (enum rdma_cm_event_type)",
    });
    let rej = IbCmRejReason::ALL.iter().map(|&(c, _)| NewerThanHeaders {
        c,
        reason: "not in UAPI: include/rdma/ib_cm.h (enum ib_cm_rej_reason)",
    });
    let af = ["AF_INET", "AF_INET6", "AF_IB"]
        .into_iter()
        .map(|c| NewerThanHeaders {
            c,
            reason: "libc <sys/socket.h> (linux/socket.h has no AF_*); fixed Linux values",
        });
    events.chain(rej).chain(af).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_puts_byte_lengths_in_the_header() {
        let c = RdmaUcmDestroyId {
            response: 0x1000,
            id: 7,
            reserved: 0,
        };
        let b = encode_cmd(RDMA_USER_CM_CMD_DESTROY_ID, &c, 4).unwrap();
        assert_eq!(b.len(), 8 + 16);
        assert_eq!(&b[..4], &1u32.to_ne_bytes());
        assert_eq!(&b[4..6], &16u16.to_ne_bytes());
        assert_eq!(&b[6..8], &4u16.to_ne_bytes());
        assert_eq!(&b[8..16], &0x1000u64.to_ne_bytes());
        assert_eq!(
            encode_cmd(RDMA_USER_CM_CMD_QUERY, &[0u8; 70000], 0),
            Err(UcmLengthOverflow(70000))
        );
    }

    #[test]
    fn named_values_print_their_c_names() {
        assert_eq!(
            format!("{:?}", RdmaCmEventType::ESTABLISHED),
            "RDMA_CM_EVENT_ESTABLISHED"
        );
        assert_eq!(format!("{:?}", RdmaCmEventType(99)), "RdmaCmEventType(99)");
        assert_eq!(RdmaUcmPortSpace::TCP.name(), Some("RDMA_PS_TCP"));
        assert_eq!(RdmaCmEventType::ALL.len(), 16);
    }
}

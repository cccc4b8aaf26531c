//! The command structs of `rdma_user_cm.h` (what follows the
//! [`RdmaUcmCmdHdr`](super::RdmaUcmCmdHdr) in a write to `/dev/infiniband/rdma_cm`)
//! and their small fixed responses.

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use super::{KernelSockaddrStorage, SockaddrIn6, RDMA_MAX_PRIVATE_DATA};
use crate::layout::StructLayout;

/// `struct rdma_ucm_create_id` (`RDMA_USER_CM_CMD_CREATE_ID`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmCreateId {
    /// `uid`: the caller's cookie, echoed in every event of the id.
    pub uid: u64,
    /// `response`: address of a [`RdmaUcmCreateIdResp`].
    pub response: u64,
    /// `ps`: a [`RdmaUcmPortSpace`](super::RdmaUcmPortSpace) value.
    pub ps: u16,
    /// `qp_type`: an `IB_UVERBS_QPT_*` value (RC for TCP, UD for UDP/IPoIB).
    pub qp_type: u8,
    /// `reserved`.
    pub reserved: [u8; 5],
}

/// `struct rdma_ucm_create_id_resp`: also the answer to `JOIN_IP_MCAST` and
/// `JOIN_MCAST`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmCreateIdResp {
    /// `id`: the kernel's handle for the new id (or multicast membership).
    pub id: u32,
}

/// `struct rdma_ucm_destroy_id` (`DESTROY_ID`; also `LEAVE_MCAST`, with the
/// membership id).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmDestroyId {
    /// `response`: address of a [`RdmaUcmDestroyIdResp`].
    pub response: u64,
    /// `id`.
    pub id: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct rdma_ucm_destroy_id_resp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmDestroyIdResp {
    /// `events_reported`: events delivered for the id (to reconcile with
    /// the events the caller has consumed).
    pub events_reported: u32,
}

/// `struct rdma_ucm_bind_ip` (`BIND_IP`, legacy: IPv4/IPv6 only).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmBindIp {
    /// `response`: unused by the kernel.
    pub response: u64,
    /// `addr`.
    pub addr: SockaddrIn6,
    /// `id`.
    pub id: u32,
}

/// `struct rdma_ucm_bind` (`BIND`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmBind {
    /// `id`.
    pub id: u32,
    /// `addr_size`: the family struct's size ([`sockaddr_len`](super::sockaddr_len)).
    pub addr_size: u16,
    /// `reserved`.
    pub reserved: u16,
    /// `addr`.
    pub addr: KernelSockaddrStorage,
}

/// `struct rdma_ucm_resolve_ip` (`RESOLVE_IP`, legacy).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmResolveIp {
    /// `src_addr` (family 0 for "any").
    pub src_addr: SockaddrIn6,
    /// `dst_addr`.
    pub dst_addr: SockaddrIn6,
    /// `id`.
    pub id: u32,
    /// `timeout_ms`.
    pub timeout_ms: u32,
}

/// `struct rdma_ucm_resolve_addr` (`RESOLVE_ADDR`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmResolveAddr {
    /// `id`.
    pub id: u32,
    /// `timeout_ms`.
    pub timeout_ms: u32,
    /// `src_size`: 0 when no source is given.
    pub src_size: u16,
    /// `dst_size`.
    pub dst_size: u16,
    /// `reserved`.
    pub reserved: u32,
    /// `src_addr`.
    pub src_addr: KernelSockaddrStorage,
    /// `dst_addr`.
    pub dst_addr: KernelSockaddrStorage,
}

/// `struct rdma_ucm_resolve_route` (`RESOLVE_ROUTE`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmResolveRoute {
    /// `id`.
    pub id: u32,
    /// `timeout_ms`.
    pub timeout_ms: u32,
}

/// `struct rdma_ucm_query` (`QUERY`, and `QUERY_ROUTE` which ignores
/// `option`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmQuery {
    /// `response`: address of the answer, whose type `option` selects.
    pub response: u64,
    /// `id`.
    pub id: u32,
    /// `option`: `RDMA_USER_CM_QUERY_*`.
    pub option: u32,
}

/// `struct rdma_ucm_conn_param`: connection parameters, sent with
/// `CONNECT`/`ACCEPT` and reported in connection events.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmConnParam {
    /// `qp_num`.
    pub qp_num: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `private_data`: `private_data_len` bytes are meaningful.
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
    /// `private_data_len`.
    pub private_data_len: u8,
    /// `srq`: non-zero when the QP uses an SRQ.
    pub srq: u8,
    /// `responder_resources`.
    pub responder_resources: u8,
    /// `initiator_depth`.
    pub initiator_depth: u8,
    /// `flow_control`.
    pub flow_control: u8,
    /// `retry_count`.
    pub retry_count: u8,
    /// `rnr_retry_count`.
    pub rnr_retry_count: u8,
    /// `valid`: non-zero when the struct carries parameters (a zero `valid`
    /// in `ACCEPT` means "no QP": the kernel does not use `qp_num`).
    pub valid: u8,
}

/// Private data longer than the 255 bytes a `u8` `private_data_len` can
/// describe (the array holds [`RDMA_MAX_PRIVATE_DATA`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateDataTooLong(pub usize);

impl core::fmt::Display for PrivateDataTooLong {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} bytes of private data (at most 255)", self.0)
    }
}

impl std::error::Error for PrivateDataTooLong {}

fn set_private(
    buf: &mut [u8; RDMA_MAX_PRIVATE_DATA],
    len: &mut u8,
    data: &[u8],
) -> Result<(), PrivateDataTooLong> {
    let n = u8::try_from(data.len()).map_err(|_| PrivateDataTooLong(data.len()))?;
    buf.fill(0);
    buf.get_mut(..data.len())
        .ok_or(PrivateDataTooLong(data.len()))?
        .copy_from_slice(data);
    *len = n;
    Ok(())
}

fn private(buf: &[u8; RDMA_MAX_PRIVATE_DATA], len: u8) -> &[u8] {
    // A u8 length never exceeds the 256-byte array.
    buf.get(..usize::from(len)).unwrap_or(buf)
}

impl RdmaUcmConnParam {
    /// All-zero parameters.
    pub fn zeroed() -> RdmaUcmConnParam {
        RdmaUcmConnParam::new_zeroed()
    }

    /// The meaningful private data.
    pub fn private_data(&self) -> &[u8] {
        private(&self.private_data, self.private_data_len)
    }

    /// Copies `data` into `private_data` and sets `private_data_len`.
    pub fn set_private_data(&mut self, data: &[u8]) -> Result<(), PrivateDataTooLong> {
        set_private(&mut self.private_data, &mut self.private_data_len, data)
    }
}

/// `struct rdma_ucm_ece`: Enhanced Connection Establishment options.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct RdmaUcmEce {
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `attr_mod`.
    pub attr_mod: u32,
}

/// `struct rdma_ucm_connect` (`CONNECT`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmConnect {
    /// `conn_param`.
    pub conn_param: RdmaUcmConnParam,
    /// `id`.
    pub id: u32,
    /// `reserved`.
    pub reserved: u32,
    /// `ece` (kernel 5.9+; older kernels read only the bytes before it).
    pub ece: RdmaUcmEce,
}

/// `struct rdma_ucm_listen` (`LISTEN`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmListen {
    /// `id`.
    pub id: u32,
    /// `backlog`.
    pub backlog: u32,
}

/// `struct rdma_ucm_accept` (`ACCEPT`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmAccept {
    /// `uid`: the cookie the accepted id's events will carry.
    pub uid: u64,
    /// `conn_param`.
    pub conn_param: RdmaUcmConnParam,
    /// `id`.
    pub id: u32,
    /// `reserved`.
    pub reserved: u32,
    /// `ece`.
    pub ece: RdmaUcmEce,
}

/// `struct rdma_ucm_reject` (`REJECT`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmReject {
    /// `id`.
    pub id: u32,
    /// `private_data_len`.
    pub private_data_len: u8,
    /// `reason`: 0 (consumer defined) or an
    /// [`IbCmRejReason`](super::IbCmRejReason) value.
    pub reason: u8,
    /// `reserved`.
    pub reserved: [u8; 2],
    /// `private_data`.
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
}

impl RdmaUcmReject {
    /// The meaningful private data.
    pub fn private_data(&self) -> &[u8] {
        private(&self.private_data, self.private_data_len)
    }

    /// Copies `data` into `private_data` and sets `private_data_len`.
    pub fn set_private_data(&mut self, data: &[u8]) -> Result<(), PrivateDataTooLong> {
        set_private(&mut self.private_data, &mut self.private_data_len, data)
    }
}

/// `struct rdma_ucm_disconnect` (`DISCONNECT`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmDisconnect {
    /// `id`.
    pub id: u32,
}

/// `struct rdma_ucm_init_qp_attr` (`INIT_QP_ATTR`); the answer is a
/// `struct ib_uverbs_qp_attr` (see [`crate::verbs`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmInitQpAttr {
    /// `response`: address of a `struct ib_uverbs_qp_attr`.
    pub response: u64,
    /// `id`.
    pub id: u32,
    /// `qp_state`: the `IB_UVERBS_QPS_*` state to get attributes for.
    pub qp_state: u32,
}

/// `struct rdma_ucm_notify` (`NOTIFY`): forward a QP async event.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmNotify {
    /// `id`.
    pub id: u32,
    /// `event`: an `IB_EVENT_*` number.
    pub event: u32,
}

/// `struct rdma_ucm_join_ip_mcast` (`JOIN_IP_MCAST`, legacy).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmJoinIpMcast {
    /// `response`: address of a [`RdmaUcmCreateIdResp`].
    pub response: u64,
    /// `uid`.
    pub uid: u64,
    /// `addr`.
    pub addr: SockaddrIn6,
    /// `id`.
    pub id: u32,
}

/// `struct rdma_ucm_join_mcast` (`JOIN_MCAST`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmJoinMcast {
    /// `response`: address of a [`RdmaUcmCreateIdResp`].
    pub response: u64,
    /// `uid`.
    pub uid: u64,
    /// `id`.
    pub id: u32,
    /// `addr_size`.
    pub addr_size: u16,
    /// `join_flags`: `RDMA_MC_JOIN_FLAG_*`.
    pub join_flags: u16,
    /// `addr`.
    pub addr: KernelSockaddrStorage,
}

/// `struct rdma_ucm_get_event` (`GET_EVENT`; blocks unless the file is
/// non-blocking).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmGetEvent {
    /// `response`: address of a [`RdmaUcmEventResp`](super::RdmaUcmEventResp).
    pub response: u64,
}

/// `struct rdma_ucm_set_option` (`SET_OPTION`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmSetOption {
    /// `optval`: address of the value.
    pub optval: u64,
    /// `id`.
    pub id: u32,
    /// `level`: `RDMA_OPTION_ID` or `RDMA_OPTION_IB`.
    pub level: u32,
    /// `optname`: `RDMA_OPTION_ID_*` / `RDMA_OPTION_IB_*`.
    pub optname: u32,
    /// `optlen`: bytes at `optval`.
    pub optlen: u32,
}

/// `struct rdma_ucm_migrate_id` (`MIGRATE_ID`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmMigrateId {
    /// `response`: address of a [`RdmaUcmMigrateResp`].
    pub response: u64,
    /// `id`.
    pub id: u32,
    /// `fd`: the rdma_cm file descriptor to move the id to.
    pub fd: u32,
}

/// `struct rdma_ucm_migrate_resp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmMigrateResp {
    /// `events_reported`.
    pub events_reported: u32,
}

/// The types above, for the header comparison test.
pub(super) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(RdmaUcmCreateId => "struct rdma_ucm_create_id" {
            uid => "uid", response => "response", ps => "ps", qp_type => "qp_type",
            reserved => "reserved",
        }),
        crate::c_layout!(RdmaUcmCreateIdResp => "struct rdma_ucm_create_id_resp" { id => "id" }),
        crate::c_layout!(RdmaUcmDestroyId => "struct rdma_ucm_destroy_id" {
            response => "response", id => "id", reserved => "reserved",
        }),
        crate::c_layout!(RdmaUcmDestroyIdResp => "struct rdma_ucm_destroy_id_resp" {
            events_reported => "events_reported",
        }),
        crate::c_layout!(RdmaUcmBindIp => "struct rdma_ucm_bind_ip" {
            response => "response", addr => "addr", id => "id",
        }),
        crate::c_layout!(RdmaUcmBind => "struct rdma_ucm_bind" {
            id => "id", addr_size => "addr_size", reserved => "reserved", addr => "addr",
        }),
        crate::c_layout!(RdmaUcmResolveIp => "struct rdma_ucm_resolve_ip" {
            src_addr => "src_addr", dst_addr => "dst_addr", id => "id",
            timeout_ms => "timeout_ms",
        }),
        crate::c_layout!(RdmaUcmResolveAddr => "struct rdma_ucm_resolve_addr" {
            id => "id", timeout_ms => "timeout_ms", src_size => "src_size",
            dst_size => "dst_size", reserved => "reserved", src_addr => "src_addr",
            dst_addr => "dst_addr",
        }),
        crate::c_layout!(RdmaUcmResolveRoute => "struct rdma_ucm_resolve_route" {
            id => "id", timeout_ms => "timeout_ms",
        }),
        crate::c_layout!(RdmaUcmQuery => "struct rdma_ucm_query" {
            response => "response", id => "id", option => "option",
        }),
        crate::c_layout!(RdmaUcmConnParam => "struct rdma_ucm_conn_param" {
            qp_num => "qp_num", qkey => "qkey", private_data => "private_data",
            private_data_len => "private_data_len", srq => "srq",
            responder_resources => "responder_resources",
            initiator_depth => "initiator_depth", flow_control => "flow_control",
            retry_count => "retry_count", rnr_retry_count => "rnr_retry_count",
            valid => "valid",
        }),
        crate::c_layout!(RdmaUcmEce => "struct rdma_ucm_ece" {
            vendor_id => "vendor_id", attr_mod => "attr_mod",
        }),
        crate::c_layout!(RdmaUcmConnect => "struct rdma_ucm_connect" {
            conn_param => "conn_param", id => "id", reserved => "reserved", ece => "ece",
        }),
        crate::c_layout!(RdmaUcmListen => "struct rdma_ucm_listen" {
            id => "id", backlog => "backlog",
        }),
        crate::c_layout!(RdmaUcmAccept => "struct rdma_ucm_accept" {
            uid => "uid", conn_param => "conn_param", id => "id", reserved => "reserved",
            ece => "ece",
        }),
        crate::c_layout!(RdmaUcmReject => "struct rdma_ucm_reject" {
            id => "id", private_data_len => "private_data_len", reason => "reason",
            reserved => "reserved", private_data => "private_data",
        }),
        crate::c_layout!(RdmaUcmDisconnect => "struct rdma_ucm_disconnect" { id => "id" }),
        crate::c_layout!(RdmaUcmInitQpAttr => "struct rdma_ucm_init_qp_attr" {
            response => "response", id => "id", qp_state => "qp_state",
        }),
        crate::c_layout!(RdmaUcmNotify => "struct rdma_ucm_notify" {
            id => "id", event => "event",
        }),
        crate::c_layout!(RdmaUcmJoinIpMcast => "struct rdma_ucm_join_ip_mcast" {
            response => "response", uid => "uid", addr => "addr", id => "id",
        }),
        crate::c_layout!(RdmaUcmJoinMcast => "struct rdma_ucm_join_mcast" {
            response => "response", uid => "uid", id => "id", addr_size => "addr_size",
            join_flags => "join_flags", addr => "addr",
        }),
        crate::c_layout!(RdmaUcmGetEvent => "struct rdma_ucm_get_event" {
            response => "response",
        }),
        crate::c_layout!(RdmaUcmSetOption => "struct rdma_ucm_set_option" {
            optval => "optval", id => "id", level => "level", optname => "optname",
            optlen => "optlen",
        }),
        crate::c_layout!(RdmaUcmMigrateId => "struct rdma_ucm_migrate_id" {
            response => "response", id => "id", fd => "fd",
        }),
        crate::c_layout!(RdmaUcmMigrateResp => "struct rdma_ucm_migrate_resp" {
            events_reported => "events_reported",
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_is_bounded() {
        let mut p = RdmaUcmConnParam::zeroed();
        p.set_private_data(b"hello").unwrap();
        assert_eq!(p.private_data(), b"hello");
        assert_eq!(p.set_private_data(&[1; 257]), Err(PrivateDataTooLong(257)));
        assert_eq!(
            p.private_data(),
            b"hello",
            "a failed set leaves the old data"
        );
        p.set_private_data(&[7; 255]).unwrap();
        assert_eq!(p.private_data().len(), 255);
        let mut r = RdmaUcmReject::new_zeroed();
        r.set_private_data(&[]).unwrap();
        assert!(r.private_data().is_empty());
    }
}

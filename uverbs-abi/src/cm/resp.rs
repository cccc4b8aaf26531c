//! The larger answers of `rdma_user_cm.h`: `QUERY`/`QUERY_ROUTE` responses
//! and the event of `GET_EVENT` with its connection/UD parameters.

use core::mem::{align_of, offset_of, size_of};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use super::{
    IbUserPathRec, KernelSockaddrStorage, RdmaCmEventType, RdmaUcmConnParam, RdmaUcmEce,
    SockaddrIn6, RDMA_MAX_PRIVATE_DATA,
};
use crate::layout::StructLayout;

/// `struct rdma_ucm_query_route_resp` (answer to `QUERY_ROUTE`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmQueryRouteResp {
    /// `node_guid`: the bound device's node GUID (network order), 0 if
    /// unbound.
    pub node_guid: u64,
    /// `ib_route`: up to two paths (`num_paths` valid).
    pub ib_route: [IbUserPathRec; 2],
    /// `src_addr`.
    pub src_addr: SockaddrIn6,
    /// `dst_addr`.
    pub dst_addr: SockaddrIn6,
    /// `num_paths`.
    pub num_paths: u32,
    /// `port_num`.
    pub port_num: u8,
    /// `reserved`.
    pub reserved: [u8; 3],
    /// `ibdev_index`: the device's index (as in RDMA netlink), kernel 5.5+.
    pub ibdev_index: u32,
    /// `reserved1`.
    pub reserved1: u32,
}

/// `struct rdma_ucm_query_addr_resp` (answer to `QUERY` with
/// `RDMA_USER_CM_QUERY_ADDR` or `_GID`).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmQueryAddrResp {
    /// `node_guid`: network order, 0 if unbound.
    pub node_guid: u64,
    /// `port_num`.
    pub port_num: u8,
    /// `reserved`.
    pub reserved: u8,
    /// `pkey`.
    pub pkey: u16,
    /// `src_size`.
    pub src_size: u16,
    /// `dst_size`.
    pub dst_size: u16,
    /// `src_addr`.
    pub src_addr: KernelSockaddrStorage,
    /// `dst_addr`.
    pub dst_addr: KernelSockaddrStorage,
    /// `ibdev_index`.
    pub ibdev_index: u32,
    /// `reserved1`.
    pub reserved1: u32,
}

/// `struct rdma_ucm_query_path_resp` (answer to `QUERY` with
/// `RDMA_USER_CM_QUERY_PATH`), without its flexible `path_data[]`:
/// `num_paths` [`IbPathRecData`](super::IbPathRecData) follow, as many as
/// the response buffer holds.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmQueryPathResp {
    /// `num_paths`.
    pub num_paths: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `sizeof(struct ib_uverbs_ah_attr)` (`ib_user_verbs.h`).
const IB_UVERBS_AH_ATTR_LEN: usize = 32;

/// `struct rdma_ucm_ud_param`: UD parameters, reported in the events of
/// `RDMA_PS_UDP`/`RDMA_PS_IPOIB` ids (connect request/established on a UD
/// id, multicast join).
///
/// `ah_attr` is the `struct ib_uverbs_ah_attr` of `ib_user_verbs.h`, kept
/// here as its 32 raw bytes (4-aligned); decode it with
/// [`ah_attr_as`](Self::ah_attr_as) and the type of [`crate::verbs`].
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmUdParam {
    /// `qp_num`.
    pub qp_num: u32,
    /// `qkey`.
    pub qkey: u32,
    /// `ah_attr`: a `struct ib_uverbs_ah_attr`.
    pub ah_attr: [u32; IB_UVERBS_AH_ATTR_LEN / 4],
    /// `private_data`.
    pub private_data: [u8; RDMA_MAX_PRIVATE_DATA],
    /// `private_data_len`.
    pub private_data_len: u8,
    /// `reserved`.
    pub reserved: [u8; 7],
}

impl RdmaUcmUdParam {
    /// `ah_attr` read as `T` (meant for `struct ib_uverbs_ah_attr`); `None`
    /// if `T` is larger than the 32 bytes.
    pub fn ah_attr_as<T: FromBytes>(&self) -> Option<T> {
        T::read_from_prefix(self.ah_attr.as_bytes())
            .ok()
            .map(|(v, _)| v)
    }

    /// The meaningful private data.
    pub fn private_data(&self) -> &[u8] {
        self.private_data
            .get(..usize::from(self.private_data_len))
            .unwrap_or(&self.private_data)
    }
}

/// The size of the `param` union of `struct rdma_ucm_event_resp` (its
/// larger member is [`RdmaUcmUdParam`]).
pub const RDMA_UCM_EVENT_PARAM_LEN: usize = size_of::<RdmaUcmUdParam>();

/// `struct rdma_ucm_event_resp` (answer to `GET_EVENT`).
///
/// `param` is a C union of [`RdmaUcmConnParam`] (`param.conn`, for
/// connected port spaces) and [`RdmaUcmUdParam`] (`param.ud`); it is kept
/// as raw 4-aligned words, read with [`conn`](Self::conn) or
/// [`ud`](Self::ud).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RdmaUcmEventResp {
    /// `uid`: the cookie of the id (for `CONNECT_REQUEST`, of the
    /// listening id).
    pub uid: u64,
    /// `id`: the id (for `CONNECT_REQUEST`, the new id).
    pub id: u32,
    /// `event`: an [`RdmaCmEventType`] value.
    pub event: u32,
    /// `status`: 0, a negative errno, or (for `REJECTED`) the reject
    /// reason.
    pub status: u32,
    /// `param`: the union, raw.
    pub param: [u32; RDMA_UCM_EVENT_PARAM_LEN / 4],
    /// `reserved`.
    pub reserved: u32,
    /// `ece`.
    pub ece: RdmaUcmEce,
}

const _: () = assert!(size_of::<RdmaUcmConnParam>() <= RDMA_UCM_EVENT_PARAM_LEN);

impl RdmaUcmEventResp {
    /// `event` as a type.
    pub fn event_type(&self) -> RdmaCmEventType {
        RdmaCmEventType(self.event)
    }

    /// `param.conn`.
    pub fn conn(&self) -> RdmaUcmConnParam {
        // Fits: asserted above; never falls back to zeroes.
        RdmaUcmConnParam::read_from_prefix(self.param.as_bytes())
            .map_or_else(|_| RdmaUcmConnParam::new_zeroed(), |(v, _)| v)
    }

    /// `param.ud`.
    pub fn ud(&self) -> RdmaUcmUdParam {
        // Same size as the union.
        RdmaUcmUdParam::read_from_prefix(self.param.as_bytes())
            .map_or_else(|_| RdmaUcmUdParam::new_zeroed(), |(v, _)| v)
    }
}

pub(super) fn layouts() -> Vec<StructLayout> {
    const PARAM: usize = offset_of!(RdmaUcmEventResp, param);
    vec![
        crate::c_layout!(RdmaUcmUdParam => "struct rdma_ucm_ud_param" {
            qp_num => "qp_num", qkey => "qkey", ah_attr => "ah_attr",
            private_data => "private_data", private_data_len => "private_data_len",
            reserved => "reserved",
        }),
        StructLayout {
            rust: "RdmaUcmEventResp",
            c: "struct rdma_ucm_event_resp",
            size: size_of::<RdmaUcmEventResp>(),
            align: align_of::<RdmaUcmEventResp>(),
            fields: &[
                ("uid", offset_of!(RdmaUcmEventResp, uid)),
                ("id", offset_of!(RdmaUcmEventResp, id)),
                ("event", offset_of!(RdmaUcmEventResp, event)),
                ("status", offset_of!(RdmaUcmEventResp, status)),
                ("param", PARAM),
                ("param.conn", PARAM),
                (
                    "param.conn.qp_num",
                    PARAM + offset_of!(RdmaUcmConnParam, qp_num),
                ),
                (
                    "param.conn.private_data",
                    PARAM + offset_of!(RdmaUcmConnParam, private_data),
                ),
                (
                    "param.conn.private_data_len",
                    PARAM + offset_of!(RdmaUcmConnParam, private_data_len),
                ),
                (
                    "param.conn.valid",
                    PARAM + offset_of!(RdmaUcmConnParam, valid),
                ),
                ("param.ud", PARAM),
                ("param.ud.qkey", PARAM + offset_of!(RdmaUcmUdParam, qkey)),
                (
                    "param.ud.ah_attr",
                    PARAM + offset_of!(RdmaUcmUdParam, ah_attr),
                ),
                (
                    "param.ud.private_data",
                    PARAM + offset_of!(RdmaUcmUdParam, private_data),
                ),
                ("reserved", offset_of!(RdmaUcmEventResp, reserved)),
                ("ece", offset_of!(RdmaUcmEventResp, ece)),
            ],
        },
        crate::c_layout!(RdmaUcmQueryRouteResp => "struct rdma_ucm_query_route_resp" {
            node_guid => "node_guid", ib_route => "ib_route", src_addr => "src_addr",
            dst_addr => "dst_addr", num_paths => "num_paths", port_num => "port_num",
            reserved => "reserved", ibdev_index => "ibdev_index", reserved1 => "reserved1",
        }),
        crate::c_layout!(RdmaUcmQueryAddrResp => "struct rdma_ucm_query_addr_resp" {
            node_guid => "node_guid", port_num => "port_num", reserved => "reserved",
            pkey => "pkey", src_size => "src_size", dst_size => "dst_size",
            src_addr => "src_addr", dst_addr => "dst_addr", ibdev_index => "ibdev_index",
            reserved1 => "reserved1",
        }),
        StructLayout {
            rust: "RdmaUcmQueryPathResp",
            c: "struct rdma_ucm_query_path_resp",
            size: core::mem::size_of::<RdmaUcmQueryPathResp>(),
            align: core::mem::align_of::<RdmaUcmQueryPathResp>(),
            fields: &[
                (
                    "num_paths",
                    core::mem::offset_of!(RdmaUcmQueryPathResp, num_paths),
                ),
                (
                    "reserved",
                    core::mem::offset_of!(RdmaUcmQueryPathResp, reserved),
                ),
                ("path_data", core::mem::size_of::<RdmaUcmQueryPathResp>()),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_param_members_read_the_union() {
        let mut e = RdmaUcmEventResp::new_zeroed();
        e.event = RdmaCmEventType::CONNECT_REQUEST.0;
        let mut conn = RdmaUcmConnParam::zeroed();
        conn.qp_num = 0x42;
        conn.set_private_data(b"hi").unwrap();
        conn.responder_resources = 3;
        let n = size_of::<RdmaUcmConnParam>();
        e.param.as_mut_bytes()[..n].copy_from_slice(conn.as_bytes());
        assert_eq!(e.event_type(), RdmaCmEventType::CONNECT_REQUEST);
        assert_eq!(e.conn().qp_num, 0x42);
        assert_eq!(e.conn().private_data(), b"hi");
        assert_eq!(e.conn().responder_resources, 3);
        assert_eq!(e.ud().qp_num, 0x42);
        assert_eq!(e.ud().ah_attr_as::<[u8; 32]>().map(|a| a.len()), Some(32));
        assert_eq!(e.ud().ah_attr_as::<[u8; 33]>(), None);
        assert_eq!(size_of::<RdmaUcmEventResp>(), 336);
    }
}

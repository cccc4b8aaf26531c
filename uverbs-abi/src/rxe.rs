//! `rdma_user_rxe.h`: the soft-RoCE (rxe) driver's user ABI.
//!
//! rxe shares its queues with user space: each CQ, SQ, RQ and SRQ is a
//! [`RxeQueueBuf`] header followed by slots, mapped with `mmap()` at the
//! [`Mminfo`] the create command returns. The provider writes send and
//! receive WQEs ([`RxeSendWqe`], [`RxeRecvWqe`]) and reads CQ slots (which
//! begin with `struct ib_uverbs_wc`) in that shared memory. It must not form
//! references to it, so besides the types this module gives the byte offset
//! of every field it touches, in [`offsets`], each checked against the C
//! header by the layout test.
//!
//! The driver's udata: CREATE_AH answers [`RxeCreateAhResp`], CREATE_CQ
//! [`RxeCreateCqResp`], RESIZE_CQ [`RxeResizeCqResp`], CREATE_QP
//! [`RxeCreateQpResp`], CREATE_SRQ [`RxeCreateSrqResp`]; MODIFY_SRQ takes
//! [`RxeModifySrqCmd`].

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::cm::SockaddrIn6;
use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};

mod checks;
pub mod offsets;
mod wqe;

pub use wqe::{
    RxeDmaInfo, RxeRecvWqe, RxeSendWqe, RxeSendWr, RxeSendWrAtomic, RxeSendWrMw, RxeSendWrRdma,
    RxeSendWrUd, RxeSge, RxeWqeState, RXE_SEND_WR_UNION_LEN,
};

/// `RXE_UVERBS_ABI_VERSION`: the driver ABI version rxe reports in
/// `/sys/class/infiniband_verbs/uverbsN/abi_version` (providers accept 1
/// and 2; they differ only on 32-bit machines). Kernel-internal
/// (`drivers/infiniband/sw/rxe/rxe.h`).
pub const RXE_UVERBS_ABI_VERSION: u32 = 2;

/// `RXE_NETWORK_TYPE_*` of `rdma_user_rxe.h`: the `network_type` of an
/// [`RxeAv`].
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeNetworkType(pub u8);

impl RxeNetworkType {
    /// `RXE_NETWORK_TYPE_IPV4`: RoCEv2 over IPv4.
    pub const IPV4: RxeNetworkType = RxeNetworkType(1);
    /// `RXE_NETWORK_TYPE_IPV6`: RoCEv2 over IPv6.
    pub const IPV6: RxeNetworkType = RxeNetworkType(2);

    /// The C enumerator's suffix, or `None` for a value this crate does not
    /// know.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            1 => Some("IPV4"),
            2 => Some("IPV6"),
            _ => None,
        }
    }
}

impl core::fmt::Debug for RxeNetworkType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "RXE_NETWORK_TYPE_{n}"),
            None => write!(f, "RxeNetworkType({})", self.0),
        }
    }
}

/// `union rxe_gid` of `rdma_user_rxe.h`: a GID, as 16 raw bytes or as
/// `global.{subnet_prefix, interface_id}` (two `__be64`), which the
/// accessors decode.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeGid {
    /// `raw`.
    pub raw: [u8; 16],
}

impl RxeGid {
    /// `global.subnet_prefix`, in host order.
    pub fn subnet_prefix(&self) -> u64 {
        let [a, b, c, d, e, f, g, h, ..] = self.raw;
        u64::from_be_bytes([a, b, c, d, e, f, g, h])
    }

    /// `global.interface_id`, in host order.
    pub fn interface_id(&self) -> u64 {
        let [.., a, b, c, d, e, f, g, h] = self.raw;
        u64::from_be_bytes([a, b, c, d, e, f, g, h])
    }

    /// The GID with these `global` halves (host-order values).
    pub fn from_global(subnet_prefix: u64, interface_id: u64) -> RxeGid {
        let mut raw = [0u8; 16];
        let (hi, lo) = raw.split_at_mut(8);
        hi.copy_from_slice(&subnet_prefix.to_be_bytes());
        lo.copy_from_slice(&interface_id.to_be_bytes());
        RxeGid { raw }
    }
}

/// `struct rxe_global_route` of `rdma_user_rxe.h`: the GRH part of an
/// address vector.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeGlobalRoute {
    /// `dgid`.
    pub dgid: RxeGid,
    /// `flow_label`.
    pub flow_label: u32,
    /// `sgid_index`.
    pub sgid_index: u8,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
    /// Implicit padding in C (the struct is 8-aligned).
    pub _pad: u8,
}

/// `struct rxe_av` of `rdma_user_rxe.h`: an address vector, embedded in UD
/// send WQEs for kernels that predate `ah_num`.
///
/// `sgid_addr` and `dgid_addr` are C unions of `struct sockaddr_in` and
/// `struct sockaddr_in6`; both are held as a [`SockaddrIn6`] (same size and
/// alignment), whose helpers read and write either family.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeAv {
    /// `port_num`.
    pub port_num: u8,
    /// `network_type`: an [`RxeNetworkType`].
    pub network_type: RxeNetworkType,
    /// `dmac`.
    pub dmac: [u8; 6],
    /// `grh`.
    pub grh: RxeGlobalRoute,
    /// `sgid_addr` (`_sockaddr_in` / `_sockaddr_in6`).
    pub sgid_addr: SockaddrIn6,
    /// `dgid_addr` (`_sockaddr_in` / `_sockaddr_in6`).
    pub dgid_addr: SockaddrIn6,
}

/// `struct mminfo` of `rdma_user_rxe.h`: where to `mmap()` a queue on the
/// uverbs file descriptor. Each offset may be mapped once.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mminfo {
    /// `offset`: the mmap offset.
    pub offset: u64,
    /// `size`: the length to map (header and every slot).
    pub size: u32,
    /// `pad`.
    pub pad: u32,
}

/// `struct rxe_create_ah_resp` of `rdma_user_rxe.h` (CREATE_AH udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeCreateAhResp {
    /// `ah_num`: the index UD send WQEs name the AH by
    /// ([`RxeSendWrUd::ah_num`]); 0 on kernels without it.
    pub ah_num: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct rxe_create_cq_resp` of `rdma_user_rxe.h` (CREATE_CQ udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeCreateCqResp {
    /// `mi`: the CQ ring.
    pub mi: Mminfo,
}

/// `struct rxe_resize_cq_resp` of `rdma_user_rxe.h` (RESIZE_CQ udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeResizeCqResp {
    /// `mi`: the new CQ ring.
    pub mi: Mminfo,
}

/// `struct rxe_create_qp_resp` of `rdma_user_rxe.h` (CREATE_QP udata out).
/// The receive queue comes first; with an SRQ `rq_mi` is all zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeCreateQpResp {
    /// `rq_mi`: the receive ring.
    pub rq_mi: Mminfo,
    /// `sq_mi`: the send ring.
    pub sq_mi: Mminfo,
}

/// `struct rxe_create_srq_resp` of `rdma_user_rxe.h` (CREATE_SRQ udata out).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeCreateSrqResp {
    /// `mi`: the SRQ ring.
    pub mi: Mminfo,
    /// `srq_num`.
    pub srq_num: u32,
    /// `reserved`.
    pub reserved: u32,
}

/// `struct rxe_modify_srq_cmd` of `rdma_user_rxe.h` (MODIFY_SRQ udata in):
/// where the kernel writes a new [`Mminfo`] when the SRQ is resized.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeModifySrqCmd {
    /// `mmap_info_addr`: user address of an [`Mminfo`].
    pub mmap_info_addr: u64,
}

/// `struct rxe_queue_buf` of `rdma_user_rxe.h`, without its flexible
/// `data[]`: the header at the start of every shared rxe queue.
///
/// The indices are stored already masked with `index_mask`; the queue is
/// empty when they are equal and full when `(producer + 1) & mask ==
/// consumer`. User space owns the producer of SQ/RQ/SRQ and the consumer of
/// a CQ; the kernel owns the other. Slot `i` is at
/// [`RXE_QUEUE_DATA_OFFSET`] `+ ((i & index_mask) << log2_elem_size)`. The
/// kernel keeps its own copies of `log2_elem_size`/`index_mask`; these are
/// informational and untrusted.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RxeQueueBuf {
    /// `log2_elem_size`: log2 of the slot size.
    pub log2_elem_size: u32,
    /// `index_mask`: slot count minus one.
    pub index_mask: u32,
    /// `pad_1`.
    pub pad_1: [u32; 30],
    /// `producer_index`, in its own cache line.
    pub producer_index: u32,
    /// `pad_2`.
    pub pad_2: [u32; 31],
    /// `consumer_index`, in its own cache line.
    pub consumer_index: u32,
    /// `pad_3`.
    pub pad_3: [u32; 31],
}

/// `offsetof(struct rxe_queue_buf, data)`: where the first slot begins.
pub const RXE_QUEUE_DATA_OFFSET: usize = core::mem::size_of::<RxeQueueBuf>();

/// Every `#[repr(C)]` type of this module, for the header comparison test.
pub fn layouts() -> Vec<StructLayout> {
    let mut v = vec![
        StructLayout {
            rust: "RxeGid",
            c: "union rxe_gid",
            size: core::mem::size_of::<RxeGid>(),
            align: core::mem::align_of::<RxeGid>(),
            fields: &[
                ("raw", 0),
                ("global.subnet_prefix", 0),
                ("global.interface_id", 8),
            ],
        },
        crate::c_layout!(RxeGlobalRoute => "struct rxe_global_route" {
            dgid => "dgid",
            flow_label => "flow_label",
            sgid_index => "sgid_index",
            hop_limit => "hop_limit",
            traffic_class => "traffic_class",
        }),
        crate::c_layout!(RxeAv => "struct rxe_av" {
            port_num => "port_num",
            network_type => "network_type",
            dmac => "dmac",
            grh => "grh",
            sgid_addr => "sgid_addr",
            sgid_addr => "sgid_addr._sockaddr_in",
            sgid_addr => "sgid_addr._sockaddr_in6",
            dgid_addr => "dgid_addr",
            dgid_addr => "dgid_addr._sockaddr_in",
            dgid_addr => "dgid_addr._sockaddr_in6",
        }),
        crate::c_layout!(Mminfo => "struct mminfo" {
            offset => "offset",
            size => "size",
            pad => "pad",
        }),
        crate::c_layout!(RxeCreateAhResp => "struct rxe_create_ah_resp" {
            ah_num => "ah_num",
            reserved => "reserved",
        }),
        crate::c_layout!(RxeCreateCqResp => "struct rxe_create_cq_resp" { mi => "mi" }),
        crate::c_layout!(RxeResizeCqResp => "struct rxe_resize_cq_resp" { mi => "mi" }),
        crate::c_layout!(RxeCreateQpResp => "struct rxe_create_qp_resp" {
            rq_mi => "rq_mi",
            sq_mi => "sq_mi",
        }),
        crate::c_layout!(RxeCreateSrqResp => "struct rxe_create_srq_resp" {
            mi => "mi",
            srq_num => "srq_num",
            reserved => "reserved",
        }),
        crate::c_layout!(RxeModifySrqCmd => "struct rxe_modify_srq_cmd" {
            mmap_info_addr => "mmap_info_addr",
        }),
        StructLayout {
            rust: "RxeQueueBuf",
            c: "struct rxe_queue_buf",
            size: core::mem::size_of::<RxeQueueBuf>(),
            align: core::mem::align_of::<RxeQueueBuf>(),
            fields: &[
                ("log2_elem_size", offsets::queue_buf::LOG2_ELEM_SIZE),
                ("index_mask", offsets::queue_buf::INDEX_MASK),
                ("pad_1", core::mem::offset_of!(RxeQueueBuf, pad_1)),
                ("producer_index", offsets::queue_buf::PRODUCER_INDEX),
                ("pad_2", core::mem::offset_of!(RxeQueueBuf, pad_2)),
                ("consumer_index", offsets::queue_buf::CONSUMER_INDEX),
                ("pad_3", core::mem::offset_of!(RxeQueueBuf, pad_3)),
                ("data", RXE_QUEUE_DATA_OFFSET),
            ],
        },
    ];
    v.extend(checks::layouts());
    v
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    vec![
        crate::c_const!(RxeNetworkType::IPV4.0 => "RXE_NETWORK_TYPE_IPV4"),
        crate::c_const!(RxeNetworkType::IPV6.0 => "RXE_NETWORK_TYPE_IPV6"),
    ]
}

/// Constants this module defines that no installed header has.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    let mut v = vec![NewerThanHeaders {
        c: "RXE_UVERBS_ABI_VERSION",
        reason: "not in UAPI: drivers/infiniband/sw/rxe/rxe.h (value 2 since v4.8)",
    }];
    v.extend(checks::newer_than_headers());
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_header_offsets_match_the_documented_cache_lines() {
        assert_eq!(offsets::queue_buf::PRODUCER_INDEX, 128);
        assert_eq!(offsets::queue_buf::CONSUMER_INDEX, 256);
        assert_eq!(RXE_QUEUE_DATA_OFFSET, 384);
    }

    #[test]
    fn gid_halves_are_big_endian() {
        let g = RxeGid::from_global(0xfe80_0000_0000_0000, 0x0211_22ff_fe33_4455);
        assert_eq!(g.raw[0], 0xfe);
        assert_eq!(g.raw[15], 0x55);
        assert_eq!(g.subnet_prefix(), 0xfe80_0000_0000_0000);
        assert_eq!(g.interface_id(), 0x0211_22ff_fe33_4455);
    }

    #[test]
    fn sizes_match_the_kernel() {
        assert_eq!(core::mem::size_of::<RxeAv>(), 88);
        assert_eq!(core::mem::size_of::<RxeGlobalRoute>(), 24);
        assert_eq!(core::mem::size_of::<RxeCreateQpResp>(), 32);
        assert_eq!(
            format!("{:?}", RxeNetworkType::IPV6),
            "RXE_NETWORK_TYPE_IPV6"
        );
        assert_eq!(format!("{:?}", RxeNetworkType(9)), "RxeNetworkType(9)");
    }
}

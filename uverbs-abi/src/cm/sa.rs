//! `ib_user_sa.h`: InfiniBand path records as rdma_cm reports them
//! (`RDMA_USER_CM_CMD_QUERY_ROUTE`, `RDMA_USER_CM_QUERY_PATH`).

use super::macros::c_flags;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::{ConstValue, StructLayout};

c_flags! {
    /// `flags` of `struct ib_path_rec_data` (the anonymous `IB_PATH_*` enum
    /// of `ib_user_sa.h`).
    IbPathFlags: u32, prefix "IB_PATH_" {
        /// `IB_PATH_GMP`: the path is usable for general management packets.
        GMP = 1;
        /// `IB_PATH_PRIMARY`.
        PRIMARY = 1 << 1;
        /// `IB_PATH_ALTERNATE`.
        ALTERNATE = 1 << 2;
        /// `IB_PATH_OUTBOUND`.
        OUTBOUND = 1 << 3;
        /// `IB_PATH_INBOUND`.
        INBOUND = 1 << 4;
        /// `IB_PATH_INBOUND_REVERSE`.
        INBOUND_REVERSE = 1 << 5;
        /// `IB_PATH_BIDIRECTIONAL` (`OUTBOUND | INBOUND_REVERSE`).
        BIDIRECTIONAL = (1 << 3) | (1 << 5);
    }
}

/// `struct ib_path_rec_data` of `ib_user_sa.h`: one path record in wire
/// format (the SA's 64-byte `PathRecord`, big-endian words), as the
/// `path_data[]` of `struct rdma_ucm_query_path_resp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbPathRecData {
    /// `flags`: [`IbPathFlags`] bits.
    pub flags: u32,
    /// `reserved`.
    pub reserved: u32,
    /// `path_rec`: the record, as raw big-endian words.
    pub path_rec: [u32; 16],
}

/// `struct ib_user_path_rec` of `ib_user_sa.h`: a decoded path record
/// (`ib_route[]` of `struct rdma_ucm_query_route_resp`). Fields marked
/// `__be` in C hold network-order values.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct IbUserPathRec {
    /// `dgid`.
    pub dgid: [u8; 16],
    /// `sgid`.
    pub sgid: [u8; 16],
    /// `dlid` (`__be16`).
    pub dlid: u16,
    /// `slid` (`__be16`).
    pub slid: u16,
    /// `raw_traffic`.
    pub raw_traffic: u32,
    /// `flow_label` (`__be32`).
    pub flow_label: u32,
    /// `reversible`.
    pub reversible: u32,
    /// `mtu` (an `IB_MTU_*` enum value).
    pub mtu: u32,
    /// `pkey` (`__be16`).
    pub pkey: u16,
    /// `hop_limit`.
    pub hop_limit: u8,
    /// `traffic_class`.
    pub traffic_class: u8,
    /// `numb_path`.
    pub numb_path: u8,
    /// `sl`.
    pub sl: u8,
    /// `mtu_selector`.
    pub mtu_selector: u8,
    /// `rate_selector`.
    pub rate_selector: u8,
    /// `rate`.
    pub rate: u8,
    /// `packet_life_time_selector`.
    pub packet_life_time_selector: u8,
    /// `packet_life_time`.
    pub packet_life_time: u8,
    /// `preference`.
    pub preference: u8,
}

/// The types above, for the header comparison test.
pub(crate) fn layouts() -> Vec<StructLayout> {
    vec![
        crate::c_layout!(IbPathRecData => "struct ib_path_rec_data" {
            flags => "flags",
            reserved => "reserved",
            path_rec => "path_rec",
        }),
        crate::c_layout!(IbUserPathRec => "struct ib_user_path_rec" {
            dgid => "dgid",
            sgid => "sgid",
            dlid => "dlid",
            slid => "slid",
            raw_traffic => "raw_traffic",
            flow_label => "flow_label",
            reversible => "reversible",
            mtu => "mtu",
            pkey => "pkey",
            hop_limit => "hop_limit",
            traffic_class => "traffic_class",
            numb_path => "numb_path",
            sl => "sl",
            mtu_selector => "mtu_selector",
            rate_selector => "rate_selector",
            rate => "rate",
            packet_life_time_selector => "packet_life_time_selector",
            packet_life_time => "packet_life_time",
            preference => "preference",
        }),
    ]
}

/// The constants above.
pub(crate) fn consts() -> Vec<ConstValue> {
    IbPathFlags::C_NAMES
        .iter()
        .map(|&(c, value)| ConstValue {
            c,
            value: value.into(),
        })
        .collect()
}

//! The address vector of an address handle: what an mlx5 UD send carries
//! in its datagram segment, built once when the AH is created (rdma-core's
//! `mlx5_create_ah`) and finished per send with the remote QPN and Q_Key
//! ([`DatagramSeg::for_ud`]).

use crate::seg::DatagramSeg;

/// The lowest UDP source port RoCE v2 uses (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`).
pub const ROCE_UDP_SPORT_MIN: u16 = 0xc000;

/// What the address vector is built from: the AH attributes, the port's
/// link layer and GID type, and (Ethernet) the destination MAC the kernel
/// resolved in CREATE_AH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AvAttr {
    /// Destination LID (InfiniBand).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits (InfiniBand).
    pub src_path_bits: u8,
    /// `enum ibv_rate`.
    pub static_rate: u8,
    /// With a GRH: destination GID, flow label, source GID index, hop
    /// limit, traffic class.
    pub grh: Option<AvGrh>,
    /// The port is Ethernet (RoCE), so the GRH is implied and the MAC used.
    pub ethernet: bool,
    /// The source GID is RoCE v2 (UDP encapsulated).
    pub roce_v2: bool,
    /// Destination MAC (Ethernet), from the kernel.
    pub dmac: [u8; 6],
    /// UDP source port for RoCE v2 when the flow label is 0 (rdma-core
    /// draws a random one in `0xc000..=0xffff`; the caller chooses).
    pub udp_sport: u16,
}

/// The GRH part of [`AvAttr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AvGrh {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// Why an address vector cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvError {
    /// RoCE (and ports that require one) needs a GRH.
    GrhRequired,
}

impl core::fmt::Display for AvError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AvError::GrhRequired => write!(f, "an Ethernet (RoCE) port needs a GRH in the AH"),
        }
    }
}

impl std::error::Error for AvError {}

/// The device's rate code for an `enum ibv_rate` (0 = unlimited; rates
/// the device has no code for round up to the next it has, or to
/// unlimited), as `ah_attr_to_mlx5_rate` maps them.
pub fn mlx5_rate(ibv_rate: u8) -> u8 {
    match ibv_rate {
        2 => 7,             // 2.5 Gb/s
        3 => 8,             // 10
        4 | 15 | 19 => 9,   // 30, 25, 28
        5 => 10,            // 5
        6 | 11 => 11,       // 20, 14
        7 => 12,            // 40
        8 | 12 | 20 => 13,  // 60, 56, 50
        9 => 14,            // 80
        10 | 13 | 16 => 15, // 120, 112, 100
        _ => 0,             // unlimited, invalid, and the rates above 120
    }
}

/// The RoCE v2 UDP source port a non-zero flow label hashes to
/// (`ibv_flow_label_to_udp_sport`: the label's top 6 bits folded into its
/// low 14, in the 0xc000 range).
pub fn flow_label_to_udp_sport(flow_label: u32) -> u16 {
    let low = flow_label & 0x3fff;
    let high = flow_label & 0xfc000;
    ((low ^ (high >> 14)) as u16) | ROCE_UDP_SPORT_MIN
}

/// Builds the address vector (without remote QPN and Q_Key).
pub fn address_vector(a: &AvAttr) -> Result<DatagramSeg, AvError> {
    if a.ethernet && a.grh.is_none() {
        return Err(AvError::GrhRequired);
    }
    let rate = mlx5_rate(a.static_rate);
    let (stat_rate_sl, fl_mlid, rlid, grh_bit) = if a.ethernet {
        // The RoCE v2 UDP source port rides in the rlid field; the GRH bit
        // is reserved on Ethernet, where every packet has one.
        let sport = match a.grh {
            Some(g) if a.roce_v2 && g.flow_label & 0xfffff != 0 => {
                flow_label_to_udp_sport(g.flow_label & 0xfffff)
            }
            _ if a.roce_v2 => a.udp_sport | ROCE_UDP_SPORT_MIN,
            _ => 0,
        };
        (rate << 4 | (a.sl & 7) << 1, 0, sport, 0)
    } else {
        (rate << 4 | (a.sl & 0xf), a.src_path_bits & 0x7f, a.dlid, 1)
    };
    let (tclass, hop_limit, grh_gid_fl, rgid) = match a.grh {
        Some(g) => (
            g.traffic_class,
            g.hop_limit,
            grh_bit << 30 | (g.sgid_index as u32) << 20 | (g.flow_label & 0xfffff),
            g.dgid,
        ),
        None => (0, 0, 0, [0; 16]),
    };
    let rmac = if a.ethernet { a.dmac } else { [0; 6] };
    Ok(DatagramSeg::new(
        0,
        0,
        false,
        stat_rate_sl,
        fl_mlid,
        rlid,
        rmac,
        tclass,
        hop_limit,
        grh_gid_fl,
        rgid,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roce(flow_label: u32) -> AvAttr {
        AvAttr {
            sl: 5,
            static_rate: 0,
            grh: Some(AvGrh {
                dgid: [0xfe; 16],
                flow_label,
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 0x10,
            }),
            ethernet: true,
            roce_v2: true,
            dmac: [1, 2, 3, 4, 5, 6],
            udp_sport: 0x1234,
            ..AvAttr::default()
        }
    }

    #[test]
    fn roce_v2_vector() {
        let av = address_vector(&roce(0)).unwrap();
        assert_eq!(av.stat_rate_sl, 5 << 1);
        assert_eq!(av.rlid.get(), 0xd234, "random port forced into 0xc000..");
        assert_eq!(av.rmac, [1, 2, 3, 4, 5, 6]);
        assert_eq!(av.grh_gid_fl.get(), 3 << 20, "no GRH bit on Ethernet");
        assert_eq!((av.tclass, av.hop_limit, av.rgid), (0x10, 64, [0xfe; 16]));
        // A flow label decides the port: 0x12345 -> low 0x2345 ^ (0x10000 >> 14 = 4).
        let av = address_vector(&roce(0x12345)).unwrap();
        assert_eq!(av.rlid.get(), 0x2341 | 0xc000);
        assert_eq!(av.grh_gid_fl.get(), 3 << 20 | 0x12345);
    }

    #[test]
    fn ib_vector_and_errors() {
        let ib = AvAttr {
            dlid: 0x17,
            sl: 0x1f,
            src_path_bits: 0xff,
            static_rate: 3,
            ..AvAttr::default()
        };
        let av = address_vector(&ib).unwrap();
        assert_eq!(
            (av.stat_rate_sl, av.fl_mlid, av.rlid.get()),
            (8 << 4 | 0xf, 0x7f, 0x17)
        );
        assert_eq!(av.grh_gid_fl.get(), 0);
        let mut no_grh = roce(0);
        no_grh.grh = None;
        assert_eq!(address_vector(&no_grh), Err(AvError::GrhRequired));
        assert_eq!(mlx5_rate(0), 0);
        assert_eq!(mlx5_rate(18), 0);
        assert_eq!(mlx5_rate(200), 0);
    }
}

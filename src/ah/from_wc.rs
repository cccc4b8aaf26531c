//! Address handles from a completion (`ibv_init_ah_from_wc`,
//! `ibv_create_ah_from_wc`): the path back to the sender of a UD receive,
//! from its completion and the 40 bytes the receive left at the start of
//! the buffer.
//!
//! On RoCE v2 those 40 bytes are the packet's IP header: an IPv6 header
//! (40 bytes), or an IPv4 one (20 bytes) after 20 zero bytes (rxe's
//! `union rdma_network_hdr`). Which one is decided as rdma-core decides
//! it: the IPv6 version nibble, else an IPv4 header whose checksum holds.
//! The reply's destination GID is the packet's source address, its source
//! GID (found in the port's table) the packet's destination; IPv4
//! addresses become IPv4-mapped GIDs.

use super::attr::{AhAttr, Grh};
use super::Ah;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::pd::Pd;
use crate::query::GidType;
use crate::wc::Wc;

/// Bytes of the header a UD receive leaves at the start of its buffer.
pub const GRH_LEN: usize = 40;

/// `IBV_LINK_LAYER_ETHERNET`.
const ETHERNET: u8 = 2;

/// The network header of a received datagram, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkHeader {
    /// An IPv6 header (or an InfiniBand GRH, which has its layout).
    Ipv6 {
        /// Traffic class.
        traffic_class: u8,
        /// Flow label (20 bits).
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
        /// Source address (the sender's GID).
        src: [u8; 16],
        /// Destination address (our GID).
        dst: [u8; 16],
    },
    /// An IPv4 header (RoCE v2 over IPv4), in the last 20 of the 40 bytes.
    Ipv4 {
        /// Type of service.
        tos: u8,
        /// Time to live.
        ttl: u8,
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
    },
}

/// The IPv4 header checksum over 20 bytes with the checksum field as 0
/// (RFC 791: the one's complement of the one's complement sum).
fn ipv4_checksum(h: &[u8; 20]) -> u16 {
    let mut sum = 0u32;
    for (i, pair) in h.chunks_exact(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl NetworkHeader {
    /// Decodes the 40 bytes at the start of a UD receive's buffer, or
    /// `None` if they hold neither an IPv6 nor a valid IPv4 header.
    pub fn parse(b: &[u8; GRH_LEN]) -> Option<NetworkHeader> {
        let mut v4 = [0u8; 20];
        v4.copy_from_slice(&b[20..]);
        let is_v4 = if b[0] >> 4 != 6 {
            // Not IPv6: IPv4 or nothing.
            if v4[0] >> 4 != 4 {
                return None;
            }
            true
        } else {
            // The IPv6 version nibble, but the last 20 bytes may be an
            // IPv4 header after 20 zero bytes whose first nibble happens
            // to read 6 — trusted only if its checksum holds.
            v4[0] == 0x45 && u16::from_be_bytes([v4[10], v4[11]]) == ipv4_checksum(&v4)
        };
        if is_v4 {
            // RoCE v2 sends no IPv4 options.
            if v4[0] != 0x45 {
                return None;
            }
            let addr = |o: usize| [v4[o], v4[o + 1], v4[o + 2], v4[o + 3]];
            return Some(NetworkHeader::Ipv4 {
                tos: v4[1],
                ttl: v4[8],
                src: addr(12),
                dst: addr(16),
            });
        }
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&b[8..24]);
        dst.copy_from_slice(&b[24..40]);
        Some(NetworkHeader::Ipv6 {
            traffic_class: (b[0] << 4) | (b[1] >> 4),
            flow_label: (u32::from(b[1] & 0xf) << 16) | (u32::from(b[2]) << 8) | u32::from(b[3]),
            hop_limit: b[7],
            src,
            dst,
        })
    }
}

/// `::ffff:a.b.c.d`.
fn ipv4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

impl Context {
    /// The address attributes of the path back to the sender of the UD
    /// receive `wc` on `port` (`ibv_init_ah_from_wc`), from the 40 bytes
    /// the receive left at the start of its buffer.
    ///
    /// On RoCE the source GID index is the port's RoCE v2 entry for the
    /// packet's destination address; a receive without the GRH flag, a
    /// header that is neither IPv6 nor IPv4, or an address not in the
    /// table is an `InvalidArgument` naming it.
    pub fn init_ah_from_wc(&self, port: u8, wc: &Wc, grh: &[u8; GRH_LEN]) -> Result<AhAttr> {
        let mut attr = AhAttr {
            dlid: wc.slid,
            sl: wc.sl,
            src_path_bits: wc.dlid_path_bits,
            port_num: port,
            ..AhAttr::default()
        };
        let roce = self.query_port(port)?.link_layer == ETHERNET;
        if !wc.has_grh() {
            if roce {
                return Err(Error::invalid(
                    "init_ah_from_wc: a RoCE receive without the GRH flag has no address",
                ));
            }
            return Ok(attr);
        }
        let header = NetworkHeader::parse(grh).ok_or_else(|| {
            Error::invalid("init_ah_from_wc: the 40 bytes hold neither an IPv6 nor an IPv4 header")
        })?;
        let (dgid, sgid, traffic_class, flow_label) = match header {
            NetworkHeader::Ipv6 {
                traffic_class,
                flow_label,
                src,
                dst,
                ..
            } => (src, dst, traffic_class, flow_label),
            NetworkHeader::Ipv4 { tos, src, dst, .. } => {
                (ipv4_mapped(src), ipv4_mapped(dst), tos, 0)
            }
        };
        let want = if roce { GidType::RoceV2 } else { GidType::Ib };
        let entry = self
            .gid_table(port)?
            .into_iter()
            .find(|e| e.gid == sgid && e.gid_type == want)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "init_ah_from_wc: the packet's destination {sgid:02x?} is no {want:?} GID of port {port}"
                ))
            })?;
        let sgid_index = u8::try_from(entry.index).map_err(|_| {
            Error::invalid(format!(
                "init_ah_from_wc: GID index {} does not fit an AH",
                entry.index
            ))
        })?;
        attr.grh = Some(Grh {
            dgid,
            flow_label,
            sgid_index,
            // As rdma-core: the reply may cross as many hops as allowed.
            hop_limit: 0xff,
            traffic_class,
        });
        Ok(attr)
    }
}

impl Pd {
    /// An address handle for the path back to the sender of the UD
    /// receive `wc` (`ibv_create_ah_from_wc`): [`Context::init_ah_from_wc`],
    /// then [`Pd::create_ah`].
    pub fn create_ah_from_wc(&self, port: u8, wc: &Wc, grh: &[u8; GRH_LEN]) -> Result<Ah> {
        let attr = self.context().init_ah_from_wc(port, wc, grh)?;
        self.create_ah(&attr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header as rxe leaves it: 20 zero bytes, then the header.
    fn v4(src: [u8; 4], dst: [u8; 4]) -> [u8; GRH_LEN] {
        let mut b = [0u8; GRH_LEN];
        let h = &mut b[20..];
        h[0] = 0x45;
        h[1] = 0x10; // tos
        h[2..4].copy_from_slice(&68u16.to_be_bytes());
        h[8] = 64; // ttl
        h[9] = 17; // UDP
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let mut hdr = [0u8; 20];
        hdr.copy_from_slice(h);
        let c = ipv4_checksum(&hdr);
        b[30..32].copy_from_slice(&c.to_be_bytes());
        b
    }

    #[test]
    fn an_ipv4_header_decodes_and_a_bad_checksum_is_refused() {
        let b = v4([10, 0, 0, 1], [10, 0, 0, 2]);
        assert_eq!(
            NetworkHeader::parse(&b),
            Some(NetworkHeader::Ipv4 {
                tos: 0x10,
                ttl: 64,
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2]
            })
        );
        assert_eq!(ipv4_mapped([10, 0, 0, 1])[10..], [0xff, 0xff, 10, 0, 0, 1]);
        // Version 4 without a valid IPv6 version is still taken as IPv4
        // (rdma-core's rule), but not with another header length.
        let mut bad = b;
        bad[20] = 0x46;
        assert_eq!(NetworkHeader::parse(&bad), None);
        assert_eq!(NetworkHeader::parse(&[0; GRH_LEN]), None);
    }

    #[test]
    fn an_ipv6_header_decodes() {
        let mut b = [0u8; GRH_LEN];
        b[0] = 0x6a; // version 6, traffic class 0xa_
        b[1] = 0xb1; // traffic class _b, flow label 1____
        b[2] = 0x23;
        b[3] = 0x45;
        b[7] = 3;
        b[8] = 0xfe;
        b[9] = 0x80;
        b[23] = 1;
        b[24] = 0xfe;
        b[25] = 0x80;
        b[39] = 2;
        let Some(NetworkHeader::Ipv6 {
            traffic_class,
            flow_label,
            hop_limit,
            src,
            dst,
        }) = NetworkHeader::parse(&b)
        else {
            panic!("not IPv6")
        };
        assert_eq!((traffic_class, flow_label, hop_limit), (0xab, 0x12345, 3));
        assert_eq!((src[0], src[15], dst[0], dst[15]), (0xfe, 1, 0xfe, 2));
    }
}

//! The out-of-band exchange of rdma-core's `ibv_rc_pingpong`: each side sends
//! `"LLLL:QQQQQQ:PPPPPP:GGGG…G"` (LID, QPN and PSN in hex, the GID as 32 hex
//! digits of its bytes in order), NUL-terminated, in a fixed 52-byte message
//! over TCP; the client then sends `"done"` with its NUL.

use super::{c_string, hex_bytes, hex_number, hex_string, BadMessage};

/// Bytes of one message: `sizeof "0000:000000:000000:" + 32 hex digits`.
pub const MSG_LEN: usize = 52;

/// What a side tells its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
    /// The GID, raw bytes (all zero when none is used).
    pub gid: [u8; 16],
}

/// What [`BadMessage::message`] says for this exchange.
const WHAT: &str = "pingpong address";

impl Dest {
    /// Encodes the message exactly as the C tool's `sprintf` does.
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let s = format!(
            "{:04x}:{:06x}:{:06x}:{}",
            self.lid,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            hex_string(&self.gid)
        );
        let mut out = [0u8; MSG_LEN];
        let n = s.len().min(MSG_LEN - 1);
        out[..n].copy_from_slice(&s.as_bytes()[..n]);
        out
    }

    /// Parses a peer's message: what the C tool's `sscanf("%x:%x:%x:%s")`
    /// reads of a well-formed one, and a [`BadMessage`] for anything else
    /// (any bytes, any length: it never panics).
    pub fn decode(msg: &[u8]) -> Result<Dest, BadMessage> {
        let bad = |why: &str| BadMessage::new(WHAT, why, c_string(msg));
        let mut parts = c_string(msg).splitn(4, |&b| b == b':');
        let mut field = |name: &str| {
            parts
                .next()
                .ok_or_else(|| bad(&format!("no {name} field (LID:QPN:PSN:GID)")))
        };
        let (lid, qpn, psn, gid) = (field("LID")?, field("QPN")?, field("PSN")?, field("GID")?);
        Ok(Dest {
            lid: hex_number(lid, 16).ok_or_else(|| bad("LID is not a 16-bit hex number"))? as u16,
            qpn: hex_number(qpn, 24).ok_or_else(|| bad("QPN is not a 24-bit hex number"))? as u32,
            psn: hex_number(psn, 24).ok_or_else(|| bad("PSN is not a 24-bit hex number"))? as u32,
            gid: hex_bytes(gid).ok_or_else(|| bad("GID is not 32 hex digits"))?,
        })
    }
}

/// Formats a GID as `inet_ntop(AF_INET6)` does, for the tool's
/// `local address: … GID ::ffff:10.77.0.1` lines.
pub fn gid_to_string(gid: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*gid).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_c_layout() {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 77, 0, 1]);
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xa2f3b0,
            gid,
        };
        let m = d.encode();
        assert_eq!(
            std::str::from_utf8(&m[..51]).unwrap(),
            "0000:000011:a2f3b0:00000000000000000000ffff0a4d0001"
        );
        assert_eq!(m[51], 0);
        assert_eq!(Dest::decode(&m), Ok(d));
        assert_eq!(gid_to_string(&gid), "::ffff:10.77.0.1");
        // What rdma-core's tool sends for an IB port (a LID, no GID).
        let c = b"0003:0000a1:00b2c3:00000000000000000000000000000000\0";
        let d = Dest::decode(c).unwrap();
        assert_eq!((d.lid, d.qpn, d.psn, d.gid), (3, 0xa1, 0xb2c3, [0; 16]));
    }

    /// The hostile message that used to panic the tool ("byte index 2 is
    /// not a char boundary"): a two-byte UTF-8 character in the GID field,
    /// across two digit pairs; and one on a pair.
    #[test]
    fn a_multibyte_character_in_the_gid_is_an_error() {
        for at in [20, 19, 49] {
            let mut m = Dest {
                lid: 0,
                qpn: 1,
                psn: 2,
                gid: [0; 16],
            }
            .encode();
            m[at..at + 2].copy_from_slice("é".as_bytes());
            let e = Dest::decode(&m).unwrap_err();
            assert_eq!(e.reason, "GID is not 32 hex digits");
            assert!(e.to_string().contains("\\xc3\\xa9"), "{e}");
        }
    }

    /// The input the `tool_wire` fuzz target found in about a second when
    /// run against the old decoder ("end byte index 2 is not a char
    /// boundary; it is inside 'Л'").
    #[test]
    fn fuzz_crash_old_decoder_cyrillic_in_the_gid() {
        let input = b"7:d7:70D03:0\xd0\x9b7:70D04:000000000000000000000022:";
        let e = Dest::decode(input).unwrap_err();
        assert_eq!(e.reason, "GID is not 32 hex digits");
    }

    #[test]
    fn malformed_messages_are_named() {
        let cases: [(&[u8], &str); 8] = [
            (b"", "no QPN field (LID:QPN:PSN:GID)"),
            (b"zz:1:2:3", "LID is not a 16-bit hex number"),
            (b"10000:1:2:3", "LID is not a 16-bit hex number"),
            (b"1:1000000:2:3", "QPN is not a 24-bit hex number"),
            (b"1:1::3", "PSN is not a 24-bit hex number"),
            (b"1:1:2", "no GID field (LID:QPN:PSN:GID)"),
            (b"1:1:2:0000", "GID is not 32 hex digits"),
            (&[0xff; MSG_LEN], "no QPN field (LID:QPN:PSN:GID)"),
        ];
        for (msg, why) in cases {
            assert_eq!(Dest::decode(msg).unwrap_err().reason, why, "{msg:?}");
        }
    }
}

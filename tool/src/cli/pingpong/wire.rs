//! The out-of-band exchange of rdma-core's `ibv_rc_pingpong`: each side sends
//! `"LLLL:QQQQQQ:PPPPPP:GGGG…G"` (LID, QPN and PSN in hex, the GID as 32 hex
//! digits of its bytes in order), NUL-terminated, in a fixed 52-byte message
//! over TCP; the client then sends `"done"` with its NUL.

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

impl Dest {
    /// Encodes the message exactly as the C tool's `sprintf` does.
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let mut s = format!(
            "{:04x}:{:06x}:{:06x}:",
            self.lid,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}"));
        }
        let mut out = [0u8; MSG_LEN];
        let n = s.len().min(MSG_LEN - 1);
        out[..n].copy_from_slice(&s.as_bytes()[..n]);
        out
    }

    /// Parses a peer's message (as the C tool's `sscanf("%x:%x:%x:%s")`).
    pub fn decode(msg: &[u8]) -> Option<Dest> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let s = std::str::from_utf8(&msg[..end]).ok()?;
        let mut parts = s.splitn(4, ':');
        let lid = u16::from_str_radix(parts.next()?, 16).ok()?;
        let qpn = u32::from_str_radix(parts.next()?, 16).ok()?;
        let psn = u32::from_str_radix(parts.next()?, 16).ok()?;
        let g = parts.next()?;
        if g.len() != 32 {
            return None;
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&g[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Dest { lid, qpn, psn, gid })
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
        assert_eq!(Dest::decode(&m), Some(d));
        assert_eq!(gid_to_string(&gid), "::ffff:10.77.0.1");
        assert_eq!(Dest::decode(b"zz:1:2:3"), None);
    }
}

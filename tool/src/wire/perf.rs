//! The out-of-band exchange of `rverbs perf` (both sides are rverbs; the
//! format is our own): one 96-byte message each way,
//! `"QQQQQQ:PPPPPP:GGGG…G:RRRRRRRR:AAAAAAAAAAAAAAAA"` (QPN, PSN, the GID as
//! 32 hex digits, the rkey and the address of the buffer the peer targets),
//! NUL-padded; then one byte per synchronisation point ([`SYNC`]), and
//! while a one-sided test runs, [`PROGRESS`] bytes from the active side so
//! that the passive side, which sees no completions, can tell a live peer
//! from a dead or stuck one.

use super::{c_string, hex_bytes, hex_number, hex_string, BadMessage};

/// Bytes of one address message.
pub const MSG_LEN: usize = 96;
/// The byte each side sends at a synchronisation point.
pub const SYNC: u8 = b'S';
/// The byte the active side sends now and then while a test runs.
pub const PROGRESS: u8 = b'P';

/// What each side tells the other: QP, PSN, GID, and where its target
/// buffer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// QP number.
    pub qpn: u32,
    /// Initial packet sequence number.
    pub psn: u32,
    /// GID (all zero when none is used).
    pub gid: [u8; 16],
    /// The rkey of the target buffer.
    pub rkey: u32,
    /// The target buffer's address.
    pub addr: u64,
}

/// What [`BadMessage::message`] says for this exchange.
const WHAT: &str = "perf address";

impl Peer {
    /// The message, NUL-padded.
    pub fn encode(&self) -> [u8; MSG_LEN] {
        let s = format!(
            "{:06x}:{:06x}:{}:{:08x}:{:016x}",
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            hex_string(&self.gid),
            self.rkey,
            self.addr
        );
        let mut m = [0u8; MSG_LEN];
        let n = s.len().min(MSG_LEN - 1);
        m[..n].copy_from_slice(&s.as_bytes()[..n]);
        m
    }

    /// Parses a peer's message; anything but five well-formed fields is a
    /// [`BadMessage`] (any bytes, any length: it never panics).
    pub fn decode(msg: &[u8]) -> Result<Peer, BadMessage> {
        let text = c_string(msg);
        let bad = |why: &str| BadMessage::new(WHAT, why, text);
        let f: Vec<&[u8]> = text.split(|&b| b == b':').collect();
        let [qpn, psn, gid, rkey, addr] = f[..] else {
            return Err(bad(&format!(
                "{} fields, expected 5 (QPN:PSN:GID:RKEY:ADDR)",
                f.len()
            )));
        };
        Ok(Peer {
            qpn: hex_number(qpn, 24).ok_or_else(|| bad("QPN is not a 24-bit hex number"))? as u32,
            psn: hex_number(psn, 24).ok_or_else(|| bad("PSN is not a 24-bit hex number"))? as u32,
            gid: hex_bytes(gid).ok_or_else(|| bad("GID is not 32 hex digits"))?,
            rkey: hex_number(rkey, 32).ok_or_else(|| bad("RKEY is not a 32-bit hex number"))?
                as u32,
            addr: hex_number(addr, 64).ok_or_else(|| bad("ADDR is not a 64-bit hex number"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let p = Peer {
            qpn: 0x12,
            psn: 0xabcdef,
            gid: [0xfe; 16],
            rkey: 0xdead_beef,
            addr: 0x7f00_1234_5678_9000,
        };
        let m = p.encode();
        assert_eq!(Peer::decode(&m), Ok(p));
        assert_eq!(
            std::str::from_utf8(&m[..20]).unwrap(),
            "000012:abcdef:fefefe"
        );
        assert_eq!(m[MSG_LEN - 1], 0);
    }

    #[test]
    fn malformed_messages_are_named() {
        let good = Peer {
            qpn: 1,
            psn: 2,
            gid: [0; 16],
            rkey: 3,
            addr: 4,
        }
        .encode();
        // The hostile message that used to panic the server: a two-byte
        // UTF-8 character inside the 32 bytes of the GID field, across two
        // digit pairs (and on a pair).
        for at in [15, 14] {
            let mut m = good;
            m[at..at + 2].copy_from_slice("é".as_bytes());
            let e = Peer::decode(&m).unwrap_err();
            assert_eq!(e.reason, "GID is not 32 hex digits");
        }
        let cases: [(&[u8], &str); 5] = [
            (b"", "1 fields, expected 5 (QPN:PSN:GID:RKEY:ADDR)"),
            (
                &[0x80; MSG_LEN],
                "1 fields, expected 5 (QPN:PSN:GID:RKEY:ADDR)",
            ),
            (
                b"1:2:3:4:5:6",
                "6 fields, expected 5 (QPN:PSN:GID:RKEY:ADDR)",
            ),
            (
                b"1:2:00000000000000000000000000000000:100000000:0",
                "RKEY is not a 32-bit hex number",
            ),
            (
                b"1:2:00000000000000000000000000000000:1:",
                "ADDR is not a 64-bit hex number",
            ),
        ];
        for (msg, why) in cases {
            assert_eq!(Peer::decode(msg).unwrap_err().reason, why, "{msg:?}");
        }
    }
}

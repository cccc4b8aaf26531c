//! The out-of-band exchange of `rverbs perf`: perftest's own (as in
//! perftest 6.06, which Debian ships as package version 4.5+0.17), so that
//! either side can be an `ib_*` tool.
//!
//! Over one TCP connection, each message of the exchange goes both ways in
//! lockstep: the client writes first then reads, the server reads then
//! writes, each side the same number of bytes. In order:
//! 1. the version, 16 bytes, a NUL-padded decimal string ([`VERSION`]);
//!    perftest refuses a peer older than 5.70;
//! 2. the cycle buffer (the page size) and the cache line size, each a
//!    32-bit big-endian integer; each side takes the larger;
//! 3. the active MTU as the decimal digit of its `ibv_mtu` value, in two
//!    bytes (`"3\0"`); each side takes the smaller;
//! 4. address messages ([`Peer`]), one per QP, several times: the number of
//!    rounds and where they fall differ by test;
//! 5. for the bandwidth tests, the client's figures ([`BwReport`]), five
//!    8-byte big-endian fields;
//! 6. a last round of address messages, then `"done\0"` from each side.

use super::{c_string, hex_number, BadMessage};

/// The version we announce (that of the perftest whose exchange this is).
pub const VERSION: &str = "6.06";
/// Bytes of the version message.
pub const VERSION_LEN: usize = 16;
/// The oldest peer perftest talks to (it checks the same).
pub const MIN_PEER_VERSION: f64 = 5.70;
/// Bytes of an address message without a GID.
pub const MSG_LEN: usize = 59;
/// Bytes of an address message with a GID.
pub const MSG_LEN_GID: usize = 108;
/// Bytes of the MTU message.
pub const MTU_LEN: usize = 2;
/// What each side sends last.
pub const DONE: &[u8; 5] = b"done\0";

/// One QP's address message: perftest's `pingpong_dest` as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// RDMA READs and atomics this side accepts at once (the peer sets its
    /// initiator depth to it).
    pub out_reads: u16,
    /// QP number.
    pub qpn: u32,
    /// Initial packet sequence number.
    pub psn: u32,
    /// The rkey of the target buffer.
    pub rkey: u32,
    /// The target buffer's address.
    pub addr: u64,
    /// The GID, when the exchange carries one (always on RoCE: both sides
    /// must agree, since the message length depends on it).
    pub gid: Option<[u8; 16]>,
    /// The SRQ number (XRC and DC only; 0 otherwise).
    pub srqn: u32,
}

/// What [`BadMessage::message`] says for this exchange.
const WHAT: &str = "perftest address";

impl Peer {
    /// The message: [`MSG_LEN`] bytes without a GID, [`MSG_LEN_GID`] with
    /// one, NUL-terminated.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.addr
        );
        let len = match self.gid {
            Some(g) => {
                for b in g {
                    s.push_str(&format!("{b:02x}:"));
                }
                s.push_str(&format!("{:08x}:", self.srqn));
                MSG_LEN_GID
            }
            None => {
                s.push_str(&format!("{:08x}", self.srqn));
                MSG_LEN
            }
        };
        let mut m = vec![0u8; len];
        let n = s.len().min(len - 1);
        m[..n].copy_from_slice(&s.as_bytes()[..n]);
        m
    }

    /// Parses a peer's message, with or without a GID (told apart by the
    /// number of fields); anything else is a [`BadMessage`] (any bytes,
    /// any length: it never panics).
    pub fn decode(msg: &[u8]) -> Result<Peer, BadMessage> {
        let text = c_string(msg);
        let bad = |why: &str| BadMessage::new(WHAT, why, text);
        let f: Vec<&[u8]> = text.split(|&b| b == b':').collect();
        // Without a GID: 7 fields; with one: 23 and the empty field after
        // the closing colon.
        let gid = match f.len() {
            7 => false,
            24 if f[23].is_empty() => true,
            n => {
                return Err(bad(&format!(
                "{n} fields, expected 7 (LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN) or 23 with a GID"
            )))
            }
        };
        let num = |i: usize, bits: u32, name: &str| {
            hex_number(f[i], bits)
                .ok_or_else(|| bad(&format!("{name} is not a {bits}-bit hex number")))
        };
        let gid = if gid {
            let mut g = [0u8; 16];
            for (i, b) in g.iter_mut().enumerate() {
                *b = num(6 + i, 8, "a GID byte")? as u8;
            }
            Some(g)
        } else {
            None
        };
        Ok(Peer {
            lid: num(0, 16, "LID")? as u16,
            out_reads: num(1, 16, "OUT_READS")? as u16,
            qpn: num(2, 24, "QPN")? as u32,
            psn: num(3, 24, "PSN")? as u32,
            rkey: num(4, 32, "RKEY")? as u32,
            addr: num(5, 64, "VADDR")?,
            srqn: num(if gid.is_some() { 22 } else { 6 }, 32, "SRQN")? as u32,
            gid,
        })
    }
}

/// Our version message.
pub fn version_msg() -> [u8; VERSION_LEN] {
    let mut m = [0u8; VERSION_LEN];
    m[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    m
}

/// The peer's version as a number, checked against [`MIN_PEER_VERSION`].
pub fn parse_version(msg: &[u8]) -> Result<f64, BadMessage> {
    let text = c_string(msg);
    let bad = |why: &str| BadMessage::new("perftest version", why, text);
    let v: f64 = std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| bad("not a decimal number"))?;
    // NaN is not a version either.
    if v.is_nan() || v < MIN_PEER_VERSION {
        return Err(bad(&format!(
            "older than {MIN_PEER_VERSION:.2}, whose exchange this tool does not speak"
        )));
    }
    Ok(v)
}

/// The largest cycle buffer a peer may announce. perftest sends its page
/// size, at most 64 KiB on the machines RDMA runs on (arm64, ppc64); the
/// cap leaves room above that while bounding what one message makes us
/// allocate and pin: a peer's cycle buffer sizes our MR (twice, per QP).
pub const MAX_CYCLE_BUFFER: u32 = 1 << 20;

/// The peer's cycle buffer (4 bytes, big-endian): a page size, refused
/// above [`MAX_CYCLE_BUFFER`] or when 0.
pub fn parse_cycle_buffer(msg: [u8; 4]) -> Result<u32, BadMessage> {
    let v = u32::from_be_bytes(msg);
    if v == 0 || v > MAX_CYCLE_BUFFER {
        return Err(BadMessage::new(
            "perftest cycle buffer size",
            format!(
                "{v} bytes: not a page size (at most {MAX_CYCLE_BUFFER} taken, since it sizes \
                 the memory this side registers)"
            ),
            &msg,
        ));
    }
    Ok(v)
}

/// The MTU message: the `ibv_mtu` value (1..=5) as one decimal digit.
pub fn mtu_msg(mtu: u8) -> [u8; MTU_LEN] {
    [b'0' + mtu.min(9), 0]
}

/// The peer's MTU, `None` unless it is a valid `ibv_mtu` value (perftest
/// then keeps its own).
pub fn parse_mtu(msg: &[u8]) -> Option<u8> {
    let t = c_string(msg);
    let v = hex_number(t, 8).filter(|_| t.iter().all(u8::is_ascii_digit))?;
    (1..=5).contains(&v).then_some(v as u8)
}

/// A bandwidth run's figures as the client sends them to the server (in
/// the units the client reports: MB/s or Gb/s).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size.
    pub size: u64,
    /// Messages (over all QPs).
    pub iters: u64,
    /// Peak bandwidth.
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Message rate, millions per second.
    pub msg_rate: f64,
}

impl BwReport {
    /// The five fields, each as the 8 bytes exchanged in turn.
    pub fn fields(&self) -> [[u8; 8]; 5] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.bw_peak.to_bits().to_be_bytes(),
            self.bw_avg.to_bits().to_be_bytes(),
            self.msg_rate.to_bits().to_be_bytes(),
        ]
    }

    /// Both directions' figures of a bidirectional run, summed (perftest's
    /// `print_full_bw_report` with the peer's report); the size and
    /// iterations are this side's.
    pub fn plus(&self, peer: &BwReport) -> BwReport {
        BwReport {
            bw_peak: self.bw_peak + peer.bw_peak,
            bw_avg: self.bw_avg + peer.bw_avg,
            msg_rate: self.msg_rate + peer.msg_rate,
            ..*self
        }
    }

    /// The report from the five fields (any bits decode: a hostile peer
    /// only gets odd figures printed).
    pub fn from_fields(f: &[[u8; 8]; 5]) -> BwReport {
        let d = |b: [u8; 8]| f64::from_bits(u64::from_be_bytes(b));
        BwReport {
            size: u64::from_be_bytes(f[0]),
            iters: u64::from_be_bytes(f[1]),
            bw_peak: d(f[2]),
            bw_avg: d(f[3]),
            msg_rate: d(f[4]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer's page size is taken; a cycle buffer that would make this
    /// side allocate and pin gigabytes (issue 25, item 12: 2^30 was taken
    /// and made each QP's MR at least 2 GiB) or nothing is refused.
    #[test]
    fn cycle_buffers_are_page_sizes() {
        for page in [4096u32, 16384, 65536] {
            assert_eq!(parse_cycle_buffer(page.to_be_bytes()).unwrap(), page);
        }
        for bad in [0u32, MAX_CYCLE_BUFFER + 1, 1 << 30, u32::MAX] {
            let e = parse_cycle_buffer(bad.to_be_bytes()).unwrap_err();
            assert!(e.reason.contains(&bad.to_string()), "{e:?}");
        }
    }

    fn peer(gid: Option<[u8; 16]>) -> Peer {
        Peer {
            lid: 0,
            out_reads: 0x80,
            qpn: 0x12,
            psn: 0xa5099b,
            rkey: 0x2eb,
            addr: 0x556d_a9bb_f000,
            gid,
            srqn: 0,
        }
    }

    #[test]
    fn round_trip_in_both_layouts() {
        let p = peer(None);
        let m = p.encode();
        assert_eq!(m.len(), MSG_LEN);
        assert_eq!(
            std::str::from_utf8(&m[..MSG_LEN - 1]).unwrap(),
            "0000:0080:000012:a5099b:000002eb:0000556da9bbf000:00000000"
        );
        assert_eq!(Peer::decode(&m), Ok(p));
        let mut g = [0u8; 16];
        g[10..].copy_from_slice(&[0xff, 0xff, 10, 77, 0, 1]);
        let p = peer(Some(g));
        let m = p.encode();
        assert_eq!(m.len(), MSG_LEN_GID);
        assert_eq!(
            std::str::from_utf8(&m[..MSG_LEN_GID - 1]).unwrap(),
            "0000:0080:000012:a5099b:000002eb:0000556da9bbf000:\
             00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:01:00000000:"
        );
        assert_eq!(m[MSG_LEN_GID - 1], 0);
        assert_eq!(Peer::decode(&m), Ok(p));
    }

    #[test]
    fn malformed_messages_are_named() {
        let cases: [(&[u8], &str); 4] = [
            (
                b"",
                "1 fields, expected 7 (LID:OUT_READS:QPN:PSN:RKEY:VADDR:SRQN) or 23 with a GID",
            ),
            (b"0:0:1000000:0:0:0:0", "QPN is not a 24-bit hex number"),
            (b"0:0:1:0:0:0:\xc3\xa9", "SRQN is not a 32-bit hex number"),
            (
                b"0:0:1:0:0:0:0:0:0:0:0:0:0:0:0:0:0:0:100:0:0:0:0:",
                "a GID byte is not a 8-bit hex number",
            ),
        ];
        for (msg, why) in cases {
            assert_eq!(Peer::decode(msg).unwrap_err().reason, why, "{msg:?}");
        }
    }

    #[test]
    fn versions_mtus_and_reports() {
        assert_eq!(parse_version(&version_msg()), Ok(6.06));
        assert!(parse_version(b"5.5\0").is_err());
        assert!(parse_version(b"x").is_err());
        assert!(parse_version(b"NaN").is_err());
        assert_eq!(parse_mtu(&mtu_msg(3)), Some(3));
        assert_eq!(parse_mtu(b"9\0"), None);
        assert_eq!(parse_mtu(b"\xff\xff"), None);
        let r = BwReport {
            size: 65536,
            iters: 5000,
            bw_peak: 35.03,
            bw_avg: 13.05,
            msg_rate: 0.000209,
        };
        assert_eq!(BwReport::from_fields(&r.fields()), r);
        assert_eq!(r.fields()[0], [0, 0, 0, 0, 0, 1, 0, 0]);
    }
}

//! The out-of-band messages of `pingpong`, `perf` and `rping`.
//!
//! A peer is not trusted: every decoder takes whatever bytes arrived (any
//! length, any values, not necessarily UTF-8) and returns the message or a
//! [`BadMessage`] naming what was wrong. None of them panics; the fuzz
//! targets `fuzz/fuzz_targets/tool_wire.rs` check that.

pub mod perf;
pub mod pingpong;
pub mod rping;

use std::fmt;

/// A peer's message that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMessage {
    /// Which message (`"pingpong address"`).
    pub message: &'static str,
    /// What was wrong with it.
    pub reason: String,
    /// What arrived, up to its first NUL, with anything but printable
    /// ASCII escaped (and cut after 128 bytes).
    pub got: String,
}

impl BadMessage {
    fn new(message: &'static str, reason: impl Into<String>, bytes: &[u8]) -> BadMessage {
        let shown = &bytes[..bytes.len().min(128)];
        let mut got = shown.escape_ascii().to_string();
        if shown.len() < bytes.len() {
            got.push_str("...");
        }
        BadMessage {
            message,
            reason: reason.into(),
            got,
        }
    }
}

impl fmt::Display for BadMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed {} from the peer: {}; got \"{}\"",
            self.message, self.reason, self.got
        )
    }
}

impl std::error::Error for BadMessage {}

/// The bytes before the first NUL (all of them if there is none): what C's
/// string functions would see of a message.
fn c_string(msg: &[u8]) -> &[u8] {
    let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
    &msg[..end]
}

/// The value of one ASCII hex digit.
fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A field of hex digits (at least one, nothing else: no sign, no `0x`,
/// no space) whose value fits `bits` bits.
fn hex_number(field: &[u8], bits: u32) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in field {
        v = v.checked_mul(16)?.checked_add(u64::from(nibble(c)?))?;
    }
    (bits >= 64 || v >> bits == 0).then_some(v)
}

/// Exactly `2 * N` hex digits, two per byte, in order.
fn hex_bytes<const N: usize>(field: &[u8]) -> Option<[u8; N]> {
    if field.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (b, pair) in out.iter_mut().zip(field.chunks_exact(2)) {
        *b = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// Formats bytes as lower-case hex digits, two per byte.
fn hex_string(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_fields_take_digits_only() {
        assert_eq!(hex_number(b"ffff", 16), Some(0xffff));
        assert_eq!(hex_number(b"10000", 16), None);
        assert_eq!(hex_number(b"00000000000000000000ff", 8), Some(0xff));
        assert_eq!(hex_number(b"ffffffffffffffff", 64), Some(u64::MAX));
        assert_eq!(hex_number(b"1ffffffffffffffff", 64), None);
        for bad in [&b""[..], b"+1", b"-1", b" 1", b"0x1", b"g", "é".as_bytes()] {
            assert_eq!(hex_number(bad, 64), None, "{bad:?}");
        }
        assert_eq!(hex_bytes::<2>(b"0aFf"), Some([0x0a, 0xff]));
        assert_eq!(hex_bytes::<2>(b"0aF"), None);
        // A two-byte UTF-8 character where two digits should be.
        assert_eq!(hex_bytes::<2>("0aé".as_bytes()), None);
        assert_eq!(hex_string(&[0, 0xab]), "00ab");
    }

    #[test]
    fn bad_messages_show_what_came() {
        let e = BadMessage::new("test message", "too short", b"a\xc3\xa9\n");
        assert_eq!(
            e.to_string(),
            "malformed test message from the peer: too short; got \"a\\xc3\\xa9\\n\""
        );
        let long = BadMessage::new("m", "r", &[b'x'; 200]);
        assert!(long.got.ends_with("x..."));
        assert_eq!(long.got.len(), 131);
    }
}

//! rdma-core `rping`'s one message, `struct rping_rdma_info`: the address,
//! rkey and size of a buffer (big-endian `be64 buf; be32 rkey; be32 size`),
//! sent in a SEND; the server's "go ahead" answers carry the same 16 bytes
//! (zeros).

use super::BadMessage;

/// Bytes of the message.
pub const INFO_LEN: usize = 16;

/// A buffer the peer advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Info {
    /// Its address.
    pub addr: u64,
    /// Its rkey.
    pub rkey: u32,
    /// Its size in bytes.
    pub len: u32,
}

impl Info {
    /// The 16 bytes.
    pub fn encode(&self) -> [u8; INFO_LEN] {
        let mut b = [0u8; INFO_LEN];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Decodes a received message: exactly 16 bytes (any values), else a
    /// [`BadMessage`].
    pub fn decode(msg: &[u8]) -> Result<Info, BadMessage> {
        let Ok(b) = <&[u8; INFO_LEN]>::try_from(msg) else {
            return Err(BadMessage::new(
                "rping buffer info",
                format!("{} bytes, expected {INFO_LEN}", msg.len()),
                msg,
            ));
        };
        let [a0, a1, a2, a3, a4, a5, a6, a7, r0, r1, r2, r3, l0, l1, l2, l3] = *b;
        Ok(Info {
            addr: u64::from_be_bytes([a0, a1, a2, a3, a4, a5, a6, a7]),
            rkey: u32::from_be_bytes([r0, r1, r2, r3]),
            len: u32::from_be_bytes([l0, l1, l2, l3]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_big_endian() {
        let i = Info {
            addr: 0x0102_0304_0506_0708,
            rkey: 0x0a0b_0c0d,
            len: 64,
        };
        let b = i.encode();
        assert_eq!(b[0], 1);
        assert_eq!(b[8], 0x0a);
        assert_eq!(b[15], 64);
        assert_eq!(Info::decode(&b), Ok(i));
        assert_eq!(
            Info::decode(&b[..15]).unwrap_err().reason,
            "15 bytes, expected 16"
        );
        assert!(Info::decode(&[0; 17]).is_err());
    }
}

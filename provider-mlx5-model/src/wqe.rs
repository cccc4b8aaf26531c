//! Reading the provider's work queues the way the device does: send WQEs
//! from the SQ ring (wrapping), receive WQEs from the RQ ring or an SRQ's
//! linked list. Offsets are from `mlx5dv.h`, decoded here independently of
//! the crate under test.

use crate::mem::SharedBuf;

/// A decoded send WQE.
#[derive(Debug, Clone, Default)]
pub struct SendWqe {
    pub opcode: u8,
    pub index: u16,
    pub qpn: u32,
    pub ds: usize,
    pub fm_ce_se: u8,
    pub imm: u32,
    /// UD: destination QP and Q_Key.
    pub ud: Option<(u32, u32)>,
    /// RDMA/atomic: remote address and key.
    pub remote: Option<(u64, u32)>,
    /// Atomic: swap_add, compare.
    pub atomic: Option<(u64, u64)>,
    /// Gather/scatter: (length, lkey, addr).
    pub sges: Vec<(u32, u32, u64)>,
    pub inline: Option<Vec<u8>>,
    /// The raw bytes, unwrapped.
    pub raw: Vec<u8>,
}

impl SendWqe {
    pub fn signaled(&self) -> bool {
        self.fm_ce_se & 0x08 != 0
    }
    pub fn solicited(&self) -> bool {
        self.fm_ce_se & 0x02 != 0
    }
    pub fn bbs(&self) -> u32 {
        (self.ds as u32 * 16).div_ceil(64)
    }
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(b[o..o + 4].try_into().unwrap())
}
fn be64(b: &[u8], o: usize) -> u64 {
    u64::from_be_bytes(b[o..o + 8].try_into().unwrap())
}

/// `n` bytes of the ring from byte `off`, wrapping.
fn ring_read(ring: &SharedBuf, len: usize, off: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| ring.read((off + i) % len, 1)[0]).collect()
}

/// Decodes the WQE at basic block `bb` of an SQ of `wqe_cnt` blocks.
pub fn read_send(ring: &SharedBuf, wqe_cnt: u32, bb: u32, ud: bool) -> SendWqe {
    let len = wqe_cnt as usize * 64;
    let start = (bb & (wqe_cnt - 1)) as usize * 64;
    let ctrl = ring_read(ring, len, start, 16);
    let ds = (be32(&ctrl, 4) & 0x3f) as usize;
    assert!(ds >= 1, "WQE with ds 0");
    assert!(ds * 16 <= len, "WQE larger than the ring");
    let raw = ring_read(ring, len, start, ds * 16);
    let mut w = SendWqe {
        opcode: (be32(&raw, 0) & 0xff) as u8,
        index: (be32(&raw, 0) >> 8) as u16,
        qpn: be32(&raw, 4) >> 8,
        ds,
        fm_ce_se: raw[11],
        imm: be32(&raw, 12),
        ..SendWqe::default()
    };
    assert_eq!(raw[8], 0, "signature set");
    let mut off = 16;
    if ud && w.opcode != 0 {
        let dqp = be32(&raw, off + 8);
        assert_ne!(dqp & 0x8000_0000, 0, "UD AV without the extended bit");
        assert_eq!(be32(&raw, off + 4), 0, "qkey.reserved set");
        w.ud = Some((dqp & 0xff_ffff, be32(&raw, off)));
        off += 48;
    }
    match w.opcode {
        0x08 | 0x09 | 0x10 | 0x11 | 0x12 => {
            assert_eq!(be32(&raw, off + 12), 0, "raddr reserved set");
            w.remote = Some((be64(&raw, off), be32(&raw, off + 8)));
            off += 16;
            if w.opcode >= 0x11 {
                w.atomic = Some((be64(&raw, off), be64(&raw, off + 8)));
                off += 16;
            }
        }
        _ => {}
    }
    if off < ds * 16 && be32(&raw, off) & 0x8000_0000 != 0 {
        let n = (be32(&raw, off) & 0x7fff_ffff) as usize;
        assert_eq!(
            (off + 4 + n).div_ceil(16) * 16,
            ds * 16,
            "inline size disagrees with ds"
        );
        assert!(
            raw[off + 4 + n..].iter().all(|&b| b == 0),
            "inline padding not zero"
        );
        w.inline = Some(raw[off + 4..off + 4 + n].to_vec());
    } else {
        while off < ds * 16 {
            let seg = (be32(&raw, off), be32(&raw, off + 4), be64(&raw, off + 8));
            assert_ne!(
                seg.0, 0,
                "zero-length data segment (the device reads 2 GiB)"
            );
            w.sges.push(seg);
            off += 16;
        }
    }
    w.raw = raw;
    w
}

/// Reads a receive scatter list of at most `room` bytes at `off` of `buf`:
/// data segments up to the INVALID_LKEY terminator or the end.
pub fn read_scatter(buf: &SharedBuf, off: usize, room: usize) -> Vec<(u32, u32, u64)> {
    let mut v = Vec::new();
    for i in 0..room / 16 {
        let o = off + i * 16;
        let seg = (
            buf.be32(o),
            buf.be32(o + 4),
            u64::from_be_bytes(buf.read(o + 8, 8).try_into().unwrap()),
        );
        if seg.1 == 0x100 {
            break;
        }
        v.push(seg);
    }
    v
}

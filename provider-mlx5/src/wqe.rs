//! Sizing and writing one send WQE into the SQ ring.
//!
//! `plan` validates a work request against the QP and computes its size
//! in octowords without touching memory; a `Cursor` then writes the
//! segments at a free-running byte offset that it masks into the ring, so a
//! WQE that runs past the end of the buffer continues at its start (the
//! device reads it the same way) and no offset can leave the buffer.
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

use crate::seg::{
    AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineSeg, RaddrSeg, MAX_DS, OCTOWORD, WQEBB,
};
use crate::wr::{Payload, SendOp, SendWr};
use crate::{PostError, QpType};
use zerocopy::{Immutable, IntoBytes};

/// The validated shape of one send WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Size in octowords (the control segment's `ds`).
    pub ds: u32,
    /// Basic blocks taken in the ring.
    pub bbs: u32,
    /// The payload is inline.
    pub inline: bool,
}

/// The QP limits a request is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub qp_type: QpType,
    pub max_sge: u32,
    pub max_inline: u32,
}

/// Octowords of the transport segment(s) after the control segment.
fn transport_ds(qp_type: QpType, op: &SendOp) -> u32 {
    match (qp_type, op) {
        (_, SendOp::Nop) => 0,
        (QpType::Ud, _) => (core::mem::size_of::<DatagramSeg>() / OCTOWORD) as u32,
        (_, SendOp::Write { .. } | SendOp::WriteImm { .. } | SendOp::Read { .. }) => 1,
        (_, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }) => 2,
        _ => 0,
    }
}

/// Checks that the QP type takes this operation (and a UD destination iff
/// it is UD).
fn check_op(l: &Limits, wr: &SendWr<'_>) -> Result<(), PostError> {
    let ok = match l.qp_type {
        QpType::Ud => matches!(wr.op, SendOp::Send | SendOp::SendImm { .. } | SendOp::Nop),
        QpType::Uc => !matches!(
            wr.op,
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
        ),
        QpType::Rc => true,
    };
    if !ok {
        return Err(PostError::UnsupportedOp {
            opcode: wr.op.opcode(),
        });
    }
    let is_ud = l.qp_type == QpType::Ud;
    if is_ud != wr.ud.is_some() && !matches!(wr.op, SendOp::Nop) {
        return Err(PostError::UdMismatch { qp_is_ud: is_ud });
    }
    Ok(())
}

/// Octowords of the payload, after checking it against the limits.
fn payload_ds(l: &Limits, wr: &SendWr<'_>) -> Result<u32, PostError> {
    match wr.payload {
        Payload::Sges(sges) => {
            if sges.len() > l.max_sge as usize {
                return Err(PostError::TooManySges {
                    given: sges.len(),
                    max: l.max_sge,
                });
            }
            let length: u64 = sges.iter().map(|s| s.length as u64).sum();
            if length > 1 << 31 {
                return Err(PostError::TooLong { length });
            }
            if matches!(wr.op, SendOp::Nop) && !sges.is_empty() {
                return Err(PostError::PayloadNotAllowed);
            }
            if wr.op.is_atomic() {
                let aligned = wr.op.remote().is_some_and(|r| r.addr % 8 == 0);
                if sges.len() != 1 || sges[0].length != 8 || !aligned {
                    return Err(PostError::BadAtomic);
                }
            }
            Ok(sges.iter().filter(|s| s.length != 0).count() as u32)
        }
        Payload::Inline(data) => {
            let allowed = matches!(
                wr.op,
                SendOp::Send
                    | SendOp::SendImm { .. }
                    | SendOp::Write { .. }
                    | SendOp::WriteImm { .. }
            );
            if !allowed && !data.is_empty() {
                return Err(PostError::InlineNotAllowed {
                    opcode: wr.op.opcode(),
                });
            }
            if wr.op.is_atomic() {
                return Err(PostError::BadAtomic);
            }
            if data.len() > l.max_inline as usize {
                return Err(PostError::InlineTooLong {
                    given: data.len(),
                    max: l.max_inline,
                });
            }
            Ok(InlineSeg::octowords(data.len()) as u32)
        }
    }
}

/// Validates `wr` and sizes its WQE. Touches no memory.
pub(crate) fn plan(l: &Limits, wr: &SendWr<'_>) -> Result<Plan, PostError> {
    check_op(l, wr)?;
    let ds = 1 + transport_ds(l.qp_type, &wr.op) + payload_ds(l, wr)?;
    if ds > MAX_DS {
        return Err(PostError::WqeTooLarge { ds });
    }
    Ok(Plan {
        ds,
        bbs: (ds as usize * OCTOWORD).div_ceil(WQEBB) as u32,
        inline: matches!(wr.payload, Payload::Inline(_)),
    })
}

/// The largest WQE, in octowords, that requests within `l` can produce.
pub(crate) fn max_ds(l: &Limits) -> u32 {
    let transport = match l.qp_type {
        QpType::Ud => 3,
        QpType::Uc => 1,
        QpType::Rc => 2,
    };
    let payload = (l.max_sge as u64).max(InlineSeg::octowords(l.max_inline as usize) as u64);
    (1 + transport + payload).min(u32::MAX as u64) as u32
}

/// A write position in the SQ ring: a free-running byte offset, masked on
/// every store.
pub(crate) struct Cursor {
    base: *mut u8,
    len: usize,
    off: usize,
}

impl Cursor {
    /// A cursor at byte offset `off` of the ring at `base`.
    ///
    /// # Safety
    /// `base` must be valid for writes of `len` bytes, `len` a power of two,
    /// for as long as the cursor is used, with nothing else accessing that
    /// memory meanwhile except device reads.
    pub unsafe fn new(base: *mut u8, len: usize, off: usize) -> Cursor {
        debug_assert!(len.is_power_of_two());
        Cursor { base, len, off }
    }

    /// Writes `bytes` at the cursor, continuing at the ring's start if they
    /// cross its end, and advances.
    #[inline(always)]
    pub fn put_bytes(&mut self, bytes: &[u8]) {
        let pos = self.off & (self.len - 1);
        let first = bytes.len().min(self.len - pos);
        let rest = (bytes.len() - first).min(self.len);
        // A source slice never overlaps the ring: it is a Rust value or the
        // caller's inline data, which is not device memory.
        // SAFETY: pos < len and first <= len - pos keep the first copy in
        // the ring; the second starts at its base and copies at most len
        // bytes (Cursor::new's contract covers both).
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(pos), first);
            core::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), self.base, rest);
        }
        self.off = self.off.wrapping_add(bytes.len());
    }

    /// Writes one segment.
    #[inline(always)]
    pub fn put<T: IntoBytes + Immutable>(&mut self, seg: &T) {
        self.put_bytes(seg.as_bytes());
    }

    /// Writes zeros up to the next 16-byte boundary.
    #[inline(always)]
    pub fn pad_to_octoword(&mut self) {
        let n = self.off.wrapping_neg() & (OCTOWORD - 1);
        self.put_bytes(&[0u8; OCTOWORD][..n]);
    }
}

/// Writes the WQE `plan` describes for `wr` at `cur`, control segment
/// included.
pub(crate) fn write(cur: &mut Cursor, ctrl: &CtrlSeg, wr: &SendWr<'_>) {
    cur.put(ctrl);
    if let (Some(ud), false) = (wr.ud, matches!(wr.op, SendOp::Nop)) {
        cur.put(&ud.av.for_ud(ud.remote_qpn, ud.qkey));
    }
    match wr.op {
        SendOp::Write { remote } | SendOp::WriteImm { remote, .. } | SendOp::Read { remote } => {
            cur.put(&RaddrSeg::new(remote.addr, remote.rkey));
        }
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => {
            cur.put(&RaddrSeg::new(remote.addr, remote.rkey));
            cur.put(&AtomicSeg::compare_swap(compare, swap));
        }
        SendOp::FetchAdd { remote, add } => {
            cur.put(&RaddrSeg::new(remote.addr, remote.rkey));
            cur.put(&AtomicSeg::fetch_add(add));
        }
        SendOp::Send | SendOp::SendImm { .. } | SendOp::Nop => {}
    }
    match wr.payload {
        Payload::Sges(sges) => {
            for s in sges.iter().filter(|s| s.length != 0) {
                cur.put(&DataSeg::new(s.length, s.lkey, s.addr));
            }
        }
        Payload::Inline(data) if !data.is_empty() => {
            cur.put(&InlineSeg::new(data.len() as u32));
            cur.put_bytes(data);
            cur.pad_to_octoword();
        }
        Payload::Inline(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_wraps_inside_the_ring() {
        let mut ring = [0xffu8; 64];
        // SAFETY: the array is 64 writable bytes, used only here.
        let mut c = unsafe { Cursor::new(ring.as_mut_ptr(), 64, 48 + 64 * 3) };
        let data: Vec<u8> = (1..=20).collect();
        c.put_bytes(&data);
        c.pad_to_octoword();
        assert_eq!(&ring[48..64], &data[..16]);
        assert_eq!(&ring[..4], &data[16..]);
        assert_eq!(&ring[4..16], &[0; 12]);
        assert_eq!(ring[16], 0xff);
    }
}

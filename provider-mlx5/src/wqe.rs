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
use crate::wr::{as_sges, AsSge, SendOp, SendWr, Sge, AV_LEN};
use crate::{PostError, QpType};
use rverbs_types::{check_send, SendLimits};
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

impl Plan {
    /// A NOP: the control segment alone.
    pub(crate) const NOP: Plan = Plan {
        ds: 1,
        bbs: 1,
        inline: false,
    };
}

/// The QP limits a request is checked against.
pub(crate) type Limits = SendLimits;

/// Octowords of the transport segment(s) after the control segment.
fn transport_ds(qp_type: QpType, op: &SendOp) -> u32 {
    match (qp_type, op) {
        (QpType::Ud, _) => (core::mem::size_of::<DatagramSeg>() / OCTOWORD) as u32,
        (_, SendOp::Write(_) | SendOp::WriteWithImm(..) | SendOp::Read(_)) => 1,
        (_, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }) => 2,
        _ => 0,
    }
}

/// The shared checks (transport, destination, SGE count, inline size),
/// after refusing what this provider does not build.
#[inline(always)]
fn check_op<S, A>(l: &Limits, wr: &SendWr<'_, S, A>) -> Result<(), PostError> {
    if wr.op.is_extended() {
        // SEND with invalidate, local invalidate, ATOMIC WRITE, FLUSH and
        // window binds need segments (UMR, the invalidate key) this
        // provider does not build: refused by name, never half-built.
        return Err(PostError::NotImplemented {
            opcode: wr.op.opcode(),
        });
    }
    check_send(l, wr)
}

/// The most bytes one request moves (`2^31`, the data segment's byte
/// count).
pub(crate) const MAX_LENGTH: u64 = 1 << 31;

/// Octowords of the payload, after checking what the shared checks leave:
/// the total length, atomics' shape, and which operations take inline
/// data.
#[inline(always)]
fn payload_ds(op: &SendOp, sges: &[Sge], inline: Option<&[u8]>) -> Result<u32, PostError> {
    match inline {
        None => {
            // One pass for the total and the non-empty count: the usual
            // list holds one or two SGEs, where iterator adaptors (and the
            // vector loops they become) cost more than the work.
            let mut length = 0u64;
            let mut nonempty = 0u32;
            for s in sges {
                length += s.length as u64;
                nonempty += (s.length != 0) as u32;
            }
            if length > MAX_LENGTH {
                return Err(PostError::TooLong {
                    length,
                    max: MAX_LENGTH,
                });
            }
            if op.is_atomic() {
                let aligned = op.remote().is_some_and(|r| r.addr % 8 == 0);
                if sges.len() != 1 || sges[0].length != 8 || !aligned {
                    return Err(PostError::BadAtomic);
                }
            }
            Ok(nonempty)
        }
        Some(data) => {
            let allowed = matches!(
                op,
                SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write(_) | SendOp::WriteWithImm(..)
            );
            if !allowed && !data.is_empty() {
                return Err(PostError::InlineNotAllowed {
                    opcode: op.opcode(),
                });
            }
            if op.is_atomic() {
                return Err(PostError::BadAtomic);
            }
            Ok(InlineSeg::octowords(data.len()) as u32)
        }
    }
}

/// Validates `wr` and sizes its WQE. Touches no memory.
#[inline]
pub(crate) fn plan<S: AsSge, A>(l: &Limits, wr: &SendWr<'_, S, A>) -> Result<Plan, PostError> {
    check_op(l, wr)?;
    let payload = payload_ds(&wr.op, as_sges(wr.sges), wr.inline)?;
    let ds = 1 + transport_ds(l.qp_type, &wr.op) + payload;
    if ds > MAX_DS {
        return Err(PostError::WqeTooLarge {
            bytes: ds as usize * OCTOWORD,
            max: MAX_DS as usize * OCTOWORD,
        });
    }
    Ok(Plan {
        ds,
        bbs: (ds as usize * OCTOWORD).div_ceil(WQEBB) as u32,
        inline: wr.inline.is_some(),
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
    /// `base` must be valid for writes of `len` bytes, `len` a power of two
    /// no smaller than an octoword (16), for as long as the cursor is used, with nothing else accessing that
    /// memory meanwhile except device reads.
    pub unsafe fn new(base: *mut u8, len: usize, off: usize) -> Cursor {
        debug_assert!(len.is_power_of_two() && len >= OCTOWORD);
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
    /// Writes a segment made of whole octowords (every segment but the
    /// inline header). A WQE starts on a 64-byte block and such segments
    /// keep the cursor on a 16-byte boundary, so no octoword straddles the
    /// ring's end: each is one masked 16-byte store, with no length-driven
    /// copy and no split at the wrap.
    #[inline(always)]
    pub fn put<T: IntoBytes + Immutable>(&mut self, seg: &T) {
        const { assert!(core::mem::size_of::<T>() % OCTOWORD == 0) };
        for chunk in seg.as_bytes().chunks_exact(OCTOWORD) {
            debug_assert!(self.off % OCTOWORD == 0);
            // Clearing the low bits as well keeps the store inside the ring
            // even if a caller ever left the cursor unaligned.
            let pos = self.off & (self.len - 1) & !(OCTOWORD - 1);
            // SAFETY: len is a power of two >= 16 (Cursor::new's contract),
            // so pos is a 16-byte boundary with pos + 16 <= len: the store
            // is inside the ring.
            // The source is a Rust value, never device memory.
            unsafe {
                core::ptr::copy_nonoverlapping(chunk.as_ptr(), self.base.add(pos), OCTOWORD);
            }
            self.off = self.off.wrapping_add(OCTOWORD);
        }
    }

    /// Writes zeros up to the next 16-byte boundary.
    #[inline(always)]
    pub fn pad_to_octoword(&mut self) {
        let n = self.off.wrapping_neg() & (OCTOWORD - 1);
        self.put_bytes(&[0u8; OCTOWORD][..n]);
    }
}

/// Writes the WQE `plan` describes for `wr` at `cur`, control segment
/// included; `av` is the UD destination's address vector, which is
/// finished here for this send ([`DatagramSeg::for_ud`]). Zero-length SGEs are skipped (the
/// device would read a zero byte count as 2 GiB).
#[inline]
pub(crate) fn write<S: AsSge, A>(
    cur: &mut Cursor,
    ctrl: &CtrlSeg,
    wr: &SendWr<'_, S, A>,
    av: Option<&[u8; AV_LEN]>,
) {
    cur.put(ctrl);
    if let (Some(bytes), Some(ud)) = (av, wr.ud) {
        let seg: DatagramSeg = zerocopy::transmute!(*bytes);
        cur.put(&seg.for_ud(ud.remote_qpn, ud.remote_qkey));
    }
    match wr.op {
        SendOp::Write(remote) | SendOp::WriteWithImm(remote, _) | SendOp::Read(remote) => {
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
        SendOp::Send | SendOp::SendWithImm(_) => {}
        // Refused by plan() (check_op) before anything is written.
        SendOp::SendWithInv(_)
        | SendOp::LocalInv(_)
        | SendOp::AtomicWrite { .. }
        | SendOp::Flush { .. }
        | SendOp::BindMw(_) => {}
    }
    match wr.inline {
        None => {
            for s in as_sges(wr.sges).iter().filter(|s| s.length != 0) {
                cur.put(&DataSeg::new(s.length, s.lkey, s.addr));
            }
        }
        Some(data) if !data.is_empty() => {
            cur.put_bytes(InlineSeg::new(data.len() as u32).as_bytes());
            cur.put_bytes(data);
            cur.pad_to_octoword();
        }
        Some(_) => {}
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

    #[test]
    fn operations_this_provider_does_not_build_are_refused_by_name() {
        use crate::wr::{AhAddr, FlushLevel, FlushType, MwBind, Remote};
        let l = Limits::new(QpType::Rc, 4, 64);
        let remote = Remote {
            addr: 0x1000,
            rkey: 1,
        };
        let ops = [
            SendOp::SendWithInv(1),
            SendOp::LocalInv(1),
            SendOp::AtomicWrite {
                remote,
                value: [0; 8],
            },
            SendOp::Flush {
                remote,
                len: 8,
                placement: FlushType::Global,
                level: FlushLevel::Range,
            },
            SendOp::BindMw(MwBind::default()),
        ];
        for op in ops {
            let wr: SendWr<'_, Sge, AhAddr> = SendWr::new(1, op, &[]);
            assert_eq!(
                plan(&l, &wr),
                Err(PostError::NotImplemented {
                    opcode: op.opcode()
                })
            );
        }
        // The first seven still plan.
        let wr: SendWr<'_, Sge, AhAddr> = SendWr::new(1, SendOp::Read(remote), &[]);
        assert!(plan(&l, &wr).is_ok());
    }
}

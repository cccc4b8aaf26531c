//! Prepared sends: a WQE checked and laid out once, posted many times.
//!
//! For a program whose sends repeat one shape, [`SendQueue::prepare`]
//! runs the checks and builds the segments that do not change: the
//! control segment but for its WQE index (and its size, one octoword less
//! when a post's SGE is empty, which the device would read as 2 GiB), the
//! UD datagram segment with its address vector, the rkey of a WRITE or
//! READ. Each post stores those, the remote address and the one data
//! segment: the bytes [`SendQueue::post`] writes for the same request (the
//! tests compare them).

use super::SendQueue;
use crate::seg::{CtrlSeg, DataSeg, DatagramSeg, RaddrSeg, OCTOWORD};
use crate::wqe::{Plan, MAX_LENGTH};
use crate::wr::{mlx5_opcode, AddressHandle, AsSge, SendWr, Sge};
use crate::PostError;
use rverbs_types::check_preparable;
use zerocopy::IntoBytes;

/// Octowords of a UD datagram segment (the most a prepared WQE carries
/// between its control and data segments).
const DATAGRAM_DS: usize = core::mem::size_of::<DatagramSeg>() / OCTOWORD;

/// A send WQE prepared for one queue's requests of one shape.
#[derive(Debug, Clone)]
pub struct SendTemplate {
    /// The control segment, WQE index 0 and the size with a data segment.
    ctrl: CtrlSeg,
    /// The UD datagram segment (address vector, destination QP and Q_Key),
    /// if the queue is UD.
    datagram: Option<[[u8; OCTOWORD]; DATAGRAM_DS]>,
    /// The remote memory of a WRITE or READ: prepared address and rkey.
    remote: Option<(u64, u32)>,
    /// The size with a data segment, in octowords.
    ds: u32,
    /// The mlx5 opcode, recorded for the completion.
    op: u8,
    /// `enum ib_uverbs_wr_opcode`, for errors.
    opcode: u32,
}

impl SendTemplate {
    /// Whether posts may give a remote address (WRITE and READ).
    pub fn takes_remote_address(&self) -> bool {
        self.remote.is_some()
    }
}

impl SendQueue {
    /// Checks `wr` as [`SendQueue::post`] would and lays out its WQE's
    /// fixed segments, for [`SendQueue::post_prepared`]. Its shape must be
    /// one [`check_preparable`] accepts: SEND, SEND with immediate, WRITE,
    /// WRITE with immediate or READ, one SGE, no inline data. Its SGE
    /// names no memory yet: each post gives one.
    pub fn prepare<S: AsSge, A: AddressHandle>(
        &self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<SendTemplate, PostError> {
        let remote = check_preparable(wr)?;
        let (_, av) = self.check(wr)?;
        let datagram = match (av, wr.ud) {
            (Some(bytes), Some(ud)) => {
                let seg: DatagramSeg = zerocopy::transmute!(*bytes);
                let seg = seg.for_ud(ud.remote_qpn, ud.remote_qkey);
                Some(zerocopy::transmute!(seg))
            }
            _ => None,
        };
        let remote = if remote {
            wr.op.remote().map(|r| (r.addr, r.rkey))
        } else {
            None
        };
        let ds = 1 + datagram.map_or(0, |_| DATAGRAM_DS) + remote.map_or(0, |_| 1) + 1;
        let op = mlx5_opcode(&wr.op);
        let ctrl = CtrlSeg::new(
            0,
            op,
            0,
            self.cfg.qpn,
            self.fm_ce_se(wr.signaled, wr.solicited, wr.fence),
            ds as u8,
            0,
            wr.op.imm().unwrap_or(0),
        );
        Ok(SendTemplate {
            ctrl,
            datagram,
            remote,
            ds: ds as u32,
            op,
            opcode: wr.op.opcode(),
        })
    }

    /// Builds the WQE `t` was prepared for, with work request id `wr_id`,
    /// the payload `sge`, and for a WRITE or READ the remote address
    /// `remote_addr` (`None`: the prepared one). Nothing reaches the device
    /// until [`SendQueue::ring`].
    ///
    /// Refused: a remote address for a SEND
    /// ([`PostError::NoRemoteAddress`]), more than 2 GiB, a full queue.
    ///
    /// # Safety
    /// As for [`SendQueue::post`] (`sge` names registered memory that stays
    /// allocated and unaliased until the request completes); and `t` was
    /// prepared by this queue (its QP number and size limits are in it).
    #[inline]
    pub unsafe fn post_prepared(
        &mut self,
        t: &SendTemplate,
        wr_id: u64,
        sge: Sge,
        remote_addr: Option<u64>,
    ) -> Result<(), PostError> {
        let raddr = match (t.remote, remote_addr) {
            (Some((prepared, rkey)), given) => Some((given.unwrap_or(prepared), rkey)),
            (None, None) => None,
            (None, Some(_)) => return Err(PostError::NoRemoteAddress { opcode: t.opcode }),
        };
        if sge.length as u64 > MAX_LENGTH {
            return Err(PostError::TooLong {
                length: sge.length as u64,
                max: MAX_LENGTH,
            });
        }
        // An empty SGE gets no data segment (as `post` skips it).
        let ds = t.ds - (sge.length == 0) as u32;
        let plan = Plan {
            ds,
            bbs: (ds * OCTOWORD as u32).div_ceil(crate::seg::WQEBB as u32),
            inline: false,
        };
        if !self.has_room(plan.bbs) {
            return Err(PostError::QueueFull);
        }
        let start = self.cur_post;
        let mut ctrl = t.ctrl;
        let bytes = ctrl.as_mut_bytes();
        // `opmod << 24 | index << 8 | opcode` and `qpn << 8 | ds`, big-endian:
        // the index's two bytes, and ds in the second word's last byte.
        bytes[1..3].copy_from_slice(&(start as u16).to_be_bytes());
        bytes[7] = ds as u8;
        let mut cur = self.cursor(start);
        cur.put(&ctrl);
        if let Some(d) = &t.datagram {
            cur.put(d);
        }
        if let Some((addr, rkey)) = raddr {
            cur.put(&RaddrSeg::new(addr, rkey));
        }
        if sge.length != 0 {
            cur.put(&DataSeg::new(sge.length, sge.lkey, sge.addr));
        }
        self.posted(start, plan, wr_id, t.op);
        Ok(())
    }
}

//! The send queue: WQEs in the SQ ring, the SND doorbell record and the
//! BlueFlame register.
//!
//! Index convention: `cur_post` is a free-running counter of 64-byte basic
//! blocks (rdma-core's `sq.cur_post`); a WQE's first block is at
//! `cur_post & (wqe_cnt - 1)` and its control segment carries
//! `cur_post & 0xffff`, the number the device reports back as a CQE's
//! `wqe_counter`. `tail` is the first block not yet known complete; it and
//! the per-WQE records live in [`SendRecords`], shared with the CQ poller
//! (see [`crate::records`]), never in memory the device writes.
//!
//! Completions: only signaled WQEs (and, after an error, every WQE) produce
//! CQEs, and a CQE for a WQE completes every earlier WQE too. So each WQE's
//! first block records the WQE's wr_id and start; a CQE's `wqe_counter` is
//! masked to find that record, checked to name a WQE that was posted,
//! rung and not yet completed, and then retires everything up to the end of
//! that WQE. A forged or repeated `wqe_counter` is refused rather than
//! mapped to a stale wr_id.
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

mod prepared;

pub use prepared::SendTemplate;

use crate::barrier;
use crate::records::{SendRecords, SendRetired};
use crate::seg::{fm_ce_se, opcode, CtrlSeg, OCTOWORD, WQEBB};
use crate::wqe::{self, Cursor, Limits, Plan};
use crate::wr::{mlx5_opcode, AddressHandle, AhAddr, AsSge, SendWr, AV_LEN};
use crate::{LayoutError, PostError, QpType};
use core::ptr::NonNull;
use std::sync::Arc;

/// Fixed properties of a send queue, from the QP's creation.
#[derive(Debug, Clone, Copy)]
pub struct SqConfig {
    /// The QP number (placed in every control segment).
    pub qpn: u32,
    /// The QP's transport.
    pub qp_type: QpType,
    /// Basic blocks in the ring: a power of two, at most 32768.
    pub wqe_cnt: u32,
    /// Most requests outstanding, from 1 to `wqe_cnt`: the QP's granted
    /// `max_send_wr` (rdma-core's `sq.max_post`), which its CQs are sized
    /// for. Small WQEs would fit more in the ring; a post past this many is
    /// refused as full, as rdma-core's `mlx5_wq_overflow` refuses it, or
    /// their completions could overrun a CQ.
    pub max_wr: u32,
    /// Most SGEs per request.
    pub max_sge: u32,
    /// Most inline bytes per request.
    pub max_inline: u32,
    /// Size of each of the two alternating halves of the BlueFlame register
    /// (the context's `bf_reg_size / 2`), a multiple of 64; the doorbell
    /// offset toggles by this after every ring.
    pub bf_size: u32,
    /// Whether BlueFlame copies may be used (false for bfreg 0, which has a
    /// doorbell but no BlueFlame buffer).
    pub blueflame: bool,
    /// Use BlueFlame for any single small WQE, not only inline ones
    /// (rdma-core's `prefer_bf`).
    pub prefer_blueflame: bool,
    /// Request a CQE for every WQE (`sq_sig_all`).
    pub sig_all: bool,
}

/// The producer side of an mlx5 send queue.
#[derive(Debug)]
pub struct SendQueue {
    buf: NonNull<u8>,
    dbrec: NonNull<u32>,
    bf_reg: NonNull<u8>,
    cfg: SqConfig,
    limits: Limits,
    records: Arc<SendRecords>,
    cur_post: u32,
    /// The number of the next request (free-running), and the number it
    /// may not reach: `max_wr` past the first request not known retired.
    cur_seq: u32,
    seq_limit: u32,
    pending: u32,
    last: (u32, Plan),
    bf_offset: u32,
}

// SAFETY: the queue holds pointers to its ring, doorbell word and register,
// which no other Rust object writes (the RQ writes the other doorbell
// word); moving it to another thread moves that exclusive use with it.
unsafe impl Send for SendQueue {}

/// Index of the SND word in the QP doorbell record.
pub const SND_DBR: usize = 1;

impl SendQueue {
    /// Wraps an SQ ring of `len` bytes at `buf`, the QP's doorbell record
    /// `dbrec` (two big-endian words, `[RCV, SND]`) and its BlueFlame
    /// register `bf_reg` (`uar + 0x800 + k * bf_reg_size`).
    ///
    /// # Safety
    /// For as long as the queue exists: `buf..buf + len` must be writable
    /// memory used by nothing else but the device's reads; `dbrec` must be
    /// valid for writes of 8 bytes, of which the queue writes only the
    /// second word; `bf_reg` must be valid for 8-byte writes at offsets 0
    /// and `bf_size`, and for writes of `2 * bf_size` bytes when
    /// `blueflame` is set, and used by no other queue.
    pub unsafe fn new(
        buf: NonNull<u8>,
        len: usize,
        dbrec: NonNull<u32>,
        bf_reg: NonNull<u8>,
        cfg: SqConfig,
    ) -> Result<SendQueue, LayoutError> {
        let limits = Limits::new(cfg.qp_type, cfg.max_sge, cfg.max_inline);
        check_layout(buf, len, dbrec, bf_reg, &cfg)?;
        let max_ds = wqe::max_ds(&limits);
        let max_bbs = (max_ds as u64 * OCTOWORD as u64).div_ceil(WQEBB as u64);
        if max_ds > crate::seg::MAX_DS || max_bbs > cfg.wqe_cnt as u64 {
            return Err(LayoutError::CapsTooLarge { ds: max_ds });
        }
        Ok(SendQueue {
            buf,
            dbrec,
            bf_reg,
            cfg,
            limits,
            records: Arc::new(SendRecords::new(cfg.wqe_cnt)),
            cur_post: 0,
            cur_seq: 0,
            seq_limit: cfg.max_wr,
            pending: 0,
            last: (
                0,
                Plan {
                    ds: 0,
                    bbs: 0,
                    inline: false,
                },
            ),
            bf_offset: 0,
        })
    }

    /// The configuration the queue was built with.
    pub fn config(&self) -> &SqConfig {
        &self.cfg
    }

    /// Basic blocks posted and not yet known complete.
    #[inline]
    pub fn outstanding_wqebbs(&self) -> u32 {
        self.cur_post.wrapping_sub(self.records.tail())
    }

    /// The records a CQ poller retires this queue's requests through.
    pub fn records(&self) -> &SendRecords {
        &self.records
    }

    /// A shared handle on [`SendQueue::records`], for a poller on another
    /// thread.
    pub fn shared_records(&self) -> Arc<SendRecords> {
        self.records.clone()
    }

    /// Basic blocks free for new WQEs.
    #[inline]
    pub fn free_wqebbs(&self) -> u32 {
        self.cfg.wqe_cnt - self.outstanding_wqebbs()
    }

    /// Whether a WQE of `bbs` blocks may be posted: the ring has the
    /// blocks, and fewer than [`SqConfig::max_wr`] requests are
    /// outstanding. The producer's count of outstanding requests is only
    /// ever too high (the poller retires blocks, not requests); it is
    /// brought up to date only when it says full, so that neither the
    /// post nor the poll pays for it otherwise.
    #[inline(always)]
    fn has_room(&mut self, bbs: u32) -> bool {
        let tail = self.records.tail();
        let free = self.cfg.wqe_cnt - self.cur_post.wrapping_sub(tail);
        bbs <= free && (self.cur_seq != self.seq_limit || self.retire_requests(tail))
    }

    /// Brings the first outstanding request's number up to the block
    /// `tail` the poller has retired up to, and answers whether fewer than
    /// `max_wr` requests remain outstanding. Inline although it is rarely
    /// run: as a call, the values live across it cost the post spills
    /// (callgrind: prepared post 158 -> 154).
    #[inline(always)]
    fn retire_requests(&mut self, tail: u32) -> bool {
        let seq_tail = if tail == self.cur_post {
            self.cur_seq
        } else {
            // WQEs lie end to end and the poller retires whole ones, so
            // the first outstanding request starts at `tail`, and its
            // record (this queue's own store) holds its number's low 16
            // bits; it is at most `max_wr` (<= 2^15) behind `cur_seq`.
            let behind = (self.cur_seq as u16).wrapping_sub(self.records.seq_at(tail));
            self.cur_seq.wrapping_sub(u32::from(behind))
        };
        self.seq_limit = seq_tail.wrapping_add(self.cfg.max_wr);
        self.cur_seq != self.seq_limit
    }

    /// The basic-block counter of the next WQE.
    pub fn cur_post(&self) -> u32 {
        self.cur_post
    }

    /// Validates `wr` against the QP and sizes its WQE, without posting.
    #[inline]
    pub fn plan<S: AsSge, A: AddressHandle>(
        &self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<Plan, PostError> {
        self.check(wr).map(|(plan, _)| plan)
    }

    /// Every check of `wr`, and its UD address vector finished for this
    /// send (the address handle's [`AhAddr::Vector`]; an AH number is
    /// another provider's).
    #[inline(always)]
    fn check<'w, S: AsSge, A: AddressHandle>(
        &self,
        wr: &'w SendWr<'_, S, A>,
    ) -> Result<(Plan, Option<&'w [u8; AV_LEN]>), PostError> {
        let plan = wqe::plan(&self.limits, wr)?;
        // The vector is borrowed, not copied: it is 48 bytes, written once
        // into the ring by `wqe::write`.
        let av = match wr.ud {
            None => None,
            Some(u) => match u.ah.address() {
                AhAddr::Vector(bytes) => Some(bytes),
                AhAddr::Number(_) => return Err(PostError::ForeignAddressHandle),
            },
        };
        Ok((plan, av))
    }

    /// Builds the WQE for `wr` in the ring. Nothing reaches the device until
    /// [`SendQueue::ring`]. On error nothing is written.
    ///
    /// # Safety
    /// Every SGE names memory registered under its lkey. The device may
    /// read it (for READ and atomics, write it) until the request completes
    /// or the registration is gone: until then the caller keeps it
    /// allocated, and reaches it only in ways the device's concurrent
    /// access cannot make undefined (no Rust references into it).
    #[inline]
    pub unsafe fn post<S: AsSge, A: AddressHandle>(
        &mut self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<(), PostError> {
        let (plan, av) = self.check(wr)?;
        if !self.has_room(plan.bbs) {
            return Err(PostError::QueueFull);
        }
        let start = self.cur_post;
        let op = mlx5_opcode(&wr.op);
        let ctrl = CtrlSeg::new(
            start as u16,
            op,
            0,
            self.cfg.qpn,
            self.fm_ce_se(wr.signaled, wr.solicited, wr.fence),
            plan.ds as u8,
            0,
            wr.op.imm().unwrap_or(0),
        );
        let mut cur = self.cursor(start);
        wqe::write(&mut cur, &ctrl, wr, av);
        self.posted(start, plan, wr.wr_id, op);
        Ok(())
    }

    /// Builds a NOP (`MLX5_OPCODE_NOP`: a WQE of one control segment that
    /// only completes, not an IB verb) — useful to retire a run of
    /// unsignaled WQEs. Its completion's opcode is [`crate::wc::NOP`].
    /// Nothing reaches the device until [`SendQueue::ring`].
    #[inline]
    pub fn post_nop(&mut self, wr_id: u64, signaled: bool) -> Result<(), PostError> {
        let plan = Plan::NOP;
        if !self.has_room(plan.bbs) {
            return Err(PostError::QueueFull);
        }
        let start = self.cur_post;
        let ctrl = CtrlSeg::new(
            start as u16,
            opcode::NOP,
            0,
            self.cfg.qpn,
            self.fm_ce_se(signaled, false, false),
            plan.ds as u8,
            0,
            0,
        );
        self.cursor(start).put(&ctrl);
        self.posted(start, plan, wr_id, opcode::NOP);
        Ok(())
    }

    /// A write position at block `start`, which must begin free blocks
    /// enough for the WQE to be written.
    #[inline(always)]
    fn cursor(&mut self, start: u32) -> Cursor {
        let len = self.ring_len();
        let off = (start as usize) * WQEBB;
        // SAFETY: new()'s contract makes buf..buf+len ours to write, and
        // check_layout made len a power of two; the callers checked that
        // the WQE fits in the free blocks, so it overwrites no posted WQE.
        unsafe { Cursor::new(self.buf.as_ptr(), len, off) }
    }

    /// Records the WQE just written at `start` and moves past it.
    #[inline(always)]
    fn posted(&mut self, start: u32, plan: Plan, wr_id: u64, op: u8) {
        self.records
            .record(start, plan.bbs, wr_id, op, self.cur_seq);
        self.cur_post = start.wrapping_add(plan.bbs);
        self.cur_seq = self.cur_seq.wrapping_add(1);
        self.pending += 1;
        self.last = (start, plan);
    }

    #[inline(always)]
    fn fm_ce_se(&self, signaled: bool, solicited: bool, fence: bool) -> u8 {
        let mut v = 0;
        if signaled || self.cfg.sig_all {
            v |= fm_ce_se::CQ_UPDATE;
        }
        if solicited {
            v |= fm_ce_se::SOLICITED;
        }
        if fence {
            v |= fm_ce_se::FENCE;
        }
        v
    }

    #[inline]
    fn ring_len(&self) -> usize {
        self.cfg.wqe_cnt as usize * WQEBB
    }

    /// Hands every WQE posted since the last ring to the device: DMA
    /// barrier, SND doorbell record, then either one 64-bit doorbell store
    /// of the last WQE's first 8 bytes or, for a single small WQE, a
    /// BlueFlame copy of the whole WQE; flush; toggle the BlueFlame half.
    #[inline]
    pub fn ring(&mut self) {
        if self.pending == 0 {
            return;
        }
        // Published before the device can see them, so that a poller on
        // another thread never meets a CQE for a WQE it cannot yet accept.
        self.records.publish(self.cur_post);
        barrier::to_device();
        // SAFETY: dbrec is valid for 8 bytes and 4-aligned (new()'s
        // contract, check_layout); the SND word is ours alone. Volatile: the
        // device reads it.
        unsafe {
            let v = (self.cur_post & 0xffff).to_be();
            self.dbrec.as_ptr().add(SND_DBR).write_volatile(v);
        }
        barrier::wc_start();
        let (start, plan) = self.last;
        // SAFETY: bf_offset is 0 or bf_size and the register is writable
        // for 8 bytes at both, or 2 * bf_size bytes with blueflame (new()).
        let reg = unsafe { self.bf_reg.as_ptr().add(self.bf_offset as usize) };
        if self.use_blueflame(&plan) {
            self.blueflame_copy(reg, start, plan.bbs);
        } else {
            let mut first = [0u8; 8];
            let pos = (start & (self.cfg.wqe_cnt - 1)) as usize * WQEBB;
            // SAFETY: pos is a block start inside the ring (masked), and a
            // block has 64 >= 8 bytes; reg is 8-aligned (check_layout) and
            // writable for 8 bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(self.buf.as_ptr().add(pos), first.as_mut_ptr(), 8);
                barrier::mmio_write64(reg, first);
            }
        }
        barrier::wc_flush();
        self.bf_offset ^= self.cfg.bf_size;
        self.pending = 0;
    }

    #[inline]
    fn use_blueflame(&self, plan: &Plan) -> bool {
        self.pending == 1
            && self.cfg.blueflame
            && plan.ds > 1
            && (plan.inline || self.cfg.prefer_blueflame)
            && plan.ds * OCTOWORD as u32 <= self.cfg.bf_size
    }

    /// Copies the WQE's blocks to the BlueFlame half at `reg`, wrapping the
    /// source at the end of the ring.
    fn blueflame_copy(&self, reg: *mut u8, start: u32, bbs: u32) {
        for i in 0..bbs {
            let pos = (start.wrapping_add(i) & (self.cfg.wqe_cnt - 1)) as usize * WQEBB;
            // SAFETY: pos is a masked block start in the ring (64 readable,
            // 64-aligned bytes); i * 64 < ds * 16 <= bf_size (use_blueflame),
            // so the destination block lies in the half at reg, which is
            // 8-aligned and writable (new()'s contract with blueflame).
            unsafe {
                barrier::mmio_copy64(reg.add(i as usize * WQEBB), self.buf.as_ptr().add(pos))
            };
        }
    }

    /// Retires the WQE a send CQE names by its `wqe_counter`, and every
    /// WQE before it (see [`SendRecords::complete`]).
    pub fn complete(&self, wqe_counter: u16) -> Option<SendRetired> {
        self.records.complete(wqe_counter)
    }
}

fn check_layout(
    buf: NonNull<u8>,
    len: usize,
    dbrec: NonNull<u32>,
    bf_reg: NonNull<u8>,
    cfg: &SqConfig,
) -> Result<(), LayoutError> {
    if !cfg.wqe_cnt.is_power_of_two() || cfg.wqe_cnt > 1 << 15 {
        return Err(LayoutError::BadCount { count: cfg.wqe_cnt });
    }
    if cfg.max_wr == 0 || cfg.max_wr > cfg.wqe_cnt {
        return Err(LayoutError::BadCount { count: cfg.max_wr });
    }
    let need = cfg.wqe_cnt as usize * WQEBB;
    if len < need {
        return Err(LayoutError::TooShort { need, len });
    }
    if buf.as_ptr() as usize % WQEBB != 0 {
        return Err(LayoutError::Misaligned { what: "SQ buffer" });
    }
    if dbrec.as_ptr() as usize % 4 != 0 {
        return Err(LayoutError::Misaligned {
            what: "doorbell record",
        });
    }
    if bf_reg.as_ptr() as usize % 8 != 0 {
        return Err(LayoutError::Misaligned {
            what: "BlueFlame register",
        });
    }
    if cfg.bf_size % WQEBB as u32 != 0 || (cfg.blueflame && cfg.bf_size == 0) {
        return Err(LayoutError::BadBlueFlameSize { size: cfg.bf_size });
    }
    Ok(())
}

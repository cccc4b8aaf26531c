//! The extended-CQ style reader (`ibv_start_poll` / `ibv_next_poll` /
//! `ibv_wc_read_*`): a closure sees each completion as a [`CqEntry`] and
//! reads only the members it wants. On rxe an entry is the kernel's
//! `struct ib_uverbs_wc`, copied out of its slot and decoded member by
//! member on demand; on mlx5 the poller decodes each CQE as
//! [`Cq::poll`] does (the CQE must be matched to its queue either way).

use super::Cq;
use crate::provider::WcView;
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};

/// One completion, read member by member ([`Cq::poll_each`]).
#[derive(Debug)]
pub struct CqEntry<'a>(WcView<'a>);

macro_rules! read {
    ($(#[$doc:meta] $name:ident: $t:ty;)*) => {
        $(
            #[$doc]
            #[inline(always)]
            pub fn $name(&self) -> $t {
                match self.0 {
                    WcView::Slot(r) => r.$name(),
                    WcView::Decoded(w) => w.$name,
                }
            }
        )*
    };
}

impl CqEntry<'_> {
    read! {
        /// The work request's id (`ibv_wc.wr_id`).
        wr_id: u64;
        /// How it ended.
        status: WcStatus;
        /// What completed.
        opcode: WcOpcode;
        /// The provider's syndrome, for an error.
        vendor_err: u32;
        /// Bytes received, read or returned (`ibv_wc_read_byte_len`).
        byte_len: u32;
        /// The local QP number (`ibv_wc_read_qp_num`).
        qp_num: u32;
        /// The sender's QP number (`ibv_wc_read_src_qp`).
        src_qp: u32;
        /// The flags (`ibv_wc_read_wc_flags`).
        flags: WcFlags;
        /// The P_Key index.
        pkey_index: u16;
        /// The source LID (`ibv_wc_read_slid`).
        slid: u16;
        /// The service level (`ibv_wc_read_sl`).
        sl: u8;
        /// The path bits (`ibv_wc_read_dlid_path_bits`).
        dlid_path_bits: u8;
    }

    /// The immediate, host order (`ibv_wc_read_imm_data`).
    #[inline(always)]
    pub fn imm_data(&self) -> Option<u32> {
        match self.0 {
            WcView::Slot(r) => r.imm_data(),
            WcView::Decoded(w) => w.imm_data(),
        }
    }

    /// The invalidated rkey (`ibv_wc_read_invalidated_rkey`).
    #[inline(always)]
    pub fn invalidated_rkey(&self) -> Option<u32> {
        match self.0 {
            WcView::Slot(r) => r.invalidated_rkey(),
            WcView::Decoded(w) => w.invalidated_rkey(),
        }
    }

    /// Every member, as [`Cq::poll`] gives them.
    pub fn wc(&self) -> Wc {
        match self.0 {
            WcView::Slot(r) => r.wc(),
            WcView::Decoded(w) => *w,
        }
    }
}

impl Cq {
    /// Hands up to `max` completions to `f`, oldest first, and returns
    /// how many: the extended-CQ reader, where `f` reads only the members
    /// it needs. Never blocks and makes no system call. The completions
    /// are consumed whether or not `f` reads them.
    pub fn poll_each(&mut self, max: usize, mut f: impl FnMut(&CqEntry<'_>)) -> usize {
        self.ring.each(max, |v| f(&CqEntry(v)))
    }
}

//! Memory windows (`ALLOC_MW`, `DEALLOC_MW`, and binds as work requests).
//!
//! What a program needs to know is on [`Mw`].

use crate::cmd::mw::{self, MwHandle};
use crate::error::{Error, Result};
use crate::mr::{Access, Mr, MrMemory};
use crate::pd::{Pd, PdInner};
use crate::qp::{Qp, SendOp, SendWr};
use std::sync::Arc;
use uverbs_abi::verbs::IbMwType;

/// The two kinds of memory window (`enum ibv_mw_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MwType {
    /// Bound by `ibv_bind_mw`, usable by every QP of the PD.
    Type1,
    /// Bound by a work request, usable by the QP it was bound on;
    /// invalidated by a local invalidate or a peer's SEND with invalidate.
    Type2,
}

/// A memory window.
///
/// A window gives peers remote access to a range of an MR under an rkey of
/// its own, which can be moved, narrowed and revoked without touching the
/// MR:
/// - a **type 1** window ([`MwType::Type1`]) is bound with
///   [`Qp::bind_mw`] on any QP of its PD (`ibv_bind_mw`, which rdma-core
///   too posts as a `BIND_MW` work request) and serves every QP of the PD;
///   it cannot be invalidated, only rebound;
/// - a **type 2** window ([`MwType::Type2`]) is bound with the same call,
///   and then serves only the QP it was bound on (the one peers' requests
///   arrive at); it is revoked by a local invalidate
///   ([`SendOp::LocalInv`]) or by a peer's SEND
///   with invalidate, after which a peer's access through its rkey fails
///   with `REM_ACCESS_ERR`.
///
/// The MR must have been registered with [`Access::MW_BIND`], and with
/// [`Access::LOCAL_WRITE`] if the window grants remote write or atomics.
///
/// # Warning: rxe does not confine peers to the window
/// rxe (Linux 6.12, `check_rkey` in `rxe_resp.c`) resolves a window's rkey
/// to its MR and checks an access against the MR's range, not the
/// window's: a peer holding the rkey of a window over part of an MR can
/// reach all of the MR, with the window's access rights. Grant a window
/// over an MR only to a peer that may see the whole MR (the VM test
/// `rxe_does_not_bound_accesses_by_the_window` pins this). Memory safety
/// is unaffected: it is still the MR's own, registered memory.
///
/// # Why the MR outlives the window
/// A bound window lets peers reach the MR's memory, so that memory must
/// not return to the process while a window may still open onto it. The
/// window keeps a reference to every MR [`Qp::bind_mw`] bound it to, and
/// lets go of them only after `DEALLOC_MW` has succeeded (a failed one
/// leaks them, as a failed `DEREG_MR` leaks its buffer). The kernel keeps
/// the same rule on its side: rxe refuses `DEREG_MR` of an MR with windows
/// bound to it, and a refused deregistration leaks the buffer — so even a
/// bind posted by hand as [`SendOp::BindMw`] with a
/// raw lkey cannot hand the memory back early.
///
/// Nothing in the API borrows the MR for the window's sake, so nothing
/// can be misused by dropping it early: dropping the [`Mr`] only drops one
/// of its references.
pub struct Mw {
    /// Dropped first: DEALLOC_MW, which also releases the MRs it keeps.
    handle: MwHandle,
    _pd: Arc<PdInner>,
    mw_type: MwType,
    rkey: u32,
    /// The MRs the handle keeps, by address, so that each is kept once.
    kept: Vec<usize>,
}

impl std::fmt::Debug for Mw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mw")
            .field("type", &self.mw_type)
            .field("rkey", &format_args!("{:#x}", self.rkey))
            .finish()
    }
}

/// The access a window may grant (`RXE_ACCESS_SUPPORTED_MW` less
/// zero-based, which rverbs does not offer for windows).
const MW_ACCESS: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// `ibv_inc_rkey`: the same window index, the next 8-bit key.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xffff_ff00) | (rkey.wrapping_add(1) & 0xff)
}

impl Pd {
    /// Allocates a memory window (`ALLOC_MW`).
    pub fn alloc_mw(&self, mw_type: MwType) -> Result<Mw> {
        let t = match mw_type {
            MwType::Type1 => IbMwType::TYPE_1,
            MwType::Type2 => IbMwType::TYPE_2,
        };
        let pd = &self.inner;
        let (handle, rkey) = mw::alloc(&pd.ctx.dev, pd.handle.raw(), t.0)?;
        Ok(Mw {
            handle,
            _pd: pd.clone(),
            mw_type,
            rkey,
            kept: Vec::new(),
        })
    }
}

impl Mw {
    /// The window's rkey: what peers address it by once bound. A bind
    /// moves it to the next key ([`Qp::bind_mw`]).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Type 1 or type 2.
    pub fn mw_type(&self) -> MwType {
        self.mw_type
    }

    /// Deallocates the window now (`DEALLOC_MW`) and lets go of the MRs it
    /// kept. If the kernel refuses, the window is handed back with the
    /// error, still allocated, to try again (as `ibv_dealloc_mw` leaves a C
    /// program its window); dropping it tries once more, and leaks the
    /// MRs if the kernel still refuses.
    // The window travels back by value on the (cold) refusal: that is what
    // lets the caller try again.
    #[allow(clippy::result_large_err)]
    pub fn dealloc(mut self) -> std::result::Result<(), (Mw, Error)> {
        match self.handle.try_close() {
            Ok(()) => Ok(()),
            Err(e) => Err((self, e)),
        }
    }

    /// Keeps `mr` until after DEALLOC_MW (once per MR).
    fn keep<B: MrMemory>(&mut self, mr: &Mr<B>) {
        let addr = Arc::as_ptr(&mr.inner) as usize;
        if !self.kept.contains(&addr) {
            self.kept.push(addr);
            // The index (rkey >> 8) stays the window's across binds.
            self.handle.keep(mr.held_by_window(self.rkey >> 8));
        }
    }
}

impl Qp {
    /// Binds `mw` to `len` bytes of `mr` from `offset`, granting `access`
    /// (remote read, write, atomic), by posting a `BIND_MW` work request
    /// with id `wr_id` (signaled), as `ibv_bind_mw` does for a type 1
    /// window and `ibv_wr_bind_mw` for a type 2 one. Returns the window's
    /// new rkey, which [`Mw::rkey`] reports from now on; the bind is done
    /// when its completion ([`WcOpcode::BIND_MW`](crate::wc::WcOpcode::BIND_MW))
    /// is polled. If that completion is an error, the window keeps its old
    /// rkey in the kernel (as with rdma-core, the caller knows).
    ///
    /// A type 2 window must be bound on the QP the peer's requests arrive
    /// at, and may be bound only while free (new, or invalidated).
    pub fn bind_mw<B: MrMemory>(
        &mut self,
        wr_id: u64,
        mw: &mut Mw,
        mr: &Mr<B>,
        offset: usize,
        len: usize,
        access: Access,
    ) -> Result<u32> {
        if !MW_ACCESS.contains(access) {
            return Err(Error::invalid(format!(
                "BIND_MW: a window grants remote read, write or atomic access only, not {:?}",
                access.difference(MW_ACCESS)
            )));
        }
        if !mr.access().contains(Access::MW_BIND) {
            return Err(Error::invalid(
                "BIND_MW: the MR was not registered with Access::MW_BIND",
            ));
        }
        if !matches!(offset.checked_add(len), Some(end) if end <= mr.len()) {
            return Err(Error::invalid(format!(
                "BIND_MW: {len} bytes at offset {offset} leave the MR's {} bytes",
                mr.len()
            )));
        }
        let ctx = self.control().ctx.clone();
        let same = |a: &Arc<crate::context::ContextInner>| Arc::ptr_eq(a, &ctx);
        if !same(&mw._pd.ctx) || !same(&mr.inner.pd().ctx) {
            return Err(Error::invalid(
                "BIND_MW: the window, the MR and the QP must be of one context",
            ));
        }
        // Cannot overflow for a registered MR (its last byte has an IOVA,
        // and offset <= len), but an empty bind at the very end could.
        let addr = mr.iova().checked_add(offset as u64).ok_or_else(|| {
            Error::invalid(format!(
                "BIND_MW: offset {offset} from IOVA {:#x} leaves the 64-bit address space",
                mr.iova()
            ))
        })?;
        let new_rkey = inc_rkey(mw.rkey);
        let bind = rverbs_types::MwBind {
            mw_rkey: mw.rkey,
            new_rkey,
            mr_lkey: mr.lkey(),
            addr,
            length: len as u64,
            access: access.bits(),
        };
        // Kept before the request can reach the device (see the module
        // docs): from the post on, the window may open onto the MR.
        mw.keep(mr);
        self.post_send(&[SendWr::new(wr_id, SendOp::BindMw(bind), &[])])?;
        mw.rkey = new_rkey;
        Ok(new_rkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_rkey_keeps_the_index_and_wraps_the_key() {
        assert_eq!(inc_rkey(0x1234_5601), 0x1234_5602);
        assert_eq!(inc_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(inc_rkey(0xffff_ffff), 0xffff_ff00);
    }
}

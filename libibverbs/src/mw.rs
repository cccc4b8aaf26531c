//! Memory windows: `ops.alloc_mw`, `ops.dealloc_mw`, `ops.bind_mw` (what
//! `verbs.h`'s inline `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`
//! call), over rverbs' [`Mw`]. Binding one is posting a send: an
//! `IBV_WR_BIND_MW` request for a type 2 window (`send.rs`), or
//! `ibv_bind_mw` for a type 1 (`bind.rs`).
//!
//! The C struct's `rkey` is the window's rkey as C sees it (`bind.rs` says
//! how it moves); it is in an `UnsafeCell` for that. The rverbs window owns
//! the kernel object and the MRs it was bound to, until `DEALLOC_MW`
//! succeeds.

use crate::abi::*;
use crate::convert::mw_type;
use crate::guard;
use crate::obj::{destroy, CObject, Held};
use crate::pd::PdBox;
use crate::{errno_of, lock, null_errno};
use rverbs::Mw;
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Mutex;

#[repr(C)]
struct MwBox {
    /// In an UnsafeCell: `ibv_bind_mw` moves `rkey` while C holds the
    /// pointer.
    c: UnsafeCell<IbvMw>,
    /// The window while it is allocated: taken out only for `DEALLOC_MW`,
    /// and put back if the kernel refuses.
    mw: Mutex<Option<Mw>>,
    _pd: Held<PdBox>,
}

// SAFETY: repr(C) with the ibv_mw (in its UnsafeCell) first; handed out
// only by alloc_mw.
unsafe impl CObject for MwBox {
    type C = IbvMw;
}

/// `ops.alloc_mw`: NULL + errno on failure.
pub(crate) unsafe extern "C" fn alloc_mw(p: *mut IbvPd, t: c_int) -> *mut IbvMw {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { PdBox::of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        let Some(kind) = mw_type(t) else {
            return null_errno(libc::EINVAL);
        };
        let mw = match pd.pd.alloc_mw(kind) {
            Ok(m) => m,
            Err(e) => return null_errno(errno_of(&e)),
        };
        MwBox {
            c: UnsafeCell::new(IbvMw {
                context: pd.c.context,
                pd: p,
                rkey: mw.rkey(),
                handle: 0,
                mw_type: t,
            }),
            mw: Mutex::new(Some(mw)),
            _pd: Held::new(pd),
        }
        .into_c()
    })
}

/// `DEALLOC_MW` of the window in `slot`: `Ok` once the kernel has agreed,
/// else its errno, the window back in `slot` to try again.
fn dealloc(slot: &mut Option<Mw>) -> Result<(), c_int> {
    let mw = slot.take().ok_or(libc::EINVAL)?;
    mw.dealloc().map_err(|(mw, e)| {
        *slot = Some(mw);
        errno_of(&e)
    })
}

/// `ops.dealloc_mw`: 0 once the kernel has deallocated the window (the
/// MRs it was bound to are free to go then); else its errno, and the
/// window stays, to be deallocated later, as with rdma-core.
pub(crate) unsafe extern "C" fn dealloc_mw(m: *mut IbvMw) -> c_int {
    guard::errno(|| {
        // SAFETY: a window of ours (C contract), deallocated once it is gone.
        unsafe { destroy(m, |b: &MwBox| dealloc(&mut lock(&b.mw))) }
    })
}

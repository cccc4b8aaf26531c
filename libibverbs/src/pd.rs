//! Protection domains: `ibv_alloc_pd`, `ibv_dealloc_pd`.

use crate::abi::*;
use crate::context::CtxBox;
use crate::guard;
use crate::obj::{destroy, CObject, Parent, Users};
use crate::{errno_of, export, null_errno};
use rverbs::Pd;
use std::ffi::c_int;

#[repr(C)]
pub(crate) struct PdBox {
    pub(crate) c: IbvPd,
    pub(crate) pd: Pd,
    /// MRs, QPs, AHs, SRQs and windows on this PD (the kernel refuses
    /// DEALLOC_PD while any exists).
    users: Users,
}

// SAFETY: repr(C) with the ibv_pd first; handed out only by alloc_pd.
unsafe impl CObject for PdBox {
    type C = IbvPd;
}

impl Parent for PdBox {
    fn users(&self) -> &Users {
        &self.users
    }
}

unsafe extern "C" fn alloc_pd(c: *mut IbvContext) -> *mut IbvPd {
    guard::null(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { CtxBox::of(c) }) else {
            return null_errno(libc::EINVAL);
        };
        match b.ctx.alloc_pd() {
            Ok(pd) => PdBox {
                c: IbvPd {
                    context: c,
                    handle: 0,
                },
                pd,
                users: Users::default(),
            }
            .into_c(),
            Err(e) => null_errno(errno_of(&e)),
        }
    })
}
export!("ibv_alloc_pd" = alloc_pd);

/// `ibv_dealloc_pd`: `EBUSY` while any MR (a refused one too), QP, AH,
/// SRQ or window of ours is on it, which is when the kernel refuses; else
/// the PD goes (`DEALLOC_PD` once rverbs' last reference does: a refusal
/// there cannot be reported, as rverbs destroys by `Drop`).
unsafe extern "C" fn dealloc_pd(p: *mut IbvPd) -> c_int {
    guard::errno(|| {
        // SAFETY: a PD of ours (C contract), deallocated once.
        unsafe { destroy(p, |b: &PdBox| b.users.none()) }
    })
}
export!("ibv_dealloc_pd" = dealloc_pd);

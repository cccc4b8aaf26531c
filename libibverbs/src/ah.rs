//! Address handles for UD sends: `ibv_create_ah`, `ibv_destroy_ah`,
//! `ibv_init_ah_from_wc`, `ibv_create_ah_from_wc`, over rverbs' [`Ah`],
//! `Context::init_ah_from_wc` and `Pd::create_ah`. UD sends name an AH in
//! `wr.ud.ah` (or `ibv_wr_set_ud_addr`); the data path finds its box.

use crate::abi::*;
use crate::context::CtxBox;
use crate::convert::{ah_attr, c_ah_attr, read_ah_attr, wc};
use crate::guard;
use crate::obj::{destroy, CObject, Held};
use crate::pd::PdBox;
use crate::{errno_of, export, minus1_errno, null_errno};
use rverbs::{Ah, AhAttr, NetworkHeader};
use std::ffi::c_int;

#[repr(C)]
pub(crate) struct AhBox {
    c: IbvAh,
    pub(crate) ah: Ah,
    _pd: Held<PdBox>,
}

// SAFETY: repr(C) with the ibv_ah first; handed out only by make_ah.
unsafe impl CObject for AhBox {
    type C = IbvAh;
}

/// A new AH on the PD `p` (whose box is `pd`) to `attr`.
fn make_ah(p: *mut IbvPd, pd: &PdBox, attr: &AhAttr) -> *mut IbvAh {
    let ah = match pd.pd.create_ah(attr) {
        Ok(a) => a,
        Err(e) => return null_errno(errno_of(&e)),
    };
    AhBox {
        c: IbvAh {
            context: pd.c.context,
            pd: p,
            handle: 0,
        },
        ah,
        _pd: Held::new(pd),
    }
    .into_c()
}

/// `ibv_create_ah`: NULL + errno on failure.
unsafe extern "C" fn create_ah(p: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { PdBox::of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        if attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a readable attr (C contract, non-NULL).
        let a = unsafe { read_ah_attr(attr) };
        make_ah(p, pd, &ah_attr(&a))
    })
}
export!("ibv_create_ah" = create_ah);

/// `ibv_destroy_ah`: 0 or an errno. rverbs' AH issues `DESTROY_AH` when
/// its last holder drops it (a QP keeps the AH of a posted UD send until
/// that send is done) and cannot report a refusal; rxe never refuses it.
unsafe extern "C" fn destroy_ah(a: *mut IbvAh) -> c_int {
    guard::errno(|| {
        // SAFETY: an AH of ours (C contract), destroyed once and no longer
        // named in sends.
        unsafe { destroy(a, |_: &AhBox| Ok(())) }
    })
}
export!("ibv_destroy_ah" = destroy_ah);

/// The address attributes back to a UD receive's sender, or the errno.
///
/// # Safety
/// `wc` is a readable `ibv_wc`; `grh` points to 40 readable bytes when
/// the completion has `IBV_WC_GRH` (C contract).
unsafe fn init_attr(
    c: *mut IbvContext,
    port: u8,
    w: *const IbvWc,
    grh: *const u8,
) -> Result<AhAttr, c_int> {
    // SAFETY: an open context of ours and a readable wc (C contract).
    let (Some(ctx), Some(w)) = (unsafe { CtxBox::of(c) }, unsafe { w.as_ref() }) else {
        return Err(libc::EINVAL);
    };
    let mut header = [0u8; GRH_LEN];
    if w.wc_flags & WC_GRH != 0 {
        if grh.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: 40 readable bytes (C contract: the receive's buffer
        // begins with the GRH); read unaligned, as a byte copy.
        header = unsafe { grh.cast::<[u8; GRH_LEN]>().read_unaligned() };
    }
    let mut attr = ctx
        .ctx
        .init_ah_from_wc(port, &wc(w), &header)
        .map_err(|e| errno_of(&e))?;
    // libibverbs (rdma-core 44's verbs.c) replies with the hop limit the
    // packet arrived with (IPv6 hop limit, IPv4 TTL); the Rust API uses
    // 0xff.
    if let (Some(g), Some(h)) = (attr.grh.as_mut(), NetworkHeader::parse(&header)) {
        g.hop_limit = match h {
            NetworkHeader::Ipv6 { hop_limit, .. } => hop_limit,
            NetworkHeader::Ipv4 { ttl, .. } => ttl,
        };
    }
    Ok(attr)
}

/// `ibv_init_ah_from_wc`: 0, or -1 with errno (as rdma-core).
unsafe extern "C" fn init_ah_from_wc(
    c: *mut IbvContext,
    port: u8,
    wc: *mut IbvWc,
    grh: *mut u8,
    out: *mut IbvAhAttr,
) -> c_int {
    guard::minus1(|| {
        if out.is_null() {
            return minus1_errno(libc::EINVAL);
        }
        // SAFETY: forwarded C contract.
        match unsafe { init_attr(c, port, wc, grh) } {
            Ok(a) => {
                // SAFETY: out is a writable ibv_ah_attr (C contract, non-NULL).
                unsafe { out.write(c_ah_attr(&a)) };
                0
            }
            Err(e) => minus1_errno(e),
        }
    })
}
export!("ibv_init_ah_from_wc" = init_ah_from_wc);

/// `ibv_create_ah_from_wc`: NULL + errno on failure.
unsafe extern "C" fn create_ah_from_wc(
    p: *mut IbvPd,
    wc: *mut IbvWc,
    grh: *mut u8,
    port: u8,
) -> *mut IbvAh {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { PdBox::of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        // SAFETY: forwarded C contract.
        match unsafe { init_attr(pd.c.context, port, wc, grh) } {
            Ok(a) => make_ah(p, pd, &a),
            Err(e) => null_errno(e),
        }
    })
}
export!("ibv_create_ah_from_wc" = create_ah_from_wc);

//! Address handles for UD sends: `ibv_create_ah`, `ibv_destroy_ah`,
//! `ibv_init_ah_from_wc`, `ibv_create_ah_from_wc`, over rverbs' [`Ah`],
//! `Context::init_ah_from_wc` and `Pd::create_ah`. UD sends name an AH in
//! `wr.ud.ah`; [`crate::post`] reads it through [`ah_of`].

use crate::abi::*;
use crate::device::ctx_of;
use crate::guard;
use crate::verbs::{pd_of, PdBox};
use crate::{errno_of, export, member, null_errno, ret_errno, set_errno};
use rverbs::ah::NetworkHeader;
use rverbs::{Ah, AhAttr, Grh, Wc, WcFlags};
use std::ffi::c_int;
use std::sync::atomic::Ordering;

#[repr(C)]
pub(crate) struct AhBox {
    pub(crate) c: IbvAh,
    pub(crate) ah: Ah,
    pd: *const PdBox,
}

/// The box behind a `struct ibv_ah *` of ours (NULL: `None`).
pub(crate) unsafe fn ah_of<'a>(a: *mut IbvAh) -> Option<&'a AhBox> {
    // SAFETY: AHs come only from create_ah (C contract: not destroyed
    // while a send names them); `c` is the first field.
    unsafe { a.cast::<AhBox>().as_ref() }
}

/// A caller's `struct ibv_ah_attr`, member by member: `grh` only when
/// `is_global` says it is there (a caller need not initialise it
/// otherwise); zero if not.
///
/// # Safety
/// `p` points to a readable `ibv_ah_attr` whose members but `grh` are
/// initialised, and `grh` too when `is_global` is set (C contract).
pub(crate) unsafe fn read_ah_attr(p: *const IbvAhAttr) -> IbvAhAttr {
    // SAFETY: the caller's contract: these are always initialised.
    let mut a = unsafe {
        IbvAhAttr {
            grh: IbvGlobalRoute::default(),
            dlid: member!(p, dlid),
            sl: member!(p, sl),
            src_path_bits: member!(p, src_path_bits),
            static_rate: member!(p, static_rate),
            is_global: member!(p, is_global),
            port_num: member!(p, port_num),
        }
    };
    if a.is_global != 0 {
        // SAFETY: is_global says the caller set grh.
        a.grh = unsafe { member!(p, grh) };
    }
    a
}

/// `struct ibv_ah_attr` as rverbs' [`AhAttr`].
pub(crate) fn ah_attr(h: &IbvAhAttr) -> AhAttr {
    AhAttr {
        dlid: h.dlid,
        sl: h.sl,
        src_path_bits: h.src_path_bits,
        static_rate: h.static_rate,
        port_num: h.port_num,
        grh: (h.is_global != 0).then_some(Grh {
            dgid: h.grh.dgid.raw,
            flow_label: h.grh.flow_label,
            sgid_index: h.grh.sgid_index,
            hop_limit: h.grh.hop_limit,
            traffic_class: h.grh.traffic_class,
        }),
    }
}

/// rverbs' [`AhAttr`] as `struct ibv_ah_attr`.
fn c_ah_attr(a: &AhAttr) -> IbvAhAttr {
    let mut c = IbvAhAttr {
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        port_num: a.port_num,
        ..IbvAhAttr::default()
    };
    if let Some(g) = &a.grh {
        c.is_global = 1;
        c.grh = IbvGlobalRoute {
            dgid: IbvGid { raw: g.dgid },
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        };
    }
    c
}

unsafe fn make_ah(p: *mut IbvPd, pd: &PdBox, attr: &AhAttr) -> *mut IbvAh {
    let ah = match pd.pd.create_ah(attr) {
        Ok(a) => a,
        Err(e) => return null_errno(errno_of(&e)),
    };
    pd.users.fetch_add(1, Ordering::AcqRel);
    Box::into_raw(Box::new(AhBox {
        c: IbvAh {
            context: pd.c.context,
            pd: p,
            handle: 0,
        },
        ah,
        pd,
    }))
    .cast()
}

/// `ibv_create_ah`: NULL + errno on failure.
unsafe extern "C" fn create_ah(p: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { pd_of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        if attr.is_null() {
            return null_errno(libc::EINVAL);
        }
        // SAFETY: a readable attr (C contract, non-NULL).
        let a = unsafe { read_ah_attr(attr) };
        // SAFETY: p is pd's C struct (forwarded).
        unsafe { make_ah(p, pd, &ah_attr(&a)) }
    })
}
export!("ibv_create_ah" = create_ah);

/// `ibv_destroy_ah`: 0 or an errno. rverbs' AH issues `DESTROY_AH` when
/// its last holder drops it (a QP keeps the AH of a posted UD send until
/// that send is done) and cannot report a refusal; rxe never refuses it.
unsafe extern "C" fn destroy_ah(a: *mut IbvAh) -> c_int {
    guard::errno(|| {
        // SAFETY: an AH of ours (C contract).
        let Some(b) = (unsafe { ah_of(a) }) else {
            return ret_errno(libc::EINVAL);
        };
        // SAFETY: the PD outlives its AHs (dealloc_pd refuses while users > 0).
        unsafe { (*b.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: made by Box::into_raw in make_ah; the C caller destroys it
        // once and no longer names it in sends.
        drop(unsafe { Box::from_raw(a.cast::<AhBox>()) });
        0
    })
}
export!("ibv_destroy_ah" = destroy_ah);

/// The parts of a C completion `init_ah_from_wc` reads, as rverbs' [`Wc`].
fn rust_wc(w: &IbvWc) -> Wc {
    Wc {
        wr_id: w.wr_id,
        byte_len: w.byte_len,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        flags: WcFlags::from_bits_retain(w.wc_flags),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
        ..Wc::default()
    }
}

/// The address attributes back to a UD receive's sender, or the errno.
///
/// # Safety
/// `wc` is a readable `ibv_wc`; `grh` points to 40 readable bytes when
/// the completion has `IBV_WC_GRH` (C contract).
unsafe fn init_attr(
    c: *mut IbvContext,
    port: u8,
    wc: *const IbvWc,
    grh: *const u8,
) -> Result<AhAttr, c_int> {
    // SAFETY: an open context of ours and a readable wc (C contract).
    let (Some(ctx), Some(w)) = (unsafe { ctx_of(c) }, unsafe { wc.as_ref() }) else {
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
        .init_ah_from_wc(port, &rust_wc(w), &header)
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
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: forwarded C contract.
        match unsafe { init_attr(c, port, wc, grh) } {
            Ok(a) => {
                // SAFETY: out is a writable ibv_ah_attr (C contract, non-NULL).
                unsafe { out.write(c_ah_attr(&a)) };
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
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
        let Some(pd) = (unsafe { pd_of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        // SAFETY: forwarded C contract.
        match unsafe { init_attr(pd.c.context, port, wc, grh) } {
            // SAFETY: p is pd's C struct.
            Ok(a) => unsafe { make_ah(p, pd, &a) },
            Err(e) => null_errno(e),
        }
    })
}
export!("ibv_create_ah_from_wc" = create_ah_from_wc);

#[cfg(test)]
mod tests {
    use super::*;

    /// An AH attribute without a GRH: the caller need not set `grh`, and
    /// it is not read (Miri reports a read of an unset member); with
    /// `is_global`, it is.
    #[test]
    fn grh_is_read_only_when_is_global_says_so() {
        for global in [0u8, 1] {
            let a = crate::Partial::<IbvAhAttr>::new(std::mem::size_of::<IbvAhAttr>());
            let p = a.ptr();
            let grh = IbvGlobalRoute {
                dgid: IbvGid { raw: [7; 16] },
                sgid_index: 1,
                ..IbvGlobalRoute::default()
            };
            // SAFETY: members of the live allocation.
            unsafe {
                crate::put!(
                    p,
                    dlid = 3,
                    sl = 0,
                    src_path_bits = 0,
                    static_rate = 0,
                    is_global = global,
                    port_num = 1
                );
                if global != 0 {
                    crate::put!(p, grh = grh);
                }
            }
            // SAFETY: the members but grh are set, and grh when global.
            let got = ah_attr(&unsafe { read_ah_attr(p) });
            assert_eq!((got.dlid, got.port_num), (3, 1));
            assert_eq!(got.grh.map(|g| g.dgid), (global != 0).then_some([7; 16]));
        }
    }
}

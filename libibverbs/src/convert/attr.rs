//! Attributes in C's form and rverbs': address vectors (`struct
//! ibv_ah_attr`), QP capabilities, types and states, the attributes of
//! `ibv_modify_qp` with their mask, access flags, window types, SRQ
//! attributes.
//!
//! What C hands over is read member by member ([`read_ah_attr`],
//! [`copy_masked`]): only the members the caller's mask or flags name,
//! never a reference to a struct the caller may have left partly unset.

use crate::abi::*;
use crate::member;
use rverbs::{Access, AhAttr, Grh, Mtu, MwType, QpAttr, QpCaps, QpState, QpType, SrqAttr};
use std::ffi::{c_int, c_uint};

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
pub(crate) fn c_ah_attr(a: &AhAttr) -> IbvAhAttr {
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

/// `struct ibv_qp_cap` as rverbs' [`QpCaps`].
pub(crate) fn qp_caps(c: &IbvQpCap) -> QpCaps {
    QpCaps {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
    }
}

/// rverbs' [`QpCaps`] (what a QP was granted) as `struct ibv_qp_cap`.
pub(crate) fn c_qp_cap(g: &QpCaps) -> IbvQpCap {
    IbvQpCap {
        max_send_wr: g.max_send_wr,
        max_recv_wr: g.max_recv_wr,
        max_send_sge: g.max_send_sge,
        max_recv_sge: g.max_recv_sge,
        max_inline_data: g.max_inline_data,
    }
}

/// The QP types this library creates (`enum ibv_qp_type`: RC, UC, UD).
pub(crate) fn qp_type(t: c_int) -> Option<QpType> {
    match t {
        2 => Some(QpType::Rc),
        3 => Some(QpType::Uc),
        4 => Some(QpType::Ud),
        _ => None,
    }
}

/// `enum ibv_qp_state` as rverbs' [`QpState`]; `None` for a state C has
/// no name for (the other way is [`QpState::raw`]).
fn state_of(s: c_int) -> Option<QpState> {
    Some(match s {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        4 => QpState::Sqd,
        5 => QpState::Sqe,
        6 => QpState::Err,
        _ => return None,
    })
}

/// The `ibv_qp_attr_mask` bits this library translates; any other bit
/// (alternate path, migration, rate limit, resizing) is refused.
const MODIFY_KNOWN: c_int = {
    use qp_mask::*;
    STATE
        | CUR_STATE
        | EN_SQD_ASYNC_NOTIFY
        | ACCESS_FLAGS
        | PKEY_INDEX
        | PORT
        | QKEY
        | AV
        | PATH_MTU
        | TIMEOUT
        | RETRY_CNT
        | RNR_RETRY
        | RQ_PSN
        | MAX_QP_RD_ATOMIC
        | MIN_RNR_TIMER
        | SQ_PSN
        | MAX_DEST_RD_ATOMIC
        | DEST_QPN
};

/// `struct ibv_qp_attr` + mask as rverbs' `QpAttr`: `EOPNOTSUPP` for a
/// mask bit not translated, `EINVAL` for a value rverbs has no name for.
pub(crate) fn qp_attr(a: &IbvQpAttr, mask: c_int) -> Result<QpAttr, c_int> {
    use qp_mask::*;
    if mask & !MODIFY_KNOWN != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let has = |bit: c_int| mask & bit != 0;
    let mut r = QpAttr::default();
    if has(STATE) {
        r.state = Some(state_of(a.qp_state).ok_or(libc::EINVAL)?);
    }
    if has(CUR_STATE) {
        r.cur_state = Some(state_of(a.cur_qp_state).ok_or(libc::EINVAL)?);
    }
    r.en_sqd_async_notify = has(EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify != 0;
    if has(ACCESS_FLAGS) {
        r.access = Some(Access::from_bits(a.qp_access_flags).ok_or(libc::EINVAL)?);
    }
    r.pkey_index = has(PKEY_INDEX).then_some(a.pkey_index);
    r.port = has(PORT).then_some(a.port_num);
    r.qkey = has(QKEY).then_some(a.qkey);
    r.av = has(AV).then(|| ah_attr(&a.ah_attr));
    if has(PATH_MTU) {
        let m = u8::try_from(a.path_mtu).map_err(|_| libc::EINVAL)?;
        r.path_mtu = Some(Mtu::from_raw(m).ok_or(libc::EINVAL)?);
    }
    r.timeout = has(TIMEOUT).then_some(a.timeout);
    r.retry_cnt = has(RETRY_CNT).then_some(a.retry_cnt);
    r.rnr_retry = has(RNR_RETRY).then_some(a.rnr_retry);
    r.rq_psn = has(RQ_PSN).then_some(a.rq_psn);
    r.max_rd_atomic = has(MAX_QP_RD_ATOMIC).then_some(a.max_rd_atomic);
    r.min_rnr_timer = has(MIN_RNR_TIMER).then_some(a.min_rnr_timer);
    r.sq_psn = has(SQ_PSN).then_some(a.sq_psn);
    r.max_dest_rd_atomic = has(MAX_DEST_RD_ATOMIC).then_some(a.max_dest_rd_atomic);
    r.dest_qpn = has(DEST_QPN).then_some(a.dest_qp_num);
    Ok(r)
}

/// Copies into `dst` the members of the `ibv_qp_attr` at `src` that `mask`
/// names, and only those: a caller need not initialise the others (nor
/// the address vector's `grh` unless its `is_global` is set), so they are
/// never read.
///
/// # Safety
/// `src` points to a readable `ibv_qp_attr` whose members `mask` names are
/// initialised (C contract).
pub(crate) unsafe fn copy_masked(src: *const IbvQpAttr, mask: c_int, dst: &mut IbvQpAttr) {
    use qp_mask::*;
    macro_rules! take {
        ($($bit:ident => $f:ident),* $(,)?) => {
            $(if mask & $bit != 0 {
                dst.$f = member!(src, $f);
            })*
        };
    }
    // SAFETY: the caller's contract: mask names every member read.
    unsafe {
        take!(
            STATE => qp_state, CUR_STATE => cur_qp_state,
            EN_SQD_ASYNC_NOTIFY => en_sqd_async_notify, ACCESS_FLAGS => qp_access_flags,
            PKEY_INDEX => pkey_index, PORT => port_num, QKEY => qkey, PATH_MTU => path_mtu,
            TIMEOUT => timeout, RETRY_CNT => retry_cnt, RNR_RETRY => rnr_retry,
            RQ_PSN => rq_psn, MAX_QP_RD_ATOMIC => max_rd_atomic,
            MIN_RNR_TIMER => min_rnr_timer, SQ_PSN => sq_psn,
            MAX_DEST_RD_ATOMIC => max_dest_rd_atomic, DEST_QPN => dest_qp_num,
        );
        if mask & AV != 0 {
            dst.ah_attr = read_ah_attr(std::ptr::addr_of!((*src).ah_attr));
        }
    }
}

/// `IBV_ACCESS_OPTIONAL_RANGE`: hints the device may ignore.
const ACCESS_OPTIONAL: u32 = 0x3ff0_0000;

/// The access flags of `ibv_reg_mr` as rverbs' [`Access`], the optional
/// hints dropped; `None` for a flag rverbs does not know.
pub(crate) fn mr_access(flags: c_uint) -> Option<Access> {
    Access::from_bits(flags & !ACCESS_OPTIONAL)
}

/// `enum ibv_mw_type` as rverbs' [`MwType`].
pub(crate) fn mw_type(t: c_int) -> Option<MwType> {
    match t {
        1 => Some(MwType::Type1),
        2 => Some(MwType::Type2),
        _ => None,
    }
}

/// rverbs' [`SrqAttr`] as `struct ibv_srq_attr`.
pub(crate) fn c_srq_attr(q: &SrqAttr) -> IbvSrqAttr {
    IbvSrqAttr {
        max_wr: q.max_wr,
        max_sge: q.max_sge,
        srq_limit: q.srq_limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An AH attribute without a GRH: the caller need not set `grh`, and
    /// it is not read (Miri reports a read of an unset member); with
    /// `is_global`, it is.
    #[test]
    fn grh_is_read_only_when_is_global_says_so() {
        for global in [0u8, 1] {
            let a = crate::testing::Partial::<IbvAhAttr>::new(std::mem::size_of::<IbvAhAttr>());
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

    /// `ibv_modify_qp` reads only the members its mask names (and the
    /// address vector's `grh` only with `is_global`): the caller's others
    /// are left unset here, and Miri reports a read of any of them.
    #[test]
    fn modify_qp_reads_only_the_members_the_mask_names() {
        use qp_mask::*;
        let a = crate::testing::Partial::<IbvQpAttr>::new(std::mem::size_of::<IbvQpAttr>());
        let p = a.ptr();
        // SAFETY: members of the live allocation.
        unsafe {
            crate::put!(p, qp_state = 2, path_mtu = 3, dest_qp_num = 0x11);
            let av = std::ptr::addr_of_mut!((*p).ah_attr);
            crate::put!(
                av,
                dlid = 7,
                sl = 0,
                src_path_bits = 0,
                static_rate = 0,
                is_global = 0,
                port_num = 1
            );
        }
        let mask = STATE | PATH_MTU | DEST_QPN | AV;
        let mut got = IbvQpAttr::default();
        // SAFETY: the members mask names are set.
        unsafe { copy_masked(p, mask, &mut got) };
        assert_eq!((got.qp_state, got.path_mtu, got.dest_qp_num), (2, 3, 0x11));
        assert_eq!((got.ah_attr.dlid, got.ah_attr.port_num), (7, 1));
        let r = qp_attr(&got, mask).expect("translated");
        assert_eq!(r.dest_qpn, Some(0x11));
        assert!(r.av.is_some_and(|av| av.grh.is_none()));
        assert_eq!(r.qkey, None, "not named, not read");
    }
}

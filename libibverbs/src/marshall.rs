//! What rdma-core's librdmacm calls in libibverbs beyond the verbs
//! themselves: the `marshall.h` copies between the kernel's structs
//! (`ib_uverbs_qp_attr` from rdma_cm's `INIT_QP_ATTR`, `ib_user_path_rec`
//! from `QUERY_ROUTE`) and the C API's (librdmacm's sysfs helpers are in
//! `sysfs.rs`).
//!
//! The kernel structs are uverbs-abi's (layout-checked there against the
//! uapi headers); the C API's are in `abi/`.

use crate::abi::{IbvAhAttr, IbvGid, IbvGlobalRoute, IbvQpAttr, IbvQpCap, IbvSaPathRec};
use crate::guard;
use crate::{export, put};
use std::ffi::c_int;
use uverbs_abi::cm::IbUserPathRec;
use uverbs_abi::verbs::{IbUverbsAhAttr, IbUverbsQpAttr};

fn ah_from_kern(s: &IbUverbsAhAttr) -> IbvAhAttr {
    IbvAhAttr {
        grh: IbvGlobalRoute {
            dgid: IbvGid { raw: s.grh.dgid },
            flow_label: s.grh.flow_label,
            sgid_index: s.grh.sgid_index,
            hop_limit: s.grh.hop_limit,
            traffic_class: s.grh.traffic_class,
        },
        dlid: s.dlid,
        sl: s.sl,
        src_path_bits: s.src_path_bits,
        static_rate: s.static_rate,
        is_global: s.is_global,
        port_num: s.port_num,
    }
}

/// `ibv_copy_ah_attr_from_kern(dst, src)`.
unsafe extern "C" fn copy_ah_attr_from_kern(dst: *mut IbvAhAttr, src: *const IbUverbsAhAttr) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: src is a readable ib_uverbs_ah_attr and dst a writable
        // ibv_ah_attr (C contract, both non-NULL); unaligned reads and writes
        // ask nothing of the caller's alignment.
        unsafe { dst.write_unaligned(ah_from_kern(&src.read_unaligned())) };
    })
}
export!("ibv_copy_ah_attr_from_kern" = copy_ah_attr_from_kern);

/// `ibv_copy_qp_attr_from_kern(dst, src)`: every attribute but `qp_state`
/// (the caller's request, which librdmacm keeps) and `rate_limit` (not in
/// the kernel struct), as libibverbs copies them. Those two are not read
/// either: the caller may have left them uninitialised.
unsafe extern "C" fn copy_qp_attr_from_kern(dst: *mut IbvQpAttr, src: *const IbUverbsQpAttr) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: src is a readable ib_uverbs_qp_attr, every member written
        // by the kernel (C contract, non-NULL); read unaligned, as a byte copy.
        let s = unsafe { src.read_unaligned() };
        let cap = IbvQpCap {
            max_send_wr: s.max_send_wr,
            max_recv_wr: s.max_recv_wr,
            max_send_sge: s.max_send_sge,
            max_recv_sge: s.max_recv_sge,
            max_inline_data: s.max_inline_data,
        };
        // SAFETY: dst is a writable ibv_qp_attr (C contract, non-NULL); only
        // members are written, none read.
        unsafe {
            put!(
                dst,
                cur_qp_state = s.cur_qp_state as c_int,
                path_mtu = s.path_mtu as c_int,
                path_mig_state = s.path_mig_state as c_int,
                qkey = s.qkey,
                rq_psn = s.rq_psn,
                sq_psn = s.sq_psn,
                dest_qp_num = s.dest_qp_num,
                qp_access_flags = s.qp_access_flags,
                cap = cap,
                ah_attr = ah_from_kern(&s.ah_attr),
                alt_ah_attr = ah_from_kern(&s.alt_ah_attr),
                pkey_index = s.pkey_index,
                alt_pkey_index = s.alt_pkey_index,
                en_sqd_async_notify = s.en_sqd_async_notify,
                sq_draining = s.sq_draining,
                max_rd_atomic = s.max_rd_atomic,
                max_dest_rd_atomic = s.max_dest_rd_atomic,
                min_rnr_timer = s.min_rnr_timer,
                port_num = s.port_num,
                timeout = s.timeout,
                retry_cnt = s.retry_cnt,
                rnr_retry = s.rnr_retry,
                alt_port_num = s.alt_port_num,
                alt_timeout = s.alt_timeout,
            );
        }
    })
}
export!("ibv_copy_qp_attr_from_kern" = copy_qp_attr_from_kern);

/// `ibv_copy_path_rec_from_kern(dst, src)`.
unsafe extern "C" fn copy_path_rec_from_kern(dst: *mut IbvSaPathRec, src: *const IbUserPathRec) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: src readable, dst writable (C contract, non-NULL).
        let s = unsafe { src.read_unaligned() };
        let d = IbvSaPathRec {
            dgid: IbvGid { raw: s.dgid },
            sgid: IbvGid { raw: s.sgid },
            dlid: s.dlid,
            slid: s.slid,
            raw_traffic: s.raw_traffic as c_int,
            flow_label: s.flow_label,
            hop_limit: s.hop_limit,
            traffic_class: s.traffic_class,
            reversible: s.reversible as c_int,
            numb_path: s.numb_path,
            pkey: s.pkey,
            sl: s.sl,
            mtu_selector: s.mtu_selector,
            mtu: s.mtu as u8,
            rate_selector: s.rate_selector,
            rate: s.rate,
            packet_life_time_selector: s.packet_life_time_selector,
            packet_life_time: s.packet_life_time,
            preference: s.preference,
        };
        // SAFETY: dst writable (C contract, non-NULL).
        unsafe { dst.write_unaligned(d) };
    })
}
export!("ibv_copy_path_rec_from_kern" = copy_path_rec_from_kern);

/// `ibv_copy_path_rec_to_kern(dst, src)`: the reverse. The kernel
/// struct's reserved bytes are left as they were, as rdma-core leaves
/// them: `dst` is only written, never read.
unsafe extern "C" fn copy_path_rec_to_kern(dst: *mut IbUserPathRec, src: *const IbvSaPathRec) {
    guard::void(|| {
        if dst.is_null() || src.is_null() {
            return;
        }
        // SAFETY: src is a readable, initialised ibv_sa_path_rec (C contract,
        // non-NULL; its padding is not read: the copy is typed).
        let s = unsafe { src.read_unaligned() };
        // SAFETY: dst is writable (C contract, non-NULL); members only.
        unsafe {
            put!(
                dst,
                dgid = s.dgid.raw,
                sgid = s.sgid.raw,
                dlid = s.dlid,
                slid = s.slid,
                raw_traffic = s.raw_traffic as u32,
                flow_label = s.flow_label,
                hop_limit = s.hop_limit,
                traffic_class = s.traffic_class,
                reversible = s.reversible as u32,
                numb_path = s.numb_path,
                pkey = s.pkey,
                sl = s.sl,
                mtu_selector = s.mtu_selector,
                mtu = u32::from(s.mtu),
                rate_selector = s.rate_selector,
                rate = s.rate,
                packet_life_time_selector = s.packet_life_time_selector,
                packet_life_time = s.packet_life_time,
                preference = s.preference,
            );
        }
    })
}
export!("ibv_copy_path_rec_to_kern" = copy_path_rec_to_kern);

#[cfg(test)]
mod tests {
    use super::*;

    /// librdmacm passes an `ibv_qp_attr` of which it set only `qp_state`:
    /// the copy writes the other members and reads none (Miri reports a
    /// read of an unset one); `rate_limit` is left unset.
    #[test]
    fn qp_attr_from_kern_only_writes() {
        let k = IbUverbsQpAttr {
            qkey: 0x1111,
            port_num: 1,
            ..Default::default()
        };
        let d = crate::testing::Partial::<IbvQpAttr>::new(std::mem::size_of::<IbvQpAttr>());
        let p = d.ptr();
        // SAFETY: a member of the live allocation.
        unsafe { crate::put!(p, qp_state = 1) };
        // SAFETY: p is writable, k readable.
        unsafe { copy_qp_attr_from_kern(p, &k) };
        // SAFETY: members the copy wrote, and qp_state, set above.
        let got = unsafe {
            (
                crate::member!(p, qp_state),
                crate::member!(p, qkey),
                crate::member!(p, port_num),
            )
        };
        assert_eq!(got, (1, 0x1111, 1));
    }

    /// The path record copied to the kernel's struct: its members written,
    /// its reserved bytes neither read nor written (Miri reports a read).
    #[test]
    fn path_rec_to_kern_only_writes() {
        let r = IbvSaPathRec {
            dlid: 5,
            mtu: 4,
            ..Default::default()
        };
        let d = crate::testing::Partial::<IbUserPathRec>::new(std::mem::size_of::<IbUserPathRec>());
        let p = d.ptr();
        // SAFETY: p is writable, r readable.
        unsafe { copy_path_rec_to_kern(p, &r) };
        // SAFETY: members the copy wrote.
        let got = unsafe { (crate::member!(p, dlid), crate::member!(p, mtu)) };
        assert_eq!(got, (5, 4));
    }

    #[test]
    fn qp_attr_from_kern_keeps_the_state_asked_for() {
        let mut k = IbUverbsQpAttr {
            qp_state: 2,
            path_mtu: 3,
            dest_qp_num: 0x11,
            rq_psn: 77,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
            ..Default::default()
        };
        k.ah_attr.is_global = 1;
        k.ah_attr.grh.dgid = [9; 16];
        k.ah_attr.grh.sgid_index = 1;
        let mut d = IbvQpAttr {
            qp_state: 2,
            ..Default::default()
        };
        // SAFETY: both are live locals of the right types.
        unsafe { copy_qp_attr_from_kern(&mut d, &k) };
        assert_eq!(
            (d.qp_state, d.path_mtu, d.dest_qp_num, d.rq_psn),
            (2, 3, 0x11, 77)
        );
        assert_eq!((d.max_dest_rd_atomic, d.min_rnr_timer), (4, 12));
        assert_eq!(d.ah_attr.is_global, 1);
        assert_eq!(d.ah_attr.grh.dgid.raw, [9; 16]);
        assert_eq!(d.ah_attr.grh.sgid_index, 1);
    }
}

//! `QUERY_QP` in full (`ibv_query_qp` with every attribute): the current
//! attributes, as a [`QpAttr`] with every member set, the alternate path
//! and the rest of `struct ib_uverbs_query_qp_resp`, and the attributes the
//! QP was created with (`struct ibv_qp_init_attr`).

use super::attr::{mask, Mtu, QpAttr, QpState};
use super::{Qp, QpCaps, QpType};
use crate::ah::{AhAttr, Grh};
use crate::cmd;
use crate::error::{Error, Result};
use crate::mr::Access;
use uverbs_abi::verbs as v;

/// What [`Qp::query`] answers.
#[derive(Debug, Clone)]
pub struct QpQuery {
    /// The current attributes, every member set (`Some`) but `path_mtu`
    /// where the kernel reports none (0; rxe starts every QP at 256) and
    /// `en_sqd_async_notify`, which the response does not carry; `av` is
    /// the primary path.
    pub attr: QpAttr,
    /// The alternate path (`alt_ah_attr`; rxe keeps none: zeros).
    pub alt_av: AhAttr,
    /// `alt_pkey_index`.
    pub alt_pkey_index: u16,
    /// `alt_port_num`.
    pub alt_port_num: u8,
    /// `alt_timeout`.
    pub alt_timeout: u8,
    /// `path_mig_state` (`enum ib_mig_state`).
    pub path_mig_state: u8,
    /// `sq_draining`: the QP is in SQD and still draining.
    pub sq_draining: bool,
    /// The creation attributes.
    pub init: QpInitAttr,
}

/// The attributes a QP was created with, as the kernel reports them
/// (`struct ibv_qp_init_attr`, less the CQs and SRQ the program holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// The transport.
    pub qp_type: QpType,
    /// The granted sizes.
    pub caps: QpCaps,
    /// Every send generates a completion.
    pub sq_sig_all: bool,
}

/// Every attribute `QUERY_QP` can report (`IB_QP_*` up to `DEST_QPN`, and
/// the alternate path and SQ draining bits).
const ALL: u32 = mask::STATE
    | mask::CUR_STATE
    | mask::EN_SQD_ASYNC_NOTIFY
    | mask::ACCESS_FLAGS
    | mask::PKEY_INDEX
    | mask::PORT
    | mask::QKEY
    | mask::AV
    | mask::PATH_MTU
    | mask::TIMEOUT
    | mask::RETRY_CNT
    | mask::RNR_RETRY
    | mask::RQ_PSN
    | mask::MAX_QP_RD_ATOMIC
    | 1 << 14 // IB_QP_ALT_PATH
    | mask::MIN_RNR_TIMER
    | mask::SQ_PSN
    | mask::MAX_DEST_RD_ATOMIC
    | 1 << 18 // IB_QP_PATH_MIG_STATE
    | 1 << 19 // IB_QP_CAP
    | mask::DEST_QPN;

fn ah_attr(d: &v::IbUverbsQpDest) -> AhAttr {
    AhAttr {
        dlid: d.dlid,
        sl: d.sl,
        src_path_bits: d.src_path_bits,
        static_rate: d.static_rate,
        port_num: d.port_num,
        grh: (d.is_global != 0).then_some(Grh {
            dgid: d.dgid,
            flow_label: d.flow_label,
            sgid_index: d.sgid_index,
            hop_limit: d.hop_limit,
            traffic_class: d.traffic_class,
        }),
    }
}

/// Decodes a `QUERY_QP` response of a QP of type `qp_type`.
fn decode(r: &v::IbUverbsQueryQpResp, qp_type: QpType) -> Result<QpQuery> {
    // 0 is no MTU (a driver that sets none before RTR); anything past
    // 4096 would be a kernel's error.
    if r.path_mtu > 5 {
        return Err(Error::bad_answer(format!(
            "QUERY_QP: path_mtu {} is no IB MTU",
            r.path_mtu
        )));
    }
    let caps = QpCaps {
        max_send_wr: r.max_send_wr,
        max_recv_wr: r.max_recv_wr,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline_data: r.max_inline_data,
    };
    let attr = QpAttr {
        state: Some(QpState::from_raw(r.qp_state.into())),
        cur_state: Some(QpState::from_raw(r.cur_qp_state.into())),
        // Not in `struct ib_uverbs_query_qp_resp`.
        en_sqd_async_notify: false,
        access: Some(Access::from_bits_retain(r.qp_access_flags)),
        pkey_index: Some(r.pkey_index),
        port: Some(r.port_num),
        qkey: Some(r.qkey),
        av: Some(ah_attr(&r.dest)),
        path_mtu: Mtu::from_raw(r.path_mtu),
        timeout: Some(r.timeout),
        retry_cnt: Some(r.retry_cnt),
        rnr_retry: Some(r.rnr_retry),
        rq_psn: Some(r.rq_psn),
        max_rd_atomic: Some(r.max_rd_atomic),
        min_rnr_timer: Some(r.min_rnr_timer),
        sq_psn: Some(r.sq_psn),
        max_dest_rd_atomic: Some(r.max_dest_rd_atomic),
        dest_qpn: Some(r.dest_qp_num),
    };
    Ok(QpQuery {
        attr,
        alt_av: ah_attr(&r.alt_dest),
        alt_pkey_index: r.alt_pkey_index,
        alt_port_num: r.alt_port_num,
        alt_timeout: r.alt_timeout,
        path_mig_state: r.path_mig_state,
        sq_draining: r.sq_draining != 0,
        init: QpInitAttr {
            qp_type,
            caps,
            sq_sig_all: r.sq_sig_all != 0,
        },
    })
}

impl Qp {
    /// Queries every attribute of the QP and its creation attributes
    /// (`QUERY_QP`, `ibv_query_qp` with every mask bit).
    pub fn query(&self) -> Result<QpQuery> {
        let r = cmd::qp::query(&self.inner.ctx.dev, self.inner.handle.raw(), ALL)?;
        decode(&r, self.inner.qp_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn a_response_decodes_member_by_member() {
        let mut r = v::IbUverbsQueryQpResp::new_zeroed();
        r.qp_state = 3;
        r.cur_qp_state = 3;
        r.path_mtu = 3;
        r.qp_access_flags = 0b1111;
        r.dest_qp_num = 0x42;
        r.rq_psn = 7;
        r.sq_psn = 9;
        r.max_send_wr = 16;
        r.max_inline_data = 64;
        r.sq_sig_all = 1;
        r.dest.is_global = 1;
        r.dest.dgid = [0xfe; 16];
        r.dest.hop_limit = 1;
        r.dest.port_num = 1;
        r.timeout = 14;
        let q = decode(&r, QpType::Rc).unwrap();
        assert_eq!(q.attr.state, Some(QpState::Rts));
        assert_eq!(q.attr.path_mtu, Some(Mtu::M1024));
        assert_eq!(q.attr.dest_qpn, Some(0x42));
        assert_eq!((q.attr.rq_psn, q.attr.sq_psn), (Some(7), Some(9)));
        assert_eq!(q.attr.timeout, Some(14));
        let grh = q.attr.av.unwrap().grh.unwrap();
        assert_eq!((grh.dgid, grh.hop_limit), ([0xfe; 16], 1));
        assert_eq!(q.alt_av.grh, None);
        assert_eq!(q.init.caps.max_send_wr, 16);
        assert_eq!(q.init.caps.max_inline_data, 64);
        assert!(q.init.sq_sig_all);
        r.path_mtu = 0;
        assert_eq!(decode(&r, QpType::Rc).unwrap().attr.path_mtu, None);
        r.path_mtu = 9;
        assert!(matches!(
            decode(&r, QpType::Rc),
            Err(Error::BadKernelAnswer { .. })
        ));
    }
}

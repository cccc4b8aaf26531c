//! QP attributes for `MODIFY_QP`: only the attributes that are set are
//! sent, and the attribute mask is derived from them, so the two cannot
//! disagree.

use crate::ah::AhAttr;
use crate::error::{Error, Result};
use crate::mr::Access;
use uverbs_abi::verbs as v;
use zerocopy::FromZeros;

/// `enum ib_qp_attr_mask` bits (kernel `include/rdma/ib_verbs.h`; the
/// uverbs write ABI passes them through unchanged).
pub(crate) mod mask {
    pub const STATE: u32 = 1;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const DEST_QPN: u32 = 1 << 20;
}

/// QP states (`enum ib_qp_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Reset.
    Reset,
    /// Initialised.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drained.
    Sqd,
    /// Send queue error.
    Sqe,
    /// Error: outstanding work requests flush.
    Err,
    /// A value this version does not know.
    Unknown(u32),
}

impl QpState {
    /// The kernel's value (`enum ib_qp_state`).
    pub fn raw(self) -> u32 {
        match self {
            QpState::Reset => 0,
            QpState::Init => 1,
            QpState::Rtr => 2,
            QpState::Rts => 3,
            QpState::Sqd => 4,
            QpState::Sqe => 5,
            QpState::Err => 6,
            QpState::Unknown(v) => v,
        }
    }

    pub(crate) fn from_raw(v: u32) -> QpState {
        match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            v => QpState::Unknown(v),
        }
    }
}

/// Path MTU (`enum ib_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes.
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// From the kernel's value (`active_mtu` of a port), if valid.
    pub fn from_raw(v: u8) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::M256,
            2 => Mtu::M512,
            3 => Mtu::M1024,
            4 => Mtu::M2048,
            5 => Mtu::M4096,
            _ => return None,
        })
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// Attributes for [`crate::qp::Qp::modify`]; unset fields are not changed.
#[derive(Debug, Clone, Default)]
#[allow(missing_docs)] // each field is the ibv_qp_attr member of that name
pub struct QpAttr {
    pub state: Option<QpState>,
    pub cur_state: Option<QpState>,
    /// With a move to SQD: raise SQ_DRAINED when the send queue drained.
    pub en_sqd_async_notify: bool,
    pub access: Option<Access>,
    pub pkey_index: Option<u16>,
    pub port: Option<u8>,
    pub qkey: Option<u32>,
    pub av: Option<AhAttr>,
    pub path_mtu: Option<Mtu>,
    pub timeout: Option<u8>,
    pub retry_cnt: Option<u8>,
    pub rnr_retry: Option<u8>,
    pub rq_psn: Option<u32>,
    pub max_rd_atomic: Option<u8>,
    pub min_rnr_timer: Option<u8>,
    pub sq_psn: Option<u32>,
    pub max_dest_rd_atomic: Option<u8>,
    pub dest_qpn: Option<u32>,
}

impl QpAttr {
    /// RESET → INIT for RC/UC: port, P_Key index 0, remote access rights.
    pub fn init(port: u8, access: Access) -> QpAttr {
        QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(port),
            access: Some(access),
            ..QpAttr::default()
        }
    }

    /// RESET → INIT for UD: port, P_Key index 0, Q_Key.
    pub fn init_ud(port: u8, qkey: u32) -> QpAttr {
        QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(port),
            qkey: Some(qkey),
            ..QpAttr::default()
        }
    }

    /// A bare state change (UD's INIT → RTR, SQD, ...).
    pub fn state(s: QpState) -> QpAttr {
        QpAttr {
            state: Some(s),
            ..QpAttr::default()
        }
    }

    /// RTR → RTS for UD: only the send PSN.
    pub fn rts_ud(sq_psn: u32) -> QpAttr {
        QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(sq_psn & 0xff_ffff),
            ..QpAttr::default()
        }
    }

    /// INIT → RTR for RC with rdma-core's usual values (as ibv_rc_pingpong).
    pub fn rtr(av: AhAttr, mtu: Mtu, dest_qpn: u32, rq_psn: u32) -> QpAttr {
        QpAttr {
            state: Some(QpState::Rtr),
            av: Some(av),
            path_mtu: Some(mtu),
            dest_qpn: Some(dest_qpn),
            rq_psn: Some(rq_psn & 0xff_ffff),
            max_dest_rd_atomic: Some(1),
            min_rnr_timer: Some(12),
            ..QpAttr::default()
        }
    }

    /// RTR → RTS for RC with rdma-core's usual values.
    pub fn rts(sq_psn: u32) -> QpAttr {
        QpAttr {
            state: Some(QpState::Rts),
            timeout: Some(14),
            // 6, not rdma-core's customary 7: rxe treats a transport retry
            // count of 7 as "retry forever", so a peer that died would
            // leave every send outstanding and every waiter spinning. With
            // 6 its sends end in RETRY_EXC_ERR within seconds.
            retry_cnt: Some(6),
            // 7 is "forever" in the IB spec too, but only a live peer that
            // posts no receive answers RNR; a dead one does not answer.
            rnr_retry: Some(7),
            sq_psn: Some(sq_psn & 0xff_ffff),
            max_rd_atomic: Some(1),
            ..QpAttr::default()
        }
    }

    /// To ERR: outstanding work requests complete with WR_FLUSH_ERR.
    pub fn err() -> QpAttr {
        QpAttr {
            state: Some(QpState::Err),
            ..QpAttr::default()
        }
    }

    pub(crate) fn encode(&self, qp_handle: u32) -> Result<v::IbUverbsModifyQp> {
        let mut c = v::IbUverbsModifyQp::new_zeroed();
        let mut m = 0u32;
        c.qp_handle = qp_handle;
        if let Some(s) = self.state {
            m |= mask::STATE;
            c.qp_state = s.raw() as u8;
        }
        if let Some(s) = self.cur_state {
            m |= mask::CUR_STATE;
            c.cur_qp_state = s.raw() as u8;
        }
        if self.en_sqd_async_notify {
            m |= mask::EN_SQD_ASYNC_NOTIFY;
            c.en_sqd_async_notify = 1;
        }
        if let Some(a) = self.access {
            m |= mask::ACCESS_FLAGS;
            c.qp_access_flags = a.bits();
        }
        if let Some(p) = self.pkey_index {
            m |= mask::PKEY_INDEX;
            c.pkey_index = p;
        }
        if let Some(p) = self.port {
            m |= mask::PORT;
            c.port_num = p;
        }
        if let Some(q) = self.qkey {
            m |= mask::QKEY;
            c.qkey = q;
        }
        if let Some(av) = self.av {
            m |= mask::AV;
            c.dest.dlid = av.dlid;
            c.dest.sl = av.sl;
            c.dest.src_path_bits = av.src_path_bits;
            c.dest.static_rate = av.static_rate;
            c.dest.port_num = av.port_num;
            if let Some(g) = av.grh {
                c.dest.is_global = 1;
                c.dest.dgid = g.dgid;
                c.dest.flow_label = g.flow_label;
                c.dest.sgid_index = g.sgid_index;
                c.dest.hop_limit = g.hop_limit;
                c.dest.traffic_class = g.traffic_class;
            }
        }
        if let Some(mtu) = self.path_mtu {
            m |= mask::PATH_MTU;
            c.path_mtu = mtu as u8;
        }
        if let Some(t) = self.timeout {
            m |= mask::TIMEOUT;
            c.timeout = t;
        }
        if let Some(r) = self.retry_cnt {
            if r > 7 {
                return Err(Error::invalid(format!("retry_cnt {r} > 7")));
            }
            m |= mask::RETRY_CNT;
            c.retry_cnt = r;
        }
        if let Some(r) = self.rnr_retry {
            if r > 7 {
                return Err(Error::invalid(format!("rnr_retry {r} > 7")));
            }
            m |= mask::RNR_RETRY;
            c.rnr_retry = r;
        }
        if let Some(p) = self.rq_psn {
            m |= mask::RQ_PSN;
            c.rq_psn = p;
        }
        if let Some(a) = self.max_rd_atomic {
            m |= mask::MAX_QP_RD_ATOMIC;
            c.max_rd_atomic = a;
        }
        if let Some(t) = self.min_rnr_timer {
            m |= mask::MIN_RNR_TIMER;
            c.min_rnr_timer = t;
        }
        if let Some(p) = self.sq_psn {
            m |= mask::SQ_PSN;
            c.sq_psn = p;
        }
        if let Some(a) = self.max_dest_rd_atomic {
            m |= mask::MAX_DEST_RD_ATOMIC;
            c.max_dest_rd_atomic = a;
        }
        if let Some(q) = self.dest_qpn {
            m |= mask::DEST_QPN;
            c.dest_qp_num = q;
        }
        c.attr_mask = m;
        Ok(c)
    }
}

/// The `ib_uverbs_qp_dest` of an `ib_uverbs_ah_attr` (the same address
/// vector in the layout MODIFY_QP wants).
fn dest_of(a: &v::IbUverbsAhAttr) -> v::IbUverbsQpDest {
    let mut d = v::IbUverbsQpDest::new_zeroed();
    d.dgid = a.grh.dgid;
    d.flow_label = a.grh.flow_label;
    d.sgid_index = a.grh.sgid_index;
    d.hop_limit = a.grh.hop_limit;
    d.traffic_class = a.grh.traffic_class;
    d.dlid = a.dlid;
    d.sl = a.sl;
    d.src_path_bits = a.src_path_bits;
    d.static_rate = a.static_rate;
    d.is_global = a.is_global;
    d.port_num = a.port_num;
    d
}

/// A MODIFY_QP command from attributes the kernel itself produced (the
/// rdma_cm's `INIT_QP_ATTR` answer) with its own mask: the values were
/// negotiated by the connection, so they pass through unchanged.
pub(crate) fn encode_kernel_attr(a: &v::IbUverbsQpAttr, qp_handle: u32) -> v::IbUverbsModifyQp {
    let mut c = v::IbUverbsModifyQp::new_zeroed();
    c.qp_handle = qp_handle;
    c.attr_mask = a.qp_attr_mask;
    c.dest = dest_of(&a.ah_attr);
    c.alt_dest = dest_of(&a.alt_ah_attr);
    c.qkey = a.qkey;
    c.rq_psn = a.rq_psn;
    c.sq_psn = a.sq_psn;
    c.dest_qp_num = a.dest_qp_num;
    c.qp_access_flags = a.qp_access_flags;
    c.pkey_index = a.pkey_index;
    c.alt_pkey_index = a.alt_pkey_index;
    // States, MTU and migration state are small enums carried in u32s.
    c.qp_state = a.qp_state as u8;
    c.cur_qp_state = a.cur_qp_state as u8;
    c.path_mtu = a.path_mtu as u8;
    c.path_mig_state = a.path_mig_state as u8;
    c.en_sqd_async_notify = a.en_sqd_async_notify;
    c.max_rd_atomic = a.max_rd_atomic;
    c.max_dest_rd_atomic = a.max_dest_rd_atomic;
    c.min_rnr_timer = a.min_rnr_timer;
    c.port_num = a.port_num;
    c.timeout = a.timeout;
    c.retry_cnt = a.retry_cnt;
    c.rnr_retry = a.rnr_retry;
    c.alt_port_num = a.alt_port_num;
    c.alt_timeout = a.alt_timeout;
    c
}

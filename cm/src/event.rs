//! [`Event`]: one `GET_EVENT` answer, decoded.

use crate::EventType;
use uverbs_abi::cm as c;

/// Connection parameters: what [`Id::connect`](crate::Id::connect) and
/// [`Id::accept`](crate::Id::accept) send, and what a `CONNECT_REQUEST`,
/// `CONNECT_RESPONSE` or `ESTABLISHED` event carries from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnParam {
    /// Private data (at most 56 bytes in a request on InfiniBand/RoCE, 196
    /// in a reply: the kernel enforces the limits).
    pub private_data: Vec<u8>,
    /// RDMA reads/atomics the local side accepts at once.
    pub responder_resources: u8,
    /// RDMA reads/atomics the local side issues at once.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Transport retries (0–7).
    pub retry_count: u8,
    /// RNR retries (0–7; 7 = forever).
    pub rnr_retry_count: u8,
    /// The QP uses an SRQ.
    pub srq: bool,
    /// The local QP number.
    pub qp_num: u32,
}

impl Default for ConnParam {
    /// librdmacm's defaults for a missing parameter block: 7 retries, 7
    /// RNR retries, depths as large as the device allows.
    fn default() -> ConnParam {
        ConnParam {
            private_data: Vec::new(),
            responder_resources: crate::MAX_DEPTH,
            initiator_depth: crate::MAX_DEPTH,
            flow_control: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            srq: false,
            qp_num: 0,
        }
    }
}

impl ConnParam {
    pub(crate) fn from_kernel(k: &c::RdmaUcmConnParam) -> ConnParam {
        ConnParam {
            private_data: k.private_data().to_vec(),
            responder_resources: k.responder_resources,
            initiator_depth: k.initiator_depth,
            flow_control: k.flow_control,
            retry_count: k.retry_count,
            rnr_retry_count: k.rnr_retry_count,
            srq: k.srq != 0,
            qp_num: k.qp_num,
        }
    }
}

/// The UD parameters of an event on an `RDMA_PS_UDP` id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdParam {
    /// The peer's QP number.
    pub qp_num: u32,
    /// The peer's Q_Key.
    pub qkey: u32,
    /// The address vector to reach it (`struct ib_uverbs_ah_attr` bytes).
    pub ah_attr: [u8; 32],
    /// Private data.
    pub private_data: Vec<u8>,
}

/// One rdma_cm event.
#[derive(Debug, Clone)]
pub struct Event {
    /// What happened.
    pub kind: EventType,
    /// 0, or a negative errno (resolution, connection errors) or a reject
    /// reason (`REJECTED` on InfiniBand/RoCE: 28 = consumer reject, 8 =
    /// invalid service id, i.e. nobody listens).
    pub status: i32,
    /// The `uid` the id was created (or accepted) with; for a
    /// `CONNECT_REQUEST`, the listening id's.
    pub uid: u64,
    /// The kernel handle of the id the event is about; for a
    /// `CONNECT_REQUEST`, a new id the kernel created for the connection
    /// (adopt it with [`Id::adopt`](crate::Id::adopt)).
    pub id: u32,
    /// Connection parameters (connection events of `RDMA_PS_TCP` ids).
    pub conn: ConnParam,
    /// UD parameters (events of `RDMA_PS_UDP` ids).
    pub ud: UdParam,
}

impl Event {
    /// Decodes a `GET_EVENT` answer (any bytes: the kernel's values are
    /// kept, unknown ones included). Public, hidden, for the fuzz targets.
    #[doc(hidden)]
    pub fn from_kernel(r: &c::RdmaUcmEventResp) -> Event {
        let ud = r.ud();
        let mut ah_attr = [0u8; 32];
        for (chunk, w) in ah_attr.chunks_exact_mut(4).zip(ud.ah_attr) {
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        Event {
            kind: r.event_type(),
            status: r.status as i32,
            uid: r.uid,
            id: r.id,
            conn: ConnParam::from_kernel(&r.conn()),
            ud: UdParam {
                qp_num: ud.qp_num,
                qkey: ud.qkey,
                ah_attr,
                private_data: ud.private_data().to_vec(),
            },
        }
    }

    /// The event's name as librdmacm's `rdma_event_str` prints it
    /// (`RDMA_CM_EVENT_ESTABLISHED`).
    pub fn name(&self) -> String {
        match self.kind.name() {
            Some(n) => n.to_string(),
            None => format!("UNKNOWN EVENT {}", self.kind.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::{FromZeros, IntoBytes};

    fn resp_with(kind: EventType, status: i32) -> c::RdmaUcmEventResp {
        let mut r = c::RdmaUcmEventResp::new_zeroed();
        r.uid = 0xfeed;
        r.id = 7;
        r.event = kind.0;
        r.status = status as u32;
        r
    }

    #[test]
    fn a_connect_request_decodes_its_parameters_and_private_data() {
        let mut r = resp_with(EventType::CONNECT_REQUEST, 0);
        let mut p = c::RdmaUcmConnParam::zeroed();
        p.set_private_data(b"hello").unwrap();
        p.responder_resources = 3;
        p.initiator_depth = 2;
        p.retry_count = 7;
        p.qp_num = 0x1234;
        r.param.as_mut_bytes()[..size_of::<c::RdmaUcmConnParam>()].copy_from_slice(p.as_bytes());
        let e = Event::from_kernel(&r);
        assert_eq!(
            (e.kind, e.uid, e.id, e.status),
            (EventType::CONNECT_REQUEST, 0xfeed, 7, 0)
        );
        assert_eq!(e.conn.private_data, b"hello");
        assert_eq!(
            (
                e.conn.responder_resources,
                e.conn.initiator_depth,
                e.conn.retry_count
            ),
            (3, 2, 7)
        );
        assert_eq!(e.conn.qp_num, 0x1234);
        assert_eq!(e.name(), "RDMA_CM_EVENT_CONNECT_REQUEST");
    }

    #[test]
    fn negative_statuses_and_unknown_events_survive() {
        let e = Event::from_kernel(&resp_with(EventType::ADDR_ERROR, -110));
        assert_eq!(e.status, -110);
        let e = Event::from_kernel(&resp_with(EventType(99), 0));
        assert_eq!(e.name(), "UNKNOWN EVENT 99");
    }

    #[test]
    fn arbitrary_kernel_bytes_never_panic() {
        // Every byte pattern of the response decodes: lengths are u8 and
        // the arrays hold 256 bytes.
        for fill in [0u8, 0x7f, 0xff] {
            let mut r = c::RdmaUcmEventResp::new_zeroed();
            r.as_mut_bytes().fill(fill);
            let e = Event::from_kernel(&r);
            assert!(e.conn.private_data.len() <= 255);
            assert!(e.ud.private_data.len() <= 255);
        }
    }
}

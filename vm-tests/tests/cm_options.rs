//! rdma_cm options and notifications on rxe0: `rdma_set_option` (REUSEADDR
//! and AFONLY decide who may bind; TOS and ACK_TIMEOUT reach the QP
//! attributes the kernel hands out), `rdma_notify` (COMM_EST establishes a
//! passive side whose RTU never came), the source and destination ports,
//! and `rdma_getaddrinfo`-like resolution feeding a real connection.

mod common;

use common::cm::{addr, next};
use rverbs::cm::{
    getaddrinfo, AddrHints, CmChannel, CmId, ConnParam, EventType, IdOption, PortSpace,
};
use rverbs::{Cq, Pd, Qp, QpInit, QpType};
use std::net::SocketAddr;

const EADDRINUSE: i32 = 98;
const EADDRNOTAVAIL: i32 = 99;
const EINVAL: i32 = 22;
const EISCONN: i32 = 106;
/// `IB_EVENT_COMM_EST`.
const COMM_EST: u32 = 4;

fn errno(r: rverbs::Result<()>, what: &str) -> i32 {
    let e = r.expect_err(what);
    e.errno()
        .unwrap_or_else(|| panic!("{what}: no errno in {e}"))
        .0
}

fn rc_qp(id: &CmId) -> (Pd, Cq, Qp) {
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8, None, 0).unwrap();
    let qp = id
        .create_qp(
            &pd,
            &QpInit {
                caps: common::rc::caps(2),
                sq_sig_all: true,
                ..QpInit::new(QpType::Rc, &cq)
            },
        )
        .unwrap();
    (pd, cq, qp)
}

#[test]
fn reuseaddr_and_afonly_decide_who_may_bind() {
    let chan = CmChannel::new().unwrap();
    let id = || chan.create_id(PortSpace::TCP).unwrap();
    // Without REUSEADDR a bound port is taken.
    let a = id();
    assert_eq!((a.src_port().unwrap(), a.dst_port().unwrap()), (0, 0));
    a.bind(&addr(0)).unwrap();
    let port = a.src_port().unwrap();
    assert_ne!(port, 0, "the kernel picked a port");
    assert_eq!(errno(id().bind(&addr(port)), "a taken port"), EADDRINUSE);
    // Two ids that both set it share a port.
    let (c, d) = (id(), id());
    c.set_option(IdOption::ReuseAddr(true)).unwrap();
    d.set_option(IdOption::ReuseAddr(true)).unwrap();
    c.bind(&addr(0)).unwrap();
    let shared = c.src_port().unwrap();
    d.bind(&addr(shared)).unwrap();
    assert_eq!(d.src_port().unwrap(), shared);
    // AFONLY on an IPv6 wildcard bind leaves the IPv4 wildcard free (IPv4
    // ids are AF-only from the start)...
    let v6: SocketAddr = "[::]:0".parse().unwrap();
    let e6 = id();
    e6.set_option(IdOption::AfOnly(true)).unwrap();
    e6.bind(&v6).unwrap();
    let p = e6.src_port().unwrap();
    id().bind(&SocketAddr::from(([0, 0, 0, 0], p))).unwrap();
    // ...and without it the IPv6 wildcard takes IPv4's too.
    let g6 = id();
    g6.set_option(IdOption::AfOnly(false)).unwrap();
    g6.bind(&v6).unwrap();
    let p = g6.src_port().unwrap();
    assert_eq!(
        errno(
            id().bind(&SocketAddr::from(([0, 0, 0, 0], p))),
            "v4 beside a dual v6"
        ),
        EADDRNOTAVAIL
    );
    // Once listening, neither may change.
    let l = id();
    l.bind(&addr(0)).unwrap();
    l.listen(1).unwrap();
    assert_eq!(
        errno(
            l.set_option(IdOption::ReuseAddr(true)),
            "reuse on a listener"
        ),
        EINVAL
    );
    assert_eq!(
        errno(l.set_option(IdOption::AfOnly(true)), "afonly on a listener"),
        EINVAL
    );
    // ACK_TIMEOUT is for connected QPs: a UD id refuses it.
    let u = chan.create_id(PortSpace::UDP).unwrap();
    assert_eq!(
        errno(u.set_option(IdOption::AckTimeout(18)), "ack timeout on UD"),
        EINVAL
    );
}

#[test]
fn tos_and_ack_timeout_reach_the_qp_attributes_and_notify_establishes() {
    let schan = CmChannel::new().unwrap();
    let l = schan.create_id(PortSpace::TCP).unwrap();
    l.bind(&addr(0)).unwrap();
    l.listen(4).unwrap();
    let port = l.src_port().unwrap();
    // The client's address from rdma_getaddrinfo-like resolution of the
    // address string and port.
    let rai = getaddrinfo(
        Some(&common::env().addr),
        Some(&port.to_string()),
        &AddrHints::default(),
    )
    .unwrap();
    let dst = rai[0].dst.unwrap();
    assert_eq!(rai[0].qp_type, QpType::Rc);
    let cchan = CmChannel::new().unwrap();
    // No QP on the client: it sees CONNECT_RESPONSE itself and withholds
    // the RTU, so the server stays short of ESTABLISHED until told.
    let c = cchan.create_id(PortSpace::TCP).unwrap();
    c.set_option(IdOption::Tos(32)).unwrap();
    c.set_option(IdOption::AckTimeout(18)).unwrap();
    c.resolve(None, &dst, 2000).unwrap();
    assert_eq!(c.dst_port().unwrap(), port);
    assert_ne!(c.src_port().unwrap(), 0);
    c.connect(&ConnParam {
        qp_num: 0x1234,
        ..ConnParam::default()
    })
    .unwrap();
    let ev = next(&schan);
    assert_eq!(ev.kind, EventType::CONNECT_REQUEST, "{ev:?}");
    let s = ev.request.unwrap();
    assert_eq!(s.src_port().unwrap(), port);
    assert_eq!(s.dst_port().unwrap(), c.src_port().unwrap());
    let (_pd, _cq, _qp) = rc_qp(&s);
    s.accept(&ConnParam::default()).unwrap();
    let ev = next(&cchan);
    assert_eq!(ev.kind, EventType::CONNECT_RESPONSE, "{ev:?}");
    // What the client's QP would be given: the TOS as the traffic class,
    // and the ACK timeout set.
    let rtr = c.init_qp_attr(2).unwrap();
    assert_eq!(rtr.ah_attr.grh.traffic_class, 32, "{rtr:?}");
    let rts = c.init_qp_attr(3).unwrap();
    assert_eq!(rts.timeout, 18, "{rts:?}");
    // A fresh id has no connection to notify.
    let fresh = schan.create_id(PortSpace::TCP).unwrap();
    assert_eq!(errno(fresh.notify(COMM_EST), "notify a fresh id"), EINVAL);
    // COMM_EST: the server's side is established without the RTU...
    s.notify(COMM_EST).unwrap();
    let ev = next(&schan);
    assert_eq!(
        (ev.kind, ev.uid),
        (EventType::ESTABLISHED, s.uid()),
        "{ev:?}"
    );
    // ...and once established, it is.
    assert_eq!(errno(s.notify(COMM_EST), "notify twice"), EISCONN);
}

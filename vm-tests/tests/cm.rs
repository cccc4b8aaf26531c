//! rdma_cm on rxe0: ids, events, connection setup that drives the QP, and
//! the error events.

mod common;

use common::cm::{addr, next};
use common::rc::{caps, wait};
use rverbs::cm::{CmChannel, CmId, ConnParam, EventType, PortSpace};
use rverbs::{
    Access, CompChannel, Cq, Error, Mr, Pd, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, Wc,
    WcOpcode, WcStatus,
};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

/// What one side of a connection needs.
struct Conn {
    _pd: Pd,
    cq: Cq,
    qp: Qp,
    mr: Mr,
}

fn setup(id: &CmId) -> Conn {
    let ctx = id.context().expect("the id's device context");
    assert_eq!(ctx.device().name(), common::env().dev);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, None::<&CompChannel>, 0).unwrap();
    let qp = id
        .create_qp(
            &pd,
            &QpInit {
                caps: caps(8),
                sq_sig_all: true,
                ..QpInit::new(QpType::Rc, &cq)
            },
        )
        .expect("create the id's QP");
    let mr = pd
        .alloc_mr(
            4096,
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
        )
        .unwrap();
    Conn {
        _pd: pd,
        cq,
        qp,
        mr,
    }
}

/// A listener on the test address, port chosen by the kernel.
fn listener() -> (std::sync::Arc<CmChannel>, CmId, u16) {
    let chan = CmChannel::new().expect("open rdma_cm");
    let l = chan.create_id(PortSpace::TCP).unwrap();
    l.bind(&addr(0)).unwrap();
    l.listen(8).unwrap();
    let port = l.local_addr().unwrap().port();
    assert_ne!(port, 0);
    (chan, l, port)
}

#[test]
fn connect_accept_exchange_and_disconnect() {
    let (chan, l, port) = listener();
    let info = l.query_addr().unwrap();
    assert_eq!(info.src, Some(addr(port)));
    assert_ne!(info.node_guid, 0, "bound to rxe0's address: a device");

    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        let ev = next(&chan);
        assert_eq!(ev.kind, EventType::CONNECT_REQUEST, "{ev:?}");
        assert_eq!(ev.uid, l.uid());
        assert_eq!(ev.conn.private_data[..5], *b"hello");
        let id = ev.request.expect("a new id");
        let mut c = setup(&id);
        c.qp.post_recv(&[RecvWr {
            wr_id: 1,
            sges: &[c.mr.slice(0, 64).unwrap()],
        }])
        .unwrap();
        // A second receive stays outstanding: it must flush once at
        // disconnect.
        c.qp.post_recv(&[RecvWr {
            wr_id: 2,
            sges: &[c.mr.slice(64, 64).unwrap()],
        }])
        .unwrap();
        id.accept(&ConnParam {
            private_data: b"welcome".to_vec(),
            ..ConnParam::default()
        })
        .unwrap();
        let ev = next(&chan);
        assert_eq!(ev.kind, EventType::ESTABLISHED, "{ev:?}");
        assert_eq!(ev.uid, id.uid());
        let peer = id.peer_addr().unwrap();
        // The client's RDMA READ of this needs REMOTE_READ, which the
        // connection (responder resources 1) set on our QP.
        c.mr.write(200, b"server data").unwrap();
        tx.send((peer, c.mr.addr() + 200, c.mr.rkey())).unwrap();
        let r = wait(&mut c.cq, 1);
        assert_eq!((r[0].wr_id, r[0].status), (1, WcStatus::SUCCESS));
        let mut got = [0u8; 11];
        c.mr.read(0, &mut got).unwrap();
        assert_eq!(&got, b"from client");
        let ev = next(&chan);
        assert_eq!(ev.kind, EventType::DISCONNECTED, "{ev:?}");
        let f = wait(&mut c.cq, 1);
        assert_eq!(
            (f[0].wr_id, f[0].status),
            (2, WcStatus::WR_FLUSH_ERR),
            "the outstanding receive flushes once"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(c.cq.poll(&mut [Wc::default(); 4]), 0, "and only once");
    });

    let chan = CmChannel::new().unwrap();
    let id = chan.create_id(PortSpace::TCP).unwrap();
    id.resolve(None, &addr(port), 2000).expect("resolve");
    assert_eq!(id.num_paths().unwrap(), 1);
    assert_eq!(id.peer_addr().unwrap(), addr(port));
    let mut c = setup(&id);
    let peer = id
        .connect_sync(&ConnParam {
            private_data: b"hello".to_vec(),
            responder_resources: 1,
            initiator_depth: 1,
            ..ConnParam::default()
        })
        .expect("connect");
    assert_eq!(peer.private_data[..7], *b"welcome");
    let (seen_by_server, raddr, rkey) = rx.recv().unwrap();
    assert_eq!(seen_by_server, id.local_addr().unwrap());
    c.qp.post_send(&[SendWr::new(
        9,
        SendOp::Read(rverbs::Remote { addr: raddr, rkey }),
        &[c.mr.slice(1000, 11).unwrap()],
    )])
    .unwrap();
    let r = wait(&mut c.cq, 1);
    assert_eq!((r[0].wr_id, r[0].status), (9, WcStatus::SUCCESS), "{r:?}");
    let mut got = [0u8; 11];
    c.mr.read(1000, &mut got).unwrap();
    assert_eq!(&got, b"server data");
    c.mr.write(0, b"from client").unwrap();
    c.qp.post_send(&[SendWr::new(10, SendOp::Send, &[c.mr.slice(0, 11).unwrap()])])
        .unwrap();
    let s = wait(&mut c.cq, 1);
    assert_eq!(
        (s[0].wr_id, s[0].status, s[0].opcode),
        (10, WcStatus::SUCCESS, WcOpcode::SEND)
    );
    id.disconnect().unwrap();
    let ev = id.wait_event(EventType::DISCONNECTED).unwrap();
    assert_eq!(ev.uid, id.uid());
    server.join().unwrap();
}

#[test]
fn a_rejected_request_carries_the_private_data() {
    let (chan, l, port) = listener();
    let server = std::thread::spawn(move || {
        let ev = next(&chan);
        assert_eq!(ev.kind, EventType::CONNECT_REQUEST);
        let id = ev.request.unwrap();
        id.reject(b"go away").unwrap();
        drop(l);
    });
    let chan = CmChannel::new().unwrap();
    let id = chan.create_id(PortSpace::TCP).unwrap();
    id.resolve(None, &addr(port), 2000).unwrap();
    let _c = setup(&id);
    match id.connect_sync(&ConnParam::default()) {
        Err(Error::CmEvent {
            got,
            status,
            private_data,
            ..
        }) => {
            assert_eq!(got, EventType::REJECTED);
            assert_eq!(status, 28, "IB_CM_REJ_CONSUMER_DEFINED");
            assert_eq!(private_data[..7], *b"go away");
        }
        other => panic!("expected REJECTED, got {other:?}"),
    }
    server.join().unwrap();
}

#[test]
fn connecting_to_a_port_nobody_listens_on_is_rejected() {
    let chan = CmChannel::new().unwrap();
    let id = chan.create_id(PortSpace::TCP).unwrap();
    id.resolve(None, &addr(1), 2000).unwrap();
    let _c = setup(&id);
    id.connect(&ConnParam::default()).unwrap();
    let ev = next(&chan);
    assert!(
        ev.kind == EventType::REJECTED || ev.kind == EventType::UNREACHABLE,
        "{ev:?}"
    );
    if ev.kind == EventType::REJECTED {
        assert_eq!(ev.status, 8, "IB_CM_REJ_INVALID_SERVICE_ID");
    }
}

#[test]
fn resolving_an_address_nobody_answers_is_an_addr_error() {
    let chan = CmChannel::new().unwrap();
    let id = chan.create_id(PortSpace::TCP).unwrap();
    // On rxe0's subnet, but no host: neighbour resolution times out.
    let dst: SocketAddr = "10.77.0.99:7000".parse().unwrap();
    id.resolve_addr(None, &dst, 500).unwrap();
    let ev = next(&chan);
    assert_eq!(ev.kind, EventType::ADDR_ERROR, "{ev:?}");
    assert!(ev.status < 0, "a negative errno: {}", ev.status);
    // Off every subnet, with no default route: refused at once, naming
    // the command.
    let id = chan.create_id(PortSpace::TCP).unwrap();
    let far: SocketAddr = "192.0.2.1:7000".parse().unwrap();
    match id.resolve_addr(None, &far, 500) {
        Err(e) => {
            assert!(e.to_string().contains("RESOLVE_ADDR"), "{e}");
            assert!(e.errno().is_some());
        }
        Ok(()) => {
            let ev = next(&chan);
            assert_eq!(ev.kind, EventType::ADDR_ERROR, "{ev:?}");
        }
    }
}

#[test]
fn destroying_an_id_with_events_pending_drops_them() {
    let chan = CmChannel::new().unwrap();
    let id = chan.create_id(PortSpace::TCP).unwrap();
    id.resolve_addr(None, &addr(7000), 2000).unwrap();
    // Let ADDR_RESOLVED be queued, then destroy the id unread.
    std::thread::sleep(Duration::from_millis(300));
    assert!(chan.poll(0).unwrap(), "an event is queued");
    drop(id);
    assert!(
        !chan.poll(200).unwrap(),
        "the destroyed id's event went with it"
    );
    // The channel still works for other ids.
    let id = chan.create_id(PortSpace::TCP).unwrap();
    id.resolve_addr(None, &addr(7000), 2000).unwrap();
    let ev = id.wait_event(EventType::ADDR_RESOLVED).unwrap();
    assert_eq!(ev.uid, id.uid());
    chan.set_nonblocking(true).unwrap();
    let e = chan.get_event().unwrap_err();
    assert_eq!(e.errno().map(|e| e.0), Some(libc_eagain()));
}

fn libc_eagain() -> i32 {
    11
}

#[test]
fn an_id_migrates_to_another_channel() {
    let a = CmChannel::new().unwrap();
    let b = CmChannel::new().unwrap();
    let mut id = a.create_id(PortSpace::TCP).unwrap();
    id.migrate(&b).unwrap();
    id.resolve_addr(None, &addr(7000), 2000).unwrap();
    let ev = next(&b);
    assert_eq!((ev.kind, ev.uid), (EventType::ADDR_RESOLVED, id.uid()));
    assert!(!a.poll(100).unwrap(), "nothing on the old channel");
}

/// An id keeps its uid when it migrates, so uids are the process's, not
/// a channel's: two channels' second ids were both uid 2, and the one
/// migrated onto the other's channel took its entry, which then turned
/// the other's events into its own (and its drop removed both).
#[test]
fn a_migrated_id_keeps_a_uid_no_id_of_its_new_channel_has() {
    let a = CmChannel::new().unwrap();
    let b = CmChannel::new().unwrap();
    let (_a1, mut a2) = (
        a.create_id(PortSpace::TCP).unwrap(),
        a.create_id(PortSpace::TCP).unwrap(),
    );
    let (_b1, b2) = (
        b.create_id(PortSpace::TCP).unwrap(),
        b.create_id(PortSpace::TCP).unwrap(),
    );
    a2.migrate(&b).unwrap();
    assert_ne!(a2.uid(), b2.uid(), "two ids of one channel share a uid");
    a2.resolve_addr(None, &addr(7000), 2000).unwrap();
    b2.resolve_addr(None, &addr(7001), 2000).unwrap();
    let mut got = [next(&b).uid, next(&b).uid];
    got.sort();
    let mut want = [a2.uid(), b2.uid()];
    want.sort();
    assert_eq!(got, want, "each event names its own id");
    // Dropping one leaves the other's entry: its events still come.
    drop(b2);
    a2.resolve_route(2000).unwrap();
    let ev = next(&b);
    assert_eq!((ev.kind, ev.uid), (EventType::ROUTE_RESOLVED, a2.uid()));
}

#[test]
fn a_pd_of_another_context_is_refused() {
    let (_chan, l, _port) = listener();
    let other = rverbs::Context::open_by_name(Some(&common::env().dev)).unwrap();
    let pd = other.alloc_pd().unwrap();
    let cq = other.create_cq(4, None, 0).unwrap();
    let err = l
        .create_qp(
            &pd,
            &QpInit {
                caps: caps(1),
                ..QpInit::new(QpType::Rc, &cq)
            },
        )
        .unwrap_err();
    assert!(err.to_string().contains("context"), "{err}");
}

fn ud_init(cq: &Cq) -> QpInit<'_> {
    QpInit {
        caps: caps(4),
        sq_sig_all: true,
        ..QpInit::new(QpType::Ud, cq)
    }
}

#[test]
fn ud_ids_resolve_the_peer_qp_and_a_datagram_arrives() {
    let chan = CmChannel::new().unwrap();
    let l = chan.create_id(PortSpace::UDP).unwrap();
    l.bind(&addr(0)).unwrap();
    l.listen(4).unwrap();
    let port = l.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let ev = next(&chan);
        assert_eq!(ev.kind, EventType::CONNECT_REQUEST, "{ev:?}");
        let id = ev.request.unwrap();
        let ctx = id.context().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let mut cq = ctx.create_cq(8, None, 0).unwrap();
        let mut qp = id.create_qp(&pd, &ud_init(&cq)).unwrap();
        let buf = pd.alloc_mr(40 + 64, Access::LOCAL_WRITE).unwrap();
        qp.post_recv(&[RecvWr {
            wr_id: 5,
            sges: &[buf.all().unwrap()],
        }])
        .unwrap();
        id.accept(&ConnParam::default()).unwrap();
        let r = wait(&mut cq, 1);
        assert_eq!((r[0].wr_id, r[0].status), (5, WcStatus::SUCCESS), "{r:?}");
        let mut got = [0u8; 9];
        buf.read(40, &mut got).unwrap();
        assert_eq!(&got, b"datagram!");
        drop(l);
        qp.qpn()
    });
    let chan = CmChannel::new().unwrap();
    let id = chan.create_id(PortSpace::UDP).unwrap();
    id.resolve(None, &addr(port), 2000).unwrap();
    let ctx = id.context().unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(8, None, 0).unwrap();
    let mut qp = id.create_qp(&pd, &ud_init(&cq)).unwrap();
    // A UD "connect" is a service-ID resolution: the answer names the
    // peer's QP, its Q_Key and the address vector to reach it.
    let ev = {
        id.connect(&ConnParam::default()).unwrap();
        id.wait_event(EventType::ESTABLISHED).unwrap()
    };
    assert_ne!(ev.ud.qp_num, 0);
    let ah = pd.create_ah(&ev.ah_attr()).unwrap();
    let mr = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    mr.write(0, b"datagram!").unwrap();
    qp.post_send(
        &[SendWr::new(1, SendOp::Send, &[mr.slice(0, 9).unwrap()]).to(
            &ah,
            ev.ud.qp_num,
            ev.ud.qkey,
        )],
    )
    .unwrap();
    let s = wait(&mut cq, 1);
    assert_eq!(s[0].status, WcStatus::SUCCESS, "{s:?}");
    assert_eq!(server.join().unwrap(), ev.ud.qp_num);
}

/// Waits for `n` DISCONNECTED events on `chan`. An id with a QP also
/// reports TIMEWAIT_EXIT once its QP may be reused; those may come
/// between.
fn disconnects(chan: &std::sync::Arc<CmChannel>, n: usize) {
    let mut gone = 0;
    while gone < n {
        let ev = next(chan);
        match ev.kind {
            EventType::DISCONNECTED => gone += 1,
            EventType::TIMEWAIT_EXIT => {}
            _ => panic!("{gone} of {n} disconnected: {ev:?}"),
        }
    }
}

/// 256 connections to one listener at once through the blocking API, each
/// side one thread reading one event channel: the client starts all 256
/// address resolutions, then routes and connects each id as its events
/// come; every connection carries one message (its number), checked on
/// the server's QP it arrived on; then all 256 disconnect, each seen on
/// both sides.
#[test]
fn two_hundred_fifty_six_connections_to_one_listener_from_one_event_loop() {
    const N: usize = 256;
    let chan = CmChannel::new().expect("open rdma_cm");
    let l = chan.create_id(PortSpace::TCP).unwrap();
    l.bind(&addr(0)).unwrap();
    l.listen(N as u32).unwrap();
    let port = l.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let _listener = l;
        let mut conns = Vec::new();
        let mut established = 0;
        while established < N {
            let ev = next(&chan);
            match ev.kind {
                EventType::CONNECT_REQUEST => {
                    let id = ev.request.expect("a new id");
                    let n = u16::from_le_bytes([ev.conn.private_data[0], ev.conn.private_data[1]]);
                    let mut c = setup(&id);
                    c.qp.post_recv(&[RecvWr {
                        wr_id: u64::from(n),
                        sges: &[c.mr.slice(0, 8).unwrap()],
                    }])
                    .unwrap();
                    id.accept(&ConnParam::default()).unwrap();
                    conns.push((id, c, u64::from(n)));
                }
                EventType::ESTABLISHED => established += 1,
                _ => panic!("server, {established} established: {ev:?}"),
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (_, c, n) in conns.iter_mut() {
            let r = wait(&mut c.cq, 1);
            assert_eq!((r[0].wr_id, r[0].status), (*n, WcStatus::SUCCESS), "{r:?}");
            let mut b = [0u8; 8];
            c.mr.read(0, &mut b).unwrap();
            assert_eq!(u64::from_le_bytes(b), *n, "connection {n}'s message");
            assert!(seen.insert(*n), "connection {n} twice");
        }
        disconnects(&chan, N);
        seen.len()
    });
    let chan = CmChannel::new().unwrap();
    let ids: Vec<CmId> = (0..N)
        .map(|_| chan.create_id(PortSpace::TCP).unwrap())
        .collect();
    let by_uid: std::collections::HashMap<u64, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.uid(), i))
        .collect();
    for id in &ids {
        id.resolve_addr(None, &addr(port), 2000).unwrap();
    }
    let mut conns: Vec<Option<Conn>> = (0..N).map(|_| None).collect();
    let mut established = 0;
    while established < N {
        let ev = next(&chan);
        let i = by_uid[&ev.uid];
        match ev.kind {
            EventType::ADDR_RESOLVED => ids[i].resolve_route(2000).unwrap(),
            EventType::ROUTE_RESOLVED => {
                conns[i] = Some(setup(&ids[i]));
                ids[i]
                    .connect(&ConnParam {
                        private_data: (i as u16).to_le_bytes().to_vec(),
                        ..ConnParam::default()
                    })
                    .unwrap();
            }
            EventType::ESTABLISHED => {
                established += 1;
                let c = conns[i].as_mut().expect("connected after its route");
                c.mr.write(0, &(i as u64).to_le_bytes()).unwrap();
                c.qp.post_send(&[SendWr::new(
                    i as u64,
                    SendOp::Send,
                    &[c.mr.slice(0, 8).unwrap()],
                )])
                .unwrap();
            }
            _ => panic!("client {i}, {established} established: {ev:?}"),
        }
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let c = c.as_mut().unwrap();
        let s = wait(&mut c.cq, 1);
        assert_eq!(
            (s[0].wr_id, s[0].status),
            (i as u64, WcStatus::SUCCESS),
            "{s:?}"
        );
    }
    for id in &ids {
        id.disconnect().unwrap();
    }
    disconnects(&chan, N);
    assert_eq!(server.join().expect("the server thread"), N);
}

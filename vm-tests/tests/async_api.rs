//! `rverbs::aio` (feature `tokio`) on rxe0: an async echo server on one
//! thread with 8 concurrent async clients over rdma_cm, futures dropped
//! mid-flight without losing or repeating a completion, the context's
//! async events as a stream, and the example `async_echo`.

mod common;

use common::cm::addr;
use common::rc::{caps, connect, self_av};
use futures_core::Stream;
use rverbs::aio::{AsyncCmId, AsyncCmListener, AsyncCq, AsyncEvents};
use rverbs::cm::{CmId, ConnParam, EventType, PortSpace};
use rverbs::{
    Access, Context, Cq, Error, EventType as AsyncEventType, Mr, Pd, Qp, QpInit, QpType, RecvWr,
    SendOp, SendWr, Wc, WcOpcode, WcStatus,
};
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Command;
use std::time::Duration;

const SIZE: usize = 64;
/// Receives each echo connection keeps posted (and receive slots).
const DEPTH: u32 = 4;
const SEND: u64 = 1 << 63;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// The bytes of message `seq` of client `client` (xorshift: every byte
/// differs between messages and positions).
fn pattern(client: u64, seq: u64, out: &mut [u8]) {
    let mut x = (client << 32 | seq).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in out.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// An RC QP on `cq`, `depth` sends and receives deep, every send signaled.
fn rc_init(cq: &Cq, depth: u32) -> QpInit<'_> {
    QpInit {
        caps: caps(depth),
        sq_sig_all: true,
        ..QpInit::new(QpType::Rc, cq)
    }
}

/// One side of an echo connection: `DEPTH` receive slots, then a send slot.
struct Conn {
    _pd: Pd,
    qp: Qp,
    mr: Mr,
}

impl Conn {
    fn new(id: &CmId, cq: &Cq) -> Conn {
        let ctx = id.context().expect("the id's context");
        assert_eq!(ctx.device().name(), common::env().dev);
        let pd = ctx.alloc_pd().unwrap();
        let qp = id.create_qp(&pd, &rc_init(cq, DEPTH)).expect("create_qp");
        let mr = pd
            .alloc_mr(SIZE * (DEPTH as usize + 1), Access::LOCAL_WRITE)
            .unwrap();
        Conn { _pd: pd, qp, mr }
    }

    fn post_recv(&mut self, slot: u64) {
        let sge = [self.mr.slice(slot as usize * SIZE, SIZE as u32).unwrap()];
        self.qp
            .post_recv(&[RecvWr {
                wr_id: slot,
                sges: &sge,
            }])
            .unwrap();
    }

    fn post_send(&mut self, wr_id: u64, slot: u64) {
        let sge = [self.mr.slice(slot as usize * SIZE, SIZE as u32).unwrap()];
        self.qp
            .post_send(&[SendWr::new(wr_id, SendOp::Send, &sge)])
            .unwrap();
    }
}

/// One server connection: checks every message it receives against the
/// client's pattern (the client's number came as private data), echoes it
/// from its receive slot, reposts the slot once the echo was sent; ends at
/// DISCONNECTED. Returns (client, messages checked and echoed).
async fn serve(id: AsyncCmId, mut cq: AsyncCq, mut c: Conn, client: u64) -> (u64, u64) {
    id.accept(&ConnParam::default()).await.expect("accept");
    let mut wcs = [Wc::default(); 8];
    let (mut seq, mut want, mut got) = (0u64, [0u8; SIZE], [0u8; SIZE]);
    loop {
        tokio::select! {
            n = cq.completions(&mut wcs) => {
                for wc in &wcs[..n.expect("server completions")] {
                    if wc.status == WcStatus::WR_FLUSH_ERR {
                        continue;
                    }
                    assert!(wc.is_ok(), "server: {wc:?}");
                    let slot = wc.wr_id & !SEND;
                    if wc.opcode == WcOpcode::RECV {
                        assert_eq!(wc.byte_len as usize, SIZE);
                        c.mr.read(slot as usize * SIZE, &mut got).unwrap();
                        pattern(client, seq, &mut want);
                        assert_eq!(got, want, "server: client {client} message {seq}");
                        seq += 1;
                        c.post_send(SEND | slot, slot);
                    } else {
                        c.post_recv(slot);
                    }
                }
            }
            ev = id.next_event() => {
                let ev = ev.expect("server cm event");
                assert_eq!(ev.kind, EventType::DISCONNECTED, "{ev:?}");
                id.disconnect().await.expect("answer the disconnect");
                return (client, seq);
            }
        }
    }
}

async fn echo_server(listener: AsyncCmListener, connections: u64) -> Vec<(u64, u64)> {
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let req = listener.get_request().await.expect("a connection request");
        let client = u64::from(req.event.conn.private_data[0]);
        let ctx = req.id.id().context().unwrap();
        let cq = AsyncCq::new(&ctx, 2 * DEPTH, 0).unwrap();
        let mut c = Conn::new(req.id.id(), cq.cq());
        for slot in 0..u64::from(DEPTH) {
            c.post_recv(slot);
        }
        tasks.push(tokio::task::spawn_local(serve(req.id, cq, c, client)));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("a connection task"));
    }
    out
}

/// A client: `messages` round trips, each echo checked byte for byte.
async fn echo_client(dst: SocketAddr, client: u64, messages: u64) -> u64 {
    let id = AsyncCmId::new(PortSpace::TCP).unwrap();
    id.resolve(None, &dst, 2000).await.expect("resolve");
    assert_eq!(id.id().num_paths().unwrap(), 1);
    let ctx = id.id().context().unwrap();
    let mut cq = AsyncCq::new(&ctx, 2 * DEPTH, 0).unwrap();
    let mut c = Conn::new(id.id(), cq.cq());
    c.post_recv(0);
    id.connect(&ConnParam {
        private_data: vec![client as u8],
        ..ConnParam::default()
    })
    .await
    .expect("connect");
    let (mut want, mut got) = ([0u8; SIZE], [0u8; SIZE]);
    let mut wcs = [Wc::default(); 4];
    for seq in 0..messages {
        pattern(client, seq, &mut want);
        c.mr.write(DEPTH as usize * SIZE, &want).unwrap();
        c.post_send(SEND | seq, u64::from(DEPTH));
        let (mut sent, mut echoed) = (false, false);
        while !(sent && echoed) {
            let n = cq.completions(&mut wcs).await.expect("client completions");
            for wc in &wcs[..n] {
                assert!(wc.is_ok(), "client {client} message {seq}: {wc:?}");
                if wc.opcode == WcOpcode::SEND {
                    assert!(!sent && wc.wr_id == SEND | seq, "{wc:?}");
                    sent = true;
                } else {
                    assert!(!echoed && wc.wr_id == 0, "{wc:?}");
                    assert_eq!(wc.byte_len as usize, SIZE);
                    echoed = true;
                }
            }
        }
        c.mr.read(0, &mut got).unwrap();
        assert_eq!(got, want, "client {client}: echo of message {seq}");
        c.post_recv(0);
    }
    id.disconnect().await.expect("disconnect");
    messages
}

/// `clients` async clients on one thread, all connecting at once (their
/// number, below 256, is their private data), each making `messages`
/// checked round trips with a server on another thread: one
/// current_thread runtime each, a task per connection.
fn echo(clients: u64, messages: u64) {
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let rt = runtime();
        // Registered with this thread's runtime, which serves it.
        let listener = {
            let _in = rt.enter();
            AsyncCmListener::bind(&addr(0), clients as u32).expect("listen")
        };
        tx.send(listener.local_addr().unwrap().port()).unwrap();
        tokio::task::LocalSet::new().block_on(&rt, echo_server(listener, clients))
    });
    let port = rx.recv().expect("the server's port");
    let rt = runtime();
    let sent = tokio::task::LocalSet::new().block_on(&rt, async {
        let tasks: Vec<_> = (0..clients)
            .map(|c| tokio::task::spawn_local(echo_client(addr(port), c, messages)))
            .collect();
        let mut n = 0;
        for t in tasks {
            n += t.await.expect("a client task");
        }
        n
    });
    assert_eq!(sent, clients * messages);
    let mut served = server.join().expect("the server thread");
    served.sort();
    let want: Vec<(u64, u64)> = (0..clients).map(|c| (c, messages)).collect();
    assert_eq!(
        served, want,
        "every client's messages checked and echoed by the server"
    );
}

#[test]
fn one_thread_serves_eight_async_clients_a_thousand_echoes_each() {
    echo(8, 1000);
}

/// 256 rdma_cm connections to one server at once (512 QPs, CQs and PDs
/// between the two threads), four round trips each. Each end of a
/// connection holds two fds (its id's rdma_cm channel and its CQ's
/// completion channel), so the 512 ends need more than the default soft
/// limit of 1,024 open files: raised to the hard limit first, as a server
/// of that many connections does.
#[test]
fn one_thread_serves_256_async_clients_connecting_at_once() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the one rlimit struct
    // passed, which lives across each call.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    echo(256, 4);
}

/// An `AsyncCq` and an `AsyncCmId` each cost one fd, their channel, as
/// rdma-core's channels do: the reactor watches the channel itself, not a
/// duplicate of it (which doubled the fds of a server of many
/// connections), and every fd is closed again when they are dropped.
#[test]
fn async_cqs_and_cm_ids_hold_one_fd_each() {
    let rt = runtime();
    let _in = rt.enter();
    let (ctx, _) = common::open();
    let (before, _) = common::fds_and_rss();
    let cqs: Vec<AsyncCq> = (0..8).map(|_| AsyncCq::new(&ctx, 4, 0).unwrap()).collect();
    let (with_cqs, _) = common::fds_and_rss();
    assert_eq!(with_cqs - before, 8, "8 AsyncCqs: one fd each");
    let ids: Vec<AsyncCmId> = (0..8)
        .map(|_| AsyncCmId::new(PortSpace::TCP).unwrap())
        .collect();
    let (with_ids, _) = common::fds_and_rss();
    assert_eq!(with_ids - with_cqs, 8, "8 AsyncCmIds: one fd each");
    drop(ids);
    drop(cqs);
    assert_eq!(common::fds_and_rss().0, before, "all closed again");
}

/// An id made async after an event was queued for it keeps that event:
/// `MIGRATE_ID` moves it onto the new channel without waking anyone, so
/// the channel is registered with the reactor after the move (epoll
/// checks an fd's readiness when it is added); registered before, the
/// event sat unreported until another came.
#[test]
fn an_event_queued_before_from_id_is_delivered() {
    let rt = runtime();
    rt.block_on(async {
        let chan = rverbs::cm::CmChannel::new().unwrap();
        let id = chan.create_id(PortSpace::TCP).unwrap();
        id.resolve_addr(None, &addr(7471), 2000).unwrap();
        assert!(
            chan.poll(10_000).unwrap(),
            "ADDR_RESOLVED queued within 10 s"
        );
        let id = AsyncCmId::from_id(id).unwrap();
        let ev = tokio::time::timeout(Duration::from_secs(5), id.next_event())
            .await
            .expect("the queued event reported within 5 s")
            .unwrap();
        assert_eq!(ev.kind, EventType::ADDR_RESOLVED);
    });
}

#[test]
fn connecting_to_a_port_nobody_listens_on_is_a_named_reject() {
    let rt = runtime();
    rt.block_on(async {
        // A port of a listener that is gone.
        let port = {
            let l = AsyncCmListener::bind(&addr(0), 1).unwrap();
            l.local_addr().unwrap().port()
        };
        let id = AsyncCmId::new(PortSpace::TCP).unwrap();
        id.resolve(None, &addr(port), 2000).await.expect("resolve");
        let ctx = id.id().context().unwrap();
        let cq = AsyncCq::new(&ctx, 8, 0).unwrap();
        let _c = Conn::new(id.id(), cq.cq());
        let e = tokio::time::timeout(Duration::from_secs(20), id.connect(&ConnParam::default()))
            .await
            .expect("an answer within 20 s")
            .expect_err("nobody listens");
        match &e {
            Error::CmEvent { got, status, .. } => {
                assert_eq!(*got, rverbs::cm::EventType::REJECTED, "{e}");
                assert_eq!(*status, 8, "reject reason 8: no listener: {e}");
            }
            other => panic!("not a CmEvent error: {other}"),
        }
        // The usual clean-up after a failed connect: no DISCONNECTED
        // comes for a connection never made, so this must not wait for
        // one (it waited forever).
        tokio::time::timeout(Duration::from_secs(5), id.disconnect())
            .await
            .expect("disconnect after a reject returns")
            .expect("disconnect after a reject");
    });
}

/// Two RC QPs of one device connected to each other, each with an async CQ.
struct Pair {
    ctx: Context,
    pd: Pd,
    cq_a: AsyncCq,
    cq_b: AsyncCq,
    a: Qp,
    b: Qp,
}

fn pair(depth: u32) -> Pair {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let cq_a = AsyncCq::new(&ctx, 2 * depth, 0).unwrap();
    let cq_b = AsyncCq::new(&ctx, 2 * depth, 0).unwrap();
    let mut a = pd.create_qp(&rc_init(cq_a.cq(), depth)).unwrap();
    let mut b = pd.create_qp(&rc_init(cq_b.cq(), depth)).unwrap();
    connect(&mut a, &mut b, Access::LOCAL_WRITE, self_av(&ctx)).unwrap();
    Pair {
        ctx,
        pd,
        cq_a,
        cq_b,
        a,
        b,
    }
}

/// A cheap deterministic generator for the test's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// The next item of a stream, as a future (futures-core has no `next`).
async fn next_of<S: Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
}

#[test]
fn futures_dropped_mid_flight_lose_and_repeat_no_completion() {
    const N: u64 = 2000;
    const WINDOW: u64 = 8;
    let rt = runtime();
    rt.block_on(async {
        let mut p = pair(16);
        let src = p.pd.alloc_mr(SIZE * 16, Access::LOCAL_WRITE).unwrap();
        let dst = p.pd.alloc_mr(SIZE * 16, Access::LOCAL_WRITE).unwrap();
        // Per work request: how often its completion was seen.
        let mut sends = vec![0u32; N as usize];
        let mut recvs = vec![0u32; N as usize];
        let (mut posted, mut done_s, mut done_r) = (0u64, 0u64, 0u64);
        let (mut dropped, mut rng) = (0u64, Rng(0x2545_f491_4f6c_dd1d));
        let mut want = [0u8; SIZE];
        let mut wcs = [Wc::default(); 4];
        // Counts a completion, checks it came once and its data.
        let note = |sends: &mut Vec<u32>, recvs: &mut Vec<u32>, wc: &Wc, dropped: u64| {
            assert!(wc.is_ok(), "{wc:?} after {dropped} dropped futures");
            let i = (wc.wr_id & !SEND) as usize;
            if wc.wr_id & SEND != 0 {
                sends[i] += 1;
                assert_eq!(sends[i], 1, "send {i} completed twice");
            } else {
                recvs[i] += 1;
                assert_eq!(recvs[i], 1, "receive {i} completed twice");
                assert_eq!(wc.byte_len as usize, SIZE);
                let (mut want, mut got) = ([0u8; SIZE], [0u8; SIZE]);
                dst.read((i % 16) * SIZE, &mut got).unwrap();
                pattern(7, i as u64, &mut want);
                assert_eq!(got, want, "message {i}");
            }
        };
        while done_s < N || done_r < N {
            // Keep up to WINDOW messages in flight (a receive posted
            // before its send; slot i % 16 is free again: i - 16 is done).
            while posted < N && posted - done_s.min(done_r) < WINDOW {
                let slot = (posted % 16) as usize * SIZE;
                pattern(7, posted, &mut want);
                src.write(slot, &want).unwrap();
                let r = [dst.slice(slot, SIZE as u32).unwrap()];
                p.b.post_recv(&[RecvWr {
                    wr_id: posted,
                    sges: &r,
                }])
                .unwrap();
                let s = [src.slice(slot, SIZE as u32).unwrap()];
                p.a.post_send(&[SendWr::new(SEND | posted, SendOp::Send, &s)])
                    .unwrap();
                posted += 1;
            }
            // Wait in one of several ways, most of which drop the waiting
            // future before or after its completions arrived.
            match rng.next(4) {
                0 => {
                    let d = Duration::from_micros(rng.next(400));
                    let cq = if rng.next(2) == 0 { &mut p.cq_a } else { &mut p.cq_b };
                    match tokio::time::timeout(d, cq.completions(&mut wcs)).await {
                        Ok(n) => wcs[..n.unwrap()].iter().for_each(|w| note(&mut sends, &mut recvs, w, dropped)),
                        Err(_) => dropped += 1,
                    }
                }
                1 => {
                    tokio::select! {
                        n = p.cq_a.completions(&mut wcs) => {
                            wcs[..n.unwrap()].iter().for_each(|w| note(&mut sends, &mut recvs, w, dropped));
                        }
                        _ = tokio::task::yield_now() => dropped += 1,
                    }
                }
                2 => {
                    let mut wb = [Wc::default(); 4];
                    tokio::select! {
                        n = p.cq_a.completions(&mut wcs) => {
                            wcs[..n.unwrap()].iter().for_each(|w| note(&mut sends, &mut recvs, w, dropped));
                        }
                        n = p.cq_b.completions(&mut wb) => {
                            wb[..n.unwrap()].iter().for_each(|w| note(&mut sends, &mut recvs, w, dropped));
                        }
                    }
                }
                _ => {
                    let d = Duration::from_micros(rng.next(400));
                    let cq = if rng.next(2) == 0 { &mut p.cq_a } else { &mut p.cq_b };
                    match tokio::time::timeout(d, next_of(cq)).await {
                        Ok(w) => {
                            let w = w.expect("a stream never ends").unwrap();
                            note(&mut sends, &mut recvs, &w, dropped)
                        }
                        Err(_) => dropped += 1,
                    }
                }
            }
            done_s = sends.iter().filter(|&&c| c == 1).count() as u64;
            done_r = recvs.iter().filter(|&&c| c == 1).count() as u64;
        }
        // Everything accounted for, once; nothing left behind.
        assert!(sends.iter().chain(&recvs).all(|&c| c == 1));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(p.cq_a.try_poll(&mut wcs), 0, "no completion twice");
        assert_eq!(p.cq_b.try_poll(&mut wcs), 0, "no completion twice");
        assert!(
            dropped >= 50,
            "only {dropped} futures were dropped mid-flight: the test did not exercise cancellation"
        );
        eprintln!("{N} sends and {N} receives, each once; {dropped} futures dropped mid-flight");

        // A receive whose waiting future was dropped, into an MR dropped
        // next: the device does not write the freed memory (the MR is
        // deregistered before it is unmapped); the receive completes in
        // error, once.
        let doomed = p.pd.alloc_mr(SIZE, Access::LOCAL_WRITE).unwrap();
        let r = [doomed.slice(0, SIZE as u32).unwrap()];
        p.b.post_recv(&[RecvWr {
            wr_id: 77,
            sges: &r,
        }])
        .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(20), p.cq_b.completions(&mut wcs))
                .await
                .is_err(),
            "nothing completes before the send"
        );
        drop(doomed);
        let s = [src.slice(0, SIZE as u32).unwrap()];
        p.a.post_send(&[SendWr::new(78, SendOp::Send, &s)]).unwrap();
        let n = tokio::time::timeout(Duration::from_secs(10), p.cq_b.completions(&mut wcs))
            .await
            .expect("the receive completes")
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(wcs[0].wr_id, 77);
        assert_ne!(wcs[0].status, WcStatus::SUCCESS, "{:?}", wcs[0]);
        let _ = &p.ctx;
    });
}

#[test]
fn async_events_stream_reports_the_srq_limit() {
    let rt = runtime();
    rt.block_on(async {
        let p = pair(16);
        let mut events = AsyncEvents::new(&p.ctx).expect("async events");
        let mut srq = p.pd.create_srq(16, 1, 0).unwrap();
        let buf = p.pd.alloc_mr(64 * 16, Access::LOCAL_WRITE).unwrap();
        for i in 0..8u64 {
            let s = [buf.slice(i as usize * 64, 64).unwrap()];
            srq.post_recv(&[RecvWr { wr_id: i, sges: &s }]).unwrap();
        }
        srq.set_limit(6).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), next_of(&mut events))
                .await
                .is_err(),
            "no event before the SRQ falls below its limit"
        );
        // A QP on the SRQ takes three receives: 5 left < 6.
        let cq = AsyncCq::new(&p.ctx, 64, 0).unwrap();
        let mut tx = p.pd.create_qp(&rc_init(cq.cq(), 16)).unwrap();
        let mut rx =
            p.pd.create_qp(&QpInit {
                srq: Some(&srq),
                ..rc_init(cq.cq(), 16)
            })
            .unwrap();
        connect(&mut tx, &mut rx, Access::LOCAL_WRITE, self_av(&p.ctx)).unwrap();
        let s = [buf.slice(0, 8).unwrap()];
        for i in 0..3 {
            tx.post_send(&[SendWr::new(100 + i, SendOp::Send, &s)])
                .unwrap();
        }
        let ev = tokio::time::timeout(Duration::from_secs(10), next_of(&mut events))
            .await
            .expect("the SRQ limit event within 10 s")
            .expect("a stream never ends")
            .expect("an event");
        assert_eq!(ev.event_type, AsyncEventType::SRQ_LIMIT_REACHED, "{ev:?}");
        assert_eq!(ev.element, srq.user_handle());
        // The fd is non-blocking now, as documented: the blocking read
        // says EAGAIN rather than hang.
        let e = p.ctx.get_async_event().expect_err("no second event");
        assert_eq!(e.errno(), Some(rverbs::Errno(libc::EAGAIN)), "{e}");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), events.next())
                .await
                .is_err(),
            "the event came once"
        );
    });
}

#[test]
fn the_async_echo_example_serves_eight_clients_on_one_thread() {
    let e = common::env();
    let bin = common::example_bin("async_echo");
    let mut server = common::Background::spawn(Command::new(&bin).args([
        "server",
        &e.addr,
        "0",
        "--connections",
        "8",
    ]));
    // The server's first line names its port.
    let mut out = server.0.as_mut().unwrap().stdout.take().unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while std::io::Read::read(&mut out, &mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let port = line
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let client = Command::new(&bin)
        .args([
            "client",
            &e.addr,
            &port.to_string(),
            "--clients",
            "8",
            "--messages",
            "200",
        ])
        .output()
        .unwrap();
    assert!(client.status.success(), "{}", common::show(&client));
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(
        text.contains("all 1600 echoes checked"),
        "{}",
        common::show(&client)
    );
    let done = server.wait(Duration::from_secs(60));
    assert!(done.status.success(), "{}", common::show(&done));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(
        rest.contains("served 8 connections, 1600 messages echoed"),
        "{rest}"
    );
}

//! An rdma_cm echo server that serves many clients at once on one thread
//! (a tokio `current_thread` runtime, one task per connection), and its
//! client, which runs many connections at once and checks every echo byte
//! for byte. Needs the `tokio` feature.
//!
//! ```text
//! cargo run --features tokio --example async_echo -- server ADDR PORT [--connections N]
//! cargo run --features tokio --example async_echo -- client ADDR PORT [--clients 8] [--messages 1000] [--size 64]
//! ```
//!
//! The server prints `listening on ADDR:PORT` (port 0: the kernel picks
//! one) and serves until killed, or until `--connections N` connections
//! have come and gone. The client ends with a summary line and a
//! machine-readable `ECHO mode=… rtt_us=… rate=…` line (`cargo xtask bench`
//! reads it). `--sync` runs either side on the blocking API instead, a
//! thread per connection waiting on its completion channel: the same
//! protocol, for comparison.
//!
//! The server echoes from the receive buffer itself: a message lands in
//! receive slot k, is sent back from slot k, and slot k is posted again
//! once that send completed. Each connection keeps `DEPTH` receives
//! posted; a client has one message in flight.

use rverbs::aio::{AsyncCmId, AsyncCmListener, AsyncCq};
use rverbs::cm::{CmChannel, CmId, ConnParam, EventType, PortSpace};
use rverbs::{
    Access, CompChannel, Cq, Error, Mr, Pd, Qp, QpCaps, QpInit, QpType, RecvWr, Result, SendOp,
    SendWr, Wc, WcOpcode, WcStatus,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Receives each connection keeps posted (and slots of its buffer).
const DEPTH: u32 = 4;
/// Marks a send's `wr_id` (the low bits are the slot or sequence).
const SEND: u64 = 1 << 63;
const RESOLVE_MS: u32 = 2000;

fn err(what: impl Into<String>) -> Error {
    Error::InvalidArgument { what: what.into() }
}

/// One side of a connection: `DEPTH` receive slots then one send slot of
/// `size` bytes each.
struct Conn {
    _pd: Pd,
    qp: Qp,
    mr: Mr,
    size: usize,
}

fn qp_init(cq: &Cq) -> QpInit<'_> {
    QpInit {
        qp_type: QpType::Rc,
        send_cq: cq,
        recv_cq: cq,
        caps: QpCaps {
            max_send_wr: DEPTH,
            max_recv_wr: DEPTH,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: true,
        srq: None,
    }
}

impl Conn {
    fn new(id: &CmId, cq: &Cq, size: usize) -> Result<Conn> {
        let ctx = id.context()?;
        let pd = ctx.alloc_pd()?;
        let qp = id.create_qp(&pd, &qp_init(cq))?;
        let mr = pd.alloc_mr(size * (DEPTH as usize + 1), Access::LOCAL_WRITE)?;
        Ok(Conn {
            _pd: pd,
            qp,
            mr,
            size,
        })
    }

    fn post_recv(&mut self, slot: u64) -> Result<()> {
        let sge = [self.mr.slice(slot as usize * self.size, self.size as u32)?];
        self.qp.post_recv(&[RecvWr {
            wr_id: slot,
            sges: &sge,
        }])
    }

    /// Sends `len` bytes of slot `slot` (`DEPTH`: the send slot).
    fn post_send(&mut self, wr_id: u64, slot: u64, len: u32) -> Result<()> {
        let sge = [self.mr.slice(slot as usize * self.size, len)?];
        self.qp.post_send(&[SendWr::new(wr_id, SendOp::Send, &sge)])
    }

    /// The server's handling of one completion: a message in slot k goes
    /// back from slot k; when that send completed, slot k is posted again.
    /// `Ok(false)`: a flushed request, the connection is going away.
    fn echo(&mut self, wc: &Wc) -> Result<bool> {
        if wc.status == WcStatus::WR_FLUSH_ERR {
            return Ok(false);
        }
        if !wc.is_ok() {
            return Err(err(format!("work request {:#x}: {}", wc.wr_id, wc.status)));
        }
        let slot = wc.wr_id & !SEND;
        if wc.opcode == WcOpcode::RECV {
            self.post_send(SEND | slot, slot, wc.byte_len)?;
        } else {
            self.post_recv(slot)?;
        }
        Ok(true)
    }
}

/// The bytes of message `seq` of client `client`: different in every
/// message and every position, so that a misplaced or stale byte shows.
fn pattern(client: u64, seq: u64, out: &mut [u8]) {
    let mut x = (client << 32 | seq).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in out.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

/// What one client measured.
struct Tally {
    messages: u64,
    rtt: Duration,
}

// ---- async ----

async fn serve_async(id: AsyncCmId, cq: AsyncCq, mut conn: Conn) -> Result<u64> {
    let mut cq = cq;
    id.accept(&ConnParam::default()).await?;
    let mut wcs = [Wc::default(); 8];
    let mut echoed = 0;
    loop {
        // Whichever comes first; the other future is dropped, which
        // loses nothing (see rverbs::aio's cancellation safety).
        tokio::select! {
            n = cq.completions(&mut wcs) => {
                for wc in &wcs[..n?] {
                    if !conn.echo(wc)? {
                        continue;
                    }
                    echoed += u64::from(wc.opcode == WcOpcode::RECV);
                }
            }
            ev = id.next_event() => {
                if ev?.kind == EventType::DISCONNECTED {
                    // Answer the peer's disconnect at once (its
                    // `DISCONNECTED` waits for this).
                    id.disconnect().await?;
                    return Ok(echoed);
                }
            }
        }
    }
}

async fn server_async(addr: SocketAddr, connections: Option<u64>, size: usize) -> Result<()> {
    let listener = AsyncCmListener::bind(&addr, 64)?;
    println!("listening on {}", listener.local_addr()?);
    let mut tasks = Vec::new();
    let mut accepted = 0;
    while connections.is_none_or(|n| accepted < n) {
        let req = listener.get_request().await?;
        let ctx = req.id.id().context()?;
        let cq = AsyncCq::new(&ctx, 2 * DEPTH, 0)?;
        let mut conn = Conn::new(req.id.id(), cq.cq(), size)?;
        for slot in 0..u64::from(DEPTH) {
            conn.post_recv(slot)?;
        }
        accepted += 1;
        // The accept and the echo loop run in the connection's own task,
        // so that the next request is taken at once.
        tasks.push(tokio::task::spawn_local(serve_async(req.id, cq, conn)));
    }
    let mut echoed = 0;
    for t in tasks {
        echoed += t
            .await
            .map_err(|e| err(format!("connection task: {e}")))??;
    }
    println!("served {accepted} connections, {echoed} messages echoed");
    Ok(())
}

async fn client_async(dst: SocketAddr, client: u64, messages: u64, size: usize) -> Result<Tally> {
    let id = AsyncCmId::new(PortSpace::TCP)?;
    id.resolve(None, &dst, RESOLVE_MS).await?;
    let ctx = id.id().context()?;
    let mut cq = AsyncCq::new(&ctx, 2 * DEPTH, 0)?;
    let mut conn = Conn::new(id.id(), cq.cq(), size)?;
    conn.post_recv(0)?;
    id.connect(&ConnParam::default()).await?;
    let (mut want, mut got) = (vec![0u8; size], vec![0u8; size]);
    let mut wcs = [Wc::default(); 4];
    let mut rtt = Duration::ZERO;
    for seq in 0..messages {
        pattern(client, seq, &mut want);
        conn.mr.write(DEPTH as usize * size, &want)?;
        let start = Instant::now();
        conn.post_send(SEND | seq, u64::from(DEPTH), size as u32)?;
        let (mut sent, mut echoed) = (false, false);
        while !(sent && echoed) {
            let n = cq.completions(&mut wcs).await?;
            for wc in &wcs[..n] {
                if !wc.is_ok() {
                    return Err(err(format!(
                        "client {client}, message {seq}: {}",
                        wc.status
                    )));
                }
                match wc.opcode {
                    WcOpcode::SEND => sent = true,
                    _ => {
                        if wc.byte_len as usize != size {
                            return Err(err(format!(
                                "client {client}, message {seq}: echo of {} bytes, sent {size}",
                                wc.byte_len
                            )));
                        }
                        echoed = true;
                    }
                }
            }
        }
        rtt += start.elapsed();
        conn.mr.read(0, &mut got)?;
        if got != want {
            return Err(err(format!(
                "client {client}, message {seq}: the echo differs from what was sent"
            )));
        }
        conn.post_recv(0)?;
    }
    id.disconnect().await?;
    Ok(Tally { messages, rtt })
}

// ---- sync: the same protocol on the blocking API ----

/// Waits on `chan` for completions of `cq` (arm, poll again, then block).
fn wait_sync(cq: &mut Cq, chan: &CompChannel, out: &mut [Wc]) -> Result<usize> {
    loop {
        let n = cq.poll(out);
        if n > 0 {
            return Ok(n);
        }
        cq.req_notify(false)?;
        let n = cq.poll(out);
        if n > 0 {
            return Ok(n);
        }
        chan.get_event()?;
    }
}

fn server_sync(addr: SocketAddr, connections: Option<u64>, size: usize) -> Result<()> {
    let chan = CmChannel::new()?;
    let listener = chan.create_id(PortSpace::TCP)?;
    listener.bind(&addr)?;
    listener.listen(64)?;
    println!("listening on {}", listener.local_addr()?);
    let mut threads = Vec::new();
    let mut ids = Vec::new();
    let (mut accepted, mut gone) = (0, 0);
    while connections.is_none_or(|n| gone < n) {
        let ev = chan.get_event()?;
        match ev.kind {
            EventType::CONNECT_REQUEST => {
                let id = ev
                    .request
                    .ok_or_else(|| err("CONNECT_REQUEST without an id"))?;
                let ctx = id.context()?;
                let cchan = ctx.create_comp_channel()?;
                let mut cq = ctx.create_cq(2 * DEPTH, Some(&cchan), 0)?;
                let mut conn = Conn::new(&id, &cq, size)?;
                for slot in 0..u64::from(DEPTH) {
                    conn.post_recv(slot)?;
                }
                id.accept(&ConnParam::default())?;
                accepted += 1;
                // The connection's thread echoes until its receives flush
                // (the QP goes to ERR at DISCONNECTED).
                threads.push(std::thread::spawn(move || -> Result<u64> {
                    let mut wcs = [Wc::default(); 8];
                    let mut echoed = 0;
                    loop {
                        let n = wait_sync(&mut cq, &cchan, &mut wcs)?;
                        for wc in &wcs[..n] {
                            if !conn.echo(wc)? {
                                return Ok(echoed);
                            }
                            echoed += u64::from(wc.opcode == WcOpcode::RECV);
                        }
                    }
                }));
                ids.push(id);
            }
            EventType::DISCONNECTED => {
                // Answer the peer's disconnect at once (its
                // `DISCONNECTED` waits for this) and let the id go.
                if let Some(i) = ids.iter().position(|id: &CmId| id.uid() == ev.uid) {
                    ids.swap_remove(i).disconnect()?;
                }
                gone += 1;
            }
            _ => {}
        }
    }
    let mut echoed = 0;
    for t in threads {
        echoed += t
            .join()
            .map_err(|_| err("a connection thread panicked"))??;
    }
    println!("served {accepted} connections, {echoed} messages echoed");
    Ok(())
}

fn client_sync(dst: SocketAddr, client: u64, messages: u64, size: usize) -> Result<Tally> {
    let chan = CmChannel::new()?;
    let id = chan.create_id(PortSpace::TCP)?;
    id.resolve(None, &dst, RESOLVE_MS)?;
    let ctx = id.context()?;
    let cchan = ctx.create_comp_channel()?;
    let mut cq = ctx.create_cq(2 * DEPTH, Some(&cchan), 0)?;
    let mut conn = Conn::new(&id, &cq, size)?;
    conn.post_recv(0)?;
    id.connect_sync(&ConnParam::default())?;
    let (mut want, mut got) = (vec![0u8; size], vec![0u8; size]);
    let mut wcs = [Wc::default(); 4];
    let mut rtt = Duration::ZERO;
    for seq in 0..messages {
        pattern(client, seq, &mut want);
        conn.mr.write(DEPTH as usize * size, &want)?;
        let start = Instant::now();
        conn.post_send(SEND | seq, u64::from(DEPTH), size as u32)?;
        let mut done = 0;
        while done < 2 {
            let n = wait_sync(&mut cq, &cchan, &mut wcs)?;
            for wc in &wcs[..n] {
                if !wc.is_ok() || (wc.opcode == WcOpcode::RECV && wc.byte_len as usize != size) {
                    return Err(err(format!("client {client}, message {seq}: {wc:?}")));
                }
                done += 1;
            }
        }
        rtt += start.elapsed();
        conn.mr.read(0, &mut got)?;
        if got != want {
            return Err(err(format!(
                "client {client}, message {seq}: the echo differs from what was sent"
            )));
        }
        conn.post_recv(0)?;
    }
    id.disconnect()?;
    id.wait_event(EventType::DISCONNECTED)?;
    Ok(Tally { messages, rtt })
}

// ---- command line ----

struct Args {
    server: bool,
    addr: SocketAddr,
    sync: bool,
    connections: Option<u64>,
    clients: u64,
    messages: u64,
    size: usize,
}

const USAGE: &str = "usage: async_echo server ADDR PORT [--connections N] [--size BYTES] [--sync]\n       async_echo client ADDR PORT [--clients N] [--messages N] [--size BYTES] [--sync]";

fn parse() -> std::result::Result<Args, String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 3 {
        return Err(USAGE.into());
    }
    let server = match a[0].as_str() {
        "server" => true,
        "client" => false,
        _ => return Err(USAGE.into()),
    };
    let addr = format!("{}:{}", a[1], a[2])
        .parse::<SocketAddr>()
        .map_err(|e| format!("{} {}: {e}", a[1], a[2]))?;
    let mut args = Args {
        server,
        addr,
        sync: false,
        connections: None,
        clients: 8,
        messages: 1000,
        size: 64,
    };
    let mut it = a[3..].iter();
    while let Some(opt) = it.next() {
        if opt == "--sync" {
            args.sync = true;
            continue;
        }
        let v = it
            .next()
            .ok_or_else(|| format!("{opt} needs a value"))?
            .parse::<u64>()
            .map_err(|e| format!("{opt}: {e}"))?;
        match opt.as_str() {
            "--connections" => args.connections = Some(v),
            "--clients" => args.clients = v,
            "--messages" => args.messages = v,
            "--size" if (1..=1 << 20).contains(&v) => args.size = v as usize,
            _ => return Err(format!("{opt} {v}: not an option here\n{USAGE}")),
        }
    }
    Ok(args)
}

fn run(a: &Args) -> Result<()> {
    if a.server {
        if a.sync {
            return server_sync(a.addr, a.connections, a.size);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| err(format!("tokio runtime: {e}")))?;
        let local = tokio::task::LocalSet::new();
        return local.block_on(&rt, server_async(a.addr, a.connections, a.size));
    }
    let start = Instant::now();
    let tallies: Vec<Tally> = if a.sync {
        let threads: Vec<_> = (0..a.clients)
            .map(|c| {
                let (addr, n, size) = (a.addr, a.messages, a.size);
                std::thread::spawn(move || client_sync(addr, c, n, size))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().map_err(|_| err("a client thread panicked"))?)
            .collect::<Result<_>>()?
    } else {
        // Every client on this one thread.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| err(format!("tokio runtime: {e}")))?;
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let tasks: Vec<_> = (0..a.clients)
                .map(|c| tokio::task::spawn_local(client_async(a.addr, c, a.messages, a.size)))
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.map_err(|e| err(format!("client task: {e}")))??);
            }
            Ok::<_, Error>(out)
        })?
    };
    let wall = start.elapsed();
    let total: u64 = tallies.iter().map(|t| t.messages).sum();
    let rtt_us =
        tallies.iter().map(|t| t.rtt.as_secs_f64()).sum::<f64>() * 1e6 / (total.max(1) as f64);
    let rate = total as f64 / wall.as_secs_f64();
    println!(
        "{} clients x {} messages of {} bytes: all {total} echoes checked; mean round trip {rtt_us:.1} us, {rate:.0} messages/s",
        a.clients, a.messages, a.size
    );
    println!(
        "ECHO mode={} clients={} messages={} size={} rtt_us={rtt_us:.2} rate={rate:.1}",
        if a.sync { "sync" } else { "async" },
        a.clients,
        a.messages,
        a.size
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_echo: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! `rverbs rping`: wire-compatible with rdma-core's `rping`.
//!
//! Per ping the client advertises its source buffer (address, rkey, size;
//! big-endian, 16 bytes) in a SEND; the server RDMA READs it, answers with
//! a SEND ("go ahead"), the client advertises its sink buffer, the server
//! RDMA WRITEs the data back into it and answers again; with `-V` the
//! client compares sink and source. The data is rping's: `rdma-ping-N: `
//! then letters cycling from `A`+N through `z`, NUL-terminated. Either side
//! can be rdma-core's.
//!
//! Unlike rdma-core's, no wait after the connection request is unbounded
//! (`--timeout`): a peer that dies or stops answering ends the program.

use super::cm_common::{get_addr, invalid};
use super::wait::{parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::cm::{CmChannel, CmId, ConnParam, EventType, PortSpace};
use rverbs::{
    Access, CompChannel, Cq, Error, Mr, Pd, Qp, QpInit, QpType, RecvWr, Remote, Result, SendOp,
    SendWr, Wc, WcOpcode, WcStatus,
};
use rverbs_tool::wire::rping::{Info, INFO_LEN};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// rping's send-queue depth and buffer limits.
const SQ_DEPTH: u32 = 16;
const BUFSIZE: usize = 64 * 1024;
/// `sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT)`.
const MIN_BUFSIZE: usize = 11 + 15;

#[derive(Args)]
pub struct RpingArgs {
    /// Server side.
    #[arg(short = 's')]
    server: bool,
    /// Client side.
    #[arg(short = 'c')]
    client: bool,
    /// Address (the server's to connect to; for a server, the one to bind,
    /// default any).
    #[arg(short = 'a')]
    addr: Option<String>,
    /// Source address to bind to (client).
    #[arg(short = 'I')]
    source: Option<String>,
    /// Port.
    #[arg(short = 'p', default_value_t = 7174)]
    port: u16,
    /// Ping count (0: forever).
    #[arg(short = 'C', default_value_t = 0)]
    count: u32,
    /// Ping data size.
    #[arg(short = 'S', default_value_t = 64)]
    size: usize,
    /// Display ping data.
    #[arg(short = 'v')]
    verbose: bool,
    /// Validate ping data.
    #[arg(short = 'V')]
    validate: bool,
    /// Debug prints.
    #[arg(short = 'd')]
    debug: bool,
    /// Give up after this many seconds without progress (no completion,
    /// no connection event). A server waits for its client's connection
    /// request without limit.
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    timeout: Timeout,
}

macro_rules! debug {
    ($a:expr, $($t:tt)*) => { if $a.debug { println!($($t)*); } };
}

/// The buffers and verbs objects of one connection.
struct Session {
    cc: CompChannel,
    cq: Cq,
    qp: Qp,
    recv_mr: Mr,
    send_mr: Mr,
    rdma_mr: Mr,
    start_mr: Option<Mr>,
    size: usize,
    timeout: Timeout,
    _pd: Pd,
}

/// What a completion meant for the protocol.
enum Step {
    /// A receive with the peer's buffer info.
    Recv { addr: u64, rkey: u32, len: u32 },
    /// An RDMA READ or WRITE finished.
    Rdma(WcOpcode),
    /// The connection went away (a flushed completion).
    Disconnected,
}

impl Session {
    fn new(id: &CmId, size: usize, client: bool, timeout: Timeout) -> Result<Session> {
        let ctx = id.context()?;
        let pd = ctx.alloc_pd()?;
        let cc = ctx.create_comp_channel()?;
        let mut cq = ctx.create_cq(SQ_DEPTH * 2, Some(&cc), 0)?;
        cq.req_notify(false)?;
        let qp = id.create_qp(
            &pd,
            &QpInit {
                qp_type: QpType::Rc,
                send_cq: &cq,
                recv_cq: &cq,
                caps: super::cm_common::one_sge_caps(SQ_DEPTH, 2),
                sq_sig_all: false,
                srq: None,
            },
        )?;
        let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let recv_mr = pd.alloc_mr(INFO_LEN, Access::LOCAL_WRITE)?;
        let send_mr = pd.alloc_mr(INFO_LEN, Access::empty())?;
        let rdma_mr = pd.alloc_mr(size, rw)?;
        let start_mr = if client {
            Some(pd.alloc_mr(size, rw)?)
        } else {
            None
        };
        Ok(Session {
            cc,
            cq,
            qp,
            recv_mr,
            send_mr,
            rdma_mr,
            start_mr,
            size,
            timeout,
            _pd: pd,
        })
    }

    fn post_recv(&mut self) -> Result<()> {
        self.qp.post_recv(&[RecvWr {
            wr_id: 0,
            sges: &[self.recv_mr.all()?],
        }])
    }

    /// SENDs the 16-byte buffer info (or, from the server, whatever is in
    /// the send buffer: rping's "go ahead" carries zeros).
    fn send_info(&mut self, info: Option<Info>) -> Result<()> {
        if let Some(info) = info {
            self.send_mr.write(0, &info.encode())?;
        }
        let sge = [self.send_mr.all()?];
        let mut wr = SendWr::new(1, SendOp::Send, &sge);
        wr.signaled = true;
        self.qp.post_send(std::slice::from_ref(&wr))
    }

    fn rdma(&mut self, op: SendOp, len: u32) -> Result<()> {
        let sge = [self.rdma_mr.slice(0, len)?];
        let mut wr = SendWr::new(2, op, &sge);
        wr.signaled = true;
        self.qp.post_send(std::slice::from_ref(&wr))
    }

    /// The next completion (sleeping on the completion channel), at most
    /// the timeout.
    fn next_wc(&mut self) -> Result<Wc> {
        let mut wc = [Wc::default(); 1];
        loop {
            if self.cq.poll(&mut wc) == 1 {
                return Ok(wc[0]);
            }
            self.cq.req_notify(false)?;
            if self.cq.poll(&mut wc) == 1 {
                return Ok(wc[0]);
            }
            self.timeout
                .event(&self.cc, || "a completion from the peer".into())?;
        }
    }

    /// Waits for the next receive or RDMA completion (send completions
    /// only confirm what the peer's answers confirm too); reposts each
    /// receive as rping does.
    fn next_step(&mut self) -> Result<Step> {
        loop {
            let wc = self.next_wc()?;
            if wc.status == WcStatus::WR_FLUSH_ERR {
                return Ok(Step::Disconnected);
            }
            if wc.status != WcStatus::SUCCESS {
                eprintln!("cq completion failed status {}", wc.status.0);
                return Err(invalid(format!(
                    "completion failed with status {}",
                    wc.status.0
                )));
            }
            match wc.opcode {
                WcOpcode::SEND => continue,
                WcOpcode::RECV => {
                    if wc.byte_len as usize != INFO_LEN {
                        eprintln!("Received bogus data, size {}", wc.byte_len);
                        return Err(invalid("bogus receive"));
                    }
                    let mut b = [0u8; INFO_LEN];
                    self.recv_mr.read(0, &mut b)?;
                    self.post_recv()?;
                    let Info { addr, rkey, len } = Info::decode(&b).map_err(|e| Error::Io {
                        what: "receiving the peer's buffer info".into(),
                        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                    })?;
                    return Ok(Step::Recv { addr, rkey, len });
                }
                op => return Ok(Step::Rdma(op)),
            }
        }
    }

    /// The NUL-terminated text at the start of the sink buffer.
    fn rdma_text(&self) -> Result<String> {
        let mut b = vec![0u8; self.size];
        self.rdma_mr.read(0, &mut b)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(String::from_utf8_lossy(&b[..end]).into_owned())
    }
}

fn wrong_state(what: &str) -> Error {
    eprintln!("wait for {what} state");
    invalid(format!("rping protocol: expected {what}"))
}

/// rping's cm thread: reads cm events until DISCONNECTED (the processing
/// moves the QP to ERR, so the data path sees flushes), or until told to
/// stop.
struct CmThread {
    handle: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

impl CmThread {
    fn spawn(chan: Arc<CmChannel>, side: &'static str) -> CmThread {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match chan.poll(100) {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(_) => return,
                }
                match chan.get_event() {
                    Ok(ev) if ev.kind == EventType::DISCONNECTED => {
                        eprintln!("{side} DISCONNECT EVENT...");
                        return;
                    }
                    Ok(ev) => eprintln!("unhandled event: {}, ignoring", ev.name()),
                    Err(_) => return,
                }
            }
        });
        CmThread { handle, stop }
    }

    /// After our disconnect: waits for the DISCONNECTED event (the peer's
    /// answer) at most `limit`, then stops the thread.
    fn finish(self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.handle.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
    }
}

/// The next cm event, which must be `want`; at most `limit` (`None`: no
/// limit, for a server's first connection request).
fn expect(
    chan: &Arc<CmChannel>,
    want: EventType,
    limit: Option<Timeout>,
) -> Result<rverbs::cm::CmEvent> {
    let r = super::cm_common::expect_event(chan, want, limit);
    if let Err(Error::CmEvent { got, status, .. }) = &r {
        eprintln!("cma event {got}, error {status}");
    }
    r
}

fn run_server(a: &RpingArgs) -> Result<()> {
    let chan = CmChannel::new()?;
    let listen = chan.create_id(PortSpace::TCP)?;
    let addr = match &a.addr {
        Some(h) => get_addr(h, a.port)?,
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), a.port),
    };
    listen.bind(&addr)?;
    debug!(a, "rdma_listen");
    listen.listen(3)?;
    let ev = expect(&chan, EventType::CONNECT_REQUEST, None)?;
    let id = ev
        .request
        .ok_or_else(|| invalid("CONNECT_REQUEST without a new id"))?;
    debug!(a, "child cma {}", id.uid());
    let mut s = Session::new(&id, a.size, false, a.timeout)?;
    s.post_recv()?;
    debug!(a, "accepting client connection request");
    id.accept(&ConnParam::default())?;
    expect(&chan, EventType::ESTABLISHED, Some(a.timeout))?;
    let cm = CmThread::spawn(chan.clone(), "server");
    let r = serve(a, &mut s);
    let _ = id.disconnect();
    cm.finish(if r.is_ok() {
        a.timeout.duration()
    } else {
        Duration::ZERO
    });
    if let Err(e) = &r {
        eprintln!("rping server failed: {e}");
    }
    r
}

fn serve(a: &RpingArgs, s: &mut Session) -> Result<()> {
    loop {
        // The client's source buffer.
        let (addr, rkey, len) = match s.next_step()? {
            Step::Recv { addr, rkey, len } => (addr, rkey, len),
            Step::Disconnected => return Ok(()),
            Step::Rdma(_) => return Err(wrong_state("RDMA_READ_ADV")),
        };
        debug!(
            a,
            "Received rkey {rkey:x} addr {addr:x} len {len} from peer"
        );
        if len as usize > s.size {
            eprintln!(
                "client buffer of {len} bytes is larger than ours ({})",
                s.size
            );
            return Err(invalid("peer buffer larger than ours (use the same -S)"));
        }
        s.rdma(SendOp::Read(Remote { addr, rkey }), len)?;
        match s.next_step()? {
            Step::Rdma(WcOpcode::RDMA_READ) => {}
            Step::Disconnected => return Ok(()),
            _ => return Err(wrong_state("RDMA_READ_COMPLETE")),
        }
        let text = s.rdma_text()?;
        if a.verbose {
            println!("server ping data: {text}");
        }
        s.send_info(None)?;
        // The client's sink buffer.
        let (addr, rkey) = match s.next_step()? {
            Step::Recv { addr, rkey, .. } => (addr, rkey),
            Step::Disconnected => return Ok(()),
            Step::Rdma(_) => return Err(wrong_state("RDMA_WRITE_ADV")),
        };
        // strlen + 1, as rping writes it.
        let wlen = (text.len() + 1).min(s.size) as u32;
        s.rdma(SendOp::Write(Remote { addr, rkey }), wlen)?;
        match s.next_step()? {
            Step::Rdma(WcOpcode::RDMA_WRITE) => {}
            Step::Disconnected => return Ok(()),
            _ => return Err(wrong_state("RDMA_WRITE_COMPLETE")),
        }
        debug!(a, "server rdma write complete");
        s.send_info(None)?;
    }
}

fn run_client(a: &RpingArgs) -> Result<()> {
    let host = a
        .addr
        .as_deref()
        .ok_or_else(|| invalid("the client needs -a ADDR"))?;
    let dst = get_addr(host, a.port)?;
    let src = a.source.as_deref().map(|h| get_addr(h, 0)).transpose()?;
    let chan = CmChannel::new()?;
    let id = chan.create_id(PortSpace::TCP)?;
    id.resolve_addr(src.as_ref(), &dst, 2000)?;
    expect(&chan, EventType::ADDR_RESOLVED, Some(a.timeout))?;
    id.resolve_route(2000)?;
    expect(&chan, EventType::ROUTE_RESOLVED, Some(a.timeout))?;
    debug!(a, "rdma_resolve_addr - rdma_resolve_route successful");
    let mut s = Session::new(&id, a.size, true, a.timeout)?;
    s.post_recv()?;
    id.connect(&ConnParam {
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    })?;
    expect(&chan, EventType::ESTABLISHED, Some(a.timeout))?;
    debug!(a, "rdma_connect successful");
    let cm = CmThread::spawn(chan.clone(), "client");
    let r = ping(a, &mut s);
    let _ = id.disconnect();
    cm.finish(if r.is_ok() {
        a.timeout.duration()
    } else {
        Duration::ZERO
    });
    if let Err(e) = &r {
        eprintln!("rping client failed: {e}");
    }
    r
}

/// rping's ping data for ping `n` starting at letter `start`.
fn pattern(buf: &mut [u8], n: u32, start: u8) {
    let head = format!("rdma-ping-{n}: ");
    let cc = head.len().min(buf.len());
    buf[..cc].copy_from_slice(&head.as_bytes()[..cc]);
    let mut c = start;
    for b in &mut buf[cc..] {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
}

fn ping(a: &RpingArgs, s: &mut Session) -> Result<()> {
    let mut start = 65u8;
    let mut src = vec![0u8; s.size];
    let mut n = 0u32;
    while a.count == 0 || n < a.count {
        pattern(&mut src, n, start);
        start = if start >= 122 { 65 } else { start + 1 };
        let (saddr, srkey) = {
            let m = s
                .start_mr
                .as_ref()
                .ok_or_else(|| invalid("no source buffer"))?;
            m.write(0, &src)?;
            (m.addr(), m.rkey())
        };
        s.send_info(Some(Info {
            addr: saddr,
            rkey: srkey,
            len: s.size as u32,
        }))?;
        match s.next_step()? {
            Step::Recv { .. } => {}
            Step::Disconnected => return Err(wrong_state("RDMA_WRITE_ADV")),
            Step::Rdma(_) => return Err(wrong_state("RDMA_WRITE_ADV")),
        }
        let sink = Info {
            addr: s.rdma_mr.addr(),
            rkey: s.rdma_mr.rkey(),
            len: s.size as u32,
        };
        s.send_info(Some(sink))?;
        match s.next_step()? {
            Step::Recv { .. } => {}
            _ => return Err(wrong_state("RDMA_WRITE_COMPLETE")),
        }
        if a.validate {
            let mut got = vec![0u8; s.size];
            s.rdma_mr.read(0, &mut got)?;
            if got != src {
                eprintln!("data mismatch!");
                return Err(invalid("data mismatch"));
            }
        }
        if a.verbose {
            println!("ping data: {}", s.rdma_text()?);
        }
        n += 1;
    }
    Ok(())
}

pub fn rping(a: &RpingArgs) -> Result<ExitCode> {
    if a.size < MIN_BUFSIZE || a.size > BUFSIZE - 1 {
        eprintln!(
            "Invalid size {} (valid range is {MIN_BUFSIZE} to {BUFSIZE})",
            a.size
        );
        return Ok(ExitCode::FAILURE);
    }
    if a.server == a.client {
        eprintln!("rping: give exactly one of -s (server) and -c (client)");
        return Ok(ExitCode::FAILURE);
    }
    let r = if a.server {
        run_server(a)
    } else {
        run_client(a)
    };
    match r {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::pattern;

    #[test]
    fn the_ping_data_is_rpings() {
        let mut b = [0u8; 26];
        pattern(&mut b, 3, 120);
        assert_eq!(&b[..13], b"rdma-ping-3: ");
        // x y z then back to A, NUL last.
        assert_eq!(&b[13..17], b"xyzA");
        assert_eq!(b[25], 0);
        assert_eq!(b[24], b'A' + 8);
    }
}

//! Setting up the QP pair across two processes and running each test.

use super::super::wait::{bad_value, failed_completion, Timeout};
use super::{report, PerfArgs, Test};
use rverbs::{
    Access, AhAttr, CompChannel, Context, Cq, Error, Grh, Mr, Mtu, Qp, QpAttr, QpCaps, QpInit,
    QpType, RecvWr, Remote, Result, SendOp, SendWr, Wc,
};
use rverbs_tool::wire::perf::{Peer, MSG_LEN, PROGRESS, SYNC};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Signal one work request in this many on bandwidth tests (perftest's
/// default CQ moderation).
const CQ_MOD: u32 = 100;
/// Receives kept posted by a send-bandwidth server.
const RX_DEPTH: u32 = 512;
/// Latency samples reserved up front (more grow the vector as they come).
const SAMPLES_RESERVED: u32 = 1 << 20;

struct Bench {
    cq: Cq,
    qp: Qp,
    mr: Mr,
    channel: Option<CompChannel>,
    /// Bytes per region: region 0 is what we send from / read into, region
    /// 1 is what the peer targets.
    region: usize,
    remote: Remote,
    inline: bool,
    /// The payload of inline sends and writes (its content does not matter
    /// to the measurement).
    zeros: Vec<u8>,
    /// How long a wait may see no progress.
    timeout: Timeout,
    heartbeat: Heartbeat,
}

/// The active side's [`PROGRESS`] bytes: one every quarter of the timeout
/// while it runs, so that a passive side (which sees no completions) knows
/// it is alive.
struct Heartbeat {
    sock: TcpStream,
    every: Duration,
    last: Instant,
}

impl Heartbeat {
    fn beat(&mut self, t: Timeout) -> Result<()> {
        if self.last.elapsed() >= self.every {
            self.sock
                .write_all(&[PROGRESS])
                .map_err(|e| t.tcp_error("telling the peer the test goes on", e))?;
            self.last = Instant::now();
        }
        Ok(())
    }
}

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        what: what.into(),
        source: e,
    }
}

/// Checks the sizes and depths asked for against the device's limits;
/// returns the CQ size.
fn check_limits(ctx: &Context, a: &PerfArgs) -> Result<u32> {
    let dev = ctx.query_device()?;
    if a.tx_depth > dev.max_qp_wr {
        return Err(bad_value(format!(
            "-t {}: larger than the device's max_qp_wr ({})",
            a.tx_depth, dev.max_qp_wr
        )));
    }
    let cqe = a
        .tx_depth
        .checked_mul(2)
        .and_then(|d| d.checked_add(RX_DEPTH))
        .filter(|&c| c <= dev.max_cqe)
        .ok_or_else(|| {
            bad_value(format!(
                "-t {}: its CQ (2 x tx-depth + {RX_DEPTH} receives) exceeds the device's max_cqe ({})",
                a.tx_depth, dev.max_cqe
            ))
        })?;
    let port = ctx.query_port(a.ib_port)?;
    if a.size > port.max_msg_sz {
        return Err(bad_value(format!(
            "-s {}: larger than the port's largest message ({} bytes)",
            a.size, port.max_msg_sz
        )));
    }
    Ok(cqe)
}

pub fn run(a: &PerfArgs) -> Result<ExitCode> {
    let ctx = Context::open_by_name(a.dev.as_deref())?;
    let cqe = check_limits(&ctx, a)?;
    let region = (a.size.max(8) as usize).next_multiple_of(64);
    let channel = if a.events {
        Some(ctx.create_comp_channel()?)
    } else {
        None
    };
    let pd = ctx.alloc_pd()?;
    let mr = pd.alloc_mr(
        region * 2,
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
    )?;
    let depth = a.tx_depth;
    let cq = ctx.create_cq(cqe, channel.as_ref(), 0)?;
    let mut qp = pd.create_qp(&QpInit {
        qp_type: QpType::Rc,
        send_cq: &cq,
        recv_cq: &cq,
        caps: QpCaps {
            max_send_wr: depth,
            max_recv_wr: RX_DEPTH,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: a.inline,
        },
        sq_sig_all: false,
        srq: None,
    })?;
    let inline = a.inline >= a.size && qp.caps().max_inline_data >= a.size;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    qp.modify(&QpAttr::init(a.ib_port, access))?;
    let gid = match a.gid_idx {
        Some(i) => ctx.query_gid(a.ib_port, i)?,
        None => [0; 16],
    };
    let me = Peer {
        qpn: qp.qpn(),
        psn: std::process::id() & 0xff_ffff,
        gid,
        rkey: mr.rkey(),
        addr: mr.addr() + region as u64,
    };
    let (mut sock, peer) = exchange(a, &me)?;
    let heartbeat = Heartbeat {
        sock: sock
            .try_clone()
            .map_err(|e| io("cloning the TCP socket", e))?,
        every: a.timeout.duration() / 4,
        last: Instant::now(),
    };
    let mut rtr = QpAttr::rtr(
        AhAttr {
            port_num: a.ib_port,
            grh: (peer.gid != [0; 16]).then_some(Grh {
                dgid: peer.gid,
                sgid_index: a.gid_idx.unwrap_or(0) as u8,
                hop_limit: 1,
                ..Grh::default()
            }),
            ..AhAttr::default()
        },
        Mtu::M1024,
        peer.qpn,
        peer.psn,
    );
    rtr.max_dest_rd_atomic = Some(16);
    qp.modify(&rtr)?;
    let mut rts = QpAttr::rts(me.psn);
    rts.max_rd_atomic = Some(16);
    qp.modify(&rts)?;
    let mut b = Bench {
        cq,
        qp,
        mr,
        channel,
        region,
        remote: Remote {
            addr: peer.addr,
            rkey: peer.rkey,
        },
        inline,
        zeros: if inline {
            vec![0; a.size as usize]
        } else {
            Vec::new()
        },
        timeout: a.timeout,
        heartbeat,
    };
    if b.channel.is_some() {
        b.cq.req_notify(false)?;
    }
    // Both sides are connected before either sends.
    sync(&mut sock, a.timeout, "before the test")?;
    let client = a.server.is_some();
    match (a.test, client) {
        (Test::SendLat, _) => b.send_lat(a, client)?,
        (Test::WriteLat, _) => b.write_lat(a, client)?,
        (Test::ReadLat | Test::AtomicLat, true) => b.one_sided_lat(a)?,
        (Test::SendBw, false) => b.send_bw_server(a)?,
        (Test::WriteBw | Test::ReadBw | Test::AtomicBw | Test::SendBw, true) => b.bw(a)?,
        // The passive side of one-sided tests has nothing to do but wait
        // (in the sync below, hearing the active side's progress bytes).
        _ => {}
    }
    sync(&mut sock, a.timeout, "at the end of the test")?;
    Ok(ExitCode::SUCCESS)
}

fn exchange(a: &PerfArgs, me: &Peer) -> Result<(TcpStream, Peer)> {
    let t = a.timeout;
    let mut s = match &a.server {
        Some(host) => {
            // The server may not listen yet: try for ten seconds.
            let mut tries = 0;
            loop {
                match t.connect(host, a.port) {
                    Ok(s) => break s,
                    Err(e) if tries > 100 => {
                        return Err(t.tcp_error(&format!("connect to {host}:{}", a.port), e))
                    }
                    Err(_) => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        }
        None => {
            let l = TcpListener::bind(("::", a.port))
                .or_else(|_| TcpListener::bind(("0.0.0.0", a.port)))
                .map_err(|e| io(&format!("listen on port {}", a.port), e))?;
            // No limit on waiting for a client; a limit on all after.
            let s = l.accept().map_err(|e| io("accept", e))?.0;
            t.bound(&s)?;
            s
        }
    };
    s.write_all(&me.encode())
        .map_err(|e| t.tcp_error("sending our address", e))?;
    let mut m = [0u8; MSG_LEN];
    s.read_exact(&mut m)
        .map_err(|e| t.tcp_error("reading the peer's address", e))?;
    let peer = Peer::decode(&m).map_err(|e| {
        io(
            "reading the peer's address",
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    Ok((s, peer))
}

/// Tells the peer we reached the synchronisation point `at` and waits
/// until it has too (passing over its progress bytes).
fn sync(s: &mut TcpStream, t: Timeout, at: &str) -> Result<()> {
    s.write_all(&[SYNC])
        .map_err(|e| t.tcp_error(&format!("sync {at}"), e))?;
    loop {
        let mut b = [0u8; 1];
        s.read_exact(&mut b)
            .map_err(|e| t.tcp_error(&format!("waiting for the peer's sync {at}"), e))?;
        match b[0] {
            SYNC => return Ok(()),
            PROGRESS => {}
            other => {
                return Err(io(
                    &format!("waiting for the peer's sync {at}"),
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("unexpected byte {other:#04x} from the peer"),
                    ),
                ))
            }
        }
    }
}

/// The library's `Qp::post_send`, out of line: the library's data path is
/// inlinable, so that a program pays no call for it; the benchmark needs a
/// function boundary to count one call's instructions under callgrind
/// (`cargo xtask bench` reads this name). Nothing but the library runs
/// inside.
#[inline(never)]
fn bench_post_send(qp: &mut Qp, wrs: &[SendWr<'_>]) -> Result<()> {
    qp.post_send(wrs)
}

/// The library's `Cq::poll`, out of line for the same reason.
#[inline(never)]
fn bench_poll(cq: &mut Cq, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

impl Bench {
    /// Polls (or waits for an event, then polls) until at least one
    /// completion, at most the timeout; fails on an error status. `what`
    /// names what is awaited, for the timeout's error.
    fn next_completions(&mut self, wc: &mut [Wc], what: impl Fn() -> String) -> Result<usize> {
        loop {
            let n = match &self.channel {
                Some(ch) => {
                    self.timeout.event(ch, &what)?;
                    self.cq.req_notify(false)?;
                    bench_poll(&mut self.cq, wc)
                }
                None => {
                    let cq = &mut self.cq;
                    self.timeout.spin(&what, || {
                        let n = bench_poll(cq, wc);
                        Ok((n > 0).then_some(n))
                    })?
                }
            };
            if let Some(bad) = wc[..n].iter().find(|w| !w.is_ok()) {
                return Err(failed_completion(
                    format!(
                        "completion with status {} (wr_id {})",
                        bad.status, bad.wr_id
                    ),
                    bad,
                ));
            }
            if n > 0 {
                return Ok(n);
            }
        }
    }

    fn post_recv(&mut self, n: u32) -> Result<()> {
        let s = [self.mr.slice(self.region, self.region as u32)?];
        for _ in 0..n {
            self.qp.post_recv(&[RecvWr { wr_id: 0, sges: &s }])?;
        }
        Ok(())
    }

    fn send(&mut self, op: SendOp, len: u32, signaled: bool) -> Result<()> {
        let s = [self.mr.slice(0, len)?];
        let wr = if self.inline && !matches!(op, SendOp::Read(_)) {
            // An inline payload is copied at post time.
            SendWr::inline(0, op, &self.zeros[..len as usize])
        } else {
            SendWr::new(0, op, &s)
        };
        bench_post_send(&mut self.qp, &[wr.signaled(signaled)])
    }

    fn send_lat(&mut self, a: &PerfArgs, client: bool) -> Result<()> {
        self.post_recv(16)?;
        let mut samples = Vec::with_capacity(a.iters.min(SAMPLES_RESERVED) as usize);
        let mut wc = [Wc::default(); 4];
        let mut last = Instant::now();
        // Receives that arrived but that the loop has not consumed yet.
        let mut arrived = 0u32;
        for _ in 0..a.iters {
            // The client serves first; the server answers each message.
            if client {
                self.send(SendOp::Send, a.size, true)?;
            }
            while arrived == 0 {
                let n = self.next_completions(&mut wc, || {
                    format!(
                        "the peer's message {} of {} (does it use the same -n?)",
                        samples.len() + 1,
                        a.iters
                    )
                })?;
                for w in &wc[..n] {
                    if w.opcode == rverbs::WcOpcode::RECV {
                        arrived += 1;
                        self.post_recv(1)?;
                    }
                }
            }
            arrived -= 1;
            if !client {
                self.send(SendOp::Send, a.size, true)?;
            }
            let now = Instant::now();
            samples.push(now.duration_since(last).as_secs_f64() * 1e6 / 2.0);
            last = now;
        }
        if client {
            // The first round trip is the warm-up.
            report::latency(a.size, samples.get_mut(1..).unwrap_or_default());
        }
        Ok(())
    }

    fn write_lat(&mut self, a: &PerfArgs, client: bool) -> Result<()> {
        // Each side writes the iteration number into the last byte of the
        // peer's region and spins on the last byte of its own.
        let last = self.region + a.size as usize - 1;
        let remote = Remote {
            addr: self.remote.addr,
            rkey: self.remote.rkey,
        };
        let mut samples = Vec::with_capacity(a.iters.min(SAMPLES_RESERVED) as usize);
        let mut wc = [Wc::default(); 4];
        let mut t = Instant::now();
        let what = |i: u32| {
            move || {
                format!(
                    "the peer's RDMA WRITE {i} of {} (does it use the same -n and -s?)",
                    a.iters
                )
            }
        };
        for i in 1..=a.iters {
            let tag = (i % 251) as u8 + 1;
            if !client {
                self.await_byte(last, tag, what(i))?;
            }
            self.mr.write(a.size as usize - 1, &[tag])?;
            let signaled = i % CQ_MOD == 0 || i == a.iters;
            self.send(SendOp::Write(remote), a.size, signaled)?;
            if signaled {
                self.next_completions(&mut wc, || format!("the completion of our RDMA WRITE {i}"))?;
            }
            if client {
                self.await_byte(last, tag, what(i))?;
            }
            let now = Instant::now();
            samples.push(now.duration_since(t).as_secs_f64() * 1e6 / 2.0);
            t = now;
        }
        if client {
            report::latency(a.size, &mut samples);
        }
        Ok(())
    }

    /// Spins until the byte at `offset` of our MR is `value` (the peer's
    /// RDMA WRITE landed), at most the timeout.
    fn await_byte(&self, offset: usize, value: u8, what: impl FnOnce() -> String) -> Result<()> {
        let mr = &self.mr;
        self.timeout.spin(what, || {
            Ok((mr.read_volatile_u8(offset)? == value).then_some(()))
        })
    }

    fn op(&self, test: Test) -> SendOp {
        match test {
            Test::ReadLat | Test::ReadBw => SendOp::Read(self.remote),
            Test::AtomicLat | Test::AtomicBw => SendOp::FetchAdd {
                remote: self.remote,
                add: 1,
            },
            Test::WriteBw | Test::WriteLat => SendOp::Write(self.remote),
            Test::SendBw | Test::SendLat => SendOp::Send,
        }
    }

    fn one_sided_lat(&mut self, a: &PerfArgs) -> Result<()> {
        let op = self.op(a.test);
        let len = if matches!(a.test, Test::AtomicLat) {
            8
        } else {
            a.size
        };
        let mut samples = Vec::with_capacity(a.iters.min(SAMPLES_RESERVED) as usize);
        let mut wc = [Wc::default(); 4];
        for i in 1..=a.iters {
            let t = Instant::now();
            self.send(op, len, true)?;
            self.next_completions(&mut wc, || format!("the completion of operation {i}"))?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
            self.heartbeat.beat(self.timeout)?;
        }
        report::latency(len, &mut samples);
        Ok(())
    }

    fn bw(&mut self, a: &PerfArgs) -> Result<()> {
        let op = self.op(a.test);
        let len = if matches!(a.test, Test::AtomicBw) {
            8
        } else {
            a.size
        };
        let depth = self.qp.caps().max_send_wr.min(a.tx_depth);
        let (mut posted, mut completed) = (0u32, 0u32);
        let mut wc = [Wc::default(); 16];
        let start = Instant::now();
        let mut chunk_start = start;
        let mut peak: f64 = 0.0;
        // A clone of the MR handle, so that the slice does not borrow self.
        let mr = self.mr.clone();
        let s = [mr.slice(0, len)?];
        let zeros = self.zeros.clone();
        let mut batch = Vec::with_capacity(a.batch as usize);
        while completed < a.iters {
            while posted < a.iters && posted - completed + a.batch.min(a.iters - posted) <= depth {
                batch.clear();
                for _ in 0..a.batch.min(a.iters - posted) {
                    posted += 1;
                    let signaled = posted % CQ_MOD == 0 || posted == a.iters;
                    // The wr_id carries the count this completion covers up to.
                    let mut wr = SendWr::new(posted as u64, op, &s).signaled(signaled);
                    if self.inline && !matches!(op, SendOp::Read(_) | SendOp::FetchAdd { .. }) {
                        wr = SendWr::inline(posted as u64, op, &zeros[..len as usize])
                            .signaled(signaled);
                    }
                    batch.push(wr);
                }
                bench_post_send(&mut self.qp, &batch)?;
            }
            let n = self.next_completions(&mut wc, || {
                format!(
                    "the completion of work request {} of {}",
                    completed + 1,
                    a.iters
                )
            })?;
            self.heartbeat.beat(self.timeout)?;
            for w in &wc[..n] {
                let upto = w.wr_id as u32;
                if upto > completed {
                    let now = Instant::now();
                    let bytes = (upto - completed) as f64 * len as f64;
                    let dt = now.duration_since(chunk_start).as_secs_f64();
                    if dt > 0.0 {
                        peak = peak.max(bytes / dt);
                    }
                    chunk_start = now;
                    completed = upto;
                }
            }
        }
        report::bandwidth(len, a.iters, start.elapsed().as_secs_f64(), peak);
        Ok(())
    }

    fn send_bw_server(&mut self, a: &PerfArgs) -> Result<()> {
        let mut outstanding = RX_DEPTH.min(self.qp.caps().max_recv_wr);
        self.post_recv(outstanding)?;
        let mut got = 0u32;
        let mut wc = [Wc::default(); 16];
        while got < a.iters {
            let n = self.next_completions(&mut wc, || {
                format!(
                    "the client's message {} of {} (does it use the same -n?)",
                    got + 1,
                    a.iters
                )
            })? as u32;
            got += n;
            outstanding -= n;
            let want = (a.iters - got).min(RX_DEPTH.min(self.qp.caps().max_recv_wr));
            if outstanding < want {
                self.post_recv(want - outstanding)?;
                outstanding = want;
            }
        }
        Ok(())
    }
}

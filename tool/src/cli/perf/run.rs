//! Setting up the QP pair across two processes and running each test.

use super::{report, PerfArgs, Test};
use rverbs::{
    Access, AhAttr, CompChannel, Context, Cq, Error, Grh, Mr, Mtu, Qp, QpAttr, QpCaps, QpInit,
    QpType, RecvWr, Remote, Result, SendOp, SendWr, Wc,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Instant;

/// Signal one work request in this many on bandwidth tests (perftest's
/// default CQ moderation).
const CQ_MOD: u32 = 100;
/// Receives kept posted by a send-bandwidth server.
const RX_DEPTH: u32 = 512;

/// What each side tells the other: QP, PSN, GID, and where its target
/// buffer is.
#[derive(Debug, Clone, Copy)]
struct Peer {
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
    rkey: u32,
    addr: u64,
}

const MSG: usize = 96;

impl Peer {
    fn encode(&self) -> [u8; MSG] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let s = format!(
            "{:06x}:{:06x}:{gid}:{:08x}:{:016x}",
            self.qpn, self.psn, self.rkey, self.addr
        );
        let mut m = [0u8; MSG];
        m[..s.len()].copy_from_slice(s.as_bytes());
        m
    }

    fn decode(m: &[u8]) -> Option<Peer> {
        let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
        let s = std::str::from_utf8(&m[..end]).ok()?;
        let f: Vec<&str> = s.split(':').collect();
        if f.len() != 5 || f[2].len() != 32 {
            return None;
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&f[2][2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Peer {
            qpn: u32::from_str_radix(f[0], 16).ok()?,
            psn: u32::from_str_radix(f[1], 16).ok()?,
            gid,
            rkey: u32::from_str_radix(f[3], 16).ok()?,
            addr: u64::from_str_radix(f[4], 16).ok()?,
        })
    }
}

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
}

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        what: what.into(),
        source: e,
    }
}

pub fn run(a: &PerfArgs) -> Result<ExitCode> {
    let ctx = Context::open_by_name(a.dev.as_deref())?;
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
    let depth = a.tx_depth.max(1);
    let cq = ctx.create_cq(depth * 2 + RX_DEPTH, channel.as_ref(), 0)?;
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
    };
    if let Some(ch) = &b.channel {
        let _ = ch;
        b.cq.req_notify(false)?;
    }
    // Both sides are connected before either sends.
    sync(&mut sock)?;
    let client = a.server.is_some();
    match (a.test, client) {
        (Test::SendLat, _) => b.send_lat(a, client)?,
        (Test::WriteLat, _) => b.write_lat(a, client)?,
        (Test::ReadLat | Test::AtomicLat, true) => b.one_sided_lat(a)?,
        (Test::SendBw, false) => b.send_bw_server(a)?,
        (Test::WriteBw | Test::ReadBw | Test::AtomicBw | Test::SendBw, true) => b.bw(a)?,
        // The passive side of one-sided tests has nothing to do but wait.
        _ => {}
    }
    sync(&mut sock)?;
    Ok(ExitCode::SUCCESS)
}

fn exchange(a: &PerfArgs, me: &Peer) -> Result<(TcpStream, Peer)> {
    let mut s = match &a.server {
        Some(host) => {
            let mut tries = 0;
            loop {
                match TcpStream::connect((host.as_str(), a.port)) {
                    Ok(s) => break s,
                    Err(e) if tries > 100 => {
                        return Err(io(&format!("connect to {host}:{}", a.port), e))
                    }
                    Err(_) => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                }
            }
        }
        None => {
            let l = TcpListener::bind(("::", a.port))
                .or_else(|_| TcpListener::bind(("0.0.0.0", a.port)))
                .map_err(|e| io(&format!("listen on port {}", a.port), e))?;
            l.accept().map_err(|e| io("accept", e))?.0
        }
    };
    s.write_all(&me.encode())
        .map_err(|e| io("send local address", e))?;
    let mut m = [0u8; MSG];
    s.read_exact(&mut m)
        .map_err(|e| io("read remote address", e))?;
    let peer = Peer::decode(&m).ok_or_else(|| Error::InvalidArgument {
        what: "malformed peer address".into(),
    })?;
    Ok((s, peer))
}

fn sync(s: &mut TcpStream) -> Result<()> {
    s.write_all(b"S").map_err(|e| io("sync", e))?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b).map_err(|e| io("sync", e))
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
    /// completion; fails on an error status.
    fn next_completions(&mut self, wc: &mut [Wc]) -> Result<usize> {
        loop {
            if let Some(ch) = &self.channel {
                ch.get_event()?;
                self.cq.req_notify(false)?;
            }
            let n = bench_poll(&mut self.cq, wc);
            if let Some(bad) = wc[..n].iter().find(|w| !w.is_ok()) {
                return Err(Error::InvalidArgument {
                    what: format!(
                        "completion with status {} (wr_id {})",
                        bad.status, bad.wr_id
                    ),
                });
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
            // An inline payload is copied at post time; the content does
            // not matter to the measurement, so send zeros from the stack.
            const ZEROS: [u8; 4096] = [0; 4096];
            SendWr::inline(0, op, &ZEROS[..len as usize])
        } else {
            SendWr::new(0, op, &s)
        };
        bench_post_send(&mut self.qp, &[wr.signaled(signaled)])
    }

    fn send_lat(&mut self, a: &PerfArgs, client: bool) -> Result<()> {
        self.post_recv(16)?;
        let mut samples = Vec::with_capacity(a.iters as usize);
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
                let n = self.next_completions(&mut wc)?;
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
            report::latency(a.size, &mut samples[1..].to_vec());
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
        let mut samples = Vec::with_capacity(a.iters as usize);
        let mut wc = [Wc::default(); 4];
        let mut t = Instant::now();
        for i in 1..=a.iters {
            let tag = (i % 251) as u8 + 1;
            if !client {
                while self.mr.read_volatile_u8(last)? != tag {}
            }
            self.mr.write(a.size as usize - 1, &[tag])?;
            let signaled = i % CQ_MOD == 0 || i == a.iters;
            self.send(SendOp::Write(remote), a.size, signaled)?;
            if signaled {
                self.next_completions(&mut wc)?;
            }
            if client {
                while self.mr.read_volatile_u8(last)? != tag {}
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
        let mut samples = Vec::with_capacity(a.iters as usize);
        let mut wc = [Wc::default(); 4];
        for _ in 0..a.iters {
            let t = Instant::now();
            self.send(op, len, true)?;
            self.next_completions(&mut wc)?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
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
                        const ZEROS: [u8; 4096] = [0; 4096];
                        wr = SendWr::inline(posted as u64, op, &ZEROS[..len as usize])
                            .signaled(signaled);
                    }
                    batch.push(wr);
                }
                bench_post_send(&mut self.qp, &batch)?;
            }
            let n = self.next_completions(&mut wc)?;
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
            let n = self.next_completions(&mut wc)? as u32;
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

//! `rverbs stream`: RC streams whose every byte is checked and whose every
//! work request must complete exactly once, for runs over a lossy,
//! reordering, duplicating or corrupting link (the test bed's `tc netem`).
//!
//! The client opens `-q` RC QPs to the server and moves `--bytes` in all,
//! split evenly over them, as `-s`-byte messages, by `--op`:
//! - `send`: the client SENDs; the server checks each receive as it
//!   completes (its place in the stream, its length, its bytes).
//! - `write`: the client WRITEs each QP's share into the server's memory;
//!   the server checks all of it once the client says it is done.
//! - `read`: the client READs the server's memory (filled with the
//!   pattern) and checks each message as it completes.
//! - `ud`: the client sends datagrams on `-q` UD QPs, each carrying its
//!   number and the pattern; the server counts each one received intact,
//!   received twice or received corrupt, and the ones never received are
//!   counted lost. Loss is UD's right; the run fails if a datagram
//!   arrived corrupt, or (unless `--allow-dups`, for a link that
//!   duplicates frames: UD has no sequence check) twice, or if a send
//!   failed.
//!
//! Every byte is a function of a seed the client picks, the QP and the
//! byte's place in that QP's stream, so a byte delivered twice, to the
//! wrong place or corrupted does not match. Every work request is
//! signaled; a QP's completions must arrive in posting order, once each
//! (RC completes in order), so a lost or repeated completion is named.
//! Anything else — a completion error, a stall past `--timeout`, a
//! mismatch — ends the run with an error naming the QP, the message and
//! the offset: every byte arrives once, or the program is told.
//!
//! The exchange is a few text lines over TCP (not a C tool's format: no C
//! tool checks its bytes).

use super::wait::{failed_completion, parse_timeout, Timeout};
use clap::{Args, ValueEnum};
use rverbs::{
    Access, AhAttr, Context, Cq, Error, Grh, Mr, Mtu, Pd, Qp, QpAttr, QpCaps, QpInit, QpType,
    RecvWr, Remote, Result, SendOp, SendWr, Wc, WcStatus,
};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Op {
    Send,
    Write,
    Read,
    Ud,
}

/// The Q_Key of the `ud` run's QPs.
const UD_QKEY: u32 = 0x5eed_0001;
/// Room for the GRH before a UD receive's payload.
const GRH_LEN: usize = 40;
/// Receives a `ud` server keeps posted per QP.
const UD_RECVS: u32 = 256;

#[derive(Args, Clone)]
pub struct StreamArgs {
    /// Listen on / connect to this TCP port.
    #[arg(short = 'p', long, default_value_t = 18600)]
    port: u16,
    /// Use this RDMA device (default: the first).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Use this port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// Local GID index (RoCE needs one).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// What moves the bytes (the client's choice; the server follows).
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// RC QPs, each carrying an equal share.
    #[arg(short = 'q', long, default_value_t = 8)]
    qps: u32,
    /// Bytes in all (K, M and G suffixes: binary units).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    bytes: u64,
    /// Bytes per message (a multiple of 8).
    #[arg(short = 's', long, default_value_t = 65536)]
    size: u32,
    /// Messages in flight per QP.
    #[arg(short = 't', long, default_value_t = 16)]
    depth: u32,
    /// The pattern's seed (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Give up after this many seconds without progress. A server waits
    /// for its client to connect without limit.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = parse_timeout)]
    timeout: Timeout,
    /// RC transport retries before a request fails with RETRY_EXC_ERR. The
    /// default 7 is perftest's, and rxe reads it as "retry for ever": on a
    /// lossy link a 64 KiB message is 64 packets, go-back-N resends them
    /// all from the lost one, and 6 retries run out within seconds at 5%
    /// loss (measured). The run's no-progress limit (`--timeout`) still
    /// ends it if the peer is gone.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u8).range(0..=7))]
    retry_cnt: u8,
    /// `ud` only: duplicates are counted, not a failure (a link that
    /// duplicates frames duplicates datagrams).
    #[arg(long)]
    allow_dups: bool,
    /// Soak: run again and again for this many seconds (the client
    /// cycles SEND, WRITE, READ and UD, a new seed each run; the server
    /// takes each client in turn). A run that cannot finish (the peer
    /// gone or restarting, the link down) is counted and the next one
    /// begins; a wrong byte, datagram or completion ends it at once, as
    /// does a process whose fds or memory grew across the runs.
    #[arg(long = "for", value_name = "SECS")]
    soak: Option<u64>,
    /// The server to connect to (none: be the server).
    server: Option<String>,
}

fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let (num, mult) = match s.trim().char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?} is not a positive number of bytes (K, M, G allowed)"))
}

fn bad(what: impl Into<String>) -> Error {
    Error::InvalidArgument { what: what.into() }
}

/// How every error that says a byte, a datagram or a completion was
/// wrong begins: the one failure `--for` never rides out.
const BROKEN: &str = "delivery broken: ";

/// A failed check of what arrived (wrong bytes, a completion out of
/// place, twice or extra, a datagram corrupt or twice), as opposed to a
/// run that could not finish (a peer gone, a link down, a timeout).
fn broken(what: impl Into<String>) -> Error {
    Error::InvalidArgument {
        what: format!("{BROKEN}{}", what.into()),
    }
}

fn is_broken(e: &Error) -> bool {
    matches!(e, Error::InvalidArgument { what } if what.starts_with(BROKEN))
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::Io {
        what: what.to_string(),
        source: e,
    }
}

/// The run's shape, agreed by both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    op: Op,
    qps: u32,
    /// Messages per QP.
    msgs: u64,
    size: u32,
    depth: u32,
    seed: u64,
}

impl Plan {
    fn of(a: &StreamArgs) -> Result<Plan> {
        if a.size == 0 || a.size % 8 != 0 {
            return Err(bad(format!(
                "-s {}: the message size must be a positive multiple of 8",
                a.size
            )));
        }
        if a.qps == 0 || a.qps > 1024 {
            return Err(bad(format!("-q {}: 1 to 1024 QPs", a.qps)));
        }
        if a.depth == 0 || a.depth > 1024 {
            return Err(bad(format!(
                "-t {}: 1 to 1024 messages in flight per QP",
                a.depth
            )));
        }
        if a.op == Op::Ud && !(16..=1024).contains(&a.size) {
            return Err(bad(format!(
                "-s {}: a datagram is 16 to 1024 bytes here (8 for its number, the port's MTU)",
                a.size
            )));
        }
        let per = a.qps as u64 * a.size as u64;
        if a.bytes % per != 0 {
            return Err(bad(format!(
                "--bytes {}: not a whole number of {}-byte messages on each of {} QPs",
                a.bytes, a.size, a.qps
            )));
        }
        Ok(Plan {
            op: a.op,
            qps: a.qps,
            msgs: a.bytes / per,
            size: a.size,
            depth: a.depth,
            seed: a.seed.unwrap_or_else(clock_seed),
        })
    }

    /// One QP's share in bytes.
    fn share(&self) -> u64 {
        self.msgs * self.size as u64
    }

    fn header(&self) -> String {
        let op = match self.op {
            Op::Send => "send",
            Op::Write => "write",
            Op::Read => "read",
            Op::Ud => "ud",
        };
        format!(
            "rverbs-stream 1 {op} {} {} {} {} {}\n",
            self.qps, self.msgs, self.size, self.depth, self.seed
        )
    }

    fn parse(line: &str) -> Result<Plan> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> Result<u64> {
            w.get(i).and_then(|s| s.parse().ok()).ok_or_else(|| {
                bad(format!(
                    "the client's plan {line:?}: field {i} is not a number"
                ))
            })
        };
        if w.len() != 8 || w[0] != "rverbs-stream" || w[1] != "1" {
            return Err(bad(format!("not an rverbs stream client: {line:?}")));
        }
        let op = match w[2] {
            "send" => Op::Send,
            "write" => Op::Write,
            "read" => Op::Read,
            "ud" => Op::Ud,
            o => return Err(bad(format!("the client's plan names no operation {o:?}"))),
        };
        let p = Plan {
            op,
            qps: num(3)? as u32,
            msgs: num(4)?,
            size: num(5)? as u32,
            depth: num(6)? as u32,
            seed: num(7)?,
        };
        // The same limits as the client's own.
        if p.size == 0
            || p.size % 8 != 0
            || p.qps == 0
            || p.qps > 1024
            || p.depth == 0
            || p.depth > 1024
            || p.msgs == 0
        {
            return Err(bad(format!("the client's plan is out of range: {line:?}")));
        }
        p.share()
            .checked_mul(p.qps as u64)
            .filter(|&b| b <= 1 << 34)
            .ok_or_else(|| bad(format!("the client's plan is too large: {line:?}")))?;
        Ok(p)
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}

/// The pattern's 8 bytes at `off` (a multiple of 8) of QP `qp`'s stream:
/// splitmix64 of the seed, the QP and the word's index.
fn word(seed: u64, qp: u32, off: u64) -> [u8; 8] {
    let mut z = seed ^ ((qp as u64) << 48) ^ (off / 8);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_le_bytes()
}

/// Fills `buf` with the pattern of QP `qp` from stream offset `off`.
fn fill(buf: &mut [u8], seed: u64, qp: u32, off: u64) {
    for (i, c) in buf.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&word(seed, qp, off + 8 * i as u64));
    }
}

/// The first byte of `buf` that is not the pattern of QP `qp` from `off`.
fn first_bad(buf: &[u8], seed: u64, qp: u32, off: u64) -> Option<u64> {
    buf.chunks_exact(8).enumerate().find_map(|(i, c)| {
        let w = word(seed, qp, off + 8 * i as u64);
        c.iter()
            .zip(w)
            .position(|(a, b)| *a != b)
            .map(|j| off + 8 * i as u64 + j as u64)
    })
}

/// What is wrong in `buf`, which should hold QP `qp`'s pattern from stream
/// offset `off`, or `None` if nothing is: the first wrong byte, how many
/// are wrong and in how many runs, and what the first run holds instead —
/// zeros, another place of some QP's stream (data landed in the wrong
/// place, or an older message left in a reused slot), or nothing of the
/// streams. Under loss this tells a retransmission written at the wrong
/// offset from a message never written at all.
fn what_is_wrong(buf: &[u8], p: &Plan, qp: u32, off: u64) -> Option<String> {
    let at = first_bad(buf, p.seed, qp, off)?;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, c) in buf.chunks_exact(8).enumerate() {
        if c != word(p.seed, qp, off + 8 * i as u64) {
            match runs.last_mut() {
                Some(r) if r.1 == 8 * i => r.1 += 8,
                _ => runs.push((8 * i, 8 * i + 8)),
            }
        }
    }
    let wrong: usize = runs.iter().map(|r| r.1 - r.0).sum();
    // A tail shorter than a word is caught by first_bad alone.
    let (from, to) = runs.first().copied().unwrap_or((0, 0));
    let holds = match buf.get(from..from + 8) {
        None => "a partial word".to_string(),
        Some(w) if w.iter().all(|&b| b == 0) => "zeros".to_string(),
        Some(w) => (0..p.qps)
            .find_map(|q| {
                (0..p.share() / 8)
                    .find(|k| word(p.seed, q, 8 * k) == w)
                    .map(|k| format!("QP {q}'s stream byte {}", 8 * k))
            })
            .unwrap_or_else(|| "nothing of the streams".to_string()),
    };
    Some(format!(
        "byte {at} of the stream is wrong: {wrong} of the message's {} bytes, in {} run(s), the first at bytes {from}..{to} of the message, which hold {holds}",
        buf.len(),
        runs.len()
    ))
}

/// One side's address of a QP: QPN, PSN, GID; and where its memory is.
#[derive(Clone, Copy, Debug)]
struct End {
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
    addr: u64,
    rkey: u32,
}

impl End {
    fn line(&self) -> String {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{} {} {gid} {} {}\n",
            self.qpn, self.psn, self.addr, self.rkey
        )
    }

    fn parse(line: &str) -> Result<End> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let bad_line = || bad(format!("the peer's QP line {line:?} is malformed"));
        if w.len() != 5 || w[2].len() != 32 {
            return Err(bad_line());
        }
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::from_str_radix(&w[2][2 * i..2 * i + 2], 16).map_err(|_| bad_line())?;
        }
        Ok(End {
            qpn: w[0].parse().map_err(|_| bad_line())?,
            psn: w[1].parse::<u32>().map_err(|_| bad_line())? & 0xff_ffff,
            gid,
            addr: w[3].parse().map_err(|_| bad_line())?,
            rkey: w[4].parse().map_err(|_| bad_line())?,
        })
    }
}

/// Our side: the QPs, their CQ and the memory.
struct Side {
    /// The run's PD (the UD client makes its address handle on it).
    pd: Pd,
    cq: Cq,
    qps: Vec<Qp>,
    mr: Mr,
}

impl Side {
    fn new(ctx: &Context, p: &Plan, mem: usize, access: Access) -> Result<Side> {
        let pd = ctx.alloc_pd()?;
        let (qp_type, recvs) = if p.op == Op::Ud {
            (QpType::Ud, UD_RECVS)
        } else {
            (QpType::Rc, p.depth)
        };
        // Every QP reserves its sends and its receives on the one CQ.
        let cq = ctx.create_cq(p.qps * (p.depth + recvs) + 1, None, 0)?;
        let mut qps = Vec::new();
        for _ in 0..p.qps {
            qps.push(pd.create_qp(&QpInit {
                caps: QpCaps {
                    max_send_wr: p.depth,
                    max_recv_wr: recvs,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
                ..QpInit::new(qp_type, &cq)
            })?);
        }
        let mr = pd.alloc_mr(mem.max(8), Access::LOCAL_WRITE | access)?;
        Ok(Side { pd, cq, qps, mr })
    }

    fn ends(&self, gid: [u8; 16], addr_of: impl Fn(usize) -> u64) -> Vec<End> {
        let base = clock_seed() as u32;
        self.qps
            .iter()
            .enumerate()
            .map(|(i, q)| End {
                qpn: q.qpn(),
                psn: base.wrapping_add(i as u32 * 7919) & 0xff_ffff,
                gid,
                addr: addr_of(i),
                rkey: self.mr.rkey(),
            })
            .collect()
    }

    fn connect(&mut self, a: &StreamArgs, access: Access, my: &[End], rem: &[End]) -> Result<()> {
        if my.len() != rem.len() {
            return Err(bad(format!(
                "{} QPs here, {} at the peer",
                my.len(),
                rem.len()
            )));
        }
        let ctx_mtu = Mtu::M1024;
        if self.qps.first().is_some_and(|q| q.qp_type() == QpType::Ud) {
            for (i, qp) in self.qps.iter_mut().enumerate() {
                qp.modify(&QpAttr::init_ud(a.ib_port, UD_QKEY))?;
                qp.modify(&QpAttr::state(rverbs::QpState::Rtr))?;
                qp.modify(&QpAttr::rts_ud(my[i].psn))?;
            }
            return Ok(());
        }
        for (i, qp) in self.qps.iter_mut().enumerate() {
            let av = AhAttr {
                port_num: a.ib_port,
                grh: (rem[i].gid[8..] != [0; 8]).then(|| Grh {
                    dgid: rem[i].gid,
                    hop_limit: 1,
                    sgid_index: a.gid_idx.unwrap_or(0) as u8,
                    ..Grh::default()
                }),
                ..AhAttr::default()
            };
            qp.modify(&QpAttr::init(a.ib_port, access))?;
            let mut rtr = QpAttr::rtr(av, ctx_mtu, rem[i].qpn, rem[i].psn);
            // READs in flight: as many as the device takes.
            rtr.max_dest_rd_atomic = Some(16);
            qp.modify(&rtr)?;
            let mut rts = QpAttr::rts(my[i].psn);
            rts.max_rd_atomic = Some(16);
            rts.retry_cnt = Some(a.retry_cnt);
            qp.modify(&rts)?;
        }
        Ok(())
    }
}

struct Line {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Line {
    fn new(s: TcpStream) -> Result<Line> {
        let w = s.try_clone().map_err(io("cloning the TCP stream"))?;
        Ok(Line {
            r: BufReader::new(s),
            w,
        })
    }

    fn read(&mut self, t: Timeout, what: &str) -> Result<String> {
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) => Err(bad(format!("the peer closed the connection before {what}"))),
            Ok(_) => Ok(l),
            Err(e) => Err(t.tcp_error(&format!("reading {what}"), e)),
        }
    }

    fn send(&mut self, t: Timeout, text: &str) -> Result<()> {
        self.w
            .write_all(text.as_bytes())
            .map_err(|e| t.tcp_error("writing to the peer", e))
    }
}

pub fn stream(a: &StreamArgs) -> Result<ExitCode> {
    let ctx = Context::open_by_name(a.dev.as_deref())?;
    let gid = match a.gid_idx {
        Some(i) => ctx.query_gid(a.ib_port, i)?,
        // RoCE addresses by GID: without one, every path would be `::`.
        None if ctx.query_port(a.ib_port)?.link_layer == 2 => {
            return Err(bad(format!(
                "port {} is Ethernet (RoCE): give a GID index with -g",
                a.ib_port
            )))
        }
        None => [0; 16],
    };
    match (&a.server, a.soak) {
        (_, Some(secs)) => soak(a, &ctx, gid, std::time::Duration::from_secs(secs)),
        (Some(host), None) => client(a, &ctx, gid, host),
        (None, None) => {
            let s = accept(a, None)?.expect("an accept without a deadline answers");
            serve(a, &ctx, gid, s)
        }
    }
}

/// Open fds of this process, and its resident set in KiB.
fn fds_and_rss() -> Result<(usize, u64)> {
    let fds = std::fs::read_dir("/proc/self/fd")
        .map_err(io("reading /proc/self/fd"))?
        .count();
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(io("reading /proc/self/status"))?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| bad("/proc/self/status has no VmRSS"))?;
    Ok((fds, rss))
}

/// How much a soaking process's resident memory may grow past what it
/// had after its first finished run (the allocator keeps some).
const SOAK_RSS_SLACK_KIB: u64 = 4096;

/// `--for SECS`: see [`StreamArgs::soak`]. The baseline of fds and
/// memory is taken after the first run that finished.
fn soak(
    a: &StreamArgs,
    ctx: &Context,
    gid: [u8; 16],
    secs: std::time::Duration,
) -> Result<ExitCode> {
    const OPS: [Op; 4] = [Op::Send, Op::Write, Op::Read, Op::Ud];
    let end = Instant::now() + secs;
    let (mut runs, mut finished, mut cut) = (0u64, 0u64, 0u64);
    let mut base = None;
    while Instant::now() < end {
        let r = match &a.server {
            Some(host) => {
                let mut b = a.clone();
                b.op = OPS[runs as usize % OPS.len()];
                b.seed = None;
                if b.op == Op::Ud {
                    // A datagram is at most the path MTU: 1 KiB on rxe
                    // over a 1500-byte link.
                    b.size = b.size.min(1024);
                }
                runs += 1;
                client(&b, ctx, gid, host)
            }
            None => match accept(a, Some(end))? {
                Some(s) => {
                    runs += 1;
                    serve(a, ctx, gid, s)
                }
                None => break,
            },
        };
        match r {
            Ok(_) => {
                finished += 1;
                if base.is_none() {
                    base = Some(fds_and_rss()?);
                }
            }
            Err(e) if is_broken(&e) => return Err(e),
            Err(e) => {
                cut += 1;
                println!("stream --for: run {runs} did not finish: {e}");
                if a.server.is_some() {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            }
        }
    }
    let (fds, rss) = fds_and_rss()?;
    let Some((fds0, rss0)) = base else {
        return Err(bad(format!(
            "--for {}: no run finished ({cut} did not)",
            secs.as_secs()
        )));
    };
    println!(
        "stream --for {}: {runs} runs, {finished} finished and checked, {cut} did not finish; fds {fds0} -> {fds}, RSS {rss0} -> {rss} KiB",
        secs.as_secs()
    );
    if fds != fds0 || rss > rss0 + SOAK_RSS_SLACK_KIB {
        return Err(bad(format!(
            "--for {}: the process grew across its runs: fds {fds0} -> {fds}, RSS {rss0} -> {rss} KiB (at most +{SOAK_RSS_SLACK_KIB} KiB allowed)",
            secs.as_secs()
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// The memory each side needs and the rights the peer needs on it.
fn memory(p: &Plan, server: bool) -> (usize, Access) {
    let ring = p.qps as usize * p.depth as usize * p.size as usize;
    let whole = p.qps as usize * p.share() as usize;
    match (p.op, server) {
        (Op::Send, true) => (ring, Access::empty()),
        (Op::Write, true) => (whole, Access::REMOTE_WRITE),
        (Op::Read, true) => (whole, Access::REMOTE_READ),
        (Op::Ud, true) => (
            p.qps as usize * UD_RECVS as usize * (GRH_LEN + p.size as usize),
            Access::empty(),
        ),
        (_, false) => (ring, Access::empty()),
    }
}

fn client(a: &StreamArgs, ctx: &Context, gid: [u8; 16], host: &str) -> Result<ExitCode> {
    let p = Plan::of(a)?;
    let t = a.timeout;
    let (mem, access) = memory(&p, false);
    let mut side = Side::new(ctx, &p, mem, access)?;
    // A server that is not listening yet (a script starting both) is
    // waited for, up to the limit; any other failure is at once.
    let start = Instant::now();
    let s = loop {
        match t.connect(host, a.port) {
            Ok(s) => break s,
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && start.elapsed() < t.duration() =>
            {
                std::thread::sleep(std::time::Duration::from_millis(200))
            }
            Err(e) => return Err(t.tcp_error(&format!("connecting to {host}:{}", a.port), e)),
        }
    };
    let mut line = Line::new(s)?;
    let my = side.ends(gid, |_| 0);
    let mut hello = p.header();
    for e in &my {
        hello.push_str(&e.line());
    }
    line.send(t, &hello)?;
    let rem = (0..p.qps)
        .map(|i| End::parse(&line.read(t, &format!("the server's QP {i}"))?))
        .collect::<Result<Vec<_>>>()?;
    side.connect(a, access, &my, &rem)?;
    // Both sides connected before the first message: the server says so.
    let ready = line.read(t, "the server's go-ahead")?;
    if ready.trim() != "go" {
        return Err(bad(format!(
            "the server answered {:?}, not \"go\"",
            ready.trim()
        )));
    }
    let start = Instant::now();
    if p.op == Op::Ud {
        let sent = run_client_ud(&mut side, &p, &rem, a, t)?;
        line.send(t, &format!("done {sent}\n"))?;
        let verdict = line.read(t, "the server's count")?;
        return ud_verdict(&p, a, sent, verdict.trim(), start.elapsed().as_secs_f64());
    }
    let wrs = run_client(&mut side, &p, &rem, t)?;
    line.send(t, &format!("done {wrs}\n"))?;
    let verdict = line.read(t, "the server's verdict")?;
    let secs = start.elapsed().as_secs_f64();
    let bytes = p.share() * p.qps as u64;
    if verdict.trim() != format!("ok {bytes}") {
        let found = verdict.trim().trim_start_matches("bad ");
        return Err(broken(format!(
            "the server found: {}",
            found.trim_start_matches(BROKEN)
        )));
    }
    report(&p, bytes, wrs, secs);
    Ok(ExitCode::SUCCESS)
}

fn report(p: &Plan, bytes: u64, wrs: u64, secs: f64) {
    println!(
        "stream {:?}: {} QPs x {} messages of {} B: {bytes} bytes checked, {wrs} work requests completed once each, {secs:.2} s ({:.2} MB/s)",
        p.op,
        p.qps,
        p.msgs,
        p.size,
        bytes as f64 / secs.max(1e-9) / 1e6
    );
}

/// The client's traffic: up to `depth` signaled requests in flight per
/// QP; each completion checked for its place (in order, once) and, for a
/// READ, its bytes. Returns the number of work requests completed.
fn run_client(side: &mut Side, p: &Plan, rem: &[End], t: Timeout) -> Result<u64> {
    let n = p.qps as usize;
    let slot_bytes = p.size as usize;
    let ring = p.depth as usize * slot_bytes;
    let mut posted = vec![0u64; n];
    let mut done = vec![0u64; n];
    let mut buf = vec![0u8; slot_bytes];
    let mut wcs = vec![Wc::default(); 64];
    let total = p.msgs * n as u64;
    let mut completed = 0u64;
    let mut last = Instant::now();
    while completed < total {
        for q in 0..n {
            while posted[q] < p.msgs && posted[q] - done[q] < p.depth as u64 {
                let seq = posted[q];
                let slot = q * ring + (seq % p.depth as u64) as usize * slot_bytes;
                let off = seq * p.size as u64;
                if p.op != Op::Read {
                    fill(&mut buf, p.seed, q as u32, off);
                    side.mr.write(slot, &buf)?;
                }
                let sge = [side.mr.slice(slot, p.size)?];
                let remote = Remote {
                    addr: rem[q].addr + off,
                    rkey: rem[q].rkey,
                };
                let op = match p.op {
                    Op::Send | Op::Ud => SendOp::Send,
                    Op::Write => SendOp::Write(remote),
                    Op::Read => SendOp::Read(remote),
                };
                let wr_id = (q as u64) << 40 | seq;
                side.qps[q].post_send(&[SendWr::new(wr_id, op, &sge)])?;
                posted[q] += 1;
            }
        }
        let got = side.cq.poll(&mut wcs);
        if got == 0 {
            if last.elapsed() > t.duration() {
                return Err(t.expired(&format!(
                    "completions ({completed} of {total}; per QP {done:?} of {})",
                    p.msgs
                )));
            }
            continue;
        }
        last = Instant::now();
        for w in &wcs[..got] {
            let q = (w.wr_id >> 40) as usize;
            let seq = w.wr_id & ((1 << 40) - 1);
            if w.status != WcStatus::SUCCESS {
                return Err(failed_completion(format!("QP {q}'s message {seq}"), w));
            }
            if q >= n || seq != done[q] {
                return Err(broken(format!(
                    "completion wr_id {:#x} out of place: QP {q} expected message {}",
                    w.wr_id,
                    done.get(q).copied().unwrap_or(0)
                )));
            }
            if p.op == Op::Read {
                let slot = q * ring + (seq % p.depth as u64) as usize * slot_bytes;
                side.mr.read(slot, &mut buf)?;
                if let Some(why) = what_is_wrong(&buf, p, q as u32, seq * p.size as u64) {
                    return Err(broken(format!("READ of QP {q}'s message {seq}: {why}")));
                }
            }
            done[q] += 1;
            completed += 1;
        }
    }
    // Nothing more may arrive: every request completed once.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let extra = side.cq.poll(&mut wcs);
    if extra != 0 {
        return Err(broken(format!(
            "{extra} completions after the last: {:?}",
            &wcs[..extra]
        )));
    }
    Ok(completed)
}

/// The datagram's payload: its number, then the pattern.
fn datagram(buf: &mut [u8], p: &Plan, q: u32, seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    fill(&mut buf[8..], p.seed, q, seq * p.size as u64 + 8);
}

/// The client's side of `ud`: every QP's datagrams, `depth` in flight
/// (each send completes locally once it is on the wire). Returns how many
/// were sent.
fn run_client_ud(
    side: &mut Side,
    p: &Plan,
    rem: &[End],
    a: &StreamArgs,
    t: Timeout,
) -> Result<u64> {
    let ah = side.pd.create_ah(&AhAttr {
        port_num: a.ib_port,
        grh: Some(Grh {
            dgid: rem[0].gid,
            hop_limit: 64,
            sgid_index: a.gid_idx.unwrap_or(0) as u8,
            ..Grh::default()
        }),
        ..AhAttr::default()
    })?;
    let n = p.qps as usize;
    let size = p.size as usize;
    let ring = p.depth as usize * size;
    let (mut posted, mut done) = (vec![0u64; n], vec![0u64; n]);
    let mut buf = vec![0u8; size];
    let mut wcs = vec![Wc::default(); 64];
    let total = p.msgs * n as u64;
    let mut completed = 0u64;
    let mut last = Instant::now();
    while completed < total {
        for q in 0..n {
            while posted[q] < p.msgs && posted[q] - done[q] < p.depth as u64 {
                let seq = posted[q];
                let slot = q * ring + (seq % p.depth as u64) as usize * size;
                datagram(&mut buf, p, q as u32, seq);
                side.mr.write(slot, &buf)?;
                let sge = [side.mr.slice(slot, p.size)?];
                let wr = SendWr::new((q as u64) << 40 | seq, SendOp::Send, &sge)
                    .to(&ah, rem[q].qpn, UD_QKEY);
                side.qps[q].post_send(&[wr])?;
                posted[q] += 1;
            }
        }
        let got = side.cq.poll(&mut wcs);
        if got == 0 {
            if last.elapsed() > t.duration() {
                return Err(t.expired(&format!("send completions ({completed} of {total})")));
            }
            continue;
        }
        last = Instant::now();
        for w in &wcs[..got] {
            let q = (w.wr_id >> 40) as usize;
            let seq = w.wr_id & ((1 << 40) - 1);
            if w.status != WcStatus::SUCCESS {
                return Err(failed_completion(format!("QP {q}'s datagram {seq}"), w));
            }
            if q >= n || seq != done[q] {
                return Err(broken(format!(
                    "send completion wr_id {:#x} out of place",
                    w.wr_id
                )));
            }
            done[q] += 1;
            completed += 1;
        }
    }
    Ok(completed)
}

/// The client's reading of the server's count: `ud SENT OK LOST DUPS
/// CORRUPT`.
fn ud_verdict(p: &Plan, a: &StreamArgs, sent: u64, verdict: &str, secs: f64) -> Result<ExitCode> {
    let n: Vec<u64> = verdict
        .strip_prefix("ud ")
        .map(|r| {
            r.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let [seen, ok, lost, dups, corrupt] = n[..] else {
        return Err(bad(format!("the server answered {verdict:?}")));
    };
    println!(
        "stream Ud: {} QPs x {} datagrams of {} B: {sent} sent, {ok} received intact, {lost} lost ({:.2}%), {dups} received twice, {corrupt} corrupt, {secs:.2} s",
        p.qps,
        p.msgs,
        p.size,
        lost as f64 * 100.0 / sent.max(1) as f64
    );
    // Every datagram of the plan was sent (each send completed), and the
    // server counted against that plan: intact ones once each, the rest
    // lost.
    if sent != p.msgs * p.qps as u64 || seen != sent || ok + lost != sent {
        return Err(broken(format!("the counts do not add up: the plan {}, sent {sent}, the server counted {seen}: {ok} intact + {lost} lost", p.msgs * p.qps as u64)));
    }
    if corrupt > 0 {
        return Err(broken(format!("{corrupt} datagrams arrived corrupt")));
    }
    if dups > 0 && !a.allow_dups {
        return Err(broken(format!(
            "{dups} datagrams arrived twice (--allow-dups on a link that duplicates)"
        )));
    }
    Ok(ExitCode::SUCCESS)
}

fn post_recv_ud(side: &mut Side, p: &Plan, q: usize, slot: u64) -> Result<()> {
    let len = GRH_LEN + p.size as usize;
    let at = (q * UD_RECVS as usize + slot as usize) * len;
    let sge = [side.mr.slice(at, len as u32)?];
    side.qps[q].post_recv(&[RecvWr {
        wr_id: (q as u64) << 40 | slot,
        sges: &sge,
    }])
}

/// The client's last line (`done N`), read on a thread while the server
/// polls its CQ: it comes when the client's transfer ends, however long a
/// lossy link makes it, so the read has no timeout of its own (the
/// server's no-progress limit and TCP keepalive bound it). A client that
/// fails closes the connection without it, which ends the server's run at
/// once instead of at its limit.
struct Done {
    rx: std::sync::mpsc::Receiver<std::io::Result<String>>,
    /// The client's count once its line came.
    got: Option<u64>,
}

impl Done {
    fn watch(line: Line) -> Result<(Done, TcpStream)> {
        let Line { mut r, w } = line;
        r.get_ref()
            .set_read_timeout(None)
            .map_err(io("clearing the TCP read timeout"))?;
        super::wait::keepalive(r.get_ref())?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut l = String::new();
            let _ = tx.send(r.read_line(&mut l).map(|_| l));
        });
        Ok((Done { rx, got: None }, w))
    }

    /// The client's count if its line has come; an error if it went away
    /// without one.
    fn poll(&mut self, t: Timeout, block: bool) -> Result<Option<u64>> {
        if self.got.is_some() {
            return Ok(self.got);
        }
        let r = if block {
            self.rx
                .recv()
                .map_err(|_| std::sync::mpsc::TryRecvError::Disconnected)
        } else {
            self.rx.try_recv()
        };
        let l = match r {
            Ok(Ok(l)) if l.is_empty() => return Err(bad(
                "the client closed the connection before it was done (it reports its own error)",
            )),
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return Err(t.tcp_error("reading the client's done", e)),
            Err(std::sync::mpsc::TryRecvError::Empty) => return Ok(None),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Err(bad("the client's connection is gone"))
            }
        };
        let n = l
            .trim()
            .strip_prefix("done ")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(format!("the client ended with {:?}", l.trim())))?;
        self.got = Some(n);
        Ok(self.got)
    }
}

/// The server's side of `ud`: count every datagram until the client has
/// said how many it sent and nothing has arrived for a while after.
fn serve_ud(side: &mut Side, p: &Plan, t: Timeout, line: Line) -> Result<ExitCode> {
    let n = p.qps as usize;
    let len = GRH_LEN + p.size as usize;
    let (mut done, mut w) = Done::watch(line)?;
    let mut seen = vec![vec![false; p.msgs as usize]; n];
    let (mut ok, mut dups, mut corrupt) = (0u64, 0u64, 0u64);
    let mut wcs = vec![Wc::default(); 64];
    let mut buf = vec![0u8; p.size as usize];
    let mut sent: Option<(u64, Instant)> = None;
    let start = Instant::now();
    let mut last = Instant::now();
    loop {
        let k = side.cq.poll(&mut wcs);
        for wc in &wcs[..k] {
            let q = (wc.wr_id >> 40) as usize;
            let slot = wc.wr_id & ((1 << 40) - 1);
            if q >= n || slot >= UD_RECVS as u64 {
                return Err(broken(format!(
                    "a receive completion with wr_id {:#x}, never posted",
                    wc.wr_id
                )));
            }
            if wc.status != WcStatus::SUCCESS {
                return Err(failed_completion(format!("QP {q}'s receive"), wc));
            }
            side.mr.read(
                (q * UD_RECVS as usize + slot as usize) * len + GRH_LEN,
                &mut buf,
            )?;
            let seq = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
            let intact = wc.byte_len as usize == len
                && seq < p.msgs
                && first_bad(&buf[8..], p.seed, q as u32, seq * p.size as u64 + 8).is_none();
            if !intact {
                corrupt += 1;
            } else if seen[q][seq as usize] {
                dups += 1;
            } else {
                seen[q][seq as usize] = true;
                ok += 1;
            }
            post_recv_ud(side, p, q, slot)?;
        }
        if k > 0 {
            last = Instant::now();
        }
        if sent.is_none() {
            match done.poll(t, false)? {
                Some(s) => sent = Some((s, Instant::now())),
                None if last.elapsed() > t.duration() => {
                    return Err(t.expired("datagrams or the client's done"))
                }
                None => {}
            }
        }
        // Once the client is done, stragglers get half a second of quiet.
        if let Some((_, at)) = sent {
            if at.elapsed() > std::time::Duration::from_millis(500)
                && last.elapsed() > std::time::Duration::from_millis(500)
            {
                break;
            }
        }
    }
    let (total, _) = sent.expect("the loop ends only after done");
    if total != p.msgs * n as u64 {
        return Err(broken(format!(
            "the client says it sent {total} datagrams, not its plan's {}",
            p.msgs * n as u64
        )));
    }
    let lost = total.saturating_sub(ok);
    w.write_all(format!("ud {total} {ok} {lost} {dups} {corrupt}\n").as_bytes())
        .map_err(|e| t.tcp_error("writing the count", e))?;
    println!(
        "stream Ud (server): {ok} of {total} datagrams received intact, {lost} lost, {dups} twice, {corrupt} corrupt, {:.2} s",
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Waits for a client, until `until` if given (`None` then). One client:
/// the listener is closed once it came, so later connections are
/// refused, not queued for a server that will never read them (a
/// script's next client waits for the next server instead).
fn accept(a: &StreamArgs, until: Option<Instant>) -> Result<Option<TcpStream>> {
    let listener = TcpListener::bind(("0.0.0.0", a.port)).map_err(io("listening"))?;
    let Some(until) = until else {
        let (s, _) = listener.accept().map_err(io("accepting the client"))?;
        return Ok(Some(s));
    };
    listener
        .set_nonblocking(true)
        .map_err(io("listening without blocking"))?;
    while Instant::now() < until {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(io("the client's connection"))?;
                return Ok(Some(s));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(e) => return Err(io("accepting the client")(e)),
        }
    }
    Ok(None)
}

/// Serves the client on `s`: one run.
fn serve(a: &StreamArgs, ctx: &Context, gid: [u8; 16], s: TcpStream) -> Result<ExitCode> {
    let t = a.timeout;
    t.bound(&s)?;
    let mut line = Line::new(s)?;
    let p = Plan::parse(&line.read(t, "the client's plan")?)?;
    let rem = (0..p.qps)
        .map(|i| End::parse(&line.read(t, &format!("the client's QP {i}"))?))
        .collect::<Result<Vec<_>>>()?;
    let (mem, access) = memory(&p, true);
    let mut side = Side::new(ctx, &p, mem, access)?;
    let share = p.share() as usize;
    if p.op == Op::Read {
        let mut buf = vec![0u8; p.size as usize];
        for q in 0..p.qps {
            for m in 0..p.msgs {
                let off = m * p.size as u64;
                fill(&mut buf, p.seed, q, off);
                side.mr.write(q as usize * share + off as usize, &buf)?;
            }
        }
    }
    let base = side.mr.addr();
    let my = side.ends(gid, |i| base + (i * share) as u64);
    side.connect(a, access, &my, &rem)?;
    if p.op == Op::Send {
        for q in 0..p.qps as usize {
            for slot in 0..p.msgs.min(p.depth as u64) {
                post_recv(&mut side, &p, q, slot)?;
            }
        }
    }
    if p.op == Op::Ud {
        for q in 0..p.qps as usize {
            for slot in 0..UD_RECVS as u64 {
                post_recv_ud(&mut side, &p, q, slot)?;
            }
        }
    }
    let mut hello = String::new();
    for e in &my {
        hello.push_str(&e.line());
    }
    line.send(t, &hello)?;
    line.send(t, "go\n")?;
    if p.op == Op::Ud {
        return serve_ud(&mut side, &p, t, line);
    }
    let start = Instant::now();
    let (mut done, mut w) = Done::watch(line)?;
    let checked = match p.op {
        Op::Send => serve_sends(&mut side, &p, t, &mut done)?,
        _ => 0,
    };
    // A WRITE or READ run moves nothing the server sees: it waits for the
    // client's line (a client that fails closes the connection instead).
    let wrs = done.poll(t, true)?.expect("a blocking poll answers");
    let send = |w: &mut TcpStream, text: &str| {
        w.write_all(text.as_bytes())
            .map_err(|e| t.tcp_error("writing to the client", e))
    };
    let bytes = p.share() * p.qps as u64;
    let verdict = match p.op {
        Op::Write => check_written(&side, &p),
        Op::Send if checked != bytes => Err(broken(format!("{checked} of {bytes} bytes received"))),
        _ => Ok(()),
    };
    match verdict {
        Ok(()) => {
            send(&mut w, &format!("ok {bytes}\n"))?;
            report(&p, bytes, wrs, start.elapsed().as_secs_f64());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let _ = send(&mut w, &format!("bad {e}\n"));
            Err(e)
        }
    }
}

fn post_recv(side: &mut Side, p: &Plan, q: usize, slot: u64) -> Result<()> {
    let ring = p.depth as usize * p.size as usize;
    let at = q * ring + slot as usize * p.size as usize;
    let sge = [side.mr.slice(at, p.size)?];
    side.qps[q].post_recv(&[RecvWr {
        wr_id: (q as u64) << 40 | slot,
        sges: &sge,
    }])
}

/// The server's side of `send`: each receive checked in place and order,
/// then posted again. Returns the bytes checked.
fn serve_sends(side: &mut Side, p: &Plan, t: Timeout, done: &mut Done) -> Result<u64> {
    let n = p.qps as usize;
    let ring = p.depth as usize * p.size as usize;
    let mut got = vec![0u64; n];
    // Receives posted per QP: the first `depth` (see `server`), then one
    // more each time one is consumed, until the QP's share is covered.
    let mut posted = vec![p.msgs.min(p.depth as u64); n];
    let mut wcs = vec![Wc::default(); 64];
    let mut buf = vec![0u8; p.size as usize];
    let total = p.msgs * n as u64;
    let mut received = 0u64;
    let mut last = Instant::now();
    while received < total {
        let k = side.cq.poll(&mut wcs);
        if k == 0 {
            // A client that failed has closed the connection.
            done.poll(t, false)?;
            if last.elapsed() > t.duration() {
                return Err(t.expired(&format!("receives ({received} of {total}; per QP {got:?})")));
            }
            continue;
        }
        last = Instant::now();
        for w in &wcs[..k] {
            let q = (w.wr_id >> 40) as usize;
            let slot = w.wr_id & ((1 << 40) - 1);
            if w.status != WcStatus::SUCCESS {
                return Err(failed_completion(format!("QP {q}'s receive"), w));
            }
            if q >= n || slot >= p.depth as u64 {
                return Err(broken(format!(
                    "a receive completion with wr_id {:#x}, never posted",
                    w.wr_id
                )));
            }
            let seq = got[q];
            // Receives complete in posting order: message seq fills slot
            // seq % depth.
            if slot != seq % p.depth as u64 {
                return Err(broken(format!(
                    "QP {q}: message {seq} completed in slot {slot}, not {}",
                    seq % p.depth as u64
                )));
            }
            if w.byte_len != p.size {
                return Err(broken(format!(
                    "QP {q}: message {seq} is {} bytes, not {}",
                    w.byte_len, p.size
                )));
            }
            side.mr
                .read(q * ring + slot as usize * p.size as usize, &mut buf)?;
            if let Some(why) = what_is_wrong(&buf, p, q as u32, seq * p.size as u64) {
                return Err(broken(format!("SEND on QP {q}, message {seq}: {why}")));
            }
            got[q] += 1;
            received += 1;
            if posted[q] < p.msgs {
                post_recv(side, p, q, slot)?;
                posted[q] += 1;
            }
        }
    }
    let extra = side.cq.poll(&mut wcs);
    if extra != 0 {
        return Err(broken(format!(
            "{extra} receives after the last: {:?}",
            &wcs[..extra]
        )));
    }
    Ok(received * p.size as u64)
}

/// The server's check of a `write` run: every QP's share, whole.
fn check_written(side: &Side, p: &Plan) -> Result<()> {
    let share = p.share() as usize;
    let mut buf = vec![0u8; p.size as usize];
    for q in 0..p.qps {
        for m in 0..p.msgs {
            let off = m * p.size as u64;
            side.mr.read(q as usize * share + off as usize, &mut buf)?;
            if let Some(why) = what_is_wrong(&buf, p, q, off) {
                return Err(broken(format!("WRITE on QP {q}: {why}")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("100"), Ok(100));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("x").is_err());
        assert!(parse_bytes("99999999999G").is_err());
    }

    #[test]
    fn the_pattern_tells_place_and_qp_apart() {
        let mut a = vec![0u8; 64];
        fill(&mut a, 7, 1, 4096);
        assert_eq!(first_bad(&a, 7, 1, 4096), None);
        assert_eq!(first_bad(&a, 7, 2, 4096).map(|b| b / 8), Some(4096 / 8));
        assert!(first_bad(&a, 7, 1, 4104).is_some());
        a[13] ^= 1;
        assert_eq!(first_bad(&a, 7, 1, 4096), Some(4096 + 13));
    }

    #[test]
    fn a_wrong_message_is_described_by_what_it_holds() {
        let p = Plan {
            op: Op::Read,
            qps: 2,
            msgs: 4,
            size: 4096,
            depth: 2,
            seed: 9,
        };
        let mut m = vec![0u8; 4096];
        fill(&mut m, 9, 1, 8192);
        assert_eq!(what_is_wrong(&m, &p, 1, 8192), None);
        // Its second KiB holds QP 0's first (a packet landed in the
        // wrong place), its last KiB zeros.
        fill(&mut m[1024..2048], 9, 0, 0);
        m[3072..].fill(0);
        let why = what_is_wrong(&m, &p, 1, 8192).unwrap();
        assert!(why.starts_with("byte 9216 of the stream is wrong: 2048 of the message's 4096 bytes, in 2 run(s), the first at bytes 1024..2048"), "{why}");
        assert!(why.ends_with("which hold QP 0's stream byte 0"), "{why}");
        fill(&mut m[..1024], 9, 1, 0);
        fill(&mut m[1024..], 9, 1, 8192 + 1024);
        let why = what_is_wrong(&m, &p, 1, 8192).unwrap();
        assert!(
            why.ends_with(
                "the first at bytes 0..1024 of the message, which hold QP 1's stream byte 0"
            ),
            "{why}"
        );
        m[..8].fill(0x5a);
        assert!(what_is_wrong(&m, &p, 1, 8192)
            .unwrap()
            .ends_with("nothing of the streams"));
    }

    #[test]
    fn plans_round_trip_and_bad_ones_are_named() {
        let p = Plan {
            op: Op::Read,
            qps: 8,
            msgs: 128,
            size: 65536,
            depth: 16,
            seed: 42,
        };
        assert_eq!(Plan::parse(&p.header()).unwrap(), p);
        assert!(Plan::parse("rverbs-stream 1 read 0 1 8 1 1").is_err());
        assert!(Plan::parse("rverbs-stream 1 read 1 1 7 1 1").is_err());
        assert!(Plan::parse("hello").is_err());
        let big = "rverbs-stream 1 write 1024 1000000 65536 16 1";
        assert!(Plan::parse(big)
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }

    #[test]
    fn ends_round_trip() {
        let e = End {
            qpn: 17,
            psn: 0xabcdef,
            gid: [1; 16],
            addr: 0x7f00_0000_1000,
            rkey: 99,
        };
        let back = End::parse(&e.line()).unwrap();
        assert_eq!(
            (back.qpn, back.psn, back.gid, back.addr, back.rkey),
            (17, 0xabcdef, [1; 16], 0x7f00_0000_1000, 99)
        );
        assert!(End::parse("1 2 zz 3 4").is_err());
    }
}

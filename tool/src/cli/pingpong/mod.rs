//! `rverbs pingpong`: wire-compatible with rdma-core's `ibv_rc_pingpong`,
//! and with `--uc`, `--ud` and `--srq N` (`-q N`) with `ibv_uc_pingpong`,
//! `ibv_ud_pingpong` and `ibv_srq_pingpong -q N` (same options, the same
//! TCP exchange on port 18515, the same traffic pattern and the same
//! output lines), so either side can be ours or theirs.
//!
//! Unlike the C tools, no wait is unbounded once a peer has connected (see
//! [`super::wait`]), and the values given are checked before use.

mod exchange;

use super::wait::{bad_value, failed_completion, parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::{
    Access, Ah, AhAttr, CompChannel, Context, Cq, Error, Grh, Mr, Mtu, Pd, Qp, QpAttr, QpCaps,
    QpInit, QpState, QpType, RecvWr, Result, SendOp, SendWr, Srq, Wc,
};
use rverbs_tool::wire::pingpong::{gid_to_string, Dest};
use std::process::ExitCode;
use std::time::Instant;

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// The Q_Key `ibv_ud_pingpong` uses on both sides.
const UD_QKEY: u32 = 0x1111_1111;
/// Room for the GRH at the head of every UD receive buffer.
const GRH_LEN: u32 = 40;
/// `ibv_srq_pingpong`'s `MAX_QP`: `-q` must be below it.
const SRQ_MAX_QP: u32 = 256;

#[derive(Args)]
pub struct PingpongArgs {
    /// Listen on / connect to this TCP port.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Use this RDMA device (default: the first).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Use this port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// Size of each message (default 4096; 1024 with --ud, where it must
    /// fit the port's active MTU).
    #[arg(short = 's', long)]
    size: Option<u32>,
    /// Path MTU (256, 512, 1024, 2048, 4096; not used by --ud).
    #[arg(short = 'm', long, default_value_t = 1024)]
    mtu: u32,
    /// Receives to keep posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Messages to exchange (with --srq: in all, over all QPs).
    #[arg(short = 'n', long, default_value_t = 1000)]
    iters: u32,
    /// Service level.
    #[arg(short = 'l', long, default_value_t = 0)]
    sl: u8,
    /// Sleep on completion events instead of polling.
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Local GID index (RoCE needs one).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// Validate the received buffer.
    #[arg(short = 'c', long = "chk")]
    chk: bool,
    /// Unreliable datagrams, like ibv_ud_pingpong.
    #[arg(long, conflicts_with_all = ["uc", "srq"])]
    ud: bool,
    /// Unreliable connection, like ibv_uc_pingpong.
    #[arg(long, conflicts_with = "srq")]
    uc: bool,
    /// N RC QPs sharing one SRQ, like `ibv_srq_pingpong -q N`.
    #[arg(short = 'q', long, visible_alias = "num-qp", value_name = "N")]
    srq: Option<u32>,
    /// Give up after this many seconds without progress: no answer on the
    /// TCP exchange, no completion, no event. A server waits for its
    /// client to connect without limit.
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    timeout: Timeout,
    /// The server to connect to (none: be the server).
    server: Option<String>,
}

/// Which of rdma-core's pingpong tools this run speaks to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Rc,
    Uc,
    Ud,
    /// This many RC QPs on one SRQ.
    Srq(u32),
}

impl Mode {
    fn of(a: &PingpongArgs) -> Mode {
        match (a.ud, a.uc, a.srq) {
            (true, _, _) => Mode::Ud,
            (_, true, _) => Mode::Uc,
            (_, _, Some(n)) => Mode::Srq(n),
            _ => Mode::Rc,
        }
    }

    fn qps(self) -> u32 {
        match self {
            Mode::Srq(n) => n,
            _ => 1,
        }
    }

    /// Where the payload sits in the buffer: after the GRH for UD.
    fn offset(self) -> u32 {
        if self == Mode::Ud {
            GRH_LEN
        } else {
            0
        }
    }
}

/// Everything the run uses, resolved from the arguments.
struct Setup {
    mode: Mode,
    size: u32,
    mtu: Mtu,
}

struct Pp {
    mode: Mode,
    cq: Cq,
    pd: Pd,
    qps: Vec<Qp>,
    srq: Option<Srq>,
    mr: Mr,
    channel: Option<CompChannel>,
    /// UD: where sends go (created once the peer's address is known).
    ah: Option<(Ah, u32)>,
    size: u32,
    rx_depth: u32,
    inline: bool,
    /// Per QP: which of RECV_WRID / SEND_WRID are outstanding.
    pending: Vec<u64>,
}

fn setup(a: &PingpongArgs) -> Result<Setup> {
    let mode = Mode::of(a);
    let mtu = match a.mtu {
        256 => Mtu::M256,
        512 => Mtu::M512,
        1024 => Mtu::M1024,
        2048 => Mtu::M2048,
        4096 => Mtu::M4096,
        m => {
            return Err(Error::InvalidArgument {
                what: format!("MTU {m}"),
            })
        }
    };
    if a.iters == 0 {
        return Err(bad_value("-n 0: at least one message must be exchanged"));
    }
    if let Mode::Srq(n) = mode {
        if n == 0 || n >= SRQ_MAX_QP {
            return Err(bad_value(format!(
                "-q {n}: the number of QPs must be 1 to {}",
                SRQ_MAX_QP - 1
            )));
        }
        if n > a.rx_depth {
            return Err(bad_value(format!(
                "rx_depth {} is too small for {n} QPs -- must have at least one receive per QP.",
                a.rx_depth
            )));
        }
    }
    let size = a.size.unwrap_or(if mode == Mode::Ud { 1024 } else { 4096 });
    Ok(Setup { mode, size, mtu })
}

pub fn pingpong(a: &PingpongArgs) -> Result<ExitCode> {
    let s = setup(a)?;
    let ctx = Context::open_by_name(a.dev.as_deref())?;
    check_limits(&ctx, a, &s)?;
    let mut pp = Pp::new(&ctx, a, &s)?;
    let posted = pp.post_recvs(a.rx_depth)?;
    if posted < a.rx_depth {
        return Err(Error::InvalidArgument {
            what: format!("couldn't post receive ({posted})"),
        });
    }
    if a.events {
        pp.cq.req_notify(false)?;
    }
    let port = ctx.query_port(a.ib_port)?;
    if port.link_layer != 2 && port.lid == 0 {
        eprintln!("Couldn't get local LID");
        return Ok(ExitCode::FAILURE);
    }
    let gid = match a.gid_idx {
        Some(i) => ctx.query_gid(a.ib_port, i)?,
        None => [0; 16],
    };
    let mut my: Vec<Dest> = pp
        .qps
        .iter()
        .map(|q| Dest {
            lid: port.lid,
            qpn: q.qpn(),
            psn: psn(),
            gid,
        })
        .collect();
    for d in &my {
        // ibv_ud_pingpong prints "PSN 0x…: GID" here; kept for scripts.
        let sep = if s.mode == Mode::Ud { ":" } else { "," };
        println!(
            "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{sep} GID {}",
            d.lid,
            d.qpn,
            d.psn,
            gid_to_string(&d.gid)
        );
    }
    if let Mode::Srq(_) = s.mode {
        // ibv_srq_pingpong sends its whole table, zeroed past -q.
        my.resize(
            exchange::SRQ_MESSAGES,
            Dest {
                lid: 0,
                qpn: 0,
                psn: 0,
                gid: [0; 16],
            },
        );
    }
    let rem = match &a.server {
        Some(host) => exchange::client(host, a.port, &my, a.timeout)?,
        None => exchange::server(a.port, &my, a.timeout, |rem| pp.connect(a, &s, &my, rem))?,
    };
    for d in &rem[..pp.qps.len()] {
        println!(
            "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
            d.lid,
            d.qpn,
            d.psn,
            gid_to_string(&d.gid)
        );
    }
    if a.server.is_some() {
        pp.connect(a, &s, &my, &rem)?;
    }
    let off = s.mode.offset() as usize;
    if a.chk && a.server.is_some() {
        // The client stamps the first byte of each page; the server checks
        // them. The value is the C tools' `i / page_size % sizeof(char)`,
        // which is always 0: kept as it is so that they interoperate.
        for i in (0..s.size as usize).step_by(4096) {
            pp.mr.write(off + i, &[stamp(i)])?;
        }
    }
    for p in pp.pending.iter_mut() {
        *p = RECV_WRID;
    }
    if a.server.is_some() {
        for i in 0..pp.qps.len() {
            pp.post_send(i)?;
            pp.pending[i] |= SEND_WRID;
        }
    }
    let start = Instant::now();
    pp.run(a)?;
    let usec = start.elapsed().as_micros().max(1) as f64;
    let bytes = s.size as u64 * a.iters as u64 * 2;
    println!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    );
    println!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        a.iters,
        usec / 1e6,
        usec / a.iters as f64
    );
    if a.chk && a.server.is_none() {
        for i in (0..s.size as usize).step_by(4096) {
            let mut b = [0u8];
            pp.mr.read(off + i, &mut b)?;
            if b[0] != stamp(i) {
                eprintln!("invalid data in page {}", i / 4096);
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks `-r` and `-s` against what the device can do: the receive queue
/// and the CQ (`rx_depth` + one entry per QP) must fit, and a message must
/// fit the port's largest (UD: its active MTU).
fn check_limits(ctx: &Context, a: &PingpongArgs, s: &Setup) -> Result<()> {
    let dev = ctx.query_device()?;
    let max_rx = dev.max_qp_wr.min(dev.max_cqe.saturating_sub(s.mode.qps()));
    let max_rx = match s.mode {
        Mode::Srq(_) => max_rx.min(dev.max_srq_wr),
        _ => max_rx,
    };
    if a.rx_depth == 0 || a.rx_depth > max_rx {
        return Err(bad_value(format!(
            "-r {}: the receive depth must be 1 to {max_rx} (the device's max_qp_wr {}, max_srq_wr {} and max_cqe {})",
            a.rx_depth, dev.max_qp_wr, dev.max_srq_wr, dev.max_cqe
        )));
    }
    let port = ctx.query_port(a.ib_port)?;
    if s.size > port.max_msg_sz {
        return Err(bad_value(format!(
            "-s {}: larger than the port's largest message ({} bytes)",
            s.size, port.max_msg_sz
        )));
    }
    if s.mode == Mode::Ud {
        let mtu = Mtu::from_raw(port.active_mtu).map_or(0, Mtu::bytes);
        if s.size > mtu {
            return Err(bad_value(format!(
                "-s {}: Requested size larger than port MTU ({mtu})",
                s.size
            )));
        }
    }
    Ok(())
}

/// The byte `-c` stamps at payload offset `i` (see above).
fn stamp(i: usize) -> u8 {
    (i / 4096 % std::mem::size_of::<u8>()) as u8
}

/// A random 24-bit PSN.
fn psn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() as u32) & 0xff_ffff
}

impl Pp {
    fn new(ctx: &Context, a: &PingpongArgs, s: &Setup) -> Result<Pp> {
        let channel = if a.events {
            Some(ctx.create_comp_channel()?)
        } else {
            None
        };
        let pd = ctx.alloc_pd()?;
        let len = (s.size + s.mode.offset()).max(1) as usize;
        let mr = pd.alloc_mr(len, Access::LOCAL_WRITE)?;
        mr.fill(0, mr.len(), 0x7b)?;
        let cq = ctx.create_cq(a.rx_depth + s.mode.qps(), channel.as_ref(), 0)?;
        let srq = match s.mode {
            Mode::Srq(_) => Some(pd.create_srq(a.rx_depth, 1, 0)?),
            _ => None,
        };
        let qp_type = match s.mode {
            Mode::Uc => QpType::Uc,
            Mode::Ud => QpType::Ud,
            _ => QpType::Rc,
        };
        let mut qps = Vec::new();
        for i in 0..s.mode.qps() {
            let mut qp = pd
                .create_qp(&QpInit {
                    qp_type,
                    send_cq: &cq,
                    recv_cq: &cq,
                    caps: QpCaps {
                        max_send_wr: 1,
                        max_recv_wr: if srq.is_some() { 0 } else { a.rx_depth },
                        max_send_sge: 1,
                        max_recv_sge: if srq.is_some() { 0 } else { 1 },
                        max_inline_data: 0,
                    },
                    sq_sig_all: false,
                    srq: srq.as_ref(),
                })
                .map_err(|e| with_context(&format!("Couldn't create QP[{i}]"), e))?;
            let init = if s.mode == Mode::Ud {
                QpAttr::init_ud(a.ib_port, UD_QKEY)
            } else {
                QpAttr::init(a.ib_port, Access::empty())
            };
            qp.modify(&init)
                .map_err(|e| with_context("Failed to modify QP to INIT", e))?;
            qps.push(qp);
        }
        let inline = qps.iter().all(|q| q.caps().max_inline_data >= s.size);
        Ok(Pp {
            mode: s.mode,
            cq,
            pd,
            pending: vec![0; qps.len()],
            qps,
            srq,
            mr,
            channel,
            ah: None,
            size: s.size,
            rx_depth: a.rx_depth,
            inline,
        })
    }

    /// Brings the QPs up to RTS towards `rem` (and, for UD, makes the AH),
    /// with the attributes each C tool uses.
    fn connect(&mut self, a: &PingpongArgs, s: &Setup, my: &[Dest], rem: &[Dest]) -> Result<()> {
        // Every C tool takes the GRH from the first message's GID.
        let grh = |hop_limit| {
            (rem[0].gid[8..] != [0; 8]).then(|| Grh {
                dgid: rem[0].gid,
                hop_limit,
                sgid_index: a.gid_idx.unwrap_or(0) as u8,
                ..Grh::default()
            })
        };
        if self.mode == Mode::Ud {
            let qp = &mut self.qps[0];
            qp.modify(&QpAttr::state(QpState::Rtr))
                .map_err(|e| with_context("Failed to modify QP to RTR", e))?;
            qp.modify(&QpAttr::rts_ud(my[0].psn))
                .map_err(|e| with_context("Failed to modify QP to RTS", e))?;
            let av = AhAttr {
                dlid: rem[0].lid,
                sl: a.sl,
                port_num: a.ib_port,
                grh: grh(64),
                ..AhAttr::default()
            };
            let ah = self
                .pd
                .create_ah(&av)
                .map_err(|e| with_context("Failed to create AH", e))?;
            self.ah = Some((ah, rem[0].qpn));
            return Ok(());
        }
        for (i, qp) in self.qps.iter_mut().enumerate() {
            let av = AhAttr {
                dlid: rem[i].lid,
                sl: a.sl,
                port_num: a.ib_port,
                grh: grh(1),
                ..AhAttr::default()
            };
            let mut rtr = QpAttr::rtr(av, s.mtu, rem[i].qpn, rem[i].psn);
            let mut rts = QpAttr::rts(my[i].psn);
            if self.mode == Mode::Uc {
                // UC has no responder resources, RNR timer or retries:
                // the kernel refuses those attributes on a UC QP.
                rtr.max_dest_rd_atomic = None;
                rtr.min_rnr_timer = None;
                rts = QpAttr::rts_ud(my[i].psn);
            }
            qp.modify(&rtr)
                .map_err(|e| with_context(&format!("Failed to modify QP[{i}] to RTR"), e))?;
            qp.modify(&rts)
                .map_err(|e| with_context(&format!("Failed to modify QP[{i}] to RTS"), e))?;
        }
        Ok(())
    }

    /// Posts up to `n` receives (to the SRQ when there is one); returns how
    /// many were posted.
    fn post_recvs(&mut self, n: u32) -> Result<u32> {
        let s = [self.mr.slice(0, self.size + self.mode.offset())?];
        let wr = RecvWr {
            wr_id: RECV_WRID,
            sges: &s,
        };
        for i in 0..n {
            let r = match &mut self.srq {
                Some(srq) => srq.post_recv(&[wr]),
                None => self.qps[0].post_recv(&[wr]),
            };
            if r.is_err() {
                return Ok(i);
            }
        }
        Ok(n)
    }

    fn post_send(&mut self, qp: usize) -> Result<()> {
        let off = self.mode.offset() as usize;
        let s = [self.mr.slice(off, self.size)?];
        // Inline: the bytes are copied now, from the MR's current content.
        let mut data = Vec::new();
        let wr = if self.inline {
            data.resize(self.size as usize, 0);
            self.mr.read(off, &mut data)?;
            SendWr::inline(SEND_WRID, SendOp::Send, &data)
        } else {
            SendWr::new(SEND_WRID, SendOp::Send, &s)
        };
        let wr = match &self.ah {
            Some((ah, qpn)) => wr.to(ah, *qpn, UD_QKEY),
            None => wr,
        };
        self.qps[qp].post_send(&[wr])
    }

    /// The QP a completion belongs to (`find_qp` of ibv_srq_pingpong).
    fn qp_index(&self, w: &Wc) -> Result<usize> {
        if self.qps.len() == 1 {
            return Ok(0);
        }
        self.qps
            .iter()
            .position(|q| q.qpn() == w.qp_num)
            .ok_or_else(|| Error::InvalidArgument {
                what: format!("Couldn't find QPN {:06x}", w.qp_num),
            })
    }

    fn run(&mut self, a: &PingpongArgs) -> Result<()> {
        let (mut scnt, mut rcnt, mut routs) = (0u32, 0u32, self.rx_depth);
        let nqp = self.qps.len() as u32;
        let mut wc = vec![
            Wc::default();
            if nqp > 1 {
                (nqp + self.rx_depth) as usize
            } else {
                2
            }
        ];
        let what = |scnt: u32, rcnt: u32| {
            format!(
                "a completion (sent {scnt} and received {rcnt} of {} messages; does the peer use the same -n?)",
                a.iters
            )
        };
        while rcnt < a.iters || scnt < a.iters {
            let n = if let Some(ch) = &self.channel {
                a.timeout.event(ch, || what(scnt, rcnt))?;
                self.cq.req_notify(false)?;
                self.cq.poll(&mut wc)
            } else {
                let cq = &mut self.cq;
                a.timeout.spin(
                    || what(scnt, rcnt),
                    || {
                        let n = cq.poll(&mut wc);
                        Ok((n > 0).then_some(n))
                    },
                )?
            };
            for w in &wc[..n] {
                if !w.is_ok() {
                    return Err(failed_completion(
                        format!("Failed status {} for wr_id {}", w.status, w.wr_id),
                        w,
                    ));
                }
                let q = self.qp_index(w)?;
                match w.wr_id {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        routs -= 1;
                        if routs <= nqp {
                            routs += self.post_recvs(self.rx_depth - routs)?;
                            if routs < self.rx_depth {
                                return Err(Error::InvalidArgument {
                                    what: format!("Couldn't post receive ({routs})"),
                                });
                            }
                        }
                        rcnt += 1;
                    }
                    other => {
                        return Err(Error::InvalidArgument {
                            what: format!("Completion for unknown wr_id {other}"),
                        })
                    }
                }
                self.pending[q] &= !w.wr_id;
                if scnt < a.iters && self.pending[q] == 0 {
                    self.post_send(q)?;
                    self.pending[q] = RECV_WRID | SEND_WRID;
                }
            }
        }
        Ok(())
    }
}

fn with_context(what: &str, e: Error) -> Error {
    Error::InvalidArgument {
        what: format!("{what}: {e}"),
    }
}

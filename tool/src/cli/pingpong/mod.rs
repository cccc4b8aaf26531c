//! `rverbs pingpong`: wire-compatible with rdma-core's `ibv_rc_pingpong`
//! (same options, the same TCP exchange on port 18515, the same traffic
//! pattern and the same output lines), so either side can be ours or theirs.
//!
//! Unlike the C tool, no wait is unbounded once a peer has connected (see
//! [`super::wait`]), and the values given are checked before use.

use super::wait::{bad_value, failed_completion, parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::{
    Access, AhAttr, CompChannel, Context, Cq, Error, Grh, Mr, Mtu, Qp, QpAttr, QpCaps, QpInit,
    QpType, RecvWr, Result, SendOp, SendWr, Wc,
};
use rverbs_tool::wire::pingpong::{gid_to_string, Dest, MSG_LEN};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Instant;

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

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
    /// Size of each message.
    #[arg(short = 's', long, default_value_t = 4096)]
    size: u32,
    /// Path MTU (256, 512, 1024, 2048, 4096).
    #[arg(short = 'm', long, default_value_t = 1024)]
    mtu: u32,
    /// Receives to keep posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Messages to exchange.
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
    /// Give up after this many seconds without progress: no answer on the
    /// TCP exchange, no completion, no event. A server waits for its
    /// client to connect without limit.
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    timeout: Timeout,
    /// The server to connect to (none: be the server).
    server: Option<String>,
}

struct Pp {
    cq: Cq,
    qp: Qp,
    mr: Mr,
    channel: Option<CompChannel>,
    size: u32,
    rx_depth: u32,
    inline: bool,
    pending: u64,
}

pub fn pingpong(a: &PingpongArgs) -> Result<ExitCode> {
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
    let ctx = Context::open_by_name(a.dev.as_deref())?;
    check_limits(&ctx, a)?;
    let mut pp = Pp::new(&ctx, a)?;
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
    let my = Dest {
        lid: port.lid,
        qpn: pp.qp.qpn(),
        psn: psn(),
        gid,
    };
    println!(
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        my.lid,
        my.qpn,
        my.psn,
        gid_to_string(&my.gid)
    );
    let connect = |pp: &mut Pp, rem: &Dest| pp.connect(a, mtu, my.psn, rem);
    let rem = match &a.server {
        Some(host) => client_exchange(host, a.port, &my, a.timeout)?,
        None => server_exchange(a.port, &my, &mut pp, connect, a.timeout)?,
    };
    println!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        rem.lid,
        rem.qpn,
        rem.psn,
        gid_to_string(&rem.gid)
    );
    if a.server.is_some() {
        connect(&mut pp, &rem)?;
    }
    if a.chk && a.server.is_some() {
        // The client stamps the first byte of each page; the server checks
        // them. The value is ibv_rc_pingpong's `i / page_size % sizeof(char)`,
        // which is always 0: kept as it is so that the two interoperate.
        for i in (0..a.size as usize).step_by(4096) {
            pp.mr.write(i, &[stamp(i)])?;
        }
    }
    pp.pending = RECV_WRID;
    if a.server.is_some() {
        pp.post_send()?;
        pp.pending |= SEND_WRID;
    }
    let start = Instant::now();
    pp.run(a)?;
    let usec = start.elapsed().as_micros().max(1) as f64;
    let bytes = a.size as u64 * a.iters as u64 * 2;
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
        for i in (0..a.size as usize).step_by(4096) {
            let mut b = [0u8];
            pp.mr.read(i, &mut b)?;
            if b[0] != stamp(i) {
                eprintln!("invalid data in page {}", i / 4096);
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks `-r` and `-s` against what the device can do: the receive queue
/// and the CQ (`rx_depth + 1` entries) must fit, and a message must fit
/// the port's largest.
fn check_limits(ctx: &Context, a: &PingpongArgs) -> Result<()> {
    let dev = ctx.query_device()?;
    let max_rx = dev.max_qp_wr.min(dev.max_cqe.saturating_sub(1));
    if a.rx_depth == 0 || a.rx_depth > max_rx {
        return Err(bad_value(format!(
            "-r {}: the receive depth must be 1 to {max_rx} (the device's max_qp_wr {} and max_cqe {})",
            a.rx_depth, dev.max_qp_wr, dev.max_cqe
        )));
    }
    let port = ctx.query_port(a.ib_port)?;
    if a.size > port.max_msg_sz {
        return Err(bad_value(format!(
            "-s {}: larger than the port's largest message ({} bytes)",
            a.size, port.max_msg_sz
        )));
    }
    Ok(())
}

/// The byte `-c` stamps at offset `i` (see above).
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
    fn new(ctx: &Context, a: &PingpongArgs) -> Result<Pp> {
        let channel = if a.events {
            Some(ctx.create_comp_channel()?)
        } else {
            None
        };
        let pd = ctx.alloc_pd()?;
        let mr = pd.alloc_mr(a.size.max(1) as usize, Access::LOCAL_WRITE)?;
        mr.fill(0, mr.len(), 0x7b)?;
        let cq = ctx.create_cq(a.rx_depth + 1, channel.as_ref(), 0)?;
        let mut qp = pd.create_qp(&QpInit {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            caps: QpCaps {
                max_send_wr: 1,
                max_recv_wr: a.rx_depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            srq: None,
        })?;
        let inline = qp.caps().max_inline_data >= a.size;
        qp.modify(&QpAttr::init(a.ib_port, Access::empty()))?;
        Ok(Pp {
            cq,
            qp,
            mr,
            channel,
            size: a.size,
            rx_depth: a.rx_depth,
            inline,
            pending: 0,
        })
    }

    fn connect(&mut self, a: &PingpongArgs, mtu: Mtu, my_psn: u32, rem: &Dest) -> Result<()> {
        let grh = (rem.gid[8..] != [0; 8]).then(|| Grh {
            dgid: rem.gid,
            hop_limit: 1,
            sgid_index: a.gid_idx.unwrap_or(0) as u8,
            ..Grh::default()
        });
        let av = AhAttr {
            dlid: rem.lid,
            sl: a.sl,
            port_num: a.ib_port,
            grh,
            ..AhAttr::default()
        };
        self.qp
            .modify(&QpAttr::rtr(av, mtu, rem.qpn, rem.psn))
            .map_err(|e| with_context("Failed to modify QP to RTR", e))?;
        self.qp
            .modify(&QpAttr::rts(my_psn))
            .map_err(|e| with_context("Failed to modify QP to RTS", e))
    }

    fn post_recvs(&mut self, n: u32) -> Result<u32> {
        let s = [self.mr.slice(0, self.size)?];
        let wr = RecvWr {
            wr_id: RECV_WRID,
            sges: &s,
        };
        for i in 0..n {
            if self.qp.post_recv(&[wr]).is_err() {
                return Ok(i);
            }
        }
        Ok(n)
    }

    fn post_send(&mut self) -> Result<()> {
        let s = [self.mr.slice(0, self.size)?];
        let wr = if self.inline {
            // Inline: the bytes are copied now, from the MR's current content.
            let mut data = vec![0u8; self.size as usize];
            self.mr.read(0, &mut data)?;
            return self
                .qp
                .post_send(&[SendWr::inline(SEND_WRID, SendOp::Send, &data)]);
        } else {
            SendWr::new(SEND_WRID, SendOp::Send, &s)
        };
        self.qp.post_send(&[wr])
    }

    fn run(&mut self, a: &PingpongArgs) -> Result<()> {
        let (mut scnt, mut rcnt, mut routs) = (0u32, 0u32, self.rx_depth);
        let mut wc = [Wc::default(); 2];
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
                match w.wr_id {
                    SEND_WRID => scnt += 1,
                    RECV_WRID => {
                        routs -= 1;
                        if routs <= 1 {
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
                self.pending &= !w.wr_id;
                if scnt < a.iters && self.pending == 0 {
                    self.post_send()?;
                    self.pending = RECV_WRID | SEND_WRID;
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

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        what: what.to_string(),
        source: e,
    }
}

/// The peer's address message, decoded; a malformed one is an error
/// naming what was wrong.
fn read_dest(s: &mut TcpStream, t: Timeout) -> Result<Dest> {
    let what = "Couldn't read remote address";
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg).map_err(|e| t.tcp_error(what, e))?;
    Dest::decode(&msg).map_err(|e| {
        io(
            what,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })
}

fn client_exchange(host: &str, port: u16, my: &Dest, t: Timeout) -> Result<Dest> {
    let mut s = t
        .connect(host, port)
        .map_err(|e| t.tcp_error(&format!("Couldn't connect to {host}:{port}"), e))?;
    s.write_all(&my.encode())
        .map_err(|e| t.tcp_error("Couldn't send local address", e))?;
    let rem = read_dest(&mut s, t)?;
    s.write_all(b"done\0")
        .map_err(|e| t.tcp_error("Couldn't write done", e))?;
    Ok(rem)
}

fn server_exchange(
    port: u16,
    my: &Dest,
    pp: &mut Pp,
    connect: impl Fn(&mut Pp, &Dest) -> Result<()>,
    t: Timeout,
) -> Result<Dest> {
    // Dual-stack like getaddrinfo(AI_PASSIVE): IPv6 any also takes IPv4.
    let l = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| io(&format!("Couldn't listen to port {port}"), e))?;
    // Waiting for a client has no limit (a server waits for its client);
    // once one connected, every read and write on the exchange has.
    let (mut s, _) = l.accept().map_err(|e| io("accept() failed", e))?;
    drop(l);
    t.bound(&s)?;
    let rem = read_dest(&mut s, t)?;
    connect(pp, &rem)?;
    s.write_all(&my.encode())
        .map_err(|e| t.tcp_error("Couldn't send local address", e))?;
    // The client's "done": read whatever it sends (the C tool reads a whole
    // message's worth and ignores it); at most the timeout.
    let mut done = [0u8; MSG_LEN];
    let _ = s.read(&mut done);
    Ok(rem)
}

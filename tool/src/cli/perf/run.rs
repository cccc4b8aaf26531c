//! Setting up the QP pair with the peer (perftest's exchange, step by step
//! as each `ib_*` tool takes it) and running each test.

use super::super::wait::{bad_value, failed_completion, keepalive, Timeout};
use super::{report, Conn, PerfArgs, Test};
use rverbs::{
    Access, Ah, AhAttr, CompChannel, Context, Cq, Error, GidType, Grh, Mr, Mtu, Qp, QpAttr, QpCaps,
    QpInit, QpState, QpType, RecvWr, Remote, Result, SendOp, SendWr, Wc,
};
use rverbs_tool::wire::perf::{
    mtu_msg, parse_cycle_buffer, parse_mtu, parse_version, version_msg, BwReport, Peer, DONE,
    MSG_LEN, MSG_LEN_GID, MTU_LEN, VERSION_LEN,
};
use rverbs_tool::wire::BadMessage;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Signal one work request in this many on bandwidth tests (perftest's
/// default CQ moderation).
const CQ_MOD: u32 = 100;
/// Receives kept posted by a send test's receiver (perftest's rx depth).
const RX_DEPTH: u32 = 512;
/// Latency samples reserved up front (more grow the vector as they come).
const SAMPLES_RESERVED: u32 = 1 << 20;
/// Our cycle buffer (perftest's default: the page size) and cache line.
const CYCLE_BUFFER: u32 = 4096;
const CACHE_LINE: u32 = 64;
/// `IBV_LINK_LAYER_ETHERNET`.
const LINK_ETHERNET: u8 = 2;
/// perftest's Q_Key for UD.
const UD_QKEY: u32 = 0x1111_1111;
/// The global routing header in front of each UD receive.
const GRH_BYTES: u32 = 40;

/// One QP of the test and what it targets at the peer. QP `i` sends from
/// (and reads into) region `2i` of the MR; the peer targets region
/// `2i + 1`.
struct Lane {
    qp: Qp,
    remote: Remote,
    /// UD: the peer's address and QPN.
    ud: Option<(Ah, u32)>,
    /// Receives posted and not yet completed.
    recvs: u32,
}

struct Bench {
    cq: Cq,
    lanes: Vec<Lane>,
    mr: Mr,
    channel: Option<CompChannel>,
    /// Bytes per region.
    region: usize,
    /// Largest payload sent inline.
    inline: u32,
    /// The payload of inline sends and writes (its content does not matter
    /// to the measurement).
    zeros: Vec<u8>,
    /// How long a wait may see no progress.
    timeout: Timeout,
    /// Counts bandwidth runs (the tag of their wr_ids).
    generation: u8,
}

/// The phases of a timed run (perftest's alarm states): a margin not
/// measured, the sample, another margin, the end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Warm,
    Sample,
    Cool,
    End,
}

/// How a bandwidth run ends: after its iterations, after a duration
/// (`-D`), or never (`--run_infinitely`, printing each period).
#[derive(Clone, Copy)]
enum Length {
    Iters(u32),
    Timed { margin: Duration, sample: Duration },
    Forever { period: Duration },
}

impl Length {
    fn of(a: &PerfArgs, iters: u32) -> Length {
        let (d, m) = a.duration_and_margin();
        if a.run_infinitely {
            Length::Forever {
                period: Duration::from_secs(d.into()),
            }
        } else if a.duration.is_some() {
            Length::Timed {
                margin: Duration::from_secs(m.into()),
                sample: Duration::from_secs((d - 2 * m).into()),
            }
        } else {
            Length::Iters(iters)
        }
    }

    /// Run forever: once a period is over, prints its figures (`counted`
    /// messages of `size` bytes) and starts the next.
    fn tick(self, now: Instant, start: &mut Instant, counted: &mut u64, size: u32, gbits: bool) {
        if let Length::Forever { period } = self {
            let dt = now.duration_since(*start);
            if dt >= period {
                let r = timed_report(size, *counted, dt.as_secs_f64(), gbits);
                println!("{}", report::bw_line(&r));
                *counted = 0;
                *start = now;
            }
        }
    }

    /// The phase `t` after the start.
    fn phase(self, t: Duration) -> Phase {
        match self {
            Length::Timed { margin, .. } if t < margin => Phase::Warm,
            Length::Timed { margin, sample } if t < margin + sample => Phase::Sample,
            Length::Timed { margin, sample } if t < margin * 2 + sample => Phase::Cool,
            Length::Timed { .. } => Phase::End,
            _ => Phase::Sample,
        }
    }
}

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        what: what.into(),
        source: e,
    }
}

fn bad_message(what: &str, e: BadMessage) -> Error {
    io(
        what,
        std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    )
}

/// How a test's exchange goes: perftest's tools differ in the number and
/// place of the address rounds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// write-bw, read-bw, atomic-bw: the server only waits.
    RdmaBw,
    SendBw,
    SendLat,
    /// write-lat (both run), read-lat and atomic-lat (the server only
    /// waits).
    RdmaLat,
}

fn shape(t: Test) -> Shape {
    match t {
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => Shape::RdmaBw,
        Test::SendBw => Shape::SendBw,
        Test::SendLat => Shape::SendLat,
        Test::WriteLat | Test::ReadLat | Test::AtomicLat => Shape::RdmaLat,
    }
}

/// How the exchange travels: perftest's TCP socket, or (with `-R`) its
/// rdma_cm connection.
enum Link {
    Tcp(TcpStream),
    Cm(Box<super::cm::Comm>),
}

/// The out-of-band side of the exchange: each message goes both ways, the
/// client writing first.
struct Oob {
    link: Link,
    client: bool,
    t: Timeout,
    /// Whether address messages carry a GID (then they are longer; TCP).
    gid: bool,
    /// The GID index our rdma_cm address messages carry.
    gid_index: u32,
}

impl Oob {
    fn xchg(&mut self, mine: &[u8], theirs: &mut [u8], what: &str) -> Result<()> {
        let t = self.t;
        let s = match &mut self.link {
            Link::Cm(c) => return c.xchg(mine, theirs, Some(t), what),
            Link::Tcp(s) => s,
        };
        let send = |s: &mut TcpStream| {
            s.write_all(mine)
                .map_err(|e| t.tcp_error(&format!("sending {what}"), e))
        };
        if self.client {
            send(s)?;
        }
        s.read_exact(theirs)
            .map_err(|e| t.tcp_error(&format!("reading the peer's {what}"), e))?;
        if !self.client {
            send(s)?;
        }
        Ok(())
    }

    /// One round of address messages (perftest's `ctx_hand_shake`): text
    /// over TCP, perftest's binary `pingpong_dest` over rdma_cm.
    fn hand_shake(&mut self, me: &Peer) -> Result<Peer> {
        if let Link::Cm(c) = &mut self.link {
            let mut m = [0u8; super::cm::DEST_LEN];
            c.xchg(
                &super::cm::encode_dest(me, self.gid_index),
                &mut m,
                Some(self.t),
                "address",
            )?;
            return Ok(super::cm::decode_dest(&m));
        }
        let mut m = vec![0u8; if self.gid { MSG_LEN_GID } else { MSG_LEN }];
        self.xchg(&me.encode(), &mut m, "address")?;
        Peer::decode(&m).map_err(|e| bad_message("reading the peer's address", e))
    }

    /// One round of address messages where this side only waits for the
    /// peer's test to end, however long it runs (the exchange has no
    /// heartbeat to tell a slow peer from a dead one). A dead peer process
    /// closes the connection (over rdma_cm: disconnects it); a dead host or
    /// a lost network is found by TCP keepalive (`wait::keepalive`: 25 s of
    /// unanswered probes) or, over rdma_cm, by the connection's own end.
    fn await_peer(&mut self, me: &Peer) -> Result<Peer> {
        let s = match &mut self.link {
            Link::Cm(c) => {
                let mut m = [0u8; super::cm::DEST_LEN];
                c.xchg(
                    &super::cm::encode_dest(me, self.gid_index),
                    &mut m,
                    None,
                    "address after its run",
                )?;
                return Ok(super::cm::decode_dest(&m));
            }
            Link::Tcp(s) => s,
        };
        keepalive(s)?;
        s.set_read_timeout(None)
            .map_err(|e| io("clearing the TCP read timeout", e))?;
        let p = self.hand_shake(me);
        if let Link::Tcp(s) = &self.link {
            self.t.bound(s)?;
        }
        p
    }

    /// The last round and the closing `done` (`ctx_close_connection`).
    fn close(&mut self, me: &Peer) -> Result<()> {
        self.hand_shake(me)?;
        self.close_after_round()
    }

    /// `done` and the peer's `done`, after the last round (TCP only:
    /// perftest's rdma_cm exchange just ends).
    fn close_after_round(&mut self) -> Result<()> {
        let Link::Tcp(s) = &mut self.link else {
            return Ok(());
        };
        s.write_all(DONE)
            .map_err(|e| self.t.tcp_error("sending done", e))?;
        // Read the peer's `done` too, so that closing with unread bytes does
        // not reset the connection under it.
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut d = [0u8; DONE.len()];
        let _ = s.read_exact(&mut d);
        Ok(())
    }

    /// The client's figures to the server (`xchg_bw_reports`).
    fn bw_reports(&mut self, mine: &BwReport) -> Result<BwReport> {
        let mut theirs = [[0u8; 8]; 5];
        for (m, t) in mine.fields().iter().zip(theirs.iter_mut()) {
            self.xchg(m, t, "bandwidth report")?;
        }
        Ok(BwReport::from_fields(&theirs))
    }
}

/// Checks the sizes and depths asked for against the device's limits;
/// returns the CQ size.
fn check_limits(ctx: &Context, a: &PerfArgs, max_size: u32) -> Result<u32> {
    let dev = ctx.query_device()?;
    if a.tx_depth() > dev.max_qp_wr {
        return Err(bad_value(format!(
            "-t {}: larger than the device's max_qp_wr ({})",
            a.tx_depth(),
            dev.max_qp_wr
        )));
    }
    let cqe = a
        .tx_depth()
        .max(16)
        .checked_mul(2)
        .and_then(|d| d.checked_add(RX_DEPTH))
        .and_then(|d| d.checked_mul(a.qps))
        .filter(|&c| c <= dev.max_cqe)
        .ok_or_else(|| {
            bad_value(format!(
                "-t {} -q {}: the CQ they share ((2 x tx-depth + {RX_DEPTH} receives) per QP) exceeds the device's max_cqe ({})",
                a.tx_depth(),
                a.qps,
                dev.max_cqe
            ))
        })?;
    let port = ctx.query_port(a.ib_port)?;
    if max_size > port.max_msg_sz {
        return Err(bad_value(format!(
            "-s {max_size}: larger than the port's largest message ({} bytes)",
            port.max_msg_sz
        )));
    }
    Ok(cqe)
}

/// perftest's choice of GID when none is given on RoCE: an IPv4 one over
/// an IPv6 one, RoCE v2 over v1.
fn best_gid(ctx: &Context, port: u8) -> Result<u32> {
    let table = ctx.query_gid_table()?;
    let score = |g: &[u8; 16], t: GidType| {
        let v4 = g[..10] == [0; 10] && g[10..12] == [0xff, 0xff];
        u8::from(v4) * 2 + u8::from(t == GidType::RoceV2)
    };
    table
        .iter()
        .filter(|e| e.port == u32::from(port))
        .max_by_key(|e| (score(&e.gid, e.gid_type), std::cmp::Reverse(e.index)))
        .map(|e| e.index)
        .ok_or_else(|| bad_value(format!("port {port} has no GID: pass -x")))
}

fn mtu_of(v: u8) -> Mtu {
    match v {
        1 => Mtu::M256,
        2 => Mtu::M512,
        4 => Mtu::M2048,
        5 => Mtu::M4096,
        _ => Mtu::M1024,
    }
}

fn connect_tcp(a: &PerfArgs) -> Result<TcpStream> {
    let t = a.timeout;
    match &a.server {
        Some(host) => {
            // The server may not listen yet: try for ten seconds.
            let mut tries = 0;
            loop {
                match t.connect(host, a.port) {
                    Ok(s) => break Ok(s),
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
            // perftest's client connects over IPv4 only.
            let l = TcpListener::bind(("0.0.0.0", a.port))
                .map_err(|e| io(&format!("listen on port {}", a.port), e))?;
            // No limit on waiting for a client; a limit on all after.
            let s = l.accept().map_err(|e| io("accept", e))?.0;
            t.bound(&s)?;
            Ok(s)
        }
    }
}

pub fn run(a: &PerfArgs) -> Result<ExitCode> {
    let client = a.server.is_some();
    let iters = a.iters();
    let nq = a.qps as usize;
    // -R: the exchange itself goes over rdma_cm, and the test runs on the
    // device and port it reached.
    let comm = if a.rdma_cm {
        Some(super::cm::Comm::establish(
            a.server.as_deref(),
            a.port,
            a.timeout,
        )?)
    } else {
        None
    };
    let (ctx, ib_port) = match &comm {
        Some(c) => (c.context()?, c.port()?),
        None => (Context::open_by_name(a.dev.as_deref())?, a.ib_port),
    };
    let port = ctx.query_port(ib_port)?;
    let dev = ctx.query_device()?;
    // UD's sizes stop at the path MTU, agreed below; the largest possible.
    let cqe = check_limits(&ctx, a, a.sizes(4096).iter().copied().max().unwrap_or(2))?;
    let ethernet = port.link_layer == LINK_ETHERNET;
    let gid_idx = match a.gid_idx {
        Some(i) => Some(i),
        None if ethernet => Some(best_gid(&ctx, ib_port)?),
        None => None,
    };

    // The exchange before the resources: versions, buffer geometry, MTU.
    let mut oob = Oob {
        link: match comm {
            Some(c) => Link::Cm(Box::new(c)),
            None => Link::Tcp(connect_tcp(a)?),
        },
        client,
        t: a.timeout,
        gid: gid_idx.is_some(),
        gid_index: gid_idx.unwrap_or(0),
    };
    let mut v = [0u8; VERSION_LEN];
    oob.xchg(&version_msg(), &mut v, "version")?;
    parse_version(&v).map_err(|e| bad_message("reading the peer's version", e))?;
    let mut cb = [0u8; 4];
    oob.xchg(&CYCLE_BUFFER.to_be_bytes(), &mut cb, "cycle buffer size")?;
    let peer_cycle =
        parse_cycle_buffer(cb).map_err(|e| bad_message("reading the peer's cycle buffer", e))?;
    let cycle = CYCLE_BUFFER.max(peer_cycle);
    oob.xchg(&CACHE_LINE.to_be_bytes(), &mut cb, "cache line size")?;
    // -m lowers the MTU below the port's active one (perftest's set_mtu).
    let ours = match a.mtu {
        Some(bytes) => (bytes / 128).trailing_zeros() as u8,
        None => port.active_mtu,
    }
    .min(port.active_mtu);
    let mut m = [0u8; MTU_LEN];
    oob.xchg(&mtu_msg(ours), &mut m, "MTU")?;
    let mtu = parse_mtu(&m).map_or(ours, |p| p.min(ours));
    let mtu_bytes = 128u32 << mtu;
    let ud = a.conn == Conn::Ud;
    let mut sizes = a.sizes(mtu_bytes);
    if ud {
        // A UD message fits in one packet: perftest lowers the size to the
        // MTU (its default of 64 KiB too).
        for s in &mut sizes {
            *s = (*s).min(mtu_bytes);
        }
        sizes.dedup();
    }
    let max_size = sizes.iter().copied().max().unwrap_or(2);

    // The peer's RDMA may cycle through a buffer of `cycle` bytes starting
    // at any cache line below it: room for that and one more message (and
    // a UD receive's GRH).
    let region = (max_size.max(cycle) as usize + max_size as usize + GRH_BYTES as usize)
        .next_multiple_of(4096);
    let channel = if a.events {
        Some(ctx.create_comp_channel()?)
    } else {
        None
    };
    let pd = ctx.alloc_pd()?;
    let access = match a.conn {
        Conn::Rc => {
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
        }
        Conn::Uc => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        Conn::Ud => Access::LOCAL_WRITE,
    };
    let mr = pd.alloc_mr(region * 2 * nq, access)?;
    let cq = ctx.create_cq(cqe, channel.as_ref(), 0)?;
    let gid = match gid_idx {
        Some(i) => Some(ctx.query_gid(ib_port, i)?),
        None => None,
    };
    let out_reads = dev.max_qp_rd_atom.clamp(1, 255) as u16;
    let init = QpInit {
        qp_type: match a.conn {
            Conn::Rc => QpType::Rc,
            Conn::Uc => QpType::Uc,
            Conn::Ud => QpType::Ud,
        },
        send_cq: &cq,
        recv_cq: &cq,
        caps: QpCaps {
            // Latency tests signal every request; a few more entries than
            // perftest's depth of 1 keep a completion that is polled late
            // from stalling the next post.
            max_send_wr: a.tx_depth().max(if a.test.is_lat() { 16 } else { 1 }),
            max_recv_wr: RX_DEPTH,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: a.inline,
        },
        sq_sig_all: false,
        srq: None,
    };
    // -R: rdma_cm connects each QP, between two more rounds (perftest's
    // syncs before and after, its addresses still blank); the ids live as
    // long as the test.
    let blank = Peer {
        lid: 0,
        out_reads: 0,
        qpn: 0,
        psn: 0,
        rkey: 0,
        addr: 0,
        gid: None,
        srqn: 0,
    };
    let mut _cm_ids = None;
    let qps: Vec<Qp> = if a.rdma_cm {
        // A server listens before the sync round that sends the client.
        let listening = if client {
            None
        } else {
            Some(super::cm::listen(a.port, nq)?)
        };
        oob.hand_shake(&blank)?;
        let reads = if matches!(
            a.test,
            Test::ReadLat | Test::ReadBw | Test::AtomicLat | Test::AtomicBw
        ) {
            out_reads.min(255) as u8
        } else {
            0
        };
        let c = super::cm::connect_qps(
            a.server.as_deref(),
            listening,
            a.port,
            nq,
            &pd,
            &init,
            reads,
            a.timeout,
        )?;
        _cm_ids = Some(c.ids);
        oob.hand_shake(&blank)?;
        c.qps
    } else {
        let mut qps = Vec::with_capacity(nq);
        for _ in 0..nq {
            let mut qp = pd.create_qp(&init)?;
            if ud {
                qp.modify(&QpAttr::init_ud(ib_port, UD_QKEY))?;
            } else {
                qp.modify(&QpAttr::init(ib_port, access))?;
            }
            qps.push(qp);
        }
        qps
    };
    let mine: Vec<Peer> = qps
        .iter()
        .enumerate()
        .map(|(i, qp)| Peer {
            lid: port.lid,
            out_reads,
            qpn: qp.qpn(),
            psn: (std::process::id().wrapping_mul(2_654_435_761)
                ^ Instant::now().elapsed().subsec_nanos()
                ^ (i as u32).wrapping_mul(40_503))
                & 0xff_ffff,
            rkey: mr.rkey(),
            addr: mr.addr() + (region * (2 * i + 1)) as u64,
            gid,
            srqn: 0,
        })
        .collect();
    let inline = a.inline.min(qps[0].caps().max_inline_data);
    let me = &mine[0];

    // The address rounds before the connection: one message per QP.
    let sh = shape(a.test);
    if sh == Shape::RdmaLat {
        oob.hand_shake(me)?;
    }
    let mut peers = Vec::with_capacity(nq);
    for m in &mine {
        peers.push(oob.hand_shake(m)?);
    }
    // (rdma_cm resolved the path itself: perftest checks no GIDs then.)
    if !a.rdma_cm && gid.is_some_and(|g| is_v4(&g)) != peers[0].gid.is_some_and(|g| is_v4(&g)) {
        return Err(bad_value(
            "the peer's GID is of the other IP version (IPv4 against IPv6): pick another -x",
        ));
    }
    let mut lanes = Vec::with_capacity(nq);
    for (i, (mut qp, peer)) in qps.into_iter().zip(&peers).enumerate() {
        let av = AhAttr {
            port_num: ib_port,
            dlid: peer.lid,
            grh: peer.gid.map(|dgid| Grh {
                dgid,
                sgid_index: gid_idx.unwrap_or(0) as u8,
                hop_limit: 0xff,
                ..Grh::default()
            }),
            ..AhAttr::default()
        };
        let mut lane_ud = None;
        match a.conn {
            // rdma_cm connected it already.
            _ if a.rdma_cm => {}
            Conn::Ud => {
                qp.modify(&QpAttr::state(QpState::Rtr))?;
                qp.modify(&QpAttr::rts_ud(mine[i].psn))?;
                lane_ud = Some((pd.create_ah(&av)?, peer.qpn));
            }
            Conn::Uc => {
                let mut rtr = QpAttr::rtr(av, mtu_of(mtu), peer.qpn, peer.psn);
                // UC has no responder resources, RNR timer or retries: the
                // kernel refuses those attributes on a UC QP.
                rtr.max_dest_rd_atomic = None;
                rtr.min_rnr_timer = None;
                qp.modify(&rtr)?;
                qp.modify(&QpAttr::rts_ud(mine[i].psn))?;
            }
            Conn::Rc => {
                let mut rtr = QpAttr::rtr(av, mtu_of(mtu), peer.qpn, peer.psn);
                rtr.max_dest_rd_atomic = Some(out_reads.min(255) as u8);
                qp.modify(&rtr)?;
                let mut rts = QpAttr::rts(mine[i].psn);
                rts.max_rd_atomic = Some(
                    peer.out_reads
                        .min(dev.max_qp_init_rd_atom.clamp(1, 255) as u16)
                        .max(1) as u8,
                );
                qp.modify(&rts)?;
            }
        }
        lanes.push(Lane {
            qp,
            remote: Remote {
                addr: peer.addr,
                rkey: peer.rkey,
            },
            ud: lane_ud,
            recvs: 0,
        });
    }
    // More rounds after the connection in every test: one per QP (perftest
    // prints the remote addresses as they come) and one "after RTR"; send
    // tests take them in the other order.
    if sh == Shape::SendBw {
        oob.hand_shake(me)?;
    }
    for m in &mine {
        oob.hand_shake(m)?;
    }
    if sh != Shape::SendBw {
        oob.hand_shake(me)?;
    }

    let mut b = Bench {
        cq,
        lanes,
        mr,
        channel,
        region,
        inline,
        zeros: vec![0; inline as usize],
        timeout: a.timeout,
        generation: 0,
    };
    if b.channel.is_some() {
        b.cq.req_notify(false)?;
    }

    let dev_name = ctx.device().name().to_string();
    let title = match a.test {
        Test::SendLat => "Send Latency",
        Test::WriteLat => "RDMA_Write Latency",
        Test::ReadLat => "RDMA_Read Latency",
        Test::AtomicLat => "Atomic FETCH_AND_ADD Latency",
        Test::SendBw => "Send BW",
        Test::WriteBw => "RDMA_Write BW",
        Test::ReadBw => "RDMA_Read BW",
        Test::AtomicBw => "Atomic FETCH_AND_ADD BW",
    };
    let title = match (a.duplex, a.batch > 1 && !a.test.is_lat()) {
        (true, true) => title.replace(" BW", " Bidirectional Post List BW"),
        (true, false) => title.replace(" BW", " Bidirectional BW"),
        (false, true) => title.replace(" BW", " Post List BW"),
        (false, false) => title.to_string(),
    };
    let send = matches!(a.test, Test::SendBw | Test::SendLat);
    let info = report::Info {
        title,
        device: &dev_name,
        qps: a.qps,
        conn: match a.conn {
            Conn::Rc => "RC",
            Conn::Uc => "UC",
            Conn::Ud => "UD",
        },
        tx: client || a.duplex,
        tx_depth: a.tx_depth(),
        rx_depth: (send && (!client || a.duplex)).then_some(RX_DEPTH),
        post_list: a.batch,
        cq_mod: (!a.test.is_lat()).then_some(if a.timed() { CQ_MOD } else { CQ_MOD.min(iters) }),
        mtu_bytes,
        ethernet,
        gid_index: gid_idx,
        inline_or_reads: if matches!(
            a.test,
            Test::ReadLat | Test::ReadBw | Test::AtomicLat | Test::AtomicBw
        ) {
            Err(u32::from(out_reads))
        } else {
            Ok(inline)
        },
        events: a.events,
        rdma_cm: a.rdma_cm,
        client,
    };
    println!("{}", report::info(&info));
    let rdma = match a.test {
        Test::WriteLat | Test::WriteBw => 1,
        Test::ReadLat | Test::ReadBw => 2,
        _ => 0,
    };
    for m in &mine {
        println!("{}", report::address("local", m, rdma));
    }
    for p in &peers {
        println!("{}", report::address("remote", p, rdma));
    }
    println!("{}", report::LINE);
    let mut json = String::new();
    let header = if a.test.is_lat() {
        report::LAT_HEADER
    } else if a.report_gbits {
        report::BW_HEADER_GB
    } else {
        report::BW_HEADER_MB
    };
    println!("{header}");

    let lat_out =
        |size: u32, samples: &mut [f64], json: &mut String| match report::latency_stats(samples) {
            Some(s) => {
                println!("{}", report::lat_line(size.into(), samples.len(), &s));
                json.push_str(&report::lat_json(size.into(), samples.len(), &s));
            }
            None => println!(" {size:<7} 0          (no samples)"),
        };
    let len = Length::of(a, iters);
    match (sh, client || a.duplex) {
        (Shape::RdmaBw, false) => {
            // The server waits for the client's end and prints its figures.
            oob.await_peer(me)?;
            let r = oob.bw_reports(&BwReport::default())?;
            println!("{}", report::bw_line(&r));
            json.push_str(&report::bw_json(&r));
            oob.close(me)?;
        }
        (Shape::RdmaBw, true) if a.duplex => {
            // Both sides run; each prints the sum of both directions.
            for &size in &sizes {
                oob.hand_shake(me)?;
                let mine = b.bw(a, size, len, false)?;
                if a.all {
                    oob.hand_shake(me)?;
                }
                let theirs = oob.bw_reports(&mine)?;
                let sum = mine.plus(&theirs);
                println!("{}", report::bw_line(&sum));
                json.push_str(&report::bw_json(&sum));
            }
            oob.close(me)?;
        }
        (Shape::RdmaBw, true) => {
            let mut last = BwReport::default();
            for &size in &sizes {
                last = b.bw(a, size, len, false)?;
                println!("{}", report::bw_line(&last));
                json.push_str(&report::bw_json(&last));
            }
            oob.hand_shake(me)?;
            oob.bw_reports(&last)?;
            oob.close(me)?;
        }
        (Shape::SendBw, _) => {
            for &size in &sizes {
                if !client || a.duplex {
                    b.fill_recvs()?;
                }
                oob.hand_shake(me)?;
                let r = if a.duplex {
                    b.send_bi(a, size, len)?
                } else if client {
                    b.bw(a, size, len, false)?
                } else {
                    b.send_bw_server(a, size, len)?
                };
                // Bidirectional, each side prints the sum; by duration,
                // each its own (perftest exchanges no figures then).
                let r = if a.duplex && !a.timed() {
                    r.plus(&oob.bw_reports(&r)?)
                } else {
                    r
                };
                println!("{}", report::bw_line(&r));
                json.push_str(&report::bw_json(&r));
                if a.all {
                    oob.hand_shake(me)?;
                }
            }
            oob.close(me)?;
        }
        (Shape::SendLat, _) => {
            for &size in &sizes {
                b.post_recv(0, 16u32.saturating_sub(b.lanes[0].recvs))?;
                oob.hand_shake(me)?;
                let mut s = b.send_lat(size, iters, client)?;
                lat_out(size, &mut s, &mut json);
                // Drop what is left posted of this size's receives.
            }
            oob.close(me)?;
        }
        (Shape::RdmaLat, _) if a.test == Test::WriteLat => {
            for &size in &sizes {
                let mut s = b.write_lat(size, iters, client)?;
                lat_out(size, &mut s, &mut json);
            }
            // ib_write_lat ends without a closing round: each side's last
            // wait was for the other's last write.
        }
        (Shape::RdmaLat, false) => {
            oob.await_peer(me)?;
            oob.close_after_round()?;
        }
        (Shape::RdmaLat, true) => {
            for &size in &sizes {
                let mut s = b.one_sided_lat(a, size, iters)?;
                lat_out(size, &mut s, &mut json);
            }
            oob.close(me)?;
        }
    }
    println!("{}", report::LINE);
    if a.out_json {
        write_json(a, &info, &json)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn is_v4(g: &[u8; 16]) -> bool {
    g[..10] == [0; 10] && g[10..12] == [0xff, 0xff]
}

/// perftest's `--out_json` file: its test information and results blocks.
fn write_json(a: &PerfArgs, i: &report::Info<'_>, results: &str) -> Result<()> {
    let mut s = String::from("{\ntest_info: {\n");
    s.push_str(&format!("test: {}_Test,\n", i.title.replace(' ', "_")));
    s.push_str(&format!(
        "Dual_port: OFF,\nDevice: \"{}\",\nNumber_of_qps: {},\nTransport_type: IB,\nConnection_type: {},\nUsing_SRQ: OFF,\n",
        i.device, i.qps, i.conn
    ));
    s.push_str(" PCIe_relax_order: Unsupported,\nibv_wr_API: OFF,\n");
    if i.tx {
        s.push_str(&format!("TX_depth : {},\n", i.tx_depth));
    }
    if i.post_list > 1 {
        s.push_str(&format!("Post_List: {},\n", i.post_list));
    }
    if let Some(rx) = i.rx_depth {
        s.push_str(&format!("RX_depth: {rx},\n"));
    }
    if let Some(m) = i.cq_mod {
        s.push_str(&format!("CQ_Moderation: {m},\n"));
    }
    s.push_str(&format!(
        "Mtu: {},\nLink_type: {},\n",
        i.mtu_bytes,
        if i.ethernet { "Ethernet" } else { "IB" }
    ));
    if let Some(g) = i.gid_index {
        s.push_str(&format!("GID_index: {g},\n"));
    }
    match i.inline_or_reads {
        Ok(n) => s.push_str(&format!("Max_inline_data: {n},\n")),
        Err(n) => s.push_str(&format!("Outstand_reads: {n},\n")),
    }
    s.push_str(if i.rdma_cm {
        "rdma_cm_QPs: ON,\nData_ex_method: rdma_cm,\n},\n"
    } else {
        "rdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\n"
    });
    s.push_str(results);
    s.push_str("}\n");
    std::fs::write(&a.out_json_file, s).map_err(|e| io(&format!("writing {}", a.out_json_file), e))
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
            check_wcs(&wc[..n])?;
            if n > 0 {
                return Ok(n);
            }
        }
    }

    /// One poll, for the timed runs, which look at the clock between polls
    /// (perftest's alarm); fails on an error status, or when nothing has
    /// completed for the timeout since `progress`.
    fn poll_once(
        &mut self,
        wc: &mut [Wc],
        progress: &mut Instant,
        what: impl Fn() -> String,
    ) -> Result<usize> {
        let n = bench_poll(&mut self.cq, wc);
        check_wcs(&wc[..n])?;
        if n > 0 {
            *progress = Instant::now();
        } else if progress.elapsed() > self.timeout.duration() {
            return Err(self.timeout.expired(&what()));
        }
        Ok(n)
    }

    /// Posts `n` receives on lane `l`, each of the lane's whole target
    /// region (so that receives left over from a smaller size of `-a` fit
    /// the next size too); the wr_id is the lane.
    fn post_recv(&mut self, l: usize, n: u32) -> Result<()> {
        let s = [self
            .mr
            .slice(self.region * (2 * l + 1), self.region as u32)?];
        let lane = &mut self.lanes[l];
        for _ in 0..n {
            lane.qp.post_recv(&[RecvWr {
                wr_id: l as u64,
                sges: &s,
            }])?;
            lane.recvs += 1;
        }
        Ok(())
    }

    /// Tops every lane's receives up to the receive depth.
    fn fill_recvs(&mut self) -> Result<()> {
        for l in 0..self.lanes.len() {
            let depth = RX_DEPTH.min(self.lanes[l].qp.caps().max_recv_wr);
            self.post_recv(l, depth.saturating_sub(self.lanes[l].recvs))?;
        }
        Ok(())
    }

    /// One signaled-or-not request on lane 0 (the latency tests').
    fn send(&mut self, op: SendOp, len: u32, signaled: bool) -> Result<()> {
        let s = [self.mr.slice(0, len)?];
        let wr = if len <= self.inline && !matches!(op, SendOp::Read(_)) {
            // An inline payload is copied at post time.
            SendWr::inline(0, op, &self.zeros[..len as usize])
        } else {
            SendWr::new(0, op, &s)
        };
        let lane = &mut self.lanes[0];
        let wr = match &lane.ud {
            Some((ah, qpn)) => wr.to(ah, *qpn, UD_QKEY),
            None => wr,
        };
        bench_post_send(&mut lane.qp, &[wr.signaled(signaled)])
    }

    /// perftest's `run_iter_lat_send`: the client sends first, the server
    /// answers each message; one sample per round trip, halved. The
    /// receives for the first messages are posted before (and the peer is
    /// told so by an address round).
    fn send_lat(&mut self, size: u32, iters: u32, client: bool) -> Result<Vec<f64>> {
        let mut samples = Vec::with_capacity(iters.min(SAMPLES_RESERVED) as usize);
        let mut wc = [Wc::default(); 4];
        let mut last = Instant::now();
        // Receives that arrived but that the loop has not consumed yet.
        let mut arrived = 0u32;
        for _ in 0..iters {
            if client {
                self.send(SendOp::Send, size, true)?;
            }
            while arrived == 0 {
                let n = self.next_completions(&mut wc, || {
                    format!(
                        "the peer's message {} of {iters} (does it use the same -n?)",
                        samples.len() + 1,
                    )
                })?;
                for w in &wc[..n] {
                    if w.opcode == rverbs::WcOpcode::RECV {
                        arrived += 1;
                        self.lanes[0].recvs = self.lanes[0].recvs.saturating_sub(1);
                        self.post_recv(0, 1)?;
                    }
                }
            }
            arrived -= 1;
            if !client {
                self.send(SendOp::Send, size, true)?;
            }
            let now = Instant::now();
            samples.push(now.duration_since(last).as_secs_f64() * 1e6 / 2.0);
            last = now;
        }
        Ok(samples)
    }

    /// perftest's `run_iter_lat_write`: each side writes a running count
    /// (mod 256) into the last byte of the message it writes to the peer,
    /// and spins on the last byte of its own region for the peer's count.
    /// The server writes first; the client answers each write.
    fn write_lat(&mut self, size: u32, iters: u32, client: bool) -> Result<Vec<f64>> {
        let last = self.region + size as usize - 1;
        let remote = self.lanes[0].remote;
        let mut samples = Vec::with_capacity(iters.min(SAMPLES_RESERVED) as usize);
        let mut wc = [Wc::default(); 4];
        let mut t = Instant::now();
        let what = |i: u32| {
            move || {
                format!("the peer's RDMA WRITE {i} of {iters} (does it use the same -n and -s?)")
            }
        };
        let mut rcnt = 0u32;
        for i in 1..=iters {
            if client || i > 1 {
                rcnt += 1;
                self.await_byte(last, rcnt as u8, what(rcnt))?;
            }
            self.mr.write(size as usize - 1, &[i as u8])?;
            self.send(SendOp::Write(remote), size, true)?;
            self.next_completions(&mut wc, || format!("the completion of our RDMA WRITE {i}"))?;
            let now = Instant::now();
            samples.push(now.duration_since(t).as_secs_f64() * 1e6 / 2.0);
            t = now;
        }
        while rcnt < iters {
            rcnt += 1;
            self.await_byte(last, rcnt as u8, what(rcnt))?;
        }
        Ok(samples)
    }

    /// Spins until the byte at `offset` of our MR is `value` (the peer's
    /// RDMA WRITE landed), at most the timeout.
    fn await_byte(&self, offset: usize, value: u8, what: impl FnOnce() -> String) -> Result<()> {
        let mr = &self.mr;
        self.timeout.spin(what, || {
            Ok((mr.read_volatile_u8(offset)? == value).then_some(()))
        })
    }

    fn one_sided_lat(&mut self, a: &PerfArgs, size: u32, iters: u32) -> Result<Vec<f64>> {
        let op = op_for(a.test, self.lanes[0].remote);
        let mut samples = Vec::with_capacity(iters.min(SAMPLES_RESERVED) as usize);
        let mut wc = [Wc::default(); 4];
        for i in 1..=iters {
            let t = Instant::now();
            self.send(op, size, true)?;
            self.next_completions(&mut wc, || format!("the completion of operation {i}"))?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(samples)
    }

    /// perftest's `run_iter_bw` (and, with `recv`, `run_iter_bi`: the
    /// receiving half of a bidirectional send test, keeping receives
    /// posted): posts round robin on every lane, each up to the TX depth,
    /// signaling one request in [`CQ_MOD`], until each lane's iterations
    /// complete, the duration ends or, run infinitely, never (printing
    /// each period's figures).
    fn bw(&mut self, a: &PerfArgs, len: u32, length: Length, recv: bool) -> Result<BwReport> {
        let nq = self.lanes.len();
        let depth = self.lanes[0].qp.caps().max_send_wr.min(a.tx_depth());
        // A signaled request in every `cq_mod`, and at least one among
        // `depth` in flight.
        let cq_mod = CQ_MOD.min(depth).max(1);
        let iters = match length {
            Length::Iters(n) => n,
            _ => u32::MAX,
        };
        let total = u64::from(iters) * nq as u64;
        // This run's tag in the wr_id, so that completions of a timed
        // run's last requests (which it does not wait for, as perftest
        // does not) are not counted by the next.
        self.generation = self.generation.wrapping_add(1);
        let tag = u64::from(self.generation) << 56;
        // Clones of the MR and AH handles and of the inline payload, so
        // that the requests do not borrow self.
        let mr = self.mr.clone();
        let zeros = self.zeros.clone();
        let mut sges = Vec::with_capacity(nq);
        for l in 0..nq {
            sges.push([mr.slice(self.region * 2 * l, len)?]);
        }
        let dests: Vec<(SendOp, Option<(Ah, u32)>)> = self
            .lanes
            .iter()
            .map(|l| (op_for(a.test, l.remote), l.ud.clone()))
            .collect();
        let inline = len <= self.inline && matches!(dests[0].0, SendOp::Write(_) | SendOp::Send);
        let mut posted = vec![0u32; nq];
        let mut completed = vec![0u32; nq];
        let mut batch = Vec::with_capacity(a.batch as usize);
        let mut wc = [Wc::default(); 16];
        let (mut done, mut received, mut counted) = (0u64, 0u64, 0u64);
        let start = Instant::now();
        let mut chunk_start = start;
        let mut chunk = 0u64;
        let mut peak: f64 = 0.0;
        let mut period_start = start;
        let mut progress = start;
        let timed = !matches!(length, Length::Iters(_));
        loop {
            // The clock is read only in timed runs.
            let (now, phase) = if timed {
                let now = Instant::now();
                (now, length.phase(now.duration_since(start)))
            } else {
                (start, Phase::Sample)
            };
            if phase == Phase::End {
                break;
            }
            length.tick(now, &mut period_start, &mut counted, len, a.report_gbits);
            for (l, lane) in self.lanes.iter_mut().enumerate() {
                let (op, ud) = &dests[l];
                while posted[l] < iters
                    && posted[l] - completed[l] + a.batch.min(iters - posted[l]) <= depth
                {
                    batch.clear();
                    for _ in 0..a.batch.min(iters - posted[l]) {
                        posted[l] += 1;
                        let signaled = posted[l] % cq_mod == 0 || posted[l] == iters;
                        // The wr_id: the tag, the lane, and the count of
                        // the lane's requests this completion covers.
                        let id = tag | (l as u64) << 32 | u64::from(posted[l]);
                        let wr = if inline {
                            SendWr::inline(id, *op, &zeros[..len as usize])
                        } else {
                            SendWr::new(id, *op, &sges[l])
                        };
                        let wr = match ud {
                            Some((ah, qpn)) => wr.to(ah, *qpn, UD_QKEY),
                            None => wr,
                        };
                        batch.push(wr.signaled(signaled));
                    }
                    bench_post_send(&mut lane.qp, &batch)?;
                }
            }
            if done >= total && (!recv || received >= total) {
                break;
            }
            let what = || {
                if timed {
                    format!("a completion after {done} (timed run)")
                } else {
                    format!("the completion of work request {} of {total}", done + 1)
                }
            };
            let n = if timed {
                self.poll_once(&mut wc, &mut progress, what)?
            } else {
                self.next_completions(&mut wc, what)?
            };
            for w in &wc[..n] {
                if w.opcode == rverbs::WcOpcode::RECV {
                    // A receive of the bidirectional send test: its wr_id
                    // is the lane; keep the lane's receives posted.
                    let l = (w.wr_id as usize).min(nq - 1);
                    received += 1;
                    self.lanes[l].recvs = self.lanes[l].recvs.saturating_sub(1);
                    if received + u64::from(self.lanes[l].recvs) < total {
                        self.post_recv(l, 1)?;
                    }
                    continue;
                }
                if w.wr_id & (0xff << 56) != tag {
                    continue;
                }
                let l = ((w.wr_id >> 32) & 0xff_ffff) as usize;
                let upto = w.wr_id as u32;
                if l >= nq || upto <= completed[l] || upto > posted[l] {
                    continue;
                }
                let k = upto - completed[l];
                completed[l] = upto;
                done += u64::from(k);
                if phase == Phase::Sample {
                    counted += u64::from(k);
                }
                if let Length::Iters(_) = length {
                    // The peak over windows of a round of completions (one
                    // per lane): lanes complete close together, so a
                    // single completion's interval says nothing.
                    chunk += u64::from(k);
                    if chunk >= u64::from(cq_mod) * nq as u64 {
                        let now = Instant::now();
                        let dt = now.duration_since(chunk_start).as_secs_f64();
                        if dt > 0.0 {
                            peak = peak.max(chunk as f64 * f64::from(len) / dt);
                        }
                        chunk_start = now;
                        chunk = 0;
                    }
                }
            }
        }
        Ok(match length {
            Length::Timed { sample, .. } => {
                timed_report(len, counted, sample.as_secs_f64(), a.report_gbits)
            }
            _ => report::bw_report(
                len.into(),
                total,
                start.elapsed().as_secs_f64(),
                peak,
                a.report_gbits,
            ),
        })
    }

    /// The bidirectional send test's run (`run_iter_bi`): sends and
    /// receives at once.
    fn send_bi(&mut self, a: &PerfArgs, len: u32, length: Length) -> Result<BwReport> {
        self.bw(a, len, length, true)
    }

    /// The receiving side of send-bw: counts each lane's messages, keeping
    /// receives posted (the first were posted before the address round).
    fn send_bw_server(&mut self, a: &PerfArgs, size: u32, length: Length) -> Result<BwReport> {
        let nq = self.lanes.len();
        let iters = match length {
            Length::Iters(n) => u64::from(n),
            _ => u64::MAX,
        };
        let total = iters.saturating_mul(nq as u64);
        let (mut got, mut counted) = (0u64, 0u64);
        let mut wc = [Wc::default(); 16];
        let mut start = None;
        let clock = Instant::now();
        let mut period_start = clock;
        let mut progress = clock;
        let timed = !matches!(length, Length::Iters(_));
        while got < total {
            let what = || {
                format!(
                    "the client's message {} (does it use the same -n, -q?)",
                    got + 1
                )
            };
            let n = if timed {
                self.poll_once(&mut wc, &mut progress, what)?
            } else {
                self.next_completions(&mut wc, what)?
            };
            let now = Instant::now();
            if n > 0 {
                start.get_or_insert(now);
            }
            // A timed run's clock starts with the run, as perftest's alarm.
            let phase = length.phase(now.duration_since(clock));
            if phase == Phase::End {
                break;
            }
            length.tick(now, &mut period_start, &mut counted, size, a.report_gbits);
            for w in wc[..n]
                .iter()
                .filter(|w| w.opcode == rverbs::WcOpcode::RECV)
            {
                let l = (w.wr_id as usize).min(nq - 1);
                got += 1;
                if phase == Phase::Sample {
                    counted += 1;
                }
                self.lanes[l].recvs = self.lanes[l].recvs.saturating_sub(1);
                let depth = u64::from(RX_DEPTH.min(self.lanes[l].qp.caps().max_recv_wr));
                // Keep the lane's receives posted while more may come.
                if u64::from(self.lanes[l].recvs) < depth.min(total - got) {
                    self.post_recv(l, 1)?;
                }
            }
        }
        Ok(match length {
            Length::Timed { sample, .. } => {
                timed_report(size, counted, sample.as_secs_f64(), a.report_gbits)
            }
            _ => {
                let secs = start.map_or(0.0, |s| s.elapsed().as_secs_f64()).max(1e-9);
                report::bw_report(size.into(), total, secs, 0.0, a.report_gbits)
            }
        })
    }
}

/// The figures of `count` messages of `size` bytes in `secs` of a timed
/// run, which has no peak (perftest's `noPeak` by duration).
fn timed_report(size: u32, count: u64, secs: f64, gbits: bool) -> BwReport {
    let mut r = report::bw_report(size.into(), count, secs, 0.0, gbits);
    r.bw_peak = 0.0;
    r
}

/// Fails on the first completion with an error status.
fn check_wcs(wcs: &[Wc]) -> Result<()> {
    match wcs.iter().find(|w| !w.is_ok()) {
        Some(bad) => Err(failed_completion(
            format!(
                "completion with status {} (wr_id {})",
                bad.status, bad.wr_id
            ),
            bad,
        )),
        None => Ok(()),
    }
}

/// The operation of `test` on `remote`.
fn op_for(test: Test, remote: Remote) -> SendOp {
    match test {
        Test::ReadLat | Test::ReadBw => SendOp::Read(remote),
        Test::AtomicLat | Test::AtomicBw => SendOp::FetchAdd { remote, add: 1 },
        Test::WriteBw | Test::WriteLat => SendOp::Write(remote),
        Test::SendBw | Test::SendLat => SendOp::Send,
    }
}

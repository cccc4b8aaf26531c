//! `rverbs perf -R`: perftest's rdma_cm mode. The out-of-band exchange
//! runs over an RC connection made through rdma_cm on the test's port
//! (each message one SEND, one receive kept posted), and the test's QPs
//! are connected by rdma_cm too, one id per QP, on the same port once the
//! exchange's listener is gone (perftest 4.5's `rdma_client_connect`,
//! `rdma_server_connect` and `create_rdma_cm_connection`).

use super::super::cm_common::expect_event as expect;
use super::super::wait::{bad_value, failed_completion, Timeout};
use rverbs::cm::{CmChannel, CmId, ConnParam, EventType, PortSpace};
use rverbs::{Context, Cq, Error, Mr, Pd, Qp, QpInit, QpType, RecvWr, Result, SendOp};
use rverbs::{SendWr, Wc, WcOpcode};
use rverbs_tool::wire::perf::Peer;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// perftest's `struct pingpong_dest` as its rdma_cm exchange sends it:
/// lid, out_reads, qpn, psn, rkey (32-bit big-endian), 4 bytes of C
/// padding, vaddr (64-bit big-endian), the GID, srqn and gid_index.
pub const DEST_LEN: usize = 56;
/// The receive buffer: every message of the exchange fits.
const SLOT: u32 = 64;
/// Tries at connecting while the peer does not listen yet (100 ms apart).
const CONNECT_TRIES: u32 = 100;
/// How often a side waiting without limit for the peer's end probes it.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// The wr_id of a probe.
const PROBE_ID: u64 = 3;

/// perftest's `struct pingpong_dest` in its rdma_cm encoding.
pub fn encode_dest(p: &Peer, gid_index: u32) -> [u8; DEST_LEN] {
    let mut m = [0u8; DEST_LEN];
    m[0..4].copy_from_slice(&u32::from(p.lid).to_be_bytes());
    m[4..8].copy_from_slice(&u32::from(p.out_reads).to_be_bytes());
    m[8..12].copy_from_slice(&p.qpn.to_be_bytes());
    m[12..16].copy_from_slice(&p.psn.to_be_bytes());
    m[16..20].copy_from_slice(&p.rkey.to_be_bytes());
    m[24..32].copy_from_slice(&p.addr.to_be_bytes());
    m[32..48].copy_from_slice(&p.gid.unwrap_or([0; 16]));
    // perftest copies these two unconverted (host order).
    m[48..52].copy_from_slice(&p.srqn.to_ne_bytes());
    m[52..56].copy_from_slice(&gid_index.to_ne_bytes());
    m
}

/// The peer's `struct pingpong_dest` (any bytes decode: the fields it
/// carries are only printed, and the remote address and key used as the
/// peer's RDMA target, which the peer's MR bounds).
pub fn decode_dest(m: &[u8; DEST_LEN]) -> Peer {
    let be32 = |i: usize| u32::from_be_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&m[32..48]);
    let mut vaddr = [0u8; 8];
    vaddr.copy_from_slice(&m[24..32]);
    Peer {
        lid: be32(0) as u16,
        out_reads: be32(4) as u16,
        qpn: be32(8) & 0xff_ffff,
        psn: be32(12) & 0xff_ffff,
        rkey: be32(16),
        addr: u64::from_be_bytes(vaddr),
        gid: (gid != [0; 16]).then_some(gid),
        srqn: u32::from_ne_bytes([m[48], m[49], m[50], m[51]]),
    }
}

/// The server's address on the test's port.
fn server_addr(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::Io {
            what: format!("resolving {host}"),
            source: e,
        })?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| {
            bad_value(format!(
                "{host}: no IPv4 address (perftest's rdma_cm is IPv4)"
            ))
        })
}

/// Whether an error is the peer not listening yet (a connection refused:
/// `REJECTED` with status 8), which is worth another try.
fn refused(e: &Error) -> bool {
    matches!(
        e,
        Error::CmEvent {
            got: EventType::REJECTED,
            status: 8,
            ..
        }
    )
}

/// The out-of-band exchange over rdma_cm.
pub struct Comm {
    chan: Arc<CmChannel>,
    id: CmId,
    qp: Qp,
    send_cq: Cq,
    recv_cq: Cq,
    /// Bytes 0..SLOT: what we send; SLOT..2*SLOT: what we receive.
    mr: Mr,
    client: bool,
    t: Timeout,
    /// The peer disconnected (its process ended).
    gone: bool,
    /// A probe is outstanding.
    probing: bool,
}

impl Comm {
    /// Connects to the server `host` (retrying while it does not listen
    /// yet), or, without one, waits for a client on the port.
    pub fn establish(host: Option<&str>, port: u16, t: Timeout) -> Result<Comm> {
        match host {
            Some(h) => {
                let dst = server_addr(h, port)?;
                let mut tries = 0;
                loop {
                    match Comm::connect(&dst, t) {
                        Err(e) if refused(&e) && tries < CONNECT_TRIES => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        r => return r,
                    }
                }
            }
            None => Comm::accept(port, t),
        }
    }

    fn connect(dst: &SocketAddr, t: Timeout) -> Result<Comm> {
        let chan = CmChannel::new()?;
        let id = chan.create_id(PortSpace::TCP)?;
        id.resolve_addr(None, dst, 2000)?;
        expect(&chan, EventType::ADDR_RESOLVED, Some(t))?;
        id.resolve_route(2000)?;
        expect(&chan, EventType::ROUTE_RESOLVED, Some(t))?;
        let mut c = Comm::on(chan, id, true, t)?;
        c.post_recv()?;
        c.id.connect(&comm_param())?;
        expect(&c.chan, EventType::ESTABLISHED, Some(t))?;
        Ok(c)
    }

    fn accept(port: u16, t: Timeout) -> Result<Comm> {
        let chan = CmChannel::new()?;
        let listen = chan.create_id(PortSpace::TCP)?;
        listen.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))?;
        listen.listen(1)?;
        let ev = expect(&chan, EventType::CONNECT_REQUEST, None)?;
        let id = ev
            .request
            .ok_or_else(|| bad_value("CONNECT_REQUEST without a new id"))?;
        let mut c = Comm::on(chan, id, false, t)?;
        c.post_recv()?;
        c.id.accept(&comm_param())?;
        expect(&c.chan, EventType::ESTABLISHED, Some(t))?;
        // The test's QPs connect to this port next: the listener goes.
        drop(listen);
        Ok(c)
    }

    /// The exchange's resources on `id`'s device.
    fn on(chan: Arc<CmChannel>, id: CmId, client: bool, t: Timeout) -> Result<Comm> {
        let ctx = id.context()?;
        let pd = ctx.alloc_pd()?;
        let send_cq = ctx.create_cq(4, None, 0)?;
        let recv_cq = ctx.create_cq(4, None, 0)?;
        let mr = pd.alloc_mr(2 * SLOT as usize, rverbs::Access::LOCAL_WRITE)?;
        let qp = id.create_qp(
            &pd,
            &QpInit {
                qp_type: QpType::Rc,
                send_cq: &send_cq,
                recv_cq: &recv_cq,
                // A message and a probe; a message.
                caps: super::super::cm_common::one_sge_caps(2, 2),
                sq_sig_all: false,
                srq: None,
            },
        )?;
        Ok(Comm {
            chan,
            id,
            qp,
            send_cq,
            recv_cq,
            mr,
            client,
            t,
            gone: false,
            probing: false,
        })
    }

    /// The device context the exchange runs on (the test runs there too).
    pub fn context(&self) -> Result<Context> {
        self.id.context()
    }

    /// The device port the exchange runs on.
    pub fn port(&self) -> Result<u8> {
        self.id.port_num()
    }

    fn post_recv(&mut self) -> Result<()> {
        let s = [self.mr.slice(SLOT as usize, SLOT)?];
        self.qp.post_recv(&[RecvWr { wr_id: 1, sges: &s }])
    }

    /// Sends `mine` and waits for its completion.
    fn send(&mut self, mine: &[u8], what: &str) -> Result<()> {
        if mine.len() > SLOT as usize {
            return Err(bad_value(format!("{what}: {} bytes", mine.len())));
        }
        self.mr.write(0, mine)?;
        let s = [self.mr.slice(0, mine.len() as u32)?];
        self.qp
            .post_send(&[SendWr::new(2, SendOp::Send, &s).signaled(true)])?;
        self.wait(false, Some(self.t), &format!("the send of {what}"))?;
        Ok(())
    }

    /// Waits for the peer's next message into `theirs` (at most the
    /// timeout, or without limit), then reposts the receive.
    fn recv(&mut self, theirs: &mut [u8], limit: Option<Timeout>, what: &str) -> Result<()> {
        let wc = self.wait(true, limit, &format!("the peer's {what}"))?;
        let n = (wc.byte_len as usize).min(theirs.len());
        theirs.fill(0);
        self.mr.read(SLOT as usize, &mut theirs[..n])?;
        self.post_recv()
    }

    /// Spins on the receive or the send CQ for one completion, at most
    /// `limit`; also ends when the peer disconnects (its process died).
    /// Without a limit it sleeps a millisecond between empty polls after
    /// the first thousand, to leave the CPU to the peer's test, and probes
    /// the peer every [`PROBE_EVERY`] with a zero-length RDMA WRITE (which
    /// needs no key and takes no receive): a host that died answers no
    /// probe, and the probe fails after the connection's retries.
    fn wait(&mut self, recv: bool, limit: Option<Timeout>, what: &str) -> Result<Wc> {
        let start = Instant::now();
        let mut wc = [Wc::default(); 1];
        let mut empty = 0u32;
        let mut probed = start;
        loop {
            let cq = if recv {
                &mut self.recv_cq
            } else {
                &mut self.send_cq
            };
            if cq.poll(&mut wc) == 1 {
                let w = wc[0];
                if w.wr_id == PROBE_ID {
                    // A probe's completion, read while awaiting a send's.
                    self.check_probe(&w, what)?;
                    continue;
                }
                if !w.is_ok() {
                    return Err(failed_completion(
                        format!("{what}: completion with status {}", w.status),
                        &w,
                    ));
                }
                if recv != (w.opcode == WcOpcode::RECV) {
                    return Err(bad_value(format!("{what}: an unexpected completion")));
                }
                return Ok(w);
            }
            empty += 1;
            if empty % 1024 == 0 {
                if let Some(t) = limit {
                    if start.elapsed() > t.duration() {
                        return Err(t.expired(what));
                    }
                }
                if self.gone || self.peer_gone()? {
                    return Err(Error::Io {
                        what: format!("waiting for {what}"),
                        source: std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "the peer disconnected its rdma_cm connection",
                        ),
                    });
                }
                if limit.is_none() && recv {
                    if self.send_cq.poll(&mut wc) == 1 {
                        let w = wc[0];
                        self.check_probe(&w, what)?;
                    }
                    if !self.probing && probed.elapsed() > PROBE_EVERY {
                        self.qp.post_send(&[SendWr::new(
                            PROBE_ID,
                            SendOp::Write(rverbs::Remote { addr: 0, rkey: 0 }),
                            &[],
                        )
                        .signaled(true)])?;
                        self.probing = true;
                        probed = Instant::now();
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    /// A probe's completion: the peer answered, or (an error) it is gone.
    fn check_probe(&mut self, w: &Wc, what: &str) -> Result<()> {
        self.probing = false;
        if w.is_ok() {
            return Ok(());
        }
        Err(failed_completion(
            format!(
                "waiting for {what}: the peer answered no probe (status {})",
                w.status
            ),
            w,
        ))
    }

    /// Whether the exchange's connection ended (an event on its channel).
    fn peer_gone(&mut self) -> Result<bool> {
        if self.chan.poll(0)? {
            let ev = self.chan.get_event()?;
            if matches!(
                ev.kind,
                EventType::DISCONNECTED | EventType::TIMEWAIT_EXIT | EventType::DEVICE_REMOVAL
            ) {
                self.gone = true;
            }
        }
        Ok(self.gone)
    }

    /// One message each way, the client sending first; `limit` bounds the
    /// wait for the peer's.
    pub fn xchg(
        &mut self,
        mine: &[u8],
        theirs: &mut [u8],
        limit: Option<Timeout>,
        what: &str,
    ) -> Result<()> {
        if self.client {
            self.send(mine, what)?;
            self.recv(theirs, limit, what)
        } else {
            self.recv(theirs, limit, what)?;
            self.send(mine, what)
        }
    }
}

/// The exchange's connection parameters: perftest's (no RDMA reads, 7 RNR
/// retries) but 6 transport retries, not 7, which rxe takes as "retry
/// forever": a probe of a dead host must fail.
fn comm_param() -> ConnParam {
    ConnParam {
        responder_resources: 0,
        initiator_depth: 0,
        retry_count: 6,
        rnr_retry_count: 7,
        ..ConnParam::default()
    }
}

/// The test's QPs, each connected through an rdma_cm id of its own (kept
/// alive with it).
pub struct Connected {
    pub qps: Vec<Qp>,
    pub ids: Vec<CmId>,
    _chan: Arc<CmChannel>,
}

/// A server's listener for the test's QPs, up before the sync round that
/// lets the client connect them (perftest's client gives up on a refused
/// connection).
pub struct Listening {
    chan: Arc<CmChannel>,
    _id: CmId,
}

/// Listens on `port` for `n` connections of the test's QPs.
pub fn listen(port: u16, n: usize) -> Result<Listening> {
    let chan = CmChannel::new()?;
    let id = chan.create_id(PortSpace::TCP)?;
    id.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))?;
    id.listen(n as u32)?;
    Ok(Listening { chan, _id: id })
}

/// Connects `n` QPs made by `init` on `pd` to the peer: as a client to
/// `host` on `port` (retrying while the peer's listener is not up yet),
/// as a server by accepting `n` requests on `listening`. `reads`: the
/// RDMA reads/atomics each side may have outstanding (read and atomic
/// tests).
#[allow(clippy::too_many_arguments)]
pub fn connect_qps(
    host: Option<&str>,
    listening: Option<Listening>,
    port: u16,
    n: usize,
    pd: &Pd,
    init: &QpInit<'_>,
    reads: u8,
    t: Timeout,
) -> Result<Connected> {
    let param = ConnParam {
        responder_resources: reads,
        initiator_depth: reads,
        retry_count: 7,
        rnr_retry_count: 7,
        ..ConnParam::default()
    };
    let mut qps = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let chan = match (host, listening) {
        (Some(h), _) => {
            let chan = CmChannel::new()?;
            let dst = server_addr(h, port)?;
            for _ in 0..n {
                let mut tries = 0;
                loop {
                    let id = chan.create_id(PortSpace::TCP)?;
                    id.resolve_addr(None, &dst, 2000)?;
                    expect(&chan, EventType::ADDR_RESOLVED, Some(t))?;
                    id.resolve_route(2000)?;
                    expect(&chan, EventType::ROUTE_RESOLVED, Some(t))?;
                    let qp = id.create_qp(pd, init)?;
                    id.connect(&param)?;
                    match expect(&chan, EventType::ESTABLISHED, Some(t)) {
                        Ok(_) => {
                            qps.push(qp);
                            ids.push(id);
                            break;
                        }
                        Err(e) if refused(&e) && tries < CONNECT_TRIES => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            chan
        }
        (None, None) => return Err(bad_value("a server connects its QPs on a listener")),
        (None, Some(l)) => {
            let chan = l.chan.clone();
            // Requests and establishments interleave across the ids.
            let mut established = 0;
            while established < n {
                if !chan.poll(t.millis())? {
                    return Err(t.expired("the peer's rdma_cm connections of the test's QPs"));
                }
                let ev = chan.get_event()?;
                match ev.kind {
                    EventType::CONNECT_REQUEST if ids.len() < n => {
                        let id = ev
                            .request
                            .ok_or_else(|| bad_value("CONNECT_REQUEST without a new id"))?;
                        qps.push(id.create_qp(pd, init)?);
                        id.accept(&param)?;
                        ids.push(id);
                    }
                    EventType::ESTABLISHED => established += 1,
                    _ => {
                        return Err(Error::CmEvent {
                            expected: Some(EventType::ESTABLISHED),
                            got: ev.kind,
                            other_id: false,
                            status: ev.status,
                            private_data: ev.conn.private_data.clone(),
                        })
                    }
                }
            }
            // The listener goes; the connections stay.
            drop(l);
            chan
        }
    };
    Ok(Connected {
        qps,
        ids,
        _chan: chan,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dest_round_trips_in_perftests_layout() {
        let p = Peer {
            lid: 0x12,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234_5678,
            addr: 0x5566_7788_99aa_bbcc,
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 77, 0, 1]),
            srqn: 0,
        };
        let m = encode_dest(&p, 1);
        assert_eq!(&m[0..4], &[0, 0, 0, 0x12]);
        assert_eq!(&m[16..20], &[0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&m[20..24], &[0; 4], "C padding before vaddr");
        assert_eq!(
            &m[24..32],
            &[0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc]
        );
        assert_eq!(decode_dest(&m), p);
    }
}

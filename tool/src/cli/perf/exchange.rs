//! The out-of-band exchange with the peer (the messages are
//! [`rverbs_tool::wire::perf`]'s): the TCP connection, or with `-R` the
//! rdma_cm one ([`super::cm::Comm`]); the messages before the resources
//! (version, cycle buffer, cache line, MTU); the address rounds, the
//! bandwidth figures and the closing `done`. Each message goes both ways,
//! the client writing first.

use super::super::wait::{keepalive, Timeout};
use super::args::PerfArgs;
use super::cm::{self, Comm};
use super::plan::{agreed_mtu, CACHE_LINE, CYCLE_BUFFER};
use rverbs::{Error, Result};
use rverbs_tool::wire::perf::{
    mtu_msg, parse_cycle_buffer, parse_version, version_msg, BwReport, Peer, DONE, MSG_LEN,
    MSG_LEN_GID, MTU_LEN, VERSION_LEN,
};
use rverbs_tool::wire::BadMessage;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

pub fn io(what: &str, e: std::io::Error) -> Error {
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

/// How the exchange travels: perftest's TCP socket, or (with `-R`) its
/// rdma_cm connection.
enum Link {
    Tcp(TcpStream),
    Cm(Box<Comm>),
}

/// The two numbers of the messages before the addresses that the plan
/// needs.
pub struct Agreed {
    /// The larger of the two cycle buffers.
    pub cycle: u32,
    /// The smaller of the two MTUs (an `ibv_mtu` value).
    pub mtu: u8,
}

/// The out-of-band side of the exchange.
pub struct Exchange {
    link: Link,
    client: bool,
    t: Timeout,
    /// Whether address messages carry a GID (then they are longer; TCP).
    gid: bool,
    /// The GID index our rdma_cm address messages carry.
    gid_index: u32,
}

impl Exchange {
    /// The exchange over `comm` (`-R`), or a TCP connection to the server
    /// (or from the client) made now.
    pub fn open(a: &PerfArgs, comm: Option<Comm>, gid_idx: Option<u32>) -> Result<Exchange> {
        Ok(Exchange {
            link: match comm {
                Some(c) => Link::Cm(Box::new(c)),
                None => Link::Tcp(connect_tcp(a)?),
            },
            client: a.server.is_some(),
            t: a.timeout,
            gid: gid_idx.is_some(),
            gid_index: gid_idx.unwrap_or(0),
        })
    }

    /// The messages before the resources: versions, cycle buffers, cache
    /// lines, MTUs (`offered`, an `ibv_mtu` value).
    pub fn preamble(&mut self, offered: u8) -> Result<Agreed> {
        let mut v = [0u8; VERSION_LEN];
        self.xchg(&version_msg(), &mut v, "version")?;
        parse_version(&v).map_err(|e| bad_message("reading the peer's version", e))?;
        let mut cb = [0u8; 4];
        self.xchg(&CYCLE_BUFFER.to_be_bytes(), &mut cb, "cycle buffer size")?;
        let peer_cycle = parse_cycle_buffer(cb)
            .map_err(|e| bad_message("reading the peer's cycle buffer", e))?;
        // The peer's cache line size is read and not used (as perftest).
        self.xchg(&CACHE_LINE.to_be_bytes(), &mut cb, "cache line size")?;
        let mut m = [0u8; MTU_LEN];
        self.xchg(&mtu_msg(offered), &mut m, "MTU")?;
        Ok(Agreed {
            cycle: CYCLE_BUFFER.max(peer_cycle),
            mtu: agreed_mtu(offered, &m),
        })
    }

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
    pub fn round(&mut self, me: &Peer) -> Result<Peer> {
        if let Link::Cm(c) = &mut self.link {
            return cm_round(c, me, self.gid_index, Some(self.t), "address");
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
    pub fn await_round(&mut self, me: &Peer) -> Result<Peer> {
        let s = match &mut self.link {
            Link::Cm(c) => return cm_round(c, me, self.gid_index, None, "address after its run"),
            Link::Tcp(s) => s,
        };
        keepalive(s)?;
        s.set_read_timeout(None)
            .map_err(|e| io("clearing the TCP read timeout", e))?;
        let p = self.round(me);
        if let Link::Tcp(s) = &self.link {
            self.t.bound(s)?;
        }
        p
    }

    /// `done` and the peer's `done`, after the last round (TCP only:
    /// perftest's rdma_cm exchange just ends; `ctx_close_connection`).
    pub fn done(&mut self) -> Result<()> {
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

    /// A bandwidth run's five figures each way (`xchg_bw_reports`).
    pub fn figures(&mut self, mine: &BwReport) -> Result<BwReport> {
        let mut theirs = [[0u8; 8]; 5];
        for (m, t) in mine.fields().iter().zip(theirs.iter_mut()) {
            self.xchg(m, t, "bandwidth report")?;
        }
        Ok(BwReport::from_fields(&theirs))
    }
}

/// One address round over rdma_cm, its wait bounded by `limit` or not.
fn cm_round(
    c: &mut Comm,
    me: &Peer,
    gid_index: u32,
    limit: Option<Timeout>,
    what: &str,
) -> Result<Peer> {
    let mut m = [0u8; cm::DEST_LEN];
    c.xchg(&cm::encode_dest(me, gid_index), &mut m, limit, what)?;
    Ok(cm::decode_dest(&m))
}

/// The TCP connection of the exchange: to the server (retried while it
/// does not listen yet), or the first client's on the port.
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

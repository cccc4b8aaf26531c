//! `rverbs mckey`: rdma-core's `mckey`, multicast over rdma_cm. Each of
//! `-c` ids resolves the group's address (from `-b`'s device), creates a UD
//! QP, and joins the group (`-o`: send-only); the JOIN event gives the
//! group's address vector, QPN and Q_Key. After 3 seconds (for the fabric
//! to set the group up, as the C tool waits), a sender (`-s`) sends `-C`
//! datagrams of `-S` bytes with its QPN as immediate data; a receiver waits
//! for `-C` of them. Then every id leaves. Either side can be rdma-core's.
//!
//! Unlike the C tool, a receiver checks what arrives (status, length, the
//! immediate data naming the sending QP), the sender waits for its last
//! send to complete before leaving (the C sender may leave with datagrams
//! still queued), and no wait is unbounded (`--timeout`).

use super::cm_common::{
    framed, get_addr, invalid, receive_datagrams, send_datagrams, ud_res, UdRes,
};
use super::wait::{parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::cm::{CmChannel, CmId, EventType, JoinFlags, PortSpace};
use rverbs::{Ah, Error, Result};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args)]
pub struct MckeyArgs {
    /// The multicast address to join.
    #[arg(short = 'm', value_name = "multicast_address")]
    mcast: String,
    /// Be the sender.
    #[arg(short = 's')]
    sender: bool,
    /// Bind to this local address (picks the device).
    #[arg(short = 'b', value_name = "bind_address")]
    bind: Option<String>,
    /// Ids (each with its QP) joining the group.
    #[arg(short = 'c', value_name = "connections", default_value_t = 1)]
    connections: u32,
    /// Datagrams each id sends or receives.
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10)]
    count: u32,
    /// Bytes per datagram (at most the port's active MTU).
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100)]
    size: u32,
    /// Port space: 0x111 for UDP (the default), 0x2 for IPOIB.
    #[arg(short = 'p', value_name = "port_space", default_value = "0x111", value_parser = parse_ps)]
    port_space: u16,
    /// Join as a send-only full member.
    #[arg(short = 'o')]
    send_only: bool,
    /// Give up after this many seconds without progress (no event, no
    /// datagram).
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    timeout: Timeout,
}

/// `strtol(optarg, NULL, 0)`: decimal, or hex with `0x`.
fn parse_ps(s: &str) -> std::result::Result<u16, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a port space (0x111 for UDP, 0x2 for IPOIB)"))
}

/// One id and its verbs objects.
struct Node {
    id: CmId,
    res: Option<UdRes>,
    /// Where to send, from the JOIN event: AH, QPN, Q_Key.
    dest: Option<(Ah, u32, u32)>,
}

pub fn mckey(a: &MckeyArgs) -> Result<ExitCode> {
    let role = if a.sender { "client" } else { "server" };
    framed("mckey", role, || run(a))
}

fn run(a: &MckeyArgs) -> Result<()> {
    if a.connections == 0 {
        return Err(invalid("-c 0: at least one id must join"));
    }
    let src = a.bind.as_deref().map(|h| get_addr(h, 0)).transpose()?;
    let dst = get_addr(&a.mcast, 0)?;
    if !dst.ip().is_multicast() {
        return Err(invalid(format!("{} is not a multicast address", dst.ip())));
    }
    let chan = CmChannel::new()?;
    let mut nodes = Vec::new();
    for _ in 0..a.connections {
        nodes.push(Node {
            id: chan.create_id(PortSpace(a.port_space))?,
            res: None,
            dest: None,
        });
    }
    println!("mckey: joining");
    for n in &nodes {
        if let Some(s) = &src {
            n.id.bind(s)?;
        }
        n.id.resolve_addr(src.as_ref(), &dst, 2000)?;
    }
    let joined = join_all(a, &chan, &mut nodes, &dst);
    let transfer = joined.and_then(|()| {
        // Time for the fabric to set the group up (an SM on InfiniBand),
        // as the C tool gives it.
        std::thread::sleep(Duration::from_secs(3));
        if a.count == 0 {
            return Ok(());
        }
        if a.sender {
            println!("initiating data transfers");
            for n in &mut nodes {
                send(a, n)?;
            }
        } else {
            println!("receiving data transfers");
            for n in &mut nodes {
                receive(a, n)?;
            }
        }
        println!("data transfers complete");
        Ok(())
    });
    let mut left = Ok(());
    for n in nodes.iter().filter(|n| n.dest.is_some()) {
        if let Err(e) = n.id.leave_multicast(&dst) {
            println!("mckey: failure leaving: {e}");
            left = Err(e);
        }
    }
    transfer.and(left)
}

/// Reads events until every id joined: ADDR_RESOLVED sets the id up and
/// joins, MULTICAST_JOIN gives the destination.
fn join_all(
    a: &MckeyArgs,
    chan: &Arc<CmChannel>,
    nodes: &mut [Node],
    dst: &SocketAddr,
) -> Result<()> {
    let mut left = nodes.len();
    while left > 0 {
        if !chan.poll(a.timeout.millis())? {
            return Err(a.timeout.expired("the group to be joined"));
        }
        let ev = chan.get_event()?;
        let Some(n) = nodes.iter_mut().find(|n| n.id.uid() == ev.uid) else {
            continue;
        };
        match ev.kind {
            EventType::ADDR_RESOLVED => {
                n.res = Some(ud_res(&n.id, a.count, a.size, !a.sender)?);
                let flags = if a.send_only {
                    JoinFlags::SendOnlyFullMember
                } else {
                    JoinFlags::FullMember
                };
                n.id.join_multicast_ex(dst, flags)
                    .map_err(|e| invalid(format!("failure joining: {e}")))?;
            }
            EventType::MULTICAST_JOIN => {
                let av = ev.ah_attr();
                let dgid = av.grh.map(|g| g.dgid).unwrap_or_default();
                println!(
                    "mckey: joined dgid: {} mlid 0x{:x} sl {}",
                    std::net::Ipv6Addr::from(dgid),
                    av.dlid,
                    av.sl
                );
                let res = n
                    .res
                    .as_ref()
                    .ok_or_else(|| invalid("joined before set up"))?;
                let ah = res
                    .pd
                    .create_ah(&av)
                    .map_err(|e| invalid(format!("failure creating address handle: {e}")))?;
                n.dest = Some((ah, ev.ud.qp_num, ev.ud.qkey));
                left -= 1;
            }
            EventType::ADDR_ERROR | EventType::ROUTE_ERROR | EventType::MULTICAST_ERROR => {
                println!("mckey: event: {}, error: {}", ev.name(), ev.status);
                return Err(Error::CmEvent {
                    expected: Some(EventType::MULTICAST_JOIN),
                    got: ev.kind,
                    other_id: false,
                    status: ev.status,
                    private_data: Vec::new(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Posts `-C` sends to the group, the last one signaled, and waits for it.
fn send(a: &MckeyArgs, n: &mut Node) -> Result<()> {
    match (&mut n.res, &n.dest) {
        (Some(res), Some((ah, qpn, qkey))) => {
            send_datagrams(a.timeout, res, (ah, *qpn, *qkey), a.count, a.size)
        }
        _ => Ok(()),
    }
}

/// Waits for `-C` datagrams, each checked.
fn receive(a: &MckeyArgs, n: &mut Node) -> Result<()> {
    match &mut n.res {
        Some(res) => receive_datagrams(a.timeout, &mut res.cq, a.count, a.size, "").map(drop),
        None => Ok(()),
    }
}

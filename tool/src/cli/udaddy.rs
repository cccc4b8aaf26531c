//! `rverbs udaddy`: rdma-core's `udaddy`. `-c` UD "connections" over
//! rdma_cm (service-ID resolution on port 7174): the client learns the
//! server's QPN, Q_Key and address vector and sends `-C` datagrams of `-S`
//! bytes (its QPN as immediate data); the server receives them and answers
//! each client with as many. Either side can be rdma-core's.
//!
//! The C server builds its reply address from the first completion
//! (`ibv_create_ah_from_wc`); this one builds it from what the connection
//! request told it — the client's IP address, as a RoCE v2 GID, from the
//! local address's GID index — and the QPN in the immediate data, as the
//! C tool does. Unlike the C tool, every datagram's status, length and
//! immediate data are checked, and no wait is unbounded once a peer is
//! involved (`--timeout`).

use super::cm_common::{
    check_port_space, framed, get_addr, invalid, next_event, receive_datagrams, send_datagrams,
    ud_res, CmToolArgs, UdRes,
};
use clap::Args;
use rverbs::cm::{CmChannel, CmEvent, CmId, ConnParam, EventType, IdOption, PortSpace};
use rverbs::{AhAttr, Error, GidType, Grh, Result};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

/// udaddy's fixed port.
const PORT: u16 = 7174;

#[derive(Args)]
pub struct UdaddyArgs {
    #[command(flatten)]
    cm: CmToolArgs,
}

/// One connection's id, verbs objects and destination.
struct Node {
    id: CmId,
    res: UdRes,
    /// AH, QPN and Q_Key to send to, once known.
    dest: Option<(rverbs::Ah, u32, u32)>,
}

pub fn udaddy(a: &UdaddyArgs) -> Result<ExitCode> {
    check_port_space(a.cm.port_space.as_deref(), "udp")?;
    if a.cm.connections == 0 {
        return Err(invalid("-c 0: at least one connection"));
    }
    if a.cm.server.is_some() {
        framed("udaddy", "client", || run_client(a))
    } else {
        framed("udaddy", "server", || run_server(a))
    }
}

/// Posts `-C` datagrams to the node's destination and waits for the last
/// (the C client leaves them unsignaled).
fn post_sends(a: &UdaddyArgs, n: &mut Node) -> Result<()> {
    match &n.dest {
        Some((ah, qpn, qkey)) => send_datagrams(
            a.cm.timeout,
            &mut n.res,
            (ah, *qpn, *qkey),
            a.cm.count,
            a.cm.size,
        ),
        None => Ok(()),
    }
}

/// Waits for `-C` datagrams on the node, each checked; returns the QPN of
/// the sender (its immediate data).
fn receive(a: &UdaddyArgs, n: &mut Node, i: usize) -> Result<u32> {
    let on = format!(" on connection {i}");
    receive_datagrams(a.cm.timeout, &mut n.res.cq, a.cm.count, a.cm.size, &on)
}

fn run_client(a: &UdaddyArgs) -> Result<()> {
    let host = a.cm.server.as_deref().unwrap_or_default();
    let dst = get_addr(host, PORT)?;
    let src = a.cm.bind.as_deref().map(|b| get_addr(b, 0)).transpose()?;
    let chan = CmChannel::new()?;
    let mut ids = Vec::new();
    for _ in 0..a.cm.connections {
        ids.push(Some(chan.create_id(PortSpace::UDP)?));
    }
    println!("udaddy: connecting");
    for id in ids.iter().flatten() {
        id.resolve_addr(src.as_ref(), &dst, 2000)?;
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut pending: Vec<(CmId, UdRes)> = Vec::new();
    while nodes.len() < a.cm.connections as usize {
        let ev = next_event(&chan, Some(a.cm.timeout), "the connections")?;
        match ev.kind {
            EventType::ADDR_RESOLVED => {
                let id = ids.iter().flatten().find(|i| i.uid() == ev.uid);
                if let Some(id) = id {
                    if let Some(t) = a.cm.tos {
                        if let Err(e) = id.set_option(IdOption::Tos(t)) {
                            println!("udaddy: set TOS option failed: {e}");
                        }
                    }
                    id.resolve_route(2000)?;
                }
            }
            EventType::ROUTE_RESOLVED => {
                if let Some(slot) = ids
                    .iter_mut()
                    .find(|i| i.as_ref().is_some_and(|i| i.uid() == ev.uid))
                {
                    let Some(id) = slot.take() else { continue };
                    let res = ud_res(&id, a.cm.count, a.cm.size, true)?;
                    id.connect(&ConnParam::default())?;
                    pending.push((id, res));
                }
            }
            EventType::ESTABLISHED => {
                if let Some(p) = pending.iter().position(|(id, _)| id.uid() == ev.uid) {
                    let (id, res) = pending.remove(p);
                    let ah = res
                        .pd
                        .create_ah(&ev.ah_attr())
                        .map_err(|e| invalid(format!("failure creating address handle: {e}")))?;
                    nodes.push(Node {
                        id,
                        res,
                        dest: Some((ah, ev.ud.qp_num, ev.ud.qkey)),
                    });
                }
            }
            EventType::ADDR_ERROR
            | EventType::ROUTE_ERROR
            | EventType::CONNECT_ERROR
            | EventType::UNREACHABLE
            | EventType::REJECTED => return Err(failed(&ev)),
            _ => {}
        }
    }
    if a.cm.count > 0 {
        println!("initiating data transfers");
        for n in &mut nodes {
            post_sends(a, n)?;
        }
        println!("receiving data transfers");
        for (i, n) in nodes.iter_mut().enumerate() {
            receive(a, n, i)?;
        }
        println!("data transfers complete");
    }
    Ok(())
}

fn failed(ev: &CmEvent) -> Error {
    println!("udaddy: event: {}, error: {}", ev.name(), ev.status);
    Error::CmEvent {
        expected: Some(EventType::ESTABLISHED),
        got: ev.kind,
        other_id: false,
        status: ev.status,
        private_data: ev.conn.private_data.clone(),
    }
}

/// The address vector back to a connection's client: its IPv4 address as
/// a RoCE v2 GID, sent from the GID index of the local address.
fn reply_av(id: &CmId) -> Result<AhAttr> {
    let info = id.query_addr()?;
    let (Some(local), Some(peer)) = (info.src, info.dst) else {
        return Err(invalid("the connection has no addresses"));
    };
    let gid_of = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    };
    let sgid = gid_of(local.ip());
    let port = info.port_num;
    let entry = id
        .context()?
        .gid_table(port)?
        .into_iter()
        .find(|e| e.gid == sgid && e.gid_type == GidType::RoceV2)
        .ok_or_else(|| invalid(format!("no RoCE v2 GID for {} on port {port}", local.ip())))?;
    Ok(AhAttr {
        port_num: port,
        grh: Some(Grh {
            dgid: gid_of(peer.ip()),
            sgid_index: entry.index as u8,
            hop_limit: 64,
            ..Grh::default()
        }),
        ..AhAttr::default()
    })
}

fn run_server(a: &UdaddyArgs) -> Result<()> {
    let chan = CmChannel::new()?;
    let listen = chan.create_id(PortSpace::UDP)?;
    let any: SocketAddr = ([0, 0, 0, 0], PORT).into();
    let src = match a.cm.bind.as_deref() {
        Some(b) => get_addr(b, PORT)?,
        None => any,
    };
    listen
        .bind(&src)
        .map_err(|e| invalid(format!("bind address failed: {e}")))?;
    listen.listen(0)?;
    let mut nodes: Vec<Node> = Vec::new();
    while nodes.len() < a.cm.connections as usize {
        let limit = (!nodes.is_empty()).then_some(a.cm.timeout);
        let ev = next_event(&chan, limit, "the connections")?;
        if ev.kind != EventType::CONNECT_REQUEST {
            continue;
        }
        let Some(id) = ev.request else { continue };
        let res = ud_res(&id, a.cm.count, a.cm.size, true)?;
        id.accept(&ConnParam::default())?;
        nodes.push(Node {
            id,
            res,
            dest: None,
        });
    }
    if a.cm.count > 0 {
        println!("receiving data transfers");
        for (i, n) in nodes.iter_mut().enumerate() {
            let qpn = receive(a, n, i)?;
            let ah = n.res.pd.create_ah(&reply_av(&n.id)?)?;
            // The Q_Key the client's QP took from the connection: ours.
            let qkey = n.id.init_qp_attr(1)?.qkey;
            n.dest = Some((ah, qpn, qkey));
        }
        println!("sending replies");
        for n in &mut nodes {
            post_sends(a, n)?;
        }
        println!("data transfers complete");
    }
    Ok(())
}

//! `rverbs cmatose`: rdma-core's `ucmatose`. `-c` RC connections over
//! rdma_cm; the server sends `-C` messages of `-S` bytes on each, the
//! client receives them and replies with as many; then the server
//! disconnects. Either side can be rdma-core's.
//!
//! Unlike the C tool, every completion's status and length is checked,
//! and no wait is unbounded once connecting began (`--timeout`; a server
//! waits for its first connection request without limit).

use super::cm_common::{
    check_port_space, framed, get_addr, invalid, next_event, next_wc, parse_u8, CmToolArgs,
};
use clap::Args;
use rverbs::cm::{CmChannel, CmEvent, CmId, ConnParam, EventType, IdOption, PortSpace};
use rverbs::{Access, Cq, Error, Mr, Pd, Qp, QpInit, QpType, RecvWr, Result, SendOp, SendWr};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args)]
pub struct CmatoseArgs {
    #[command(flatten)]
    cm: CmToolArgs,
    /// Port number.
    #[arg(short = 'p', value_name = "port_number", default_value_t = 7471)]
    port: u16,
    /// Migrate the ids to a new event channel after the transfers.
    #[arg(short = 'm')]
    migrate: bool,
    /// ACK timeout exponent of the QPs (RDMA_OPTION_ID_ACK_TIMEOUT).
    #[arg(short = 'a', value_name = "ack_timeout", value_parser = parse_u8)]
    ack_timeout: Option<u8>,
}

/// One connection's id and verbs objects.
struct Node {
    id: CmId,
    res: Option<Res>,
    connected: bool,
}

struct Res {
    send_cq: Cq,
    recv_cq: Cq,
    qp: Qp,
    mr: Mr,
    _pd: Pd,
}

pub fn cmatose(a: &CmatoseArgs) -> Result<ExitCode> {
    check_port_space(a.cm.port_space.as_deref(), "tcp")?;
    if a.cm.connections == 0 {
        return Err(invalid("-c 0: at least one connection"));
    }
    if a.cm.server.is_some() {
        framed("cmatose", "client", || run_client(a))
    } else {
        framed("cmatose", "server", || run_server(a))
    }
}

/// The error events of a connection, printed as the C tool does.
fn connect_failed(ev: &CmEvent) -> Error {
    println!("cmatose: event: {}, error: {}", ev.name(), ev.status);
    Error::CmEvent {
        expected: Some(EventType::ESTABLISHED),
        got: ev.kind,
        other_id: false,
        status: ev.status,
        private_data: ev.conn.private_data.clone(),
    }
}

/// PD, CQs, the RC QP and the buffer of a connection; receives posted.
fn init_node(a: &CmatoseArgs, id: &CmId) -> Result<Res> {
    let ctx = id.context()?;
    let pd = ctx.alloc_pd()?;
    let depth = a.cm.count.max(1);
    let send_cq = ctx.create_cq(depth, None, 0)?;
    let recv_cq = ctx.create_cq(depth, None, 0)?;
    let mut qp = id.create_qp(
        &pd,
        &QpInit {
            qp_type: QpType::Rc,
            send_cq: &send_cq,
            recv_cq: &recv_cq,
            caps: super::cm_common::one_sge_caps(depth, depth),
            sq_sig_all: true,
            srq: None,
        },
    )?;
    let mr = pd.alloc_mr(a.cm.size.max(1) as usize, Access::LOCAL_WRITE)?;
    if a.cm.count > 0 {
        let s = [mr.slice(0, a.cm.size)?];
        for _ in 0..a.cm.count {
            qp.post_recv(&[RecvWr { wr_id: 1, sges: &s }])?;
        }
    }
    Ok(Res {
        send_cq,
        recv_cq,
        qp,
        mr,
        _pd: pd,
    })
}

fn post_sends(a: &CmatoseArgs, n: &mut Node) -> Result<()> {
    let Some(r) = n.res.as_mut().filter(|_| n.connected) else {
        return Ok(());
    };
    let data: Vec<u8> = (0..a.cm.size).map(|i| i as u8).collect();
    r.mr.write(0, &data)?;
    let s = [r.mr.slice(0, a.cm.size)?];
    for _ in 0..a.cm.count {
        r.qp.post_send(&[SendWr::new(2, SendOp::Send, &s)])?;
    }
    Ok(())
}

/// Waits for `-C` completions on each connected node's send or receive
/// CQ, each successful (receives: of `-S` bytes).
fn poll_cqs(a: &CmatoseArgs, nodes: &mut [Node], recv: bool) -> Result<()> {
    let what = if recv { "message" } else { "send completion" };
    for (i, n) in nodes.iter_mut().enumerate() {
        let Some(r) = n.res.as_mut().filter(|_| n.connected) else {
            continue;
        };
        let cq = if recv { &mut r.recv_cq } else { &mut r.send_cq };
        for k in 0..a.cm.count {
            let w = next_wc(
                a.cm.timeout,
                cq,
                &format!("{what} {} of {} on connection {i}", k + 1, a.cm.count),
            )?;
            if !w.is_ok() || (recv && w.byte_len != a.cm.size) {
                return Err(invalid(format!(
                    "{what} {} on connection {i}: status {}, {} bytes (want {})",
                    k + 1,
                    w.status,
                    w.byte_len,
                    a.cm.size
                )));
            }
        }
    }
    Ok(())
}

fn set_options(a: &CmatoseArgs, id: &CmId, tos: bool) {
    if let (Some(t), true) = (a.cm.tos, tos) {
        if let Err(e) = id.set_option(IdOption::Tos(t)) {
            println!("cmatose: set TOS option failed: {e}");
        }
    }
    if let Some(t) = a.ack_timeout {
        if let Err(e) = id.set_option(IdOption::AckTimeout(t)) {
            println!("cmatose: set ack timeout option failed: {e}");
        }
    }
}

/// Moves every id (and the listener) to a new event channel (`-m`).
fn migrate(nodes: &mut [Node], listen: Option<&mut CmId>) -> Result<Arc<CmChannel>> {
    println!("migrating to new event channel");
    let chan = CmChannel::new()?;
    if let Some(l) = listen {
        l.migrate(&chan)?;
    }
    for n in nodes {
        n.id.migrate(&chan)?;
    }
    Ok(chan)
}

/// Waits until every connected node got DISCONNECTED (answering each with
/// a disconnect, as the C tool does).
fn disconnect_events(
    a: &CmatoseArgs,
    chan: &Arc<CmChannel>,
    nodes: &mut [Node],
    mut left: usize,
) -> Result<()> {
    while left > 0 {
        let ev = next_event(chan, Some(a.cm.timeout), "DISCONNECTED")?;
        if ev.kind == EventType::DISCONNECTED {
            if let Some(n) = nodes.iter_mut().find(|n| n.id.uid() == ev.uid) {
                // The peer's disconnect already took the connection down;
                // ours only completes the exchange (its error is moot).
                let _ = n.id.disconnect();
                n.connected = false;
            }
            left -= 1;
        }
    }
    Ok(())
}

fn run_client(a: &CmatoseArgs) -> Result<()> {
    let host = a.cm.server.as_deref().unwrap_or_default();
    let dst = get_addr(host, a.port)?;
    let src = a.cm.bind.as_deref().map(|b| get_addr(b, 0)).transpose()?;
    let mut chan = CmChannel::new()?;
    let mut nodes = Vec::new();
    for _ in 0..a.cm.connections {
        nodes.push(Node {
            id: chan.create_id(PortSpace::TCP)?,
            res: None,
            connected: false,
        });
    }
    println!("cmatose: connecting");
    for n in &nodes {
        n.id.resolve_addr(src.as_ref(), &dst, 2000)?;
    }
    let mut left = nodes.len();
    while left > 0 {
        let ev = next_event(&chan, Some(a.cm.timeout), "the connections")?;
        let Some(n) = nodes.iter_mut().find(|n| n.id.uid() == ev.uid) else {
            continue;
        };
        match ev.kind {
            EventType::ADDR_RESOLVED => {
                set_options(a, &n.id, true);
                n.id.resolve_route(2000)?;
            }
            EventType::ROUTE_RESOLVED => {
                n.res = Some(init_node(a, &n.id)?);
                n.id.connect(&ConnParam {
                    responder_resources: 1,
                    initiator_depth: 1,
                    retry_count: 5,
                    ..ConnParam::default()
                })?;
            }
            EventType::ESTABLISHED => {
                n.connected = true;
                left -= 1;
            }
            EventType::ADDR_ERROR
            | EventType::ROUTE_ERROR
            | EventType::CONNECT_ERROR
            | EventType::UNREACHABLE
            | EventType::REJECTED => return Err(connect_failed(&ev)),
            _ => {}
        }
    }
    if a.cm.count > 0 {
        println!("receiving data transfers");
        poll_cqs(a, &mut nodes, true)?;
        println!("sending replies");
        for n in &mut nodes {
            post_sends(a, n)?;
        }
        println!("data transfers complete");
    }
    if a.migrate {
        chan = migrate(&mut nodes, None)?;
    }
    let connected = nodes.iter().filter(|n| n.connected).count();
    disconnect_events(a, &chan, &mut nodes, connected)
}

fn run_server(a: &CmatoseArgs) -> Result<()> {
    let mut chan = CmChannel::new()?;
    let mut listen = chan.create_id(PortSpace::TCP)?;
    let any: SocketAddr = ([0, 0, 0, 0], a.port).into();
    let src = match a.cm.bind.as_deref() {
        Some(b) => get_addr(b, a.port)?,
        None => any,
    };
    listen
        .bind(&src)
        .map_err(|e| invalid(format!("bind address failed: {e}")))?;
    listen.listen(0)?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut left = a.cm.connections as usize;
    while left > 0 {
        // The first request may take any time; after it, the timeout.
        let limit = (!nodes.is_empty()).then_some(a.cm.timeout);
        let ev = next_event(&chan, limit, "the connections")?;
        match ev.kind {
            EventType::CONNECT_REQUEST => {
                let Some(id) = ev.request else { continue };
                if nodes.len() == a.cm.connections as usize {
                    println!("cmatose: failing connection request");
                    let _ = id.reject(&[]);
                    continue;
                }
                let res = init_node(a, &id)?;
                set_options(a, &id, false);
                id.accept(&ConnParam::default())?;
                nodes.push(Node {
                    id,
                    res: Some(res),
                    connected: false,
                });
            }
            EventType::ESTABLISHED => {
                if let Some(n) = nodes.iter_mut().find(|n| n.id.uid() == ev.uid) {
                    n.connected = true;
                    left -= 1;
                }
            }
            EventType::CONNECT_ERROR | EventType::UNREACHABLE | EventType::REJECTED => {
                return Err(connect_failed(&ev))
            }
            _ => {}
        }
    }
    if a.cm.count > 0 {
        println!("initiating data transfers");
        for n in &mut nodes {
            post_sends(a, n)?;
        }
        println!("completing sends");
        poll_cqs(a, &mut nodes, false)?;
        println!("receiving data transfers");
        poll_cqs(a, &mut nodes, true)?;
        println!("data transfers complete");
    }
    if a.migrate {
        chan = migrate(&mut nodes, Some(&mut listen))?;
    }
    println!("cmatose: disconnecting");
    let mut connected = 0;
    for n in nodes.iter_mut().filter(|n| n.connected) {
        n.id.disconnect()?;
        connected += 1;
    }
    disconnect_events(a, &chan, &mut nodes, connected)?;
    println!("disconnected");
    Ok(())
}

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

use super::cmatose::{get_addr, invalid, next_wc, parse_u8};
use super::wait::{parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::cm::{ud_ah_attr, CmChannel, CmEvent, CmId, ConnParam, EventType, IdOption, PortSpace};
use rverbs::{
    Access, AhAttr, Cq, Error, GidType, Grh, Mr, Pd, Qp, QpCaps, QpInit, QpType, RecvWr, Result,
    SendOp, SendWr, WcOpcode,
};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

/// Bytes of the GRH at the head of every UD receive.
const GRH_LEN: u32 = 40;
/// udaddy's fixed port.
const PORT: u16 = 7174;

#[derive(Args)]
pub struct UdaddyArgs {
    /// Connect to this server (none: be the server).
    #[arg(short = 's', value_name = "server_address")]
    server: Option<String>,
    /// Bind to this local address.
    #[arg(short = 'b', value_name = "bind_address")]
    bind: Option<String>,
    /// Address format: name, ip or ipv6 (all resolved alike).
    #[arg(short = 'f', value_name = "address_format")]
    format: Option<String>,
    /// Port space: udp.
    #[arg(short = 'P', value_name = "port_space")]
    port_space: Option<String>,
    /// Connections.
    #[arg(short = 'c', value_name = "connections", default_value_t = 1)]
    connections: u32,
    /// Datagrams each way on each connection.
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10)]
    count: u32,
    /// Bytes per datagram (at most the port's active MTU).
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100)]
    size: u32,
    /// Type of service (RDMA_OPTION_ID_TOS).
    #[arg(short = 't', value_name = "type_of_service", value_parser = parse_u8)]
    tos: Option<u8>,
    /// Give up after this many seconds without progress.
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    timeout: Timeout,
}

/// One connection's id, verbs objects and destination.
struct Node {
    id: CmId,
    res: Res,
    /// AH, QPN and Q_Key to send to, once known.
    dest: Option<(rverbs::Ah, u32, u32)>,
}

struct Res {
    cq: Cq,
    qp: Qp,
    mr: Mr,
    pd: Pd,
}

pub fn udaddy(a: &UdaddyArgs) -> Result<ExitCode> {
    if let Some(p) = &a.port_space {
        if !p.to_ascii_lowercase().starts_with("udp") {
            return Err(invalid(format!(
                "-P {p}: only the udp port space is supported"
            )));
        }
    }
    if a.connections == 0 {
        return Err(invalid("-c 0: at least one connection"));
    }
    let res = if a.server.is_some() {
        println!("udaddy: starting client");
        run_client(a)
    } else {
        println!("udaddy: starting server");
        run_server(a)
    };
    let status = match res {
        Ok(()) => 0,
        Err(e) => {
            println!("udaddy: {e}");
            -1
        }
    };
    println!("test complete");
    println!("return status {status}");
    Ok(if status == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn next_event(chan: &Arc<CmChannel>, t: Option<Timeout>, what: &str) -> Result<CmEvent> {
    if let Some(t) = t {
        if !chan.poll(t.millis())? {
            return Err(t.expired(what));
        }
    }
    chan.get_event()
}

/// PD, CQ, the UD QP and the buffer of a connection; receives posted.
fn init_node(a: &UdaddyArgs, id: &CmId) -> Result<Res> {
    let ctx = id.context()?;
    let port = ctx.query_port(id.port_num()?)?;
    let mtu = rverbs::Mtu::from_raw(port.active_mtu).map_or(0, rverbs::Mtu::bytes);
    if a.count > 0 && a.size > mtu {
        return Err(invalid(format!(
            "message_size {} is larger than active mtu {mtu}",
            a.size
        )));
    }
    let pd = ctx.alloc_pd()?;
    let depth = a.count.max(1);
    let cq = ctx.create_cq(depth * 2, None, 0)?;
    let mut qp = id.create_qp(
        &pd,
        &QpInit {
            qp_type: QpType::Ud,
            send_cq: &cq,
            recv_cq: &cq,
            caps: QpCaps {
                max_send_wr: depth,
                max_recv_wr: depth,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            srq: None,
        },
    )?;
    let mr = pd.alloc_mr((a.size + GRH_LEN) as usize, Access::LOCAL_WRITE)?;
    if a.count > 0 {
        let s = [mr.slice(0, a.size + GRH_LEN)?];
        for _ in 0..a.count {
            qp.post_recv(&[RecvWr { wr_id: 1, sges: &s }])?;
        }
    }
    Ok(Res { cq, qp, mr, pd })
}

/// Posts `-C` datagrams to the node's destination, the last signaled,
/// and waits for that one (the C client leaves them unsignaled).
fn post_sends(a: &UdaddyArgs, n: &mut Node) -> Result<()> {
    let Some((ah, qpn, qkey)) = &n.dest else {
        return Ok(());
    };
    let r = &mut n.res;
    let data: Vec<u8> = (0..a.size).map(|i| i as u8).collect();
    r.mr.write(0, &data)?;
    let s = [r.mr.slice(0, a.size)?];
    let me = r.qp.qpn();
    for i in 0..a.count {
        let wr = SendWr::new(2, SendOp::SendWithImm(me), &s)
            .signaled(i + 1 == a.count)
            .to(ah, *qpn, *qkey);
        r.qp.post_send(&[wr])?;
    }
    let w = next_wc(a.timeout, &mut r.cq, "the last send to complete")?;
    if !w.is_ok() || w.opcode != WcOpcode::SEND {
        return Err(invalid(format!(
            "send failed: status {}, opcode {:?}",
            w.status, w.opcode
        )));
    }
    Ok(())
}

/// Waits for `-C` datagrams on the node, each checked; returns the QPN of
/// the sender (its immediate data).
fn receive(a: &UdaddyArgs, n: &mut Node, i: usize) -> Result<u32> {
    let mut from = 0;
    for k in 0..a.count {
        let what = format!("datagram {} of {} on connection {i}", k + 1, a.count);
        let w = next_wc(a.timeout, &mut n.res.cq, &what)?;
        if !w.is_ok() || w.opcode != WcOpcode::RECV {
            return Err(invalid(format!(
                "{what}: status {}, opcode {:?}",
                w.status, w.opcode
            )));
        }
        if w.byte_len != a.size + GRH_LEN || w.imm_data != Some(w.src_qp) {
            return Err(invalid(format!(
                "{what}: {} bytes (want {} with the GRH), immediate {:?} from QP {:#x} (the sender's QPN)",
                w.byte_len,
                a.size + GRH_LEN,
                w.imm_data,
                w.src_qp
            )));
        }
        from = w.src_qp;
    }
    Ok(from)
}

fn run_client(a: &UdaddyArgs) -> Result<()> {
    let host = a.server.as_deref().unwrap_or_default();
    let dst = get_addr(host, PORT)?;
    let src = a.bind.as_deref().map(|b| get_addr(b, 0)).transpose()?;
    let chan = CmChannel::new()?;
    let mut ids = Vec::new();
    for _ in 0..a.connections {
        ids.push(Some(chan.create_id(PortSpace::UDP)?));
    }
    println!("udaddy: connecting");
    for id in ids.iter().flatten() {
        id.resolve_addr(src.as_ref(), &dst, 2000)?;
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut pending: Vec<(CmId, Res)> = Vec::new();
    while nodes.len() < a.connections as usize {
        let ev = next_event(&chan, Some(a.timeout), "the connections")?;
        match ev.kind {
            EventType::ADDR_RESOLVED => {
                let id = ids.iter().flatten().find(|i| i.uid() == ev.uid);
                if let Some(id) = id {
                    if let Some(t) = a.tos {
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
                    let res = init_node(a, &id)?;
                    id.connect(&ConnParam::default())?;
                    pending.push((id, res));
                }
            }
            EventType::ESTABLISHED => {
                if let Some(p) = pending.iter().position(|(id, _)| id.uid() == ev.uid) {
                    let (id, res) = pending.remove(p);
                    let ah = res
                        .pd
                        .create_ah(&ud_ah_attr(&ev.ud))
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
    if a.count > 0 {
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
        expected: "ESTABLISHED",
        got: ev.name(),
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
    let src = match a.bind.as_deref() {
        Some(b) => get_addr(b, PORT)?,
        None => any,
    };
    listen
        .bind(&src)
        .map_err(|e| invalid(format!("bind address failed: {e}")))?;
    listen.listen(0)?;
    let mut nodes: Vec<Node> = Vec::new();
    while nodes.len() < a.connections as usize {
        let limit = (!nodes.is_empty()).then_some(a.timeout);
        let ev = next_event(&chan, limit, "the connections")?;
        if ev.kind != EventType::CONNECT_REQUEST {
            continue;
        }
        let Some(id) = ev.request else { continue };
        let res = init_node(a, &id)?;
        id.accept(&ConnParam::default())?;
        nodes.push(Node {
            id,
            res,
            dest: None,
        });
    }
    if a.count > 0 {
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

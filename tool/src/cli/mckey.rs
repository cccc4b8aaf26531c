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

use super::wait::{parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::cm::{ud_ah_attr, CmChannel, CmId, EventType, JoinFlags, PortSpace};
use rverbs::{
    Access, Ah, Cq, Error, Mr, Pd, Qp, QpCaps, QpInit, QpType, RecvWr, Result, SendOp, SendWr, Wc,
    WcOpcode,
};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of the GRH at the head of every UD receive.
const GRH_LEN: u32 = 40;

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

fn invalid(what: impl Into<String>) -> Error {
    Error::InvalidArgument { what: what.into() }
}

/// `getaddrinfo(host)`: an address or a host name.
fn get_addr(host: &str) -> Result<SocketAddr> {
    (host, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::Io {
            what: format!("getaddrinfo failed - invalid hostname or IP address {host}"),
            source: std::io::Error::other("no address"),
        })
}

/// One id and its verbs objects.
struct Node {
    id: CmId,
    res: Option<Res>,
    /// Where to send, from the JOIN event: AH, QPN, Q_Key.
    dest: Option<(Ah, u32, u32)>,
}

struct Res {
    cq: Cq,
    qp: Qp,
    mr: Mr,
    pd: Pd,
}

pub fn mckey(a: &MckeyArgs) -> Result<ExitCode> {
    println!(
        "mckey: starting {}",
        if a.sender { "client" } else { "server" }
    );
    let status = match run(a) {
        Ok(()) => 0,
        Err(e) => {
            println!("mckey: {e}");
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

fn run(a: &MckeyArgs) -> Result<()> {
    if a.connections == 0 {
        return Err(invalid("-c 0: at least one id must join"));
    }
    let src = a.bind.as_deref().map(get_addr).transpose()?;
    let dst = get_addr(&a.mcast)?;
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
                n.res = Some(setup(a, &n.id)?);
                let flags = if a.send_only {
                    JoinFlags::SendOnlyFullMember
                } else {
                    JoinFlags::FullMember
                };
                n.id.join_multicast_ex(dst, flags)
                    .map_err(|e| invalid(format!("failure joining: {e}")))?;
            }
            EventType::MULTICAST_JOIN => {
                let av = ud_ah_attr(&ev.ud);
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
                    expected: "MULTICAST_JOIN",
                    got: ev.name(),
                    status: ev.status,
                    private_data: Vec::new(),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// The id's PD, CQ, UD QP and buffer; a receiver's receives posted.
fn setup(a: &MckeyArgs, id: &CmId) -> Result<Res> {
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
    let qp = id.create_qp(
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
    let mut res = Res { cq, qp, mr, pd };
    if !a.sender && a.count > 0 {
        let s = [res.mr.slice(0, a.size + GRH_LEN)?];
        for _ in 0..a.count {
            res.qp.post_recv(&[RecvWr { wr_id: 1, sges: &s }])?;
        }
    }
    Ok(res)
}

/// Posts `-C` sends to the group, the last one signaled, and waits for it.
fn send(a: &MckeyArgs, n: &mut Node) -> Result<()> {
    let (Some(res), Some((ah, qpn, qkey))) = (&mut n.res, &n.dest) else {
        return Ok(());
    };
    // A pattern rather than the C tool's uninitialised buffer.
    let data: Vec<u8> = (0..a.size).map(|i| i as u8).collect();
    res.mr.write(0, &data)?;
    let s = [res.mr.slice(0, a.size)?];
    let me = res.qp.qpn();
    for i in 0..a.count {
        let wr = SendWr::new(u64::from(i), SendOp::SendWithImm(me), &s)
            .signaled(i + 1 == a.count)
            .to(ah, *qpn, *qkey);
        res.qp.post_send(&[wr])?;
    }
    let w = next_wc(a, &mut res.cq, "the last send to complete")?;
    if !w.is_ok() {
        return Err(invalid(format!("send failed: status {}", w.status)));
    }
    Ok(())
}

/// Waits for `-C` datagrams, each checked.
fn receive(a: &MckeyArgs, n: &mut Node) -> Result<()> {
    let Some(res) = &mut n.res else {
        return Ok(());
    };
    for i in 0..a.count {
        let w = next_wc(
            a,
            &mut res.cq,
            &format!("datagram {} of {}", i + 1, a.count),
        )?;
        if !w.is_ok() || w.opcode != WcOpcode::RECV {
            return Err(invalid(format!(
                "datagram {}: status {}, opcode {:?}",
                i + 1,
                w.status,
                w.opcode
            )));
        }
        if w.byte_len != a.size + GRH_LEN || w.imm_data != Some(w.src_qp) {
            return Err(invalid(format!(
                "datagram {}: {} bytes (want {} with the GRH), immediate {:?} from QP {:#x} (the sender's QPN)",
                i + 1,
                w.byte_len,
                a.size + GRH_LEN,
                w.imm_data,
                w.src_qp
            )));
        }
    }
    Ok(())
}

fn next_wc(a: &MckeyArgs, cq: &mut Cq, what: &str) -> Result<Wc> {
    let mut wc = [Wc::default()];
    let start = Instant::now();
    loop {
        if cq.poll(&mut wc) == 1 {
            return Ok(wc[0]);
        }
        if start.elapsed() > a.timeout.duration() {
            return Err(a.timeout.expired(what));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
}

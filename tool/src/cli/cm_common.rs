//! What `cmatose`, `udaddy` and `mckey` share: rdma-core's three rdma_cm
//! examples print the same frame ("starting …", "test complete", "return
//! status"), parse addresses and numbers alike, and the two datagram tools
//! build the same UD resources and check what arrives the same way. One
//! copy here keeps their behaviour from drifting apart.

use super::wait::{parse_timeout, Timeout, DEFAULT_SECS};
use clap::Args;
use rverbs::cm::{CmChannel, CmEvent, CmId, EventType};
use rverbs::{
    Access, Ah, Cq, Error, Mr, Pd, Qp, QpCaps, QpInit, QpType, RecvWr, Result, SendOp, SendWr, Wc,
    WcOpcode,
};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of the GRH at the head of every UD receive.
pub const GRH_LEN: u32 = 40;

/// The options `cmatose` and `udaddy` share, spelled as rdma-core's tools
/// spell them.
#[derive(Args)]
pub struct CmToolArgs {
    /// Connect to this server (none: be the server).
    #[arg(short = 's', value_name = "server_address")]
    pub server: Option<String>,
    /// Bind to this local address.
    #[arg(short = 'b', value_name = "bind_address")]
    pub bind: Option<String>,
    /// Address format: name, ip or ipv6 (all resolved alike).
    #[arg(short = 'f', value_name = "address_format")]
    pub format: Option<String>,
    /// Port space: tcp for cmatose, udp for udaddy (the only ones offered).
    #[arg(short = 'P', value_name = "port_space")]
    pub port_space: Option<String>,
    /// Connections.
    #[arg(short = 'c', value_name = "connections", default_value_t = 1)]
    pub connections: u32,
    /// Messages each way on each connection.
    #[arg(short = 'C', value_name = "message_count", default_value_t = 10)]
    pub count: u32,
    /// Bytes per message (udaddy: at most the port's active MTU).
    #[arg(short = 'S', value_name = "message_size", default_value_t = 100)]
    pub size: u32,
    /// Type of service of the connections (RDMA_OPTION_ID_TOS).
    #[arg(short = 't', value_name = "type_of_service", value_parser = parse_u8)]
    pub tos: Option<u8>,
    /// Give up after this many seconds without progress.
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    pub timeout: Timeout,
}

/// Runs one tool's body inside the frame the C examples print, so scripts
/// that read theirs read ours: the status is 0 or -1, the exit code follows.
pub fn framed(tool: &str, role: &str, body: impl FnOnce() -> Result<()>) -> Result<ExitCode> {
    println!("{tool}: starting {role}");
    let status = match body() {
        Ok(()) => 0,
        Err(e) => {
            println!("{tool}: {e}");
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

/// `-P`: the one port space the tool speaks (`tcp` or `udp`), refused by
/// name otherwise rather than silently ignored.
pub fn check_port_space(p: Option<&str>, want: &str) -> Result<()> {
    match p {
        Some(p) if !p.to_ascii_lowercase().starts_with(want) => Err(invalid(format!(
            "-P {p}: only the {want} port space is supported"
        ))),
        _ => Ok(()),
    }
}

/// `strtoul(optarg, NULL, 0)` into a u8: decimal, `0x` hex or `0` octal.
pub fn parse_u8(s: &str) -> std::result::Result<u8, String> {
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u8::from_str_radix(h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        u8::from_str_radix(&s[1..], 8)
    } else {
        s.parse()
    };
    r.map_err(|_| format!("{s:?} is not a number from 0 to 255"))
}

pub fn invalid(what: impl Into<String>) -> Error {
    Error::InvalidArgument { what: what.into() }
}

/// `getaddrinfo(host, port)`: an address or a host name.
pub fn get_addr(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::Io {
            what: format!("getaddrinfo failed - invalid hostname or IP address {host}"),
            source: std::io::Error::other("no address"),
        })
}

/// The next event, at most the timeout (`None`: no limit, for a server
/// waiting for its first client as the C tools do).
pub fn next_event(chan: &Arc<CmChannel>, t: Option<Timeout>, what: &str) -> Result<CmEvent> {
    if let Some(t) = t {
        if !chan.poll(t.millis())? {
            return Err(t.expired(what));
        }
    }
    chan.get_event()
}

/// The next completion, polled (with a short sleep, these are examples,
/// not benchmarks) for at most the timeout.
pub fn next_wc(t: Timeout, cq: &mut Cq, what: &str) -> Result<Wc> {
    let mut wc = [Wc::default()];
    let start = Instant::now();
    loop {
        if cq.poll(&mut wc) == 1 {
            return Ok(wc[0]);
        }
        if start.elapsed() > t.duration() {
            return Err(t.expired(what));
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// A datagram tool's resources on one id: one CQ for both queues, a UD
/// QP, and one buffer of a datagram plus its GRH.
pub struct UdRes {
    pub cq: Cq,
    pub qp: Qp,
    pub mr: Mr,
    pub pd: Pd,
}

/// PD, CQ, UD QP and buffer for `count` datagrams of `size` bytes; with
/// `receive`, all `count` receives posted. A size over the port's active
/// MTU is refused here, as the C tools do, rather than failing each send.
pub fn ud_res(id: &CmId, count: u32, size: u32, receive: bool) -> Result<UdRes> {
    let ctx = id.context()?;
    let port = ctx.query_port(id.port_num()?)?;
    let mtu = rverbs::Mtu::from_raw(port.active_mtu).map_or(0, rverbs::Mtu::bytes);
    if count > 0 && size > mtu {
        return Err(invalid(format!(
            "message_size {size} is larger than active mtu {mtu}"
        )));
    }
    let pd = ctx.alloc_pd()?;
    let depth = count.max(1);
    let cq = ctx.create_cq(depth * 2, None, 0)?;
    let qp = id.create_qp(
        &pd,
        &QpInit {
            qp_type: QpType::Ud,
            send_cq: &cq,
            recv_cq: &cq,
            caps: one_sge_caps(depth, depth),
            sq_sig_all: false,
            srq: None,
        },
    )?;
    let mr = pd.alloc_mr((size + GRH_LEN) as usize, Access::LOCAL_WRITE)?;
    let mut res = UdRes { cq, qp, mr, pd };
    if receive && count > 0 {
        let s = [res.mr.slice(0, size + GRH_LEN)?];
        for _ in 0..count {
            res.qp.post_recv(&[RecvWr { wr_id: 1, sges: &s }])?;
        }
    }
    Ok(res)
}

/// Sends `count` datagrams of `size` bytes (a byte pattern rather than the
/// C tools' uninitialised buffer), each carrying the sender's QPN as
/// immediate data, the last one signaled; waits for that one, so no
/// datagram is still queued when the caller leaves or disconnects.
pub fn send_datagrams(
    t: Timeout,
    r: &mut UdRes,
    (ah, qpn, qkey): (&Ah, u32, u32),
    count: u32,
    size: u32,
) -> Result<()> {
    let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
    r.mr.write(0, &data)?;
    let s = [r.mr.slice(0, size)?];
    let me = r.qp.qpn();
    for i in 0..count {
        let wr = SendWr::new(u64::from(i), SendOp::SendWithImm(me), &s)
            .signaled(i + 1 == count)
            .to(ah, qpn, qkey);
        r.qp.post_send(&[wr])?;
    }
    let w = next_wc(t, &mut r.cq, "the last send to complete")?;
    if !w.is_ok() || w.opcode != WcOpcode::SEND {
        return Err(invalid(format!(
            "send failed: status {}, opcode {:?}",
            w.status, w.opcode
        )));
    }
    Ok(())
}

/// Waits for `count` datagrams, each checked (status, length with the
/// GRH, immediate data naming the sending QP, which the C tools do not
/// check); returns the sender's QPN. `on` names where, for the messages.
pub fn receive_datagrams(t: Timeout, cq: &mut Cq, count: u32, size: u32, on: &str) -> Result<u32> {
    let mut from = 0;
    for k in 0..count {
        let what = format!("datagram {} of {count}{on}", k + 1);
        let w = next_wc(t, cq, &what)?;
        if !w.is_ok() || w.opcode != WcOpcode::RECV {
            return Err(invalid(format!(
                "{what}: status {}, opcode {:?}",
                w.status, w.opcode
            )));
        }
        if w.byte_len != size + GRH_LEN || w.imm_data() != Some(w.src_qp) {
            return Err(invalid(format!(
                "{what}: {} bytes (want {} with the GRH), immediate {:?} from QP {:#x} (the sender's QPN)",
                w.byte_len,
                size + GRH_LEN,
                w.imm_data(),
                w.src_qp
            )));
        }
        from = w.src_qp;
    }
    Ok(from)
}

/// The caps of the tools' RC and UD QPs: `send` and `recv` requests of
/// one SGE each, nothing inline.
pub(crate) fn one_sge_caps(send: u32, recv: u32) -> QpCaps {
    QpCaps {
        max_send_wr: send,
        max_recv_wr: recv,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    }
}

/// The next event of `chan`, which must be `want`, within `t` (`None`:
/// without limit, as a server waits for its client).
pub(crate) fn expect_event(
    chan: &Arc<CmChannel>,
    want: EventType,
    t: Option<Timeout>,
) -> Result<CmEvent> {
    if let Some(t) = t {
        if !chan.poll(t.millis())? {
            return Err(t.expired(want.name().unwrap_or("a connection event")));
        }
    }
    let ev = chan.get_event()?;
    if ev.kind != want {
        return Err(Error::CmEvent {
            expected: Some(want),
            got: ev.kind,
            other_id: false,
            status: ev.status,
            private_data: ev.conn.private_data.clone(),
        });
    }
    Ok(ev)
}

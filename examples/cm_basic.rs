//! The classic rdma_cm client/server of RDMA tutorials, on rverbs: the
//! server listens on a kernel-chosen port; each side, once connected, sends
//! one message and prints what it receives; the client then disconnects.
//! Same lines, same order as the well-known C original.
//!
//! ```text
//! cargo run --example cm_basic -- server          # listening on port N.
//! cargo run --example cm_basic -- client ADDR N
//! ```
//! (`rverbs cm-server` and `rverbs cm-client ADDR PORT` run the same code.)

use rverbs::cm::{CmChannel, CmId, ConnParam, EventType, PortSpace};
use rverbs::{
    Access, CompChannel, Cq, Error, Mr, Qp, QpCaps, QpInit, QpType, RecvWr, Result, SendOp, SendWr,
    Wc, WcOpcode, WcStatus,
};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;

const BUFFER_SIZE: usize = 1024;
const TIMEOUT_MS: u32 = 500;

/// One connection: its id, QP and buffers, and the thread that reports its
/// completions.
struct Connection {
    id: CmId,
    qp: Qp,
    send_mr: Mr,
    poller: Option<JoinHandle<()>>,
}

/// The text in a buffer up to its first NUL, as C's `%s` prints it.
fn c_str(mr: &Mr) -> String {
    let mut buf = vec![0u8; mr.len()];
    // A buffer we registered ourselves: a read can only fail on bounds.
    let _ = mr.read(0, &mut buf);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Prints each completion as the original does; stops after `want` of
/// them, or at the first flushed one (the connection went away).
fn poll_completions(chan: CompChannel, mut cq: Cq, recv_mr: Arc<Mr>, want: usize) {
    let mut seen = 0;
    let mut wcs = [Wc::default(); 4];
    while seen < want {
        let mut n = cq.poll(&mut wcs);
        if n == 0 {
            // Arm, then look again: a completion may have landed before
            // the CQ was armed; if not, sleep until the channel fires.
            if cq.req_notify(false).is_err() {
                return;
            }
            n = cq.poll(&mut wcs);
            if n == 0 {
                if chan.get_event().is_err() {
                    return;
                }
                continue;
            }
        }
        for wc in &wcs[..n] {
            if wc.status == WcStatus::WR_FLUSH_ERR {
                return;
            }
            if wc.status != WcStatus::SUCCESS {
                eprintln!("on_completion: status is not IBV_WC_SUCCESS.");
                std::process::exit(1);
            }
            if wc.opcode == WcOpcode::RECV {
                println!("received message: {}", c_str(&recv_mr));
            } else if wc.opcode == WcOpcode::SEND {
                println!("send completed successfully.");
            }
            seen += 1;
        }
    }
}

/// PD, completion channel, CQ, QP and the two 1024-byte buffers of a
/// connection; posts the receive and starts the completion thread.
fn build_connection(id: CmId, want: usize) -> Result<Connection> {
    let ctx = id.context()?;
    let pd = ctx.alloc_pd()?;
    let chan = ctx.create_comp_channel()?;
    // Room for the QP's 10 sends and 10 receives (the C original's CQ of 10
    // could overrun; rverbs refuses such a QP).
    let mut cq = ctx.create_cq(20, Some(&chan), 0)?;
    cq.req_notify(false)?;
    let caps = QpCaps {
        max_send_wr: 10,
        max_recv_wr: 10,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut qp = id.create_qp(
        &pd,
        &QpInit {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            caps,
            sq_sig_all: false,
            srq: None,
        },
    )?;
    let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let send_mr = pd.alloc_mr(BUFFER_SIZE, Access::empty())?;
    let recv_mr = Arc::new(pd.alloc_mr(BUFFER_SIZE, access)?);
    qp.post_recv(&[RecvWr {
        wr_id: id.uid(),
        sges: &[recv_mr.all()?],
    }])?;
    let poller = std::thread::spawn(move || poll_completions(chan, cq, recv_mr, want));
    Ok(Connection {
        id,
        qp,
        send_mr,
        poller: Some(poller),
    })
}

impl Connection {
    /// On ESTABLISHED: the message, as a C string, in one signaled send.
    fn send_message(&mut self, side: &str) -> Result<()> {
        let msg = format!("message from {side} side with pid {}\0", std::process::id());
        self.send_mr.write(0, msg.as_bytes())?;
        println!("connected. posting send...");
        let sge = [self.send_mr.slice(0, msg.len() as u32)?];
        let mut wr = SendWr::new(self.id.uid(), SendOp::Send, &sge);
        wr.signaled = true;
        self.qp.post_send(std::slice::from_ref(&wr))
    }
}

fn unexpected(ev: &rverbs::cm::CmEvent) -> Error {
    Error::CmEvent {
        expected: None,
        got: ev.kind,
        other_id: false,
        status: ev.status,
        private_data: ev.conn.private_data.clone(),
    }
}

/// `rverbs cm-server`: listen on any address, on `port` (0: chosen by the
/// kernel, as the original does); serve connections until killed.
pub fn server(port: u16) -> Result<()> {
    let chan = CmChannel::new()?;
    let listener = chan.create_id(PortSpace::TCP)?;
    let any = SocketAddr::from(([0, 0, 0, 0], port));
    listener.bind(&any)?;
    listener.listen(10)?;
    println!("listening on port {}.", listener.local_addr()?.port());
    let mut conns: HashMap<u64, Connection> = HashMap::new();
    loop {
        let ev = chan.get_event()?;
        match ev.kind {
            EventType::CONNECT_REQUEST => {
                println!("received connection request.");
                let id = ev
                    .request
                    .ok_or_else(|| own_error("CONNECT_REQUEST without a new id".into()))?;
                // The server's thread sees its receive and its send.
                let conn = build_connection(id, 2)?;
                conn.id.accept(&ConnParam::default())?;
                conns.insert(conn.id.uid(), conn);
            }
            EventType::ESTABLISHED => {
                if let Some(c) = conns.get_mut(&ev.uid) {
                    c.send_message("passive/server")?;
                }
            }
            EventType::DISCONNECTED => {
                println!("peer disconnected.");
                if let Some(mut c) = conns.remove(&ev.uid) {
                    if let Some(t) = c.poller.take() {
                        let _ = t.join();
                    }
                }
            }
            _ => return Err(unexpected(&ev)),
        }
    }
}

/// An error of this program's own (a bad address, a malformed event).
fn own_error(what: String) -> Error {
    Error::InvalidArgument { what }
}

/// `rverbs cm-client ADDR PORT`: connect, exchange one message each way,
/// disconnect.
pub fn client(host: &str, port: u16) -> Result<()> {
    let dst = (host, port)
        .to_socket_addrs()
        .map_err(|e| own_error(format!("{host}: {e}")))?
        .next()
        .ok_or_else(|| own_error(format!("{host}: no address")))?;
    let chan = CmChannel::new()?;
    let id = chan.create_id(PortSpace::TCP)?;
    id.resolve_addr(None, &dst, TIMEOUT_MS)?;
    let mut conn: Option<Connection> = None;
    let mut id = Some(id);
    loop {
        let ev = chan.get_event()?;
        match ev.kind {
            EventType::ADDR_RESOLVED => {
                println!("address resolved.");
                let id = id.take().ok_or_else(|| unexpected(&ev))?;
                // The client's thread sees its receive and its send.
                let c = build_connection(id, 2)?;
                c.id.resolve_route(TIMEOUT_MS)?;
                conn = Some(c);
            }
            EventType::ROUTE_RESOLVED => {
                println!("route resolved.");
                if let Some(c) = &conn {
                    c.id.connect(&ConnParam::default())?;
                }
            }
            EventType::ESTABLISHED => {
                if let Some(c) = conn.as_mut() {
                    c.send_message("active/client")?;
                    // After both completions, disconnect.
                    if let Some(t) = c.poller.take() {
                        let _ = t.join();
                    }
                    c.id.disconnect()?;
                }
            }
            EventType::DISCONNECTED => {
                println!("disconnected.");
                return Ok(());
            }
            _ => return Err(unexpected(&ev)),
        }
    }
}

#[allow(dead_code)] // the `rverbs` tool includes this file for its cm-* commands
fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let r = match args.get(1).map(String::as_str) {
        Some("server") => server(0),
        Some("client") if args.len() == 4 => match args[3].parse() {
            Ok(port) => client(&args[2], port),
            Err(_) => {
                eprintln!("usage: cm_basic client <server-address> <server-port>");
                return std::process::ExitCode::FAILURE;
            }
        },
        _ => {
            eprintln!("usage: cm_basic server | cm_basic client <server-address> <server-port>");
            return std::process::ExitCode::FAILURE;
        }
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

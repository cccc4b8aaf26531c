//! The TCP exchange of rdma-core's pingpong examples: the client sends its
//! messages, the server reads them, brings its QPs up, sends its own, and
//! the client ends with `"done"`. The RC, UC and UD tools send one message
//! each way; `ibv_srq_pingpong` always sends its whole `MAX_QP` (256)
//! table, the unused entries zero, so [`Exchange::count`] is 256 for it.

use super::super::wait::Timeout;
use rverbs::{Error, Result};
use rverbs_tool::wire::pingpong::{Dest, MSG_LEN};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

/// `MAX_QP` of `ibv_srq_pingpong`: the number of messages it exchanges.
pub const SRQ_MESSAGES: usize = 256;

fn io(what: &str, e: std::io::Error) -> Error {
    Error::Io {
        what: what.to_string(),
        source: e,
    }
}

/// Reads one peer message, decoded; a malformed one is an error naming
/// what was wrong.
fn read_dest(s: &mut TcpStream, t: Timeout, i: usize, of: usize) -> Result<Dest> {
    // The C tools' words; the index only where there is more than one.
    let what = if of > 1 {
        format!("Couldn't read remote address [{i}]")
    } else {
        "Couldn't read remote address".to_string()
    };
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg).map_err(|e| t.tcp_error(&what, e))?;
    Dest::decode(&msg).map_err(|e| {
        io(
            &what,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })
}

fn write_dests(s: &mut TcpStream, t: Timeout, my: &[Dest]) -> Result<()> {
    // One write for the whole table: the peer reads it message by message.
    let bytes: Vec<u8> = my.iter().flat_map(|d| d.encode()).collect();
    s.write_all(&bytes)
        .map_err(|e| t.tcp_error("Couldn't send local address", e))
}

/// The client's side: send `my` (all of it), read as many back, say done.
pub fn client(host: &str, port: u16, my: &[Dest], t: Timeout) -> Result<Vec<Dest>> {
    let mut s = t
        .connect(host, port)
        .map_err(|e| t.tcp_error(&format!("Couldn't connect to {host}:{port}"), e))?;
    write_dests(&mut s, t, my)?;
    let rem = (0..my.len())
        .map(|i| read_dest(&mut s, t, i, my.len()))
        .collect::<Result<Vec<_>>>()?;
    s.write_all(b"done\0")
        .map_err(|e| t.tcp_error("Couldn't write done", e))?;
    Ok(rem)
}

/// The server's side: wait (without limit) for a client, read its table,
/// `connect` to it, then send `my`.
pub fn server(
    port: u16,
    my: &[Dest],
    t: Timeout,
    connect: impl FnOnce(&[Dest]) -> Result<()>,
) -> Result<Vec<Dest>> {
    // Dual-stack like getaddrinfo(AI_PASSIVE): IPv6 any also takes IPv4.
    let l = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| io(&format!("Couldn't listen to port {port}"), e))?;
    // Waiting for a client has no limit (a server waits for its client);
    // once one connected, every read and write on the exchange has.
    let (mut s, _) = l.accept().map_err(|e| io("accept() failed", e))?;
    drop(l);
    t.bound(&s)?;
    let rem = (0..my.len())
        .map(|i| read_dest(&mut s, t, i, my.len()))
        .collect::<Result<Vec<_>>>()?;
    connect(&rem)?;
    write_dests(&mut s, t, my)?;
    // The client's "done": read whatever it sends (the C tools read a
    // message's worth and ignore it); at most the timeout.
    let mut done = [0u8; MSG_LEN];
    let _ = s.read(&mut done);
    Ok(rem)
}

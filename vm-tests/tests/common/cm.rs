//! What the rdma_cm tests share: the test address with a port, the next
//! event of a channel, bounded; and what rdma-core's rdma_cm tools (and
//! ours in their place) print when they succeed.

use super::show;
use rverbs::cm::{CmChannel, CmEvent};
use std::net::SocketAddr;
use std::process::Output;
use std::sync::Arc;

/// The test device's IPv4 address with `port` (0: the kernel picks one).
pub fn addr(port: u16) -> SocketAddr {
    format!("{}:{port}", super::env().addr)
        .parse()
        .expect("the test address is an IPv4 address")
}

/// The next event on `chan`; panics if none comes within 10 s.
pub fn next(chan: &Arc<CmChannel>) -> CmEvent {
    assert!(chan.poll(10_000).unwrap(), "no rdma_cm event within 10 s");
    chan.get_event().unwrap()
}

/// What `ucmatose` (rdma-core's, or `rverbs cmatose`) prints on success as
/// the server, in this order ([`assert_lines`]).
pub const CMATOSE_SERVER: &[&str] = &[
    "cmatose: starting server",
    "initiating data transfers",
    "completing sends",
    "receiving data transfers",
    "data transfers complete",
    "cmatose: disconnecting",
    "disconnected",
    "test complete",
    "return status 0",
];

/// What `ucmatose` prints on success as the client, in this order.
pub const CMATOSE_CLIENT: &[&str] = &[
    "cmatose: starting client",
    "cmatose: connecting",
    "receiving data transfers",
    "sending replies",
    "data transfers complete",
    "test complete",
    "return status 0",
];

/// What `udaddy` (rdma-core's, or `rverbs udaddy`) prints on success as
/// the server, in this order.
pub const UDADDY_SERVER: &[&str] = &[
    "udaddy: starting server",
    "receiving data transfers",
    "sending replies",
    "data transfers complete",
    "test complete",
    "return status 0",
];

/// What `udaddy` prints on success as the client, in this order.
pub const UDADDY_CLIENT: &[&str] = &[
    "udaddy: starting client",
    "udaddy: connecting",
    "initiating data transfers",
    "receiving data transfers",
    "data transfers complete",
    "test complete",
    "return status 0",
];

/// `who` (a process of a test) succeeded and printed `lines`, each a whole
/// line, in this order (other lines may come between them).
pub fn assert_lines(who: &str, out: &Output, lines: &[&str]) {
    assert!(out.status.success(), "{who}: {}", show(out));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut at = text.lines();
    for l in lines {
        assert!(
            at.any(|t| t == *l),
            "{who} lacks {l:?} (in order): {}",
            show(out)
        );
    }
}

/// An `rping -c -C 100 -V -v` client (rdma-core's or `rverbs rping`)
/// succeeded and printed the 100 pings it validated, `size` bytes each,
/// in order.
pub fn assert_rping_client(what: &str, out: &Output, size: usize) {
    assert!(out.status.success(), "{what}: {}", show(out));
    let text = String::from_utf8_lossy(&out.stdout);
    let pings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("ping data: "))
        .collect();
    assert_eq!(pings.len(), 100, "{what}: {text}");
    assert!(
        pings[0].starts_with("ping data: rdma-ping-0: ABCDEFG"),
        "{what}"
    );
    assert!(pings[99].starts_with("ping data: rdma-ping-99: "), "{what}");
    assert_eq!(pings[0].len(), "ping data: ".len() + size - 1, "{what}");
}

//! What the rdma_cm tests share: the test address with a port, and the
//! next event of a channel, bounded.

use rverbs::cm::{CmChannel, CmEvent};
use std::net::SocketAddr;
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

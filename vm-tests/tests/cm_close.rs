//! rdma_cm device contexts close with their last user: after every id,
//! channel and object is dropped, the process holds no uverbs fd, so the
//! device can be deleted while the process lives on. Alone in its test
//! binary, so that no other test's fds are counted.

mod common;

use rverbs::cm::{CmChannel, PortSpace};
use std::net::SocketAddr;

/// Open fds of this process that are uverbs character devices.
fn uverbs_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|p| p.to_string_lossy().starts_with("/dev/infiniband/uverbs"))
        .count()
}

#[test]
fn cm_contexts_close_with_their_last_user() {
    assert_eq!(uverbs_fds(), 0, "no context open before the test");
    let addr: SocketAddr = format!("{}:0", common::env().addr).parse().unwrap();
    for round in 0..2 {
        let chan = CmChannel::new().unwrap();
        let id = chan.create_id(PortSpace::TCP).unwrap();
        id.bind(&addr).unwrap();
        let ctx = id.context().unwrap();
        let pd = ctx.alloc_pd().unwrap();
        assert_eq!(uverbs_fds(), 1, "round {round}: one shared context");
        // A second id on the same device shares it.
        let id2 = chan.create_id(PortSpace::TCP).unwrap();
        id2.bind(&addr).unwrap();
        let ctx2 = id2.context().unwrap();
        assert_eq!(ctx2.device().name(), ctx.device().name());
        assert_eq!(uverbs_fds(), 1, "round {round}: still one");
        drop((pd, ctx, ctx2, id, id2, chan));
        assert_eq!(uverbs_fds(), 0, "round {round}: closed with its last user");
    }
}

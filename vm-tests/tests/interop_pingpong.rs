//! Interop: `rverbs pingpong` against rdma-core's `ibv_rc_pingpong`, in both
//! roles, over rxe0 — the same TCP exchange and the same traffic.

mod common;

use common::{env, pingpong_args, retry_until_ok, rverbs_bin, show, Background};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

static PORT: AtomicU16 = AtomicU16::new(18700);

/// `ibv_rc_pingpong`, or `rverbs pingpong`.
fn tool(bin: &str) -> Command {
    let mut c = Command::new(bin);
    if bin == rverbs_bin() {
        c.arg("pingpong");
    }
    c
}

/// Runs `server_bin` as the server and `client_bin` as the client.
fn run(server_bin: &str, client_bin: &str, size: u32, events: bool) {
    let port = PORT.fetch_add(1, Ordering::Relaxed);
    let a = pingpong_args(1000, size, port, events);
    let addr = env().addr;
    let server = Background::spawn(tool(server_bin).args(&a));
    let client = retry_until_ok(Duration::from_secs(20), || {
        let mut c = tool(client_bin);
        c.args(&a).arg(&addr);
        c
    });
    let server = server.wait(Duration::from_secs(120));
    for (who, out) in [("client", &client), ("server", &server)] {
        assert!(
            out.status.success(),
            "{who} ({server_bin} serving {client_bin}, size {size}, events {events}): {}",
            show(out)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("1000 iters in"), "{who}: {}", show(out));
        assert!(
            text.contains(&format!("{} bytes in", size as u64 * 2000)),
            "{who}: {}",
            show(out)
        );
        assert!(
            text.contains("  local address:  LID 0x0000, QPN 0x"),
            "{who}: {}",
            show(out)
        );
        assert!(text.contains("GID ::ffff:"), "{who}: {}", show(out));
    }
}

#[test]
fn rverbs_client_with_rdma_core_server() {
    for size in [1, 4096, 65536] {
        for events in [false, true] {
            run("ibv_rc_pingpong", rverbs_bin(), size, events);
        }
    }
}

#[test]
fn rdma_core_client_with_rverbs_server() {
    for size in [1, 4096, 65536] {
        for events in [false, true] {
            run(rverbs_bin(), "ibv_rc_pingpong", size, events);
        }
    }
}

#[test]
fn validated_buffers_both_ways() {
    // -c: the client stamps its buffer, the server checks what arrived.
    for (server, client) in [
        (rverbs_bin(), "ibv_rc_pingpong"),
        ("ibv_rc_pingpong", rverbs_bin()),
    ] {
        let port = PORT.fetch_add(1, Ordering::Relaxed);
        let mut a = pingpong_args(1000, 8192, port, false);
        a.push("-c".into());
        let addr = env().addr;
        let s = Background::spawn(tool(server).args(&a));
        let c = retry_until_ok(Duration::from_secs(20), || {
            let mut c = tool(client);
            c.args(&a).arg(&addr);
            c
        });
        let s = s.wait(Duration::from_secs(120));
        for (who, out) in [("client", &c), ("server", &s)] {
            assert!(out.status.success(), "{who}: {}", show(out));
            assert!(
                !String::from_utf8_lossy(&out.stderr).contains("invalid data"),
                "{who}: {}",
                show(out)
            );
        }
    }
}

#[test]
fn rverbs_with_itself() {
    run(rverbs_bin(), rverbs_bin(), 4096, false);
}

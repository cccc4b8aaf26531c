//! Interop over rdma_cm: `rverbs cmatose` against rdma-core's `ucmatose`
//! and `rverbs udaddy` against `udaddy`, in both roles, with several
//! connections each, over rxe0.

mod common;

use common::cm::{assert_lines, CMATOSE_CLIENT, CMATOSE_SERVER, UDADDY_CLIENT, UDADDY_SERVER};
use common::{env, retry_until_ok, rverbs_bin, show, wait_cm_listening, Background};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

static PORT: AtomicU16 = AtomicU16::new(7600);

/// rdma-core's tool, or `rverbs <sub>`.
fn tool(bin: &str, sub: &str) -> Command {
    let mut c = Command::new(bin);
    if bin == rverbs_bin() {
        c.arg(sub);
    }
    c
}

fn cmatose_pair(server: &str, client: &str, extra: &[&str]) {
    let port = PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let addr = env().addr;
    let mut s = Background::spawn(
        tool(server, "cmatose")
            .args(["-b", &addr, "-p", &port])
            .args(extra),
    );
    wait_cm_listening(&mut s, "TCP", port.parse().unwrap());
    let c = retry_until_ok(Duration::from_secs(20), || {
        let mut c = tool(client, "cmatose");
        c.args(["-s", &addr, "-p", &port]).args(extra);
        c
    });
    let s = s.wait(Duration::from_secs(60));
    let ctx = format!("{server} serving {client} {extra:?}");
    assert_lines(&format!("server ({ctx})"), &s, CMATOSE_SERVER);
    assert_lines(&format!("client ({ctx})"), &c, CMATOSE_CLIENT);
}

#[test]
fn cmatose_both_roles() {
    let many = ["-c", "4", "-C", "20", "-S", "1000"];
    cmatose_pair("ucmatose", rverbs_bin(), &many);
    cmatose_pair(rverbs_bin(), "ucmatose", &many);
    // TOS and ACK timeout set through rdma_set_option; the ids migrate to
    // a new channel before disconnecting.
    let opts = ["-c", "2", "-t", "32", "-a", "14", "-m"];
    cmatose_pair("ucmatose", rverbs_bin(), &opts);
    cmatose_pair(rverbs_bin(), "ucmatose", &opts);
    cmatose_pair(rverbs_bin(), rverbs_bin(), &opts);
}

#[test]
fn cmatose_to_a_port_nobody_listens_on_is_rejected() {
    let out = tool(rverbs_bin(), "cmatose")
        .args(["-s", &env().addr, "-p", "7599"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8")
            && text.contains("return status -1"),
        "{}",
        show(&out)
    );
}

fn udaddy_pair(server: &str, client: &str, extra: &[&str]) {
    let addr = env().addr;
    let mut s = Background::spawn(tool(server, "udaddy").args(["-b", &addr]).args(extra));
    wait_cm_listening(&mut s, "UDP", 7174);
    let c = retry_until_ok(Duration::from_secs(20), || {
        let mut c = tool(client, "udaddy");
        c.args(["-s", &addr]).args(extra);
        c
    });
    let s = s.wait(Duration::from_secs(60));
    let ctx = format!("{server} serving {client} {extra:?}");
    assert_lines(&format!("server ({ctx})"), &s, UDADDY_SERVER);
    assert_lines(&format!("client ({ctx})"), &c, UDADDY_CLIENT);
}

/// udaddy's port is fixed (7174): one test runs every pair in turn.
#[test]
fn udaddy_both_roles() {
    let many = ["-c", "3", "-C", "20", "-S", "1000"];
    udaddy_pair("udaddy", rverbs_bin(), &many);
    udaddy_pair(rverbs_bin(), "udaddy", &many);
    udaddy_pair(rverbs_bin(), rverbs_bin(), &["-t", "32"]);
    // A datagram larger than the path MTU cannot work: refused up front.
    let out = tool(rverbs_bin(), "udaddy")
        .args(["-b", &env().addr, "-S", "4000"])
        .args(["-s", &env().addr])
        .output()
        .unwrap();
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stdout)
                .contains("message_size 4000 is larger than active mtu 1024"),
        "{}",
        show(&out)
    );
}

//! Interop: `rverbs pingpong --ud`, `--uc` and `--srq N` against rdma-core's
//! `ibv_ud_pingpong`, `ibv_uc_pingpong` and `ibv_srq_pingpong -q N`, in
//! both roles, over rxe0 — the same TCP exchange (256 messages each way for
//! the SRQ tool), the same traffic, and `-c` checking what arrived.

mod common;

use common::{env, pingpong_args, retry_until_ok, rverbs_bin, show, Background};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

static PORT: AtomicU16 = AtomicU16::new(18800);

const ITERS: u32 = 100;

/// The C tool for a mode, and our flags for it.
fn c_tool(mode: &[&str]) -> &'static str {
    match mode.first().copied() {
        Some("--ud") => "ibv_ud_pingpong",
        Some("--uc") => "ibv_uc_pingpong",
        _ => "ibv_srq_pingpong",
    }
}

/// `ibv_*_pingpong`, or `rverbs pingpong <mode flags>`.
fn tool(bin: &str, mode: &[&str]) -> Command {
    let mut c = Command::new(bin);
    if bin == rverbs_bin() {
        c.arg("pingpong").args(mode);
    } else if mode.first() == Some(&"-q") {
        // ibv_srq_pingpong's own -q N.
        c.args(mode);
    }
    c
}

/// Runs one pair and checks both ends: success, the iteration count, the
/// byte count, the address lines (one per QP), no `invalid data`.
fn run(server_bin: &str, client_bin: &str, mode: &[&str], size: u32, events: bool) {
    let port = PORT.fetch_add(1, Ordering::Relaxed);
    let mut a = pingpong_args(ITERS, size, port, events);
    a.push("-c".into());
    let addr = env().addr;
    let server = Background::spawn(tool(server_bin, mode).args(&a));
    let client = retry_until_ok(Duration::from_secs(20), || {
        let mut c = tool(client_bin, mode);
        c.args(&a).arg(&addr);
        c
    });
    let server = server.wait(Duration::from_secs(120));
    let qps = if mode[0] == "-q" {
        mode[1].parse().unwrap()
    } else {
        1
    };
    for (who, out) in [("client", &client), ("server", &server)] {
        let ctx = format!(
            "{who} ({server_bin} serving {client_bin}, {mode:?}, size {size}, events {events})"
        );
        assert!(out.status.success(), "{ctx}: {}", show(out));
        let text = String::from_utf8_lossy(&out.stdout);
        let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(!all.contains("invalid data"), "{ctx}: {}", show(out));
        assert!(
            text.contains(&format!("{ITERS} iters in")),
            "{ctx}: {}",
            show(out)
        );
        assert!(
            text.contains(&format!("{} bytes in", size as u64 * ITERS as u64 * 2)),
            "{ctx}: {}",
            show(out)
        );
        let local = text.matches("  local address:  LID 0x0000, QPN 0x").count();
        let remote = text.matches("  remote address: LID 0x0000, QPN 0x").count();
        assert_eq!((local, remote), (qps, qps), "{ctx}: {}", show(out));
        assert!(text.contains("GID ::ffff:"), "{ctx}: {}", show(out));
    }
}

fn both_roles(mode: &[&str], size: u32) {
    // Each role once: ours polling as the client, sleeping on completion
    // events as the server.
    let c = c_tool(mode);
    run(c, rverbs_bin(), mode, size, false);
    run(rverbs_bin(), c, mode, size, true);
}

#[test]
fn ud_both_roles() {
    both_roles(&["--ud"], 1024);
    // The smallest message, and ours with ours.
    run(rverbs_bin(), rverbs_bin(), &["--ud"], 1, false);
}

#[test]
fn uc_both_roles() {
    both_roles(&["--uc"], 4096);
    run(rverbs_bin(), rverbs_bin(), &["--uc"], 65536, false);
}

#[test]
fn srq_both_roles() {
    both_roles(&["-q", "4"], 4096);
    // ibv_srq_pingpong's default: 16 QPs.
    run("ibv_srq_pingpong", rverbs_bin(), &["-q", "16"], 2048, false);
    run(rverbs_bin(), rverbs_bin(), &["-q", "16"], 2048, false);
}

/// Values that cannot work are refused before any traffic, naming why.
#[test]
fn bad_values_are_refused() {
    let e = env();
    let cases: [(&[&str], &str); 4] = [
        // rxe's active MTU is 1024 at the default netdev MTU of 1500.
        (&["--ud", "-s", "4000"], "larger than port MTU"),
        (&["-q", "8", "-r", "4"], "too small for 8 QPs"),
        (&["-q", "256"], "number of QPs must be 1 to 255"),
        (&["--ud", "--uc"], "cannot be used with"),
    ];
    for (flags, why) in cases {
        let out = Command::new(rverbs_bin())
            .arg("pingpong")
            .args(["-d", &e.dev, "-g", &e.gid.to_string()])
            .args(flags)
            .arg("127.0.0.1")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{flags:?}: {}",
            show(&out)
        );
    }
}

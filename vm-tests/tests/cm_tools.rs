//! The rdma_cm programs: `rverbs cm-server`/`cm-client` print the classic
//! lines, and `rverbs rping` interoperates with rdma-core's `rping` in both
//! roles, over IPv4 and IPv6.

mod common;

use common::cm::assert_rping_client;
use common::{env, retry_until_ok, rverbs_bin, show, Background};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn cm_server_and_client_print_the_classic_lines_and_the_server_keeps_listening() {
    let e = env();
    let mut server = Command::new(rverbs_bin())
        .arg("cm-server")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cm-server");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let port: u16 = first
        .strip_prefix("listening on port ")
        .and_then(|r| r.strip_suffix('.'))
        .unwrap_or_else(|| panic!("{first:?}"))
        .parse()
        .unwrap();
    assert_ne!(port, 0);
    let guard = Background(Some(server));
    for round in 0..2 {
        let out = Command::new(rverbs_bin())
            .args(["cm-client", &e.addr, &port.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "round {round}: {}", show(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got[0], "address resolved.", "{text}");
        assert_eq!(got[1], "route resolved.", "{text}");
        // The client's ESTABLISHED (main thread) and the server's message
        // (completion thread) race: the server sends as soon as it sees the
        // RTU, so "received message" may come first. Only our own send must
        // follow "connected".
        let posted = got.iter().position(|l| *l == "connected. posting send...");
        let sent = got
            .iter()
            .position(|l| *l == "send completed successfully.");
        assert!(
            matches!((posted, sent), (Some(p), Some(s)) if p >= 2 && p < s),
            "{text}"
        );
        assert!(
            got.iter()
                .any(|l| l
                    .starts_with("received message: message from passive/server side with pid ")),
            "{text}"
        );
        assert_eq!(got.last(), Some(&"disconnected."), "{text}");
        // The server saw the same connection, and goes on listening.
        let mut seen = Vec::new();
        for l in lines.by_ref() {
            let l = l.unwrap();
            let done = l == "peer disconnected.";
            seen.push(l);
            if done {
                break;
            }
        }
        assert_eq!(seen[0], "received connection request.", "{seen:?}");
        assert!(
            seen.iter()
                .any(|l| l
                    .starts_with("received message: message from active/client side with pid ")),
            "{seen:?}"
        );
        assert!(
            seen.iter().any(|l| l == "send completed successfully."),
            "{seen:?}"
        );
        assert!(
            seen.iter().any(|l| l == "connected. posting send..."),
            "{seen:?}"
        );
    }
    drop(guard);
}

fn rping(bin: &str) -> Command {
    if bin == "rping" {
        Command::new("rping")
    } else {
        Command::new(rverbs_bin())
    }
}

fn args(bin: &str, rest: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    if bin != "rping" {
        v.push("rping".to_string());
    }
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

/// `-C 100 -V -v`: the client validates every ping; both print each.
fn rping_pair(server: &str, client: &str, addr: &str, port: u16, size: usize) {
    let port = port.to_string();
    let size_s = size.to_string();
    // The server prints its pings only for small sizes: 100 lines of 64 KiB
    // would fill the pipe nobody reads until it exits.
    let verbose = size_s.len() <= 3;
    let mut sargs = vec!["-s", "-a", addr, "-p", &port, "-S", &size_s];
    if verbose {
        sargs.push("-v");
    }
    let srv = Background::spawn(rping(server).args(args(server, &sargs)));
    let out = retry_until_ok(Duration::from_secs(20), || {
        let mut c = rping(client);
        c.args(args(
            client,
            &[
                "-c", "-a", addr, "-p", &port, "-S", &size_s, "-C", "100", "-V", "-v",
            ],
        ));
        c
    });
    let what = format!("{client} client -> {server} server, {size} B over {addr}");
    assert_rping_client(&what, &out, size);
    let s = srv.wait(Duration::from_secs(20));
    assert!(s.status.success(), "{what}: server: {}", show(&s));
    let stext = String::from_utf8_lossy(&s.stdout);
    if verbose {
        let n = stext
            .lines()
            .filter(|l| l.starts_with("server ping data: "))
            .count();
        assert_eq!(n, 100, "{what}: {stext}");
    }
}

#[test]
fn rping_interop_both_roles_64_bytes_and_64_kib() {
    let e = env();
    let mut port = 7300;
    for size in [64, 65535] {
        for (server, client) in [
            ("rping", rverbs_bin()),
            (rverbs_bin(), "rping"),
            (rverbs_bin(), rverbs_bin()),
        ] {
            rping_pair(server, client, &e.addr, port, size);
            port += 1;
        }
    }
}

#[test]
fn rping_over_ipv6_both_roles() {
    // A global IPv6 address on the rxe netdev (no DAD: usable at once);
    // rxe adds its GID by itself.
    let ip6 = "fd77::1";
    let st = Command::new("ip")
        .args([
            "-6",
            "addr",
            "replace",
            &format!("{ip6}/64"),
            "dev",
            "veth0",
            "nodad",
        ])
        .status()
        .expect("ip");
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(500));
    rping_pair("rping", rverbs_bin(), ip6, 7320, 64);
    rping_pair(rverbs_bin(), "rping", ip6, 7321, 64);
}

#[test]
fn rping_refuses_a_bad_size_and_a_missing_role() {
    let out = Command::new(rverbs_bin())
        .args(["rping", "-c", "-a", "10.77.0.1", "-S", "8"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Invalid size 8"),
        "{}",
        show(&out)
    );
    let out = Command::new(rverbs_bin())
        .args(["rping", "-a", "10.77.0.1"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", show(&out));
    // Nobody listens: the client reports the event and fails.
    let out = Command::new(rverbs_bin())
        .args(["rping", "-c", "-a", &env().addr, "-p", "7399", "-C", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RDMA_CM_EVENT_REJECTED") || err.contains("RDMA_CM_EVENT_UNREACHABLE"),
        "{err}"
    );
}

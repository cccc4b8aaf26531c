//! `rverbs perf` runs every test to completion in both modes and prints
//! perftest's report lines (speed itself is measured by `cargo xtask bench`,
//! not asserted here).

mod common;

use common::{env, rverbs_bin, show, Background};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

static PORT: AtomicU16 = AtomicU16::new(19300);

fn perf(test: &str, extra: &[&str]) -> String {
    let e = env();
    let port = PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let gid = e.gid.to_string();
    let mut args = vec![
        "perf", test, "-d", &e.dev, "-x", &gid, "-n", "200", "-p", &port,
    ];
    args.extend_from_slice(extra);
    let server = Background::spawn(Command::new(rverbs_bin()).args(&args));
    let client = Command::new(rverbs_bin())
        .args(&args)
        .arg(&e.addr)
        .output()
        .unwrap();
    let server = server.wait(Duration::from_secs(60));
    assert!(
        client.status.success(),
        "client {test} {extra:?}: {}",
        show(&client)
    );
    assert!(
        server.status.success(),
        "server {test} {extra:?}: {}",
        show(&server)
    );
    String::from_utf8_lossy(&client.stdout).into_owned()
}

#[test]
fn every_test_completes_and_reports() {
    for (test, size) in [
        ("send-lat", "64"),
        ("write-lat", "64"),
        ("read-lat", "4096"),
        ("atomic-lat", "8"),
        ("send-bw", "4096"),
        ("write-bw", "4096"),
        ("read-bw", "4096"),
        ("atomic-bw", "8"),
    ] {
        let out = perf(test, &["-s", size]);
        let header = if test.ends_with("lat") {
            "t_typical[usec]"
        } else {
            "BW average[MB/sec]"
        };
        assert!(out.contains(header), "{test}: {out}");
        let line = out
            .lines()
            .skip_while(|l| !l.contains("#bytes"))
            .nth(1)
            .unwrap_or("");
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols.first(), Some(&size), "{test}: {out}");
    }
}

#[test]
fn batched_doorbells_events_and_inline() {
    let out = perf("write-bw", &["-s", "64", "--batch", "8"]);
    assert!(out.contains("MsgRate[Mpps]"), "{out}");
    let out = perf("send-lat", &["-s", "64", "-e"]);
    assert!(out.contains("t_typical[usec]"), "{out}");
    let out = perf("write-bw", &["-s", "32", "-I", "64"]);
    assert!(out.contains("MsgRate[Mpps]"), "{out}");
}

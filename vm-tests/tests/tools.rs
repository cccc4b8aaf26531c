//! The `rverbs` tool's device commands agree with rdma-core's.

mod common;

use common::{rverbs_bin, show};
use std::process::Command;

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().expect("command starts");
    assert!(out.status.success(), "{:?}: {}", cmd, show(&out));
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn devinfo_prints_what_ibv_devinfo_prints() {
    let e = common::env();
    let ours = stdout(Command::new(rverbs_bin()).args(["devinfo", "-d", &e.dev]));
    let theirs = stdout(Command::new("ibv_devinfo").args(["-d", &e.dev]));
    assert_eq!(ours, theirs);
}

#[test]
fn verbose_devinfo_prints_what_ibv_devinfo_v_prints() {
    // Every line: the extended attributes (QUERY_DEVICE_EX), flag names,
    // port_cap_flags2 (ioctl QUERY_PORT) and the GID table (ioctl
    // QUERY_GID_TABLE).
    let e = common::env();
    let ours = stdout(Command::new(rverbs_bin()).args(["devinfo", "-v", "-d", &e.dev]));
    let theirs = stdout(Command::new("ibv_devinfo").args(["-v", "-d", &e.dev]));
    assert!(ours.lines().count() > 80, "too short: {ours}");
    assert_eq!(ours, theirs);
}

#[test]
fn devices_match_ibv_devices() {
    let ours = stdout(Command::new(rverbs_bin()).arg("devices"));
    let theirs = stdout(&mut Command::new("ibv_devices"));
    assert_eq!(ours, theirs);
}

#[test]
fn gids_show_the_ipv4_mapped_roce_v2_gid() {
    let e = common::env();
    let out = stdout(Command::new(rverbs_bin()).args(["gids", "-d", &e.dev]));
    let line = out
        .lines()
        .find(|l| l.contains(&e.addr))
        .unwrap_or_else(|| panic!("no GID for {}: {out}", e.addr));
    let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
    assert_eq!(cols[0], e.dev);
    assert_eq!(cols[2], e.gid.to_string());
    assert_eq!(cols[5], "v2");
    assert!(out.contains("n_gids_found="));
}

#[test]
fn selftest_passes_every_check_on_rxe() {
    let e = common::env();
    let out = stdout(Command::new(rverbs_bin()).args(["selftest", "-d", &e.dev]));
    let pass = out.lines().filter(|l| l.starts_with("PASS  ")).count();
    assert_eq!(pass, 5, "{out}");
    assert!(out.contains("5 of 5 checks passed"), "{out}");
    assert!(out.contains("driver rxe"), "{out}");
    let bad = Command::new(rverbs_bin())
        .args(["selftest", "-d", "nosuchdev"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("no RDMA device named nosuchdev"),
        "{}",
        show(&bad)
    );
}

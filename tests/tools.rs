//! The `rverbs` tool's device commands agree with rdma-core's.

mod common;

use common::show;
use std::process::Command;

const RVERBS: &str = env!("CARGO_BIN_EXE_rverbs");

fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().expect("command starts");
    assert!(out.status.success(), "{:?}: {}", cmd, show(&out));
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn devinfo_prints_what_ibv_devinfo_prints() {
    let e = common::env();
    let ours = stdout(Command::new(RVERBS).args(["devinfo", "-d", &e.dev]));
    let theirs = stdout(Command::new("ibv_devinfo").args(["-d", &e.dev]));
    assert_eq!(ours, theirs);
}

#[test]
fn verbose_devinfo_agrees_on_every_field_both_print() {
    let e = common::env();
    let ours = stdout(Command::new(RVERBS).args(["devinfo", "-v", "-d", &e.dev]));
    let theirs = stdout(Command::new("ibv_devinfo").args(["-v", "-d", &e.dev]));
    let fields = |s: &str| -> Vec<(String, String)> {
        s.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .collect()
    };
    let theirs = fields(&theirs);
    let ours = fields(&ours);
    assert!(
        ours.len() >= 50,
        "rverbs printed only {} fields",
        ours.len()
    );
    for (k, v) in &ours {
        let t = theirs.iter().find(|(tk, _)| tk == k);
        let (_, tv) = t.unwrap_or_else(|| panic!("ibv_devinfo -v has no field {k:?}"));
        assert_eq!(v, tv, "field {k}");
    }
}

#[test]
fn devices_match_ibv_devices() {
    let ours = stdout(Command::new(RVERBS).arg("devices"));
    let theirs = stdout(&mut Command::new("ibv_devices"));
    assert_eq!(ours, theirs);
}

#[test]
fn gids_show_the_ipv4_mapped_roce_v2_gid() {
    let e = common::env();
    let out = stdout(Command::new(RVERBS).args(["gids", "-d", &e.dev]));
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

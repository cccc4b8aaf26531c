//! `rverbs asyncwatch` beside rdma-core's `ibv_asyncwatch`: both watch
//! rxe0 while its netdev goes down and up and a GID comes and goes; both
//! must print the same event lines.

mod common;

use common::asyncwatch::{assert_same_events, Watcher};
use common::{env, rverbs_bin, show};
use rverbs::Context;
use std::process::Command;
use std::time::{Duration, Instant};

fn run(args: &[&str]) {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run");
    assert!(o.status.success(), "{args:?}: {}", show(&o));
}

#[test]
fn the_same_events_as_ibv_asyncwatch() {
    let dev = env().dev;
    let theirs = Watcher::spawn("theirs", Command::new("ibv_asyncwatch").args(["-d", &dev]));
    let ours = Watcher::spawn(
        "ours",
        Command::new(rverbs_bin()).args(["asyncwatch", "-d", &dev]),
    );
    theirs.wait_ready();
    ours.wait_ready();
    run(&["ip", "link", "set", "veth0", "down"]);
    std::thread::sleep(Duration::from_millis(500));
    run(&["ip", "link", "set", "veth0", "up"]);
    // The port comes back before the tests that follow run.
    let ctx = Context::open_by_name(Some(&dev)).unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    while ctx.query_port(1).unwrap().state != 4 {
        assert!(Instant::now() < until, "rxe0's port did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
    run(&[
        "ip",
        "-6",
        "addr",
        "add",
        "fd77::99/64",
        "dev",
        "veth0",
        "nodad",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    run(&["ip", "-6", "addr", "del", "fd77::99/64", "dev", "veth0"]);
    std::thread::sleep(Duration::from_secs(1));
    let first = format!("{dev}: async event FD ");
    for w in [&theirs, &ours] {
        assert!(w.text().starts_with(&first), "{}", w.text());
    }
    let o = assert_same_events(&theirs, &ours);
    for want in [
        "  event_type IBV_EVENT_PORT_ERR (10), port 1",
        "  event_type IBV_EVENT_PORT_ACTIVE (9), port 1",
        "  event_type IBV_EVENT_GID_CHANGE (18), port 1",
    ] {
        assert!(o.iter().any(|l| l == want), "no {want:?}: {o:?}");
    }
}

#[test]
fn an_unknown_device_is_an_error() {
    let o = Command::new(rverbs_bin())
        .args(["asyncwatch", "-d", "nosuchdev0"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("nosuchdev0"),
        "{}",
        show(&o)
    );
}

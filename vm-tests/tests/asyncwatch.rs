//! `rverbs asyncwatch` beside rdma-core's `ibv_asyncwatch`: both watch
//! rxe0 while its netdev goes down and up and a GID comes and goes; both
//! must print the same event lines.

mod common;

use common::{env, rverbs_bin, show};
use rverbs::Context;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run");
    assert!(o.status.success(), "{args:?}: {}", show(&o));
}

/// A watcher writing to a file (read while it runs: it runs until
/// killed); killed when dropped.
struct Watcher {
    child: Child,
    out: String,
}

impl Watcher {
    fn spawn(name: &str, cmd: &mut Command) -> Watcher {
        let out = format!("/tmp/asyncwatch-{name}.out");
        let f = std::fs::File::create(&out).unwrap();
        let child = cmd.stdout(f).stderr(Stdio::null()).spawn().expect("spawn");
        Watcher { child, out }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits (at most 20 s) until it printed its first line: the device
    /// is open and its async fd is being read.
    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(20);
        while !self.text().contains("async event FD") {
            assert!(Instant::now() < until, "{} never started", self.out);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The event lines, in order.
    fn events(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.starts_with("  event_type "))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    // Each reads the events at its own pace: give the slower one time.
    let until = Instant::now() + Duration::from_secs(10);
    while theirs.events() != ours.events() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (t, o) = (theirs.events(), ours.events());
    assert_eq!(t, o, "ours:\n{}\ntheirs:\n{}", ours.text(), theirs.text());
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

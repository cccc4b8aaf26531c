//! rverbs' `libibverbs.so.1` (crate `rverbs-libibverbs`) under rdma-core's
//! own unchanged programs: `ibv_devices` and `ibv_devinfo` print what they
//! print over rdma-core, and `ibv_rc_pingpong` over ours talks to
//! `ibv_rc_pingpong` over rdma-core in both roles. Every run checks that
//! the dynamic loader took our library, not Debian's.

mod common;

use common::ibverbs_so::{assert_loads_ours, lib_dir, ours, run, stdout, theirs};
use common::{env, pingpong_args, retry_until_ok, show, Background};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

static PORT: AtomicU16 = AtomicU16::new(18900);

/// The loader's own account (`LD_DEBUG=libs`) of which libibverbs it
/// initialised: ours, under `lib_dir()`; and ldd's.
fn assert_ours_loaded(prog: &str, args: &[&str]) {
    assert_loads_ours(prog, args);
    // ldd agrees.
    let mut l = Command::new("ldd");
    l.arg(which(prog)).env("LD_LIBRARY_PATH", lib_dir());
    let ldd = stdout(&run(l));
    assert!(
        ldd.lines()
            .any(|l| l.contains("libibverbs.so.1 => ")
                && l.contains(&lib_dir().display().to_string())),
        "ldd {prog}:\n{ldd}"
    );
}

fn which(prog: &str) -> String {
    let out = run({
        let mut c = Command::new("sh");
        c.args(["-c", &format!("command -v {prog}")]);
        c
    });
    let p = stdout(&out).trim().to_string();
    assert!(!p.is_empty(), "{prog} is not installed (ibverbs-utils)");
    p
}

#[test]
fn ibv_devices_prints_the_same() {
    let a = run(theirs("ibv_devices"));
    let b = run(ours("ibv_devices"));
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        show(&a),
        show(&b)
    );
    assert!(stdout(&a).contains(&env().dev), "{}", show(&a));
    assert_eq!(stdout(&b), stdout(&a), "ibv_devices over ours vs rdma-core");
    assert_ours_loaded("ibv_devices", &[]);
}

#[test]
fn ibv_devinfo_prints_the_same() {
    let dev = env().dev;
    // Plain, and -v (the extended attributes through verbs_context's
    // query_device_ex, every GID through ibv_query_gid/_type).
    for args in [vec!["-d", dev.as_str()], vec!["-d", dev.as_str(), "-v"]] {
        let a = run({
            let mut c = theirs("ibv_devinfo");
            c.args(&args);
            c
        });
        let b = run({
            let mut c = ours("ibv_devinfo");
            c.args(&args);
            c
        });
        assert!(
            a.status.success() && b.status.success(),
            "{}\n{}",
            show(&a),
            show(&b)
        );
        assert!(stdout(&a).contains("PORT_ACTIVE"), "{}", show(&a));
        assert_eq!(
            stdout(&b),
            stdout(&a),
            "ibv_devinfo {args:?} over ours vs rdma-core"
        );
    }
    assert_ours_loaded("ibv_devinfo", &["-d", &dev]);
}

/// `ibv_rc_pingpong` with the server over `server_ours ? ours : rdma-core`
/// and the client over the other.
fn pingpong(server_ours: bool, size: u32, events: bool) {
    let port = PORT.fetch_add(1, Ordering::Relaxed);
    let a = pingpong_args(500, size, port, events);
    let side = |is_ours: bool| {
        if is_ours {
            ours("ibv_rc_pingpong")
        } else {
            theirs("ibv_rc_pingpong")
        }
    };
    let server = Background::spawn(side(server_ours).args(&a));
    let client = retry_until_ok(Duration::from_secs(20), || {
        let mut c = side(!server_ours);
        c.args(&a).arg(env().addr);
        c
    });
    let server = server.wait(Duration::from_secs(60));
    let what = format!(
        "server over {}, size {size}, events {events}",
        if server_ours { "ours" } else { "rdma-core" }
    );
    for (who, out) in [("client", &client), ("server", &server)] {
        assert!(out.status.success(), "{who} ({what}): {}", show(out));
        let text = stdout(out);
        assert!(
            text.contains("500 iters in"),
            "{who} ({what}): {}",
            show(out)
        );
        assert!(
            text.contains(&format!("{} bytes in", u64::from(size) * 1000)),
            "{who} ({what}): {}",
            show(out)
        );
    }
}

#[test]
fn rc_pingpong_ours_serves_rdma_core() {
    assert_ours_loaded("ibv_rc_pingpong", &["-h"]);
    for (size, events) in [(1, false), (4096, true), (65536, false)] {
        pingpong(true, size, events);
    }
}

#[test]
fn rc_pingpong_rdma_core_serves_ours() {
    for (size, events) in [(1, true), (4096, false), (65536, true)] {
        pingpong(false, size, events);
    }
}

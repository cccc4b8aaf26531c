//! What this tranche added to rverbs' `libibverbs.so.1` (UD and address
//! handles, SRQs, memory windows, the allocation-free post path, QPs
//! deeper than their CQ), each run over ours and over rdma-core's:
//! - `libibverbs_core.c`, a C program compiled here against rdma-core's
//!   `<infiniband/verbs.h>`, prints what the library answers (return
//!   codes, errnos, `bad_wr` positions, completions, AH attributes from a
//!   completion, window binds and invalidation); the two outputs must be
//!   identical;
//! - rdma-core's unchanged pingpong examples against the same program over
//!   rdma-core, in both roles: UD (`ibv_ud_pingpong`: address handles, UD
//!   sends with the GRH), SRQ (`ibv_srq_pingpong`: 16 RC QPs receiving
//!   through one shared receive queue) and UC (`ibv_uc_pingpong`). `-c`
//!   makes each server check the bytes it received.

mod common;

use common::ibverbs_so::{build_c, ours, over, run, stdout, theirs};
use common::{env, pingpong_args, retry_until_ok, show, Background};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

static PORT: AtomicU16 = AtomicU16::new(19300);

/// `prog` with the server over ours (`server_ours`) or over rdma-core and
/// the client over the other, `iters` round trips of `size` bytes.
fn pingpong(prog: &str, server_ours: bool, size: u32, events: bool) {
    let e = env();
    let port = PORT.fetch_add(1, Ordering::Relaxed);
    let iters = 200;
    let mut a = pingpong_args(iters, size, port, events);
    a.push("-c".into());
    let server = Background::spawn(over(server_ours, prog).args(&a));
    let client = retry_until_ok(Duration::from_secs(20), || {
        let mut c = over(!server_ours, prog);
        c.args(&a).arg(&e.addr);
        c
    });
    let server = server.wait(Duration::from_secs(60));
    let what = format!(
        "{prog}: server over {}, size {size}, events {events}",
        if server_ours { "ours" } else { "rdma-core" }
    );
    for (who, out) in [("client", &client), ("server", &server)] {
        assert!(out.status.success(), "{who} ({what}): {}", show(out));
        let text = stdout(out);
        assert!(
            text.contains(&format!("{iters} iters in")),
            "{who} ({what}): {}",
            show(out)
        );
        assert!(
            text.contains(&format!(
                "{} bytes in",
                u64::from(size) * u64::from(iters) * 2
            )),
            "{who} ({what}): {}",
            show(out)
        );
        assert!(
            !text.contains("invalid data"),
            "{who} ({what}): {}",
            show(out)
        );
    }
}

#[test]
fn ud_pingpong_ours_serves_rdma_core() {
    // UD messages fit the path MTU (1024 on rxe over a 1500-byte link).
    for (size, events) in [(1, false), (1024, true)] {
        pingpong("ibv_ud_pingpong", true, size, events);
    }
}

#[test]
fn ud_pingpong_rdma_core_serves_ours() {
    for (size, events) in [(1, true), (1024, false)] {
        pingpong("ibv_ud_pingpong", false, size, events);
    }
}

#[test]
fn srq_pingpong_ours_serves_rdma_core() {
    for (size, events) in [(1, false), (4096, true)] {
        pingpong("ibv_srq_pingpong", true, size, events);
    }
}

#[test]
fn srq_pingpong_rdma_core_serves_ours() {
    for (size, events) in [(1, true), (4096, false)] {
        pingpong("ibv_srq_pingpong", false, size, events);
    }
}

#[test]
fn uc_pingpong_both_roles() {
    pingpong("ibv_uc_pingpong", true, 4096, false);
    pingpong("ibv_uc_pingpong", false, 4096, true);
}

/// `libibverbs_core.c`, compiled against rdma-core's headers and linked
/// by its SONAME, so that `LD_LIBRARY_PATH` picks the library.
fn verbs_core() -> String {
    build_c("libibverbs_core", include_str!("libibverbs_core.c"), &[])
}

#[test]
fn a_c_program_prints_the_same_over_ours_and_over_rdma_core() {
    let e = env();
    let exe = verbs_core();
    let gid = e.gid.to_string();
    let a = run({
        let mut c = theirs(&exe);
        c.args([&e.dev, &gid]);
        c
    });
    let b = run({
        let mut c = ours(&exe);
        c.args([&e.dev, &gid]);
        c
    });
    assert!(a.status.success(), "over rdma-core: {}", show(&a));
    assert!(b.status.success(), "over ours: {}", show(&b));
    let (ta, tb) = (stdout(&a), stdout(&b));
    assert!(ta.ends_with("done\n"), "over rdma-core: {}", show(&a));
    println!("{tb}");
    if ta != tb {
        for (x, y) in ta.lines().zip(tb.lines()).filter(|(x, y)| x != y) {
            eprintln!("rdma-core: {x}\nours:      {y}");
        }
        panic!("libibverbs_core over ours differs from over rdma-core:\n{ta}\n---\n{tb}");
    }
}

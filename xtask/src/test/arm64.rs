//! The arm64 share of `cargo xtask test`: the aarch64 static builds in a
//! bare arm64 VM (Debian's arm64 kernel on QEMU's `virt` board, under TCG),
//! interop there with rdma-core's own arm64 tools, and an arm64 VM and an
//! x86_64 VM talking to each other.
//!
//! Several checks share one boot where they can (an arm64 boot costs
//! ~10 s, a mixed pair ~20 s): each check's commands are framed by marker
//! lines and judged on their own, so one failure names its check.

use super::script::{client_says, judge, last, retry, scripts, section, Pair};
use super::{base_options, static_binary, Tally};
use crate::vm;
use std::time::Duration;

/// Creates rxe0 on the bare VM's netdev and waits for its IPv4 GID (the
/// bare init leaves the link to the run: its own checks create it).
const RXE_UP: &str = "rverbs link add rxe0 type rxe netdev $NETDEV || exit 1\n\
for i in $(seq 100); do rverbs gids -d rxe0 | grep -q \"$RVERBS_TEST_ADDR\" && break; sleep 0.1; done\n";

/// Everything of the arm64 share, in order.
pub(super) fn checks(tally: &mut Tally) {
    let k = vm::kernels::ARM64;
    println!("xtask: == arm64 checks on {k} (qemu-system-aarch64, TCG)");
    let base = base_options(k);
    // The aarch64 static builds: no loader, no libraries, an AArch64 ELF,
    // and each in a bare arm64 VM (link, devinfo, gids, pingpong x1000).
    static_binary(tally, &base);
    let bin = match crate::dist::build_for(crate::dist::AARCH64) {
        Ok(b) => b,
        Err(e) => return tally.fail("arm64: the aarch64 glibc build", &e),
    };
    one_vm(tally, &base, &bin);
    let x86 = match super::build_rverbs() {
        Ok(b) => b,
        Err(e) => return tally.fail("arm64 <-> x86_64: the x86_64 rverbs", &e),
    };
    mixed(tally, &bin, &x86);
}

/// One arm64 VM with rdma-core's arm64 tools beside our aarch64 build:
/// selftest, devinfo against ibv_devinfo, pingpong and rping with rdma-core
/// in both roles.
fn one_vm(tally: &mut Tally, base: &vm::Options, bin: &std::path::Path) {
    let pp_ours = "rverbs pingpong -d rxe0 -g 1 -n 100";
    let pp_theirs = "ibv_rc_pingpong -d rxe0 -g 1 -n 100";
    let rping_client = "-c -a 10.77.0.1 -p 7500 -C 20 -V -v";
    let pairs = [
        Pair {
            what: "arm64: rverbs pingpong client -> ibv_rc_pingpong server".into(),
            server: pp_theirs.into(),
            client: format!("{pp_ours} 10.77.0.1"),
            judge: client_says("100 iters in"),
        },
        Pair {
            what: "arm64: ibv_rc_pingpong client -> rverbs pingpong server".into(),
            server: pp_ours.into(),
            client: format!("{pp_theirs} 10.77.0.1"),
            judge: client_says("100 iters in"),
        },
        Pair {
            what: "arm64: rverbs rping client -> rdma-core rping server".into(),
            server: "rping -s -p 7500 -C 20 -v".into(),
            client: format!("rverbs rping {rping_client}"),
            judge: client_says("ping data: rdma-ping-19"),
        },
        Pair {
            what: "arm64: rdma-core rping client -> rverbs rping server".into(),
            server: "rverbs rping -s -p 7500 -C 20 -v".into(),
            client: format!("rping {rping_client}"),
            judge: client_says("ping data: rdma-ping-19"),
        },
    ];
    let mut script = String::from(RXE_UP);
    script.push_str(
        "echo BEGIN selftest\nrverbs selftest -d rxe0; echo \"RC selftest $?\"\n\
         echo BEGIN devinfo\nrverbs devinfo -v -d rxe0 > /tmp/a; r1=$?; ibv_devinfo -v -d rxe0 > /tmp/b; r2=$?\n\
         diff /tmp/a /tmp/b && [ $r1 = 0 ] && [ $r2 = 0 ] && [ -s /tmp/a ]; echo \"RC devinfo $?\"\n",
    );
    for (i, p) in pairs.iter().enumerate() {
        script.push_str(&format!(
            "echo BEGIN {i}\n(timeout 120 {} > /tmp/s{i} 2>&1; echo $? > /tmp/s{i}.rc) &\n\
             {}; c=$?\nwait\ncat /tmp/s{i}\necho \"RC {i} $c $(cat /tmp/s{i}.rc)\"\n",
            p.server,
            retry(&p.client)
        ));
    }
    let run = vm::run(&vm::Options {
        cmd: vec!["sh".into(), "-c".into(), script],
        bare: Some(bin.to_path_buf()),
        userland: true,
        timeout: Duration::from_secs(600),
        ..base.clone()
    });
    let o = match run {
        Ok(o) => o,
        Err(e) => return tally.fail("arm64: rverbs and rdma-core's arm64 tools in one VM", &e),
    };
    let lines = &o.lines[0];
    let segment = |tag: &str| section(lines, tag);
    let what = "arm64: rverbs selftest (aarch64 static build)";
    let s = segment("selftest");
    if s.iter().any(|l| l == "RC selftest 0") && s.iter().any(|l| l == "5 of 5 checks passed") {
        tally.pass(what)
    } else {
        tally.fail(what, &last(&s))
    }
    let what = "arm64: rverbs devinfo -v equals rdma-core's ibv_devinfo -v";
    let s = segment("devinfo");
    if s.iter().any(|l| l == "RC devinfo 0") {
        tally.pass(what)
    } else {
        tally.fail(what, &last(&s))
    }
    for (i, p) in pairs.iter().enumerate() {
        let s = segment(&i.to_string());
        let ok = s.iter().any(|l| *l == format!("RC {i} 0 0")) && (p.judge)(&s, &s);
        if ok {
            tally.pass(&p.what)
        } else {
            tally.fail(&p.what, &last(&s))
        }
    }
}

/// An x86_64 VM (host 1, the host's root and its rdma-core) and an arm64
/// one (host 2, bare, our aarch64 build and rdma-core's arm64 tools) on one
/// socket netdev: pingpong and perf write-bw, each architecture in each
/// role, and rdma-core's pingpong across the two. One boot per direction.
fn mixed(tally: &mut Tally, arm: &std::path::Path, x86: &str) {
    let pp = "pingpong -d rxe0 -g 1 -n 50";
    let bw = "perf write-bw -d rxe0 -x 1 -F -n 200";
    // Host 1 is the x86_64 VM: its clients dial 10.77.0.2.
    let arm_serves = [
        Pair {
            what: "arm64 <-> x86_64: x86_64 rverbs pingpong client -> arm64 rverbs server".into(),
            server: format!("rverbs {pp}"),
            client: format!("{x86} {pp} $RVERBS_PEER_ADDR"),
            judge: client_says("50 iters in"),
        },
        Pair {
            what: "arm64 <-> x86_64: x86_64 ibv_rc_pingpong client -> arm64 rverbs server".into(),
            server: format!("rverbs {pp}"),
            client: format!("ibv_rc_{pp} $RVERBS_PEER_ADDR"),
            judge: client_says("50 iters in"),
        },
        Pair {
            what: "arm64 <-> x86_64: x86_64 rverbs perf write-bw client -> arm64 rverbs server"
                .into(),
            server: format!("rverbs {bw}"),
            client: format!("{x86} {bw} $RVERBS_PEER_ADDR"),
            judge: client_says(" 65536      200 "),
        },
    ];
    // And the other way: the arm64 VM's clients, the x86_64 VM serving.
    // (Host 1 stays x86_64, so here host 1 serves and host 2 dials.)
    let x86_serves = [
        Pair {
            what: "arm64 <-> x86_64: arm64 rverbs pingpong client -> x86_64 rverbs server".into(),
            server: format!("{x86} {pp}"),
            client: format!("rverbs {pp} $RVERBS_PEER_ADDR"),
            judge: client_says("50 iters in"),
        },
        Pair {
            what: "arm64 <-> x86_64: arm64 ibv_rc_pingpong client -> x86_64 rverbs server".into(),
            server: format!("{x86} {pp}"),
            client: format!("ibv_rc_{pp} $RVERBS_PEER_ADDR"),
            judge: client_says("50 iters in"),
        },
        Pair {
            what: "arm64 <-> x86_64: arm64 rverbs perf write-bw client -> x86_64 rverbs server"
                .into(),
            server: format!("{x86} {bw}"),
            client: format!("rverbs {bw} $RVERBS_PEER_ADDR"),
            judge: client_says(" 65536      200 "),
        },
    ];
    for (pairs, arm_is_server) in [(&arm_serves, true), (&x86_serves, false)] {
        let (servers, clients) = scripts(pairs);
        // The arm64 host makes its rxe link itself; the x86_64 host's init
        // has made its own.
        let (host1, host2) = if arm_is_server {
            (clients, format!("{RXE_UP}{servers}"))
        } else {
            (servers, format!("{RXE_UP}{clients}"))
        };
        let run = vm::run(&vm::Options {
            hosts: 2,
            every_host: false,
            cmd: vec!["sh".into(), "-c".into(), host1],
            peer_cmd: Some(host2),
            peer_kernel: Some(vm::kernels::ARM64),
            peer_bare: Some(arm.to_path_buf()),
            userland: true,
            timeout: Duration::from_secs(600),
            ..base_options(vm::kernels::DEFAULT)
        });
        let o = match run {
            Ok(o) => o,
            Err(e) => {
                for p in pairs {
                    tally.fail(&p.what, &e);
                }
                continue;
            }
        };
        let (client_lines, server_lines) = if arm_is_server {
            (&o.lines[0], &o.lines[1])
        } else {
            (&o.lines[1], &o.lines[0])
        };
        judge(tally, pairs, client_lines, server_lines);
    }
}

//! Two VMs on one socket netdev (host 1 at 10.77.0.1, host 2 at
//! 10.77.0.2), every check in one boot: host 2 serves each check in turn,
//! host 1 is its client. rdma-core's tools against each other (the bed
//! itself), then ours against theirs in both roles: RC and UD pingpong,
//! rping, cmatose, perf write-bw, and our own rdma_cm pair.

use super::script::{client_says, judge, scripts, Judge, Pair};
use super::Tally;
use crate::vm;
use std::time::Duration;

/// How many of a section's lines hold `text`.
fn count(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|l| l.contains(text)).count()
}

/// Both sides of `cmatose`/`ucmatose` finished their transfers.
fn cmatose_done() -> Judge {
    Box::new(|c, s| {
        [c, s].iter().all(|l| {
            l.iter().any(|l| l.trim_end() == "data transfers complete")
                && l.iter().any(|l| l.trim_end() == "return status 0")
        })
    })
}

/// The pingpong checks, RC and UD, ours against rdma-core's in both roles
/// (and rdma-core's against itself first): what every kernel runs.
fn pingpong(bin: &str) -> Vec<Pair> {
    let rc = "pingpong -d rxe0 -g 1 -n 20";
    let ud = "pingpong -c -d rxe0 -g 1 -n 20";
    let mut pairs = Vec::new();
    let mut add = |what: &str, server: String, client: String, port: u16| {
        pairs.push(Pair {
            what: format!("two hosts: {what}"),
            server: format!("{server} -p {port}"),
            client: format!("{client} -p {port} $RVERBS_PEER_ADDR"),
            judge: client_says("20 iters in"),
        })
    };
    let (ours, theirs) = (format!("{bin} {rc}"), format!("ibv_rc_{rc}"));
    let (ours_ud, theirs_ud) = (format!("{bin} {ud} --ud"), format!("ibv_ud_{ud}"));
    add(
        "ibv_rc_pingpong 10.77.0.1 <-> 10.77.0.2",
        theirs.clone(),
        theirs.clone(),
        18601,
    );
    add(
        "rverbs pingpong client -> ibv_rc_pingpong server",
        theirs.clone(),
        ours.clone(),
        18602,
    );
    add(
        "ibv_rc_pingpong client -> rverbs pingpong server",
        ours,
        theirs,
        18603,
    );
    add(
        "rverbs pingpong --ud client -> ibv_ud_pingpong server",
        theirs_ud.clone(),
        ours_ud.clone(),
        18604,
    );
    add(
        "ibv_ud_pingpong client -> rverbs pingpong --ud server",
        ours_ud,
        theirs_ud,
        18605,
    );
    pairs
}

/// rdma_cm across the link: rping and cmatose in both roles against
/// rdma-core's, our cm-server/cm-client pair; and perf write-bw against
/// perftest in both roles (-F: perftest's clock check is too strict under
/// an emulated CPU).
fn cm_and_perf(bin: &str) -> Vec<Pair> {
    let mut pairs = Vec::new();
    let ours = format!("{bin} rping");
    for (what, server, client, port) in [
        (
            "rverbs rping client -> rdma-core rping server",
            "rping",
            ours.as_str(),
            7500,
        ),
        (
            "rdma-core rping client -> rverbs rping server",
            ours.as_str(),
            "rping",
            7503,
        ),
    ] {
        pairs.push(Pair {
            what: format!("two hosts: {what}"),
            server: format!("{server} -s -p {port} -v"),
            client: format!("{client} -c -a $RVERBS_PEER_ADDR -p {port} -C 20 -V -v"),
            judge: Box::new(|c, s| {
                count(c, "ping data: rdma-ping-") >= 20
                    && count(s, "server ping data: rdma-ping-") == 20
            }),
        });
    }
    // cmatose, 10 messages each way. One connection: with more, a client
    // started between the server's bind and listen could have some
    // rejected and others accepted, and its retry would find the server's
    // count spent.
    let ours = format!("{bin} cmatose");
    for (what, server, client, port) in [
        (
            "rverbs cmatose client -> ucmatose server",
            "ucmatose",
            ours.as_str(),
            7502,
        ),
        (
            "ucmatose client -> rverbs cmatose server",
            ours.as_str(),
            "ucmatose",
            7504,
        ),
    ] {
        pairs.push(Pair {
            what: format!("two hosts: {what}"),
            server: format!("{server} -p {port} -c 1 -C 10"),
            client: format!("{client} -s $RVERBS_PEER_ADDR -p {port} -c 1 -C 10"),
            judge: cmatose_done(),
        });
    }
    // cm-server runs until its peer disconnects; it is stopped once the
    // client's message has come and the peer has gone.
    pairs.push(Pair {
        what: "two hosts: rverbs cm-client -> rverbs cm-server".into(),
        server: format!(
            "sh -c \"{bin} cm-server -p 7501 > /tmp/s.out 2>&1 & P=\\$!; \
             for i in \\$(seq 300); do grep -q 'peer disconnected.' /tmp/s.out && break; sleep 0.2; done; \
             kill \\$P; cat /tmp/s.out; grep -q 'received message: message from active/client side' /tmp/s.out\""
        ),
        client: format!("{bin} cm-client $RVERBS_PEER_ADDR 7501"),
        judge: client_says("received message: message from passive/server side"),
    });
    let ours = format!("{bin} perf write-bw -d rxe0 -x 1 -F -n 200");
    let theirs = "ib_write_bw -d rxe0 -x 1 -F -n 200";
    for (what, server, client, port) in [
        (
            "rverbs perf write-bw client -> ib_write_bw server",
            theirs,
            ours.as_str(),
            18610,
        ),
        (
            "ib_write_bw client -> rverbs perf write-bw server",
            ours.as_str(),
            theirs,
            18611,
        ),
    ] {
        pairs.push(Pair {
            what: format!("two hosts: {what}"),
            server: format!("{server} -p {port}"),
            client: format!("{client} -p {port} $RVERBS_PEER_ADDR"),
            judge: client_says(" 65536      200 "),
        });
    }
    pairs
}

/// Runs the two-host checks in one boot on `base`'s kernel: the pingpong
/// ones, and with `all` the rdma_cm and perf ones too.
pub(super) fn checks(tally: &mut Tally, base: &vm::Options, bin: &str, all: bool) {
    let mut pairs = pingpong(bin);
    if all {
        pairs.extend(cm_and_perf(bin));
    }
    let (servers, clients) = scripts(&pairs);
    let run = vm::run(&vm::Options {
        two_hosts: true,
        cmd: vec!["sh".into(), "-c".into(), clients],
        peer_cmd: Some(servers),
        timeout: Duration::from_secs(1500),
        ..base.clone()
    });
    match run {
        Ok(o) => judge(tally, &pairs, &o.lines[0], &o.lines[1]),
        Err(e) => {
            for p in &pairs {
                tally.fail(&p.what, &e);
            }
        }
    }
}

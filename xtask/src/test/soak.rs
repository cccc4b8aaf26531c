//! The soak: two VMs, for a number of minutes, a mixed workload under
//! churn, in one boot.
//!
//! - Host 1's `rverbs stream --for` client cycles RC SEND, WRITE and READ
//!   and UD against host 2's `rverbs stream --for` server. Each run has a
//!   new seed and new QPs, CQs and MR, and every byte and completion of
//!   each finished run is checked.
//! - Every 45 s (a soak shorter than 90 s: once, at its middle), host 1
//!   takes its link down for 2 s.
//! - A second pair restarts its peer over and over: a client killed 3 s
//!   into a long run, then one that finishes, against a second long-lived
//!   server.
//!
//! Every long-lived process must end with the fds it had after its first
//! finished run and its memory within 4 MiB of it. Runs that a flap or a
//! killed peer cut short are counted; a wrong byte, datagram or
//! completion fails the soak.

use super::script::{last, section};
use super::{build_rverbs, Tally};
use crate::vm;
use std::time::Duration;

/// Both sides' summary lines if both exited 0, or what they last said.
fn verdict(client: &[String], server: &[String], tag: &str) -> Result<String, String> {
    let rc = format!("RC {tag} 0");
    let lines = [client, server].concat();
    let summary = lines
        .iter()
        .filter(|l| l.starts_with("stream --for "))
        .cloned()
        .collect::<Vec<_>>();
    if !client.contains(&rc) || !server.contains(&rc) || summary.len() != 2 {
        return Err(format!(
            "client: {}; server: {}",
            last(client),
            last(server)
        ));
    }
    Ok(summary.join("; "))
}

/// What the soak does beside its streams.
#[derive(Clone, Copy)]
pub struct Churn {
    /// Take host 1's link down for 2 s every 45 s (once, at the middle of
    /// a soak shorter than 90 s).
    pub flaps: bool,
    /// Kill a second pair's client mid-run, over and over.
    pub kills: bool,
}

/// How often a soak of 90 s or more flaps host 1's link.
const FLAP_EVERY_SECS: u64 = 45;

/// Soaks for `secs`: one boot of two VMs on `base`'s kernel.
pub(super) fn checks(tally: &mut Tally, base: &vm::Options, secs: u64, churn: Churn) {
    println!(
        "xtask: == soak: {secs} s of mixed streams{}{}",
        if churn.flaps { ", link flaps" } else { "" },
        if churn.kills {
            ", peers killed and restarted"
        } else {
            ""
        }
    );
    let bin = match build_rverbs() {
        Ok(b) => b,
        Err(e) => return tally.fail("soak: the rverbs tool", &e),
    };
    // The servers stop taking clients this long after the client's
    // deadline: its last run starts before that and connects at once.
    let tail = secs + 10;
    let stream = format!("{bin} stream -g 1 -q 4");
    // A short soak (the suite's) flaps once, at its middle; a long one
    // every FLAP_EVERY_SECS.
    let flap = if secs >= 90 {
        format!("while sleep {FLAP_EVERY_SECS}; do ip link set eth0 down; sleep 2; ip link set eth0 up; echo FLAP; done")
    } else {
        format!(
            "sleep {}; ip link set eth0 down; sleep 2; ip link set eth0 up; echo FLAP",
            secs / 2
        )
    };
    let mut client = format!(
        "flap() {{ {flap}; }}\n\
         churn() {{ while true; do timeout -s KILL 3 {stream} --op write --bytes 64M -p 7701 --timeout 20 $RVERBS_PEER_ADDR > /dev/null 2>&1; echo \"CHURN $?\"; sleep 1; \
         {stream} --op write --bytes 1M -p 7701 --timeout 20 $RVERBS_PEER_ADDR > /dev/null 2>&1; echo \"CHURNED $?\"; sleep 1; done; }}\n"
    );
    let mut server = String::new();
    if churn.flaps {
        client.push_str("flap & F=$!\n");
    }
    if churn.kills {
        client.push_str("churn & C=$!\n");
        server.push_str(&format!(
            "{stream} -p 7701 --timeout 20 --for {tail} > /tmp/churn.out 2>&1 & B=$!\n"
        ));
    }
    // When the main client is done: the flaps and the churn loop stop,
    // and the churn client still running (the loop's child, which
    // outlives it) is killed, so that its connection closes before this
    // VM powers off; a client whose host simply vanished would leave the
    // churn server waiting on TCP (bounded since by TCP_USER_TIMEOUT, but
    // 25 s of the suite). Found by name: any pattern of its arguments
    // would match this script's own shell too.
    client.push_str(&format!(
        "echo BEGIN soak\n{stream} --bytes 4M -p 7700 --timeout 30 --for {secs} $RVERBS_PEER_ADDR; echo \"RC soak $?\"\n\
         kill $F $C 2>/dev/null; wait; ip link set eth0 up\n\
         for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = rverbs ] && kill -KILL ${{p#/proc/}}; done; sleep 1\n"
    ));
    server.push_str(&format!(
        "echo BEGIN soak\n{stream} -p 7700 --timeout 30 --for {tail}; echo \"RC soak $?\"\n"
    ));
    if churn.kills {
        server.push_str(
            "wait $B; r=$?\necho BEGIN churn\ntail -5 /tmp/churn.out; echo \"RC churn $r\"\n",
        );
    }
    let run = vm::run(&vm::Options {
        hosts: 2,
        every_host: false,
        cmd: vec!["sh".into(), "-c".into(), client],
        peer_cmd: Some(server),
        timeout: Duration::from_secs(tail + 300),
        ..base.clone()
    });
    let o = match run {
        Ok(o) => o,
        Err(e) => return tally.fail("soak: the two VMs", &e),
    };
    let (c, s) = (&o.lines[0], &o.lines[1]);
    let flaps = c.iter().filter(|l| *l == "FLAP").count();
    // 137: SIGKILL, the client killed mid-run (not one that ended on its own).
    let killed = c.iter().filter(|l| *l == "CHURN 137").count();
    let what = format!(
        "soak {secs} s: SEND/WRITE/READ/UD runs checked{}, both processes' fds flat and memory within 4 MiB",
        if churn.flaps { format!(" across {flaps} link flaps") } else { String::new() }
    );
    match verdict(&section(c, "soak"), &section(s, "soak"), "soak") {
        Ok(_) if churn.flaps && flaps == 0 => tally.fail(&what, "the link never flapped"),
        Ok(summary) => {
            tally.pass(&what);
            println!("xtask: soak: {summary}");
        }
        Err(e) => tally.fail(&what, &e),
    }
    if !churn.kills {
        return;
    }
    let what = format!(
        "soak {secs} s: a server whose client was killed mid-run {killed} times keeps serving, fds flat and memory within 4 MiB"
    );
    let churn = section(s, "churn");
    match churn.iter().find(|l| l.starts_with("stream --for ")) {
        Some(l) if churn.contains(&"RC churn 0".to_string()) && killed > 0 => {
            tally.pass(&what);
            println!("xtask: soak, churn: {l}");
        }
        _ => tally.fail(&what, &last(&churn)),
    }
}

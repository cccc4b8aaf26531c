//! Loss and disorder: two VMs whose link (`eth0`, both directions) runs
//! `tc netem` — loss, reordering, duplication, corruption, each alone and
//! all together — and across it `rverbs stream` (RC SEND, WRITE and READ
//! over 8 QPs, every byte checked, every work request completed exactly
//! once) and rdma_cm (`rverbs rping` against rdma-core's `rping`, its
//! data verified), and `rverbs perf write-bw`/`send-bw` against perftest's
//! `ib_write_bw`/`ib_send_bw`. rxe's own counters are read before and
//! after each stream: the retransmissions they show prove the impairment
//! was there.
//!
//! One boot for all of them: host 2 serves each run in turn, host 1 is the
//! client. Each run is framed by marker lines and judged on its own.

use super::script::{last, retry, section};
use super::{build_rverbs, Tally};
use crate::vm;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

/// The impairments: (name, `tc qdisc add dev eth0 root netem` arguments).
/// netem reorders only packets it delays, hence the 2 ms on reordering
/// (the 5% sent at once overtake the rest).
pub const IMPAIRMENTS: [(&str, &str); 5] = [
    ("5% loss", "loss 5%"),
    ("5% reordering", "delay 2ms reorder 5% 50%"),
    ("1% duplication", "duplicate 1%"),
    ("0.1% corruption", "corrupt 0.1%"),
    (
        "all four",
        "delay 2ms reorder 5% 50% loss 5% duplicate 1% corrupt 0.1%",
    ),
];

/// The impairments `cargo xtask test` runs after the proof (which is loss
/// and reordering at 64 MiB): all four at once, which holds the
/// duplication and the corruption too; `cargo xtask netem` runs each of
/// the five.
pub const SUITE_IMPAIRMENTS: [(&str, &str); 1] = [IMPAIRMENTS[4]];

/// rxe's counters whose movement says what the link did.
const COUNTERS: [&str; 6] = [
    "rcvd_seq_err",
    "out_of_seq_request",
    "duplicate_request",
    "completer_retry_err",
    "retry_exceeded_err",
    "sent_pkts",
];

const OPS: [&str; 3] = ["send", "write", "read"];

/// perftest's servers against `rverbs perf` clients: (section, theirs,
/// ours).
const PERFTEST: [(&str, &str, &str); 2] = [
    ("write-bw", "ib_write_bw", "write-bw"),
    ("send-bw", "ib_send_bw", "send-bw"),
];

/// The proof: one link (host 1's) with 5% loss and 5% reordering,
/// and across it 64 MiB of RC WRITE over 8 QPs.
const PROOF_NETEM: &str = "delay 2ms reorder 5% 50% loss 5%";
const PROOF_BYTES: &str = "64M";
const PROOF_MIB: u32 = 64;

/// After a client killed by a signal (exit status above 128): the
/// kernel's own account of it, the "segfault at ... ip ... in
/// rverbs[base+size]" and "Code:" lines, which the quiet guest logs but
/// does not print. The proof's client once died of SIGSEGV with nothing
/// else to go on; this names the instruction.
const KILLED: &str = "if [ $rc -gt 128 ]; then dmesg | grep -E -A1 'segfault at|traps:|general protection' | tail -4 | sed 's/^/KERNEL /'; fi\n";

/// rxe's counters of a resend: one of them must move in the proof.
const RESEND_COUNTERS: [&str; 2] = ["completer_retry_err", "rcvd_seq_err"];

/// How much each run moves.
pub struct Scale {
    /// Whether the boot starts with the proof ([`PROOF_NETEM`] on host
    /// 1's link only, [`PROOF_BYTES`] of WRITE).
    pub proof: bool,
    /// The impairments run, each a (name, netem arguments) of
    /// [`IMPAIRMENTS`].
    pub impairments: &'static [(&'static str, &'static str)],
    /// Bytes per stream (`rverbs stream --bytes`: `64M` in the issue's
    /// plan).
    pub bytes: Cow<'static, str>,
    /// 64 KiB messages per perftest run.
    pub perftest_iters: u32,
    /// rping's verified round trips.
    pub rping_count: u32,
    /// The limit for the whole boot.
    pub timeout: Duration,
}

/// What `cargo xtask test` runs: every impairment and every check, with
/// less data (about 30 s per impairment).
pub const SUITE: Scale = Scale {
    proof: true,
    impairments: &SUITE_IMPAIRMENTS,
    bytes: Cow::Borrowed("1M"),
    perftest_iters: 20,
    rping_count: 10,
    timeout: Duration::from_secs(1200),
};

/// What `cargo xtask netem` runs by default: the 64 MiB streams.
pub const FULL: Scale = Scale {
    proof: true,
    impairments: &IMPAIRMENTS,
    bytes: Cow::Borrowed("64M"),
    perftest_iters: 200,
    rping_count: 50,
    // At 0.5-1 MB/s under loss, each 64 MiB stream takes one to two
    // minutes.
    timeout: Duration::from_secs(7200),
};

/// The section tag of check `what` under impairment `i`.
fn tag(i: usize, what: &str) -> String {
    format!("{i}-{what}")
}

/// Runs every impairment in one boot of two VMs, switching the link's
/// qdisc between them (`tc qdisc replace`, each host on its own side
/// before its own share of the next impairment's runs). Each check has
/// a TCP port of its own, so a client can never reach the server of
/// another check (a retried perftest client once did, and was refused
/// with REM_ACCESS_ERR by a send test's MR).
pub(super) fn checks(tally: &mut Tally, base: &vm::Options, scale: &Scale) {
    println!(
        "xtask: == loss and disorder (tc netem on both hosts' eth0), {} per stream",
        scale.bytes
    );
    let bin = match build_rverbs() {
        Ok(b) => b,
        Err(e) => return tally.fail("netem: the rverbs tool", &e),
    };
    let counters = format!(
        "counters() {{ for c in {}; do printf '%s=%s ' $c $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/$c); done; echo; }}\n",
        COUNTERS.join(" ")
    );
    let (mut client, mut server) = (counters, String::new());
    let bytes = &scale.bytes;
    // Each check: its section, counters read before and after on the
    // client, the exit status last.
    let mut check = |t: String, ours: String, theirs: String| {
        client.push_str(&format!(
            "echo BEGIN {t}\necho \"BEFORE $(counters)\"\n{ours}; rc=$?; echo \"RC $rc\"\n{KILLED}echo \"AFTER $(counters)\"\n"
        ));
        server.push_str(&format!(
            "echo BEGIN {t}\n{theirs}; rc=$?; echo \"RC $rc\"\n{KILLED}"
        ));
    };
    if scale.proof {
        // Host 1's link only: the server's side stays clean.
        check(
            "proof".into(),
            format!(
                "tc qdisc replace dev eth0 root netem {PROOF_NETEM} && \
                 {bin} stream --op write -p 6990 -g 1 -q 8 --bytes {PROOF_BYTES} --timeout 120 $RVERBS_PEER_ADDR"
            ),
            format!("timeout 900 {bin} stream -p 6990 -g 1 --timeout 120"),
        );
    }
    for (i, (_, args)) in scale.impairments.iter().enumerate() {
        let netem = format!("tc qdisc replace dev eth0 root netem {args} || exit 1");
        check(tag(i, "netem"), netem.clone(), netem);
        let port = |j: usize| 7000 + 20 * i + j;
        for (j, op) in OPS.iter().enumerate() {
            check(
                tag(i, op),
                format!("{bin} stream --op {op} -p {} -g 1 -q 8 --bytes {bytes} --timeout 120 $RVERBS_PEER_ADDR", port(j)),
                format!("timeout 900 {bin} stream -p {} -g 1 --timeout 120", port(j)),
            );
        }
        // UD, where loss is the service's right: every datagram received
        // intact or counted lost, none corrupt; none twice unless the link
        // itself duplicates (UD has no sequence check to drop a copy).
        let dups = if args.contains("duplicate") {
            " --allow-dups"
        } else {
            ""
        };
        check(
            tag(i, "ud"),
            format!("{bin} stream --op ud -p {} -s 1024 -g 1 -q 8 --bytes {bytes} --timeout 120{dups} $RVERBS_PEER_ADDR", port(3)),
            format!("timeout 900 {bin} stream -p {} -g 1 --timeout 120", port(3)),
        );
        // rdma_cm under the same link: connect, verified pings,
        // disconnect.
        let n = scale.rping_count;
        check(
            tag(i, "rping"),
            retry(&format!(
                "{bin} rping -c -a $RVERBS_PEER_ADDR -p {} -C {n} -V",
                port(4)
            )),
            format!("timeout 300 rping -s -p {} -C {n} -V", port(4)),
        );
        // perftest as the peer: its servers, our perf clients. Its first
        // completion comes after 100 messages (CQ moderation), which at
        // 5% loss takes longer than perf's default 10 s wait.
        let iters = scale.perftest_iters;
        for (j, (what, theirs, ours)) in PERFTEST.iter().enumerate() {
            check(
                tag(i, what),
                retry(&format!(
                    "{bin} perf {ours} -d rxe0 -x 1 -F -n {iters} -p {} --timeout 120 $RVERBS_PEER_ADDR",
                    port(5 + j)
                )),
                format!(
                    "timeout 300 {theirs} -d rxe0 -x 1 -F -n {iters} -p {}",
                    port(5 + j)
                ),
            );
        }
    }
    let run = vm::run(&vm::Options {
        hosts: 2,
        every_host: false,
        cmd: vec!["sh".into(), "-c".into(), client],
        peer_cmd: Some(server),
        timeout: scale.timeout,
        ..base.clone()
    });
    let o = match run {
        Ok(o) => o,
        Err(e) => return tally.fail("netem: the two VMs", &e),
    };
    if scale.proof {
        proof_verdict(
            tally,
            &section(&o.lines[0], "proof"),
            &section(&o.lines[1], "proof"),
        );
    }
    for (i, (name, args)) in scale.impairments.iter().enumerate() {
        let sections = |what: &str| {
            let t = tag(i, what);
            (section(&o.lines[0], &t), section(&o.lines[1], &t))
        };
        let ok = |c: &[String], s: &[String]| {
            c.iter().any(|l| l == "RC 0") && s.iter().any(|l| l == "RC 0")
        };
        let (c, s) = sections("netem");
        if !ok(&c, &s) {
            tally.fail(
                &format!("netem {name}: tc qdisc replace dev eth0 root netem {args}"),
                &why(&c, &s),
            );
            continue;
        }
        for op in OPS {
            let what = format!("netem {name}: RC {} stream over 8 QPs, every byte checked, every WR completed once", op.to_uppercase());
            let (c, s) = sections(op);
            if ok(&c, &s) && c.iter().any(|l| l.contains("bytes checked")) {
                tally.pass(&what);
                let line = c
                    .iter()
                    .find(|l| l.starts_with("stream "))
                    .cloned()
                    .unwrap_or_default();
                println!(
                    "xtask: netem {name}, {op}: {line}; rxe counters (client) {}",
                    delta(&c)
                );
            } else {
                tally.fail(&what, &why(&c, &s));
            }
        }
        let what = format!("netem {name}: UD over 8 QPs, every datagram received intact or counted lost, none corrupt{}", if args.contains("duplicate") { " (copies made by the link counted)" } else { ", none twice" });
        let (c, s) = sections("ud");
        match c.iter().find(|l| l.starts_with("stream Ud:")) {
            Some(l) if ok(&c, &s) => {
                tally.pass(&what);
                println!("xtask: netem {name}, ud: {l}");
            }
            _ => tally.fail(&what, &why(&c, &s)),
        }
        let what = format!("netem {name}: rdma_cm connect, {} verified rping round trips, disconnect (rverbs client, rdma-core server)", scale.rping_count);
        let (c, s) = sections("rping");
        if ok(&c, &s) {
            tally.pass(&what);
        } else {
            tally.fail(&what, &why(&c, &s));
        }
        let row = format!(" 65536      {} ", scale.perftest_iters);
        for (what, theirs, ours) in PERFTEST {
            let (c, s) = sections(what);
            let what = format!(
                "netem {name}: rverbs perf {ours} client -> perftest {theirs} server, {} x 64 KiB",
                scale.perftest_iters
            );
            if ok(&c, &s) && c.iter().any(|l| l.contains(&row)) {
                tally.pass(&what);
                println!(
                    "xtask: netem {name}, perf {ours}: rxe counters (client) {}",
                    delta(&c)
                );
            } else {
                tally.fail(&what, &why(&c, &s));
            }
        }
    }
}

/// The proof's verdict: both ends exited 0, the client checked every byte
/// and saw every work request complete once, and rxe resent.
fn proof_verdict(tally: &mut Tally, c: &[String], s: &[String]) {
    let what = format!(
        "netem proof: {PROOF_NETEM} on host 1's link, {PROOF_MIB} MiB of RC WRITE over 8 QPs, every byte checked, every WR completed once, rxe's resends counted"
    );
    // Both counter readings must be there: a missing one is not a zero.
    let read = ["BEFORE ", "AFTER "]
        .iter()
        .all(|t| c.iter().any(|l| l.starts_with(t)));
    let ok = read && c.iter().any(|l| l == "RC 0") && s.iter().any(|l| l == "RC 0");
    let line = c
        .iter()
        .find(|l| l.starts_with("stream ") && l.contains("bytes checked"));
    let moved = counter_deltas(c);
    let resent = RESEND_COUNTERS
        .iter()
        .any(|k| moved.get(*k).is_some_and(|&d| d > 0));
    match line {
        Some(l) if ok && resent => {
            tally.pass(&what);
            println!(
                "xtask: netem proof: {l}; rxe counters (client) {}",
                delta(c)
            );
        }
        _ => tally.fail(
            &what,
            &format!(
                "resends counted: {resent}; counters {}; client: {}; server: {}{}",
                delta(c),
                last(c),
                last(s),
                kernel(c) + &kernel(s)
            ),
        ),
    }
}

/// A failed check's account: the last lines of each side, and the guest
/// kernel's lines about either side killed by a signal.
fn why(c: &[String], s: &[String]) -> String {
    format!(
        "client: {}; server: {}{}{}",
        last(c),
        last(s),
        kernel(c),
        kernel(s)
    )
}

/// The kernel's lines about a killed client ([`KILLED`]), if any.
fn kernel(section: &[String]) -> String {
    let k: Vec<&str> = section
        .iter()
        .filter_map(|l| l.strip_prefix("KERNEL "))
        .collect();
    if k.is_empty() {
        String::new()
    } else {
        format!("; the guest kernel: {}", k.join(" | "))
    }
}

/// Each counter's movement between a section's BEFORE and AFTER lines.
fn counter_deltas(section: &[String]) -> BTreeMap<String, u64> {
    let read = |tag: &str| -> BTreeMap<String, u64> {
        section
            .iter()
            .find_map(|l| l.strip_prefix(tag))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|kv| kv.split_once('='))
                    .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (a, b) = (read("BEFORE "), read("AFTER "));
    b.iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*a.get(k).unwrap_or(&0))))
        .collect()
}

/// The counters that moved between a section's BEFORE and AFTER lines.
fn delta(section: &[String]) -> String {
    let moved: Vec<String> = counter_deltas(section)
        .iter()
        .filter(|(_, d)| **d > 0)
        .map(|(k, d)| format!("{k} +{d}"))
        .collect();
    if moved.is_empty() {
        "none moved".into()
    } else {
        moved.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::delta;

    #[test]
    fn deltas_name_what_moved() {
        let s: Vec<String> = [
            "BEFORE rcvd_seq_err=3 sent_pkts=10 duplicate_request=0",
            "stream ...",
            "AFTER rcvd_seq_err=5 sent_pkts=110 duplicate_request=0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(delta(&s), "rcvd_seq_err +2, sent_pkts +100");
        assert_eq!(delta(&[]), "none moved");
    }
}

//! The rxe data path per call in the VM, both stacks doing the same
//! thing: examples/bench_calls.rs through rverbs' safe API beside
//! xtask/bench-ref/rxe/calls.c through rdma-core's libibverbs — post one
//! signaled 64 B RDMA WRITE (one SGE), a list of 16 such WRITEs in one
//! call (one doorbell), one signaled 64 B inline SEND (RC), one 64 B UD
//! SEND through an address handle, and a poll returning one completion,
//! one returning four, one returning sixteen, and an empty one, each its
//! own out-of-line `bench_*` function counted by callgrind (inclusive /
//! calls). Unlike the write-latency client's figures, no measured poll
//! waits: the completions are in the CQ before it is called.

use super::guard::{self, Figure};
use crate::host::{run, target_dir, workspace_root, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const CALLS_C: &str = "xtask/bench-ref/rxe/calls.c";
/// Iterations of each scenario (each iteration sleeps 3 × 20 ms for the
/// kernel).
pub const ITERS: u32 = 100;

/// (label, measured function, guard key).
const ROWS: &[(&str, &str, &str)] = &[
    (
        "post one signaled 64 B RDMA WRITE, one SGE (with the doorbell `write()`)",
        "bench_post_write",
        "vm.rxe.post_write",
    ),
    (
        "poll returning one completion",
        "bench_poll_one",
        "vm.rxe.poll_one",
    ),
    (
        "poll returning four completions",
        "bench_poll_four",
        "vm.rxe.poll_four",
    ),
    ("empty poll", "bench_poll_empty", "vm.rxe.poll_empty"),
    (
        "post a list of 16 signaled 64 B RDMA WRITEs in one call, one doorbell (per call, i.e. per 16 WRs)",
        "bench_post_list16",
        "vm.rxe.post_list16",
    ),
    (
        "post one signaled 64 B inline SEND (RC)",
        "bench_post_inline",
        "vm.rxe.post_inline_send",
    ),
    (
        "post one signaled 64 B UD SEND through an address handle, one SGE",
        "bench_post_ud",
        "vm.rxe.post_ud_send",
    ),
    (
        "poll with room for 16 returning 16 completions",
        "bench_poll_16",
        "vm.rxe.poll_16",
    ),
];

/// Builds both programs; returns the VM environment naming them.
pub fn prepare() -> Result<Vec<(String, String)>> {
    run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args([
                "build",
                "--release",
                "--quiet",
                "-p",
                "rverbs",
                "--example",
                "bench_calls",
            ]),
    )?;
    let out = target_dir().join("bench");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let ibv = out.join("rxe_calls");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&ibv)
        .arg(workspace_root().join(CALLS_C))
        .arg("-libverbs"))?;
    let ours = target_dir().join("release/examples/bench_calls");
    Ok(vec![
        ("RV_CALLS".into(), ours.display().to_string()),
        ("IBV_CALLS".into(), ibv.display().to_string()),
    ])
}

/// The VM script's part.
pub fn script() -> String {
    format!(
        r#"
# ca NAME CMD...: CMD under callgrind as callgrind.calls-NAME; its
# BENCH-CALLS line (iterations, short polls) goes to the log.
ca() {{
    name=$1; shift
    valgrind --tool=callgrind --callgrind-out-file=$RVERBS_VM_OUT/callgrind.calls-$name "$@" > /tmp/ca.out 2>&1 || {{ echo "CG-FAILED calls-$name"; cat /tmp/ca.out; }}
    grep '^BENCH-CALLS' /tmp/ca.out
}}
ca rverbs $RV_CALLS rxe0 1 {ITERS}
ca rdma-core $IBV_CALLS rxe0 1 {ITERS}
"#
    )
}

/// "BENCH-CALLS <stack> iterations=N short=K" -> K.
fn short_polls(lines: &[String], stack: &str) -> Option<u64> {
    lines.iter().find_map(|l| {
        let rest = l.strip_prefix(&format!("BENCH-CALLS {stack} "))?;
        rest.split_whitespace()
            .find_map(|w| w.strip_prefix("short="))?
            .parse()
            .ok()
    })
}

/// The report's table; records rverbs' figures for the guard.
pub fn section(out_dir: &Path, lines: &[String]) -> Result<String> {
    let ours = super::callees(&out_dir.join("callgrind.calls-rverbs"));
    let theirs = super::callees(&out_dir.join("callgrind.calls-rdma-core"));
    let per = |m: &std::collections::BTreeMap<(String, String), (u64, u64)>, f: &str| {
        let (n, ir) = m
            .iter()
            .filter(|((_, name), _)| name == f || name.ends_with(&format!("::{f}")))
            .fold((0, 0), |a, (_, v)| (a.0 + v.0, a.1 + v.1));
        (n == u64::from(ITERS)).then(|| ir as f64 / n as f64)
    };
    let mut md = format!(
        "\n| rxe in the VM, instructions per call (callgrind, {ITERS} calls each, no measured call waits) | rdma-core 44 | rverbs | rverbs/rdma-core |\n| --- | --- | --- | --- |\n"
    );
    let mut figures = Vec::new();
    for (label, f, key) in ROWS {
        let (o, t) = (per(&ours, f), per(&theirs, f));
        let cell = |v: Option<f64>| v.map_or("failed".to_string(), |v| format!("{v:.0}"));
        let ratio = match (o, t) {
            (Some(o), Some(t)) if t > 0.0 => format!("{:.2}", o / t),
            _ => "-".into(),
        };
        let _ = writeln!(md, "| {label} | {} | {} | {ratio} |", cell(t), cell(o));
        if let Some(o) = o {
            figures.push(Figure::new(key, &format!("rxe in the VM: {label}"), o));
        }
    }
    let shorts = (
        short_polls(lines, "rverbs"),
        short_polls(lines, "rdma-core"),
    );
    let _ = writeln!(
        md,
        "\nexamples/bench_calls.rs (rverbs) and xtask/bench-ref/rxe/calls.c (rdma-core): one RC QP looped back to itself on rxe0 (the WRITEs, the inline SEND), one UD QP sending to itself through an address handle; receives posted and the SENDs' completions taken outside the measured functions; each `bench_*` function holds one call, counted inclusive (the caller's few instructions included on both sides). Polls that came back short although the program slept 20 ms for the kernel, or completions that failed or were not the expected ones: rverbs {}, rdma-core {} (a short poll would mix a non-representative call into its row).",
        shorts.0.map_or("?".into(), |v| v.to_string()),
        shorts.1.map_or("?".into(), |v| v.to_string()),
    );
    if !figures.is_empty() {
        guard::record(out_dir, "vm-calls", &figures)?;
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_poll_counts_are_read_per_stack() {
        let lines: Vec<String> = [
            "BENCH-CALLS rverbs iterations=100 short=0",
            "BENCH-CALLS rdma-core iterations=100 short=3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(short_polls(&lines, "rverbs"), Some(0));
        assert_eq!(short_polls(&lines, "rdma-core"), Some(3));
        assert_eq!(short_polls(&lines[..0], "rverbs"), None);
    }
}

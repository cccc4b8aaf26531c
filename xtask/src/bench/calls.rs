//! The rxe data path per call in the VM, both stacks doing the same
//! thing: examples/bench_calls.rs through rverbs' safe API beside
//! xtask/bench-ref/rxe/calls.c through rdma-core's libibverbs — post one
//! signaled 64 B RDMA WRITE (one SGE), a list of 16 such WRITEs in one
//! call (one doorbell), one signaled 64 B inline SEND (RC), one 64 B UD
//! SEND through an address handle, one signaled 64 B RDMA READ, and a
//! poll returning one completion, one returning four, one returning
//! sixteen, and an empty one, each its
//! own out-of-line `bench_*` function counted by callgrind (inclusive /
//! calls). Unlike the write-latency client's figures, no measured poll
//! waits: the completions are in the CQ before it is called.
//!
//! The same C binary runs a second time over rverbs' own
//! `libibverbs.so.1` (crate `rverbs-libibverbs`, profile
//! `cshim-release`), found first through `LD_LIBRARY_PATH` as the VM tests
//! load it: what a C program pays to run on rverbs.

use super::guard::{self, Figure};
use crate::host::{run, target_dir, workspace_root, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const CALLS_C: &str = "xtask/bench-ref/rxe/calls.c";
/// Iterations of each scenario (each iteration sleeps 3 × 20 ms for the
/// kernel).
pub const ITERS: u32 = 100;

/// (label, measured function, guard key of the row without its prefix:
/// `vm.rxe.` for rverbs' Rust API, `vm.cshim.` for the C program over
/// rverbs' libibverbs).
const ROWS: &[(&str, &str, &str)] = &[
    (
        "post one signaled 64 B RDMA WRITE, one SGE (with the doorbell `write()`)",
        "bench_post_write",
        "post_write",
    ),
    (
        "poll returning one completion",
        "bench_poll_one",
        "poll_one",
    ),
    (
        "poll returning four completions",
        "bench_poll_four",
        "poll_four",
    ),
    ("empty poll", "bench_poll_empty", "poll_empty"),
    (
        "post a list of 16 signaled 64 B RDMA WRITEs in one call, one doorbell (per call, i.e. per 16 WRs)",
        "bench_post_list16",
        "post_list16",
    ),
    (
        "post one signaled 64 B inline SEND (RC)",
        "bench_post_inline",
        "post_inline_send",
    ),
    (
        "post one signaled 64 B UD SEND through an address handle, one SGE",
        "bench_post_ud",
        "post_ud_send",
    ),
    (
        "post one signaled 64 B RDMA READ, one SGE",
        "bench_post_read",
        "post_read",
    ),
    (
        "poll with room for 16 returning 16 completions",
        "bench_poll_16",
        "poll_16",
    ),
    (
        "post one signaled 64 B RDMA WRITE built once, one SGE (rverbs: `Qp::post_prepared`; rdma-core: `ibv_wr_start`, `ibv_wr_rdma_write`, `ibv_wr_set_sge`, `ibv_wr_complete`)",
        "bench_post_prepared",
        "post_write_prepared",
    ),
    (
        "post one signaled 64 B UD SEND through an address handle built once (rverbs: `Qp::post_prepared`; rdma-core: the builders with `ibv_wr_set_ud_addr`)",
        "bench_post_ud_prepared",
        "post_ud_prepared",
    ),
];

/// Where the VM finds rverbs' `libibverbs.so.1` (a copy of the
/// `cshim-release` build, under the name C programs' `NEEDED` asks for).
fn cshim_dir() -> std::path::PathBuf {
    target_dir().join("bench").join("cshim-lib")
}

/// Builds both programs and rverbs' libibverbs (profile `cshim-release`:
/// optimized, `panic = "abort"`, fat LTO); returns the VM environment
/// naming them.
pub fn prepare() -> Result<Vec<(String, String)>> {
    // `cargo rustc --crate-type cdylib`, not `cargo build`: the package
    // builds an rlib beside the cdylib, and cargo applies no `lto` to a
    // target with an rlib among its crate types; the cdylib alone gets the
    // profile's fat LTO (rverbs' data path inlined into the C entries).
    run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args([
                "rustc",
                "--quiet",
                "-p",
                "rverbs-libibverbs",
                "--profile",
                "cshim-release",
                "--crate-type",
                "cdylib",
            ]),
    )?;
    // A copy, not a link: callgrind names the object by the file it
    // mapped, which the report checks is this one.
    let lib = cshim_dir();
    std::fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
    std::fs::copy(
        target_dir().join("cshim-release").join("libibverbs.so"),
        lib.join("libibverbs.so.1"),
    )
    .map_err(|e| format!("copy the cshim-release libibverbs.so: {e}"))?;
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
        ("CSHIM_LIB".into(), lib.display().to_string()),
    ])
}

/// The VM script's part.
pub fn script() -> String {
    format!(
        r#"
# ca NAME LIBDIR CMD...: CMD under callgrind as callgrind.calls-NAME,
# with LIBDIR first in LD_LIBRARY_PATH if not empty; its BENCH-CALLS line
# (iterations, short polls) goes to the log, the C program's under NAME.
ca() {{
    name=$1; lib=$2; shift 2
    env ${{lib:+"LD_LIBRARY_PATH=$lib"}} valgrind --tool=callgrind --callgrind-out-file=$RVERBS_VM_OUT/callgrind.calls-$name "$@" > /tmp/ca.out 2>&1 || {{ echo "CG-FAILED calls-$name"; cat /tmp/ca.out; }}
    grep '^BENCH-CALLS' /tmp/ca.out | sed "s/^BENCH-CALLS rdma-core /BENCH-CALLS $name /"
}}
ca rverbs '' $RV_CALLS rxe0 1 {ITERS}
ca rdma-core '' $IBV_CALLS rxe0 1 {ITERS}
ca cshim "$CSHIM_LIB" $IBV_CALLS rxe0 1 {ITERS}
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

/// Whether the profile at `file` is of a process that mapped rverbs'
/// `libibverbs.so.1` from `lib` and not rdma-core's (whose file is
/// `libibverbs.so.1.<version>`).
fn ran_over_ours(file: &Path, lib: &Path) -> bool {
    let Ok(raw) = std::fs::read_to_string(file) else {
        return false;
    };
    let ours = lib.join("libibverbs.so.1").display().to_string();
    let objects: Vec<&str> = raw
        .lines()
        .filter_map(|l| l.strip_prefix("ob=").or_else(|| l.strip_prefix("cob=")))
        .filter_map(|v| v.split_once(") ").map(|(_, name)| name.trim()))
        .collect();
    objects.iter().any(|o| *o == ours)
        && !objects.iter().any(|o| {
            o.rsplit('/')
                .next()
                .is_some_and(|f| f.starts_with("libibverbs.so.1."))
        })
}

/// The report's table; records rverbs' figures for the guard (the Rust
/// API's as `vm.rxe.<row>`, the C program's over rverbs' libibverbs as
/// `vm.cshim.<row>`).
pub fn section(out_dir: &Path, lines: &[String]) -> Result<String> {
    let ours = super::callees(&out_dir.join("callgrind.calls-rverbs"));
    let theirs = super::callees(&out_dir.join("callgrind.calls-rdma-core"));
    let cshim_file = out_dir.join("callgrind.calls-cshim");
    // A run that did not load our library (a missing copy, a loader that
    // found rdma-core's) measured nothing of ours: its column fails.
    let cshim = if ran_over_ours(&cshim_file, &cshim_dir()) {
        super::callees(&cshim_file)
    } else {
        Default::default()
    };
    let per = |m: &std::collections::BTreeMap<(String, String), (u64, u64)>, f: &str| {
        let (n, ir) = m
            .iter()
            .filter(|((_, name), _)| name == f || name.ends_with(&format!("::{f}")))
            .fold((0, 0), |a, (_, v)| (a.0 + v.0, a.1 + v.1));
        (n == u64::from(ITERS)).then(|| ir as f64 / n as f64)
    };
    let mut md = format!(
        "\n| rxe in the VM, instructions per call (callgrind, {ITERS} calls each, no measured call waits) | rdma-core 44 | rverbs | rverbs/rdma-core | C over rverbs' libibverbs | C over rverbs/rdma-core |\n| --- | --- | --- | --- | --- | --- |\n"
    );
    let mut figures = Vec::new();
    let cell = |v: Option<f64>| v.map_or("failed".to_string(), |v| format!("{v:.0}"));
    let ratio = |o: Option<f64>, t: Option<f64>| match (o, t) {
        (Some(o), Some(t)) if t > 0.0 => format!("{:.2}", o / t),
        _ => "-".into(),
    };
    for (label, f, key) in ROWS {
        let (o, t, c) = (per(&ours, f), per(&theirs, f), per(&cshim, f));
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} |",
            cell(t),
            cell(o),
            ratio(o, t),
            cell(c),
            ratio(c, t)
        );
        if let Some(o) = o {
            figures.push(Figure::new(
                &format!("vm.rxe.{key}"),
                &format!("rxe in the VM: {label}"),
                o,
            ));
        }
        if let Some(c) = c {
            figures.push(Figure::new(
                &format!("vm.cshim.{key}"),
                &format!("rxe in the VM, calls.c over rverbs' libibverbs: {label}"),
                c,
            ));
        }
    }
    let shorts = |stack| short_polls(lines, stack).map_or("?".into(), |v| v.to_string());
    let _ = writeln!(
        md,
        "\nexamples/bench_calls.rs (rverbs) and xtask/bench-ref/rxe/calls.c (rdma-core; and the same binary over rverbs' `libibverbs.so.1`, profile `cshim-release`, through `LD_LIBRARY_PATH`): one RC QP looped back to itself on rxe0 (the WRITEs, the inline SEND), one UD QP sending to itself through an address handle; receives posted and the SENDs' completions taken outside the measured functions; each `bench_*` function holds one call, counted inclusive (the caller's few instructions included on both sides). Polls that came back short although the program slept 20 ms for the kernel, or completions that failed or were not the expected ones: rverbs {}, rdma-core {}, C over rverbs' libibverbs {} (a short poll would mix a non-representative call into its row).",
        shorts("rverbs"),
        shorts("rdma-core"),
        shorts("cshim"),
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

    #[test]
    fn the_c_run_counts_only_over_our_library() {
        let dir = std::env::temp_dir().join(format!("xtask-cshim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = Path::new("/t/bench/cshim-lib");
        let f = dir.join("cg");
        let ours = "ob=(1) /t/calls\nfn=(1) main\ncob=(2) /t/bench/cshim-lib/libibverbs.so.1\n";
        std::fs::write(&f, ours).unwrap();
        assert!(ran_over_ours(&f, lib));
        let theirs = "ob=(1) /t/calls\ncob=(3) /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0\n";
        std::fs::write(&f, theirs).unwrap();
        assert!(!ran_over_ours(&f, lib));
        std::fs::write(&f, format!("{ours}{theirs}")).unwrap();
        assert!(!ran_over_ours(&f, lib));
        assert!(!ran_over_ours(&dir.join("missing"), lib));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! `cargo xtask bench`: rverbs beside rdma-core/perftest on the same kernel,
//! in one VM boot, interleaved so that drift hits both; plus userspace
//! instruction counts of post and poll under callgrind.
//!
//! Absolute times under an emulated CPU mean little; the ratios taken in
//! the same run are the figures to read.

mod calls;
mod charts;
mod guard;
mod mlx5_ref;
pub use mlx5_ref::build_oracle;
mod startup;
mod svg;
mod wallclock;

use crate::host::{target_dir, workspace_root, Result, TOOL_PACKAGE};
use crate::vm;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Command, ExitCode};
use std::time::Duration;

/// (perftest tool, rverbs test, latency?)
const TESTS: &[(&str, &str, bool)] = &[
    ("ib_send_lat", "send-lat", true),
    ("ib_write_lat", "write-lat", true),
    ("ib_read_lat", "read-lat", true),
    ("ib_send_bw", "send-bw", false),
    ("ib_write_bw", "write-bw", false),
];
const SIZES: &[u32] = &[64, 4096, 65536];
/// The async-vs-sync rows (`examples/async_echo`, 64-byte echoes over
/// rdma_cm): (clients, messages per client). One client measures the round
/// trip; eight at once on one thread (async) or eight threads (sync) the
/// message rate.
const ECHO_RUNS: &[(u32, u32)] = &[(1, 1000), (8, 250)];
const ROUNDS: u32 = 3;
const CALLGRIND_ITERS: u32 = 600;

fn script(iters: u32, rounds: u32) -> String {
    let mut s = String::from(
        r#"set -u
B=$RVERBS_BIN
port=20000
# run NAME TOOL ARGS...: a server and a client of TOOL on rxe0, printing the
# client's figure line as "BENCH NAME <line>".
run() {
    name=$1; shift
    port=$((port + 1))
    "$@" -p $port > /tmp/server.out 2>&1 &
    sp=$!
    ok=0
    for i in $(seq 40); do
        if timeout 120 "$@" -p $port 10.77.0.1 > /tmp/client.out 2>&1; then ok=1; break; fi
        grep -q "Couldn't connect\|connect to" /tmp/client.out || break
        sleep 0.2
    done
    wait $sp
    line=$(grep -A1 '#bytes' /tmp/client.out | tail -1)
    if [ $ok = 1 ] && [ -n "$line" ]; then echo "BENCH $name $line"; else echo "BENCH-FAILED $name"; cat /tmp/client.out /tmp/server.out; fi
}
"#,
    );
    for round in 0..rounds {
        for (pt, rv, _) in TESTS {
            for size in SIZES {
                let n = if *size >= 65536 { iters / 2 } else { iters };
                // -F: under TCG perftest's CPU-clock check (r^2 of its
                // cycle counter against time) fails and it prints no
                // report; rverbs takes the flag and ignores it.
                let common = format!("-d rxe0 -x 1 -F -s {size} -n {n}");
                let a = format!("run perftest:{pt}:{size} {pt} {common}\n");
                let b = format!("run rverbs:{pt}:{size} $B perf {rv} {common}\n");
                // Alternate which goes first, so that neither always runs warm.
                if round % 2 == 0 {
                    s.push_str(&a);
                    s.push_str(&b);
                } else {
                    s.push_str(&b);
                    s.push_str(&a);
                }
            }
        }
    }
    // Async vs sync: the echo example's client against its server, both in
    // one mode, interleaved as above.
    s.push_str(
        r#"
# echo NAME MODE CLIENTS MESSAGES: async_echo's server and client on rxe0,
# printing the client's ECHO line as "BENCH-ECHO <line>".
echo_run() {
    name=$1; mode=$2; clients=$3; msgs=$4
    port=$((port + 1))
    $E server 10.77.0.1 $port --connections $clients $mode > /tmp/echo-server.out 2>&1 &
    sp=$!
    for i in $(seq 100); do grep -q listening /tmp/echo-server.out && break; sleep 0.1; done
    timeout 120 $E client 10.77.0.1 $port --clients $clients --messages $msgs $mode > /tmp/echo.out 2>&1
    ok=$?
    wait $sp
    line=$(grep '^ECHO ' /tmp/echo.out)
    if [ $ok = 0 ] && [ -n "$line" ]; then echo "BENCH-ECHO $line"; else echo "BENCH-FAILED echo:$name"; cat /tmp/echo.out /tmp/echo-server.out; fi
}
"#,
    );
    for round in 0..rounds {
        for (clients, msgs) in ECHO_RUNS {
            let sync = format!("echo_run sync-{clients} --sync {clients} {msgs}\n");
            let asy = format!("echo_run async-{clients} '' {clients} {msgs}\n");
            if round % 2 == 0 {
                s.push_str(&sync);
                s.push_str(&asy);
            } else {
                s.push_str(&asy);
                s.push_str(&sync);
            }
        }
    }
    // Instruction counts: the client of a 64-byte write latency run under
    // callgrind, against a server of the same tool.
    let _ = write!(
        s,
        r#"
cg() {{
    name=$1; shift
    port=$((port + 1))
    "$@" -p $port > /tmp/server.out 2>&1 &
    sp=$!
    sleep 1
    valgrind --tool=callgrind --callgrind-out-file=$RVERBS_VM_OUT/callgrind.$name "$@" -p $port 10.77.0.1 > /tmp/cg.out 2>&1 || {{ echo "CG-FAILED $name"; cat /tmp/cg.out; }}
    wait $sp
}}
cg rverbs $B perf write-lat -d rxe0 -x 1 -s 64 -n {CALLGRIND_ITERS}
cg perftest ib_write_lat -d rxe0 -x 1 -s 64 -n {CALLGRIND_ITERS}
"#
    );
    s
}

/// Parses "BENCH tool:test:size <perftest figure line>".
fn parse(lines: &[String]) -> BTreeMap<(String, u32, String), Vec<f64>> {
    let mut m: BTreeMap<(String, u32, String), Vec<f64>> = BTreeMap::new();
    for l in lines {
        let Some(rest) = l.strip_prefix("BENCH ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let Some(name) = it.next() else { continue };
        let cols: Vec<f64> = it.filter_map(|c| c.parse().ok()).collect();
        let parts: Vec<&str> = name.split(':').collect();
        if parts.len() != 3 {
            continue;
        }
        let (tool, test, size) = (parts[0], parts[1], parts[2].parse().unwrap_or(0));
        // Latency lines: bytes iters min max typical avg ...; bandwidth
        // lines: bytes iters peak avg msgrate.
        let lat = test.ends_with("_lat");
        let v = if lat { cols.get(4) } else { cols.get(3) };
        if let Some(v) = v {
            m.entry((test.to_string(), size, tool.to_string()))
                .or_default()
                .push(*v);
        }
    }
    m
}

/// Parses "BENCH-ECHO ECHO mode=async clients=1 ... rtt_us=X rate=Y" into
/// (clients, mode) -> [(rtt_us, rate)].
fn parse_echo(lines: &[String]) -> BTreeMap<(u32, String), Vec<(f64, f64)>> {
    let mut m: BTreeMap<(u32, String), Vec<(f64, f64)>> = BTreeMap::new();
    for l in lines {
        let Some(rest) = l.strip_prefix("BENCH-ECHO ECHO ") else {
            continue;
        };
        let kv: BTreeMap<&str, &str> = rest
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let num = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok());
        if let (Some(mode), Some(c), Some(rtt), Some(rate)) =
            (kv.get("mode"), num("clients"), num("rtt_us"), num("rate"))
        {
            m.entry((c as u32, mode.to_string()))
                .or_default()
                .push((rtt, rate));
        }
    }
    m
}

/// "median (min-max)" of `v`, or "failed".
fn spread(v: &[f64], digits: usize) -> String {
    if v.is_empty() {
        return "failed".into();
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.digits$} ({lo:.digits$}-{hi:.digits$})", median(v))
}

/// The async-vs-sync table from the echo lines.
fn echo_table(lines: &[String]) -> String {
    let m = parse_echo(lines);
    if m.is_empty() && !lines.iter().any(|l| l.starts_with("BENCH-FAILED echo:")) {
        // No echo runs in this log (`--callgrind-only`).
        return String::new();
    }
    let mut md = String::from(
        "\n| async vs sync (`async_echo`, 64 B echoes over rdma_cm; median (min-max)) | sync | async | async/sync |\n| --- | --- | --- | --- |\n",
    );
    for (clients, msgs) in ECHO_RUNS {
        let get = |mode: &str| {
            m.get(&(*clients, mode.to_string()))
                .cloned()
                .unwrap_or_default()
        };
        let (s, a) = (get("sync"), get("async"));
        // One client: its round trip (lower is better); several: the
        // messages per second of all of them (higher is better).
        let one = *clients == 1;
        let label = if one {
            format!("round trip, 1 client x {msgs} (us)")
        } else {
            format!("messages/s, {clients} clients x {msgs}")
        };
        let pick = |x: &(f64, f64)| if one { x.0 } else { x.1 };
        let digits = if one { 1 } else { 0 };
        let (sv, av): (Vec<f64>, Vec<f64>) =
            (s.iter().map(pick).collect(), a.iter().map(pick).collect());
        let ratio = if sv.is_empty() || av.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}", median(&av) / median(&sv))
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {ratio} |",
            spread(&sv, digits),
            spread(&av, digits)
        );
    }
    md.push_str("\nsync: the blocking API, a thread per connection sleeping in `read()` of its completion channel; async: `rverbs::aio` on one `current_thread` runtime (the server too), a task per connection.\n");
    md
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Calls into each function and their inclusive instruction count, summed
/// over every call site, from a callgrind profile: `(object, function) ->
/// (calls, inclusive Ir)`. Reads the raw format (name compression, `calls=`
/// lines followed by the call's inclusive cost) so that it also works for
/// stripped libraries, whose functions are named by address.
fn callees(file: &std::path::Path) -> BTreeMap<(String, String), (u64, u64)> {
    let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let Ok(raw) = std::fs::read_to_string(file) else {
        return out;
    };
    // Objects, files and functions are compressed in separate namespaces:
    // "(12) name" defines id 12 of its kind, "(12)" refers to it.
    let mut names: [BTreeMap<String, String>; 3] = Default::default();
    let mut resolve = |kind: usize, v: &str| -> String {
        let v = v.trim();
        if let Some(rest) = v.strip_prefix('(') {
            if let Some((id, name)) = rest.split_once(')') {
                let name = name.trim();
                if name.is_empty() {
                    return names[kind].get(id).cloned().unwrap_or_default();
                }
                names[kind].insert(id.to_string(), name.to_string());
                return name.to_string();
            }
        }
        v.to_string()
    };
    const OBJ: usize = 0;
    const FILE: usize = 1;
    const FUNC: usize = 2;
    let (mut ob, mut cob, mut cfn) = (String::new(), None::<String>, String::new());
    let mut pending: Option<u64> = None;
    for l in raw.lines() {
        if let Some(calls) = pending.take() {
            let ir = l
                .split_whitespace()
                .last()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            // Without a cob= line the callee lives in the caller's object.
            let key = (cob.take().unwrap_or_else(|| ob.clone()), cfn.clone());
            let e = out.entry(key).or_default();
            e.0 += calls;
            e.1 += ir;
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        match k {
            "ob" => ob = resolve(OBJ, v),
            "cob" => cob = Some(resolve(OBJ, v)),
            "cfn" => cfn = resolve(FUNC, v),
            "cfi" | "cfl" | "fl" | "fi" | "fe" => {
                resolve(FILE, v);
            }
            "fn" => {
                resolve(FUNC, v);
                cob = None;
            }
            "calls" => pending = v.split_whitespace().next().and_then(|c| c.parse().ok()),
            _ => {}
        }
    }
    out
}

/// Iterations of the mlx5 model benchmark.
const MLX5_ITERS: u64 = 1000;

/// How the mlx5 model section of the report begins (it is always the last
/// section, so a new run replaces everything from here on).
const MLX5_MARK: &str = "| mlx5 on the software device model";

/// `report` with its mlx5 model section (if any) replaced by `mlx5`.
fn splice_mlx5(report: &str, mlx5: &str) -> String {
    let keep = match report.find(MLX5_MARK) {
        Some(i) => report[..i].trim_end(),
        None => report.trim_end(),
    };
    let mut out = keep.to_string();
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(mlx5);
    out
}

/// One host-side provider benchmark: a release example that calls each
/// measured function (`bench_*`, `#[inline(never)]`, provider code only)
/// exactly `MLX5_ITERS` times, run under callgrind. Returns the table rows
/// and the per-call figures, in `rows` order.
fn host_bench(
    out_dir: &std::path::Path,
    package: &str,
    example: &str,
    rows: &[(&str, &str)],
) -> Result<(String, Vec<f64>)> {
    crate::host::run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args([
                "build",
                "--release",
                "--quiet",
                "-p",
                package,
                "--example",
                example,
            ]),
    )?;
    let bin = target_dir().join("release").join("examples").join(example);
    std::fs::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    let cg = out_dir.join(format!("callgrind.{example}"));
    let st = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", cg.display()))
        .arg(&bin)
        .arg(MLX5_ITERS.to_string())
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !st.status.success() {
        return Err(format!(
            "the {example} benchmark failed: {}",
            String::from_utf8_lossy(&st.stderr)
        ));
    }
    let calls = callees(&cg);
    let mut md = String::new();
    let mut per_call = Vec::new();
    for (label, needle) in rows {
        let (n, ir) = calls
            .iter()
            .filter(|((_, f), _)| f.ends_with(needle))
            .fold((0, 0), |acc, (_, v)| (acc.0 + v.0, acc.1 + v.1));
        // Exactly one call per iteration: anything else means the wrapper
        // was inlined, renamed or called elsewhere, and the figure is wrong.
        if n != MLX5_ITERS {
            return Err(format!(
                "{needle}: {n} calls in {}, expected {MLX5_ITERS}",
                cg.display()
            ));
        }
        let per = ir as f64 / n as f64;
        per_call.push(per);
        let _ = writeln!(md, "| {label} | {n} | {ir} | {per:.0} |");
    }
    Ok((md, per_call))
}

/// The providers' data paths on the host, under callgrind (no kernel
/// involved): mlx5 over the software device model (build and ring one
/// single-SGE RDMA WRITE, poll its CQE), rxe over rings in plain memory
/// (posts, and a poll that returns one completion and one that returns
/// none). Returns the report's section.
fn mlx5_model(out_dir: &std::path::Path) -> Result<String> {
    crate::host::ensure_host_packages()?;
    let (mlx5, m) = host_bench(
        out_dir,
        "provider-mlx5-model",
        "bench_model",
        &[
            (
                "build + ring one signaled single-SGE RDMA WRITE (`SendQueue::post` + `ring`)",
                "bench_post",
            ),
            (
                "poll its CQE (`CompletionQueue::poll`, wr_id resolved)",
                "bench_poll",
            ),
        ],
    )?;
    let (prepared, mprep) = host_bench(
        out_dir,
        "provider-mlx5-model",
        "bench_prepared",
        &[(
            "build + ring the same WRITE prepared once (`SendQueue::post_prepared` + `ring`)",
            "bench_post_prepared",
        )],
    )?;
    let (rxe, r) = host_bench(
        out_dir,
        "provider-rxe",
        "bench_ring",
        &[
            (
                "post one signaled single-SGE RDMA WRITE (`SendQueue::post`)",
                "bench_post_write",
            ),
            ("post one signaled 64-byte inline SEND", "bench_post_send"),
            (
                "post one single-SGE receive (`RecvQueue::post`)",
                "bench_post_recv",
            ),
            (
                "poll a CQ holding one completion (`CompletionQueue::poll`)",
                "bench_poll_one",
            ),
            ("poll an empty CQ", "bench_poll_empty"),
        ],
    )?;
    let (mlx5_polls, mp) = host_bench(
        out_dir,
        "provider-mlx5-model",
        "bench_polls",
        &[
            ("poll returning one completion", "bench_poll_one"),
            ("poll returning four completions", "bench_poll_four"),
            ("empty poll", "bench_poll_empty"),
        ],
    )?;
    let (mr_rows, mr) = host_bench(
        out_dir,
        "rverbs",
        "bench_mr_copy",
        &[
            ("`Mr::write` 4 KiB", "bench_write_4k"),
            ("`Mr::read` 4 KiB", "bench_read_4k"),
            ("`Mr::write` 4 KiB at offset 3", "bench_write_4k_at_3"),
            ("`Mr::write` 1 MiB", "bench_write_1m"),
            ("`Mr::read` 1 MiB", "bench_read_1m"),
        ],
    )?;
    let reference = mlx5_ref::measure(out_dir)?;
    let m: Vec<f64> = m.iter().chain(&mprep).copied().collect();
    record_host_figures(out_dir, &m, &mp, &r)?;
    record_mr_figures(out_dir, &mr)?;
    let mut md = format!("\n{MLX5_MARK} (callgrind, host, {MLX5_ITERS} iterations) | calls | inclusive Ir | per call |\n| --- | --- | --- | --- |\n");
    md.push_str(&mlx5);
    md.push_str(&prepared);
    md.push_str(&mlx5_polls);
    md.push_str(&mlx5_ref::rows(&reference));
    md.push_str(&mlx5_ref::side_by_side(
        &reference,
        &[
            m[0],
            mp[0],
            mp[1],
            mp[2],
            m.get(2).copied().unwrap_or(f64::NAN),
        ],
    ));
    let _ = writeln!(
        md,
        "\nmlx5 on the device model: post one single-SGE RDMA WRITE (build + doorbell): {:.0} instr/call; poll one CQE: {:.0} instr/call; {MLX5_ITERS} calls each.",
        m[0], m[1]
    );
    md.push_str("\nThe model's own work (consuming the WQE, moving the data, writing the CQE) runs between the two calls and is not counted. Not hardware: no MMIO latency, no write-combining effects.\n");
    let _ = write!(md, "\n| rxe provider over rings in plain memory (callgrind, host, {MLX5_ITERS} iterations) | calls | inclusive Ir | per call |\n| --- | --- | --- | --- |\n");
    md.push_str(&rxe);
    let _ = writeln!(
        md,
        "\nrxe provider alone: WRITE {:.0}, inline SEND {:.0}, receive {:.0}, poll returning one completion {:.0}, empty poll {:.0} instr/call (the safe API adds its dispatch; the VM figures above include it and the doorbell).",
        r[0], r[1], r[2], r[3], r[4]
    );
    let _ = write!(md, "\n| MR copies: the engine of `Mr::write`/`Mr::read` over heap memory (callgrind, host, {MLX5_ITERS} iterations) | calls | inclusive Ir | per call |\n| --- | --- | --- | --- |\n");
    md.push_str(&mr_rows);
    std::fs::write(out_dir.join("mlx5.md"), &md).map_err(|e| e.to_string())?;
    Ok(md)
}

/// The MR copy rows' figures, for the regression guard.
fn record_mr_figures(out_dir: &std::path::Path, mr: &[f64]) -> Result<()> {
    use guard::Figure;
    let rows = [
        ("mr.write_4k", "Mr::write 4 KiB"),
        ("mr.read_4k", "Mr::read 4 KiB"),
        ("mr.write_4k_at_3", "Mr::write 4 KiB at offset 3"),
        ("mr.write_1m", "Mr::write 1 MiB"),
        ("mr.read_1m", "Mr::read 1 MiB"),
    ];
    let figures: Vec<Figure> = rows
        .iter()
        .enumerate()
        .map(|(i, (k, l))| Figure::new(k, l, mr.get(i).copied().unwrap_or(f64::NAN)))
        .collect();
    guard::record(out_dir, "mr", &figures)
}

/// The host rows' figures, for the regression guard.
fn record_host_figures(out_dir: &std::path::Path, m: &[f64], mp: &[f64], r: &[f64]) -> Result<()> {
    use guard::Figure;
    let f = |k: &str, l: &str, v: &[f64], i: usize| {
        Figure::new(k, l, v.get(i).copied().unwrap_or(f64::NAN))
    };
    guard::record(
        out_dir,
        "host",
        &[
            f(
                "mlx5.post_write",
                "mlx5 model: build + ring one signaled RDMA WRITE",
                m,
                0,
            ),
            f("mlx5.poll_cqe", "mlx5 model: poll its CQE", m, 1),
            f(
                "mlx5.post_write_prepared",
                "mlx5 model: build + ring one signaled RDMA WRITE prepared once",
                m,
                2,
            ),
            f(
                "mlx5.poll_one",
                "mlx5 model: poll returning one completion",
                mp,
                0,
            ),
            f(
                "mlx5.poll_four",
                "mlx5 model: poll returning four completions",
                mp,
                1,
            ),
            f("mlx5.poll_empty", "mlx5 model: empty poll", mp, 2),
            f(
                "rxe.post_write",
                "rxe rings: post one signaled RDMA WRITE",
                r,
                0,
            ),
            f(
                "rxe.post_inline_send",
                "rxe rings: post one 64 B inline SEND",
                r,
                1,
            ),
            f("rxe.post_recv", "rxe rings: post one receive", r, 2),
            f(
                "rxe.poll_one",
                "rxe rings: poll returning one completion",
                r,
                3,
            ),
            f("rxe.poll_empty", "rxe rings: empty poll", r, 4),
        ],
    )
}

/// The guard's verdict after a run (or, with `--update-baseline`, this
/// run's figures recorded as the new baseline).
fn finish(out_dir: &std::path::Path, args: &[String], code: ExitCode) -> Result<ExitCode> {
    if args.iter().any(|a| a == "--update-baseline") {
        println!("{}", guard::update(out_dir)?);
        return Ok(code);
    }
    print!("{}", guard::check(out_dir)?);
    Ok(code)
}

pub fn run(args: &[String]) -> Result<ExitCode> {
    let out_dir = target_dir().join("bench");
    let raw_log = out_dir.join("raw.log");
    if !args.iter().any(|a| a == "--report-only") {
        guard::clear(&out_dir);
    }
    // `--mlx5-only`: the mlx5 model figures alone (host only, seconds).
    if args.iter().any(|a| a == "--mlx5-only") {
        let md = mlx5_model(&out_dir)?;
        println!("{md}");
        // Keep the last full run's figures; replace only the mlx5 section.
        let path = out_dir.join("report.md");
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        std::fs::write(&path, splice_mlx5(&old, &md)).map_err(|e| e.to_string())?;
        println!("xtask: wrote {}", path.display());
        return finish(&out_dir, args, ExitCode::SUCCESS);
    }
    // `--report-only`: rebuild the report from the last run's files.
    if args.iter().any(|a| a == "--report-only") {
        let text =
            std::fs::read_to_string(&raw_log).map_err(|e| format!("{}: {e}", raw_log.display()))?;
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let code = report(&out_dir, &lines)?;
        return finish(&out_dir, args, code);
    }
    crate::host::ensure_host_packages()?;
    crate::host::run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args(["build", "--release", "--quiet", "-p", TOOL_PACKAGE])
            .args(["--bin", "rverbs"]),
    )?;
    if args.iter().any(|a| a == "--charts-only") {
        return charts_only(&out_dir);
    }
    crate::host::run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .args(["build", "--release", "--quiet", "-p", "rverbs"])
            .args(["--example", "async_echo", "--features", "tokio"]),
    )?;
    let bin = target_dir().join("release").join("rverbs");
    let echo = target_dir()
        .join("release")
        .join("examples")
        .join("async_echo");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let wall_rounds = if args.iter().any(|a| a == "--callgrind-only") {
        0
    } else {
        ROUNDS
    };
    let startup_env = startup::prepare()?;
    let calls_env = calls::prepare()?;
    let o = vm::run(&vm::Options {
        hosts: 1,
        every_host: false,
        timeout: Duration::from_secs(1800),
        // `--callgrind-only`: just the instruction counts (about 30 s).
        cmd: vec![
            "sh".into(),
            "-c".into(),
            script(1000, wall_rounds)
                + &charts::script(wall_rounds)
                + &calls::script()
                + &startup::script(),
        ],
        peer_cmd: None,
        env: [
            ("RVERBS_BIN".into(), bin.display().to_string()),
            ("E".into(), echo.display().to_string()),
        ]
        .into_iter()
        .chain(startup_env)
        .chain(calls_env)
        .collect(),
        verbose: false,
        capture: true,
        out_dir: Some(out_dir.clone()),
        bare: None,
        peer_kernel: None,
        peer_bare: None,
        userland: false,
        kernel: vm::kernels::DEFAULT,
    })?;
    let lines = &o.lines[0];
    std::fs::write(&raw_log, lines.join("\n")).map_err(|e| e.to_string())?;
    mlx5_model(&out_dir)?;
    let code = report(&out_dir, lines)?;
    finish(&out_dir, args, code)
}

/// `--charts-only`: the chart runs alone in one VM boot; their section of
/// `report.md` is replaced, the rest kept. Failed runs are drawn and
/// counted, and do not fail the command: the charts illustrate, the
/// callgrind figures and their guard judge.
fn charts_only(out_dir: &std::path::Path) -> Result<ExitCode> {
    let bin = target_dir().join("release").join("rverbs");
    std::fs::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    let t = std::time::Instant::now();
    let o = vm::run(&vm::Options {
        hosts: 1,
        every_host: false,
        timeout: Duration::from_secs(900),
        cmd: vec![
            "sh".into(),
            "-c".into(),
            format!("set -u\nB=$RVERBS_BIN\n{}", charts::script(ROUNDS)),
        ],
        peer_cmd: None,
        env: vec![("RVERBS_BIN".into(), bin.display().to_string())],
        verbose: false,
        capture: true,
        out_dir: Some(out_dir.to_path_buf()),
        bare: None,
        peer_kernel: None,
        peer_bare: None,
        userland: false,
        kernel: vm::kernels::DEFAULT,
    })?;
    let lines = &o.lines[0];
    std::fs::write(out_dir.join("charts.log"), lines.join("\n")).map_err(|e| e.to_string())?;
    let md = charts_section(out_dir, lines)?;
    println!("{md}");
    let path = out_dir.join("report.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::write(&path, charts::splice(&old, &md, MLX5_MARK)).map_err(|e| e.to_string())?;
    println!(
        "xtask: wrote {} and the charts beside it ({:.0} s, VM boot included)",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The charts' section from the log's chart runs (drawing the SVGs and
/// keeping the section in `charts.md`); without chart runs in the log
/// (`--callgrind-only`), the last drawn section, if any.
fn charts_section(out_dir: &std::path::Path, lines: &[String]) -> Result<String> {
    let runs = charts::parse(lines);
    if runs.is_empty() {
        return Ok(std::fs::read_to_string(out_dir.join("charts.md")).unwrap_or_default());
    }
    let md = charts::section(out_dir, &runs, ROUNDS)?;
    std::fs::write(out_dir.join("charts.md"), &md).map_err(|e| e.to_string())?;
    if runs.failures() > 0 {
        eprintln!(
            "xtask: {} chart runs failed (drawn as failed points; see the log)",
            runs.failures()
        );
    }
    Ok(md)
}

fn report(out_dir: &std::path::Path, lines: &[String]) -> Result<ExitCode> {
    let m = parse(lines);
    let mut md = wallclock::table(&m, TESTS, SIZES);
    md.push_str(&format!(
        "\n{ROUNDS} interleaved rounds in one VM boot; latency is t_typical (lower is better), bandwidth is BW average (higher is better); a ratio is \"not significant\" when the two ranges overlap.\n"
    ));
    md.push_str(&echo_table(lines));
    md.push_str(&charts_section(out_dir, lines)?);
    md.push_str(&format!(
        "\n| userspace instructions per call (callgrind, client of a 64 B write-lat, {CALLGRIND_ITERS} iterations) | calls | inclusive Ir | per call |\n| --- | --- | --- | --- |\n"
    ));
    let ours = callees(&out_dir.join("callgrind.rverbs"));
    for (label, needle) in [
        (
            "rverbs `Qp::post_send` (in the tool's `bench_post_send`)",
            "bench_post_send",
        ),
        (
            "rverbs `Cq::poll` (in the tool's `bench_poll`)",
            "bench_poll",
        ),
    ] {
        let (calls, ir) = ours
            .iter()
            .filter(|((_, f), _)| f.contains(needle))
            .fold((0, 0), |acc, (_, v)| (acc.0 + v.0, acc.1 + v.1));
        let per = if calls > 0 {
            format!("{:.0}", ir as f64 / calls as f64)
        } else {
            "not found".into()
        };
        let _ = writeln!(md, "| {label} | {calls} | {ir} | {per} |");
    }
    // rdma-core's rxe provider is stripped: its functions are addresses.
    // post_send is the one called once per iteration with the largest
    // cost per call; poll_cq the one called most often.
    let theirs = callees(&out_dir.join("callgrind.perftest"));
    let rxe: Vec<(&String, &(u64, u64))> = theirs
        .iter()
        .filter(|((ob, _), _)| ob.contains("librxe"))
        .map(|((_, f), v)| (f, v))
        .collect();
    let post = rxe
        .iter()
        .filter(|(_, v)| v.0 >= CALLGRIND_ITERS as u64 && v.0 <= CALLGRIND_ITERS as u64 + 10)
        .max_by_key(|(_, v)| v.1 / v.0.max(1));
    let poll = rxe.iter().max_by_key(|(_, v)| v.0);
    for (label, f) in [
        ("rdma-core rxe post_send (by call count)", post),
        ("rdma-core rxe poll_cq (most calls)", poll),
    ] {
        match f {
            Some((name, (calls, ir))) => {
                let _ = writeln!(
                    md,
                    "| {label}: `{name}` | {calls} | {ir} | {:.0} |",
                    *ir as f64 / (*calls).max(1) as f64
                );
            }
            None => {
                let _ = writeln!(md, "| {label} | - | - | not found |");
            }
        }
    }
    let total = |f: &str| -> Option<u64> {
        let raw = std::fs::read_to_string(out_dir.join(f)).ok()?;
        raw.lines()
            .find_map(|l| {
                l.strip_prefix("summary: ")
                    .or_else(|| l.strip_prefix("totals: "))
            })
            .and_then(|v| v.trim().parse().ok())
    };
    let _ = writeln!(
        md,
        "| whole client run, rverbs vs perftest | - | {} vs {} | - |",
        total("callgrind.rverbs")
            .map(|v| v.to_string())
            .unwrap_or("-".into()),
        total("callgrind.perftest")
            .map(|v| v.to_string())
            .unwrap_or("-".into())
    );
    let failed = lines
        .iter()
        .filter(|l| l.starts_with("BENCH-FAILED") || l.starts_with("CG-FAILED"))
        .count();
    if failed > 0 {
        let _ = writeln!(md, "\n{failed} runs failed; see the log.");
    }
    md.push_str(&calls::section(out_dir, lines)?);
    md.push_str(&startup::section(out_dir)?);
    if let Ok(mlx5) = std::fs::read_to_string(out_dir.join("mlx5.md")) {
        md.push_str(&mlx5);
    }
    println!("{md}");
    std::fs::write(out_dir.join("report.md"), &md).map_err(|e| e.to_string())?;
    println!("xtask: wrote {}", out_dir.join("report.md").display());
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callgrind_callees_with_name_compression() {
        let dir = std::env::temp_dir().join(format!("xtask-cg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cg");
        // Objects, files and functions number their ids separately: (1) is
        // a different name in each kind.
        std::fs::write(
            &f,
            "events: Ir\nob=(1) /bin/app\nfl=(1) main.c\nfn=(1) main\n0 5\n\
             cob=(2) /lib/librxe.so\ncfi=(2) ??\ncfn=(2) 0x3cc0\ncalls=3 0\n0 600\n\
             cfn=(3) helper\ncalls=2 0\n0 40\n\
             fn=(3)\n0 20\ncob=(2)\ncfn=(2)\ncalls=1 0\n0 200\n",
        )
        .unwrap();
        let c = callees(&f);
        assert_eq!(c[&("/lib/librxe.so".into(), "0x3cc0".into())], (4, 800));
        assert_eq!(c[&("/bin/app".into(), "helper".into())], (2, 40));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn mlx5_section_is_replaced_not_repeated() {
        let new = format!("\n{MLX5_MARK} (new) |\n| a | 2 |\n");
        assert_eq!(splice_mlx5("", &new), new);
        let full = "| test | size |\n| x | 1 |\n";
        let once = splice_mlx5(full, &new);
        assert!(once.starts_with(full));
        assert!(once.ends_with(&new));
        let older = format!("{full}\n{MLX5_MARK} (old) |\n| a | 1 |\n");
        let twice = splice_mlx5(&splice_mlx5(&older, &new), &new);
        assert_eq!(twice.matches(MLX5_MARK).count(), 1);
        assert!(twice.starts_with(full) && twice.ends_with(&new));
    }

    #[test]
    fn echo_lines_make_the_async_vs_sync_rows() {
        let lines: Vec<String> = [
            "BENCH-ECHO ECHO mode=sync clients=1 messages=1000 size=64 rtt_us=300.00 rate=3000.0",
            "BENCH-ECHO ECHO mode=async clients=1 messages=1000 size=64 rtt_us=450.00 rate=2000.0",
            "BENCH-ECHO ECHO mode=async clients=1 messages=1000 size=64 rtt_us=400.00 rate=2100.0",
            "BENCH-ECHO ECHO mode=async clients=1 messages=1000 size=64 rtt_us=500.00 rate=1900.0",
            "BENCH-ECHO ECHO mode=async clients=8 messages=250 size=64 rtt_us=900.00 rate=7000.0",
            "BENCH-FAILED echo:sync-8",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let m = parse_echo(&lines);
        assert_eq!(m[&(1, "async".into())].len(), 3);
        let t = echo_table(&lines);
        assert!(t.contains("| round trip, 1 client x 1000 (us) | 300.0 (300.0-300.0) | 450.0 (400.0-500.0) | 1.50 |"), "{t}");
        assert!(
            t.contains("| messages/s, 8 clients x 250 | failed | 7000 (7000-7000) | - |"),
            "{t}"
        );
    }

    #[test]
    fn bench_lines_parse_into_medians() {
        let lines = vec![
            "BENCH perftest:ib_write_lat:64  64 1000 60.0 90.0 70.5 71.0 2.0 80.0 85.0".to_string(),
            "BENCH rverbs:ib_write_bw:4096  4096 1000 50.0 40.25 0.01".to_string(),
        ];
        let m = parse(&lines);
        assert_eq!(
            m[&("ib_write_lat".into(), 64, "perftest".into())],
            vec![70.5]
        );
        assert_eq!(
            m[&("ib_write_bw".into(), 4096, "rverbs".into())],
            vec![40.25]
        );
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
}

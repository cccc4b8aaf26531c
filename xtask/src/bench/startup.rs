//! Start-up, whole process, in the VM under callgrind: exec → open a
//! device context → exit (examples/bench_open.rs, static, against
//! xtask/bench-ref/startup/ibv_open.c over the host's libibverbs), and
//! `rverbs devices` (the static binary of `cargo xtask dist`, glibc and
//! musl) against rdma-core's `ibv_devices`. Every instruction of the process counts:
//! the dynamic loader, libibverbs' provider scan, the exit.

use super::guard::{self, Figure};
use crate::host::{run, target_dir, workspace_root, Result};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const IBV_OPEN_C: &str = "xtask/bench-ref/startup/ibv_open.c";

/// (name, label, rverbs run, rdma-core run) — the callgrind files are
/// `callgrind.start-rverbs-NAME` and `callgrind.start-ibv-NAME`.
const ROWS: &[(&str, &str, &str, &str)] = &[
    (
        "open",
        "exec → open context (rxe0) → exit",
        "$RV_OPEN rxe0",
        "$IBV_OPEN rxe0",
    ),
    (
        "devices",
        "`rverbs devices` vs `ibv_devices`",
        "$RV_STATIC devices",
        "ibv_devices",
    ),
    (
        "devices_musl",
        "`rverbs devices` built for musl (`x86_64-unknown-linux-musl`) vs `ibv_devices`",
        "$RV_MUSL devices",
        "ibv_devices",
    ),
];

/// Builds the three programs; returns the VM environment naming them.
pub fn prepare() -> Result<Vec<(String, String)>> {
    let rv_static = crate::dist::build()?;
    let rv_musl = crate::dist::build_for(crate::dist::MUSL)?;
    // The same static build as `dist` (its target directory, so that the
    // library is compiled once for both).
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
                "bench_open",
                "--target",
                crate::dist::TARGET,
            ])
            .arg("--target-dir")
            .arg(target_dir().join("dist-build"))
            .env("RUSTFLAGS", "-C target-feature=+crt-static"),
    )?;
    let rv_open = target_dir()
        .join("dist-build")
        .join(crate::dist::TARGET)
        .join("release/examples/bench_open");
    let out = target_dir().join("bench");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let ibv_open = out.join("ibv_open");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&ibv_open)
        .arg(workspace_root().join(IBV_OPEN_C))
        .arg("-libverbs"))?;
    Ok(vec![
        ("RV_STATIC".into(), rv_static.display().to_string()),
        ("RV_MUSL".into(), rv_musl.display().to_string()),
        ("RV_OPEN".into(), rv_open.display().to_string()),
        ("IBV_OPEN".into(), ibv_open.display().to_string()),
    ])
}

/// The VM script's part: each program once under callgrind.
pub fn script() -> String {
    let mut s = String::from(
        r#"
# st NAME CMD...: CMD under callgrind, its profile as callgrind.start-NAME.
st() {
    name=$1; shift
    valgrind --tool=callgrind --callgrind-out-file=$RVERBS_VM_OUT/callgrind.start-$name "$@" > /tmp/st.out 2>&1 || { echo "CG-FAILED start-$name"; cat /tmp/st.out; }
}
"#,
    );
    for (name, _, ours, theirs) in ROWS {
        let _ = writeln!(s, "st rverbs-{name} {ours}");
        let _ = writeln!(s, "st ibv-{name} {theirs}");
    }
    s
}

/// A profile's whole-process instruction count.
fn total(file: &Path) -> Option<u64> {
    let raw = std::fs::read_to_string(file).ok()?;
    raw.lines()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The report's start-up table; records rverbs' figures for the guard.
pub fn section(out_dir: &Path) -> Result<String> {
    let mut md = String::from(
        "\n| start-up, whole process (callgrind, in the VM) | rdma-core 44 | rverbs (static) | rverbs/rdma-core |\n| --- | --- | --- | --- |\n",
    );
    let mut figures = Vec::new();
    for (name, label, _, _) in ROWS {
        let ours = total(&out_dir.join(format!("callgrind.start-rverbs-{name}")));
        let theirs = total(&out_dir.join(format!("callgrind.start-ibv-{name}")));
        let cell = |v: Option<u64>| v.map_or("failed".to_string(), |v| v.to_string());
        let ratio = match (ours, theirs) {
            (Some(o), Some(t)) if t > 0 => format!("{:.3}", o as f64 / t as f64),
            _ => "-".into(),
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {ratio} |",
            cell(theirs),
            cell(ours)
        );
        if let Some(o) = ours {
            figures.push(Figure::new(
                &format!("startup.{name}"),
                &format!("start-up, whole process: {label}"),
                o as f64,
            ));
        }
    }
    md.push_str("\nrdma-core's programs are dynamic (libibverbs scans /etc/libibverbs.d and loads its providers); rverbs' are static-pie binaries built like `cargo xtask dist`.\n");
    if !figures.is_empty() {
        guard::record(out_dir, "startup", &figures)?;
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_come_from_the_summary_line() {
        let dir = std::env::temp_dir().join(format!("xtask-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cg");
        std::fs::write(&f, "events: Ir\nfn=(1) main\n0 5\nsummary: 240178\n").unwrap();
        assert_eq!(total(&f), Some(240178));
        assert_eq!(total(&dir.join("missing")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_script_runs_both_stacks_for_every_row() {
        let s = script();
        for (name, ..) in ROWS {
            assert!(s.contains(&format!("st rverbs-{name} ")));
            assert!(s.contains(&format!("st ibv-{name} ")));
        }
    }
}

//! The two checkers `cargo xtask test` runs beside the host tests, one
//! counted line per run:
//!
//! - **Miri** (nightly) over the host tests of `src/mr/` (MR memory: the
//!   copy engine, racing copies of different alignment) and the
//!   providers' host tests, which drive their `unsafe` ring code over heap
//!   memory: provider-rxe's tests against its
//!   fake kernel side, provider-mlx5's unit tests and its integration tests
//!   over the device model, except `model_loopback` (its random sequences of
//!   hundreds of operations take minutes per case under Miri: one 2-case run
//!   of a single test took four minutes, `many_wraps` over ten) and
//!   `golden` (it compiles and runs a C program). What those two drive is
//!   driven under Miri by the others too: every operation kind, the ring
//!   wraps, BlueFlame copies, error CQEs, the SRQ free list and the
//!   registry. Proptest cases are cut to [`MIRI_PROPTEST_CASES`]; isolation
//!   is off so proptest can read its regression files (and so replays them).
//! - **loom** over provider-mlx5's shared records (`tests/loom_records.rs`,
//!   built with `--cfg loom` in its own target directory so that the normal
//!   build is not invalidated).
//! - **rust-version**: the crates a program depends on or installs, built
//!   with the toolchain the workspace's `rust-version` names (rustup
//!   installs it if missing), so that the claim stays true.
//!
//! Miri needs the nightly toolchain with the `miri` and `rust-src`
//! components: when `miri` is missing it is added with rustup, and if that
//! fails the run fails, never skips.

use crate::host::{target_dir, workspace_root, Result};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Proptest cases per property under Miri (the normal run keeps 256).
const MIRI_PROPTEST_CASES: &str = "4";

/// The Miri runs, in two lanes: Miri interprets a test program on one
/// thread, so the lanes run at once, one per core of the 2-core machines
/// the suite is sized for. provider-mlx5's unit tests (about 35 s), the MR
/// tests (about 35 s), the C ABI's (about 50 s) and then loom (about 80 s,
/// most of it its build) are one lane; provider-rxe's (about 100 s),
/// provider-mlx5's model tests (about 90 s) and then the rust-version build
/// the other: the lanes split [`MIRI_RUNS`] here.
const MIRI_LANE_SPLIT: usize = 3;

/// The Miri runs: what each is called, and `cargo miri test`'s arguments.
const MIRI_RUNS: [(&str, &[&str]); 5] = [
    (
        "miri: provider-mlx5 unit tests",
        &["-p", "provider-mlx5", "--lib"],
    ),
    // The MR copy engine and its racing copies, the buffers' raw parts,
    // the IOVA and bounds checks: every host test of src/mr/.
    (
        "miri: rverbs src/mr tests",
        &["-p", "rverbs", "--lib", "--", "mr::"],
    ),
    // The C ABI's host tests: C structs read member by member, the
    // extended CQ's and QP's C tails written through UnsafeCells, events
    // against destroys, the panic guards (those that compile C programs
    // are ignored under Miri, which cannot run them).
    (
        "miri: rverbs-libibverbs tests",
        &["-p", "rverbs-libibverbs", "--lib"],
    ),
    ("miri: provider-rxe tests", &["-p", "provider-rxe"]),
    (
        "miri: provider-mlx5 model_directed, model_errors, model_registry, model_prepared",
        &[
            "-p",
            "provider-mlx5",
            "--test",
            "model_directed",
            "--test",
            "model_errors",
            "--test",
            "model_registry",
            "--test",
            "model_prepared",
        ],
    ),
];

/// The loom run's name.
const LOOM: &str = "loom: provider-mlx5 records (tests/loom_records.rs)";

/// A check run at the end of a Miri lane.
type Check = fn() -> Result<()>;

/// The rust-version build's name.
const MSRV: &str =
    "rust-version: the library crates and the tool build with the oldest Rust they claim";

/// Runs Miri and loom, handing `report` each run's name and result as it
/// ends.
pub fn run(mut report: impl FnMut(&str, Result<()>)) {
    println!("xtask: == Miri and loom");
    match ensure_miri() {
        Ok(()) => {
            // Each lane's lines are echoed as they come, tagged with the
            // lane; the results are reported in the runs' order.
            let results: Vec<(&str, Result<()>)> = std::thread::scope(|s| {
                let (first, second) = MIRI_RUNS.split_at(MIRI_LANE_SPLIT);
                // Each lane ends with one more run: loom, and the
                // rust-version build (a core would idle otherwise).
                let tails: [(&str, Check); 2] = [(LOOM, loom_test), (MSRV, msrv_build)];
                let lanes = [(first, tails[0]), (second, tails[1])].map(|(runs, (last, f))| {
                    s.spawn(move || {
                        let mut done: Vec<_> = runs
                            .iter()
                            .map(|&(what, args)| (what, timed(what, || miri_test(args, what))))
                            .collect();
                        done.push((last, timed(last, f)));
                        done
                    })
                });
                lanes
                    .into_iter()
                    .flat_map(|lane| {
                        lane.join().unwrap_or_else(|_| {
                            vec![("miri: a lane", Err("its thread panicked".into()))]
                        })
                    })
                    .collect()
            });
            for (what, result) in results {
                report(what, result);
            }
        }
        Err(e) => {
            for (what, _) in MIRI_RUNS {
                report(what, Err(e.clone()));
            }
            report(LOOM, timed(LOOM, loom_test));
            report(MSRV, timed(MSRV, msrv_build));
        }
    }
}

/// The crates a program depends on or installs (the tool, the C ABI), by
/// directory: what `rust-version` promises. The test-only crates (xtask,
/// vm-tests, the device model) and dev-dependencies need newer Rust and
/// claim none.
const MSRV_PACKAGES: [(&str, &str); 8] = [
    ("uverbs-abi", "uverbs-abi"),
    ("types", "rverbs-types"),
    ("provider-rxe", "provider-rxe"),
    ("provider-mlx5", "provider-mlx5"),
    ("cm", "rverbs-cm"),
    (".", "rverbs"),
    ("libibverbs", "rverbs-libibverbs"),
    ("tool", "rverbs-tool"),
];

/// The `rust-version = "…"` line of a manifest, if it has one.
fn rust_version_in(dir: &str) -> Result<Option<String>> {
    let path = workspace_root().join(dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text.lines().find_map(|l| {
        let v = l
            .trim()
            .strip_prefix("rust-version")?
            .trim()
            .strip_prefix('=')?;
        Some(v.trim().trim_matches('"').to_string())
    }))
}

/// Builds each of [`MSRV_PACKAGES`] (libraries and binaries, every feature
/// of the root crate) with the toolchain its `rust-version` names (its own
/// or the workspace's), installing it with rustup if it is missing, in a
/// target directory of its own.
fn msrv_build() -> Result<()> {
    let workspace = rust_version_in(".")?.ok_or("Cargo.toml: no rust-version")?;
    let mut by_version: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for (dir, package) in MSRV_PACKAGES {
        let v = rust_version_in(dir)?.unwrap_or_else(|| workspace.clone());
        by_version.entry(v).or_default().push(package);
    }
    for (v, packages) in by_version {
        build_with(&v, &packages)?;
    }
    Ok(())
}

fn build_with(claimed: &str, packages: &[&str]) -> Result<()> {
    // `rust-version = "1.85"` claims 1.85.0, the oldest 1.85 (rustup's
    // `1.85` would be the newest).
    let mut v = claimed.to_string();
    if v.matches('.').count() == 1 {
        v.push_str(".0");
    }
    let toolchain = |args: &[&str]| {
        let mut c = Command::new("rustup");
        c.args(args).current_dir(workspace_root());
        c.env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO");
        c
    };
    let have = toolchain(&["run", &v, "rustc", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        println!("xtask: installing Rust {v} (rust-version) with rustup");
        crate::host::run(&mut toolchain(&[
            "toolchain",
            "install",
            &v,
            "--profile",
            "minimal",
        ]))?;
    }
    let mut c = toolchain(&["run", &v, "cargo", "build", "--quiet", "--lib", "--bins"]);
    for p in packages {
        c.args(["-p", p]);
    }
    if packages.contains(&"rverbs") {
        c.args(["--features", "rverbs/tokio,rverbs/memmap2"]);
    }
    c.arg("--target-dir").arg(target_dir().join("msrv"));
    crate::host::run(&mut c).map_err(|e| format!("Rust {v} ({}): {e}", packages.join(", ")))
}

fn timed(what: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    let start = Instant::now();
    let r = f();
    println!("xtask: {what}: {}s", start.elapsed().as_secs());
    r
}

/// `rustup run nightly cargo ARGS` from the workspace root.
pub fn nightly_cargo() -> Command {
    let mut c = Command::new("rustup");
    c.args(["run", "nightly", "cargo"])
        .current_dir(workspace_root());
    // The outer cargo's choice of toolchain must not leak into nightly's.
    c.env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO");
    c
}

fn miri_works() -> bool {
    nightly_cargo()
        .args(["miri", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes sure `cargo miri` runs on the nightly toolchain, adding the
/// components if they are missing.
fn ensure_miri() -> Result<()> {
    if miri_works() {
        return Ok(());
    }
    println!(
        "xtask: Miri is missing; running rustup component add --toolchain nightly miri rust-src"
    );
    let added = Command::new("rustup")
        .args([
            "component",
            "add",
            "--toolchain",
            "nightly",
            "miri",
            "rust-src",
        ])
        .status();
    match added {
        Ok(s) if s.success() && miri_works() => Ok(()),
        Ok(s) if s.success() => Err("rustup added miri, but `cargo +nightly miri` still does not run".into()),
        Ok(s) => Err(format!(
            "Miri is not available and `rustup component add --toolchain nightly miri rust-src` failed ({s}): the Miri step needs the nightly toolchain with those components"
        )),
        Err(e) => Err(format!(
            "Miri is not available and rustup cannot be run ({e}): the Miri step needs rustup's nightly toolchain with the miri and rust-src components"
        )),
    }
}

/// `cargo miri test ARGS`, its output lines tagged with `what`.
fn miri_test(args: &[&str], what: &str) -> Result<()> {
    let mut c = nightly_cargo();
    c.args(["miri", "test"])
        .args(args)
        .env("MIRIFLAGS", "-Zmiri-disable-isolation")
        .env("PROPTEST_CASES", MIRI_PROPTEST_CASES);
    run_libtest(c, &format!("[{}] ", what.trim_start_matches("miri: ")))
}

fn loom_test() -> Result<()> {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    flags.push_str(" --cfg loom");
    c.current_dir(workspace_root())
        .args([
            "test",
            "-p",
            "provider-mlx5",
            "--test",
            "loom_records",
            "--release",
        ])
        .arg("--target-dir")
        .arg(target_dir().join("loom"))
        .env("RUSTFLAGS", flags.trim());
    run_libtest(c, "[loom] ")
}

/// Runs a `cargo test`-like command, echoing its output (each line after
/// `tag`): it must exit 0 and its libtest summaries must show tests run
/// and none failed.
fn run_libtest(mut c: Command, tag: &str) -> Result<()> {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", c.get_program()))?;
    let (mut passed, mut failed) = (0u64, 0u64);
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.map_err(|e| e.to_string())?;
        println!("{tag}{line}");
        if let Some((p, f)) = crate::libtest::parse_test_result(&line) {
            passed += p;
            failed += f;
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() || failed > 0 {
        return Err(format!("{passed} passed, {failed} failed ({status})"));
    }
    if passed == 0 {
        return Err("ran no test".into());
    }
    Ok(())
}

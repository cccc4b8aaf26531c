//! The fuzz targets of `fuzz/` (a cargo-fuzz crate outside the workspace),
//! each run briefly by `cargo xtask test`: one pass or failure per target.
//!
//! They need the nightly toolchain and cargo-fuzz. cargo-fuzz is installed
//! here when it is missing (`cargo install --locked cargo-fuzz`); a missing
//! nightly toolchain fails every target, naming what to install. Builds go
//! to `target/fuzz` (address sanitizer, cargo-fuzz's defaults); the corpus
//! grows in `fuzz/corpus/TARGET` and a crashing input is saved in
//! `fuzz/artifacts/TARGET/`.

use crate::host::{target_dir, workspace_root, Result};
use std::process::{Command, Stdio};
use std::time::Instant;

/// How long each target runs in `cargo xtask test` (a smoke run over the
/// corpus and new inputs; `cargo +nightly fuzz run` for longer).
pub const SECONDS_EACH: u32 = 4;

/// The outcome of each target: its name and `Ok` or why it failed. A
/// failure to set up (no nightly, no cargo-fuzz, no build) fails them all.
pub fn run_all() -> Vec<(String, Result<()>)> {
    let targets = match setup() {
        Ok(t) => t,
        Err((targets, why)) => return targets.into_iter().map(|t| (t, Err(why.clone()))).collect(),
    };
    // Two at a time: a libFuzzer run is one thread, and the machines the
    // suite is sized for have two cores.
    targets
        .chunks(2)
        .flat_map(|pair| {
            std::thread::scope(|s| {
                let runs: Vec<_> = pair
                    .iter()
                    .map(|t| s.spawn(move || (t.clone(), run_one(t))))
                    .collect();
                runs.into_iter()
                    .zip(pair)
                    .map(|(run, t)| {
                        run.join()
                            .unwrap_or_else(|_| (t.clone(), Err("its thread panicked".to_string())))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect()
}

/// `cargo` for the fuzz crate: the rustup proxy (so that `+nightly`
/// works), without the variables the outer `cargo xtask` set, which would
/// point cargo-fuzz at the stable toolchain.
fn cargo() -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(workspace_root());
    for v in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "RUSTC_WRAPPER",
    ] {
        c.env_remove(v);
    }
    c
}

/// Checks the toolchain, installs cargo-fuzz if needed, lists and builds
/// the targets.
fn setup() -> std::result::Result<Vec<String>, (Vec<String>, String)> {
    // The target names, from the manifest (no tool needed to read them).
    let manifest = workspace_root().join("fuzz").join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        (
            vec!["fuzz".to_string()],
            format!("{}: {e}", manifest.display()),
        )
    })?;
    let targets = bin_names(&text);
    if targets.is_empty() {
        return Err((
            vec!["fuzz".into()],
            format!("no [[bin]] in {}", manifest.display()),
        ));
    }
    let fail = |why: String| (targets.clone(), why);
    let nightly = cargo().args(["+nightly", "--version"]).output();
    if !nightly.is_ok_and(|o| o.status.success()) {
        return Err(fail(
            "the nightly toolchain is missing (cargo +nightly failed): rustup toolchain install nightly".into(),
        ));
    }
    let has_fuzz = cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_fuzz {
        println!("xtask: installing cargo-fuzz (cargo install --locked cargo-fuzz)");
        crate::host::run(cargo().args(["install", "--locked", "cargo-fuzz"]))
            .map_err(|e| fail(format!("installing cargo-fuzz: {e}")))?;
    }
    let start = Instant::now();
    crate::host::run(&mut cargo_fuzz("build"))
        .map_err(|e| fail(format!("building the fuzz targets: {e}")))?;
    println!(
        "xtask: fuzz targets built in {:.0}s",
        start.elapsed().as_secs_f64()
    );
    Ok(targets)
}

/// `cargo +nightly fuzz SUBCOMMAND` with the build options every call
/// must share (or `run` would rebuild): 16 codegen units (cargo-fuzz's
/// default of 1 makes the first build half again as long on two cores),
/// the target directory `target/fuzz`.
fn cargo_fuzz(subcommand: &str) -> Command {
    let mut c = cargo();
    c.args(["+nightly", "fuzz", subcommand, "--codegen-units", "16"])
        .arg("--target-dir")
        .arg(target_dir().join("fuzz"));
    c
}

/// The `name`s of the `[[bin]]` sections of a cargo-fuzz manifest.
fn bin_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin {
            if let Some(v) = line.strip_prefix("name").map(str::trim_start) {
                if let Some(v) = v.strip_prefix('=') {
                    names.push(v.trim().trim_matches('"').to_string());
                }
            }
        }
    }
    names
}

/// Runs one target for `SECONDS_EACH`; a crash or a leak fails it.
fn run_one(target: &str) -> Result<()> {
    let start = Instant::now();
    let out = cargo_fuzz("run")
        .args([
            target,
            "--",
            &format!("-max_total_time={SECONDS_EACH}"),
            "-timeout=10",
            "-rss_limit_mb=2048",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    let done = log
        .lines()
        .rev()
        .find(|l| l.starts_with("Done "))
        .unwrap_or("(no summary line)");
    println!(
        "xtask: fuzz {target}: {done} ({:.0}s)",
        start.elapsed().as_secs_f64()
    );
    if out.status.success() && log.lines().any(|l| l.starts_with("Done ")) {
        return Ok(());
    }
    let lines: Vec<&str> = log.lines().collect();
    for l in &lines[lines.len().saturating_sub(40)..] {
        println!("    {l}");
    }
    let artifact = lines
        .iter()
        .find_map(|l| l.split("Test unit written to ").nth(1))
        .unwrap_or("none saved");
    Err(format!(
        "{} (crashing input: {artifact}; make it a #[test] of the parser)",
        out.status
    ))
}

#[cfg(test)]
mod tests {
    use super::bin_names;

    #[test]
    fn bin_names_come_from_bin_sections_only() {
        let m = "[package]\nname = \"rverbs-fuzz\"\n\n[[bin]]\nname = \"netlink\"\npath = \"x\"\n\n[dependencies]\nname = 3\n[[bin]]\nname=\"rxe_cq\"\n";
        assert_eq!(bin_names(m), ["netlink", "rxe_cq"]);
    }
}

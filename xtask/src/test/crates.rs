//! Other projects' test suites through the test bed (issue 31): published
//! RDMA crates, fetched from the registry and left unchanged, run
//! `cargo test` with `rverbs-testbed run` as their runner, once over
//! rdma-core's `libibverbs.so.1` in the VM and once over ours. Each test
//! binary's result is compared with what is expected of it, and every
//! expected failure carries its cause.

use super::{cargo, Tally};
use crate::host::{target_dir, Result};
use crate::libtest::parse_test_result;
use crate::vm;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A published crate whose suite runs through the bed. Every suite here
/// opens an RDMA device in its tests (on a host without one they fail).
struct Suite {
    name: &'static str,
    version: &'static str,
    /// SHA-256 of the registry's `.crate` file (the index's `cksum`): the
    /// sources are the published ones, byte for byte.
    sha256: &'static str,
    /// What `cargo test` runs of the suite, and why, when not all of it.
    targets: &'static [&'static str],
    /// `RUSTFLAGS` for its build, and why, when any.
    rustflags: Option<&'static str>,
    /// Test binaries (as cargo names them: `tests/compiletest.rs`) that
    /// fail in the VM, each with a line of its output and the cause.
    fails: &'static [(&'static str, &'static str, &'static str)],
    /// Tests that may fail in the VM, for a reason of theirs (timing
    /// under TCG): binary, the tests' common name prefix, a line of the
    /// failure, cause. A binary whose failures are all such tests, with
    /// that line, is accepted and the failures printed as a warning.
    flaky: &'static [Flaky],
}

/// Tests that may fail in the VM: binary, the tests' name prefix, a line
/// of their failure, cause.
type Flaky = (&'static str, &'static str, &'static str, &'static str);

const SUITES: [Suite; 2] = [
    Suite {
        name: "sideway",
        version: "0.4.3",
        sha256: "7669500361477013bc37bcf21f6c9cd6ffcf4839b6fbffb3cb9df11e30a78c3e",
        targets: &[],
        rustflags: None,
        fails: &[(
            "tests/compiletest.rs",
            "failed to execute cargo",
            "the bed: trybuild runs cargo inside the guest, whose root is the host's, read-only, without ~/.cargo/bin on PATH",
        )],
        flaky: &[(
            "tests/test_post_send.rs",
            "main::case_",
            "CompletionQueueEmpty",
            "their test: its four cases (run at once) each poll a CQ once, 10 ms after posting (tests/test_post_send.rs:186-205, 250-269), and under TCG rxe can take longer (case_1 failed 1 run in 4 over rdma-core on 2026-11-27)",
        )],
    },
    Suite {
        name: "async-rdma",
        version: "0.5.0",
        sha256: "98d0ceeadfe6c2f1e07c7f44750e6a3c1f00bec489ad8aa25dd6da242dedbffa",
        // Its 39 doctests each boot a VM of their own (rustdoc runs every
        // example as a program through the runner): about 290 s a
        // library, which `cargo xtask test` cannot afford twice; they
        // were run by hand (README's table). Three test files hold no
        // test under the default features and are not booted either:
        // cancel_safety.rs (feature `cancel_safety_test`), time.rs (its
        // test commented out), test_utilities.rs (helpers). What runs:
        // all 51 unit and integration tests, in 8 binaries.
        targets: &[
            "--lib",
            "--test",
            "atomic",
            "--test",
            "device",
            "--test",
            "imm",
            "--test",
            "loop",
            "--test",
            "mr_slice",
            "--test",
            "rmr_access",
            "--test",
            "rmr_timeout",
        ],
        // The crate denies lints that compilers newer than it added
        // (static_mut_refs, unpredictable_function_pointer_comparisons:
        // 34 errors with 1.95): capped to warnings (cargo caps a registry
        // dependency's lints the same way, at allow).
        rustflags: Some("--cap-lints=warn"),
        fails: &[],
        flaky: &[],
    },
];

/// Which libibverbs a run loads.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Lib {
    RdmaCore,
    Ours,
}

impl Lib {
    fn label(self) -> &'static str {
        match self {
            Lib::RdmaCore => "rdma-core's libibverbs",
            Lib::Ours => "rverbs' libibverbs.so.1",
        }
    }
}

/// One test binary's summary: cargo's name for it, passed, failed, and
/// its output lines.
struct Binary {
    name: String,
    passed: u64,
    failed: u64,
    /// Whether libtest printed its summary (a crash, a VM that never
    /// booted or a bed error leaves none).
    summarised: bool,
    lines: Vec<String>,
}

/// Splits `cargo test`'s output into its test binaries ("Running
/// tests/x.rs (…)", "Doc-tests name") and their summaries.
fn binaries(lines: &[String]) -> Vec<Binary> {
    let mut out: Vec<Binary> = Vec::new();
    for l in lines {
        let t = l.trim();
        let name = if let Some(r) = t.strip_prefix("Running ") {
            Some(r.split(" (").next().unwrap_or(r).to_string())
        } else {
            t.strip_prefix("Doc-tests ")
                .map(|n| format!("doctests of {n}"))
        };
        if let Some(name) = name {
            out.push(Binary {
                name,
                passed: 0,
                failed: 0,
                summarised: false,
                lines: Vec::new(),
            });
            continue;
        }
        if let Some(b) = out.last_mut() {
            if let Some((p, f)) = parse_test_result(t) {
                b.passed += p;
                b.failed += f;
                b.summarised = true;
            }
            b.lines.push(l.clone());
        }
    }
    out
}

/// curl's options: fail on an HTTP error, bounded in time (a stalled
/// connection must not hang the suite), retried on any error.
const CURL: &[&str] = &[
    "-fsSL",
    "--connect-timeout",
    "20",
    "--max-time",
    "300",
    "--retry",
    "3",
    "--retry-all-errors",
];

/// crates.io's sparse index, whose `config.json` names where its crate
/// files are downloaded from (cargo's own source of them).
const INDEX: &str = "https://index.crates.io";

/// The URL of a crate file, from the index's `dl` template as cargo forms
/// it: its markers (`{crate}`, `{version}`, `{prefix}`, `{lowerprefix}`,
/// `{sha256-checksum}`) replaced; with none, `{dl}/{crate}/{version}/download`.
fn download_url(dl: &str, name: &str, version: &str, sha256: &str) -> String {
    const MARKERS: [&str; 5] = [
        "{crate}",
        "{version}",
        "{prefix}",
        "{lowerprefix}",
        "{sha256-checksum}",
    ];
    if !MARKERS.iter().any(|m| dl.contains(m)) {
        return format!("{dl}/{name}/{version}/download");
    }
    // The index's directory of a name: 1, 2, 3/a, or ab/cd.
    let prefix = match name.len() {
        1 => "1".to_string(),
        2 => "2".to_string(),
        3 => format!("3/{}", &name[..1]),
        _ => format!("{}/{}", &name[..2], &name[2..4]),
    };
    dl.replace("{crate}", name)
        .replace("{version}", version)
        .replace("{lowerprefix}", &prefix.to_lowercase())
        .replace("{prefix}", &prefix)
        .replace("{sha256-checksum}", sha256)
}

/// The crates' sources, unchanged from the registry: each `.crate` file
/// is downloaded from where the index says, checked against its pinned
/// SHA-256 and unpacked under /tmp/rverbs-ext/src, outside this
/// repository (a package under it would belong to this workspace, whose
/// members include "."). Not through a scratch package's `cargo
/// metadata`: async-rdma 0.5.0 no longer resolves (its `hex-simd` 0.5
/// needs yanked `simd-abstraction` versions); its own `Cargo.lock`, which
/// it ships, still builds (`--locked`).
fn fetch() -> Result<Vec<PathBuf>> {
    let root = std::env::temp_dir().join("rverbs-ext");
    let src = root.join("src");
    std::fs::create_dir_all(&src).map_err(|e| e.to_string())?;
    let mut dl: Option<String> = None;
    let mut dirs = Vec::new();
    for s in &SUITES {
        let dst = src.join(format!("{}-{}", s.name, s.version));
        let stamp = root.join(format!("{}-{}.sha256", s.name, s.version));
        if dst.join("Cargo.toml").is_file()
            && std::fs::read_to_string(&stamp).is_ok_and(|h| h == s.sha256)
        {
            dirs.push(dst);
            continue;
        }
        let dl = match &dl {
            Some(d) => d.clone(),
            None => {
                let config = crate::host::output(
                    Command::new("curl")
                        .args(CURL)
                        .arg(format!("{INDEX}/config.json")),
                )?;
                let config: serde_json::Value = serde_json::from_str(&config)
                    .map_err(|e| format!("{INDEX}/config.json: {e}"))?;
                let d = config["dl"]
                    .as_str()
                    .ok_or(format!("{INDEX}/config.json names no dl"))?
                    .to_string();
                dl = Some(d.clone());
                d
            }
        };
        let file = root.join(format!("{}-{}.crate", s.name, s.version));
        crate::host::run(
            Command::new("curl")
                .args(CURL)
                .arg("-o")
                .arg(&file)
                .arg(download_url(&dl, s.name, s.version, s.sha256)),
        )?;
        let sum = crate::host::output(Command::new("sha256sum").arg(&file))?;
        let sum = sum.split_whitespace().next().unwrap_or("");
        if sum != s.sha256 {
            return Err(format!(
                "{} {}: the downloaded crate's SHA-256 is {sum}, not the pinned {}",
                s.name, s.version, s.sha256
            ));
        }
        // The stamp goes first: a tree whose unpacking was cut short is
        // never taken for a finished one.
        let _ = std::fs::remove_file(&stamp);
        let _ = std::fs::remove_dir_all(&dst);
        crate::host::run(
            Command::new("tar")
                .arg("xzf")
                .arg(&file)
                .arg("-C")
                .arg(&src),
        )?;
        std::fs::write(&stamp, s.sha256).map_err(|e| e.to_string())?;
        dirs.push(dst);
    }
    Ok(dirs)
}

/// A directory holding our library as `libibverbs.so.1` (the name both
/// the dynamic linker and a `dlopen` ask for), under target/.
fn our_lib_dir() -> Result<PathBuf> {
    let lib = super::build_cshim()?;
    let dir = target_dir().join("ext").join("lib");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let link = dir.join("libibverbs.so.1");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(lib, &link).map_err(|e| e.to_string())?;
    Ok(dir)
}

/// `cargo test --no-fail-fast` of the crate in `dir` through the bed on
/// `kernel`, over `lib`: the output's lines (echoed as they come).
fn cargo_test(
    s: &Suite,
    dir: &Path,
    bed: &Path,
    kernel: &vm::Kernel,
    lib: Lib,
    ours: &Path,
) -> Result<(bool, Vec<String>)> {
    let mut runner = vec![
        bed.display().to_string(),
        "run".into(),
        "--kernel".into(),
        kernel.name.into(),
        "--timeout".into(),
        "300".into(),
    ];
    // LD_DEBUG=files: the loader names each object it initialises, so the
    // run shows which library the crate's tests used.
    let mut env = vec!["LD_DEBUG=files".to_string()];
    if lib == Lib::Ours {
        env.push(format!("LD_LIBRARY_PATH={}", ours.display()));
    }
    for kv in env {
        runner.push("--env".into());
        runner.push(kv);
    }
    runner.push("--".into());
    let quoted: Vec<String> = runner.iter().map(|a| super::runner::toml_str(a)).collect();
    let config = format!(
        "target.x86_64-unknown-linux-gnu.runner=[{}]",
        quoted.join(", ")
    );
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    // One pipe for both streams, so that cargo's "Running" lines
    // (stderr) and each binary's output (stdout) come in the order
    // written.
    let (reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
    let writer2 = writer.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The suite's flags and nothing from our environment (cargo would
    // prefer CARGO_ENCODED_RUSTFLAGS to RUSTFLAGS).
    cmd.env("RUSTFLAGS", s.rustflags.unwrap_or(""))
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTDOCFLAGS")
        .env_remove("CARGO_ENCODED_RUSTDOCFLAGS");
    // --locked: the versions the crate was published with (its own
    // Cargo.lock), not today's resolution.
    let mut child = cmd
        .current_dir(dir)
        .args(["test", "--locked", "--no-fail-fast", "--config", &config])
        .args(s.targets)
        .env(
            "CARGO_TARGET_DIR",
            target_dir().join("ext").join("target").join(&*name),
        )
        .env("RVERBS_TESTBED_CACHE", vm::cache_dir())
        .stdout(writer)
        .stderr(writer2)
        .spawn()
        .map_err(|e| format!("cargo test of {name}: {e}"))?;
    // The command holds its copies of the pipe's write end: dropped, so
    // that the reader sees the end of the output when cargo exits.
    drop(cmd);
    // Read to the end whatever the bytes (a line that is not UTF-8 must
    // not close the pipe on cargo).
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(reader);
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {
                let l = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\n', '\r'])
                    .to_string();
                println!("[{name}] {l}");
                lines.push(l);
            }
            Err(e) => return Err(format!("reading cargo test of {name}: {e}")),
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok((status.success(), lines))
}

/// Each suite over each library on `kernel`: one counted line per suite
/// and library; the table of binaries is printed.
pub(super) fn checks(tally: &mut Tally, kernel: &'static vm::Kernel, libs: &[Lib]) {
    let prepared = (|| -> Result<_> {
        // Their build scripts: sideway's rdma-mummy-sys configures
        // rdma-core's headers with cmake and both generate bindings with
        // bindgen (libclang); async-rdma's rdma-sys finds libibverbs and
        // librdmacm with pkg-config, and its jemalloc builds with make.
        // curl fetches the crate files.
        vm::host::install_missing(&[
            "make",
            "cmake",
            "libclang-dev",
            "clang",
            "pkg-config",
            "libibverbs-dev",
            "librdmacm-dev",
            "curl",
        ])?;
        crate::host::run(cargo().args(["build", "--quiet", "-p", "rverbs-testbed"]))?;
        Ok((
            target_dir().join("debug").join("rverbs-testbed"),
            fetch()?,
            our_lib_dir()?,
        ))
    })();
    let (bed, dirs, ours) = match prepared {
        Ok(p) => p,
        Err(e) => return tally.fail("published crates' suites through the test bed", &e),
    };
    for (s, dir) in SUITES.iter().zip(&dirs) {
        for &lib in libs {
            let what = format!(
                "{} {}'s unchanged `cargo test` in the VM through the bed, over {} ({kernel})",
                s.name,
                s.version,
                lib.label()
            );
            match suite(s, dir, &bed, kernel, lib, &ours) {
                Ok(table) => {
                    println!("{table}");
                    tally.pass(&what)
                }
                Err(e) => tally.fail(&what, &e),
            }
        }
    }
}

/// One binary's result against the suite's expectations: the cause to
/// print beside it, and what is wrong with it, if anything (a flaky
/// test's accepted failure is printed as a warning).
fn judge(s: &Suite, b: &Binary) -> (&'static str, Option<String>) {
    let has = |needle: &str| b.lines.iter().any(|l| l.contains(needle));
    if let Some(&(_, line, cause)) = s.fails.iter().find(|f| f.0 == b.name) {
        return if b.failed == 0 {
            (
                cause,
                Some(format!("{} passed, but it was expected to fail", b.name)),
            )
        } else if !has(line) {
            (cause, Some(format!("{} failed without {line:?}", b.name)))
        } else {
            (cause, None)
        };
    }
    if b.failed == 0 {
        return ("", None);
    }
    let failed_tests: Vec<&String> = b
        .lines
        .iter()
        .filter(|l| l.trim_start().starts_with("test ") && l.trim_end().ends_with("... FAILED"))
        .collect();
    match s.flaky.iter().find(|f| f.0 == b.name) {
        Some(&(_, prefix, line, cause))
            if failed_tests.len() as u64 == b.failed
                && failed_tests
                    .iter()
                    .all(|l| l.trim_start().starts_with(&format!("test {prefix}")))
                && has(line) =>
        {
            println!(
                "xtask: warning: {} {}: {} failed ({line}): {cause}",
                s.name, b.name, b.failed
            );
            (cause, None)
        }
        _ => ("", Some(format!("{}: {} failed", b.name, b.failed))),
    }
}

/// Runs one suite and checks it: every binary ran tests, the ones
/// expected to fail fail with their line and nothing else fails; over
/// ours, the loader initialised our library and no rdma-core provider.
/// Returns the table rows.
fn suite(
    s: &Suite,
    dir: &Path,
    bed: &Path,
    kernel: &vm::Kernel,
    lib: Lib,
    ours: &Path,
) -> Result<String> {
    let (ok, lines) = cargo_test(s, dir, bed, kernel, lib, ours)?;
    let bins = binaries(&lines);
    if bins.is_empty() {
        return Err("cargo test ran no test binary".into());
    }
    let mut table = format!(
        "| {} {} over {} | passed | failed | cause |\n| --- | --- | --- | --- |\n",
        s.name,
        s.version,
        lib.label()
    );
    let mut problems = Vec::new();
    for b in &bins {
        let (cause, problem) = judge(s, b);
        problems.extend(problem);
        if !b.summarised {
            problems.push(format!("{} printed no summary (crashed?)", b.name));
        }
        table.push_str(&format!(
            "| {} | {} | {} | {cause} |\n",
            b.name, b.passed, b.failed
        ));
    }
    let ran: u64 = bins.iter().map(|b| b.passed + b.failed).sum();
    if ran == 0 {
        problems.push("no test ran".into());
    }
    // The loader's trace (LD_DEBUG=files) says which libibverbs each test
    // binary initialised, and whether an rdma-core provider came with
    // it. No binary may load the other library, nor a provider over
    // ours; the suite as a whole must load the one asked for (and over
    // rdma-core a provider). A binary whose tests never call libibverbs
    // loads none (the linker dropped it): async-rdma's tests/device.rs.
    let ours_init = format!("calling init: {}", ours.join("libibverbs.so.1").display());
    let (mut any_theirs, mut any_ours, mut any_provider) = (false, false, false);
    for b in &bins {
        let inits: Vec<&String> = b
            .lines
            .iter()
            .filter(|l| l.contains("calling init: "))
            .collect();
        let theirs = inits
            .iter()
            .any(|l| l.contains("/x86_64-linux-gnu/libibverbs.so.1"));
        let ours_loaded = inits.iter().any(|l| l.contains(&ours_init));
        let provider = inits.iter().any(|l| l.contains("-rdmav"));
        (any_theirs, any_ours, any_provider) = (
            any_theirs || theirs,
            any_ours || ours_loaded,
            any_provider || provider,
        );
        match lib {
            Lib::Ours if theirs || provider => problems.push(format!(
                "{} over ours: rdma-core's library initialised {theirs}, a provider {provider}",
                b.name
            )),
            Lib::RdmaCore if ours_loaded => problems.push(format!(
                "{} over rdma-core: our library initialised",
                b.name
            )),
            _ => {}
        }
    }
    match lib {
        Lib::Ours if !any_ours => problems.push("over ours: no test binary initialised our library".into()),
        Lib::RdmaCore if !any_theirs || !any_provider => problems.push(format!(
            "over rdma-core: its library initialised {any_theirs}, a provider {any_provider}, by any test binary"
        )),
        _ => {}
    }
    // cargo's status agrees: it fails exactly when a binary failed or
    // crashed.
    if ok == bins.iter().any(|b| b.failed > 0 || !b.summarised) {
        problems.push(format!(
            "cargo test {}",
            if ok { "passed" } else { "failed" }
        ));
    }
    if problems.is_empty() {
        Ok(table)
    } else {
        Err(format!("{}\n{table}", problems.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use super::{download_url, judge, Binary, SUITES};

    fn binary(name: &str, passed: u64, failed: u64, lines: &[&str]) -> Binary {
        Binary {
            name: name.into(),
            passed,
            failed,
            summarised: true,
            lines: lines.iter().map(|l| l.to_string()).collect(),
        }
    }

    #[test]
    fn flaky_tests_are_accepted_only_alone_and_with_their_line() {
        let sideway = &SUITES[0];
        let bin = "tests/test_post_send.rs";
        let its = [
            "test main::case_1 ... FAILED",
            "called `Result::unwrap()` on an `Err` value: CompletionQueueEmpty",
        ];
        assert!(judge(sideway, &binary(bin, 3, 1, &its)).1.is_none());
        assert!(judge(sideway, &binary(bin, 4, 0, &[])).1.is_none());
        let two = ["test main::case_2 ... FAILED", its[0], its[1]];
        assert!(judge(sideway, &binary(bin, 2, 2, &two)).1.is_none());
        // Another test failing, a failure not named, or another cause:
        // failures.
        let other = ["test main::other ... FAILED", its[1]];
        assert!(judge(sideway, &binary(bin, 3, 1, &other)).1.is_some());
        assert!(judge(sideway, &binary(bin, 2, 2, &its)).1.is_some());
        assert!(judge(sideway, &binary(bin, 3, 1, &its[..1])).1.is_some());
        // Elsewhere nothing is flaky; an expected failure must fail.
        assert!(judge(sideway, &binary("tests/test_qp.rs", 0, 1, &its))
            .1
            .is_some());
        assert!(judge(sideway, &binary("tests/compiletest.rs", 1, 0, &[]))
            .1
            .is_some());
        assert!(judge(&SUITES[1], &binary(bin, 3, 1, &its)).1.is_some());
    }

    #[test]
    fn download_urls_follow_cargos_rule() {
        let sum = "0123";
        assert_eq!(
            download_url("https://static.crates.io/crates", "sideway", "0.4.3", sum),
            "https://static.crates.io/crates/sideway/0.4.3/download"
        );
        assert_eq!(
            download_url(
                "https://m.example/{crate}/{crate}-{version}.crate",
                "a",
                "1.0.0",
                sum
            ),
            "https://m.example/a/a-1.0.0.crate"
        );
        assert_eq!(
            download_url(
                "https://m.example/{prefix}/{lowerprefix}/{crate}/{sha256-checksum}",
                "Async-rdma",
                "0.5.0",
                sum
            ),
            "https://m.example/As/yn/as/yn/Async-rdma/0123"
        );
        assert_eq!(
            download_url("https://m.example/{prefix}/{version}", "abc", "1", sum),
            "https://m.example/3/a/1"
        );
        assert_eq!(
            download_url("https://m.example/{prefix}/{version}", "ab", "1", sum),
            "https://m.example/2/1"
        );
    }
}

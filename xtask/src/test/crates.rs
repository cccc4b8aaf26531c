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

/// A published crate whose suite runs through the bed.
struct Suite {
    name: &'static str,
    version: &'static str,
    /// Whether its tests open an RDMA device, and so load libibverbs (on a
    /// host without a device they fail); if not, they never load it (the
    /// linker drops a library no test calls into).
    needs_device: bool,
    /// Test binaries (as cargo names them: `tests/compiletest.rs`) that
    /// fail in the VM, each with a line of its output and the cause.
    fails: &'static [(&'static str, &'static str, &'static str)],
}

const SUITES: [Suite; 2] = [
    Suite {
        name: "sideway",
        version: "0.4.3",
        needs_device: true,
        fails: &[(
            "tests/compiletest.rs",
            "failed to execute cargo",
            "the bed: trybuild runs cargo inside the guest, whose root is the host's, read-only, without ~/.cargo/bin on PATH",
        )],
    },
    Suite {
        name: "ibverbs-rs",
        version: "0.4.1",
        needs_device: false,
        fails: &[],
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

/// The crates' sources, unchanged from the registry: a scratch package
/// depending on each exact version is resolved with `cargo metadata`
/// (which fetches them), and each source directory is copied under
/// /tmp/rverbs-ext/src, outside this repository (a package under it
/// would belong to this workspace, whose members include ".").
fn fetch() -> Result<Vec<PathBuf>> {
    let root = std::env::temp_dir().join("rverbs-ext");
    let scratch = root.join("fetch");
    std::fs::create_dir_all(scratch.join("src")).map_err(|e| e.to_string())?;
    let mut manifest = String::from(
        "[package]\nname = \"fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[workspace]\n\n[dependencies]\n",
    );
    for s in &SUITES {
        manifest.push_str(&format!("{} = \"={}\"\n", s.name, s.version));
    }
    std::fs::write(scratch.join("Cargo.toml"), manifest).map_err(|e| e.to_string())?;
    std::fs::write(scratch.join("src/lib.rs"), "").map_err(|e| e.to_string())?;
    let meta = crate::host::output(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(&scratch)
            .args(["metadata", "--format-version", "1"]),
    )?;
    let meta: serde_json::Value =
        serde_json::from_str(&meta).map_err(|e| format!("cargo metadata: {e}"))?;
    let packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata: no packages")?;
    let mut dirs = Vec::new();
    for s in &SUITES {
        let p = packages
            .iter()
            .find(|p| p["name"] == s.name && p["version"] == s.version)
            .ok_or(format!("cargo metadata: no {} {}", s.name, s.version))?;
        let src = Path::new(p["manifest_path"].as_str().ok_or("no manifest_path")?)
            .parent()
            .ok_or("manifest without a directory")?
            .to_path_buf();
        let dst = root.join("src").join(format!("{}-{}", s.name, s.version));
        if !dst.join("Cargo.toml").is_file() {
            std::fs::create_dir_all(root.join("src")).map_err(|e| e.to_string())?;
            crate::host::run(Command::new("cp").arg("-r").arg(&src).arg(&dst))?;
        }
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
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(dir)
        .args(["test", "--no-fail-fast", "--config", &config])
        .env(
            "CARGO_TARGET_DIR",
            target_dir().join("ext").join("target").join(&*name),
        )
        .env("RVERBS_TESTBED_CACHE", vm::cache_dir())
        .stdout(writer)
        .stderr(writer2)
        .spawn()
        .map_err(|e| format!("cargo test of {name}: {e}"))?;
    use std::io::BufRead;
    let lines: Vec<String> = std::io::BufReader::new(reader)
        .lines()
        .map_while(std::result::Result::ok)
        .inspect(|l| println!("[{name}] {l}"))
        .collect();
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok((status.success(), lines))
}

/// Each suite over each library on `kernel`: one counted line per suite
/// and library; the table of binaries is printed.
pub(super) fn checks(tally: &mut Tally, kernel: &'static vm::Kernel, libs: &[Lib]) {
    let prepared = (|| -> Result<_> {
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
    let (ok, lines) = cargo_test(dir, bed, kernel, lib, ours)?;
    let bins = binaries(&lines);
    if bins.is_empty() {
        return Err("cargo test ran no test binary".into());
    }
    let mut table = format!(
        "| {} {} ({}) over {} | passed | failed | cause |\n| --- | --- | --- | --- |\n",
        s.name,
        s.version,
        if s.needs_device {
            "its tests open a device"
        } else {
            "its tests open no device and never load libibverbs"
        },
        lib.label()
    );
    let mut problems = Vec::new();
    for b in &bins {
        let expected = s.fails.iter().find(|f| f.0 == b.name);
        let cause = match expected {
            Some(&(_, line, cause)) => {
                if b.failed == 0 {
                    problems.push(format!("{} passed, but it was expected to fail", b.name));
                } else if !b.lines.iter().any(|l| l.contains(line)) {
                    problems.push(format!("{} failed without {line:?}", b.name));
                }
                cause
            }
            None => {
                if b.failed > 0 {
                    problems.push(format!("{}: {} failed", b.name, b.failed));
                }
                ""
            }
        };
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
    // The loader's trace (LD_DEBUG=files) says which libibverbs the tests
    // initialised, and whether an rdma-core provider came with it.
    let inits: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("calling init: "))
        .collect();
    let theirs_init = inits
        .iter()
        .any(|l| l.contains("/x86_64-linux-gnu/libibverbs.so.1"));
    let ours_init = format!("calling init: {}", ours.join("libibverbs.so.1").display());
    let ours_loaded = inits.iter().any(|l| l.contains(&ours_init));
    let provider = inits.iter().any(|l| l.contains("-rdmav"));
    match (s.needs_device, lib) {
        (true, Lib::Ours) if !ours_loaded || theirs_init || provider => problems.push(format!(
            "over ours: our library initialised {ours_loaded}, rdma-core's {theirs_init}, a provider {provider}"
        )),
        (true, Lib::RdmaCore) if !theirs_init || !provider || ours_loaded => problems.push(format!(
            "over rdma-core: its library initialised {theirs_init}, a provider {provider}, ours {ours_loaded}"
        )),
        (false, _) if theirs_init || ours_loaded => {
            problems.push("a suite that opens no device loaded a libibverbs".into())
        }
        _ => {}
    }
    // cargo's status agrees: it fails exactly when a binary is expected
    // to.
    if ok != s.fails.is_empty() {
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

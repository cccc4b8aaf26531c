//! `cargo xtask test` and `cargo xtask demo`.
//!
//! `test` installs the Debian packages it needs, then runs, in order: the
//! host tests (every workspace crate's unit, integration and doc tests,
//! except `rverbs-vm-tests`, which needs a kernel with rxe), rdma-core's
//! libmlx5 and ours against a fake mlx5 device (`fake_mlx5`), Miri over the
//! providers' tests and loom over provider-mlx5's shared records (see
//! `checkers`), each fuzz target of `fuzz/` for a few seconds (see
//! `fuzz`), then every test
//! of `vm-tests/tests/` inside one VM boot, then the test-bed checks that
//! need their own boots (exit statuses; the two-host interop in one boot,
//! `two_hosts`; four hosts on a hub, `hosts`; the bed's command as a cargo
//! runner and its faults, `runner`; loss and disorder, `netem`; a
//! 30-second soak, `soak`; the static binaries), on the default kernel
//! (6.12); then, on each other
//! kernel (6.1, 7.2), the VM tests and the two-host pingpong interop. `--kernel K` runs the whole
//! suite on K alone. It ends with one line `N passed, N failed`; a VM that
//! cannot boot counts as a failure naming its kernel, never as a skip.

mod arm64;
mod crates;
mod fake_mlx5;
mod hosts;
mod netem;
mod runner;
mod script;
mod soak;
mod two_hosts;

/// `cargo xtask netem [--suite | --bytes N]`: the loss and disorder runs
/// alone: the issue's 64 MiB streams, the suite's size, or any.
pub fn netem_main(args: &[String]) -> Result<ExitCode> {
    let scale = match args {
        [] => netem::FULL,
        [f] if f == "--suite" => netem::SUITE,
        [f, n] if f == "--bytes" => netem::Scale {
            bytes: n.clone().into(),
            ..netem::FULL
        },
        _ => return Err("netem: usage: cargo xtask netem [--suite | --bytes N]".into()),
    };
    crate::host::ensure_host_packages()?;
    let mut tally = Tally::default();
    netem::checks(&mut tally, &base_options(vm::kernels::DEFAULT), &scale);
    summary(&tally)
}

/// `cargo xtask crates [--kernel K]`: published RDMA crates' unchanged
/// test suites through the test bed as their cargo runner, over rdma-core's
/// libibverbs and over ours (`test/crates.rs`).
pub fn crates_main(args: &[String]) -> Result<ExitCode> {
    let kernel = match args {
        [] => vm::kernels::DEFAULT,
        [f, k] if f == "--kernel" => vm::Kernel::by_name(k)?,
        _ => return Err("crates: usage: cargo xtask crates [--kernel K]".into()),
    };
    crate::host::ensure_host_packages()?;
    vm::prepare(kernel)?;
    let mut tally = Tally::default();
    crates::checks(
        &mut tally,
        kernel,
        &[crates::Lib::RdmaCore, crates::Lib::Ours],
    );
    summary(&tally)
}

/// `cargo xtask fake-mlx5`: the fake mlx5 device check alone
/// (`test/fake_mlx5.rs`).
pub fn fake_mlx5_main(args: &[String]) -> Result<ExitCode> {
    if !args.is_empty() {
        return Err("fake-mlx5: usage: cargo xtask fake-mlx5".into());
    }
    crate::host::ensure_host_packages()?;
    let mut tally = Tally::default();
    fake_mlx5::checks(&mut tally);
    summary(&tally)
}

/// `cargo xtask hosts`: the four-host check alone (`test/hosts.rs`).
pub fn hosts_main(args: &[String]) -> Result<ExitCode> {
    if !args.is_empty() {
        return Err("hosts: usage: cargo xtask hosts".into());
    }
    crate::host::ensure_host_packages()?;
    let mut tally = Tally::default();
    hosts::checks(
        &mut tally,
        &base_options(vm::kernels::DEFAULT),
        &build_rverbs()?,
    );
    summary(&tally)
}

/// `cargo xtask two-hosts [--kernel K]`: the two-host interop checks
/// alone (all of them, as the default kernel runs them).
pub fn two_hosts_main(args: &[String]) -> Result<ExitCode> {
    let kernel = match args {
        [] => vm::kernels::DEFAULT,
        [f, k] if f == "--kernel" => vm::Kernel::by_name(k)?,
        _ => return Err("two-hosts: usage: cargo xtask two-hosts [--kernel K]".into()),
    };
    crate::host::ensure_host_packages()?;
    let mut tally = Tally::default();
    two_hosts::checks(&mut tally, &base_options(kernel), &build_rverbs()?, true);
    summary(&tally)
}

/// How long `cargo xtask test` soaks: one link flap (at 15 s) and the
/// recovery after it, with peers killed throughout (`cargo xtask soak`
/// runs 30 minutes).
const SOAK_SUITE_SECS: u64 = 30;

/// What churns in `cargo xtask test`'s soak.
const SOAK_SUITE_CHURN: soak::Churn = soak::Churn {
    flaps: true,
    kills: true,
};

/// `cargo xtask soak [--minutes N | --suite] [--no-flaps] [--no-kills]`: the soak
/// alone (30 minutes unless told), with both kinds of churn unless told.
pub fn soak_main(args: &[String]) -> Result<ExitCode> {
    let mut secs = 30 * 60;
    let mut churn = soak::Churn {
        flaps: true,
        kills: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--minutes" => {
                secs = 60
                    * it.next()
                        .and_then(|n| n.parse().ok())
                        .filter(|&n: &u64| n > 0)
                        .ok_or("soak: --minutes needs a positive number of minutes")?
            }
            // What `cargo xtask test` soaks.
            "--suite" => secs = SOAK_SUITE_SECS,
            "--no-flaps" => churn.flaps = false,
            "--no-kills" => churn.kills = false,
            _ => return Err(
                "soak: usage: cargo xtask soak [--minutes N | --suite] [--no-flaps] [--no-kills]"
                    .into(),
            ),
        }
    }
    crate::host::ensure_host_packages()?;
    let mut tally = Tally::default();
    soak::checks(&mut tally, &base_options(vm::kernels::DEFAULT), secs, churn);
    summary(&tally)
}

/// Prints the failures and the count line; succeeds only if something
/// passed and nothing failed.
fn summary(tally: &Tally) -> Result<ExitCode> {
    for f in &tally.failures {
        println!("xtask: failed: {f}");
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    Ok(if tally.failed == 0 && tally.passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

use crate::host::{workspace_root, Result, TOOL_PACKAGE, VM_TESTS_PACKAGE};
use crate::libtest::parse_test_result;
use crate::vm;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
    failures: Vec<String>,
    /// Names the kernel of the VM checks being counted (`[Linux 6.1] `),
    /// empty for the host's.
    label: String,
}

/// Seconds since xtask started (main starts the clock): each verdict line
/// carries it, so that a run's log says where its time went.
pub(crate) fn clock() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs()
}

impl Tally {
    fn pass(&mut self, what: &str) {
        self.passed += 1;
        println!("xtask: {:>5}s PASS {}{what}", clock(), self.label);
    }
    fn fail(&mut self, what: &str, why: &str) {
        self.failed += 1;
        self.failures.push(format!("{}{what}: {why}", self.label));
        println!("xtask: {:>5}s FAIL {}{what}: {why}", clock(), self.label);
    }
    /// Adds the counts of libtest's `test result:` lines in `lines`.
    fn libtest(&mut self, lines: &[String]) -> u64 {
        let mut seen = 0;
        for l in lines {
            if let Some((p, f)) = parse_test_result(l) {
                self.passed += p;
                self.failed += f;
                seen += 1;
            }
        }
        seen
    }
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

/// Runs a cargo test command, echoing its output, and returns the lines.
fn cargo_test(args: &[&str]) -> Result<(bool, Vec<String>)> {
    let mut child = cargo()
        .arg("test")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.map_err(|e| e.to_string())?;
        println!("{line}");
        lines.push(line);
    }
    let ok = child.wait().map_err(|e| e.to_string())?.success();
    Ok((ok, lines))
}

/// Builds the `rverbs` tool the VM tests run (they find it beside their
/// `deps/` directory, `target/debug/rverbs`), then the VM tests, and returns
/// their executables: one for each file of `vm-tests/tests/`, or an error.
fn build_vm_tests() -> Result<Vec<(String, PathBuf)>> {
    build_rverbs()?;
    // The library's examples, which vm-tests/tests/examples.rs and
    // async_api.rs run (async_echo needs the `tokio` feature).
    crate::host::run(cargo().args([
        "build",
        "--quiet",
        "-p",
        "rverbs",
        "--examples",
        "--features",
        "tokio",
    ]))?;
    // rverbs' libibverbs.so (vm-tests/tests/libibverbs.rs runs rdma-core's
    // tools over it).
    build_cshim()?;
    let out = cargo()
        .args(["test", "-p", VM_TESTS_PACKAGE, "--tests", "--no-run"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprint!("{err}");
        return Err("building the VM tests failed".into());
    }
    // cargo prints `  Executable tests/foo.rs (target/debug/deps/foo-hash)`.
    let mut found = Vec::new();
    for line in err.lines() {
        let Some(rest) = line.trim().strip_prefix("Executable ") else {
            continue;
        };
        let Some((name, path)) = rest.rsplit_once(" (") else {
            continue;
        };
        if !name.starts_with("tests/") {
            continue;
        }
        let path = workspace_root().join(path.trim_end_matches(')'));
        found.push((name.to_string(), path));
    }
    // Every test file must have been built: none is left out unnoticed.
    let dir = workspace_root().join("vm-tests").join("tests");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files = 0;
    for entry in entries {
        let name = entry.map_err(|e| e.to_string())?.file_name();
        let name = name.to_string_lossy();
        if !name.ends_with(".rs") {
            continue;
        }
        files += 1;
        let want = format!("tests/{name}");
        if !found.iter().any(|(n, _)| *n == want) {
            return Err(format!(
                "cargo built no test executable for vm-tests/{want}"
            ));
        }
    }
    if files == 0 {
        return Err(format!("no tests in {}", dir.display()));
    }
    Ok(found)
}

/// Which kernels `test` boots, and how much runs on each.
enum Kernels {
    /// The whole suite on one kernel.
    One(&'static vm::Kernel),
    /// The whole suite on the default kernel (6.12), and the VM tests and
    /// the two-host interop checks on every other kernel.
    All,
}

pub fn run(args: &[String]) -> Result<ExitCode> {
    let (mut host, mut in_vm) = (true, true);
    let mut kernels = Kernels::All;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--host-only" => in_vm = false,
            "--vm-only" => host = false,
            "--kernel" => {
                let k = it
                    .next()
                    .ok_or("--kernel needs a kernel: 6.1, 6.12, 7.2 or all")?;
                kernels = match k.as_str() {
                    "all" => Kernels::All,
                    k => Kernels::One(vm::Kernel::by_name(k)?),
                };
            }
            other => {
                return Err(format!(
                    "test: unknown option {other} (--host-only, --vm-only, --kernel K|all)"
                ))
            }
        }
    }
    let start = Instant::now();
    crate::host::ensure_host_packages()?;
    let mut tally = Tally::default();
    if host {
        host_tests(&mut tally)?;
        fuzz_targets(&mut tally);
    }
    if in_vm {
        let x86 = |k: &&vm::Kernel| k.arch == vm::kernels::Arch::X86_64;
        let (full, others, arm): (Option<&vm::Kernel>, Vec<&vm::Kernel>, bool) = match kernels {
            Kernels::One(k) if !x86(&k) => (None, Vec::new(), true),
            Kernels::One(k) => (Some(k), Vec::new(), false),
            Kernels::All => (
                Some(vm::kernels::DEFAULT),
                vm::kernels::KERNELS
                    .iter()
                    .filter(|k| k.name != vm::kernels::DEFAULT.name && x86(k))
                    .collect(),
                true,
            ),
        };
        if let Some(full) = full {
            let t = Instant::now();
            tally.label = format!("[{full}] ");
            vm_tests(&mut tally, full);
            testbed_checks(&mut tally, full);
            println!("xtask: {full}: {}s", t.elapsed().as_secs());
        }
        for k in others {
            let t = Instant::now();
            tally.label = format!("[{k}] ");
            vm_tests(&mut tally, k);
            interop_checks(&mut tally, k);
            println!("xtask: {k}: {}s", t.elapsed().as_secs());
        }
        if arm {
            let t = Instant::now();
            tally.label = format!("[{}] ", vm::kernels::ARM64);
            arm64::checks(&mut tally);
            println!("xtask: {}: {}s", vm::kernels::ARM64, t.elapsed().as_secs());
        }
    }
    println!();
    for f in &tally.failures {
        println!("xtask: failed: {f}");
    }
    println!("xtask: finished in {}s", start.elapsed().as_secs());
    println!("{} passed, {} failed", tally.passed, tally.failed);
    Ok(if tally.failed == 0 && tally.passed > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn host_tests(tally: &mut Tally) -> Result<()> {
    println!("xtask: == host tests");
    // rdma-core's mlx5 provider built into the differential tests' oracle
    // (crate rverbs-mlx5-oracle), named for them in the environment. If it
    // cannot be built, those tests fail for want of it.
    let what =
        "mlx5 oracle: rdma-core's providers/mlx5 qp.c and cq.c built from Debian's source package";
    match crate::bench::build_oracle() {
        Ok(lib) => {
            tally.pass(what);
            std::env::set_var(rverbs_oracle_env(), lib);
        }
        Err(e) => tally.fail(what, &e),
    }
    // Every crate, all targets and doc tests (the root crate's compile-fail
    // doc tests of the soundness rules among them), but the VM tests; with
    // every feature, so that `rverbs::aio`'s unit tests run too.
    let args = [
        "--workspace",
        "--exclude",
        VM_TESTS_PACKAGE,
        "--all-features",
    ];
    let (ok, lines) = cargo_test(&args)?;
    let seen = tally.libtest(&lines);
    if !ok && seen == 0 {
        tally.fail(
            &format!("cargo test {}", args.join(" ")),
            "did not build or run",
        );
    } else if !ok
        && !lines
            .iter()
            .any(|l| l.contains("FAILED") || l.contains("panicked"))
    {
        tally.fail(&format!("cargo test {}", args.join(" ")), "exited non-zero");
    }
    fake_mlx5::checks(tally);
    checkers(tally);
    let what =
        "barriers: provider-mlx5's DMA barriers and MMIO stores as built for aarch64 and x86_64";
    match crate::barriers::check() {
        Ok(()) => tally.pass(what),
        Err(e) => tally.fail(what, &e),
    }
    let what = "publish: cargo package --offline of the seven library crates, each built from its package alone (publish --dry-run but the index lookup), licences and README included";
    match crate::publish::check() {
        Ok(()) => tally.pass(what),
        Err(e) => tally.fail(what, &e),
    }
    let what =
        "api: the six Rust library crates' public API equals the listing in api/ (rustdoc JSON)";
    let t = Instant::now();
    match crate::api::check(false) {
        Ok(()) => tally.pass(what),
        Err(e) => tally.fail(what, &e),
    }
    println!("xtask: api: {}s", t.elapsed().as_secs());
    Ok(())
}

/// The variable the oracle's tests read (`rverbs_mlx5_oracle::ENV`; xtask
/// does not depend on that crate).
fn rverbs_oracle_env() -> &'static str {
    "RVERBS_MLX5_ORACLE"
}

/// Each fuzz target, briefly: one pass or failure each (a missing nightly
/// toolchain fails them, never skips them).
fn fuzz_targets(tally: &mut Tally) {
    println!(
        "xtask: == fuzz targets ({}s each)",
        crate::fuzz::SECONDS_EACH
    );
    let start = Instant::now();
    for (target, r) in crate::fuzz::run_all() {
        let what = format!("fuzz {target}");
        match r {
            Ok(()) => tally.pass(&what),
            Err(e) => tally.fail(&what, &e),
        }
    }
    println!("xtask: fuzzing took {:.0}s", start.elapsed().as_secs_f64());
}

/// Miri over the providers' tests and loom over provider-mlx5's records
/// (`checkers.rs`): one counted line per run.
fn checkers(tally: &mut Tally) {
    crate::checkers::run(|what, result| match result {
        Ok(()) => tally.pass(what),
        Err(e) => tally.fail(what, &e),
    });
}

/// VM test files run on the default kernel only. `hostile_peers.rs` tests
/// the tools' TCP exchange against peers that lie, stall or die, which no kernel
/// difference reaches (every RDMA path they touch runs on each kernel in
/// the other files), and they spend most of their minute waiting out
/// timeouts.
///
/// `libibverbs_pyverbs.rs` (rdma-core's pyverbs suite over both
/// libibverbs, ~25 s) compares two libraries on one kernel: the kernel
/// paths it reaches run on every kernel through the Rust API's own tests.
///
/// `libibverbs_sound.rs` (the C ABI's soundness cases over both
/// libraries, ~30 s) holds our library's answers to rdma-core's, and its
/// locking: the library's code is the same on every kernel, and the
/// destroys, events and posts under it run on every kernel through the
/// Rust API's tests (`verbs_*.rs`, `soundness.rs`) and
/// `libibverbs_core.rs`.
///
/// `perf.rs` (`rverbs perf` against perftest, ~50 s) and `libibverbs_cm.rs`
/// (rdma-core's librdmacm tools and perftest over our libibverbs, ~50 s)
/// compare userspace programs' wire exchanges and output; the verbs and
/// rdma_cm paths under them run on every kernel in `verbs_*.rs`, `cm*.rs`,
/// `interop_*.rs` and `libibverbs_core.rs`. On one kernel they keep the
/// suite under its 45 minutes.
///
/// `interop_pingpong.rs` (`rverbs pingpong` against `ibv_rc_pingpong` in
/// one VM, ~30 s) and `libibverbs.rs` (devinfo and `ibv_rc_pingpong` over
/// our libibverbs, ~11 s): on 6.1 and 7.2 the two-host checks run the same
/// pingpong interop in both roles across two VMs, and `libibverbs_core.rs`
/// runs C programs over our library.
///
/// `scale.rs` (1,000 QPs, 64 on an SRQ, a C program creating 1,000 over
/// both libraries, its kernel commands per QP under strace) measures our userspace at scale; every kernel
/// command it issues runs on every kernel in `verbs_*.rs`.
const DEFAULT_KERNEL_ONLY: &[&str] = &[
    "tests/interop_pingpong.rs",
    "tests/libibverbs.rs",
    "tests/hostile_peers.rs",
    "tests/libibverbs_pyverbs.rs",
    "tests/perf.rs",
    "tests/libibverbs_cm.rs",
    "tests/libibverbs_sound.rs",
    "tests/scale.rs",
];

fn vm_tests(tally: &mut Tally, kernel: &'static vm::Kernel) {
    println!("xtask: == VM tests on {kernel} (one boot, rxe0 on veth0)");
    let mut tests = match vm::prepare(kernel).and_then(|_| build_vm_tests()) {
        Ok(t) => t,
        Err(e) => return tally.fail("VM tests", &e),
    };
    if kernel.name != vm::kernels::DEFAULT.name {
        tests.retain(|(name, _)| !DEFAULT_KERNEL_ONLY.contains(&name.as_str()));
    }
    // One boot runs every test binary in turn; a marker line reports each
    // binary's exit status, so that a crash without a summary still counts.
    let mut script = String::from("rc=0\n");
    for (name, path) in &tests {
        script.push_str(&format!(
            "echo 'xtask-vm: running {name}'\n{} --test-threads=1; r=$?\necho \"xtask-vm: {name} exit $r\"\n[ $r = 0 ] || rc=1\n",
            vm::shell_quote(&path.display().to_string())
        ));
    }
    script.push_str("exit $rc\n");
    let opts = vm::Options {
        hosts: 1,
        every_host: false,
        // Every VM test file in one boot: ~8 minutes on an idle 2-core
        // machine; the limit leaves room for a loaded one (a VM that runs
        // past it is killed and the run fails).
        timeout: Duration::from_secs(1500),
        cmd: vec!["sh".into(), "-c".into(), script],
        peer_cmd: None,
        env: vec![("RUST_BACKTRACE".into(), "1".into())],
        verbose: false,
        capture: true,
        out_dir: None,
        bare: None,
        peer_kernel: None,
        peer_bare: None,
        userland: false,
        kernel,
    };
    match vm::run(&opts) {
        Err(e) => tally.fail("VM tests", &format!("the VM could not run them: {e}")),
        Ok(out) => {
            let lines = &out.lines[0];
            tally.libtest(lines);
            for (name, _) in &tests {
                let marker = format!("xtask-vm: {name} exit ");
                match lines.iter().find_map(|l| l.strip_prefix(&marker)) {
                    Some("0") => {}
                    Some(rc) => {
                        if !lines
                            .iter()
                            .any(|l| parse_test_result(l).is_some_and(|(_, f)| f > 0))
                        {
                            tally.fail(
                                name,
                                &format!("exited {rc} without a failing test (crash?)"),
                            );
                        } else {
                            // Counted by libtest's own summary; listed here
                            // so the closing lines say which kernel failed.
                            tally.failures.push(format!(
                                "{}{name}: exited {rc} (its failing tests are above)",
                                tally.label
                            ));
                        }
                    }
                    None => tally.fail(name, "never finished in the VM"),
                }
            }
        }
    }
}

/// The options the test-bed checks start from.
fn base_options(kernel: &'static vm::Kernel) -> vm::Options {
    vm::Options {
        hosts: 1,
        every_host: false,
        timeout: Duration::from_secs(300),
        cmd: Vec::new(),
        peer_cmd: None,
        env: Vec::new(),
        verbose: false,
        capture: true,
        out_dir: None,
        bare: None,
        peer_kernel: None,
        peer_bare: None,
        userland: false,
        kernel,
    }
}

/// Two hosts, each on `kernel`: rverbs against rdma-core's
/// ibv_rc_pingpong over a real network, in both roles. (rdma_cm interop
/// against rdma-core runs in one VM on every kernel, in
/// vm-tests/tests/cm_tools.rs; its two-host form only on the default
/// kernel, to keep the whole run under 45 minutes.)
fn interop_checks(tally: &mut Tally, kernel: &'static vm::Kernel) {
    println!("xtask: == two-host interop checks on {kernel}");
    let base = base_options(kernel);
    match build_rverbs() {
        Ok(bin) => two_hosts::checks(tally, &base, &bin, false),
        Err(e) => tally.fail("two hosts: rverbs pingpong", &e),
    }
}

/// Checks of the test bed itself that need boots of their own.
fn testbed_checks(tally: &mut Tally, kernel: &'static vm::Kernel) {
    println!("xtask: == test-bed checks on {kernel}");
    let base = base_options(kernel);
    // A failing command must fail the run.
    let what = "vm-run -- false exits non-zero";
    match vm::run(&vm::Options {
        cmd: vec!["false".into()],
        ..base.clone()
    }) {
        Ok(o) if !o.success() && o.status == [1] => tally.pass(what),
        Ok(o) => tally.fail(what, &format!("statuses {:?}", o.status)),
        Err(e) => tally.fail(what, &e),
    }
    // A guest kernel's int3 oops in its own code patching (TCG's) is
    // named, and run again once, not waited out: here the command fakes
    // its console line and crashes the kernel, so both runs die.
    let what = "vm-run: a guest that dies of an int3 oops is run again once, then named";
    match vm::run(&vm::Options {
        cmd: vec![
            "sh".into(),
            "-c".into(),
            "echo 'Oops: int3 (a check of the bed)'; echo c > /proc/sysrq-trigger; sleep 30".into(),
        ],
        timeout: Duration::from_secs(120),
        ..base.clone()
    }) {
        Err(e) if e.contains("died of an int3 oops in its own code patching") => tally.pass(what),
        Ok(o) => tally.fail(what, &format!("statuses {:?}", o.status)),
        Err(e) => tally.fail(what, &e),
    }
    // Two hosts over a socket netdev, every check in one boot; then four
    // on a hub.
    match build_rverbs() {
        Ok(bin) => {
            two_hosts::checks(tally, &base, &bin, true);
            hosts::checks(tally, &base, &bin);
        }
        Err(e) => tally.fail("two hosts: rverbs pingpong", &e),
    }
    runner::check(tally, kernel);
    crates::checks(tally, kernel, &[crates::Lib::RdmaCore, crates::Lib::Ours]);
    runner::faults_check(tally, kernel);
    runner::local_kernel_check(tally, kernel);
    netem::checks(tally, &base, &netem::SUITE);
    soak::checks(tally, &base, SOAK_SUITE_SECS, SOAK_SUITE_CHURN);
    static_binary(tally, &base);
}

/// The bare-VM check of one static binary: a VM of busybox, the modules
/// and `bin` only.
fn bare_vm(tally: &mut Tally, base: &vm::Options, libc: &str, bin: &std::path::Path) {
    let what = format!("bare VM (busybox + modules + the {libc} static rverbs only, {}): link add, devinfo, gids, pingpong x1000, link delete", base.kernel.arch.debian());
    let script = r#"set -e
rverbs link add rxe0 type rxe netdev veth0
rverbs link
rverbs devinfo -d rxe0
# The IPv4-mapped GID appears shortly after the link.
for i in $(seq 100); do rverbs gids -d rxe0 | grep -q 10.77.0.1 && break; sleep 0.1; done
rverbs gids -d rxe0
rverbs pingpong -d rxe0 -g 1 -n 1000 > /tmp/server.out 2>&1 &
ok=0
for i in $(seq 50); do
    if rverbs pingpong -d rxe0 -g 1 -n 1000 10.77.0.1; then ok=1; break; fi
    sleep 0.2
done
wait
cat /tmp/server.out
[ $ok = 1 ]
rverbs link delete rxe0
[ -z "$(rverbs link)" ]
echo bare-done"#;
    match vm::run(&vm::Options {
        cmd: vec!["sh".into(), "-c".into(), script.into()],
        bare: Some(bin.to_path_buf()),
        ..base.clone()
    }) {
        Ok(o)
            if o.success()
                && o.lines[0]
                    .iter()
                    .filter(|l| l.contains("1000 iters in"))
                    .count()
                    == 2
                && o.lines[0].iter().any(|l| l == "bare-done")
                && o.lines[0].iter().any(|l| {
                    l.starts_with("link rxe0/1 state ACTIVE physical_state LINK_UP netdev veth0")
                })
                && o.lines[0].iter().any(|l| l == "hca_id:\trxe0")
                && o.lines[0]
                    .iter()
                    .any(|l| l.starts_with("rxe0\t1\t1\t") && l.contains("10.77.0.1")) =>
        {
            tally.pass(&what)
        }
        Ok(o) => tally.fail(&what, &format!("statuses {:?}", o.status)),
        Err(e) => tally.fail(&what, &e),
    }
}

/// The static binaries (glibc and musl) of the base kernel's architecture:
/// no loader, no shared libraries, that architecture's ELF, and each works
/// in a bare VM; on x86_64 the glibc one's devinfo equals rdma-core's (the
/// arm64 share compares it with rdma-core's arm64 build, see `arm64`).
fn static_binary(tally: &mut Tally, base: &vm::Options) {
    let arch = base.kernel.arch;
    let machine = match arch {
        vm::kernels::Arch::X86_64 => "Advanced Micro Devices X86-64",
        vm::kernels::Arch::Aarch64 => "AArch64",
    };
    let mut glibc = None;
    for target in arch.rust_targets() {
        let libc = crate::dist::libc_of(target);
        let what =
            format!("dist ({target}): a static {machine} executable, no PT_INTERP, no DT_NEEDED");
        let bin = match crate::dist::build_for(target) {
            Ok(b) => b,
            Err(e) => {
                tally.fail(&what, &e);
                continue;
            }
        };
        match (crate::dist::dynamic_deps(&bin), crate::dist::machine(&bin)) {
            (Ok((false, needed)), Ok(m)) if needed.is_empty() && m == machine => tally.pass(&what),
            (Ok((interp, needed)), Ok(m)) => tally.fail(
                &what,
                &format!("machine {m}, PT_INTERP {interp}, DT_NEEDED {needed:?}"),
            ),
            (Err(e), _) | (_, Err(e)) => tally.fail(&what, &e),
        }
        bare_vm(tally, base, libc, &bin);
        if libc == "glibc" && arch == vm::kernels::Arch::X86_64 {
            glibc = Some(bin);
        }
    }
    let Some(bin) = glibc else { return };
    let what = "dist: the static binary's devinfo equals ibv_devinfo in the VM";
    let script = format!(
        "{} devinfo -d rxe0 > /tmp/a && ibv_devinfo -d rxe0 > /tmp/b && diff /tmp/a /tmp/b && {} link",
        bin.display(),
        bin.display()
    );
    match vm::run(&vm::Options {
        cmd: vec!["sh".into(), "-c".into(), script],
        ..base.clone()
    }) {
        Ok(o)
            if o.success()
                && o.lines[0]
                    .iter()
                    .any(|l| l.starts_with("link rxe0/1 state ACTIVE")) =>
        {
            tally.pass(what)
        }
        Ok(o) => tally.fail(what, &format!("statuses {:?}", o.status)),
        Err(e) => tally.fail(what, &e),
    }
}

/// rverbs' `libibverbs.so`, built with panic = "abort" (the cshim
/// profile), as C programs get it: its path.
fn build_cshim() -> Result<PathBuf> {
    crate::host::run(cargo().args([
        "build",
        "--quiet",
        "-p",
        "rverbs-libibverbs",
        "--profile",
        "cshim",
    ]))?;
    Ok(crate::host::target_dir()
        .join("cshim")
        .join("libibverbs.so"))
}

/// Builds the `rverbs` tool (package `rverbs-tool`, debug profile) and
/// returns its path, `target/debug/rverbs`.
fn build_rverbs() -> Result<String> {
    crate::host::run(cargo().args(["build", "--quiet", "-p", TOOL_PACKAGE, "--bin", "rverbs"]))?;
    let bin = crate::host::target_dir().join("debug").join("rverbs");
    if !bin.is_file() {
        return Err(format!("cargo built no {}", bin.display()));
    }
    Ok(bin.display().to_string())
}

pub fn demo() -> Result<ExitCode> {
    crate::host::ensure_host_packages()?;
    let script = r#"
set -e
echo "== rdma-core's view: ibv_devinfo -d $RVERBS_TEST_DEV"
ibv_devinfo -d "$RVERBS_TEST_DEV" | tee /tmp/theirs
echo "== rverbs' view: rverbs devinfo -d $RVERBS_TEST_DEV (no libibverbs: uverbs ABI + our rxe provider)"
"$RVERBS_BIN" devinfo -d "$RVERBS_TEST_DEV" | tee /tmp/ours
if diff -u /tmp/theirs /tmp/ours; then echo "== identical"; fi
echo
echo "== rdma-core's ibv_rc_pingpong server <-> rverbs pingpong client, 1000 x 4 KiB over rxe0"
ibv_rc_pingpong -d "$RVERBS_TEST_DEV" -g "$RVERBS_TEST_GID" -n 1000 > /tmp/server.out 2>&1 &
for i in $(seq 50); do
    "$RVERBS_BIN" pingpong -d "$RVERBS_TEST_DEV" -g "$RVERBS_TEST_GID" -n 1000 "$RVERBS_TEST_ADDR" > /tmp/client.out 2>&1 && break
    sleep 0.2
done
wait
sed 's/^/[ibv_rc_pingpong] /' /tmp/server.out
sed 's/^/[rverbs pingpong] /' /tmp/client.out
echo
echo "== rdma_cm: rdma-core's rping server <-> rverbs rping client, 5 pings, validated"
rping -s -a "$RVERBS_TEST_ADDR" -p 7174 -v > /tmp/rping.out 2>&1 &
for i in $(seq 50); do
    "$RVERBS_BIN" rping -c -a "$RVERBS_TEST_ADDR" -p 7174 -C 5 -V -v > /tmp/client.out 2>&1 && break
    sleep 0.2
done
wait
sed 's/^/[rping] /' /tmp/rping.out
sed 's/^/[rverbs rping] /' /tmp/client.out
echo
echo "== rverbs selftest -d $RVERBS_TEST_DEV"
"$RVERBS_BIN" selftest -d "$RVERBS_TEST_DEV"
"#;
    let bin = build_rverbs()?;
    let out = vm::run(&vm::Options {
        hosts: 1,
        every_host: false,
        timeout: Duration::from_secs(300),
        cmd: vec!["sh".into(), "-c".into(), script.into()],
        peer_cmd: None,
        env: vec![("RVERBS_BIN".into(), bin)],
        verbose: false,
        capture: false,
        out_dir: None,
        bare: None,
        peer_kernel: None,
        peer_bare: None,
        userland: false,
        kernel: vm::kernels::DEFAULT,
    })?;
    Ok(if out.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

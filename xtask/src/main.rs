//! `cargo xtask`: the project's own tasks.
//!
//! - `vm-run [--kernel K] [--two-hosts] [--timeout SECS] [-v] -- CMD [ARGS...]`:
//!   boot a fresh VM with an rxe device on Debian's kernel K (6.1, 6.12 or
//!   7.2; `vm::kernels`) and run CMD in it (see `vm`).
//! - `test [--kernel K|all]`: every test — host unit tests, Miri and loom,
//!   the VM tests, the interop tests — on 6.12, and the VM and interop
//!   tests on 6.1 and 7.2.
//! - `demo`: the main job: boot the VM and show the device as rdma-core and
//!   rverbs see it.

mod api;
mod barriers;
mod bench;
mod checkers;
mod dist;
mod fuzz;
mod host;
mod libtest;
mod publish;
mod test;

/// The test bed (crate `rverbs-testbed`), by the name xtask has always
/// used for it.
use rverbs_testbed as vm;

use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  vm-run [--kernel 6.1|6.12|7.2|6.12-arm64] [--two-hosts [--peer-arm64]] [--bare | --bare-musl] [--rdma-core] [--timeout SECS] [--out DIR] [-v] -- CMD [ARGS...]
        boot a fresh VM with rxe0 and run CMD inside it (host paths), on
        Debian's kernel of that series (default 6.12);
        with --two-hosts, RVERBS_PEER_CMD (if set) runs on the second VM;
        --peer-arm64 makes that second VM an arm64 one (bare, with
        rdma-core's arm64 tools);
        with --bare, the VM holds only busybox, the modules and the static
        rverbs of its architecture (no host share, no rxe0: create it with
        rverbs link add); --bare-musl: the same with the musl build;
        6.12-arm64 runs bare only (QEMU's virt board under TCG);
        --rdma-core gives a bare arm64 VM rdma-core's arm64 tools by name;
        --out DIR: the guest's writable $RVERBS_VM_OUT, kept after the run
  vm-prepare [--kernel K|all]
               fetch the kernel and build the initramfs (cached in target/vm)
  test [--kernel K|all] [--host-only | --vm-only]
               run every test: host, VM, interop; prints 'N passed, N failed';
               all (the default): the whole suite on 6.12, the VM tests and
               two-host interop on 6.1 and 7.2; K: the whole suite on K
  demo         boot the VM and show the rxe device through rdma-core and rverbs
  dist [--target T | --all]
               build target/dist/rverbs: one static, stripped executable
               (glibc); --target T (x86_64-unknown-linux-musl,
               aarch64-unknown-linux-gnu, aarch64-unknown-linux-musl) builds
               target/dist/T/rverbs; --all all four
  package      check that the library crates publish (cargo package --offline
               of all seven, each built from its package: publish --dry-run
               but the index lookup; no manifest warning, licences and README in
               each; part of `test`)
  two-hosts [--kernel K]
               the two-host interop checks alone, in one boot of two VMs:
               rdma-core's and our pingpong (RC, UD), rping, cmatose,
               cm-server/cm-client, perf write-bw, each against the other
               in both roles (part of `test`)
  soak [--minutes N | --suite] [--no-flaps] [--no-kills]
               two VMs for N minutes (30 by default; `test` and --suite
               run 30 s, one flap at 15 s): rverbs
               stream cycling SEND/WRITE/READ/UD with every byte checked,
               the link taken down every 45 s, a peer killed mid-run and
               restarted again and again (each churn can be left out); the
               long-lived processes' fds and memory must stay flat
  netem [--suite | --bytes N]
               loss and disorder: two VMs; first 64 MiB of WRITE across
               host 1's link at 5% loss and 5% reordering, then tc netem on
               both (5% loss, 5% reordering, 1% duplication, 0.1%
               corruption, all four), rverbs stream SEND/WRITE/READ over 8
               QPs with every byte checked, UD counted, rping over rdma_cm,
               perf against perftest (default 64M a stream; --suite:
               test's, all four only, at 1M)
  hosts        four VMs on a VDE hub: every host pings every other with
               ibv_rc_pingpong and rverbs pingpong, and three clients connect
               at once to one rdma_cm server (part of `test`)
  crates [--kernel K]
               published RDMA crates (sideway, async-rdma) fetched from the
               registry, their unchanged `cargo test` run in the VM with
               rverbs-testbed as the runner, over rdma-core's libibverbs and
               over ours; each test binary against what is expected of it
               (part of `test`)
  fake-mlx5    rdma-core's libmlx5 and rverbs' mlx5 glue against a fake
               uverbs device (mlx5-oracle/fake/uverbs.c, LD_PRELOAD): what
               each sends and maps opening the device, and creating 10,000
               generated cases of objects (RVERBS_FAKE_SEED=N repeats a
               run), compared (part of `test`; no VM)
  api [--bless]
               the public API guard: each library crate's public items and
               signatures (rustdoc JSON, nightly) against the listing in
               api/; any difference fails; --bless rewrites the listing
               (part of `test`)
  mlx5-oracle  build rdma-core's mlx5 provider (Debian's source package)
               into the shared object the differential tests load, and
               print its path: RVERBS_MLX5_ORACLE=$(cargo xtask mlx5-oracle)
               cargo test -p rverbs-mlx5-oracle (part of `test`)
  checkers     Miri over the providers', the MR and the C ABI's host tests,
               loom over provider-mlx5's records, and the rust-version
               build (part of `test`)
  barriers     build provider-mlx5 for aarch64 and x86_64 and check that its
               DMA barriers and MMIO stores are the instructions rdma-core's
               udma_barrier.h emits (part of `test`)
  bench [--mlx5-only | --charts-only | --callgrind-only] [--report-only] [--update-baseline]
               rverbs beside perftest in one VM boot, then the mlx5 data path
               on the device model and rdma-core's own mlx5 qp.c/cq.c under
               callgrind (host); writes target/bench/report.md; fails if a
               per-call figure rose >10% above xtask/bench-baseline.txt;
               --mlx5-only: just the host figures; --report-only: the report
               of the last run again; --update-baseline: record this run's
               (or with --report-only the last run's) figures as the baseline;
               --charts-only: just the SVG charts (latency.svg, bandwidth.svg,
               msg_rate_qps.svg in target/bench; about 4 min under TCG)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Verdict lines say how far into the command they came.
    test::clock();
    // The bed caches under target/vm, as it always has here, and keeps the
    // workspace and its target directory visible in the guests even when
    // they lie under /tmp.
    vm::configure(vm::Config {
        cache_dir: host::target_dir().join("vm"),
        keep: vec![host::workspace_root(), host::target_dir()],
    });
    let res = match args.first().map(String::as_str) {
        Some("vm-run") => vm_run(&args[1..]),
        Some("vm-prepare") => vm_prepare(&args[1..]),
        Some("test") => test::run(&args[1..]),
        Some("demo") => test::demo(),
        Some("bench") => bench::run(&args[1..]),
        Some("dist") => dist::main(&args[1..]),
        Some("package") => publish::check().map(|()| {
            println!(
                "xtask: package: {} package cleanly",
                publish::CRATES.join(", ")
            );
            ExitCode::SUCCESS
        }),
        Some("api") => api::main(&args[1..]),
        Some("netem") => test::netem_main(&args[1..]),
        Some("two-hosts") => test::two_hosts_main(&args[1..]),
        Some("crates") => test::crates_main(&args[1..]),
        Some("fake-mlx5") => test::fake_mlx5_main(&args[1..]),
        Some("hosts") => test::hosts_main(&args[1..]),
        Some("soak") => test::soak_main(&args[1..]),
        Some("mlx5-oracle") => bench::build_oracle().map(|lib| {
            println!("{}", lib.display());
            ExitCode::SUCCESS
        }),
        Some("checkers") => {
            let mut failed = Vec::new();
            checkers::run(|what, r| match r {
                Ok(()) => println!("xtask: PASS {what}"),
                Err(e) => failed.push(format!("{what}: {e}")),
            });
            if failed.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                Err(failed.join("\n"))
            }
        }
        Some("barriers") => barriers::check().map(|()| {
            println!(
                "xtask: barriers: every probe is the expected instructions on aarch64 and x86_64"
            );
            ExitCode::SUCCESS
        }),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(USAGE.to_string()),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `vm-prepare [--kernel K|all]`.
fn vm_prepare(args: &[String]) -> host::Result<ExitCode> {
    let kernels: Vec<&vm::Kernel> = match args {
        [] => vec![vm::kernels::DEFAULT],
        [flag, k] if flag == "--kernel" && k == "all" => vm::kernels::KERNELS.iter().collect(),
        [flag, k] if flag == "--kernel" => vec![vm::Kernel::by_name(k)?],
        _ => return Err(format!("vm-prepare: bad arguments\n{USAGE}")),
    };
    for k in kernels {
        vm::prepare(k)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn vm_run(args: &[String]) -> host::Result<ExitCode> {
    let mut opts = vm::Options {
        hosts: 1,
        every_host: false,
        timeout: Duration::from_secs(600),
        cmd: Vec::new(),
        peer_cmd: std::env::var("RVERBS_PEER_CMD")
            .ok()
            .filter(|s| !s.is_empty()),
        env: Vec::new(),
        verbose: false,
        capture: false,
        out_dir: None,
        bare: None,
        peer_kernel: None,
        peer_bare: None,
        userland: false,
        kernel: vm::kernels::DEFAULT,
    };
    let mut it = args.iter();
    // Which libc's build a bare VM gets (0 glibc, 1 musl), resolved once
    // the kernel, and so the architecture, is known.
    let mut bare: Option<usize> = None;
    let mut peer_arm64 = false;
    while let Some(a) = it.next() {
        match a.as_str() {
            "--two-hosts" => opts.hosts = 2,
            "--peer-arm64" => peer_arm64 = true,
            "--rdma-core" => opts.userland = true,
            "--bare" => bare = Some(0),
            "--bare-musl" => bare = Some(1),
            "-v" | "--verbose" => opts.verbose = true,
            "--out" => {
                let d = it.next().ok_or("--out needs a directory")?;
                opts.out_dir = Some(d.into());
            }
            "--kernel" => {
                let k = it
                    .next()
                    .ok_or("--kernel needs a kernel: 6.1, 6.12 or 7.2")?;
                opts.kernel = vm::Kernel::by_name(k)?;
            }
            "--timeout" => {
                let v = it.next().ok_or("--timeout needs a number of seconds")?;
                let secs: u64 = v
                    .parse()
                    .map_err(|_| format!("--timeout: not a number: {v}"))?;
                opts.timeout = Duration::from_secs(secs);
            }
            "--" => {
                opts.cmd = it.by_ref().cloned().collect();
            }
            other => return Err(format!("vm-run: unknown option {other}\n{USAGE}")),
        }
    }
    if opts.cmd.is_empty() {
        return Err(format!("vm-run: no command given\n{USAGE}"));
    }
    if let Some(libc) = bare {
        opts.bare = Some(dist::build_for(opts.kernel.arch.rust_targets()[libc])?);
    }
    if peer_arm64 {
        if opts.hosts != 2 {
            return Err("vm-run: --peer-arm64 needs --two-hosts".into());
        }
        let k = vm::kernels::ARM64;
        opts.peer_kernel = Some(k);
        opts.peer_bare = Some(dist::build_for(k.arch.rust_targets()[bare.unwrap_or(0)])?);
        opts.userland = true;
    }
    if opts.hosts == 1 && opts.peer_cmd.is_some() {
        eprintln!("xtask: note: RVERBS_PEER_CMD is ignored without --two-hosts");
        opts.peer_cmd = None;
    }
    let out = vm::run(&opts)?;
    if out.success() {
        Ok(ExitCode::SUCCESS)
    } else {
        if opts.hosts == 2 {
            eprintln!(
                "xtask: exit status host1 {} host2 {}",
                out.status[0], out.status[1]
            );
        }
        let first_bad = out.status.iter().copied().find(|&s| s != 0).unwrap_or(1);
        Ok(ExitCode::from(first_bad.clamp(1, 255) as u8))
    }
}

//! The mlx5 reference: rdma-core's own `providers/mlx5/qp.c` and `cq.c`,
//! compiled unchanged from Debian's `rdma-core` source package with
//! Debian's flags, driven over plain memory by a small C harness of ours
//! (`xtask/bench-ref/mlx5/`) under callgrind, for the same work request and
//! CQE that provider-mlx5 gets on the device model.
//!
//! The source comes with `apt-get source` through a private apt
//! configuration under `target/bench/apt-src/` (deb-src lines of the host's
//! release; the host's own apt sources are never changed), at the version
//! of `rdma-core` installed on the host, so that the reference is the
//! rdma-core the VM rows run. Where the mirror serves the `.dsc` but not
//! the upstream tarball (some proxies), `RVERBS_RDMA_CORE_GIT` may name a
//! git directory of upstream rdma-core: its `v<upstream version>` tag is
//! Debian's upstream tarball, used only after checking that Debian's
//! packaging carries no patches.

use crate::host::{output, run, target_dir, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The harness and what it needs besides rdma-core's tree.
const HARNESS_C: &str = include_str!("../../bench-ref/mlx5/harness.c");
const STUBS_C: &str = include_str!("../../bench-ref/mlx5/stubs.c");
const CONFIG_H: &str = include_str!("../../bench-ref/mlx5/config.h");
/// The differential tests' side of rdma-core (see [`build_oracle`]).
const ORACLE_C: &str = include_str!("../../../mlx5-oracle/oracle.c");

/// Iterations of each scenario (the harness checks every completion).
pub const ITERS: u64 = 1000;

/// The rows: (label, measured caller in harness.c, rdma-core function it
/// calls). The figure is the callee's inclusive cost from that caller, per
/// call: rdma-core's code only, not the harness's.
pub const ROWS: &[(&str, &str, &str)] = &[
    (
        "post one signaled 64 B RDMA WRITE, one SGE (8-byte doorbell, no lock)",
        "ref_post_db",
        "mlx5_post_send",
    ),
    (
        "the same with rdma-core's default SQ spinlock",
        "ref_post_locked",
        "mlx5_post_send",
    ),
    (
        "the same through BlueFlame (64-byte copy, no lock)",
        "ref_post_bf",
        "mlx5_post_send",
    ),
    (
        "poll returning its one completion (CQE v0, no lock)",
        "ref_poll_one",
        "mlx5_poll_cq",
    ),
    (
        "poll returning four completions",
        "ref_poll_four",
        "mlx5_poll_cq",
    ),
    ("empty poll", "ref_poll_empty", "mlx5_poll_cq"),
];

/// Builds the harness (once per rdma-core version and harness text) and
/// runs it under callgrind; returns the per-call figures in [`ROWS`] order.
pub fn measure(out_dir: &Path) -> Result<Vec<f64>> {
    let bin = build().map_err(|e| format!("the rdma-core mlx5 reference: {e}"))?;
    fs::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    let cg = out_dir.join("callgrind.mlx5-ref");
    let st = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", cg.display()))
        .arg(&bin)
        .arg(ITERS.to_string())
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !st.status.success() {
        return Err(format!(
            "the rdma-core mlx5 reference harness failed: {}",
            String::from_utf8_lossy(&st.stderr)
        ));
    }
    let calls = calls_from(&cg);
    let mut out = Vec::new();
    for (_, caller, callee) in ROWS {
        let (n, ir) = calls
            .get(&(caller.to_string(), callee.to_string()))
            .copied()
            .unwrap_or((0, 0));
        if n != ITERS {
            return Err(format!(
                "{caller} -> {callee}: {n} calls in {}, expected {ITERS}",
                cg.display()
            ));
        }
        out.push(ir as f64 / n as f64);
    }
    Ok(out)
}

/// The reference's table rows, from [`measure`]'s figures.
pub fn rows(v: &[f64]) -> String {
    let mut md = String::new();
    for ((label, caller, callee), per) in ROWS.iter().zip(v) {
        let _ = writeln!(
            md,
            "| rdma-core 44 mlx5: {label} (`{callee}` from `{caller}`) | {ITERS} | {:.0} | {per:.0} |",
            per * ITERS as f64
        );
    }
    md
}

/// The side-by-side mlx5 table: rdma-core's rows measured now beside
/// provider-mlx5's on the device model (`ours`: post, then poll of one,
/// four, none, instructions per call). Records nothing; returns markdown.
pub fn side_by_side(reference: &[f64], ours: &[f64]) -> String {
    let mut md = String::from(
        "\n| mlx5 data path, instructions per call (callgrind, host) | rdma-core 44 `qp.c`/`cq.c` | rverbs provider-mlx5 (device model) | rverbs/rdma-core |\n| --- | --- | --- | --- |\n",
    );
    // (label, reference row, our figure)
    let pairs = [
        (
            "build + ring one signaled 64 B RDMA WRITE, one SGE (rdma-core: 8-byte doorbell, no lock)",
            0,
            ours.first(),
        ),
        ("poll returning one completion (CQE v0)", 3, ours.get(1)),
        ("poll returning four completions", 4, ours.get(2)),
        ("empty poll", 5, ours.get(3)),
        (
            "the same WRITE prepared once (rverbs `post_prepared`; rdma-core: its `mlx5_post_send` above, the builders not measured)",
            0,
            ours.get(4),
        ),
    ];
    for (label, r, o) in pairs {
        let theirs = reference.get(r).copied();
        let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let ratio = match (theirs, o) {
            (Some(t), Some(o)) if t > 0.0 => format!("{:.2}", o / t),
            _ => "-".into(),
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {ratio} |",
            cell(theirs),
            cell(o.copied())
        );
    }
    let _ = writeln!(
        md,
        "\nrdma-core's rows: its own providers/mlx5/qp.c and cq.c from Debian's source package, compiled with Debian's flags and driven over plain memory by xtask/bench-ref/mlx5/harness.c ({ITERS} calls each; the count is `mlx5_post_send`/`mlx5_poll_cq` inclusive, from the harness's caller). With its default SQ spinlock its post is {}, through BlueFlame {}. rverbs' rows: the `bench_*` functions of provider-mlx5-model's examples (provider code only; the model's work between calls is not counted).",
        reference.get(1).map_or("-".into(), |v| format!("{v:.0}")),
        reference.get(2).map_or("-".into(), |v| format!("{v:.0}")),
    );
    md
}

/// Inclusive cost of calls between two functions, from a callgrind
/// profile: `(caller, callee) -> (calls, inclusive Ir)`, summed over call
/// sites. Same raw-format reading as `bench::callees`, keyed by the caller
/// too, so that one callee measured from several callers stays apart.
pub fn calls_from(file: &Path) -> BTreeMap<(String, String), (u64, u64)> {
    let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let Ok(raw) = fs::read_to_string(file) else {
        return out;
    };
    // "(12) name" defines id 12 of the function names, "(12)" refers to it.
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut resolve = |v: &str| -> String {
        let v = v.trim();
        if let Some(rest) = v.strip_prefix('(') {
            if let Some((id, name)) = rest.split_once(')') {
                let name = name.trim();
                if name.is_empty() {
                    return names.get(id).cloned().unwrap_or_default();
                }
                names.insert(id.to_string(), name.to_string());
                return name.to_string();
            }
        }
        v.to_string()
    };
    let (mut func, mut cfn) = (String::new(), String::new());
    let mut pending: Option<u64> = None;
    for l in raw.lines() {
        if let Some(calls) = pending.take() {
            let ir = l
                .split_whitespace()
                .last()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            let e = out.entry((func.clone(), cfn.clone())).or_default();
            e.0 += calls;
            e.1 += ir;
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        match k {
            "fn" => func = resolve(v),
            "cfn" => cfn = resolve(v),
            "calls" => pending = v.split_whitespace().next().and_then(|c| c.parse().ok()),
            _ => {}
        }
    }
    out
}

/// The harness binary, built if missing or stale.
fn build() -> Result<PathBuf> {
    compile_and_link(
        Release::Installed,
        "harness",
        &[],
        &[("harness.c", HARNESS_C)],
        &["-lpthread"],
        "harness",
    )
}

/// The differential tests' oracle (crate `rverbs-mlx5-oracle`): rdma-core's
/// `qp.c`, `cq.c` and `srq.c` with `mlx5-oracle/oracle.c` as a shared
/// object, built
/// if missing or stale; returns its path, which the tests read from
/// `RVERBS_MLX5_ORACLE`.
pub fn build_oracle() -> Result<PathBuf> {
    compile_and_link(
        Release::Current,
        "oracle",
        // The SRQ's post and free list, and the completions cq.c hands it
        // (the stubs of those are weak: srq.c's own win).
        &["srq"],
        &[("oracle.c", ORACLE_C)],
        // Every symbol resolved here (the stubs cover what the sources
        // reach outside themselves), so that dlopen cannot fail later.
        &["-shared", "-Wl,-z,defs", "-lpthread"],
        "liboracle.so",
    )
    .map_err(|e| format!("the rdma-core mlx5 oracle: {e}"))
}

/// Which rdma-core a build compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// The version installed on the host, from the host's release: the
    /// bench's reference, the rdma-core its VM rows run.
    Installed,
    /// Debian's current release's (13, trixie): the differential tests'
    /// oracle. Its upstream tarball is on the package mirror, where the
    /// host release's (44.0) may not be, and `cargo xtask test` reaches
    /// nothing else.
    Current,
}

/// Debian's current release, for [`Release::Current`].
const CURRENT_RELEASE: &str = "trixie";

/// Compiles rdma-core's `providers/mlx5/qp.c` and `cq.c` and the `more`
/// of its files there (of `release`, Debian's flags), the stubs and
/// `extra` (name, text) in
/// `build-<version>-<what>/`, and links them with `link` into `out`;
/// cached while the version and every text are the same.
fn compile_and_link(
    release: Release,
    what: &str,
    more: &[&str],
    extra: &[(&str, &str)],
    link: &[&str],
    out: &str,
) -> Result<PathBuf> {
    let dir = target_dir().join("bench").join("mlx5-ref");
    let (version, src) = match release {
        Release::Installed => {
            let v = installed_version()?;
            let t = source_tree(&dir, &v, None)?;
            (v, t)
        }
        Release::Current => current_tree(&dir)?,
    };
    let build = dir.join(format!("build-{version}-{what}"));
    let bin = build.join(out);
    // Rebuild when a text changes: they are the cache key.
    let mut key = format!("{version}\n{}\n{STUBS_C}{CONFIG_H}", more.join(" "));
    for (_, text) in extra {
        key.push_str(text);
    }
    let stamp = build.join(".key");
    if bin.is_file() && fs::read_to_string(&stamp).ok().as_deref() == Some(&key) {
        return Ok(bin);
    }
    let _ = fs::remove_dir_all(&build);
    let inc = build.join("include");
    publish_headers(&src, &inc)?;
    let mut files = vec![("stubs.c", STUBS_C), ("config.h", CONFIG_H)];
    files.extend_from_slice(extra);
    for (name, text) in &files {
        fs::write(inc.join(name), text).map_err(|e| e.to_string())?;
    }
    let flags = compiler_flags()?;
    let mlx5 = src.join("providers/mlx5");
    let mut sources: Vec<(String, PathBuf)> = ["qp", "cq"]
        .iter()
        .chain(more)
        .map(|m| (m.to_string(), mlx5.join(format!("{m}.c"))))
        .collect();
    for (name, _) in &files {
        if let Some(stem) = name.strip_suffix(".c") {
            sources.push((stem.to_string(), inc.join(name)));
        }
    }
    let mut objs = Vec::new();
    for (name, file) in sources {
        let obj = build.join(format!("{name}.o"));
        run(Command::new("gcc")
            .args(&flags.cflags)
            .arg("-I")
            .arg(&inc)
            .arg("-I")
            .arg(&src)
            .arg("-I")
            .arg(&mlx5)
            .arg("-c")
            .arg(&file)
            .arg("-o")
            .arg(&obj))?;
        objs.push(obj);
    }
    run(Command::new("gcc")
        .args(&flags.ldflags)
        .arg("-o")
        .arg(&bin)
        .args(&objs)
        .args(link))?;
    fs::write(&stamp, key).map_err(|e| e.to_string())?;
    Ok(bin)
}

/// The version of rdma-core on the host (`44.0-2`): the one whose source
/// is measured, and the one the VM rows run.
fn installed_version() -> Result<String> {
    let v = output(Command::new("dpkg-query").args(["-W", "-f=${Version}", "rdma-core"]))?;
    let v = v.trim().to_string();
    if v.is_empty() {
        return Err("rdma-core is not installed on the host".into());
    }
    Ok(v)
}

/// Compiler flags as Debian builds rdma-core: dpkg-buildflags with the
/// package's `hardening=+all` (debian/rules), then the `-O2 -g -DNDEBUG`
/// of cmake's Release build type (rdma-core's buildlib/RDMA_BuildType)
/// and its `-std=gnu11`; `-fPIC` because the provider is a shared object.
struct Flags {
    cflags: Vec<String>,
    ldflags: Vec<String>,
}

fn compiler_flags() -> Result<Flags> {
    let get = |what: &str| -> Result<Vec<String>> {
        let v = output(
            Command::new("dpkg-buildflags")
                .args(["--get", what])
                .env("DEB_BUILD_MAINT_OPTIONS", "hardening=+all"),
        )?;
        Ok(v.split_whitespace().map(String::from).collect())
    };
    let mut cflags = get("CPPFLAGS")?;
    cflags.extend(get("CFLAGS")?);
    cflags.extend(
        ["-O2", "-g", "-DNDEBUG", "-std=gnu11", "-fPIC"]
            .iter()
            .map(|s| s.to_string()),
    );
    Ok(Flags {
        cflags,
        ldflags: get("LDFLAGS")?,
    })
}

/// [`Release::Current`]'s version and tree: the cached one, or the
/// current release's source package fetched (version from its source
/// list).
fn current_tree(dir: &Path) -> Result<(String, PathBuf)> {
    let marker = dir.join(format!("{CURRENT_RELEASE}-version"));
    if let Ok(v) = fs::read_to_string(&marker) {
        let v = v.trim().to_string();
        if dir.join(format!("rdma-core-{v}/.complete")).exists() {
            let t = dir.join(format!("rdma-core-{v}"));
            return Ok((v, t));
        }
    }
    let apt = private_apt(dir, Some(CURRENT_RELEASE))?;
    let show = output(apt.command("apt-cache").args(["showsrc", "rdma-core"]))?;
    let version = show
        .lines()
        .filter_map(|l| l.strip_prefix("Version: "))
        .map(str::trim)
        .max_by(|a, b| version_cmp(a, b))
        .ok_or_else(|| format!("Debian {CURRENT_RELEASE} lists no rdma-core source package"))?
        .to_string();
    let tree = source_tree(dir, &version, Some(&apt))?;
    fs::write(&marker, &version).map_err(|e| e.to_string())?;
    Ok((version, tree))
}

/// Orders two Debian versions (`dpkg --compare-versions`).
fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let gt = Command::new("dpkg")
        .args(["--compare-versions", a, "gt", b])
        .status()
        .is_ok_and(|s| s.success());
    if gt {
        std::cmp::Ordering::Greater
    } else if a == b {
        std::cmp::Ordering::Equal
    } else {
        std::cmp::Ordering::Less
    }
}

/// rdma-core's tree at `version`, unpacked under `dir` (cached); fetched
/// with `apt` if given, else with the host release's source lists.
fn source_tree(dir: &Path, version: &str, apt: Option<&PrivateApt>) -> Result<PathBuf> {
    let tree = dir.join(format!("rdma-core-{version}"));
    if tree.join(".complete").exists() {
        return Ok(tree);
    }
    fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let dl = dir.join(format!("download-{version}"));
    let _ = fs::remove_dir_all(&dl);
    fs::create_dir_all(&dl).map_err(|e| e.to_string())?;
    let host_apt;
    let apt = match apt {
        Some(a) => a,
        None => {
            host_apt = private_apt(dir, None)?;
            &host_apt
        }
    };
    eprintln!("xtask: fetching Debian's rdma-core {version} source package (once; cached under target/bench/mlx5-ref)");
    let fetched = run(apt
        .command("apt-get")
        .args(["source", "--download-only", "-q"])
        .arg(format!("rdma-core={version}"))
        .current_dir(&dl));
    let _ = fs::remove_dir_all(&tree);
    let dsc = dl.join(format!("rdma-core_{}.dsc", no_epoch(version)));
    match fetched {
        Ok(()) => {
            // dpkg-source unpacks the upstream tarball and applies
            // Debian's packaging and patches, as the package build does.
            run(Command::new("dpkg-source")
                .args(["--no-check", "-x"])
                .arg(&dsc)
                .arg(&tree)
                .stdout(Stdio::null()))?;
        }
        Err(e) => from_parts(&dl, &tree)
            .or_else(|p| from_git(&dl, &tree, version).map_err(|g| format!("{p}; and {g}")))
            .map_err(|g| format!("{e}; and {g}"))?,
    }
    if !tree.join("providers/mlx5/qp.c").is_file() {
        return Err(format!("no providers/mlx5/qp.c in {}", tree.display()));
    }
    fs::write(tree.join(".complete"), version).map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&dl);
    Ok(tree)
}

fn no_epoch(version: &str) -> &str {
    version.split_once(':').map_or(version, |(_, v)| v)
}

/// The fallback when the mirror has the upstream tarball and Debian's
/// packaging but not the `.dsc` (apt-get then fails the whole fetch, but
/// keeps what it fetched, each file checked against the signed Sources
/// index): what dpkg-source would do, by hand — the upstream tree, Debian's
/// `debian/`, and the patches of `debian/patches/series` in order.
fn from_parts(dl: &Path, tree: &Path) -> Result<()> {
    let find = |what: &str| {
        fs::read_dir(dl)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains(what))
    };
    let orig = find(".orig.tar.").ok_or("no upstream tarball fetched")?;
    let debian = find(".debian.tar.").ok_or("no debian.tar.* fetched")?;
    fs::create_dir_all(tree).map_err(|e| e.to_string())?;
    run(Command::new("tar")
        .arg("xf")
        .arg(&orig)
        .arg("--strip-components=1")
        .arg("-C")
        .arg(tree))?;
    run(Command::new("tar")
        .arg("xf")
        .arg(&debian)
        .arg("-C")
        .arg(tree))?;
    let series = tree.join("debian/patches/series");
    let list = fs::read_to_string(&series).unwrap_or_default();
    for name in list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        run(Command::new("patch")
            .args(["-p1", "-s", "-N", "-d"])
            .arg(tree)
            .arg("-i")
            .arg(tree.join("debian/patches").join(name)))?;
    }
    eprintln!(
        "xtask: unpacked {} with Debian's packaging and {} patches (no .dsc on the mirror)",
        orig.display(),
        list.lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .count()
    );
    Ok(())
}

/// The fallback when the mirror has the `.dsc` and Debian's packaging but
/// not the upstream tarball: upstream's tag of the same version from the
/// git directory in `RVERBS_RDMA_CORE_GIT`, if Debian patches nothing.
fn from_git(dl: &Path, tree: &Path, version: &str) -> Result<()> {
    let upstream = no_epoch(version)
        .rsplit_once('-')
        .map_or(no_epoch(version), |(u, _)| u);
    let git = std::env::var_os("RVERBS_RDMA_CORE_GIT").ok_or_else(|| {
        format!(
            "the upstream tarball could not be fetched; set RVERBS_RDMA_CORE_GIT to a git \
             directory of github.com/linux-rdma/rdma-core (tag v{upstream}) to use it instead"
        )
    })?;
    // Debian's packaging must have come: it says whether Debian patches
    // the upstream source.
    let debian = fs::read_dir(dl)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(".debian.tar"))
        .ok_or("apt-get fetched no debian.tar.* of rdma-core")?;
    let list = output(Command::new("tar").arg("tf").arg(&debian))?;
    if list.lines().any(|l| l.starts_with("debian/patches/")) {
        return Err(format!(
            "Debian's rdma-core {version} carries patches ({}): the upstream tag is not its source",
            debian.display()
        ));
    }
    fs::create_dir_all(tree).map_err(|e| e.to_string())?;
    eprintln!(
        "xtask: Debian's rdma-core {version} patches nothing; taking upstream v{upstream} from {}",
        Path::new(&git).display()
    );
    let archive = Command::new("git")
        .arg("--git-dir")
        .arg(&git)
        .args(["archive", &format!("v{upstream}")])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git archive: {e}"))?;
    let st = Command::new("tar")
        .arg("x")
        .arg("-C")
        .arg(tree)
        .stdin(archive.stdout.ok_or("git archive: no stdout")?)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !st.success() {
        return Err(format!("git archive v{upstream} | tar x failed: {st}"));
    }
    Ok(())
}

/// rdma-core's headers where its build publishes them (cmake's
/// `publish_headers`/`publish_internal_headers` into build/include): the
/// `infiniband/` and `rdma/` namespaces, and `kernel-abi/`, which cmake
/// generates with buildlib/make_abi_structs.py.
fn publish_headers(src: &Path, inc: &Path) -> Result<()> {
    let copy = |from: &Path, to_dir: &Path| -> Result<()> {
        fs::create_dir_all(to_dir).map_err(|e| e.to_string())?;
        let name = from.file_name().ok_or("bad header path")?;
        fs::copy(from, to_dir.join(name))
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", from.display()))
    };
    let ib = inc.join("infiniband");
    for h in [
        "arch.h",
        "opcode.h",
        "sa-kern-abi.h",
        "sa.h",
        "verbs.h",
        "verbs_api.h",
        "tm_types.h",
        "cmd_ioctl.h",
        "cmd_write.h",
        "driver.h",
        "kern-abi.h",
        "marshall.h",
    ] {
        copy(&src.join("libibverbs").join(h), &ib)?;
    }
    for h in ["mlx5_api.h", "mlx5dv.h"] {
        copy(&src.join("providers/mlx5").join(h), &ib)?;
    }
    for h in ["mlx5_user_ioctl_verbs.h", "ib_user_ioctl_verbs.h"] {
        copy(&src.join("kernel-headers/rdma").join(h), &ib)?;
    }
    for sub in ["rdma", "linux"] {
        let d = src.join("kernel-headers").join(sub);
        for e in fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.extension().is_some_and(|x| x == "h") {
                copy(&p, &inc.join(sub))?;
            }
        }
    }
    let abi = inc.join("kernel-abi");
    fs::create_dir_all(&abi).map_err(|e| e.to_string())?;
    for h in ["ib_user_verbs.h", "mlx5-abi.h"] {
        run(Command::new("python3")
            .arg(src.join("buildlib/make_abi_structs.py"))
            .arg(src.join("kernel-headers/rdma").join(h))
            .arg(abi.join(h)))?;
    }
    Ok(())
}

/// apt with deb-src lines of the host's release, its lists and cache under
/// `dir/apt-src/`; the host's apt configuration stays untouched.
struct PrivateApt {
    opts: Vec<String>,
}

impl PrivateApt {
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        for o in &self.opts {
            c.arg("-o").arg(o);
        }
        c
    }
}

fn private_apt(dir: &Path, release: Option<&str>) -> Result<PrivateApt> {
    let root = match release {
        None => dir.join("apt-src"),
        Some(r) => dir.join(format!("apt-src-{r}")),
    };
    for d in [
        "etc/preferences.d",
        "state/lists/partial",
        "cache/archives/partial",
    ] {
        fs::create_dir_all(root.join(d)).map_err(|e| format!("{}: {e}", root.display()))?;
    }
    let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
    if !Path::new(keyring).exists() {
        return Err(format!("no {keyring} (package debian-archive-keyring)"));
    }
    let release = release
        .map(str::to_string)
        .or_else(|| {
            fs::read_to_string("/etc/os-release")
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
                        .map(|v| v.trim_matches('"').to_string())
                })
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "bookworm".into());
    let sources = root.join("etc/sources.list");
    let mirror = crate::vm::host_mirror();
    fs::write(
        &sources,
        format!(
            "deb-src [signed-by={keyring}] {mirror} {release} main\n\
             deb-src [signed-by={keyring}] {mirror} {release}-updates main\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    let status = root.join("state/status");
    fs::write(&status, "").map_err(|e| e.to_string())?;
    let p = |k: &str, v: &Path| format!("{k}={}", v.display());
    let apt = PrivateApt {
        opts: vec![
            p("Dir::Etc::sourcelist", &sources),
            "Dir::Etc::sourceparts=-".into(),
            p(
                "Dir::Etc::preferencesparts",
                &root.join("etc/preferences.d"),
            ),
            "Dir::Etc::preferences=/dev/null".into(),
            p("Dir::State", &root.join("state")),
            p("Dir::State::status", &status),
            p("Dir::Cache", &root.join("cache")),
            "Acquire::Languages=none".into(),
        ],
    };
    eprintln!(
        "xtask: apt-get update of Debian {release}'s source lists, private to {}",
        root.display()
    );
    run(apt
        .command("apt-get")
        .args(["update", "-q"])
        .stdout(Stdio::null()))?;
    Ok(apt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_kept_apart_by_caller() {
        let dir = std::env::temp_dir().join(format!("xtask-cgfrom-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cg");
        fs::write(
            &f,
            "events: Ir\nfn=(1) ref_post_db\n0 4\ncfn=(2) mlx5_post_send\ncalls=2 0\n0 630\n\
             fn=(3) ref_post_bf\n0 4\ncfn=(2)\ncalls=1 0\n0 347\n\
             fn=(2)\n0 9\ncfn=(4) _mlx5_post_send\ncalls=3 0\n0 900\n",
        )
        .unwrap();
        let c = calls_from(&f);
        let get = |a: &str, b: &str| c[&(a.to_string(), b.to_string())];
        assert_eq!(get("ref_post_db", "mlx5_post_send"), (2, 630));
        assert_eq!(get("ref_post_bf", "mlx5_post_send"), (1, 347));
        assert_eq!(get("mlx5_post_send", "_mlx5_post_send"), (3, 900));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn rows_match_the_harness() {
        for (_, caller, _) in ROWS {
            assert!(
                HARNESS_C.contains(&format!("MEASURED int {caller}(")),
                "{caller} is not a measured caller in harness.c"
            );
        }
    }
}

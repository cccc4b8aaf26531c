//! `cargo xtask dist`: the `rverbs` tool as one static, stripped executable
//! (`target/dist/rverbs`; the other targets' under
//! `target/dist/<target>/rverbs`) — no dynamic loader, no shared libraries.

use crate::host::{output, run, target_dir, workspace_root, Result, TOOL_PACKAGE};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The musl build: static by default, no glibc start-up (its tunables),
/// and what Rust users who ship static binaries build for.
pub const MUSL: &str = "x86_64-unknown-linux-musl";

/// The arm64 builds, linked by Debian's cross gcc (gcc-aarch64-linux-gnu;
/// its libc6-dev-arm64-cross has the static glibc, and rustc brings musl's
/// own objects for the musl target).
pub const AARCH64: &str = "aarch64-unknown-linux-gnu";
pub const AARCH64_MUSL: &str = "aarch64-unknown-linux-musl";

/// The targets `dist` builds: x86_64 and aarch64, each with glibc and with
/// musl, all static.
pub const TARGETS: [&str; 4] = [TARGET, MUSL, AARCH64, AARCH64_MUSL];

/// "glibc" or "musl", for messages.
pub fn libc_of(target: &str) -> &'static str {
    if target.ends_with("musl") {
        "musl"
    } else {
        "glibc"
    }
}

/// The cross tools (linker, strip) a target needs: none for x86_64.
fn cross_prefix(target: &str) -> &'static str {
    if target.starts_with("aarch64-") {
        "aarch64-linux-gnu-"
    } else {
        ""
    }
}

/// Builds the glibc static binary and returns its path
/// (`target/dist/rverbs`).
pub fn build() -> Result<PathBuf> {
    build_for(TARGET)
}

/// Builds the static binary for `target` (one of [`TARGETS`]) and returns
/// its path: `target/dist/rverbs` for glibc, `target/dist/<target>/rverbs`
/// otherwise.
pub fn build_for(target: &str) -> Result<PathBuf> {
    if !TARGETS.contains(&target) {
        return Err(format!(
            "dist: no build for {target} (targets: {})",
            TARGETS.join(", ")
        ));
    }
    crate::host::ensure_rust_target(target)?;
    let build_dir = target_dir().join("dist-build");
    let cross = cross_prefix(target);
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    if !cross.is_empty() {
        cargo.env(
            format!(
                "CARGO_TARGET_{}_LINKER",
                target.to_uppercase().replace('-', "_")
            ),
            format!("{cross}gcc"),
        );
    }
    // An explicit --target keeps +crt-static off the host's build scripts
    // and proc macros (clap's derive), which must stay dynamic. (musl is
    // static by default; the flag only says so again.)
    run(cargo
        .current_dir(workspace_root())
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            TOOL_PACKAGE,
            "--bin",
            "rverbs",
            "--target",
            target,
        ])
        .arg("--target-dir")
        .arg(&build_dir)
        .env("RUSTFLAGS", "-C target-feature=+crt-static"))?;
    let built = build_dir.join(target).join("release").join("rverbs");
    let dist = if target == TARGET {
        target_dir().join("dist")
    } else {
        target_dir().join("dist").join(target)
    };
    std::fs::create_dir_all(&dist).map_err(|e| e.to_string())?;
    let out = dist.join("rverbs");
    run(Command::new(format!("{cross}strip"))
        .arg("-o")
        .arg(&out)
        .arg(&built))?;
    Ok(out)
}

/// The machine the ELF header names (`X86-64`, `AArch64`).
pub fn machine(bin: &std::path::Path) -> Result<String> {
    let header = output(Command::new("readelf").arg("-hW").arg(bin))?;
    header
        .lines()
        .find_map(|l| l.trim().strip_prefix("Machine:"))
        .map(|m| m.trim().to_string())
        .ok_or_else(|| format!("{}: readelf names no machine", bin.display()))
}

/// What the ELF headers say about dynamic linking: (PT_INTERP present,
/// DT_NEEDED entries).
pub fn dynamic_deps(bin: &std::path::Path) -> Result<(bool, Vec<String>)> {
    let phdrs = output(Command::new("readelf").arg("-lW").arg(bin))?;
    let interp = phdrs.lines().any(|l| l.trim_start().starts_with("INTERP"));
    let dynamic = output(Command::new("readelf").arg("-dW").arg(bin))?;
    let needed = dynamic
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .map(|l| l.trim().to_string())
        .collect();
    Ok((interp, needed))
}

/// `cargo xtask dist [--target T | --all]`: the glibc build by default.
pub fn main(args: &[String]) -> Result<ExitCode> {
    let targets: Vec<&str> = match args {
        [] => vec![TARGET],
        [flag] if flag == "--all" => TARGETS.to_vec(),
        [flag, t] if flag == "--target" => vec![t.as_str()],
        _ => return Err("dist: usage: cargo xtask dist [--target TARGET | --all]".into()),
    };
    let mut all_static = true;
    for target in targets {
        let bin = build_for(target)?;
        let size = std::fs::metadata(&bin).map_err(|e| e.to_string())?.len();
        let (interp, needed) = dynamic_deps(&bin)?;
        println!(
            "{} ({target}): {} bytes ({:.1} MiB)",
            bin.display(),
            size,
            size as f64 / 1048576.0
        );
        println!("machine: {}", machine(&bin)?);
        println!("PT_INTERP: {}", if interp { "present" } else { "none" });
        println!(
            "DT_NEEDED: {}",
            if needed.is_empty() {
                "none".to_string()
            } else {
                needed.join(", ")
            }
        );
        all_static &= !interp && needed.is_empty();
    }
    Ok(if all_static {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

//! `cargo xtask dist`: the `rverbs` tool as one static, stripped executable
//! (`target/dist/rverbs`) — no dynamic loader, no shared libraries.

use crate::host::{output, run, target_dir, workspace_root, Result, TOOL_PACKAGE};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Builds the static binary and returns its path.
pub fn build() -> Result<PathBuf> {
    let build_dir = target_dir().join("dist-build");
    // An explicit --target keeps +crt-static off the host's build scripts
    // and proc macros (clap's derive), which must stay dynamic.
    run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
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
                TARGET,
            ])
            .arg("--target-dir")
            .arg(&build_dir)
            .env("RUSTFLAGS", "-C target-feature=+crt-static"),
    )?;
    let built = build_dir.join(TARGET).join("release").join("rverbs");
    let dist = target_dir().join("dist");
    std::fs::create_dir_all(&dist).map_err(|e| e.to_string())?;
    let out = dist.join("rverbs");
    run(Command::new("strip").arg("-o").arg(&out).arg(&built))?;
    Ok(out)
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

pub fn main() -> Result<ExitCode> {
    let bin = build()?;
    let size = std::fs::metadata(&bin).map_err(|e| e.to_string())?.len();
    let (interp, needed) = dynamic_deps(&bin)?;
    println!(
        "{}: {} bytes ({:.1} MiB)",
        bin.display(),
        size,
        size as f64 / 1048576.0
    );
    println!("PT_INTERP: {}", if interp { "present" } else { "none" });
    println!(
        "DT_NEEDED: {}",
        if needed.is_empty() {
            "none".to_string()
        } else {
            needed.join(", ")
        }
    );
    Ok(if !interp && needed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

//! The library crates as a registry would take them: `cargo package
//! --offline` of all of them in one call, so that each crate's
//! dependencies on the others resolve to the packages made beside it.
//! Each package is then built from its `.crate` alone (cargo's verify
//! step, under `target/package`: a file left out of a package fails here).
//! That is `cargo publish --dry-run` without its one online step, the
//! registry index lookup (which needs the network, and says nothing about
//! crates never published); the dry run itself passed for all seven by
//! hand on 2026-11-26. The run fails on any manifest warning (a missing
//! description, repository, licence…), and each package must carry both
//! licence texts and the README it names.

use crate::host::{workspace_root, Result};
use std::process::Command;

/// The crates a program can depend on, in dependency order.
pub const CRATES: [&str; 7] = [
    "uverbs-abi",
    "rverbs-types",
    "provider-rxe",
    "provider-mlx5",
    "rverbs-cm",
    "rverbs",
    "rverbs-libibverbs",
];

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

pub fn check() -> Result<()> {
    let mut c = cargo();
    c.args(["package", "--offline", "--allow-dirty"]);
    for k in CRATES {
        c.args(["-p", k]);
    }
    let out = c.output().map_err(|e| format!("cargo package: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("cargo package failed: {}", err.trim()));
    }
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning:")).collect();
    if !warnings.is_empty() {
        return Err(format!("cargo package warned: {}", warnings.join("; ")));
    }
    let verified = err
        .lines()
        .filter(|l| l.trim_start().starts_with("Verifying "))
        .count();
    if verified != CRATES.len() {
        return Err(format!(
            "cargo package verified {verified} of {} crates",
            CRATES.len()
        ));
    }
    for k in CRATES {
        let list = cargo()
            .args(["package", "--list", "--offline", "--allow-dirty", "-p", k])
            .output()
            .map_err(|e| format!("cargo package --list: {e}"))?;
        let files = String::from_utf8_lossy(&list.stdout);
        for need in ["LICENSE-MIT", "LICENSE-APACHE", "README.md", "Cargo.toml"] {
            if !files.lines().any(|l| l == need) {
                return Err(format!("the {k} package lacks {need}"));
            }
        }
    }
    Ok(())
}

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

/// Removes cargo's unpacked copies of our packages from its earlier
/// verify steps. Cargo unpacks a registry's crate once per name and
/// version (`$CARGO_HOME/registry/src/<registry>/<name>-<version>`) and
/// reuses that copy, which is right for a published crate but not for the
/// temporary registry of `cargo package`, which serves every change under
/// the same version: a stale copy made an API added since look missing
/// (only on a machine that had run the check before; a fresh one has no
/// copy). Only local registries' directories are touched (their names
/// start with '-'; crates.io's start with `index.`).
fn clear_stale_unpacked() -> Result<()> {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let version = env!("CARGO_PKG_VERSION");
    let Ok(registries) = std::fs::read_dir(home.join("registry").join("src")) else {
        return Ok(());
    };
    for r in registries.flatten() {
        if !r.file_name().to_string_lossy().starts_with('-') {
            continue;
        }
        for k in CRATES {
            let d = r.path().join(format!("{k}-{version}"));
            if d.exists() {
                std::fs::remove_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
        }
    }
    Ok(())
}

/// Forgets the verify step's earlier builds of our packages as registry
/// crates (in the workspace's target directory, which the verify step
/// shares). Cargo tracks no source file of a registry crate (its dep-info
/// lists none: a 14-byte file where a workspace unit's lists its sources)
/// and takes it for unchanged while its version is, so without this a
/// package was checked against the other packages as they were when the
/// check first ran on this machine (a fresh clone's target has none). The
/// workspace's own builds of them stay.
fn clear_stale_builds() -> Result<()> {
    let dir = crate::host::target_dir().join("debug").join(".fingerprint");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((stem, _hash)) = name.rsplit_once('-') else {
            continue;
        };
        if !CRATES.contains(&stem) {
            continue;
        }
        let tracks_nothing = std::fs::read_dir(e.path())
            .into_iter()
            .flatten()
            .flatten()
            .any(|f| {
                f.file_name().to_string_lossy().starts_with("dep-lib-")
                    && f.metadata().is_ok_and(|m| m.len() < 32)
            });
        if tracks_nothing {
            std::fs::remove_dir_all(e.path()).map_err(|x| format!("{name}: {x}"))?;
        }
    }
    Ok(())
}

pub fn check() -> Result<()> {
    clear_stale_unpacked()?;
    clear_stale_builds()?;
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

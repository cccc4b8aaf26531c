//! The DMA barriers and MMIO stores as the compiler emitted them:
//! provider-mlx5 built for aarch64 and for x86_64 with its
//! `barrier-probes` feature (each barrier and MMIO store copied into an
//! out-of-line function under a fixed name), one object file each, every
//! probe disassembled and its instructions compared with what rdma-core's
//! `util/udma_barrier.h` and `util/mmio.h` emit on that architecture.
//! What the table in `provider-mlx5/src/barrier.rs` promises, checked on
//! the instructions themselves, not on the source.
//!
//! Needs the `aarch64-unknown-linux-gnu` standard library (added with
//! rustup if missing) and Debian's `binutils-aarch64-linux-gnu` (a host
//! package, see `host::PACKAGES`); a missing one fails the check.

use crate::host::{run, target_dir, workspace_root, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One architecture's expectations: (target, objdump, probe -> the
/// instructions of its body, in order, `ret` included).
struct Arch {
    target: &'static str,
    objdump: &'static str,
    probes: &'static [(&'static str, &'static [&'static str])],
}

/// The eight 64-bit stores of a BlueFlame block, ascending.
const A64_COPY: &[&str] = &[
    "ldr x8, [x1]",
    "str x8, [x0]",
    "ldr x8, [x1, #8]",
    "str x8, [x0, #8]",
    "ldr x8, [x1, #16]",
    "str x8, [x0, #16]",
    "ldr x8, [x1, #24]",
    "str x8, [x0, #24]",
    "ldr x8, [x1, #32]",
    "str x8, [x0, #32]",
    "ldr x8, [x1, #40]",
    "str x8, [x0, #40]",
    "ldr x8, [x1, #48]",
    "str x8, [x0, #48]",
    "ldr x8, [x1, #56]",
    "str x8, [x0, #56]",
    "ret",
];

const ARCHES: [Arch; 2] = [
    Arch {
        target: "aarch64-unknown-linux-gnu",
        objdump: "aarch64-linux-gnu-objdump",
        probes: &[
            ("rverbs_probe_to_device", &["dmb oshst", "ret"]),
            ("rverbs_probe_from_device", &["dmb oshld", "ret"]),
            ("rverbs_probe_wc_start", &["dsb st", "ret"]),
            ("rverbs_probe_wc_flush", &["dsb st", "ret"]),
            ("rverbs_probe_reads_before_release", &["dmb oshld", "ret"]),
            ("rverbs_probe_mmio_write64", &["str x1, [x0]", "ret"]),
            ("rverbs_probe_mmio_copy64", A64_COPY),
        ],
    },
    Arch {
        target: "x86_64-unknown-linux-gnu",
        objdump: "objdump",
        probes: &[
            // A compiler fence only: TSO orders the stores.
            ("rverbs_probe_to_device", &["ret"]),
            ("rverbs_probe_from_device", &["lfence", "ret"]),
            ("rverbs_probe_wc_start", &["sfence", "ret"]),
            ("rverbs_probe_wc_flush", &["sfence", "ret"]),
            ("rverbs_probe_reads_before_release", &["ret"]),
            ("rverbs_probe_mmio_write64", &["mov %rsi,(%rdi)", "ret"]),
            (
                "rverbs_probe_mmio_copy64",
                &[
                    "mov (%rsi),%rax",
                    "mov %rax,(%rdi)",
                    "mov 0x8(%rsi),%rax",
                    "mov %rax,0x8(%rdi)",
                    "mov 0x10(%rsi),%rax",
                    "mov %rax,0x10(%rdi)",
                    "mov 0x18(%rsi),%rax",
                    "mov %rax,0x18(%rdi)",
                    "mov 0x20(%rsi),%rax",
                    "mov %rax,0x20(%rdi)",
                    "mov 0x28(%rsi),%rax",
                    "mov %rax,0x28(%rdi)",
                    "mov 0x30(%rsi),%rax",
                    "mov %rax,0x30(%rdi)",
                    "mov 0x38(%rsi),%rax",
                    "mov %rax,0x38(%rdi)",
                    "ret",
                ],
            ),
        ],
    },
];

/// Builds and checks both architectures: one result for the run, naming
/// every probe that differs.
pub fn check() -> Result<()> {
    crate::host::ensure_host_packages()?;
    let mut wrong = Vec::new();
    for arch in &ARCHES {
        crate::host::ensure_rust_target(arch.target)?;
        let obj = build(arch.target)?;
        let bodies = disassemble(arch.objdump, &obj)?;
        for (probe, want) in arch.probes {
            match bodies.get(*probe) {
                Some(got) if got.iter().map(String::as_str).eq(want.iter().copied()) => {}
                got => wrong.push(format!(
                    "{} {probe}: expected {want:?}, the build has {got:?}",
                    arch.target
                )),
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// provider-mlx5 with its probes for `target`, as one object file (one
/// codegen unit, so that one file holds every probe).
fn build(target: &str) -> Result<PathBuf> {
    let dir = target_dir().join("barriers");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let obj = dir.join(format!("{target}.o"));
    let _ = std::fs::remove_file(&obj);
    run(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(workspace_root())
            .env("CARGO_TARGET_DIR", &dir)
            .args([
                "rustc",
                "--quiet",
                "-p",
                "provider-mlx5",
                "--lib",
                "--release",
                "--features",
                "barrier-probes",
                "--target",
                target,
                "--",
                "-C",
                "codegen-units=1",
            ])
            .arg(format!("--emit=obj={}", obj.display())),
    )?;
    Ok(obj)
}

/// Each probe's instructions, whitespace collapsed. LLVM may fold probes
/// with the same body into one function with several names, so each
/// symbol is found through the section it is defined in (`objdump -t`),
/// and each section's code is read once (`objdump -d`).
fn disassemble(objdump: &str, obj: &Path) -> Result<BTreeMap<String, Vec<String>>> {
    let out = |args: &[&str]| -> Result<String> {
        let o = Command::new(objdump)
            .args(args)
            .arg(obj)
            .output()
            .map_err(|e| format!("{objdump}: {e}"))?;
        if !o.status.success() {
            return Err(format!("{objdump} {args:?} failed"));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    };
    // "0000000000000000 g     F .text.NAME\t0000000000000008 SYMBOL"
    let mut section_of = BTreeMap::new();
    for line in out(&["-t"])?.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(sym), Some(sec)) = (
            fields.last(),
            fields.iter().find(|f| f.starts_with(".text")),
        ) {
            if sym.starts_with("rverbs_probe_") {
                section_of.insert(sym.to_string(), sec.to_string());
            }
        }
    }
    let code = out(&["-d", "--no-show-raw-insn"])?;
    let mut by_section: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in code.lines() {
        if let Some(rest) = line.strip_prefix("Disassembly of section ") {
            current = Some(rest.trim_end_matches(':').to_string());
            continue;
        }
        // "   4:\tdmb\toshld" -> "dmb oshld"
        let Some((addr, insn)) = line.split_once(":\t") else {
            continue;
        };
        if addr.trim().chars().all(|c| c.is_ascii_hexdigit()) && !addr.trim().is_empty() {
            if let Some(sec) = &current {
                let insn = insn.split_whitespace().collect::<Vec<_>>().join(" ");
                // Comments: x86 objdump's after " # ", aarch64's after
                // " //" (an aarch64 immediate is "#8", with no space after).
                let insn = insn.split(" # ").next().unwrap_or("");
                let insn = insn.split(" //").next().unwrap_or("").trim().to_string();
                by_section.entry(sec.clone()).or_default().push(insn);
            }
        }
    }
    Ok(section_of
        .into_iter()
        .filter_map(|(sym, sec)| Some((sym, by_section.get(&sec)?.clone())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_is_expected_on_both_architectures() {
        for arch in &ARCHES {
            let names: Vec<&str> = arch.probes.iter().map(|p| p.0).collect();
            assert_eq!(
                names,
                ARCHES[0].probes.iter().map(|p| p.0).collect::<Vec<_>>()
            );
        }
    }
}

//! The test bed's command as others use it (issue 31): a crate that is not
//! in this repository, written under /tmp, runs its `cargo test` in the VM
//! through `rverbs-testbed run` set as its target's `runner`, and the VM's
//! status comes back as the test's; and the command's faults (`--netem`,
//! `--flap`) reach the link.

use super::{cargo, Tally};
use crate::host::{target_dir, Result};
use crate::vm;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MANIFEST: &str = r#"[package]
name = "rxe-probe"
version = "0.1.0"
edition = "2021"
publish = false

[workspace]
"#;

/// The probe's tests: what a test of an RDMA crate needs of the bed.
const TESTS: &str = r#"
use std::process::Command;

fn dev() -> String {
    std::env::var("RVERBS_TEST_DEV").expect("the bed names the device")
}

#[test]
fn the_device_is_an_active_rxe_port() {
    let p = format!("/sys/class/infiniband/{}/ports/1/state", dev());
    let state = std::fs::read_to_string(&p).expect("the device's port state");
    assert_eq!(state.trim(), "4: ACTIVE");
}

#[test]
fn rdma_cores_tools_see_it() {
    let o = Command::new("ibv_devinfo").args(["-d", &dev()]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("PORT_ACTIVE"), "{text}");
}

#[test]
#[ignore = "run with --ignored: the runner must carry a failure back"]
fn a_failure_comes_back() {
    panic!("failing on purpose in the VM");
}
"#;

/// `s` as a TOML basic string (for `cargo --config`).
pub(super) fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Removes the probe's directory, whatever the check's outcome.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes the probe crate under /tmp (outside the repository; the guest's
/// /tmp is a tmpfs, so the bed must keep the working directory visible).
fn write_probe() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("rverbs-testbed-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let w = |p: &Path, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    w(&dir.join("Cargo.toml"), MANIFEST)?;
    w(&dir.join("src/lib.rs"), "")?;
    w(&dir.join("tests/rxe.rs"), TESTS)?;
    Ok(dir)
}

/// `cargo test` of the probe with `bed run --kernel K --` as its runner;
/// the cache is xtask's (no second download).
fn cargo_test(dir: &Path, bed: &Path, kernel: &vm::Kernel, extra: &[&str]) -> Result<Output> {
    let runner = format!(
        "target.x86_64-unknown-linux-gnu.runner=[{}, \"run\", \"--kernel\", {}, \"--timeout\", \"300\", \"--\"]",
        toml_str(&bed.display().to_string()),
        toml_str(kernel.name)
    );
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(dir)
        // The integration test only: a binary is a VM boot, and the
        // library's unit tests (none) would be one more.
        .args(["test", "--quiet", "--test", "rxe", "--config", &runner])
        .args(extra)
        .env_remove("CARGO_TARGET_DIR")
        .env("RVERBS_TESTBED_CACHE", vm::cache_dir())
        .output()
        .map_err(|e| format!("cargo test of the probe: {e}"))
}

/// The runner check on `kernel`: the probe's two tests pass in the VM, and
/// its ignored failing test, run, fails `cargo test`.
pub(super) fn check(tally: &mut Tally, kernel: &'static vm::Kernel) {
    let what = format!(
        "test bed as a cargo runner: a crate outside the repository runs `cargo test` in the VM ({kernel})"
    );
    match run(kernel) {
        Ok(()) => tally.pass(&what),
        Err(e) => tally.fail(&what, &e),
    }
}

/// The bed's command, built.
fn bed() -> Result<PathBuf> {
    crate::host::run(cargo().args(["build", "--quiet", "-p", "rverbs-testbed"]))?;
    Ok(target_dir().join("debug").join("rverbs-testbed"))
}

/// `rverbs-testbed ARGS`, built first, over xtask's kernel cache: its
/// output once it ends.
fn bed_output<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Result<Output> {
    Command::new(bed()?)
        .args(args)
        .env("RVERBS_TESTBED_CACHE", vm::cache_dir())
        .output()
        .map_err(|e| format!("rverbs-testbed: {e}"))
}

/// `--netem` and `--flap` on two hosts: host 1's link shows the qdisc,
/// and its rxe port is seen DOWN while the link flaps.
pub(super) fn faults_check(tally: &mut Tally, kernel: &'static vm::Kernel) {
    let what = format!(
        "test bed command: --netem 'delay 20ms loss 1%' and --flap 4 reach host 1's link and rxe0's port ({kernel})"
    );
    let probe = "tc qdisc show dev $RVERBS_VM_NETDEV; seen=0; \
                 for i in $(seq 20); do grep -q DOWN /sys/class/infiniband/rxe0/ports/1/state && seen=1; sleep 0.5; done; \
                 echo rxe-down-seen=$seen";
    let r = bed_output([
        "run",
        "--kernel",
        kernel.name,
        "--hosts",
        "2",
        "--timeout",
        "300",
        "--netem",
        "delay 20ms loss 1%",
        "--flap",
        "4",
        "--",
        "sh",
        "-c",
        probe,
    ]);
    match r {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            println!("{text}");
            if o.status.success()
                && text.contains("netem")
                && text.contains("delay 20ms loss 1%")
                && text.contains("rxe-down-seen=1")
            {
                tally.pass(&what)
            } else {
                tally.fail(&what, &format!("{}: {text}", o.status))
            }
        }
        Err(e) => tally.fail(&what, &e),
    }
}

/// `--kernel DIR`: kernel `k`'s unpacked package, given as a directory of
/// the user's, boots with rxe ACTIVE on its release.
pub(super) fn local_kernel_check(tally: &mut Tally, k: &'static vm::Kernel) {
    let what = format!(
        "test bed command: --kernel DIR boots a kernel from a directory ({k}'s unpacked package)"
    );
    let found = std::fs::read_dir(vm::cache_dir()).ok().and_then(|d| {
        d.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| k.owns_cache_dir(n))
        })
    });
    let Some(dir) = found else {
        return tally.fail(
            &what,
            &format!("no unpacked {k} in {}", vm::cache_dir().display()),
        );
    };
    let release = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("kernel-"))
        .unwrap_or_default()
        .to_string();
    let probe = "uname -r; cat /sys/class/infiniband/rxe0/ports/1/state";
    let r = bed_output(
        ["run", "--kernel"]
            .map(OsStr::new)
            .into_iter()
            .chain([dir.as_os_str()])
            .chain(["--timeout", "300", "--", "sh", "-c", probe].map(OsStr::new)),
    );
    match r {
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            if o.status.success() && lines == [release.as_str(), "4: ACTIVE"] {
                tally.pass(&what)
            } else {
                tally.fail(
                    &what,
                    &format!("{}: {text}{}", o.status, String::from_utf8_lossy(&o.stderr)),
                )
            }
        }
        Err(e) => tally.fail(&what, &e),
    }
}

fn run(kernel: &'static vm::Kernel) -> Result<()> {
    let dir = write_probe()?;
    let _gone = RemoveDir(dir.clone());
    // The command as installed: a copy outside the repository (it carries
    // its guest init scripts; only the cache, target/vm, is shared, to
    // spare a second kernel download).
    let built = bed()?;
    let bed = dir.join("bin").join("rverbs-testbed");
    std::fs::create_dir_all(dir.join("bin")).map_err(|e| e.to_string())?;
    std::fs::copy(built, &bed).map_err(|e| format!("copy rverbs-testbed: {e}"))?;
    let show = |o: &Output| {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let pass = cargo_test(&dir, &bed, kernel, &[])?;
    let text = show(&pass);
    println!("{text}");
    if !pass.status.success() || !text.contains("2 passed; 0 failed; 1 ignored") {
        return Err(format!("the probe's tests did not pass in the VM:\n{text}"));
    }
    let fail = cargo_test(&dir, &bed, kernel, &["--", "--ignored"])?;
    let text = show(&fail);
    if fail.status.success() || !text.contains("failing on purpose in the VM") {
        return Err(format!(
            "the probe's failing test did not fail cargo test ({}):\n{text}",
            fail.status
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn toml_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(super::toml_str("/a b/c"), "\"/a b/c\"");
        assert_eq!(super::toml_str("q\"b\\n\n"), "\"q\\\"b\\\\n\\u000A\"");
    }
}

//! Shared helpers of the VM tests. These tests need a kernel with an rxe
//! device: `cargo xtask test` runs them inside the VM. Run anywhere else they
//! fail (never skip), naming what is missing.
#![allow(dead_code)]

pub mod asyncwatch;
pub mod cm;
pub mod ibverbs_so;
pub mod rc;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Open fds of this process, and its resident set in KiB.
pub fn fds_and_rss() -> (usize, u64) {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    (fds, rss)
}

/// What the VM tells a test about its rxe device.
pub struct TestEnv {
    /// The rxe device's name (`rxe0`).
    pub dev: String,
    /// The GID index of the RoCE v2 IPv4-mapped GID.
    pub gid: u32,
    /// The IPv4 address of the device's netdev.
    pub addr: String,
}

/// Reads the test environment `cargo xtask vm-run` sets; panics outside it.
pub fn env() -> TestEnv {
    let get = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: this test needs the rxe VM; run it with `cargo xtask test`")
        })
    };
    TestEnv {
        dev: get("RVERBS_TEST_DEV"),
        gid: get("RVERBS_TEST_GID")
            .parse()
            .expect("RVERBS_TEST_GID is a number"),
        addr: get("RVERBS_TEST_ADDR"),
    }
}

/// Opens the test device, and says which GID index the VM gave its
/// address (the RoCE v2 IPv4-mapped GID).
pub fn open() -> (rverbs::Context, u32) {
    let e = env();
    let ctx = rverbs::Context::open_by_name(Some(&e.dev))
        .unwrap_or_else(|err| panic!("open {}: {err}", e.dev));
    (ctx, e.gid)
}

/// Cargo's profile directory (`target/debug/`), whose `deps/` holds this
/// test executable, and where `cargo xtask test` builds what the tests
/// run. Panics if the test is not in a `deps/` directory.
pub fn profile_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test executable's path");
        exe.parent()
            .filter(|d| d.ends_with("deps"))
            .and_then(Path::parent)
            .unwrap_or_else(|| panic!("{} is not in cargo's deps/ directory", exe.display()))
            .to_path_buf()
    })
}

/// The `rverbs` tool the tests run: `rverbs` in the [`profile_dir`],
/// which is where `cargo build -p rverbs-tool` puts it; `cargo xtask test`
/// builds it before the tests. (Cargo's `CARGO_BIN_EXE_rverbs` names only
/// binaries of the test's own package, and the tool is a package of its
/// own.) Panics if it is missing, naming the path.
pub fn rverbs_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let bin = profile_dir().join("rverbs");
        assert!(
            bin.is_file(),
            "{} is missing: build it with `cargo build -p rverbs-tool` (`cargo xtask test` does)",
            bin.display()
        );
        bin.into_os_string()
            .into_string()
            .expect("the tool's path is UTF-8")
    })
}

/// The path of the root crate's example `name` (built by `cargo xtask
/// test` before the VM tests), in the [`profile_dir`].
pub fn example_bin(name: &str) -> String {
    let dir = profile_dir().join("examples").join(name);
    assert!(
        dir.is_file(),
        "{} is missing: build it with `cargo build -p rverbs --examples` (`cargo xtask test` does)",
        dir.display()
    );
    dir.into_os_string().into_string().expect("UTF-8 path")
}

/// The arguments of an `ibv_*_pingpong` run (rdma-core's, or `rverbs
/// pingpong`) on the test device and GID: `iters` round trips of `size`
/// bytes, exchanging addresses on TCP port `port`, waiting on completion
/// events (`-e`) if `events`.
pub fn pingpong_args(iters: u32, size: u32, port: u16, events: bool) -> Vec<String> {
    let e = env();
    let mut a = vec![
        "-d".to_string(),
        e.dev,
        "-g".into(),
        e.gid.to_string(),
        "-n".into(),
        iters.to_string(),
        "-s".into(),
        size.to_string(),
        "-p".into(),
        port.to_string(),
    ];
    if events {
        a.push("-e".into());
    }
    a
}

/// Kills a background process if the test panics before waiting for it.
pub struct Background(pub Option<Child>);

impl Background {
    pub fn spawn(cmd: &mut Command) -> Background {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
        Background(Some(child))
    }

    /// Waits at most `limit` for the process and returns its output.
    pub fn wait(mut self, limit: Duration) -> Output {
        let mut child = self.0.take().expect("waited once");
        let until = Instant::now() + limit;
        loop {
            if child.try_wait().expect("try_wait").is_some() {
                return child.wait_with_output().expect("wait_with_output");
            }
            if Instant::now() > until {
                let _ = child.kill();
                let out = child.wait_with_output().expect("wait_with_output");
                panic!(
                    "background process did not finish in {limit:?}; stdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits (at most 20 s) until `server` listens on rdma_cm port space `ps`
/// (`TCP`, `UDP`) port `port`, on the test address or the wildcard, as
/// `rdma resource show cm_id` lists it. A client started earlier would see
/// some of its connections rejected (between the server's bind and
/// listen) and others accepted, and its retry would then find the
/// server's connection count already spent.
pub fn wait_cm_listening(server: &mut Background, ps: &str, port: u16) {
    let state = format!("state LISTEN ps {ps} ");
    let want = format!("src-addr {}:{port} ", env().addr);
    let any = format!("src-addr 0.0.0.0:{port} ");
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let o = Command::new("rdma")
            .args(["resource", "show", "cm_id"])
            .output()
            .expect("rdma (iproute2)");
        let text = String::from_utf8_lossy(&o.stdout);
        if text
            .lines()
            .any(|l| l.contains(&state) && (l.contains(&want) || l.contains(&any)))
        {
            return;
        }
        if let Some(st) = server.0.as_mut().and_then(|c| c.try_wait().unwrap()) {
            panic!("the server exited ({st}) before listening");
        }
        assert!(
            Instant::now() < until,
            "nothing listens on {ps} {port}: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs a client command until it succeeds (its server may not be listening
/// yet), at most `limit`; returns the last output.
pub fn retry_until_ok(limit: Duration, mut make: impl FnMut() -> Command) -> Output {
    let until = Instant::now() + limit;
    loop {
        let out = make().output().expect("client command starts");
        if out.status.success() || Instant::now() > until {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Formats an Output for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `X.Y` of the running kernel (`6.1`, `6.12`, `7.2`), for the few tests
/// that pin a behaviour one kernel's rxe has and another's lacks. The
/// library never asks this: it reads features from the kernel.
pub fn kernel_series() -> String {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("read osrelease");
    let mut parts = r.trim().split(['.', '-', '+']);
    format!(
        "{}.{}",
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("")
    )
}

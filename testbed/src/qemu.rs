//! Booting QEMU, streaming the guest's console, and collecting exit statuses.

use super::image;
use crate::host::{ensure_packages, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What to run, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// How many VMs: one (rxe on a veth pair), two (joined by a QEMU
    /// socket netdev on loopback) or more (on a VDE hub: a unix socket on
    /// this machine), at most [`MAX_HOSTS`].
    pub hosts: usize,
    /// Run [`Options::cmd`] on every host, not only the first (the others
    /// then ignore [`Options::peer_cmd`]).
    pub every_host: bool,
    /// Hard limit for the whole run, boot included.
    pub timeout: Duration,
    /// The command for the first VM (for every VM with
    /// [`Options::every_host`]).
    pub cmd: Vec<String>,
    /// The command for the other VMs; `None` leaves them idle.
    pub peer_cmd: Option<String>,
    /// Extra environment for the command(s).
    pub env: Vec<(String, String)>,
    /// Print the guest console's setup lines too.
    pub verbose: bool,
    /// Keep the command's output lines in the [`Outcome`].
    pub capture: bool,
    /// Host 1's writable share (`RVERBS_VM_OUT`), kept after the run; by
    /// default a directory removed with the run.
    pub out_dir: Option<PathBuf>,
    /// A bare VM: no host share, no iproute2; the initramfs holds busybox,
    /// the modules and this binary as `/bin/rverbs`, and the command runs
    /// with busybox's sh (one host only).
    pub bare: Option<PathBuf>,
    /// The kernel to boot.
    pub kernel: &'static super::Kernel,
    /// The other hosts' kernel, when it differs: an arm64 VM beside an
    /// amd64 one, say. Such a host is bare and needs
    /// [`Options::peer_bare`].
    pub peer_kernel: Option<&'static super::Kernel>,
    /// The other hosts' static binary, for bare other hosts.
    pub peer_bare: Option<PathBuf>,
    /// Bare VMs of an architecture other than the host's also get
    /// rdma-core's tools for it, under `/rdma`, callable by name (see
    /// init-bare.sh and [`super::userland`]).
    pub userland: bool,
}

impl Options {
    /// One host on `kernel`, no command yet, output streamed and not
    /// kept, the host's root shared: what a caller then fills in.
    pub fn new(kernel: &'static super::Kernel, timeout: Duration) -> Options {
        Options {
            hosts: 1,
            every_host: false,
            timeout,
            cmd: Vec::new(),
            peer_cmd: None,
            env: Vec::new(),
            verbose: false,
            capture: false,
            out_dir: None,
            bare: None,
            kernel,
            peer_kernel: None,
            peer_bare: None,
            userland: false,
        }
    }
}

/// How the run ended.
#[derive(Debug)]
pub struct Outcome {
    /// Exit status of the command on each host (host 1 first).
    pub status: Vec<i32>,
    /// The command's console lines per host, when [`Options::capture`].
    pub lines: Vec<Vec<String>>,
}

impl Outcome {
    pub fn success(&self) -> bool {
        self.status.iter().all(|&s| s == 0)
    }
}

/// Kills the VM when dropped, so that no qemu outlives the run.
struct Vm {
    child: Child,
    name: String,
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Line {
    Out(usize, String),
    Eof(usize),
}

/// The guest's TSC is taken as reliable: no clocksource watchdog. Under
/// TCG on a loaded machine the watchdog would now and then mark the TSC
/// unstable while tests run, and the kernel then flips the sched_clock
/// static key, patching its own text at run time — where TCG has made it
/// oops with an int3 in `sched_clock_cpu` and panic (seen once in a full
/// suite, 167 s into the VM tests). The guest's vCPUs share QEMU's one
/// virtual clock, so the TSC is in fact in step.
const GUEST_CLOCK: &str = "tsc=reliable";

/// Boots the VM(s), runs the command and returns each host's exit status.
/// An error (not an `Outcome`) means the VM itself failed: no boot, a module
/// that did not load, no rxe link, or the timeout.
pub fn run(opts: &Options) -> Result<Outcome> {
    // Under TCG the stock kernel very occasionally dies while booting (an
    // int3 oops in its own text patching, seen about once in fifty boots on
    // a loaded machine). A VM that never reached "ready" ran nothing, so it
    // is booted again, at most twice, and each retry is reported.
    //
    // The same oops strikes a running guest too, more rarely (twice in
    // some 100 minutes of two-host runs: `Oops: int3` at a patched jump
    // label, e.g. in __skb_get_hash_net under rxe's transmit): TCG's
    // threads do not see another vCPU's cross-modified code in time. It is
    // the emulator's, never the command's (an int3 trap in kernel text is
    // only ever text patching here), so such a run is run again, once, and
    // reported; any other death of a running guest is never retried.
    const BOOT_ATTEMPTS: u32 = 3;
    let mut patch_oops_retried = false;
    for attempt in 1.. {
        match run_once(opts) {
            Err(e) if e.starts_with(BOOT_FAILED) && attempt < BOOT_ATTEMPTS => {
                eprintln!("testbed: warning: the VM ({}) died before it was ready (boot attempt {attempt} of {BOOT_ATTEMPTS}); booting again:\n{e}", opts.kernel);
            }
            Err(e) if e.starts_with(PATCH_OOPS) && !patch_oops_retried => {
                patch_oops_retried = true;
                eprintln!("testbed: warning: a guest kernel ({}) died of an int3 oops in its own code patching while the command ran (TCG); running it again, once:\n{e}", opts.kernel);
            }
            // Every error names the kernel: with several in one run, a
            // kernel that cannot boot must say which it is.
            Err(e) => {
                let e = [BOOT_FAILED, PATCH_OOPS]
                    .iter()
                    .find_map(|p| e.strip_prefix(p))
                    .map(String::from)
                    .unwrap_or(e);
                return Err(format!("{}: {e}", opts.kernel));
            }
            Ok(o) => return Ok(o),
        }
    }
    unreachable!("the loop returns")
}

/// How long a boot may take before it is taken for hung: a boot to "ready"
/// takes 5-20 s under TCG on a busy 2-core machine.
const BOOT_LIMIT: Duration = Duration::from_secs(150);

/// Each VM's memory, in MiB.
pub const VM_MEMORY_MB: &str = "2048";

/// Marks an error of a VM that never became ready.
const BOOT_FAILED: &str = "BOOT-FAILED: ";

/// Marks an error of a running guest whose kernel died of an int3 oops
/// (its own code patching under TCG).
const PATCH_OOPS: &str = "PATCH-OOPS: ";

fn run_once(opts: &Options) -> Result<Outcome> {
    ensure_packages()?;
    let runs = crate::cache_dir().to_path_buf().join("runs");
    std::fs::create_dir_all(&runs).map_err(|e| e.to_string())?;
    let run_dir = unique_dir(&runs)?;
    let _cleanup = RemoveOnDrop(run_dir.clone());

    let hosts = opts.hosts;
    if !(1..=MAX_HOSTS).contains(&hosts) {
        return Err(format!("{hosts} hosts: the bed boots 1 to {MAX_HOSTS}"));
    }
    let port = if hosts == 2 { free_port()? } else { 0 };
    // More than two hosts share a hub: a VDE switch on a unix socket in
    // the run's directory, ended with the run.
    let hub = if hosts > 2 {
        Some(Hub::start(&run_dir.join("hub"))?)
    } else {
        None
    };
    let (tx, rx) = mpsc::channel();
    let mut vms = Vec::new();
    for host in 1..=hosts {
        // Host 2 may boot another kernel (another architecture); a host of
        // another architecture than the machine's is always bare.
        let (kernel, bare) = match host {
            1 => (opts.kernel, opts.bare.as_ref()),
            _ => match opts.peer_kernel {
                Some(k) => (k, opts.peer_bare.as_ref()),
                None => (opts.kernel, opts.bare.as_ref()),
            },
        };
        let arch = kernel.arch;
        let foreign = arch != super::kernels::Arch::X86_64;
        if foreign && bare.is_none() {
            return Err(format!(
                "{kernel}: host{host} needs a static {} binary: only bare VMs run on it",
                arch.debian()
            ));
        }
        let img = if bare.is_some() {
            image::ensure_bare(kernel)?
        } else {
            image::ensure(kernel)?
        };
        let userland = match (bare, opts.userland) {
            (Some(_), true) if foreign => Some(image::userland(kernel)?),
            (Some(_), true) => {
                return Err("a bare amd64 VM gets no userland: it proves the binary alone".into())
            }
            _ => None,
        };
        let hdir = run_dir.join(format!("host{host}"));
        let out = match (&opts.out_dir, host) {
            (Some(d), 1) => d
                .canonicalize()
                .map_err(|e| format!("{}: {e}", d.display()))?,
            _ => hdir.join("out"),
        };
        std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&hdir).map_err(|e| e.to_string())?;
        let script = match host {
            _ if host == 1 || opts.every_host => Some(shell_join(&opts.cmd)),
            _ => opts.peer_cmd.clone(),
        };
        write_run_script(&hdir, host, hosts, script.as_deref(), &opts.env, &out)?;
        let mut initrd = img.initramfs.clone();
        if let Some(bin) = bare {
            // The command alone (the host's paths mean nothing in there).
            let run = hdir.join("bare-run.sh");
            std::fs::write(
                &run,
                format!("{}\n", script.as_deref().unwrap_or("exec sleep 100000")),
            )
            .map_err(|e| e.to_string())?;
            initrd = hdir.join("initrd.cpio");
            image::with_extra_files(
                &img.initramfs,
                &[
                    ("/bin/rverbs", bin.as_path(), 0o755),
                    ("/run.sh", run.as_path(), 0o755),
                ],
                &initrd,
            )?;
        }
        let mut cmd = Command::new(arch.qemu());
        if foreign {
            // QEMU's generic arm64 board; pauth-impdef: TCG's own pointer
            // authentication hash, much cheaper to emulate than QARMA.
            cmd.args(["-M", "virt", "-accel", "tcg", "-cpu", "max,pauth-impdef=on"]);
        } else {
            cmd.args(accel()?.args());
        }
        cmd.args(["-m", VM_MEMORY_MB, "-smp", "2", "-nodefaults", "-no-reboot"])
            .args(["-display", "none", "-serial", "stdio", "-monitor", "none"])
            .arg("-kernel")
            .arg(&img.kernel)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(format!(
                "console={} quiet loglevel=3 panic=-1 {} rverbs.host={host} rverbs.rundir={} rverbs.outdir={} rverbs.netdev={} rverbs.userland={} rverbs.keep={} rverbs.linger={}",
                arch.console(),
                if foreign { "" } else { GUEST_CLOCK },
                hdir.display(),
                out.display(),
                if hosts > 1 { "eth0" } else { "veth0" },
                u8::from(userland.is_some()),
                keep_paths(&opts.cmd)?,
                u8::from(hosts > 1)
            ))
            ;
        if let Some(dir) = &userland {
            cmd.arg("-virtfs").arg(format!(
                "local,path={},mount_tag=userland,security_model=none,readonly=on,multidevs=remap",
                dir.display()
            ));
        }
        if bare.is_none() {
            cmd.args([
                "-virtfs",
                "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
            ])
            .arg("-virtfs")
            .arg(format!(
                "local,path={},mount_tag=out,security_model=none,multidevs=remap",
                out.display()
            ));
        }
        let netdev = match (&hub, hosts) {
            (Some(hub), _) => Some(format!("vde,id=n0,sock={}", hub.dir.display())),
            (None, 2) => {
                let role = if host == 1 { "listen" } else { "connect" };
                Some(format!("socket,id=n0,{role}=127.0.0.1:{port}"))
            }
            _ => None,
        };
        if let Some(netdev) = netdev {
            cmd.args([
                "-netdev",
                &netdev,
                "-device",
                &format!("virtio-net-pci,netdev=n0,mac=52:54:00:77:00:{host:02x}"),
            ]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", arch.qemu()))?;
        let idx = host - 1;
        for pipe in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(pipe);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match r.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            let s = String::from_utf8_lossy(&buf);
                            let s = s.trim_end_matches(['\n', '\r']);
                            if split_marker(s)
                                .into_iter()
                                .any(|l| tx.send(Line::Out(idx, l.to_string())).is_err())
                            {
                                break;
                            }
                        }
                    }
                }
                let _ = tx.send(Line::Eof(idx));
            });
        }
        vms.push(Vm {
            child,
            name: format!("host{host}"),
        });
        if hosts == 2 && host == 1 {
            // The connecting side needs the listener's socket to exist.
            wait_for_listener(port)?;
        }
    }
    drop(tx);
    let out = collect(opts, &mut vms, rx, hosts);
    drop(hub);
    out
}

/// The most VMs one run boots (addresses 10.77.0.1 to .N; each VM takes
/// [`VM_MEMORY_MB`]).
pub const MAX_HOSTS: usize = 8;

/// A VDE switch in hub mode on a unix socket directory, for more than two
/// hosts: every frame reaches every host, and nothing leaves the machine.
/// Ended when dropped (its stdin, the management console, closes and it
/// is killed).
struct Hub {
    dir: PathBuf,
    child: Child,
}

impl Hub {
    fn start(dir: &Path) -> Result<Hub> {
        let child = Command::new("vde_switch")
            .arg("--hub")
            .arg("--sock")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start vde_switch (package vde2): {e}"))?;
        let mut hub = Hub {
            dir: dir.to_path_buf(),
            child,
        };
        // QEMU connects through the control socket; wait for it.
        for _ in 0..100 {
            if dir.join("ctl").exists() {
                return Ok(hub);
            }
            if let Ok(Some(st)) = hub.child.try_wait() {
                return Err(format!("vde_switch ended at once: {st}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("vde_switch made no socket in {}", dir.display()))
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(
    opts: &Options,
    vms: &mut [Vm],
    rx: mpsc::Receiver<Line>,
    hosts: usize,
) -> Result<Outcome> {
    let start = Instant::now();
    let deadline = start + opts.timeout;
    let mut status: Vec<Option<i32>> = vec![None; hosts];
    let mut setup_error: Vec<Option<String>> = vec![None; hosts];
    let mut ready = vec![false; hosts];
    // Said after the status by a host that stays on the link (init.sh).
    let mut lingering = vec![false; hosts];
    // A host whose kernel printed an int3 oops (see run()).
    let mut int3_oops = vec![false; hosts];
    let mut eofs = vec![0; hosts];
    // The host whose QEMU ended without an exit status, if one did.
    let mut died: Option<usize> = None;
    let mut tail: Vec<Vec<String>> = vec![Vec::new(); hosts];
    // Each host's first oops from its first line: the last lines alone
    // show only a stack's end, not what faulted (CI prints only a log's
    // tail, so the error must carry it).
    let mut oops: Vec<Vec<String>> = vec![Vec::new(); hosts];
    let mut lines: Vec<Vec<String>> = vec![Vec::new(); hosts];
    let stdout = std::io::stdout();
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "VM run timed out after {}s (killed){}",
                opts.timeout.as_secs(),
                last_lines(&oops, &tail)
            ));
        }
        // A kernel that oopses early may hang instead of powering off (7.2
        // under TCG, about one boot in five): past BOOT_LIMIT without
        // "ready" the boot counts as failed, and run() boots again.
        if now >= start + BOOT_LIMIT && ready.iter().any(|r| !r) {
            return Err(format!(
                "{BOOT_FAILED}VM not ready {}s after it started (hung while booting){}",
                BOOT_LIMIT.as_secs(),
                last_lines(&oops, &tail)
            ));
        }
        // The other hosts idle when they have no command, and with peers a
        // host whose command is done stays on the link (init.sh lingers):
        // once every host with a command is done, stop them all.
        let idle = |i: usize| i >= 1 && !opts.every_host && opts.peer_cmd.is_none();
        if (0..hosts).all(|i| idle(i) || status[i].is_some()) {
            for i in (0..hosts).filter(|&i| eofs[i] < 2) {
                let _ = vms[i].child.kill();
            }
        }
        // A host whose QEMU ended without an exit status (a kernel panic:
        // QEMU runs with -no-reboot) would leave its peers waiting out the
        // whole limit: stop them too, and the run fails below naming
        // the host that died, with its last console lines (the oops).
        // A host lingering without a status lost its status line (a
        // partial line of its command's before it): the same, or the run
        // would wait out its limit.
        if hosts > 1 && died.is_none() {
            died = (0..hosts)
                .find(|&i| (eofs[i] >= 2 || lingering[i]) && status[i].is_none() && !idle(i));
            if died.is_some() {
                for vm in vms.iter_mut() {
                    let _ = vm.child.kill();
                }
            }
        }
        if eofs.iter().all(|&e| e >= 2) {
            break;
        }
        match rx.recv_timeout((deadline - now).min(Duration::from_millis(500))) {
            Ok(Line::Out(i, s)) => {
                if s.contains("Oops: int3") {
                    int3_oops[i] = true;
                }
                let prefix = if hosts > 1 {
                    format!("[{}] ", vms[i].name)
                } else {
                    String::new()
                };
                if let Some(rest) = s.strip_prefix(MARKER) {
                    if let Some(code) = rest.strip_prefix("exit-status ") {
                        status[i] = code.trim().parse().ok();
                    } else if let Some(msg) = rest.strip_prefix("setup-failed: ") {
                        setup_error[i] = Some(msg.to_string());
                    } else if rest.starts_with("lingering") {
                        lingering[i] = true;
                    } else if rest.starts_with("ready") {
                        ready[i] = true;
                    }
                    if opts.verbose {
                        let _ = writeln!(stdout.lock(), "{prefix}{s}");
                    }
                    continue;
                }
                if (ready[i] && status[i].is_none()) || opts.verbose {
                    let _ = writeln!(stdout.lock(), "{prefix}{s}");
                }
                if opts.capture && ready[i] && status[i].is_none() {
                    lines[i].push(s.clone());
                }
                if (!oops[i].is_empty() || is_oops_start(&s)) && oops[i].len() < OOPS_LINES {
                    oops[i].push(s.clone());
                }
                tail[i].push(s);
                if tail[i].len() > 30 {
                    tail[i].remove(0);
                }
            }
            Ok(Line::Eof(i)) => eofs[i] += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for vm in vms.iter_mut() {
        let _ = vm.child.wait();
    }
    let mut out = Vec::new();
    // A host that died is the one to name (its peer was stopped).
    let order: Vec<usize> = match died {
        Some(d) => vec![d],
        None => (0..hosts).collect(),
    };
    for &i in &order {
        if let Some(msg) = &setup_error[i] {
            return Err(format!("VM host{} setup failed: {msg}", i + 1));
        }
        match status[i] {
            Some(s) => out.push(s),
            None if i >= 1 && !opts.every_host && opts.peer_cmd.is_none() => out.push(0),
            None => {
                return Err(format!(
                    "{}VM host{} ended without reporting an exit status ({}){}",
                    match (ready[i], int3_oops[i]) {
                        (false, _) => BOOT_FAILED,
                        (true, true) => PATCH_OOPS,
                        (true, false) => "",
                    },
                    i + 1,
                    if lingering[i] {
                        "its command ended, and its status line was lost in the console output"
                    } else if int3_oops[i] {
                        "its kernel died of an int3 oops in its own code patching while running"
                    } else if ready[i] {
                        "crash or kernel panic while running"
                    } else {
                        "it died while booting"
                    },
                    last_lines(&oops, &tail)
                ))
            }
        }
    }
    Ok(Outcome { status: out, lines })
}

/// How many lines of a guest's first oops an error carries.
const OOPS_LINES: usize = 40;

/// Whether a console line opens a kernel oops, panic or warning.
fn is_oops_start(line: &str) -> bool {
    const STARTS: [&str; 8] = [
        "BUG:",
        "Oops:",
        "general protection fault",
        "kernel BUG at",
        "WARNING:",
        "traps: double fault",
        "Kernel panic",
        "Unable to handle kernel",
    ];
    // After the "[    9.000123] " timestamp, when there is one.
    let text = match line.trim_start().strip_prefix('[') {
        Some(rest) => rest.split_once("] ").map_or(rest, |(_, t)| t),
        None => line,
    };
    STARTS.iter().any(|m| text.starts_with(m))
}

fn last_lines(oops: &[Vec<String>], tail: &[Vec<String>]) -> String {
    let mut s = String::new();
    for (i, o) in oops.iter().enumerate() {
        // Printed whole only when the tail does not already hold its start.
        if !o.is_empty() && !tail[i].contains(&o[0]) {
            s.push_str(&format!(
                "\n--- host{}'s first oops, from its start ---\n",
                i + 1
            ));
            s.push_str(&o.join("\n"));
        }
    }
    for (i, t) in tail.iter().enumerate() {
        if !t.is_empty() {
            s.push_str(&format!("\n--- last console lines of host{} ---\n", i + 1));
            s.push_str(&t.join("\n"));
        }
    }
    s
}

/// Host directories that must stay visible in the guest even if they are
/// under /tmp (which the guest replaces with a tmpfs): the configured ones
/// ([`crate::Config::keep`]), the cache, the working directory and the
/// directory of every file the command names by absolute path (a cargo
/// runner is handed test binaries by path, maybe behind a wrapper such as
/// `sh -c … sh BINARY`; rustdoc's merged doctests live under /tmp).
/// Joined with ':'.
fn keep_paths(cmd: &[String]) -> Result<String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let mut v: Vec<String> = Vec::new();
    let c = crate::configure_default();
    let dirs = cmd
        .iter()
        .map(Path::new)
        .filter(|p| p.is_absolute() && p.is_file())
        .filter_map(Path::parent)
        .map(Path::to_path_buf);
    let all = c
        .keep
        .iter()
        .cloned()
        .chain([c.cache_dir.clone(), cwd])
        .chain(dirs);
    for p in all {
        let s = p.canonicalize().unwrap_or(p).display().to_string();
        // Only what lies under /tmp needs keeping (the rest of the host's
        // root is there anyway), and /tmp itself never is: it would hide
        // the guest's tmpfs.
        if !s.starts_with("/tmp/") {
            continue;
        }
        if s.contains([' ', ':']) {
            return Err(format!(
                "path {s:?} has a space or ':', which the VM's command line cannot carry"
            ));
        }
        // Parents first, so that a child bound later is not hidden.
        if !v.iter().any(|k| s.starts_with(&format!("{k}/")) || *k == s) {
            v.retain(|k| !k.starts_with(&format!("{s}/")));
            v.push(s);
        }
    }
    Ok(v.join(":"))
}

/// The run script: the environment the tests read, then the command, run from
/// the caller's working directory.
fn write_run_script(
    dir: &Path,
    host: usize,
    hosts: usize,
    cmd: Option<&str>,
    env: &[(String, String)],
    out: &Path,
) -> Result<()> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let mut s = String::from("# written by rverbs-testbed\n");
    let mut vars: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        ("HOME".into(), "/tmp".into()),
        ("RVERBS_IN_VM".into(), "1".into()),
        ("RVERBS_TEST_DEV".into(), "rxe0".into()),
        ("RVERBS_TEST_GID".into(), "1".into()),
        ("RVERBS_TEST_ADDR".into(), format!("10.77.0.{host}")),
        ("RVERBS_VM_HOST".into(), host.to_string()),
        // The link rxe0 is on: a veth alone, eth0 with peers.
        (
            "RVERBS_VM_NETDEV".into(),
            if hosts > 1 { "eth0" } else { "veth0" }.into(),
        ),
        ("RVERBS_VM_OUT".into(), out.display().to_string()),
    ];
    if hosts > 1 {
        // Host 1's peer is host 2; every other host's is host 1. All of
        // them, in order, for programs that talk to several.
        let peer = if host == 1 { 2 } else { 1 };
        vars.push(("RVERBS_PEER_ADDR".into(), format!("10.77.0.{peer}")));
        let all: Vec<String> = (1..=hosts).map(|h| format!("10.77.0.{h}")).collect();
        vars.push(("RVERBS_VM_HOSTS".into(), hosts.to_string()));
        vars.push(("RVERBS_HOST_ADDRS".into(), all.join(" ")));
    }
    for key in ["RUST_BACKTRACE", "RUST_LOG", "RVERBS_DEBUG"] {
        if let Ok(v) = std::env::var(key) {
            vars.push((key.into(), v));
        }
    }
    vars.extend(env.iter().cloned());
    for (k, v) in &vars {
        s.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    s.push_str(&format!(
        "cd {} || exit 125\n",
        shell_quote(&cwd.display().to_string())
    ));
    match cmd {
        Some(c) => s.push_str(&format!("{c}\n")),
        None => s.push_str("exec sleep 100000\n"),
    }
    std::fs::write(dir.join("run.sh"), s).map_err(|e| e.to_string())
}

/// Quotes for POSIX sh: the argument reaches the command unchanged.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    fn args(self) -> &'static [&'static str] {
        match self {
            Accel::Kvm => &["-accel", "kvm", "-cpu", "host"],
            Accel::Tcg => &["-accel", "tcg", "-cpu", "max"],
        }
    }
}

/// KVM when it boots a kernel here, TCG otherwise. On these machines /dev/kvm
/// exists but a nested-virtualisation layer makes a stock kernel die in its
/// decompressor, so the only honest test is a boot: the answer is cached in
/// `accel` in the cache directory. `RVERBS_VM_ACCEL=kvm|tcg` overrides.
fn accel() -> Result<Accel> {
    match std::env::var("RVERBS_VM_ACCEL").as_deref() {
        Ok("kvm") => return Ok(Accel::Kvm),
        Ok("tcg") => return Ok(Accel::Tcg),
        _ => {}
    }
    let cache = crate::cache_dir().to_path_buf().join("accel");
    if let Ok(s) = std::fs::read_to_string(&cache) {
        match s.trim() {
            "kvm" => return Ok(Accel::Kvm),
            "tcg" => return Ok(Accel::Tcg),
            _ => {}
        }
    }
    let kvm_usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let found = if kvm_usable && probe_kvm()? {
        Accel::Kvm
    } else {
        Accel::Tcg
    };
    eprintln!(
        "testbed: VM acceleration: {found:?} (cached in {})",
        cache.display()
    );
    let _ = std::fs::write(&cache, if found == Accel::Kvm { "kvm" } else { "tcg" });
    Ok(found)
}

/// Boots the kernel under KVM with an init that only reports it started.
fn probe_kvm() -> Result<bool> {
    let img = image::ensure(super::kernels::DEFAULT)?;
    let mut child = Command::new("qemu-system-x86_64")
        .args(Accel::Kvm.args())
        .args([
            "-m",
            "512",
            "-nodefaults",
            "-no-reboot",
            "-display",
            "none",
            "-serial",
            "stdio",
        ])
        .arg("-kernel")
        .arg(&img.kernel)
        .arg("-initrd")
        .arg(&img.initramfs)
        .args([
            "-append",
            &format!("console=ttyS0 panic=-1 {GUEST_CLOCK} rdinit=/bin/busybox poweroff -f"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start qemu-system-x86_64: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            if line.contains("Run /bin/busybox as init process") || line.contains("Linux version") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let ok = rx.recv_timeout(Duration::from_secs(20)).is_ok();
    let _ = child.kill();
    let _ = child.wait();
    Ok(ok)
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn wait_for_listener(port: u16) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        // Not a probe connection: QEMU's socket netdev would take it as its
        // one peer. A failing bind says the port is taken, by QEMU.
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("QEMU never listened on 127.0.0.1:{port}"))
}

fn unique_dir(parent: &Path) -> Result<PathBuf> {
    for n in 0..1000u32 {
        let d = parent.join(format!("{}-{n}", std::process::id()));
        if std::fs::create_dir(&d).is_ok() {
            return Ok(d);
        }
    }
    Err(format!(
        "cannot create a run directory under {}",
        parent.display()
    ))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if std::env::var_os("RVERBS_VM_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A console line as lines: a marker of init.sh's (`rverbs-vm: ...`)
/// after output that did not end its line (a command's last `printf`
/// without a newline) is a line of its own, so that the exit status is
/// read whatever the command printed last.
fn split_marker(s: &str) -> Vec<&str> {
    match s.find(MARKER) {
        Some(k) if k > 0 => vec![&s[..k], &s[k..]],
        _ => vec![s],
    }
}

/// What begins every line init.sh writes for the bed.
const MARKER: &str = "rverbs-vm: ";

#[cfg(test)]
mod marker_tests {
    use super::split_marker;

    /// A marker after unterminated output is a line of its own; other
    /// lines pass whole.
    #[test]
    fn markers_after_partial_output_are_split_off() {
        assert_eq!(
            split_marker("partialrverbs-vm: exit-status 0"),
            ["partial", "rverbs-vm: exit-status 0"]
        );
        assert_eq!(
            split_marker("rverbs-vm: ready host=1"),
            ["rverbs-vm: ready host=1"]
        );
        assert_eq!(split_marker("plain output"), ["plain output"]);
    }
}

#[cfg(test)]
mod oops_tests {
    use super::{is_oops_start, last_lines};

    /// An oops is recognised after the console's timestamp, and its start
    /// is carried in the error when the last lines no longer hold it.
    #[test]
    fn an_oops_is_carried_from_its_first_line() {
        assert!(is_oops_start(
            "[    8.99] BUG: unable to handle page fault for address: ff31"
        ));
        assert!(is_oops_start("[    9.00] traps: double fault: 0000 [#1]"));
        assert!(is_oops_start("Kernel panic - not syncing: Fatal exception"));
        assert!(!is_oops_start(
            "[    8.99]  rxe_requester+0x2c1/0xfe0 [rdma_rxe]"
        ));
        assert!(!is_oops_start("stream: BUG: in the payload"));

        let oops = vec![vec![
            "[1] Oops: 0000 [#1]".to_string(),
            "[1] RIP: x".to_string(),
        ]];
        let tail = vec![vec!["[2] ret_from_fork".to_string()]];
        let s = last_lines(&oops, &tail);
        assert!(
            s.contains("host1's first oops")
                && s.contains("Oops: 0000")
                && s.contains("ret_from_fork")
        );
        // Held by the tail already: not printed twice.
        let tail = vec![oops[0].clone()];
        assert_eq!(last_lines(&oops, &tail).matches("Oops: 0000").count(), 1);
    }
}

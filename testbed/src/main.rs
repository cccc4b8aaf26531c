//! `rverbs-testbed`: boot VMs with rxe and run a command in them.

use rverbs_testbed::{kernels, Kernel, Options};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "\
usage: rverbs-testbed run [--kernel 6.1|6.12|7.2|DIR] [--hosts N] [--every-host]
                          [--peer CMD] [--env NAME=VALUE]... [--netem ARGS]
                          [--flap S] [--timeout S] [-v] -- CMD [ARG...]
       rverbs-testbed prepare [--kernel 6.1|6.12|7.2|all]

run      boots a fresh VM (Debian's kernel, rdma_rxe, an rxe device on a
         veth) under QEMU, runs CMD in it from the current directory, streams
         its output and exits with its status. The host's root is the guest's,
         read-only (9p), so host paths and binaries work as they are; /tmp is
         a tmpfs; $RVERBS_VM_OUT is a writable directory that comes back.
         --hosts N (up to 8): N VMs on one L2 segment (two: a QEMU socket
         on loopback; more: a VDE hub on a unix socket; nothing leaves the
         machine), 10.77.0.1 to .N; CMD runs on the first, --peer CMD on
         the others, or CMD on all with --every-host; the exit status is
         the first nonzero one. --env sets a
         variable for the command(s) (LD_LIBRARY_PATH=DIR, say, to run a
         program over another libibverbs.so.1).
         Faults on host 1's link (two hosts or more): --netem 'ARGS' adds
         tc's netem qdisc ('loss 5% reorder 5% delay 1ms', 'duplicate 1%',
         'corrupt 0.1%': the guest kernels' sch_netem), --flap S takes the
         link down for 2 s every S seconds while the command runs. Inside
         a guest, tc and ip work as root on $RVERBS_VM_NETDEV too.
         The environment names the device and addresses: RVERBS_TEST_DEV
         (rxe0), RVERBS_TEST_GID (its RoCE v2 GID index), RVERBS_TEST_ADDR
         (10.77.0.N), RVERBS_VM_HOST (N) and, with more than one host,
         RVERBS_PEER_ADDR (host 1's peer is host 2, the others' host 1),
         RVERBS_VM_HOSTS and RVERBS_HOST_ADDRS (every address, in order).
         A VM that cannot boot is an error, never a skip. Default timeout
         600 s; default kernel 6.12.
         --kernel DIR boots a kernel of yours: DIR holds its modules under
         lib/modules/RELEASE/ with modules.dep (make modules_install
         INSTALL_MOD_PATH=DIR) and its image as boot/vmlinuz-RELEASE,
         vmlinuz-RELEASE or bzImage; it needs rdma_rxe, ib_uverbs,
         rdma_ucm, veth, 9p over virtio, virtio_net and sch_netem, as
         modules or built in, and a crc32 provider for rxe.
prepare  fetches and builds a kernel's image without booting it.

Kernels and images are cached in $RVERBS_TESTBED_CACHE, else
$XDG_CACHE_HOME/rverbs-testbed, else ~/.cache/rverbs-testbed. Missing Debian
packages (QEMU, busybox, rdma-core's tools for the guests) are installed with
apt-get, as root.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("prepare") => prepare(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(USAGE.to_string()),
    };
    r.unwrap_or_else(|e| {
        eprintln!("rverbs-testbed: error: {e}");
        ExitCode::FAILURE
    })
}

fn prepare(args: &[String]) -> Result<ExitCode, String> {
    let ks: Vec<&Kernel> = match args {
        [] => vec![kernels::DEFAULT],
        [f, k] if f == "--kernel" && k == "all" => kernels::KERNELS.iter().collect(),
        [f, k] if f == "--kernel" => vec![Kernel::by_name(k)?],
        _ => return Err(format!("prepare: bad arguments\n{USAGE}")),
    };
    for k in ks {
        rverbs_testbed::prepare(k)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let mut opts = Options::new(kernels::DEFAULT, Duration::from_secs(600));
    let (mut netem, mut flap) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().ok_or(format!("{a} needs {what}"));
        match a.as_str() {
            "--kernel" => opts.kernel = Kernel::by_name(value("a kernel")?)?,
            "--hosts" => {
                let v = value("a number of hosts")?;
                opts.hosts = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=rverbs_testbed::MAX_HOSTS).contains(n))
                    .ok_or(format!(
                        "--hosts {v}: from 1 to {}",
                        rverbs_testbed::MAX_HOSTS
                    ))?;
            }
            "--every-host" => opts.every_host = true,
            "--netem" => netem = Some(value("netem's arguments")?.clone()),
            "--flap" => {
                let v = value("a period in seconds")?;
                flap = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|&s| s >= 3)
                        .ok_or(format!("--flap {v}: a whole number of seconds, at least 3"))?,
                );
            }
            "--timeout" => {
                let v = value("a number of seconds")?;
                let s: u64 = v
                    .parse()
                    .map_err(|_| format!("--timeout: not a number: {v}"))?;
                opts.timeout = Duration::from_secs(s);
            }
            "--peer" => opts.peer_cmd = Some(value("a command")?.clone()),
            "--env" => {
                let kv = value("NAME=VALUE")?;
                let (k, v) = kv
                    .split_once('=')
                    .filter(|(k, _)| is_name(k))
                    .ok_or(format!(
                        "--env {kv}: not NAME=VALUE with a shell variable's name"
                    ))?;
                opts.env.push((k.to_string(), v.to_string()));
            }
            "-v" | "--verbose" => opts.verbose = true,
            "--" => opts.cmd = it.by_ref().cloned().collect(),
            other => return Err(format!("run: unknown option {other}\n{USAGE}")),
        }
    }
    if opts.cmd.is_empty() {
        return Err(format!("run: no command given\n{USAGE}"));
    }
    if (netem.is_some() || flap.is_some()) && opts.hosts == 1 {
        // One host's traffic to itself goes through rxe's loopback, which
        // no qdisc or link state touches.
        return Err("run: --netem and --flap need --hosts 2 or more".into());
    }
    opts.cmd = with_faults(&opts.cmd, netem.as_deref(), flap);
    if opts.peer_cmd.is_some() && (opts.hosts == 1 || opts.every_host) {
        return Err("run: --peer needs --hosts 2 or more, without --every-host".into());
    }
    let out = rverbs_testbed::run(&opts)?;
    let bad = out.status.iter().copied().find(|&s| s != 0);
    Ok(match bad {
        None => ExitCode::SUCCESS,
        Some(s) => ExitCode::from(u8::try_from(s).ok().filter(|&s| s != 0).unwrap_or(1)),
    })
}

/// Whether `k` is a shell variable's name (`--env` writes it into the
/// guest's script as it is).
fn is_name(k: &str) -> bool {
    let mut c = k.chars();
    c.next()
        .is_some_and(|f| f == '_' || f.is_ascii_alphabetic())
        && c.all(|x| x == '_' || x.is_ascii_alphanumeric())
}

/// `cmd` wrapped so that host 1's link first gets `tc netem ARGS` (loss,
/// delay, reorder, duplicate, corrupt: the kernels' sch_netem, which the
/// bed loads) and, with `flap`, goes down for 2 s every `flap` seconds
/// while the command runs. Other hosts (`--every-host`) run the command
/// alone. netem's arguments are split on whitespace and each word quoted.
fn with_faults(cmd: &[String], netem: Option<&str>, flap: Option<u32>) -> Vec<String> {
    if netem.is_none() && flap.is_none() {
        return cmd.to_vec();
    }
    let dev = "\"$RVERBS_VM_NETDEV\"";
    let mut script = String::from("[ \"$RVERBS_VM_HOST\" = 1 ] || exec \"$@\"\n");
    if let Some(args) = netem {
        let words: Vec<String> = args
            .split_whitespace()
            .map(rverbs_testbed::shell_quote)
            .collect();
        script.push_str(&format!(
            "tc qdisc add dev {dev} root netem {} || exit 125\n",
            words.join(" ")
        ));
    }
    if let Some(s) = flap {
        script.push_str(&format!(
            "(while sleep {}; do ip link set {dev} down; sleep 2; ip link set {dev} up; \
             echo rverbs-testbed: link flapped >&2; done) & F=$!\n",
            s - 2
        ));
        script.push_str(&format!(
            "\"$@\"; r=$?; kill $F; ip link set {dev} up; exit $r\n"
        ));
    } else {
        script.push_str("exec \"$@\"\n");
    }
    let mut v = vec!["sh".into(), "-c".into(), script, "sh".into()];
    v.extend(cmd.iter().cloned());
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn env_names_are_shell_names() {
        assert!(super::is_name("LD_LIBRARY_PATH"));
        assert!(super::is_name("_x1"));
        assert!(!super::is_name("1x"));
        assert!(!super::is_name("A B"));
        assert!(!super::is_name("A;rm"));
        assert!(!super::is_name(""));
    }
}

//! The kernel-facing side of mlx5 against rdma-core's (issue 29), its
//! first slice: rdma-core's real libmlx5 (Debian's `ibverbs-providers`,
//! through `ibv_devinfo`) and rverbs' mlx5 glue (through `rverbs
//! devinfo`) each open an mlx5 device that is a fake
//! (`mlx5-oracle/fake/uverbs.c`: an `LD_PRELOAD` library answering the
//! uverbs write() commands as mlx5_ib does, over a sysfs tree of ours in
//! `SYSFS_PATH`), and what each sent is compared: GET_CONTEXT's mlx5
//! request field by field, the UAR pages each mapped, the commands each
//! issued, and the two programs' output. Every difference must be one of
//! the listed deliberate ones (`docs/mlx5.md`). rverbs is built with
//! `--cfg rverbs_libc_syscalls`, so that its one raw system call (the
//! uverbs `write()`) goes through libc, where the fake can answer it.
//! No kernel and no VM: it runs on the host.

mod create;

use super::{cargo, Tally};
use crate::host::{target_dir, workspace_root, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One logged request: its command (`0x100 |` for extended ones) and
/// bytes.
#[derive(Debug)]
struct Request {
    cmd: u32,
    bytes: Vec<u8>,
}

/// What one stack did against the fake.
#[derive(Debug, Default)]
struct Log {
    requests: Vec<Request>,
    /// The offsets it mapped, in order.
    mmaps: Vec<u64>,
}

fn hex_bytes(words: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for w in words.split_whitespace() {
        if w.len() % 2 != 0 {
            return Err(format!("odd hex group {w:?}"));
        }
        for i in (0..w.len()).step_by(2) {
            out.push(u8::from_str_radix(&w[i..i + 2], 16).map_err(|e| format!("{w:?}: {e}"))?);
        }
    }
    Ok(out)
}

/// Parses the fake's log (see uverbs.c).
fn parse_log(text: &str) -> Result<Log> {
    let mut log = Log::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("write cmd=") {
            let mut it = rest.splitn(4, ' ');
            let cmd: u32 = it
                .next()
                .unwrap_or("")
                .parse()
                .map_err(|e| format!("{line:?}: {e}"))?;
            let ex = it.next() == Some("ex=1");
            let _len = it.next();
            let bytes = hex_bytes(it.next().unwrap_or(""))?;
            log.requests.push(Request {
                cmd: if ex { 0x100 | cmd } else { cmd },
                bytes,
            });
        } else if let Some(rest) = line.strip_prefix("mmap off=") {
            let off = rest.split_whitespace().next().unwrap_or("");
            let off = u64::from_str_radix(off.trim_start_matches("0x"), 16)
                .map_err(|e| format!("{line:?}: {e}"))?;
            log.mmaps.push(off);
        }
    }
    Ok(log)
}

/// GET_CONTEXT's mlx5 request (`struct mlx5_ib_alloc_ucontext_req_v2`,
/// after the 8-byte header and the response pointer), with the command's
/// in and out words.
#[derive(Debug, PartialEq)]
struct ContextRequest {
    in_words: u16,
    out_words: u16,
    total_num_bfregs: u32,
    num_low_latency_bfregs: u32,
    flags: u32,
    comp_mask: u32,
    max_cqe_version: u8,
    lib_caps: u64,
}

fn context_request(b: &[u8]) -> Result<ContextRequest> {
    if b.len() < 48 {
        return Err(format!("GET_CONTEXT of {} bytes", b.len()));
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
    Ok(ContextRequest {
        in_words: u16_at(4),
        out_words: u16_at(6),
        total_num_bfregs: u32_at(16),
        num_low_latency_bfregs: u32_at(20),
        flags: u32_at(24),
        comp_mask: u32_at(28),
        max_cqe_version: b[32],
        lib_caps: u64::from_le_bytes(b[40..48].try_into().unwrap_or_default()),
    })
}

/// The differences of rverbs' requests from rdma-core's that are
/// deliberate (each is in docs/mlx5.md with its reason); anything else
/// fails the check.
fn compare(theirs: &Log, ours: &Log) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    let get = |l: &Log, who: &str| -> Result<ContextRequest> {
        let r = l
            .requests
            .iter()
            .find(|r| r.cmd == 0)
            .ok_or(format!("{who} sent no GET_CONTEXT"))?;
        context_request(&r.bytes)
    };
    let (t, o) = (get(theirs, "rdma-core")?, get(ours, "rverbs")?);
    // DEVX (flags bit 0): rdma-core asks for it, rverbs does not use it.
    // CQE version: rverbs reads version 0. Dynamic UARs (lib_caps bit 1):
    // rverbs maps the static ones.
    let deliberate = ContextRequest {
        flags: t.flags & !1,
        max_cqe_version: 0,
        lib_caps: t.lib_caps & !2,
        ..t
    };
    if o != deliberate {
        problems.push(format!(
            "GET_CONTEXT: rverbs sent {o:?}, rdma-core {t:?} (expected {deliberate:?})"
        ));
    } else {
        notes.push(format!(
            "GET_CONTEXT equal but the listed: flags {:#x}/{:#x} (DEVX), max_cqe_version {}/{}, lib_caps {:#x}/{:#x} (DYN_UAR); bfregs {} ({} low-latency), response {} words",
            t.flags, o.flags, t.max_cqe_version, o.max_cqe_version, t.lib_caps, o.lib_caps,
            o.total_num_bfregs, o.num_low_latency_bfregs, o.out_words
        ));
    }
    // The UAR pages: the same ones, in the same order; rdma-core also maps
    // the core clock page (offset 5 << 8 pages), which rverbs never reads.
    const CORE_CLOCK: u64 = (5 << 8) * 4096;
    let their_uars: Vec<u64> = theirs
        .mmaps
        .iter()
        .copied()
        .filter(|&o| o != CORE_CLOCK)
        .collect();
    if their_uars != ours.mmaps {
        problems.push(format!(
            "mmaps: rverbs {:#x?}, rdma-core {:#x?}",
            ours.mmaps, theirs.mmaps
        ));
    } else {
        notes.push(format!(
            "UAR mappings equal ({} pages); rdma-core also maps the core clock page: {}",
            ours.mmaps.len(),
            theirs.mmaps.contains(&CORE_CLOCK)
        ));
    }
    // The commands: the same set (the tools differ in how often they
    // query).
    let set = |l: &Log| l.requests.iter().map(|r| r.cmd).collect::<BTreeSet<u32>>();
    if set(theirs) != set(ours) {
        problems.push(format!(
            "commands: rverbs {:?}, rdma-core {:?}",
            set(ours),
            set(theirs)
        ));
    }
    // QUERY_PORT: the same request but for the response pointer.
    let port = |l: &Log| -> Option<Vec<u8>> {
        l.requests.iter().find(|r| r.cmd == 2).map(|r| {
            let mut b = r.bytes.clone();
            if let Some(p) = b.get_mut(8..16) {
                p.fill(0);
            }
            b
        })
    };
    if port(theirs) != port(ours) {
        problems.push(format!(
            "QUERY_PORT: rverbs {:02x?}, rdma-core {:02x?}",
            port(ours),
            port(theirs)
        ));
    }
    // QUERY_DEVICE_EX: the same core request; rdma-core also asks for
    // mlx5's part of the answer (provider_out_words: TSO, RSS, CQE
    // compression, striding RQ caps), which rverbs offers none of.
    let device = |l: &Log| -> Option<(Vec<u8>, u16)> {
        l.requests.iter().find(|r| r.cmd == 0x101).map(|r| {
            let mut b = r.bytes.clone();
            if let Some(p) = b.get_mut(8..16) {
                p.fill(0);
            }
            let provider_out = b
                .get(18..20)
                .map_or(0, |w| u16::from_le_bytes([w[0], w[1]]));
            if let Some(p) = b.get_mut(18..20) {
                p.fill(0);
            }
            (b, provider_out)
        })
    };
    match (device(theirs), device(ours)) {
        (Some((t, tw)), Some((o, 0))) if t == o => notes.push(format!(
            "QUERY_DEVICE_EX equal but mlx5's answer: rdma-core asks for {tw} words of it, rverbs none"
        )),
        (t, o) => problems.push(format!("QUERY_DEVICE_EX: rverbs {o:02x?}, rdma-core {t:02x?}")),
    }
    if problems.is_empty() {
        Ok(notes)
    } else {
        Err(problems.join("\n"))
    }
}

/// A sysfs tree of one mlx5 device (`mlx5_0`, a ConnectX-5's PCI ids,
/// bound to mlx5_core) behind `uverbs0`, whose `dev` is /dev/null's
/// numbers: what both stacks read to find and identify it.
fn sysfs_tree(root: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(root);
    let file = |p: &str, text: &str| -> Result<()> {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().ok_or("no parent")?).map_err(|e| e.to_string())?;
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    file("class/infiniband_verbs/abi_version", "6\n")?;
    file("class/infiniband_verbs/uverbs0/ibdev", "mlx5_0\n")?;
    file("class/infiniband_verbs/uverbs0/abi_version", "1\n")?;
    file("class/infiniband_verbs/uverbs0/dev", "1:3\n")?;
    file("class/infiniband/mlx5_0/node_type", "1: CA\n")?;
    file("class/infiniband/mlx5_0/node_guid", "0002:c903:00a1:b2c3\n")?;
    file(
        "class/infiniband/mlx5_0/device/modalias",
        "pci:v000015B3d00001017sv000015B3sd00000001bc02sc00i00\n",
    )?;
    std::fs::create_dir_all(root.join("bus/pci/drivers/mlx5_core")).map_err(|e| e.to_string())?;
    std::os::unix::fs::symlink(
        "../../../../bus/pci/drivers/mlx5_core",
        root.join("class/infiniband/mlx5_0/device/driver"),
    )
    .map_err(|e| e.to_string())
}

/// Runs `cmd` against the fake: its output and its log.
fn against_fake(dir: &Path, fake: &Path, name: &str, cmd: &mut Command) -> Result<(String, Log)> {
    let log = dir.join(format!("{name}.log"));
    let _ = std::fs::remove_file(&log);
    let out = cmd
        .env("SYSFS_PATH", dir.join("sys"))
        .env("LD_PRELOAD", fake)
        .env("FAKE_UVERBS_LOG", &log)
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{name} against the fake: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    Ok((stdout, parse_log(&text)?))
}

/// Builds what both checks run: the fake, its sysfs tree, the C driver of
/// the creation cases, and rverbs' two programs with their uverbs
/// `write()` through libc (a target directory of their own, since the cfg
/// changes every crate's flags). Returns the fake's path.
fn build(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let fake = dir.join("uverbs.so");
    let src = workspace_root().join("mlx5-oracle/fake");
    crate::host::run(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
            .arg(&fake)
            .arg(src.join("uverbs.c"))
            .arg("-ldl"),
    )?;
    crate::host::run(
        Command::new("gcc")
            .args(["-O1", "-Wall", "-Werror", "-o"])
            .arg(dir.join("cases"))
            .arg(src.join("cases.c"))
            .arg("-libverbs"),
    )?;
    sysfs_tree(&dir.join("sys"))?;
    crate::host::run(
        cargo()
            .args([
                "build",
                "--quiet",
                "-p",
                crate::host::TOOL_PACKAGE,
                "--bin",
                "rverbs",
                "-p",
                "rverbs-mlx5-oracle",
                "--bin",
                "fake_cases",
            ])
            .env("RUSTFLAGS", "--cfg rverbs_libc_syscalls")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("CARGO_TARGET_DIR", dir.join("target")),
    )?;
    Ok(fake)
}

fn run_devinfo(dir: &Path, fake: &Path) -> Result<Vec<String>> {
    let ours_bin: PathBuf = dir.join("target/debug/rverbs");
    let (their_out, theirs) = against_fake(
        dir,
        fake,
        "rdma-core",
        Command::new("ibv_devinfo").args(["-d", "mlx5_0"]),
    )?;
    let (our_out, ours) = against_fake(
        dir,
        fake,
        "rverbs",
        Command::new(&ours_bin).args(["devinfo", "-d", "mlx5_0"]),
    )?;
    let mut notes = compare(&theirs, &ours)?;
    if their_out != our_out {
        return Err(format!(
            "ibv_devinfo printed\n{their_out}rverbs devinfo printed\n{our_out}"
        ));
    }
    if !their_out.contains("vendor_part_id:\t\t\t4119") {
        return Err(format!(
            "ibv_devinfo did not see the fake ConnectX-5:\n{their_out}"
        ));
    }
    notes.push(format!(
        "both printed the same {} lines",
        our_out.lines().count()
    ));
    Ok(notes)
}

/// The creation differential (`create.rs`) over [`create::CASES`] cases
/// from a seed (`RVERBS_FAKE_SEED` to repeat a run; printed either way).
fn run_create(dir: &Path, fake: &Path) -> Result<Vec<String>> {
    let seed = match std::env::var("RVERBS_FAKE_SEED") {
        Ok(s) => s
            .parse()
            .map_err(|e| format!("RVERBS_FAKE_SEED={s}: {e}"))?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_nanos() as u64,
    };
    let cases = create::generate(seed, create::CASES);
    let file = dir.join("cases.txt");
    let text: String = cases.iter().map(|c| c.line() + "\n").collect();
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut outs = Vec::new();
    for (name, bin) in [
        ("rdma-core-cases", dir.join("cases")),
        ("rverbs-cases", dir.join("target/debug/fake_cases")),
    ] {
        let started = std::time::Instant::now();
        let (out, _) = against_fake(dir, fake, name, Command::new(bin).arg(&file))?;
        let log = dir.join(format!("{name}.log"));
        let log = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        outs.push((out, log, started.elapsed()));
    }
    let listed = create::compare(&cases, (&outs[0].0, &outs[0].1), (&outs[1].0, &outs[1].1))
        .map_err(|e| {
            format!("seed {seed} (RVERBS_FAKE_SEED={seed} cargo xtask fake-mlx5 repeats it): {e}")
        })?;
    let created = outs[1].0.matches(" qp=0/").count();
    let dmabufs = outs[1].0.matches(" dmabuf=0").count();
    Ok(vec![
        format!(
            "{} cases from seed {seed} ({created} QPs created, {dmabufs} dma-buf MRs registered), the same in both but the {listed}",
            cases.len()
        ),
        format!(
            "rdma-core took {:.1} s, rverbs (a debug build) {:.1} s",
            outs[0].2.as_secs_f64(),
            outs[1].2.as_secs_f64()
        ),
    ])
}

/// The two checks: opening the device, and creating objects on it.
pub(super) fn checks(tally: &mut Tally) {
    let dir = target_dir().join("fake-mlx5");
    let devinfo = "mlx5 against a fake uverbs device: rdma-core's libmlx5 (ibv_devinfo) and rverbs' glue (rverbs devinfo) send the same GET_CONTEXT, QUERY_DEVICE_EX and QUERY_PORT and map the same UAR pages, but the listed differences; the same output";
    let creation = "mlx5 against a fake uverbs device: 10,000 generated cases of dma-buf MR (ioctl), CQ, SRQ and QP creation end the same way in rdma-core's libmlx5 and in rverbs, and ask the kernel for the same objects (attributes, udata, core fields, the memory it pins) but the listed differences";
    let fake = match build(&dir) {
        Ok(f) => f,
        Err(e) => {
            tally.fail(devinfo, &e);
            tally.fail(creation, &e);
            return;
        }
    };
    for (what, run) in [
        (
            devinfo,
            run_devinfo as fn(&Path, &Path) -> Result<Vec<String>>,
        ),
        (creation, run_create),
    ] {
        match run(&dir, &fake) {
            Ok(notes) => {
                for n in notes {
                    println!("xtask: fake mlx5: {n}");
                }
                tally.pass(what)
            }
            Err(e) => tally.fail(what, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{compare, parse_log};

    const THEIRS: &str = "write cmd=0 ex=0 len=48 00000000 0c001400 405aa3e0 fd7f0000 10000000 04000000 01000000 00000000 01000000 00000000 03000000 00000000
  resp 05000000
mmap off=0 len=0x1000
mmap off=0x1000 len=0x1000
mmap off=0x500000 len=0x1000
write cmd=1 ex=1 len=32 01000080 01002600 5045a3e0 fd7f0000 00000d00 00000000 00000000 00000000
write cmd=2 ex=0 len=24 02000000 06000a00 0056a3e0 fd7f0000 01000000 00000000
";
    const OURS: &str = "write cmd=0 ex=0 len=48 00000000 0c001400 b0cb7e79 97550000 10000000 04000000 00000000 00000000 00000000 00000000 01000000 00000000
mmap off=0 len=0x1000
mmap off=0x1000 len=0x1000
write cmd=1 ex=1 len=32 01000080 01002600 708eed20 ff7f0000 00000000 00000000 00000000 00000000
write cmd=2 ex=0 len=24 02000000 06000a00 90c87e79 97550000 01000000 00000000
";

    #[test]
    fn only_the_listed_differences_pass() {
        let theirs = parse_log(THEIRS).unwrap();
        let ours = parse_log(OURS).unwrap();
        assert!(compare(&theirs, &ours).is_ok());
        // Fewer low-latency bfregs, a UAR page not mapped, another port:
        // each fails.
        for (from, to) in [
            ("10000000 04000000 00000000", "10000000 02000000 00000000"),
            ("mmap off=0x1000 len=0x1000\nwrite", "write"),
            ("90c87e79 97550000 01000000", "90c87e79 97550000 02000000"),
        ] {
            assert!(OURS.contains(from));
            let ours = parse_log(&OURS.replacen(from, to, 1)).unwrap();
            assert!(compare(&theirs, &ours).is_err(), "{to}");
        }
    }
}

//! The VM's kernel and initramfs, fetched and built once per kernel and
//! cached under the cache directory ([`crate::cache_dir`]).
//!
//! The kernels are Debian's packages (see [`super::kernels`]), fetched with
//! `apt-get download` and unpacked with `dpkg -x` (never installed on the
//! host). The initramfs holds busybox, the modules rxe, uverbs, rdma_cm, 9p
//! and virtio-net need (decompressed, in dependency order) and `/init`.

use super::kernels::{Apt, Arch, Kernel};
use crate::host::{apt_update_once, output, run, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Bump when the initramfs layout changes in a way the hash of init.sh and
/// the module list does not capture.
const IMAGE_FORMAT: u32 = 1;

const INIT_SH: &str = include_str!("init.sh");
const INIT_BARE_SH: &str = include_str!("init-bare.sh");

/// A kernel and initramfs ready to boot.
pub struct Image {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
}

/// Returns the cached image of kernel `k`, fetching and building what is
/// missing.
pub fn ensure(k: &Kernel) -> Result<Image> {
    if k.arch != Arch::X86_64 {
        return Err(format!(
            "{k}: only bare VMs run on {} (the host's root is amd64): give the static binary",
            k.arch.debian()
        ));
    }
    ensure_with(k, "", INIT_SH)
}

/// The bare image: the same kernel and modules, an init with no host share
/// and no iproute2 (see init-bare.sh).
pub fn ensure_bare(k: &Kernel) -> Result<Image> {
    ensure_with(k, "bare-", INIT_BARE_SH)
}

fn ensure_with(k: &Kernel, flavour: &str, init: &str) -> Result<Image> {
    let vm_dir = crate::cache_dir().to_path_buf();
    fs::create_dir_all(&vm_dir).map_err(|e| format!("cannot create {}: {e}", vm_dir.display()))?;
    if let Some(dir) = k.local {
        return local_image(&vm_dir, k, dir, flavour, init);
    }
    let kdir = match cached_kernel(&vm_dir, k) {
        Some(d) => d,
        None => fetch_kernel(&vm_dir, k).map_err(|e| format!("{k}: {e}"))?,
    };
    let version = kernel_version(&kdir)?;
    let kernel = kdir.join(k.vmlinuz.replace("{V}", &version));
    if !kernel.is_file() {
        return Err(format!("{k}: no kernel image at {}", kernel.display()));
    }
    let moddir = kdir.join(k.modroot).join(&version);
    let initramfs = build_initramfs(&vm_dir, k, &moddir, &version, flavour, init)
        .map_err(|e| format!("{k}: {e}"))?;
    Ok(Image { kernel, initramfs })
}

/// The image of a kernel of the user's (see [`Kernel::from_dir`]): its one
/// release under the modules directory, its image, and an initramfs built
/// from its modules (rebuilt when the directory or its modules change).
fn local_image(vm_dir: &Path, k: &Kernel, dir: &Path, flavour: &str, init: &str) -> Result<Image> {
    let mods = dir.join(k.modroot);
    let releases: Vec<String> = fs::read_dir(&mods)
        .map_err(|e| format!("{}: {e}", mods.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let [version] = releases.as_slice() else {
        return Err(format!(
            "{k}: {} holds {} releases ({}): give a directory with one",
            mods.display(),
            releases.len(),
            releases.join(", ")
        ));
    };
    let moddir = mods.join(version);
    if !moddir.join("modules.dep").is_file() {
        return Err(format!(
            "{k}: no modules.dep in {}: run depmod -b {} {version}",
            moddir.display(),
            dir.display()
        ));
    }
    let kernel = [
        format!("boot/vmlinuz-{version}"),
        format!("vmlinuz-{version}"),
        "bzImage".to_string(),
        "boot/bzImage".to_string(),
        format!("{}/{version}/vmlinuz", k.modroot),
    ]
    .into_iter()
    .map(|p| dir.join(p))
    .find(|p| p.is_file())
    .ok_or(format!(
        "{k}: no kernel image (boot/vmlinuz-{version}, vmlinuz-{version} or bzImage)"
    ))?;
    // The stamp names the directory: two trees of one release differ.
    let flavour = format!("{flavour}local-{}-", stamp_hash(&dir.display().to_string()));
    let initramfs = build_initramfs(vm_dir, k, &moddir, version, &flavour, init)
        .map_err(|e| format!("{k}: {e}"))?;
    Ok(Image { kernel, initramfs })
}

/// A short hex digest of `s`, for cache file names.
fn stamp_hash(s: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// An unpacked kernel from an earlier run (the newest, if several).
fn cached_kernel(vm_dir: &Path, k: &Kernel) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(vm_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| k.owns_cache_dir(n))
                && p.join(".complete").exists()
        })
        .collect();
    found.sort_by(|a, b| version_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    found.pop()
}

fn fetch_kernel(vm_dir: &Path, k: &Kernel) -> Result<PathBuf> {
    let apt = AptConfig::new(vm_dir, k.apt)?;
    let list = output(
        apt.command("apt-cache")
            .args(["search", "--names-only", k.search]),
    )?;
    let mut names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.sort_by(|a, b| version_cmp(a, b));
    let pkg = names.last().ok_or_else(|| {
        format!(
            "apt-cache finds no package matching {} ({})",
            k.search,
            match k.apt {
                Apt::Host => "is bookworm with its updates in the host's sources?",
                Apt::Sid => "in the private sid configuration under the cache directory (apt-sid)",
                Apt::BookwormArm64 =>
                    "in the private arm64 configuration under the cache directory (apt-bookworm-arm64)",
            }
        )
    })?;
    let ver = pkg.trim_start_matches(k.prefix);
    let pkgs: Vec<String> = k.packages.iter().map(|p| format!("{p}{ver}")).collect();
    eprintln!(
        "testbed: fetching Debian's {} (once; cached under {})",
        pkgs.join(" "),
        vm_dir.display()
    );
    let dl = vm_dir.join(format!("download-{ver}"));
    let _ = fs::remove_dir_all(&dl);
    fs::create_dir_all(&dl).map_err(|e| e.to_string())?;
    run(apt
        .command("apt-get")
        .args(["download", "-q"])
        .args(&pkgs)
        .current_dir(&dl))?;
    let kdir = vm_dir.join(format!("kernel-{ver}"));
    let _ = fs::remove_dir_all(&kdir);
    let debs = unpack_debs(&dl, &kdir)?;
    if debs != pkgs.len() {
        return Err(format!(
            "apt-get download gave {debs} .deb files for {} packages",
            pkgs.len()
        ));
    }
    // The packages ship no modules.dep; depmod writes it from the modules.
    // Its -b root is the directory above lib/modules (kdir/usr for a
    // merged-/usr package).
    let base = kdir.join(
        k.modroot
            .trim_end_matches("lib/modules")
            .trim_end_matches('/'),
    );
    run(Command::new("depmod").arg("-b").arg(&base).arg(ver))?;
    fs::write(kdir.join(".complete"), ver).map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&dl);
    Ok(kdir)
}

/// Unpacks every `.deb` in `from` into `into` with `dpkg -x` (never
/// installed); returns how many there were.
fn unpack_debs(from: &Path, into: &Path) -> Result<usize> {
    let mut debs = 0;
    for entry in fs::read_dir(from).map_err(|e| e.to_string())? {
        let deb = entry.map_err(|e| e.to_string())?.path();
        if deb.extension().is_some_and(|x| x == "deb") {
            run(Command::new("dpkg").arg("-x").arg(&deb).arg(into))?;
            debs += 1;
        }
    }
    Ok(debs)
}

/// How apt is run for a kernel's packages: the host's configuration as it
/// is, or a private one for Debian unstable whose sources, lists, state and
/// package cache all live under `apt-sid/` in the cache directory. The host's own apt
/// sources are never changed.
struct AptConfig {
    opts: Vec<String>,
}

impl AptConfig {
    fn new(vm_dir: &Path, apt: Apt) -> Result<AptConfig> {
        let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
        let deb = |mirror: &str, suite: &str| {
            format!("deb [signed-by={keyring}] {mirror} {suite} main\n")
        };
        match apt {
            Apt::Host => {
                apt_update_once()?;
                Ok(AptConfig { opts: Vec::new() })
            }
            Apt::Sid => AptConfig::private(
                &vm_dir.join("apt-sid"),
                "amd64",
                &deb(&host_mirror(), "sid"),
                keyring,
            ),
            // 6.12 reaches bookworm through its security archive.
            Apt::BookwormArm64 => AptConfig::private(
                &vm_dir.join("apt-bookworm-arm64"),
                "arm64",
                &[
                    deb(&host_mirror(), "bookworm"),
                    deb(&host_mirror(), "bookworm-updates"),
                    deb(&security_mirror(), "bookworm-security"),
                ]
                .concat(),
                keyring,
            ),
        }
    }

    /// A configuration whose sources, lists, state and package cache all
    /// live under `root`, for architecture `arch` only.
    fn private(root: &Path, arch: &str, sources_list: &str, keyring: &str) -> Result<AptConfig> {
        for d in [
            "etc/preferences.d",
            "state/lists/partial",
            "cache/archives/partial",
        ] {
            fs::create_dir_all(root.join(d)).map_err(|e| format!("{}: {e}", root.display()))?;
        }
        if !Path::new(keyring).exists() {
            return Err(format!("no {keyring} (package debian-archive-keyring)"));
        }
        let sources = root.join("etc/sources.list");
        fs::write(&sources, sources_list).map_err(|e| e.to_string())?;
        // An empty dpkg status: nothing is "installed" in this world, so
        // `install --download-only` fetches a package's whole closure.
        let status = root.join("state/status");
        fs::write(&status, "").map_err(|e| e.to_string())?;
        let p = |k: &str, v: &Path| format!("{k}={}", v.display());
        let opts = vec![
            p("Dir::Etc::sourcelist", &sources),
            "Dir::Etc::sourceparts=-".into(),
            p(
                "Dir::Etc::preferencesparts",
                &root.join("etc/preferences.d"),
            ),
            "Dir::Etc::preferences=/dev/null".into(),
            p("Dir::State", &root.join("state")),
            p("Dir::State::status", &status),
            p("Dir::Cache", &root.join("cache")),
            format!("APT::Architecture={arch}"),
            format!("APT::Architectures::={arch}"),
            "Acquire::Languages=none".into(),
        ];
        let cfg = AptConfig { opts };
        eprintln!(
            "testbed: apt-get update of a private package list ({arch}) under {}",
            root.display()
        );
        run(cfg
            .command("apt-get")
            .args(["update", "-q"])
            .stdout(std::process::Stdio::null()))?;
        Ok(cfg)
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        for o in &self.opts {
            c.arg("-o").arg(o);
        }
        c
    }
}

/// The Debian mirror the host's apt uses (the first `deb.debian.org`-like
/// URI of its Debian sources), so that the private configuration fetches
/// from the same place; Debian's own redirector if none is found.
pub fn host_mirror() -> String {
    let mut texts: Vec<String> = fs::read_to_string("/etc/apt/sources.list")
        .into_iter()
        .collect();
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            texts.extend(fs::read_to_string(e.path()).ok());
        }
    }
    for t in &texts {
        for w in t.split_whitespace() {
            let w = w.trim_start_matches("URIs:");
            if (w.starts_with("http://") || w.starts_with("https://"))
                && w.trim_end_matches('/').ends_with("/debian")
            {
                return w.trim_end_matches('/').to_string();
            }
        }
    }
    "http://deb.debian.org/debian".into()
}

/// The security archive beside [`host_mirror`]: the host's own
/// `.../debian-security` URI, or Debian's.
fn security_mirror() -> String {
    let mut texts: Vec<String> = fs::read_to_string("/etc/apt/sources.list")
        .into_iter()
        .collect();
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            texts.extend(fs::read_to_string(e.path()).ok());
        }
    }
    texts
        .iter()
        .flat_map(|t| t.split_whitespace())
        .map(|w| w.trim_start_matches("URIs:").trim_end_matches('/'))
        .find(|w| {
            (w.starts_with("http://") || w.starts_with("https://"))
                && w.ends_with("/debian-security")
        })
        .map(String::from)
        .unwrap_or_else(|| "http://deb.debian.org/debian-security".into())
}

/// The packages of a guest userland: busybox (the bare VMs' shell and
/// `ip`) and rdma-core's tools, the interop peer.
const USERLAND_PACKAGES: &[&str] = &[
    "busybox-static",
    "ibverbs-utils",
    "ibverbs-providers",
    "rdmacm-utils",
    "perftest",
];

/// rdma-core's tools and busybox for `arch`, from Debian's packages and
/// their dependencies (fetched once through the kernel's private apt
/// configuration, unpacked with `dpkg -x`, cached as
/// `userland-<arch>/` in the cache directory). A guest of another architecture than the
/// host's cannot use the host's root; it mounts this directory instead.
pub fn userland(k: &Kernel) -> Result<PathBuf> {
    let vm_dir = crate::cache_dir().to_path_buf();
    let dir = vm_dir.join(format!("userland-{}", k.arch.debian()));
    let stamp = USERLAND_PACKAGES.join(" ");
    if fs::read_to_string(dir.join(".complete")).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(dir);
    }
    if k.arch == Arch::X86_64 {
        return Err("the amd64 guests use the host's root, not a userland".into());
    }
    let apt = AptConfig::new(&vm_dir, k.apt)?;
    let archives = vm_dir.join(format!("userland-{}-debs", k.arch.debian()));
    let _ = fs::remove_dir_all(&archives);
    fs::create_dir_all(archives.join("partial")).map_err(|e| e.to_string())?;
    eprintln!(
        "testbed: fetching Debian's {} for {} (once; cached under {})",
        stamp,
        k.arch.debian(),
        vm_dir.display()
    );
    run(apt
        .command("apt-get")
        .arg("-o")
        .arg(format!("Dir::Cache::archives={}", archives.display()))
        .args([
            "install",
            "--download-only",
            "--no-install-recommends",
            "-y",
            "-q",
        ])
        .args(USERLAND_PACKAGES)
        .stdout(std::process::Stdio::null()))?;
    let _ = fs::remove_dir_all(&dir);
    let debs = unpack_debs(&archives, &dir)?;
    if debs < USERLAND_PACKAGES.len() {
        return Err(format!(
            "the {} userland: only {debs} packages fetched",
            k.arch.debian()
        ));
    }
    // Mount points for the guest's chroot: the share is read-only there.
    for d in ["proc", "sys", "dev", "tmp", "run"] {
        fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let _ = fs::remove_dir_all(&archives);
    fs::write(dir.join(".complete"), stamp).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn kernel_version(kdir: &Path) -> Result<String> {
    fs::read_to_string(kdir.join(".complete"))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{}: {e}", kdir.display()))
}

/// Compares strings by their runs of digits as numbers (6.12.9 < 6.12.10).
fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(s: &str) -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    }
    key(a).cmp(&key(b))
}

/// The modules to load, dependencies first, as paths relative to the
/// kernel's module directory.
fn module_order(k: &Kernel, moddir: &Path) -> Result<Vec<String>> {
    let dep = fs::read_to_string(moddir.join("modules.dep"))
        .map_err(|e| format!("{}/modules.dep: {e}", moddir.display()))?;
    let mut deps = std::collections::HashMap::new();
    for line in dep.lines() {
        if let Some((m, d)) = line.split_once(':') {
            deps.insert(
                m.to_string(),
                d.split_whitespace().map(String::from).collect::<Vec<_>>(),
            );
        }
    }
    let name_of = |path: &str| -> String {
        let file = path.rsplit('/').next().unwrap_or(path);
        file.split('.').next().unwrap_or(file).replace('-', "_")
    };
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    fn visit(
        m: &str,
        deps: &std::collections::HashMap<String, Vec<String>>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(m.to_string()) {
            return;
        }
        // modules.dep lists every transitive dependency, the nearest first;
        // loading them in reverse puts the deepest first.
        for d in deps.get(m).into_iter().flatten().rev() {
            visit(d, deps, seen, order);
        }
        order.push(m.to_string());
    }
    // Modules built in need no loading (a kernel of the user's may build
    // in what Debian's make modules).
    let builtin: BTreeSet<String> = fs::read_to_string(moddir.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .map(|l| name_of(l.trim()))
        .collect();
    for root in k.modules {
        let (root, optional) = match root.strip_suffix('?') {
            Some(r) => (r, true),
            None => (*root, false),
        };
        match deps.keys().find(|p| name_of(p) == root) {
            Some(path) => {
                let path = path.clone();
                visit(&path, &deps, &mut seen, &mut order);
            }
            None if optional || builtin.contains(root) => {}
            None => return Err(format!("kernel has no module {root}")),
        }
    }
    Ok(order)
}

fn build_initramfs(
    vm_dir: &Path,
    k: &Kernel,
    moddir: &Path,
    version: &str,
    flavour: &str,
    init_sh: &str,
) -> Result<PathBuf> {
    let order = module_order(k, moddir)?;
    // The host's busybox on amd64; the arm64 package's otherwise.
    let busybox = match k.arch {
        Arch::X86_64 => PathBuf::from("/bin/busybox"),
        Arch::Aarch64 => userland(k)?.join("bin/busybox"),
    };
    if !busybox.exists() {
        return Err(format!("no {}: install busybox-static", busybox.display()));
    }
    let stamp = format!("{IMAGE_FORMAT}\n{version}\n{}\n{init_sh}", order.join("\n"));
    let out = vm_dir.join(format!("initramfs-{flavour}{version}.cpio"));
    let stamp_file = vm_dir.join(format!("initramfs-{flavour}{version}.stamp"));
    if out.exists() && fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(out);
    }
    let root = vm_dir.join(format!("initramfs-{flavour}root-{version}"));
    let _ = fs::remove_dir_all(&root);
    for d in ["bin", "proc", "sys", "dev", "tmp", "host", "modules"] {
        fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
    }
    fs::copy(&busybox, root.join("bin/busybox")).map_err(|e| format!("copy busybox: {e}"))?;
    let mut names = Vec::new();
    for m in &order {
        let src = moddir.join(m);
        let file = m.rsplit('/').next().unwrap_or(m);
        // busybox insmod reads neither xz nor zstd: decompress on the host.
        let (plain, unpack) = match (file.strip_suffix(".xz"), file.strip_suffix(".zst")) {
            (Some(p), _) => (p.to_string(), Some(("xz", "xz-utils"))),
            (_, Some(p)) => (p.to_string(), Some(("zstd", "zstd"))),
            _ => (file.to_string(), None),
        };
        let dst = root.join("modules").join(&plain);
        if let Some((tool, package)) = unpack {
            let data = Command::new(tool)
                .arg("-dc")
                .arg(&src)
                .output()
                .map_err(|e| format!("{tool}: {e} (install {package})"))?;
            if !data.status.success() {
                return Err(format!("{tool} -d {} failed", src.display()));
            }
            fs::write(&dst, data.stdout).map_err(|e| e.to_string())?;
        } else {
            fs::copy(&src, &dst).map_err(|e| e.to_string())?;
        }
        names.push(plain);
    }
    fs::write(root.join("modules.order"), names.join("\n") + "\n").map_err(|e| e.to_string())?;
    let init = root.join("init");
    fs::write(&init, init_sh).map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&init, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    let tmp = out.with_extension("cpio.tmp");
    let file = fs::File::create(&tmp).map_err(|e| e.to_string())?;
    run(Command::new("sh")
        .args(["-c", "find . | LC_ALL=C sort | cpio -o -H newc --quiet"])
        .current_dir(&root)
        .stdout(file))?;
    fs::rename(&tmp, &out).map_err(|e| e.to_string())?;
    fs::write(&stamp_file, stamp).map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&root);
    Ok(out)
}

/// Writes `image` followed by a second newc archive holding `files`
/// (path in the guest, host file, mode) to `out`: the kernel unpacks
/// concatenated archives in order.
pub fn with_extra_files(image: &Path, files: &[(&str, &Path, u32)], out: &Path) -> Result<()> {
    let stage = out.with_extension("stage");
    let _ = fs::remove_dir_all(&stage);
    for (guest, host, mode) in files {
        let dst = stage.join(guest.trim_start_matches('/'));
        fs::create_dir_all(dst.parent().expect("a file has a parent"))
            .map_err(|e| e.to_string())?;
        fs::copy(host, &dst).map_err(|e| format!("{}: {e}", host.display()))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&dst, fs::Permissions::from_mode(*mode)).map_err(|e| e.to_string())?;
    }
    let mut bytes = fs::read(image).map_err(|e| e.to_string())?;
    let extra = Command::new("sh")
        .args([
            "-c",
            "find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet",
        ])
        .current_dir(&stage)
        .output()
        .map_err(|e| format!("cpio: {e}"))?;
    if !extra.status.success() {
        return Err("cpio of the extra files failed".into());
    }
    bytes.extend_from_slice(&extra.stdout);
    fs::write(out, bytes).map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&stage);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::version_cmp;
    use std::cmp::Ordering;

    /// Dependencies load first; an optional root the kernel lacks and a
    /// root built in are skipped; a required root it lacks is an error.
    #[test]
    fn module_roots_may_be_optional_or_built_in() {
        use super::super::kernels::{Apt, Arch, Kernel};
        let dir = std::env::temp_dir().join(format!("testbed-mods-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("modules.dep"),
            "kernel/a.ko: kernel/dep.ko\nkernel/dep.ko:\nkernel/x-y.ko.xz:\n",
        )
        .unwrap();
        std::fs::write(dir.join("modules.builtin"), "kernel/net/veth.ko\n").unwrap();
        let k = |modules: &'static [&'static str]| Kernel {
            name: "t",
            arch: Arch::X86_64,
            apt: Apt::Host,
            search: "",
            prefix: "",
            release_start: "",
            packages: &[],
            modroot: "lib/modules",
            vmlinuz: "",
            modules,
            local: None,
        };
        let order = super::module_order(&k(&["a", "gone?", "veth", "x_y"]), &dir).unwrap();
        assert_eq!(order, ["kernel/dep.ko", "kernel/a.ko", "kernel/x-y.ko.xz"]);
        let e = super::module_order(&k(&["a", "gone"]), &dir).unwrap_err();
        assert_eq!(e, "kernel has no module gone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(
            version_cmp("kernel-6.12.9+deb12", "kernel-6.12.10+deb12"),
            Ordering::Less
        );
        assert_eq!(
            version_cmp(
                "linux-image-6.12.117+deb12-amd64",
                "linux-image-6.12.99+deb12-amd64"
            ),
            Ordering::Greater
        );
    }
}

//! The VM's kernel and initramfs, fetched and built once and cached under
//! `target/vm/`.
//!
//! The kernel is Debian's `linux-image-6.12.*+deb12-amd64` package, fetched
//! with `apt-get download` and unpacked with `dpkg -x` (never installed on the
//! host). The initramfs holds busybox, the modules rxe, uverbs, rdma_cm, 9p
//! and virtio-net need (decompressed, in dependency order) and `/init`.

use crate::host::{apt_update_once, output, run, target_dir, Result};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Modules loaded at boot, roots of the dependency walk. `crc32_generic` is
/// not a declared dependency of rdma_rxe, but rxe allocates the "crc32"
/// crypto shash at link creation and fails with ENOENT without it.
const ROOT_MODULES: &[&str] = &[
    "crc32_generic",
    "rdma_rxe",
    "rdma_ucm",
    "veth",
    "9p",
    "9pnet_virtio",
    "virtio_net",
];

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

/// Returns the cached image, fetching and building what is missing.
pub fn ensure() -> Result<Image> {
    ensure_with("", INIT_SH)
}

/// The bare image: the same kernel and modules, an init with no host share
/// and no iproute2 (see init-bare.sh).
pub fn ensure_bare() -> Result<Image> {
    ensure_with("bare-", INIT_BARE_SH)
}

fn ensure_with(flavour: &str, init: &str) -> Result<Image> {
    let vm_dir = target_dir().join("vm");
    fs::create_dir_all(&vm_dir).map_err(|e| format!("cannot create {}: {e}", vm_dir.display()))?;
    let kdir = match cached_kernel(&vm_dir) {
        Some(k) => k,
        None => fetch_kernel(&vm_dir)?,
    };
    let version = kernel_version(&kdir)?;
    let kernel = kdir.join("boot").join(format!("vmlinuz-{version}"));
    let initramfs = build_initramfs(&vm_dir, &kdir, &version, flavour, init)?;
    Ok(Image { kernel, initramfs })
}

/// An unpacked kernel from an earlier run (the newest, if several).
fn cached_kernel(vm_dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(vm_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("kernel-6.12."))
                && p.join(".complete").exists()
        })
        .collect();
    found.sort_by(|a, b| version_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    found.pop()
}

fn fetch_kernel(vm_dir: &Path) -> Result<PathBuf> {
    apt_update_once()?;
    let list = output(Command::new("apt-cache").args([
        "search",
        "--names-only",
        r"^linux-image-6\.12\.[0-9]+\+deb12-amd64$",
    ]))?;
    let mut names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    names.sort_by(|a, b| version_cmp(a, b));
    let pkg = names.last().ok_or(
        "apt-cache finds no linux-image-6.12.*+deb12-amd64 package (is bookworm-security or backports in sources?)",
    )?;
    let ver = pkg.trim_start_matches("linux-image-");
    eprintln!("xtask: fetching Debian's {pkg} (once; cached under target/vm)");
    let dl = vm_dir.join("download");
    let _ = fs::remove_dir_all(&dl);
    fs::create_dir_all(&dl).map_err(|e| e.to_string())?;
    run(Command::new("apt-get")
        .args(["download", "-q", pkg])
        .current_dir(&dl))?;
    let deb = fs::read_dir(&dl)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or("apt-get download produced no .deb")?;
    let kdir = vm_dir.join(format!("kernel-{ver}"));
    let _ = fs::remove_dir_all(&kdir);
    run(Command::new("dpkg").arg("-x").arg(&deb).arg(&kdir))?;
    // The package ships no modules.dep; depmod writes it from the modules.
    run(Command::new("depmod").arg("-b").arg(&kdir).arg(ver))?;
    fs::write(kdir.join(".complete"), ver).map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&dl);
    Ok(kdir)
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
fn module_order(moddir: &Path) -> Result<Vec<String>> {
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
    for root in ROOT_MODULES {
        let path = deps
            .keys()
            .find(|p| name_of(p) == *root)
            .ok_or_else(|| format!("kernel has no module {root}"))?
            .clone();
        visit(&path, &deps, &mut seen, &mut order);
    }
    Ok(order)
}

fn build_initramfs(
    vm_dir: &Path,
    kdir: &Path,
    version: &str,
    flavour: &str,
    init_sh: &str,
) -> Result<PathBuf> {
    let moddir = kdir.join("lib/modules").join(version);
    let order = module_order(&moddir)?;
    let busybox = Path::new("/bin/busybox");
    if !busybox.exists() {
        return Err("no /bin/busybox: install busybox-static".into());
    }
    let stamp = format!("{IMAGE_FORMAT}\n{version}\n{}\n{init_sh}", order.join("\n"));
    let out = vm_dir.join(format!("initramfs-{flavour}{version}.cpio"));
    let stamp_file = vm_dir.join(format!("initramfs-{flavour}{version}.stamp"));
    if out.exists() && fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(out);
    }
    let root = vm_dir.join(format!("initramfs-{flavour}root"));
    let _ = fs::remove_dir_all(&root);
    for d in ["bin", "proc", "sys", "dev", "tmp", "host", "modules"] {
        fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
    }
    fs::copy(busybox, root.join("bin/busybox")).map_err(|e| format!("copy busybox: {e}"))?;
    let mut names = Vec::new();
    for m in &order {
        let src = moddir.join(m);
        let file = m.rsplit('/').next().unwrap_or(m);
        let plain = file.strip_suffix(".xz").unwrap_or(file).to_string();
        let dst = root.join("modules").join(&plain);
        if file.ends_with(".xz") {
            // busybox insmod cannot read xz: decompress on the host.
            let data = Command::new("xz")
                .arg("-dc")
                .arg(&src)
                .output()
                .map_err(|e| format!("xz: {e} (install xz-utils)"))?;
            if !data.status.success() {
                return Err(format!("xz -d {} failed", src.display()));
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

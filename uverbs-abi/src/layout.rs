//! Layout records that tie each Rust type and constant to its C original.
//!
//! Every module of this crate lists, in a `layouts()` and a `consts()`
//! function, each `#[repr(C)]` type it defines (with every field) and each
//! constant, next to the C spelling. The test at the bottom of this file
//! writes a C program that prints the same facts from the installed headers,
//! compiles it with the system `cc` (a test-time use of C only), and compares.
//! It also scans the crate's sources so that a `#[repr(C)]` type that is not
//! listed fails the test.

/// The layout of one Rust struct, paired with the C type it mirrors.
#[derive(Debug, Clone)]
pub struct StructLayout {
    /// The Rust type's name as written in the source (last path segment).
    pub rust: &'static str,
    /// The C type, e.g. `"struct ib_uverbs_cmd_hdr"`.
    pub c: &'static str,
    /// `size_of` of the Rust type.
    pub size: usize,
    /// `align_of` of the Rust type.
    pub align: usize,
    /// `(C member designator, Rust offset)` for every field; the designator
    /// may be nested (`"hdr.length"`) as C's `offsetof` allows.
    pub fields: &'static [(&'static str, usize)],
}

/// One constant's value, paired with the C macro or enumerator it mirrors.
#[derive(Debug, Clone)]
pub struct ConstValue {
    /// The C name (macro or enumerator), e.g. `"IB_USER_VERBS_CMD_POST_SEND"`.
    pub c: &'static str,
    /// The Rust value, widened.
    pub value: i128,
}

/// Something this crate defines that the installed headers are too old to
/// have (they come from `linux-libc-dev` 6.1; the VM runs 6.12). Checked
/// against the value written in the kernel sources by hand, listed so that
/// nothing is silently unchecked.
#[derive(Debug, Clone)]
pub struct NewerThanHeaders {
    /// The C name in the newer kernel.
    pub c: &'static str,
    /// Why it is not in the installed headers (kernel version that added it).
    pub reason: &'static str,
}

/// Builds a [`StructLayout`] from a Rust type, its C name and the pairs of
/// Rust field and C member designator.
#[macro_export]
macro_rules! c_layout {
    ($ty:ident => $c:literal { $($field:ident => $cf:literal),* $(,)? }) => {
        $crate::layout::StructLayout {
            rust: stringify!($ty),
            c: $c,
            size: ::core::mem::size_of::<$ty>(),
            align: ::core::mem::align_of::<$ty>(),
            fields: &[$(($cf, ::core::mem::offset_of!($ty, $field))),*],
        }
    };
}

/// Builds a [`ConstValue`] from a Rust expression and the C name.
#[macro_export]
macro_rules! c_const {
    ($value:expr => $c:literal) => {
        $crate::layout::ConstValue {
            c: $c,
            value: ($value) as i128,
        }
    };
}

#[cfg(test)]
mod tests {
    //! The layouts and constants of every module against the installed C
    //! headers, by a C program compiled with the system `cc` at test time;
    //! the kernel-internal values against libibverbs' `<infiniband/verbs.h>`;
    //! and a scan of the sources that fails on any `#[repr(C)]` struct, or
    //! struct member, that no `layouts()` lists.

    use super::{ConstValue, NewerThanHeaders, StructLayout};
    use std::collections::{BTreeMap, BTreeSet};
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// One module's registrations.
    struct Module {
        name: &'static str,
        layouts: Vec<StructLayout>,
        consts: Vec<ConstValue>,
        newer: Vec<NewerThanHeaders>,
    }

    fn modules() -> Vec<Module> {
        macro_rules! m {
            ($($m:ident),*) => {
                vec![$(Module {
                    name: stringify!($m),
                    layouts: crate::$m::layouts(),
                    consts: crate::$m::consts(),
                    newer: crate::$m::newer_than_headers(),
                }),*]
            };
        }
        m!(verbs, ioctl, rxe, mlx5, cm, netlink, errno)
    }

    /// System headers the modules also mirror (netlink framing), included
    /// first. No `<netinet/in.h>`: it clashes with the `<linux/in6.h>` the
    /// RDMA headers include.
    const SYS_HEADERS: &[&str] = &["linux/netlink.h", "linux/errno.h"];

    /// The UAPI headers the modules mirror, under `/usr/include/rdma/`.
    const HEADERS: &[&str] = &[
        "ib_user_verbs.h",
        "ib_user_ioctl_cmds.h",
        "ib_user_ioctl_verbs.h",
        "rdma_user_ioctl_cmds.h",
        "rdma_user_rxe.h",
        "mlx5-abi.h",
        "mlx5_user_ioctl_cmds.h",
        "mlx5_user_ioctl_verbs.h",
        "rdma_user_cm.h",
        "rdma_netlink.h",
    ];

    /// Prints a constant whatever its C type and sign.
    const PRINT_VALUE: &str = "#define PV(x) do { if ((x) < 0) \
        printf(\"%lld\\n\", (long long)(x)); else \
        printf(\"%llu\\n\", (unsigned long long)(x)); } while (0)\n";

    /// The C program (two translation units: the kernel headers, and
    /// libibverbs' header, which must not meet) and, line by line, what
    /// each printed line is and the value Rust expects.
    fn c_program(mods: &[Module], ibv: &[ConstValue]) -> (String, String, Vec<(String, String)>) {
        let mut main = String::from("#include <stdio.h>\n#include <stddef.h>\n");
        for h in SYS_HEADERS {
            let _ = writeln!(main, "#include <{h}>");
        }
        for h in HEADERS {
            let _ = writeln!(main, "#include <rdma/{h}>");
        }
        main.push_str(PRINT_VALUE);
        main.push_str("void ibv_values(void);\nint main(void) {\n");
        let mut expect = Vec::new();
        for m in mods {
            for l in &m.layouts {
                let c = l.c;
                let _ = writeln!(main, "printf(\"%zu %zu\\n\", sizeof({c}), _Alignof({c}));");
                expect.push((
                    format!("{}::{} ({c}): size align", m.name, l.rust),
                    format!("{} {}", l.size, l.align),
                ));
                for (f, off) in l.fields {
                    let _ = writeln!(main, "printf(\"%zu\\n\", offsetof({c}, {f}));");
                    expect.push((
                        format!("{}::{} ({c}).{f}: offset", m.name, l.rust),
                        off.to_string(),
                    ));
                }
            }
            for k in &m.consts {
                let _ = writeln!(main, "PV({});", k.c);
                expect.push((format!("{}: {}", m.name, k.c), k.value.to_string()));
            }
        }
        main.push_str("ibv_values();\nreturn 0;\n}\n");
        let mut lib = String::from("#include <stdio.h>\n#include <infiniband/verbs.h>\n");
        lib.push_str(PRINT_VALUE);
        lib.push_str("void ibv_values(void) {\n");
        for k in ibv {
            let _ = writeln!(lib, "PV({});", k.c);
            expect.push((format!("libibverbs: {}", k.c), k.value.to_string()));
        }
        lib.push_str("}\n");
        (main, lib, expect)
    }

    /// Compiles and runs the program in a fresh temporary directory and
    /// returns its output lines. Panics, never skips, when `cc` is missing.
    fn run_c(main: &str, lib: &str) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!(
            "uverbs-abi-layout-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let (m, l, exe) = (dir.join("main.c"), dir.join("ibv.c"), dir.join("layout"));
        std::fs::write(&m, main).expect("write main.c");
        std::fs::write(&l, lib).expect("write ibv.c");
        let cc = Command::new("cc")
            .args(["-std=gnu11", "-o"])
            .arg(&exe)
            .arg(&m)
            .arg(&l)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "the layout test needs a C compiler: running `cc` failed ({e}); \
                     install gcc (and linux-libc-dev, libibverbs-dev for the headers)"
                )
            });
        if !cc.status.success() {
            let err = String::from_utf8_lossy(&cc.stderr);
            let hint = if err.contains("infiniband/verbs.h") {
                "\n(install libibverbs-dev: the kernel-internal values are checked against it)"
            } else {
                ""
            };
            panic!(
                "cc failed on the generated layout program (kept in {}): a C name \
                 below is not in the installed headers; list it in newer_than_headers() \
                 instead, or fix it:\n{err}{hint}",
                dir.display()
            );
        }
        let out = Command::new(&exe).output().expect("run the layout program");
        assert!(out.status.success(), "the layout program failed");
        let _ = std::fs::remove_dir_all(&dir);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }

    /// Whether `word` occurs in `text` as a whole C identifier.
    fn has_word(text: &str, word: &str) -> bool {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        text.match_indices(word).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            let after = text[i + word.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
    }

    /// Checks the registrations among themselves and against the header
    /// texts: a name is checked or listed as newer, never both, never with
    /// two values; a "newer" name must really be missing from the headers.
    fn registry_problems(mods: &[Module]) -> Vec<String> {
        let mut bad = Vec::new();
        let headers: String = HEADERS
            .iter()
            .map(|h| Path::new("/usr/include/rdma").join(h))
            .chain(
                SYS_HEADERS
                    .iter()
                    .map(|h| Path::new("/usr/include").join(h)),
            )
            .map(std::fs::read_to_string)
            .collect::<Result<_, _>>()
            .expect("read the installed /usr/include/rdma headers (linux-libc-dev)");
        let mut values: BTreeMap<&str, (i128, &str)> = BTreeMap::new();
        for m in mods {
            for k in &m.consts {
                match values.insert(k.c, (k.value, m.name)) {
                    Some((v, other)) if v != k.value => bad.push(format!(
                        "{}: {} is {} here and {v} in {other}",
                        m.name, k.c, k.value
                    )),
                    _ => {}
                }
            }
        }
        for m in mods {
            for n in &m.newer {
                if values.contains_key(n.c) {
                    bad.push(format!(
                        "{}: {} is both checked and listed as newer",
                        m.name, n.c
                    ));
                }
                if !n.c.contains('.') && has_word(&headers, n.c) {
                    bad.push(format!(
                        "{}: {} is listed as newer than the headers ({}), but they define \
                         it: check it in consts() instead",
                        m.name, n.c, n.reason
                    ));
                }
                if n.reason.trim().is_empty() {
                    bad.push(format!(
                        "{}: {} is listed as newer without a reason",
                        m.name, n.c
                    ));
                }
            }
        }
        bad
    }

    #[test]
    fn layouts_and_constants_match_the_c_headers() {
        let mods = modules();
        let mut ibv = crate::verbs::libibverbs_consts();
        ibv.extend(crate::ioctl::libibverbs_consts());
        let (main, lib, expect) = c_program(&mods, &ibv);
        let got = run_c(&main, &lib);
        let mut bad = registry_problems(&mods);
        if got.len() != expect.len() {
            bad.push(format!(
                "the C program printed {} values, {} expected",
                got.len(),
                expect.len()
            ));
        }
        for ((what, want), got) in expect.iter().zip(&got) {
            if want != got {
                bad.push(format!("{what}: Rust {want}, C {got}"));
            }
        }
        let structs: usize = mods.iter().map(|m| m.layouts.len()).sum();
        let fields: usize = mods
            .iter()
            .flat_map(|m| &m.layouts)
            .map(|l| l.fields.len())
            .sum();
        let consts: usize = mods.iter().map(|m| m.consts.len()).sum();
        let newer: usize = mods.iter().map(|m| m.newer.len()).sum();
        eprintln!(
            "layout test: {structs} structs ({fields} members), {consts} constants checked \
             against the headers, {} against libibverbs; {newer} listed as newer",
            ibv.len()
        );
        assert!(
            bad.is_empty(),
            "{} mismatches:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }

    /// A `#[repr(C...)]` struct found in the sources.
    struct ScannedStruct {
        file: PathBuf,
        module: String,
        name: String,
        /// Members whose names do not start with `_` (explicit padding).
        fields: Vec<String>,
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read the source directory")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }

    /// Removes `//` comments (doc comments included) line by line.
    fn strip_comments(src: &str) -> String {
        src.lines()
            .map(|l| match l.find("//") {
                Some(i) => &l[..i],
                None => l,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The named members of a brace-delimited struct body.
    fn body_fields(body: &str) -> Vec<String> {
        let mut fields = Vec::new();
        let (mut depth, mut start) = (0i32, 0usize);
        let mut parts = Vec::new();
        for (i, c) in body.char_indices() {
            match c {
                '(' | '[' | '<' | '{' => depth += 1,
                ')' | ']' | '>' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&body[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&body[start..]);
        for p in parts {
            let mut p = p.trim();
            while p.starts_with("#[") {
                let end = p.find(']').map_or(p.len(), |e| e + 1);
                p = p[end..].trim_start();
            }
            let Some(colon) = p.find(':') else { continue };
            let name = p[..colon]
                .trim()
                .trim_start_matches("pub(crate)")
                .trim_start_matches("pub(super)")
                .trim_start_matches("pub")
                .trim()
                .trim_start_matches("r#");
            if !name.is_empty() {
                fields.push(name.to_string());
            }
        }
        fields
    }

    fn scan_sources() -> Vec<ScannedStruct> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut found = Vec::new();
        for file in files {
            let text = strip_comments(&std::fs::read_to_string(&file).expect("read a source"));
            let rel = file.strip_prefix(&src).unwrap_or(&file);
            let first = rel.components().next().map_or(String::new(), |c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            });
            // Every line that starts (after indentation) with the attribute.
            let starts = text.lines().scan(0usize, |pos, line| {
                let at = *pos + (line.len() - line.trim_start().len());
                *pos += line.len() + 1;
                Some((at, line.trim_start()))
            });
            let starts: Vec<usize> = starts
                .filter(|(_, l)| l.starts_with("#[repr(C"))
                .map(|(at, _)| at)
                .collect();
            for at in starts {
                let rest = &text[at + 8..];
                // The item this attribute belongs to: the next `struct`
                // (or another item, which is skipped).
                let Some(kw) = rest.find([';', '{']) else {
                    continue;
                };
                let head = &rest[..kw];
                let Some(s) = head.find("struct ") else {
                    continue;
                };
                let name: String = head[s + 7..]
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
                    .collect();
                if name.is_empty() || name.starts_with('$') {
                    continue; // inside a macro definition
                }
                let after = &rest[kw..];
                let fields = if after.starts_with('{') {
                    let mut depth = 0;
                    let end = after
                        .char_indices()
                        .find(|&(_, c)| {
                            depth += match c {
                                '{' => 1,
                                '}' => -1,
                                _ => 0,
                            };
                            depth == 0
                        })
                        .map_or(after.len(), |(e, _)| e);
                    body_fields(&after[1..end])
                } else {
                    Vec::new()
                };
                found.push(ScannedStruct {
                    file: file.clone(),
                    module: first.clone(),
                    name,
                    fields: fields.into_iter().filter(|f| !f.starts_with('_')).collect(),
                });
            }
        }
        found
    }

    /// `"struct foo"` / `"union foo"` → `"foo"`.
    fn c_tag(c: &str) -> &str {
        c.trim_start_matches("struct ")
            .trim_start_matches("union ")
            .trim()
    }

    #[test]
    fn every_repr_c_struct_and_member_is_listed() {
        let mods = modules();
        let scanned = scan_sources();
        assert!(
            scanned.len() > 50,
            "the source scan found only {} #[repr(C)] structs: is it broken?",
            scanned.len()
        );
        let mut bad = Vec::new();
        for s in &scanned {
            let Some(m) = mods.iter().find(|m| m.name == s.module) else {
                bad.push(format!(
                    "{}: {} is outside the six modules",
                    s.file.display(),
                    s.name
                ));
                continue;
            };
            let Some(l) = m.layouts.iter().find(|l| l.rust == s.name) else {
                bad.push(format!(
                    "{}: #[repr(C)] struct {} is in no {}::layouts()",
                    s.file.display(),
                    s.name,
                    m.name
                ));
                continue;
            };
            // Every named Rust member must be at a listed offset (or be a
            // member the headers are too old to have): count the distinct
            // offsets the listing reaches.
            let offsets: BTreeSet<usize> = l
                .fields
                .iter()
                .map(|&(_, o)| o)
                .filter(|&o| o < l.size)
                .collect();
            let prefix = format!("{}.", c_tag(l.c));
            let newer_members = m.newer.iter().filter(|n| n.c.starts_with(&prefix)).count();
            if offsets.len() + newer_members < s.fields.len() {
                bad.push(format!(
                    "{}::{}: {} named members ({}) but the layout reaches only {} offsets: \
                     a member is not listed",
                    m.name,
                    s.name,
                    s.fields.len(),
                    s.fields.join(", "),
                    offsets.len() + newer_members
                ));
            }
        }
        for m in &mods {
            for l in &m.layouts {
                // Top-level members in offset order (union alternatives and
                // nested members may repeat or go back).
                let mut last = 0;
                for &(f, o) in l.fields {
                    if !f.contains('.') {
                        if o < last {
                            bad.push(format!(
                                "{}::{}: {f} is listed out of offset order",
                                m.name, l.rust
                            ));
                        }
                        last = o;
                    }
                    if o > l.size {
                        bad.push(format!(
                            "{}::{}: {f} lies beyond the struct",
                            m.name, l.rust
                        ));
                    }
                }
                if !scanned.iter().any(|s| s.name == l.rust) && !l.c.contains("__typeof__") {
                    bad.push(format!(
                        "{}::{}: listed but no #[repr(C)] struct of that name was found",
                        m.name, l.rust
                    ));
                }
            }
        }
        assert!(
            bad.is_empty(),
            "{} problems:\n{}",
            bad.len(),
            bad.join("\n")
        );
    }
}

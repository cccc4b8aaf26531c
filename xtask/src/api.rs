//! `cargo xtask api [--bless]`: the public API guard. Each library crate's
//! public surface is read from rustdoc's JSON (nightly's
//! `--output-format json`) and written as one sorted line per item —
//! every public path with its signature, every field and variant, every
//! trait a type implements (the auto traits `Send`/`Sync`/`Unpin` too;
//! blanket impls left out) — and compared with the listing checked in
//! under `api/`. Any difference fails, naming the lines removed and added:
//! a change of the public API is made on purpose, with `--bless` and the
//! new listing in the same commit, never by accident.
//!
//! The rendering is ours and only as pretty as a diff needs: a type shape
//! it does not know is written as rustdoc's JSON with its ids removed, so
//! that nothing of the surface escapes the comparison.

use crate::host::{run, target_dir, workspace_root, Result};
use serde_json::Value;
use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;

/// The crates whose Rust API others program against: (package, library
/// name). `rverbs-libibverbs` is left out: its interface is the C ABI,
/// held by its version script and rdma-core's own tests.
pub const CRATES: [(&str, &str); 6] = [
    ("uverbs-abi", "uverbs_abi"),
    ("rverbs-types", "rverbs_types"),
    ("provider-rxe", "provider_rxe"),
    ("provider-mlx5", "provider_mlx5"),
    ("rverbs-cm", "rverbs_cm"),
    ("rverbs", "rverbs"),
];

fn listing_path(package: &str) -> PathBuf {
    workspace_root().join("api").join(format!("{package}.txt"))
}

/// Runs rustdoc for `package` and returns its listing.
pub fn listing(package: &str, lib: &str) -> Result<String> {
    let dir = target_dir().join("api");
    run(crate::checkers::nightly_cargo()
        .args(["rustdoc", "--quiet", "-p", package, "--lib"])
        // Every feature: the guard covers what a user can switch on.
        .arg("--all-features")
        .arg("--target-dir")
        .arg(&dir)
        .args(["--", "-Z", "unstable-options", "--output-format", "json"]))?;
    let file = dir.join("doc").join(format!("{lib}.json"));
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut w = Walker {
        index: &doc["index"],
        lines: BTreeSet::new(),
        seen: HashSet::new(),
    };
    let root = id_key(&doc["root"]);
    let root_item = w
        .item(&root)
        .ok_or("rustdoc JSON without its root module")?;
    w.module(root_item, lib);
    let mut out = format!(
        "# The public API of {package}, from rustdoc's JSON (format {}); `cargo xtask api --bless` rewrites it.\n",
        doc["format_version"]
    );
    for l in &w.lines {
        out.push_str(l);
        out.push('\n');
    }
    Ok(out)
}

/// `cargo xtask api [--bless]`.
pub fn main(args: &[String]) -> Result<ExitCode> {
    let bless = match args {
        [] => false,
        [a] if a == "--bless" => true,
        _ => return Err("api: usage: cargo xtask api [--bless]".into()),
    };
    match check(bless) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Compares every crate's listing with the checked-in one (or, with
/// `bless`, writes it).
pub fn check(bless: bool) -> Result<()> {
    let mut problems = Vec::new();
    for (package, lib) in CRATES {
        let now = listing(package, lib)?;
        let path = listing_path(package);
        if bless {
            std::fs::create_dir_all(path.parent().expect("api/")).map_err(|e| e.to_string())?;
            std::fs::write(&path, &now).map_err(|e| format!("{}: {e}", path.display()))?;
            println!(
                "xtask: api: wrote {} ({} items)",
                path.display(),
                now.lines().count() - 1
            );
            continue;
        }
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if let Some(d) = diff(&old, &now) {
            // A new nightly may render the same API another way: say so.
            let header = |s: &str| s.lines().next().unwrap_or("").to_string();
            let format_note = if header(&old) != header(&now) {
                format!(
                    "\n  (the listing's header changed too: was {:?}, now {:?}; a rustdoc JSON format change alters the rendering, not the API)",
                    header(&old),
                    header(&now)
                )
            } else {
                String::new()
            };
            problems.push(format!(
                "{package}'s public API differs from api/{package}.txt:\n{d}{format_note}"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n(if the change is meant, run `cargo xtask api --bless` and commit api/)",
            problems.join("\n")
        ))
    }
}

/// The lines only in `old` (`-`) and only in `new` (`+`), or `None`.
fn diff(old: &str, new: &str) -> Option<String> {
    let items = |s: &str| -> BTreeSet<String> {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect()
    };
    let (a, b) = (items(old), items(new));
    if a == b {
        return None;
    }
    let mut out = String::new();
    for l in a.difference(&b) {
        out.push_str(&format!("  - {l}\n"));
    }
    for l in b.difference(&a) {
        out.push_str(&format!("  + {l}\n"));
    }
    Some(out)
}

fn id_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

struct Walker<'a> {
    index: &'a Value,
    lines: BTreeSet<String>,
    /// (item, path) pairs already listed: re-exports may reach an item
    /// twice, and a glob may reach its own module.
    seen: HashSet<(String, String)>,
}

impl<'a> Walker<'a> {
    fn item(&self, id: &str) -> Option<&'a Value> {
        self.index.get(id)
    }

    fn emit(&mut self, line: String) {
        self.lines.insert(line);
    }

    fn module(&mut self, m: &'a Value, path: &str) {
        for id in m["inner"]["module"]["items"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(item) = self.item(&id_key(id)) else {
                continue;
            };
            if item["visibility"] != "public" {
                continue;
            }
            self.public(item, path, None);
        }
    }

    /// A public item reached at `path` (under the name `rename` when it is
    /// re-exported under another name).
    fn public(&mut self, item: &'a Value, path: &str, rename: Option<&str>) {
        let inner = &item["inner"];
        let Some((kind, body)) = inner.as_object().and_then(|o| o.iter().next()) else {
            return;
        };
        let name = rename
            .or_else(|| item["name"].as_str())
            .unwrap_or("_")
            .to_string();
        let full = format!("{path}::{name}");
        if kind != "use" && !self.seen.insert((id_key(&item["id"]), full.clone())) {
            return;
        }
        let attrs = attrs(item);
        match kind.as_str() {
            "module" => {
                self.emit(format!("mod {full}"));
                self.module(item, &full);
            }
            "use" => {
                let target = id_key(&body["id"]);
                let source = body["source"].as_str().unwrap_or("?");
                match self.item(&target) {
                    Some(t) if body["is_glob"] == true => {
                        if t["inner"].get("module").is_some() {
                            if self.seen.insert((target.clone(), path.to_string())) {
                                self.module(t, path);
                            }
                        } else {
                            self.emit(format!("use {path}::{source}::*"));
                        }
                    }
                    Some(t) => {
                        let as_name = body["name"].as_str();
                        self.public(t, path, as_name);
                    }
                    None => self.emit(format!(
                        "use {path}::{} = {source}{}",
                        body["name"].as_str().unwrap_or("*"),
                        if body["is_glob"] == true { "::*" } else { "" }
                    )),
                }
            }
            "struct" | "union" => {
                let g = generics(&body["generics"]);
                self.emit(format!("{attrs}{kind} {full}{}{}", g.0, g.1));
                let fields: Vec<&Value> = match &body["kind"] {
                    Value::Object(k) if k.contains_key("plain") => {
                        if k["plain"]["has_stripped_fields"] == true {
                            self.emit(format!("{kind} {full} has private fields"));
                        }
                        k["plain"]["fields"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .collect()
                    }
                    Value::Object(k) if k.contains_key("tuple") => {
                        let t = k["tuple"].as_array().cloned().unwrap_or_default();
                        if t.iter().any(|f| f.is_null()) {
                            self.emit(format!("{kind} {full} has private fields"));
                        }
                        k["tuple"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|f| !f.is_null())
                            .collect()
                    }
                    _ => body["fields"].as_array().into_iter().flatten().collect(),
                };
                for f in fields {
                    if let Some(f) = self.item(&id_key(f)) {
                        if f["visibility"] == "public" {
                            self.emit(format!(
                                "field {full}.{}: {}",
                                f["name"].as_str().unwrap_or("?"),
                                ty(&f["inner"]["struct_field"])
                            ));
                        }
                    }
                }
                self.impls(body, &full);
            }
            "enum" => {
                let g = generics(&body["generics"]);
                self.emit(format!("{attrs}enum {full}{}{}", g.0, g.1));
                for v in body["variants"].as_array().into_iter().flatten() {
                    if let Some(v) = self.item(&id_key(v)) {
                        self.emit(format!("variant {full}::{}", self.variant(v)));
                    }
                }
                self.impls(body, &full);
            }
            "trait" => {
                let g = generics(&body["generics"]);
                let bounds = bounds_list(&body["bounds"]);
                self.emit(format!(
                    "{attrs}{}{}trait {full}{}{}{}",
                    if body["is_unsafe"] == true {
                        "unsafe "
                    } else {
                        ""
                    },
                    if body["is_auto"] == true { "auto " } else { "" },
                    g.0,
                    if bounds.is_empty() {
                        String::new()
                    } else {
                        format!(": {bounds}")
                    },
                    g.1
                ));
                for i in body["items"].as_array().into_iter().flatten() {
                    if let Some(i) = self.item(&id_key(i)) {
                        let n = i["name"].as_str().unwrap_or("?");
                        self.emit(format!("trait item {full}::{}", assoc(i, n)));
                    }
                }
            }
            "function" => self.emit(format!("{attrs}{}", function(body, &full))),
            "constant" => self.emit(format!(
                "const {full}: {} = {}",
                ty(&body["type"]),
                body["const"]["expr"].as_str().unwrap_or("?")
            )),
            "static" => self.emit(format!(
                "static {}{full}: {}",
                if body["is_mutable"] == true {
                    "mut "
                } else {
                    ""
                },
                ty(&body["type"])
            )),
            "type_alias" => {
                let g = generics(&body["generics"]);
                self.emit(format!("type {full}{}{} = {}", g.0, g.1, ty(&body["type"])))
            }
            "macro" | "proc_macro" => self.emit(format!("macro {full}!")),
            other => self.emit(format!("{other} {full} {}", stripped(body))),
        }
    }

    fn variant(&self, v: &Value) -> String {
        let name = v["name"].as_str().unwrap_or("?");
        let body = &v["inner"]["variant"];
        let field_ty = |id: &Value| -> String {
            if id.is_null() {
                return "_".into();
            }
            self.item(&id_key(id))
                .map(|f| ty(&f["inner"]["struct_field"]))
                .unwrap_or_else(|| "?".into())
        };
        let shape = match &body["kind"] {
            Value::Object(k) if k.contains_key("tuple") => format!(
                "({})",
                k["tuple"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(field_ty)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Value::Object(k) if k.contains_key("struct") => format!(
                " {{ {}{} }}",
                k["struct"]["fields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| {
                        let n = self
                            .item(&id_key(f))
                            .and_then(|f| f["name"].as_str())
                            .unwrap_or("?");
                        format!("{n}: {}", field_ty(f))
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                if k["struct"]["has_stripped_fields"] == true {
                    ", .."
                } else {
                    ""
                }
            ),
            _ => String::new(),
        };
        let disc = body["discriminant"]["expr"]
            .as_str()
            .map(|e| format!(" = {e}"))
            .unwrap_or_default();
        format!("{name}{shape}{disc}")
    }

    /// The impls of a type: each trait impl's header (blanket impls left
    /// out), and the public items of its inherent impls.
    fn impls(&mut self, body: &'a Value, full: &str) {
        for id in body["impls"].as_array().into_iter().flatten() {
            let Some(imp) = self.item(&id_key(id)) else {
                continue;
            };
            let i = &imp["inner"]["impl"];
            if !i["blanket_impl"].is_null() {
                continue;
            }
            let g = generics(&i["generics"]);
            let neg = if i["is_negative"] == true { "!" } else { "" };
            match &i["trait"] {
                Value::Null => {
                    for it in i["items"].as_array().into_iter().flatten() {
                        let Some(it) = self.item(&id_key(it)) else {
                            continue;
                        };
                        if it["visibility"] != "public" {
                            continue;
                        }
                        let n = it["name"].as_str().unwrap_or("?");
                        let a = attrs(it);
                        self.emit(format!(
                            "{a}impl{} {}{}: {}",
                            g.0,
                            ty(&i["for"]),
                            g.1,
                            assoc(it, &format!("{full}::{n}"))
                        ));
                    }
                }
                t => self.emit(format!(
                    "{}impl{} {neg}{} for {}{}",
                    if i["is_unsafe"] == true {
                        "unsafe "
                    } else {
                        ""
                    },
                    g.0,
                    path(t),
                    ty(&i["for"]),
                    g.1
                )),
            }
        }
    }
}

/// The attributes that are part of the API (`#[non_exhaustive]`, `repr`).
fn attrs(item: &Value) -> String {
    let mut out = String::new();
    for a in item["attrs"].as_array().into_iter().flatten() {
        match a {
            Value::String(s) if s == "non_exhaustive" => out.push_str("#[non_exhaustive] "),
            Value::Object(o) if o.contains_key("repr") => {
                out.push_str(&format!("#[repr({})] ", repr(&o["repr"])))
            }
            _ => {}
        }
    }
    if !item["deprecation"].is_null() {
        out.push_str("#[deprecated] ");
    }
    out
}

/// `C, u8, align(8), packed(1)` from rustdoc's repr record.
fn repr(r: &Value) -> String {
    let mut parts = Vec::new();
    match r["kind"].as_str() {
        Some("c") => parts.push("C".to_string()),
        Some("transparent") => parts.push("transparent".to_string()),
        Some("simd") => parts.push("simd".to_string()),
        Some("rust") | None => {}
        Some(other) => parts.push(other.to_string()),
    }
    if let Some(i) = r["int"].as_str() {
        parts.push(i.to_string());
    }
    if !r["align"].is_null() {
        parts.push(format!("align({})", r["align"]));
    }
    if !r["packed"].is_null() {
        parts.push(format!("packed({})", r["packed"]));
    }
    parts.join(", ")
}

/// An associated item (method, const, type) of a trait or impl.
fn assoc(i: &Value, full: &str) -> String {
    let inner = &i["inner"];
    if let Some(f) = inner.get("function") {
        function(f, full)
    } else if let Some(c) = inner.get("assoc_const") {
        format!("const {full}: {}", ty(&c["type"]))
    } else if let Some(t) = inner.get("assoc_type") {
        let b = bounds_list(&t["bounds"]);
        format!(
            "type {full}{}{}",
            if b.is_empty() {
                String::new()
            } else {
                format!(": {b}")
            },
            if t["type"].is_null() {
                String::new()
            } else {
                format!(" = {}", ty(&t["type"]))
            }
        )
    } else {
        format!("{full} {}", stripped(inner))
    }
}

fn function(f: &Value, full: &str) -> String {
    let h = &f["header"];
    let mut q = String::new();
    if h["is_const"] == true {
        q.push_str("const ");
    }
    if h["is_async"] == true {
        q.push_str("async ");
    }
    if h["is_unsafe"] == true {
        q.push_str("unsafe ");
    }
    match &h["abi"] {
        Value::String(s) if s == "Rust" => {}
        other => q.push_str(&format!("extern {} ", stripped(other))),
    }
    let g = generics(&f["generics"]);
    let sig = &f["sig"];
    let inputs: Vec<String> = sig["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{}: {}", p[0].as_str().unwrap_or("_"), ty(&p[1])))
        .collect();
    let out = if sig["output"].is_null() {
        String::new()
    } else {
        format!(" -> {}", ty(&sig["output"]))
    };
    format!("{q}fn {full}{}({}){out}{}", g.0, inputs.join(", "), g.1)
}

/// `(<params>, where-clause)` of a generics record; synthetic params
/// (`impl Trait` arguments) are shown where they are written.
fn generics(g: &Value) -> (String, String) {
    let params: Vec<String> = g["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p["name"].as_str().unwrap_or("?");
            let k = &p["kind"];
            if let Some(l) = k.get("lifetime") {
                let o: Vec<&str> = l["outlives"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.as_str())
                    .collect();
                Some(if o.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}: {}", o.join(" + "))
                })
            } else if let Some(t) = k.get("type") {
                if t["is_synthetic"] == true {
                    return None;
                }
                let b = bounds_list(&t["bounds"]);
                let mut s = name.to_string();
                if !b.is_empty() {
                    s.push_str(&format!(": {b}"));
                }
                if !t["default"].is_null() {
                    s.push_str(&format!(" = {}", ty(&t["default"])));
                }
                Some(s)
            } else if let Some(c) = k.get("const") {
                Some(format!("const {name}: {}", ty(&c["type"])))
            } else {
                Some(format!("{name} {}", stripped(k)))
            }
        })
        .collect();
    let preds: Vec<String> = g["where_predicates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            if let Some(b) = w.get("bound_predicate") {
                format!("{}: {}", ty(&b["type"]), bounds_list(&b["bounds"]))
            } else {
                stripped(w)
            }
        })
        .collect();
    (
        if params.is_empty() {
            String::new()
        } else {
            format!("<{}>", params.join(", "))
        },
        if preds.is_empty() {
            String::new()
        } else {
            format!(" where {}", preds.join(", "))
        },
    )
}

fn bounds_list(b: &Value) -> String {
    b.as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            if let Some(t) = b.get("trait_bound") {
                let m = match t["modifier"].as_str() {
                    Some("maybe") => "?",
                    Some("maybe_const") => "~const ",
                    _ => "",
                };
                format!("{m}{}", path(&t["trait"]))
            } else if let Some(l) = b.get("outlives") {
                l.as_str().unwrap_or("?").to_string()
            } else {
                stripped(b)
            }
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// A path with its generic arguments (`Result<T, Error>`).
fn path(p: &Value) -> String {
    let name = p["path"].as_str().unwrap_or("?");
    let a = &p["args"];
    if a.is_null() {
        return name.to_string();
    }
    if let Some(ab) = a.get("angle_bracketed") {
        let mut parts: Vec<String> = ab["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                if let Some(t) = x.get("type") {
                    ty(t)
                } else if let Some(l) = x.get("lifetime") {
                    l.as_str().unwrap_or("?").to_string()
                } else if let Some(c) = x.get("const") {
                    c["expr"]
                        .as_str()
                        .map(String::from)
                        .unwrap_or_else(|| stripped(c))
                } else if x == "infer" {
                    "_".into()
                } else {
                    stripped(x)
                }
            })
            .collect();
        for c in ab["constraints"].as_array().into_iter().flatten() {
            let n = c["name"].as_str().unwrap_or("?");
            let b = &c["binding"];
            if let Some(t) = b.get("equality").and_then(|e| e.get("type")) {
                parts.push(format!("{n} = {}", ty(t)));
            } else if let Some(bs) = b.get("constraint") {
                parts.push(format!("{n}: {}", bounds_list(bs)));
            } else {
                parts.push(format!("{n} {}", stripped(b)));
            }
        }
        if parts.is_empty() {
            return name.to_string();
        }
        return format!("{name}<{}>", parts.join(", "));
    }
    if let Some(pz) = a.get("parenthesized") {
        let inputs: Vec<String> = pz["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(ty)
            .collect();
        let out = if pz["output"].is_null() {
            String::new()
        } else {
            format!(" -> {}", ty(&pz["output"]))
        };
        return format!("{name}({}){out}", inputs.join(", "));
    }
    format!("{name}{}", stripped(a))
}

fn ty(t: &Value) -> String {
    let Some((k, v)) = t.as_object().and_then(|o| o.iter().next()) else {
        return match t.as_str() {
            Some("infer") => "_".into(),
            _ => stripped(t),
        };
    };
    match k.as_str() {
        "resolved_path" => path(v),
        "generic" | "primitive" => v.as_str().unwrap_or("?").to_string(),
        "borrowed_ref" => format!(
            "&{}{}{}",
            v["lifetime"]
                .as_str()
                .map(|l| format!("{l} "))
                .unwrap_or_default(),
            if v["is_mutable"] == true { "mut " } else { "" },
            ty(&v["type"])
        ),
        "raw_pointer" => format!(
            "*{} {}",
            if v["is_mutable"] == true {
                "mut"
            } else {
                "const"
            },
            ty(&v["type"])
        ),
        "slice" => format!("[{}]", ty(v)),
        "array" => format!("[{}; {}]", ty(&v["type"]), v["len"].as_str().unwrap_or("?")),
        "tuple" => {
            let e: Vec<String> = v.as_array().into_iter().flatten().map(ty).collect();
            if e.len() == 1 {
                format!("({},)", e[0])
            } else {
                format!("({})", e.join(", "))
            }
        }
        "impl_trait" => format!("impl {}", bounds_list(v)),
        "dyn_trait" => {
            let mut parts: Vec<String> = v["traits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| path(&p["trait"]))
                .collect();
            if let Some(l) = v["lifetime"].as_str() {
                parts.push(l.to_string());
            }
            format!("dyn {}", parts.join(" + "))
        }
        "qualified_path" => format!(
            "<{}{}>::{}",
            ty(&v["self_type"]),
            if v["trait"].is_null() {
                String::new()
            } else {
                format!(" as {}", path(&v["trait"]))
            },
            v["name"].as_str().unwrap_or("?")
        ),
        "function_pointer" => {
            let f = v;
            let inputs: Vec<String> = f["sig"]["inputs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| ty(&p[1]))
                .collect();
            let out = if f["sig"]["output"].is_null() {
                String::new()
            } else {
                format!(" -> {}", ty(&f["sig"]["output"]))
            };
            let h = &f["header"];
            format!(
                "{}{}fn({}){out}",
                if h["is_unsafe"] == true {
                    "unsafe "
                } else {
                    ""
                },
                match &h["abi"] {
                    Value::String(s) if s == "Rust" => String::new(),
                    other => format!("extern {} ", stripped(other)),
                },
                inputs.join(", ")
            )
        }
        _ => stripped(t),
    }
}

/// JSON with rustdoc's item ids removed (they change from build to build),
/// for shapes the rendering above does not spell out.
fn stripped(v: &Value) -> String {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .filter(|(k, _)| k.as_str() != "id")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    strip(v).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_render_as_written() {
        let t = json!({"borrowed_ref": {"lifetime": "'a", "is_mutable": true, "type":
            {"resolved_path": {"path": "Result", "id": 3, "args": {"angle_bracketed": {"args": [
                {"type": {"slice": {"primitive": "u8"}}}, {"type": {"generic": "E"}}], "constraints": []}}}}}});
        assert_eq!(ty(&t), "&'a mut Result<[u8], E>");
        assert_eq!(ty(&json!({"tuple": []})), "()");
        assert_eq!(
            ty(&json!({"raw_pointer": {"is_mutable": false, "type": {"primitive": "c_void"}}})),
            "*const c_void"
        );
    }

    #[test]
    fn reprs_read_as_written() {
        let r = json!({"align": 8, "int": null, "kind": "c", "packed": null});
        assert_eq!(repr(&r), "C, align(8)");
        assert_eq!(
            repr(&json!({"align": null, "int": "u8", "kind": "rust", "packed": null})),
            "u8"
        );
    }

    #[test]
    fn unknown_shapes_keep_everything_but_ids() {
        assert_eq!(
            stripped(&json!({"pat": {"id": 7, "x": 1}})),
            r#"{"pat":{"x":1}}"#
        );
    }

    #[test]
    fn the_diff_names_removed_and_added_lines() {
        let d = diff("# h\nfn a\nfn b\n", "# other header\nfn b\nfn c\n").unwrap();
        assert_eq!(d, "  - fn a\n  + fn c\n");
        assert!(diff("# h\nfn a\n", "# h2\nfn a\n").is_none());
    }
}

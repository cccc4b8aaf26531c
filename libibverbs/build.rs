//! Links `libibverbs.so` as rdma-core's `libibverbs.so.1` does: the SONAME,
//! and the version nodes of rdma-core 44 (`IBVERBS_1.0` … `IBVERBS_1.14`,
//! `IBVERBS_PRIVATE_34`), generated from `symbols.txt`, the one list of
//! what this library exports and in which version.

use std::collections::BTreeMap;
use std::fmt::Write as _;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let list = format!("{dir}/symbols.txt");
    println!("cargo:rerun-if-changed={list}");
    let text = std::fs::read_to_string(&list).expect("read symbols.txt");
    // Version nodes in rdma-core's order, each inheriting the one before.
    const NODES: &[&str] = &[
        "IBVERBS_1.0",
        "IBVERBS_1.1",
        "IBVERBS_1.5",
        "IBVERBS_1.6",
        "IBVERBS_1.7",
        "IBVERBS_1.8",
        "IBVERBS_1.9",
        "IBVERBS_1.10",
        "IBVERBS_1.11",
        "IBVERBS_1.12",
        "IBVERBS_1.13",
        "IBVERBS_1.14",
        "IBVERBS_PRIVATE_34",
    ];
    let mut by_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut it = line.split_whitespace();
        let (Some(name), Some(node)) = (it.next(), it.next()) else {
            panic!("symbols.txt: `{line}` is not `name VERSION`");
        };
        assert!(
            NODES.contains(&node),
            "symbols.txt: unknown version node {node}"
        );
        by_node.entry(node).or_default().push(name);
    }
    let mut map = String::new();
    let mut prev: Option<&str> = None;
    for node in NODES {
        let _ = writeln!(map, "{node} {{");
        let syms = by_node.get(node).map(Vec::as_slice).unwrap_or(&[]);
        if !syms.is_empty() {
            let _ = writeln!(map, "  global:");
            for s in syms {
                let _ = writeln!(map, "    {s};");
            }
        }
        // The last node hides everything else (the Rust names behind the
        // versioned aliases stay in rustc's own list).
        if node == NODES.last().expect("non-empty") {
            let _ = writeln!(map, "  local: *;");
        }
        match prev {
            Some(p) if !node.starts_with("IBVERBS_PRIVATE") => {
                let _ = writeln!(map, "}} {p};");
            }
            _ => {
                let _ = writeln!(map, "}};");
            }
        }
        prev = Some(node);
    }
    let path = format!("{out}/libibverbs.map");
    std::fs::write(&path, map).expect("write the version script");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={path}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
}

//! The wall-clock table: perftest beside `rverbs perf`, each figure as
//! min / median / max over the interleaved rounds. Under TCG the guest's
//! 4 ms tick and two busy cores move single runs a lot, so a ratio whose
//! two ranges overlap is marked "not significant" rather than read as a
//! verdict; the instruction tables are the figures of merit.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// min, median, max of `v` (None if empty).
fn range(v: &[f64]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, super::median(v), hi))
}

/// The ratio cell: median over median, and whether the ranges overlap.
fn ratio(a: Option<(f64, f64, f64)>, b: Option<(f64, f64, f64)>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a.1 > 0.0 => {
            let r = b.1 / a.1;
            if a.0 <= b.2 && b.0 <= a.2 {
                format!("{r:.2} (not significant)")
            } else {
                format!("{r:.2}")
            }
        }
        _ => "-".into(),
    }
}

/// The table from `parse`'s map: (test, size, tool) -> figures.
pub fn table(
    m: &BTreeMap<(String, u32, String), Vec<f64>>,
    tests: &[(&str, &str, bool)],
    sizes: &[u32],
) -> String {
    let mut md = String::from(
        "| test | size | perftest min / median / max | rverbs min / median / max | rverbs/perftest (medians) |\n| --- | --- | --- | --- | --- |\n",
    );
    for (pt, _, lat) in tests {
        for size in sizes {
            let get = |tool: &str| {
                m.get(&(pt.to_string(), *size, tool.to_string()))
                    .and_then(|v| range(v))
            };
            let (a, b) = (get("perftest"), get("rverbs"));
            let unit = if *lat { "us" } else { "MB/s" };
            let f = |x: Option<(f64, f64, f64)>| {
                x.map(|(lo, med, hi)| format!("{lo:.2} / {med:.2} / {hi:.2} {unit}"))
                    .unwrap_or_else(|| "failed".into())
            };
            let _ = writeln!(
                md,
                "| {pt} | {size} | {} | {} | {} |",
                f(a),
                f(b),
                ratio(a, b)
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_ranges_are_not_significant() {
        let mut m = BTreeMap::new();
        let k = |tool: &str| ("ib_write_lat".to_string(), 64u32, tool.to_string());
        m.insert(k("perftest"), vec![60.0, 70.0, 80.0]);
        m.insert(k("rverbs"), vec![75.0, 90.0, 100.0]);
        let t = table(&m, &[("ib_write_lat", "write-lat", true)], &[64]);
        assert!(
            t.contains("| ib_write_lat | 64 | 60.00 / 70.00 / 80.00 us | 75.00 / 90.00 / 100.00 us | 1.29 (not significant) |"),
            "{t}"
        );
        m.insert(k("rverbs"), vec![85.0, 90.0, 100.0]);
        let t = table(&m, &[("ib_write_lat", "write-lat", true)], &[64]);
        assert!(t.contains("| 1.29 |"), "{t}");
        let t = table(&m, &[("ib_write_lat", "write-lat", true)], &[4096]);
        assert!(t.contains("| failed | failed | - |"), "{t}");
    }
}

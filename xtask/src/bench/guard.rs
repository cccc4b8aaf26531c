//! The regression guard: rverbs' per-call instruction figures against the
//! ones recorded in the repository (`xtask/bench-baseline.txt`). A run
//! fails, naming the row, when a figure rises more than [`TOLERANCE`]
//! above its recorded value; `cargo xtask bench --update-baseline` writes
//! this run's figures as the new record.
//!
//! Each measuring step records its figures in `target/bench/figures-<section>.txt`
//! (`key value`, one a line) as it goes, so that the guard sees whatever
//! this run measured (`--mlx5-only` measures only the host rows) and no
//! stale figure from an earlier run: the files are cleared when a run
//! starts.

use crate::host::{workspace_root, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// How far above its record a figure may rise before the run fails.
pub const TOLERANCE: f64 = 0.10;

/// The recorded figures, in the repository.
pub fn baseline_path() -> PathBuf {
    workspace_root().join("xtask").join("bench-baseline.txt")
}

/// One measured figure: a stable key, what it is, instructions per call.
pub struct Figure {
    pub key: String,
    pub label: String,
    pub value: f64,
}

impl Figure {
    pub fn new(key: &str, label: &str, value: f64) -> Figure {
        Figure {
            key: key.into(),
            label: label.into(),
            value,
        }
    }
}

/// Forgets the figures of earlier runs (call when a run starts).
pub fn clear(out_dir: &Path) {
    if let Ok(dir) = fs::read_dir(out_dir) {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("figures-") && name.ends_with(".txt") {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// Records one section's figures of this run.
pub fn record(out_dir: &Path, section: &str, figures: &[Figure]) -> Result<()> {
    fs::create_dir_all(out_dir).map_err(|e| e.to_string())?;
    fs::write(
        out_dir.join(format!("figures-{section}.txt")),
        format_figures(figures),
    )
    .map_err(|e| e.to_string())
}

/// This run's figures, every section.
fn measured(out_dir: &Path) -> Vec<Figure> {
    let mut files: Vec<PathBuf> = fs::read_dir(out_dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with("figures-") && n.ends_with(".txt"))
        })
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| parse_figures(&fs::read_to_string(f).unwrap_or_default()))
        .collect()
}

/// `key value  # label` lines; `#` lines are comments.
fn format_figures(figures: &[Figure]) -> String {
    let mut s = String::new();
    for f in figures {
        let _ = writeln!(s, "{:<28} {:>8.0}  # {}", f.key, f.value, f.label);
    }
    s
}

fn parse_figures(text: &str) -> Vec<Figure> {
    text.lines()
        .filter_map(|l| {
            let (data, label) = l.split_once('#').unwrap_or((l, ""));
            let mut it = data.split_whitespace();
            let key = it.next()?;
            let value = it.next()?.parse().ok()?;
            Some(Figure::new(key, label.trim(), value))
        })
        .collect()
}

/// Compares this run's figures with the record. Returns the lines to
/// print, or an error naming every row that rose more than the tolerance.
pub fn check(out_dir: &Path) -> Result<String> {
    let path = baseline_path();
    let text = fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (write it with cargo xtask bench --update-baseline)",
            path.display()
        )
    })?;
    compare(&parse_figures(&text), &measured(out_dir))
}

fn compare(base: &[Figure], now: &[Figure]) -> Result<String> {
    let base: BTreeMap<&str, f64> = base.iter().map(|f| (f.key.as_str(), f.value)).collect();
    let mut report = String::new();
    let mut bad = Vec::new();
    for f in now {
        match base.get(f.key.as_str()) {
            Some(&b) => {
                let rise = if b > 0.0 { f.value / b - 1.0 } else { 0.0 };
                let _ = writeln!(
                    report,
                    "guard: {:<28} {:>6.0} (recorded {b:.0}, {:+.1}%)",
                    f.key,
                    f.value,
                    rise * 100.0
                );
                // Exactly 10% is allowed (float division may land a hair above).
                if rise > TOLERANCE + 1e-9 {
                    bad.push(format!(
                        "{} ({}): {:.0} instructions per call, {:.0}% above the recorded {b:.0}",
                        f.key,
                        f.label,
                        f.value,
                        rise * 100.0
                    ));
                }
            }
            None => {
                let _ = writeln!(
                    report,
                    "guard: {:<28} {:>6.0} (not recorded yet: cargo xtask bench --update-baseline)",
                    f.key, f.value
                );
            }
        }
    }
    if bad.is_empty() {
        Ok(report)
    } else {
        Err(format!(
            "{report}per-call figures rose more than {:.0}% above {}:\n  {}\n\
             (if the rise is intended, record it with cargo xtask bench --update-baseline)",
            TOLERANCE * 100.0,
            baseline_path().display(),
            bad.join("\n  ")
        ))
    }
}

/// Writes this run's figures as the record, keeping recorded rows this run
/// did not measure (a `--mlx5-only` run leaves the VM rows as they were).
pub fn update(out_dir: &Path) -> Result<String> {
    let path = baseline_path();
    let now = measured(out_dir);
    if now.is_empty() {
        return Err("no figures measured in this run: nothing to record".into());
    }
    let old = parse_figures(&fs::read_to_string(&path).unwrap_or_default());
    let mut rows: BTreeMap<String, Figure> = old.into_iter().map(|f| (f.key.clone(), f)).collect();
    for f in now {
        rows.insert(f.key.clone(), f);
    }
    let mut text = String::from(
        "# rverbs' per-call userspace instructions (callgrind), as recorded by\n\
         # `cargo xtask bench --update-baseline`. `cargo xtask bench` fails when a\n\
         # figure rises more than 10% above its line here. key, instructions, what.\n",
    );
    let rows: Vec<Figure> = rows.into_values().collect();
    text.push_str(&format_figures(&rows));
    fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!(
        "xtask: recorded {} figures in {}",
        rows.len(),
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rise_over_ten_percent_fails_naming_the_row() {
        let base = parse_figures("# c\nmlx5.post 400 # post\nmlx5.poll 200 # poll\n");
        assert_eq!(base.len(), 2);
        let ok = vec![
            Figure::new("mlx5.post", "post", 440.0),
            Figure::new("mlx5.poll", "poll", 150.0),
            Figure::new("new.row", "new", 10.0),
        ];
        let r = compare(&base, &ok).unwrap();
        assert!(r.contains("not recorded yet"), "{r}");
        let bad = vec![Figure::new("mlx5.poll", "poll one", 221.0)];
        let e = compare(&base, &bad).unwrap_err();
        assert!(e.contains("mlx5.poll (poll one): 221"), "{e}");
        assert!(!e.contains("mlx5.post ("), "{e}");
    }

    #[test]
    fn figures_round_trip() {
        let f = vec![Figure::new("a.b", "the a of b", 123.4)];
        let back = parse_figures(&format_figures(&f));
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].key, "a.b");
        assert_eq!(back[0].value, 123.0);
        assert_eq!(back[0].label, "the a of b");
    }
}

//! The charts of `cargo xtask bench`: perftest beside `rverbs perf` as
//! curves — latency and bandwidth vs message size, message rate vs number
//! of QPs — as SVG files next to `report.md`.
//!
//! Every point is the median of `ROUNDS` runs with its min–max bar; the
//! two stacks alternate at every point (and which goes first alternates
//! too), so drift in the emulated VM hits both. Figures come from each
//! client's `--out_json` file (both stacks write perftest's keys), printed
//! into the log so that `--report-only` can redraw them. Under TCG the
//! guest's 4 ms tick dominates wall-clock: the charts show the spread, and
//! are not a verdict (the callgrind tables are).

use super::svg::{self, Chart, Series};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Message sizes: 2 B to 128 KiB, every 4x (9 points keep a run of both
/// stacks, three rounds, under about three minutes of TCG).
const SIZES: &[u32] = &[2, 8, 32, 128, 512, 2048, 8192, 32768, 131072];
const QPS: &[u32] = &[1, 2, 4, 8];
/// Message size of the message-rate runs.
const RATE_SIZE: u32 = 64;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Stack {
    Perftest,
    Rverbs,
}

impl Stack {
    fn key(self) -> &'static str {
        match self {
            Stack::Perftest => "perftest",
            Stack::Rverbs => "rverbs",
        }
    }

    fn parse(s: &str) -> Option<Stack> {
        [Stack::Perftest, Stack::Rverbs]
            .into_iter()
            .find(|k| k.key() == s)
    }
}

/// One chart: which tools, what varies, which JSON key is the figure.
pub struct Kind {
    /// File stem and the key in the log.
    pub key: &'static str,
    perftest: &'static str,
    rverbs: &'static str,
    /// The x values; `-s X` unless `qps`, then `-q X` at `RATE_SIZE`.
    xs: &'static [u32],
    qps: bool,
    /// The report table's unit.
    unit: &'static str,
    /// The figure in the `results` block, and the factor to the plotted unit.
    metric: &'static str,
    scale: f64,
    title: &'static str,
    x_label: &'static str,
    y_label: &'static str,
    log_y: bool,
}

pub const KINDS: &[Kind] = &[
    Kind {
        key: "latency",
        unit: "t_typical, µs",
        perftest: "ib_write_lat",
        rverbs: "write-lat",
        xs: SIZES,
        qps: false,
        metric: "t_typical",
        scale: 1.0,
        title: "RDMA WRITE latency vs message size",
        x_label: "message size (bytes, log2)",
        y_label: "latency, t_typical (µs, log)",
        log_y: true,
    },
    Kind {
        key: "bandwidth",
        unit: "BW average, MB/s",
        perftest: "ib_write_bw",
        rverbs: "write-bw",
        xs: SIZES,
        qps: false,
        metric: "BW_average",
        scale: 1.0,
        title: "RDMA WRITE bandwidth vs message size",
        x_label: "message size (bytes, log2)",
        y_label: "BW average (MB/s = 2^20 B/s, log)",
        log_y: true,
    },
    Kind {
        key: "msg_rate_qps",
        unit: "MsgRate of all QPs, k messages/s",
        perftest: "ib_write_bw",
        rverbs: "write-bw",
        xs: QPS,
        qps: true,
        metric: "MsgRate",
        // perftest's MsgRate is in Mpps; thousands read better here.
        scale: 1000.0,
        title: "RDMA WRITE message rate (64 B) vs number of QPs",
        x_label: "QPs (-q, log2)",
        y_label: "message rate, all QPs (k messages/s)",
        log_y: false,
    },
];

/// Iterations per run: enough to take a median over, few enough for TCG.
fn iters(k: &Kind, x: u32) -> u32 {
    match (k.key, x) {
        ("latency", x) if x > 8192 => 100,
        ("latency", _) => 300,
        (_, x) if !k.qps && x > 8192 => 200,
        _ => 1000,
    }
}

/// The shell for every chart run, `rounds` interleaved rounds; prints
/// "CHART-JSON KEY STACK X ROUND <line>" per line of the client's JSON,
/// or "CHART-FAILED KEY STACK X ROUND" and the tails of both outputs.
pub fn script(rounds: u32) -> String {
    let mut s = String::from(
        r#"
cport=30000
chart_t0=$(date +%s)
# listening PORT: a TCP listener on PORT (perftest's client does not retry).
listening() { awk -v p="$(printf ':%04X' $1)" '$2 ~ p"$" && $4 == "0A" {f=1} END {exit !f}' /proc/net/tcp; }
# chart KEY STACK X ROUND TOOL ARGS...: a server and a client of TOOL on rxe0.
chart() {
    id="$1 $2 $3 $4"; shift 4
    cport=$((cport + 1))
    timeout 90 "$@" -p $cport > /tmp/chart-server.out 2>&1 &
    sp=$!
    for i in $(seq 200); do listening $cport && break; kill -0 $sp 2>/dev/null || break; sleep 0.05; done
    rm -f /tmp/chart.json
    timeout 90 "$@" -p $cport --out_json --out_json_file /tmp/chart.json 10.77.0.1 > /tmp/chart-client.out 2>&1
    ok=$?
    wait $sp
    if [ $ok = 0 ] && [ -s /tmp/chart.json ]; then
        sed "s/^/CHART-JSON $id /" /tmp/chart.json
    else
        echo "CHART-FAILED $id"
        tail -n 4 /tmp/chart-client.out /tmp/chart-server.out | sed 's/^/    /'
    fi
}
"#,
    );
    for round in 0..rounds {
        for k in KINDS {
            for (i, &x) in k.xs.iter().enumerate() {
                let n = iters(k, x);
                // -F: perftest's CPU-clock check fails under TCG.
                // One QP is both tools' default: no -q, so that a stack
                // without -q still has its single-QP point.
                let args = if k.qps && x > 1 {
                    format!("-d rxe0 -x 1 -F -s {RATE_SIZE} -n {n} -q {x}")
                } else if k.qps {
                    format!("-d rxe0 -x 1 -F -s {RATE_SIZE} -n {n}")
                } else {
                    format!("-d rxe0 -x 1 -F -s {x} -n {n}")
                };
                let pt = format!(
                    "chart {} perftest {x} {round} {} {args}\n",
                    k.key, k.perftest
                );
                let rv = format!(
                    "chart {} rverbs {x} {round} $B perf {} {args}\n",
                    k.key, k.rverbs
                );
                // Which stack goes first alternates by point and by round.
                if (round as usize + i).is_multiple_of(2) {
                    s.push_str(&pt);
                    s.push_str(&rv);
                } else {
                    s.push_str(&rv);
                    s.push_str(&pt);
                }
            }
        }
    }
    s.push_str("echo \"CHART-SECONDS $(( $(date +%s) - chart_t0 ))\"\n");
    s
}

/// perftest's `--out_json` file is JSON-like, not JSON (bare keys, trailing
/// commas, one `key: value,` a line): its `results` blocks, key -> value.
pub fn results_blocks(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = Vec::new();
    let mut cur: Option<BTreeMap<String, String>> = None;
    for l in text.lines().map(str::trim) {
        if let Some(name) = l.strip_suffix('{') {
            if let Some(done) = cur.take() {
                out.push(done);
            }
            if name.trim().trim_end_matches(':').trim() == "results" {
                cur = Some(BTreeMap::new());
            }
        } else if l.starts_with('}') {
            if let Some(done) = cur.take() {
                out.push(done);
            }
        } else if let (Some(m), Some((k, v))) = (cur.as_mut(), l.split_once(':')) {
            let v = v.trim().trim_end_matches(',').trim().trim_matches('"');
            m.insert(k.trim().to_string(), v.to_string());
        }
    }
    out.extend(cur);
    out
}

/// What the log holds: (chart, stack, x) -> each successful round's figure
/// (in the plotted unit), failed rounds counted, and the charts' duration.
#[derive(Default, Debug)]
pub struct Runs {
    pub ok: BTreeMap<(String, Stack, u32), Vec<f64>>,
    pub failed: BTreeMap<(String, Stack, u32), u32>,
    pub seconds: Option<u64>,
}

impl Runs {
    pub fn is_empty(&self) -> bool {
        self.ok.is_empty() && self.failed.is_empty()
    }

    pub fn failures(&self) -> u32 {
        self.failed.values().sum()
    }
}

pub fn parse(lines: &[String]) -> Runs {
    type Id = (String, Stack, u32, u32);
    let id = |w: &[&str]| -> Option<Id> {
        Some((
            w.first()?.to_string(),
            Stack::parse(w.get(1)?)?,
            w.get(2)?.parse().ok()?,
            w.get(3)?.parse().ok()?,
        ))
    };
    let mut json: BTreeMap<Id, String> = BTreeMap::new();
    let mut runs = Runs::default();
    for l in lines {
        if let Some(rest) = l.strip_prefix("CHART-JSON ") {
            let w: Vec<&str> = rest.splitn(5, ' ').collect();
            if let Some(k) = id(&w) {
                let e = json.entry(k).or_default();
                e.push_str(w.get(4).copied().unwrap_or(""));
                e.push('\n');
            }
        } else if let Some(rest) = l.strip_prefix("CHART-FAILED ") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            if let Some((c, s, x, _)) = id(&w) {
                *runs.failed.entry((c, s, x)).or_default() += 1;
            }
        } else if let Some(v) = l.strip_prefix("CHART-SECONDS ") {
            runs.seconds = v.trim().parse().ok();
        }
    }
    for ((c, s, x, _), text) in json {
        let kind = KINDS.iter().find(|k| k.key == c);
        let v = kind.and_then(|k| {
            let b = results_blocks(&text).pop()?;
            // A size run must report the size it was asked for.
            if !k.qps && b.get("MsgSize")?.parse::<u32>().ok()? != x {
                return None;
            }
            let v: f64 = b.get(k.metric)?.parse().ok()?;
            v.is_finite().then_some(v * k.scale)
        });
        match v {
            Some(v) => runs.ok.entry((c, s, x)).or_default().push(v),
            None => *runs.failed.entry((c, s, x)).or_default() += 1,
        }
    }
    runs
}

fn range(v: &[f64]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, super::median(v), hi))
}

/// The chart of `k` from `runs`.
pub fn chart(k: &Kind, runs: &Runs, rounds: u32) -> Chart {
    let series = [
        (
            Stack::Perftest,
            format!("perftest 4.5 {}", k.perftest),
            svg::BLUE_ISH,
        ),
        (
            Stack::Rverbs,
            format!("rverbs perf {}", k.rverbs),
            svg::RED_ISH,
        ),
    ]
    .into_iter()
    .map(|(stack, label, color)| Series {
        label,
        color,
        points: k
            .xs
            .iter()
            .map(|&x| {
                let v = runs.ok.get(&(k.key.to_string(), stack, x));
                (f64::from(x), v.and_then(|v| range(v)))
            })
            .collect(),
    })
    .collect();
    Chart {
        title: format!("{} — rxe under QEMU TCG, wall-clock, not a verdict", k.title),
        note: format!(
            "point: median of {rounds} interleaved rounds; bar: min–max; one VM, client and server on rxe0; the guest's 4 ms tick dominates"
        ),
        x_label: k.x_label.into(),
        y_label: k.y_label.into(),
        log_y: k.log_y,
        xs: k.xs.iter().map(|&x| f64::from(x)).collect(),
        series,
    }
}

/// Draws every chart into `out_dir` and returns the report's section: the
/// links and the figures behind each point.
pub fn section(out_dir: &Path, runs: &Runs, rounds: u32) -> Result<String, String> {
    let mut md = format!(
        "\n{BEGIN}\n\n**Charts** (perftest 4.5 vs `rverbs perf`, rxe under QEMU TCG: wall-clock, not a verdict; median of {rounds} interleaved rounds, min–max):\n\n"
    );
    for k in KINDS {
        let file = format!("{}.svg", k.key);
        let doc = svg::render(&chart(k, runs, rounds))?;
        std::fs::write(out_dir.join(&file), doc).map_err(|e| format!("{file}: {e}"))?;
        let _ = writeln!(md, "- [{}]({file})", k.title);
    }
    for k in KINDS {
        let unit = k.unit;
        let _ = write!(
            md,
            "\n| {} (`{}` / `rverbs perf {}`) | perftest: {unit} | rverbs: {unit} |\n| --- | --- | --- |\n",
            k.title, k.perftest, k.rverbs
        );
        for &x in k.xs {
            let cell = |s: Stack| {
                let key = (k.key.to_string(), s, x);
                let bad = runs.failed.get(&key).copied().unwrap_or(0);
                let fig = runs.ok.get(&key).and_then(|v| range(v));
                let mut c = match fig {
                    Some((lo, med, hi)) => format!("{med:.2} ({lo:.2}–{hi:.2})"),
                    None => "failed".into(),
                };
                if bad > 0 && fig.is_some() {
                    let _ = write!(c, ", {bad} of {rounds} failed");
                }
                c
            };
            let label = match x {
                x if k.qps => format!("-q {x}"),
                x if x >= 1024 => format!("{} KiB", x / 1024),
                x => format!("{x} B"),
            };
            let _ = writeln!(
                md,
                "| {label} | {} | {} |",
                cell(Stack::Perftest),
                cell(Stack::Rverbs)
            );
        }
    }
    if runs.failures() > 0 {
        let _ = writeln!(
            md,
            "\n{} chart runs failed (a cross on the chart's bottom edge where every round of a point failed); their output is in the log.",
            runs.failures()
        );
    }
    if let Some(s) = runs.seconds {
        let _ = writeln!(md, "\nThe chart runs took {s} s in the VM.");
    }
    md.push_str(END);
    md.push('\n');
    Ok(md)
}

const BEGIN: &str = "<!-- charts -->";
const END: &str = "<!-- /charts -->";

/// `report` with its charts section replaced by `charts` (or, without one,
/// `charts` inserted before `before` if present, else appended).
pub fn splice(report: &str, charts: &str, before: &str) -> String {
    if let (Some(a), Some(b)) = (report.find(BEGIN), report.find(END)) {
        if a < b {
            let tail = &report[b + END.len()..];
            return format!("{}{}{}", report[..a].trim_end(), charts.trim_end(), tail);
        }
    }
    match report.find(before) {
        Some(i) => format!(
            "{}\n{}\n{}",
            report[..i].trim_end(),
            charts.trim_end(),
            &report[i..]
        ),
        None => format!("{}{}", report.trim_end(), charts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perftest 4.5's own file for `ib_write_bw -s 64 --out_json`.
    const PERFTEST_BW: &str = "{\ntest_info: {\ntest: RDMA_Write_BW_Test,\nDevice: \"rxe0\",\nNumber_of_qps: 1,\nTX_depth : 20,\nMtu: 1024,\n},\nresults: {\nMsgSize: 64,\nn_iterations: 20,\nBW_peak: 28.27,\nBW_average: 27.5,\nMsgRate: 0.040061,\n},\n}\n";

    fn log(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| s.to_string()).collect()
    }

    fn json_lines(id: &str, text: &str) -> Vec<String> {
        text.lines()
            .map(|l| format!("CHART-JSON {id} {l}"))
            .collect()
    }

    #[test]
    fn perftest_json_results_block() {
        let b = results_blocks(PERFTEST_BW);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0]["BW_average"], "27.5");
        assert_eq!(b[0]["MsgSize"], "64");
        assert!(!b[0].contains_key("Device"));
        let lat = "results: {\nMsgSize: 2,\nt_typical: 61.94,\npercentile_99.9: 2335.31,\n},\n";
        assert_eq!(results_blocks(lat)[0]["percentile_99.9"], "2335.31");
        assert!(results_blocks("garbage\n}}{").is_empty());
    }

    #[test]
    fn log_lines_make_points_and_failures() {
        let bw128 = PERFTEST_BW.replace("MsgSize: 64", "MsgSize: 128");
        let mut lines = json_lines("bandwidth perftest 128 0", &bw128);
        lines.extend(json_lines(
            "bandwidth perftest 128 1",
            &bw128.replace("27.5", "30.5"),
        ));
        // The wrong size, a missing figure: failed rounds, not points.
        lines.extend(json_lines("bandwidth rverbs 128 0", PERFTEST_BW));
        lines.extend(json_lines(
            "latency rverbs 2 0",
            &PERFTEST_BW.replace("MsgSize: 64", "MsgSize: 2"),
        ));
        lines.extend(json_lines("msg_rate_qps perftest 4 0", PERFTEST_BW));
        lines.extend(log(&[
            "CHART-FAILED msg_rate_qps rverbs 4 0",
            "CHART-FAILED msg_rate_qps rverbs 4 1",
            "    rverbs: error: unexpected argument '-q'",
            "CHART-FAILED nonsense",
            "CHART-SECONDS 170",
        ]));
        let r = parse(&lines);
        let k = |c: &str, s, x| (c.to_string(), s, x);
        assert_eq!(
            r.ok[&k("bandwidth", Stack::Perftest, 128)],
            vec![27.5, 30.5]
        );
        assert_eq!(r.failed[&k("latency", Stack::Rverbs, 2)], 1);
        assert_eq!(r.failed[&k("bandwidth", Stack::Rverbs, 128)], 1);
        assert_eq!(r.ok[&k("msg_rate_qps", Stack::Perftest, 4)], vec![40.061]);
        assert_eq!(r.failed[&k("msg_rate_qps", Stack::Rverbs, 4)], 2);
        assert_eq!((r.failures(), r.seconds), (4, Some(170)));

        let dir = std::env::temp_dir().join(format!("xtask-charts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let md = section(&dir, &r, 3).unwrap();
        for k in KINDS {
            let svg = std::fs::read_to_string(dir.join(format!("{}.svg", k.key))).unwrap();
            assert!(
                svg.contains(&format!("perftest 4.5 {}", k.perftest)),
                "{}",
                k.key
            );
            assert!(
                svg.contains(&format!("rverbs perf {}", k.rverbs)),
                "{}",
                k.key
            );
            assert!(svg.contains("not a verdict"));
            assert!(svg.contains(svg::FAILED_LABEL), "{}", k.key);
            assert!(md.contains(&format!("]({}.svg)", k.key)));
        }
        assert!(
            md.contains("| 128 B | 30.50 (27.50–30.50) | failed |"),
            "{md}"
        );
        assert!(
            md.contains("| -q 4 | 40.06 (40.06–40.06) | failed |"),
            "{md}"
        );
        assert!(
            md.contains("4 chart runs failed") && md.contains("took 170 s"),
            "{md}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn script_interleaves_both_stacks_with_json_out() {
        let s = script(2);
        let runs = s.lines().filter(|l| l.starts_with("chart ")).count();
        let points: usize = KINDS.iter().map(|k| k.xs.len()).sum();
        assert_eq!(runs, 2 * 2 * points);
        assert!(s.contains("chart latency perftest 2 0 ib_write_lat -d rxe0 -x 1 -F -s 2 -n 300\nchart latency rverbs 2 0 $B perf write-lat"));
        assert!(s.contains("chart latency rverbs 2 1 $B perf write-lat -d rxe0 -x 1 -F -s 2 -n 300\nchart latency perftest 2 1"));
        assert!(s.contains(
            "chart msg_rate_qps rverbs 8 0 $B perf write-bw -d rxe0 -x 1 -F -s 64 -n 1000 -q 8"
        ));
        assert!(s.contains("--out_json --out_json_file"));
    }

    #[test]
    fn charts_section_is_replaced_not_repeated() {
        let new = format!("\n{BEGIN}\nnew\n{END}\n");
        let first = splice("| a |\n\n| mlx5 x |\n", &new, "| mlx5");
        assert!(
            first.starts_with("| a |") && first.contains("new") && first.ends_with("| mlx5 x |\n"),
            "{first}"
        );
        let again = splice(&first, &new.replace("new", "newer"), "| mlx5");
        assert_eq!(again.matches(BEGIN).count(), 1);
        assert!(
            again.contains("newer")
                && !again.contains("\nnew\n")
                && again.ends_with("| mlx5 x |\n"),
            "{again}"
        );
        assert!(splice("", &new, "| mlx5").contains("new"));
    }
}

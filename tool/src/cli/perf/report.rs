//! perftest's report lines: the test's information block, the address
//! lines, and the result tables (the same headers, columns and JSON keys,
//! so that scripts that parse perftest's output parse ours).

use super::args::{Conn, PerfArgs};
use super::plan::{Plan, CQ_MOD, RX_DEPTH};
use super::script::{title, Shape};
use rverbs_tool::wire::perf::{BwReport, Peer};
use std::fmt::Write as _;

pub const LINE: &str =
    "---------------------------------------------------------------------------------------";
pub const BW_HEADER_MB: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
pub const BW_HEADER_GB: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

/// What the information block shows.
pub struct Info<'a> {
    /// "RDMA_Write BW", "Send Latency", ...
    pub title: String,
    pub device: &'a str,
    pub qps: u32,
    /// "RC", "UC" or "UD".
    pub conn: &'static str,
    /// Whether this side sends (a client, or either side with -b): then
    /// the TX depth is shown.
    pub tx: bool,
    pub tx_depth: u32,
    pub rx_depth: Option<u32>,
    pub post_list: u32,
    pub cq_mod: Option<u32>,
    pub mtu_bytes: u32,
    pub ethernet: bool,
    pub gid_index: Option<u32>,
    /// `Max inline data` for sends and writes, `Outstand reads` otherwise.
    pub inline_or_reads: Result<u32, u32>,
    pub events: bool,
    /// -R: QPs and exchange over rdma_cm.
    pub rdma_cm: bool,
    pub client: bool,
}

impl<'a> Info<'a> {
    /// What the block shows for `a`'s run on `device`: `inline` is the
    /// inline size the QPs were granted, `out_reads` our `OUT_READS`.
    pub fn new(
        a: &PerfArgs,
        plan: &Plan,
        device: &'a str,
        ethernet: bool,
        gid_index: Option<u32>,
        inline: u32,
        out_reads: u16,
    ) -> Info<'a> {
        let send = matches!(plan.spec.shape, Shape::SendBw | Shape::SendLat);
        let client = plan.client;
        Info {
            title: title(a),
            device,
            qps: a.qps,
            conn: match a.conn {
                Conn::Rc => "RC",
                Conn::Uc => "UC",
                Conn::Ud => "UD",
            },
            tx: client || a.duplex,
            tx_depth: a.tx_depth(),
            rx_depth: (send && (!client || a.duplex)).then_some(RX_DEPTH),
            post_list: a.batch,
            cq_mod: (!a.test.is_lat()).then_some(if a.timed() {
                CQ_MOD
            } else {
                CQ_MOD.min(a.iters())
            }),
            mtu_bytes: plan.mtu_bytes(),
            ethernet,
            gid_index,
            inline_or_reads: if plan.spec.reads {
                Err(u32::from(out_reads))
            } else {
                Ok(inline)
            },
            events: a.events,
            rdma_cm: a.rdma_cm,
            client,
        }
    }
}

/// perftest's information block, from its first line to the closing one.
pub fn info(i: &Info<'_>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{LINE}");
    let _ = writeln!(s, "                    {} Test", i.title);
    if i.events {
        let _ = writeln!(s, " Test with events. Using {}_comp0", i.device);
    }
    let _ = writeln!(s, " Dual-port       : OFF\t\tDevice         : {}", i.device);
    let _ = writeln!(s, " Number of qps   : {}\t\tTransport type : IB", i.qps);
    let _ = writeln!(s, " Connection type : {}\t\tUsing SRQ      : OFF", i.conn);
    let _ = writeln!(s, " PCIe relax order: Unsupported");
    let _ = writeln!(s, " ibv_wr* API     : OFF");
    if i.tx {
        let _ = writeln!(s, " TX depth        : {}", i.tx_depth);
    }
    if i.post_list > 1 {
        let _ = writeln!(s, " Post List       : {}", i.post_list);
    }
    if let Some(rx) = i.rx_depth {
        let _ = writeln!(s, " RX depth        : {rx}");
    }
    if let Some(m) = i.cq_mod {
        let _ = writeln!(s, " CQ Moderation   : {m}");
    }
    let _ = writeln!(s, " Mtu             : {}[B]", i.mtu_bytes);
    let link = if i.ethernet { "Ethernet" } else { "IB" };
    let _ = writeln!(s, " Link type       : {link}");
    if let Some(g) = i.gid_index {
        let _ = writeln!(s, " GID index       : {g}");
    }
    match i.inline_or_reads {
        Ok(n) => {
            let _ = writeln!(s, " Max inline data : {n}[B]");
        }
        Err(n) => {
            let _ = writeln!(s, " Outstand reads  : {n}");
        }
    }
    if i.rdma_cm {
        let _ = writeln!(s, " rdma_cm QPs\t : ON");
        let _ = write!(s, " Data ex. method : rdma_cm");
        if !i.client {
            let _ = writeln!(s, "\n{LINE}");
            let _ = write!(s, " Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP");
        }
        let _ = writeln!(s);
    } else {
        let _ = writeln!(s, " rdma_cm QPs\t : OFF");
        let _ = writeln!(s, " Data ex. method : Ethernet");
    }
    let _ = write!(s, "{LINE}");
    s
}

/// The header of the result table.
pub fn header(a: &PerfArgs) -> &'static str {
    if a.test.is_lat() {
        LAT_HEADER
    } else if a.report_gbits {
        BW_HEADER_GB
    } else {
        BW_HEADER_MB
    }
}

/// Everything before the results: the information block, both sides'
/// address lines (`addr_fields` as [`address`]'s `rdma`), and the table's
/// header.
pub fn head(i: &Info<'_>, mine: &[Peer], peers: &[Peer], addr_fields: u8, header: &str) -> String {
    let mut s = info(i);
    for m in mine {
        let _ = write!(s, "\n{}", address("local", m, addr_fields));
    }
    for p in peers {
        let _ = write!(s, "\n{}", address("remote", p, addr_fields));
    }
    let _ = write!(s, "\n{LINE}\n{header}");
    s
}

/// C's `%#0Nx`: `0x` and zero-padding to `width` in all, but a bare zero
/// has no `0x`.
fn c_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("{v:#0width$x}")
    }
}

/// One side's address lines (`side` is "local" or "remote"); `rdma`: 0 no
/// rkey (send, atomic), 1 rkey and address (write), 2 also the reads.
pub fn address(side: &str, p: &Peer, rdma: u8) -> String {
    let mut s = format!(
        " {side} address: LID {} QPN {} PSN {}",
        c_hex(p.lid.into(), 4),
        c_hex(p.qpn.into(), 6),
        c_hex(p.psn.into(), 6)
    );
    if rdma == 2 {
        let _ = write!(s, " OUT {}", c_hex(p.out_reads.into(), 4));
    }
    if rdma >= 1 {
        let _ = write!(
            s,
            " RKey {} VAddr {}",
            c_hex(p.rkey.into(), 8),
            c_hex(p.addr, 16)
        );
    }
    if let Some(g) = p.gid {
        // perftest prints the GID's bytes in decimal, two digits at least.
        let bytes: Vec<String> = g.iter().map(|b| format!("{b:02}")).collect();
        let _ = write!(s, "\n GID: {}", bytes.join(":"));
    }
    s
}

/// A bandwidth result line, as perftest's `REPORT_FMT`.
pub fn bw_line(r: &BwReport) -> String {
    format!(
        " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
        r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
    )
}

/// The bandwidth figures in the report's units: MB/s (2^20 bytes), or
/// Gb/s (10^9 bits) with `gbits`.
pub fn bw_report(
    size: u64,
    iters: u64,
    secs: f64,
    peak_bytes_per_sec: f64,
    gbits: bool,
) -> BwReport {
    let avg = size as f64 * iters as f64 / secs;
    let unit = if gbits { 125_000_000.0 } else { 1_048_576.0 };
    BwReport {
        size,
        iters,
        bw_peak: peak_bytes_per_sec.max(avg) / unit,
        bw_avg: avg / unit,
        msg_rate: iters as f64 / secs / 1e6,
    }
}

/// The JSON-ish results block of perftest's `--out_json` for a bandwidth
/// run (perftest's keys and layout: bare keys, trailing commas).
pub fn bw_json(r: &BwReport) -> String {
    format!(
        "results: {{\nMsgSize: {},\nn_iterations: {},\nBW_peak: {:.2},\nBW_average: {:.2},\nMsgRate: {:.6},\n}},\n",
        r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
    )
}

/// A bandwidth run's result line and `--out_json` block.
pub fn bw_result(r: &BwReport) -> (String, String) {
    (bw_line(r), bw_json(r))
}

/// A latency run's result line and `--out_json` block (none without
/// samples); sorts the samples.
pub fn lat_result(size: u32, samples: &mut [f64]) -> (String, String) {
    match latency_stats(samples) {
        Some(s) => (
            lat_line(size.into(), samples.len(), &s),
            lat_json(size.into(), samples.len(), &s),
        ),
        None => (format!(" {size:<7} 0          (no samples)"), String::new()),
    }
}

/// Latency statistics over per-iteration samples (microseconds).
#[derive(Debug, PartialEq)]
pub struct Stats {
    pub min: f64,
    pub max: f64,
    pub typical: f64,
    pub avg: f64,
    pub stdev: f64,
    pub p99: f64,
    pub p999: f64,
}

/// A latency result line, as perftest's `REPORT_FMT_LAT`.
pub fn lat_line(size: u64, n: usize, s: &Stats) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        size, n, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )
}

/// The results block of `--out_json` for a latency run.
pub fn lat_json(size: u64, n: usize, s: &Stats) -> String {
    format!(
        "results: {{\nMsgSize: {size},\nn_iterations: {n},\nt_min: {:.2},\nt_max: {:.2},\nt_typical: {:.2},\nt_avg: {:.2},\nt_stdev: {:.2},\npercentile_99: {:.2},\npercentile_99.9: {:.2},\n}},\n",
        s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
    )
}

/// Sorts the samples and computes the statistics; `None` without samples.
pub fn latency_stats(samples: &mut [f64]) -> Option<Stats> {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len();
    let (&min, &max) = (samples.first()?, samples.last()?);
    let pct = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    let avg = samples.iter().sum::<f64>() / n as f64;
    let var = samples.iter().map(|s| (s - avg) * (s - avg)).sum::<f64>() / n as f64;
    Some(Stats {
        min,
        max,
        typical: samples[n / 2],
        avg,
        stdev: var.sqrt(),
        p99: pct(0.99),
        p999: pct(0.999),
    })
}

/// perftest's `--out_json` file: its test information block, then the
/// results blocks (`results`).
pub fn json(i: &Info<'_>, results: &str) -> String {
    let mut s = String::from("{\ntest_info: {\n");
    let _ = writeln!(s, "test: {}_Test,", i.title.replace(' ', "_"));
    let _ = write!(
        s,
        "Dual_port: OFF,\nDevice: \"{}\",\nNumber_of_qps: {},\nTransport_type: IB,\nConnection_type: {},\nUsing_SRQ: OFF,\n",
        i.device, i.qps, i.conn
    );
    s.push_str(" PCIe_relax_order: Unsupported,\nibv_wr_API: OFF,\n");
    if i.tx {
        let _ = writeln!(s, "TX_depth : {},", i.tx_depth);
    }
    if i.post_list > 1 {
        let _ = writeln!(s, "Post_List: {},", i.post_list);
    }
    if let Some(rx) = i.rx_depth {
        let _ = writeln!(s, "RX_depth: {rx},");
    }
    if let Some(m) = i.cq_mod {
        let _ = writeln!(s, "CQ_Moderation: {m},");
    }
    let link = if i.ethernet { "Ethernet" } else { "IB" };
    let _ = write!(s, "Mtu: {},\nLink_type: {link},\n", i.mtu_bytes);
    if let Some(g) = i.gid_index {
        let _ = writeln!(s, "GID_index: {g},");
    }
    match i.inline_or_reads {
        Ok(n) => {
            let _ = writeln!(s, "Max_inline_data: {n},");
        }
        Err(n) => {
            let _ = writeln!(s, "Outstand_reads: {n},");
        }
    }
    s.push_str(if i.rdma_cm {
        "rdma_cm_QPs: ON,\nData_ex_method: rdma_cm,\n},\n"
    } else {
        "rdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\n"
    });
    s.push_str(results);
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_none_one_and_many_samples() {
        assert_eq!(latency_stats(&mut []), None);
        let one = latency_stats(&mut [3.0]).unwrap();
        assert_eq!(
            (one.min, one.max, one.typical, one.p999),
            (3.0, 3.0, 3.0, 3.0)
        );
        let mut v: Vec<f64> = (1..=1000).rev().map(f64::from).collect();
        let s = latency_stats(&mut v).unwrap();
        assert_eq!((s.min, s.max, s.typical), (1.0, 1000.0, 501.0));
        assert_eq!((s.p99, s.p999), (990.0, 999.0));
    }

    #[test]
    fn lines_are_laid_out_as_perftests() {
        // perftest 6.06's own line for these figures.
        let r = BwReport {
            size: 65536,
            iters: 200,
            bw_peak: 35.03,
            bw_avg: 13.05,
            msg_rate: 0.000209,
        };
        assert_eq!(
            bw_line(&r),
            " 65536      200              35.03              13.05  \t\t   0.000209"
        );
        let p = Peer {
            lid: 0,
            out_reads: 0,
            qpn: 0x12,
            psn: 0xa5099b,
            rkey: 0x2eb,
            addr: 0x556d_a9bb_f000,
            gid: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 77, 0, 1]),
            srqn: 0,
        };
        assert_eq!(
            address("local", &p, 1),
            " local address: LID 0000 QPN 0x0012 PSN 0xa5099b RKey 0x0002eb VAddr 0x00556da9bbf000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:77:00:01"
        );
    }

    fn plan(line: &str, mtu: u8) -> (PerfArgs, Plan) {
        let a = super::super::plan::tests::args(line);
        let p = Plan::new(&a, mtu, 4096);
        (a, p)
    }

    /// What the information block shows, by test, role and flags.
    #[test]
    fn the_information_block_follows_the_test_and_the_role() {
        let (a, p) = plan("send-bw -b -n 50 -I 64", 3);
        let i = Info::new(&a, &p, "rxe0", true, Some(1), 60, 16);
        assert_eq!(i.title, "Send Bidirectional BW");
        assert_eq!((i.tx, i.rx_depth, i.cq_mod), (true, Some(512), Some(50)));
        assert_eq!((i.mtu_bytes, i.inline_or_reads), (1024, Ok(60)));
        // A send-bw client without -b receives nothing.
        let (a, p) = plan("send-bw -D 4 10.0.0.1", 3);
        let i = Info::new(&a, &p, "rxe0", true, None, 0, 16);
        assert_eq!((i.tx, i.rx_depth, i.cq_mod), (true, None, Some(100)));
        // Reads and atomics show the outstanding reads; latency no CQ
        // moderation; a server of a one-sided test no TX depth.
        let (a, p) = plan("read-lat -c RC", 1);
        let i = Info::new(&a, &p, "mlx5_0", false, None, 0, 16);
        assert_eq!((i.tx, i.cq_mod, i.inline_or_reads), (false, None, Err(16)));
        assert_eq!((i.conn, i.mtu_bytes, i.client), ("RC", 256, false));
        let (a, p) = plan("send-lat -c UD 10.0.0.1", 3);
        let i = Info::new(&a, &p, "rxe0", true, None, 0, 16);
        assert_eq!((i.conn, i.rx_depth, i.client), ("UD", None, true));
    }

    #[test]
    fn the_json_file_is_laid_out_as_perftests() {
        let (a, p) = plan("write-bw -q 2 -l 4 -R 10.0.0.1", 3);
        let i = Info::new(&a, &p, "rxe0", true, Some(1), 0, 16);
        let r = BwReport {
            size: 65536,
            iters: 10000,
            bw_peak: 1.5,
            bw_avg: 1.25,
            msg_rate: 0.00002,
        };
        assert_eq!(
            json(&i, &bw_json(&r)),
            "{\ntest_info: {\ntest: RDMA_Write_Post_List_BW_Test,\nDual_port: OFF,\n\
             Device: \"rxe0\",\nNumber_of_qps: 2,\nTransport_type: IB,\nConnection_type: RC,\n\
             Using_SRQ: OFF,\n PCIe_relax_order: Unsupported,\nibv_wr_API: OFF,\n\
             TX_depth : 128,\nPost_List: 4,\nCQ_Moderation: 100,\nMtu: 1024,\n\
             Link_type: Ethernet,\nGID_index: 1,\nMax_inline_data: 0,\nrdma_cm_QPs: ON,\n\
             Data_ex_method: rdma_cm,\n},\nresults: {\nMsgSize: 65536,\nn_iterations: 10000,\n\
             BW_peak: 1.50,\nBW_average: 1.25,\nMsgRate: 0.000020,\n},\n}\n"
        );
    }

    #[test]
    fn the_head_is_info_addresses_line_and_header() {
        let (a, p) = plan("write-bw", 3);
        let i = Info::new(&a, &p, "rxe0", false, None, 0, 16);
        let me = Peer {
            lid: 1,
            out_reads: 16,
            qpn: 0x11,
            psn: 0x22,
            rkey: 0x33,
            addr: 0x44,
            gid: None,
            srqn: 0,
        };
        let h = head(&i, &[me], &[me], 1, header(&a));
        let lines: Vec<&str> = h.lines().collect();
        let n = lines.len();
        assert_eq!(&lines[..n - 4].join("\n"), &info(&i));
        assert_eq!(lines[n - 4], address("local", &me, 1));
        assert_eq!(lines[n - 3], address("remote", &me, 1));
        assert_eq!(lines[n - 2..], [LINE, BW_HEADER_MB]);
        assert_eq!(header(&plan("write-bw --report_gbits", 3).0), BW_HEADER_GB);
        assert_eq!(header(&plan("read-lat", 3).0), LAT_HEADER);
    }

    #[test]
    fn results_without_samples_say_so() {
        assert_eq!(
            lat_result(64, &mut []),
            (
                " 64      0          (no samples)".to_string(),
                String::new()
            )
        );
        let (line, json) = lat_result(2, &mut [1.0, 3.0, 2.0]);
        assert!(line.starts_with(" 2       3          1.00"), "{line}");
        assert!(json.starts_with("results: {\nMsgSize: 2,\nn_iterations: 3,\nt_min: 1.00,"));
    }
}

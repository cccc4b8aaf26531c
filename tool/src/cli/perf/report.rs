//! perftest's report lines: the test's information block, the address
//! lines, and the result tables (the same headers, columns and JSON keys,
//! so that scripts that parse perftest's output parse ours).

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
}

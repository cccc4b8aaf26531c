//! The command line of `rverbs perf`: perftest's flags and defaults, and
//! the checks that need no device (those against the device's limits are
//! [`super::plan::cq_entries`]).

use super::super::wait::{bad_value, parse_timeout, Timeout, DEFAULT_SECS};
use clap::{Args, ValueEnum};
use rverbs::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum Conn {
    Rc,
    Uc,
    Ud,
}

/// Which operation, and whether latency or bandwidth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Test {
    /// SEND ping-pong; half the round trip (`ib_send_lat`).
    SendLat,
    /// RDMA WRITE ping-pong (each side polls its buffer); half the round
    /// trip (`ib_write_lat`).
    WriteLat,
    /// RDMA READ, one at a time; the full round trip (`ib_read_lat`).
    ReadLat,
    /// Fetch-and-add, one at a time; the full round trip (`ib_atomic_lat`).
    AtomicLat,
    /// SEND stream (`ib_send_bw`).
    SendBw,
    /// RDMA WRITE stream (`ib_write_bw`).
    WriteBw,
    /// RDMA READ stream (`ib_read_bw`).
    ReadBw,
    /// Fetch-and-add stream (`ib_atomic_bw`).
    AtomicBw,
}

impl Test {
    pub fn is_lat(self) -> bool {
        matches!(
            self,
            Test::SendLat | Test::WriteLat | Test::ReadLat | Test::AtomicLat
        )
    }
    pub fn is_atomic(self) -> bool {
        matches!(self, Test::AtomicLat | Test::AtomicBw)
    }
}

#[derive(Args, Clone)]
pub struct PerfArgs {
    /// The test.
    #[arg(value_enum)]
    pub test: Test,
    /// RDMA device (default: the first).
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    /// Device port.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// GID index (default on RoCE: the best one, IPv4 and RoCE v2 first, as
    /// perftest chooses).
    #[arg(short = 'x', long = "gid-index")]
    pub gid_idx: Option<u32>,
    /// Message size in bytes (perftest's defaults: 65536 for bandwidth, 2
    /// for latency, 8 for atomics).
    #[arg(short = 's', long)]
    pub size: Option<u32>,
    /// Run every size from 2 bytes to 8 MiB (powers of two; UD: up to
    /// the MTU).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// The transport: RC, UC (send and write tests) or UD (send tests).
    #[arg(short = 'c', long = "connection", value_enum, default_value_t = Conn::Rc)]
    pub conn: Conn,
    /// QPs (bandwidth tests): each runs the iterations, round robin, on
    /// one CQ.
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: u32,
    /// Bidirectional (bandwidth tests): both sides send, and each reports
    /// the sum of both directions.
    #[arg(short = 'b', long = "bidirectional")]
    pub duplex: bool,
    /// Run for this many seconds instead of a number of iterations
    /// (bandwidth tests), measuring between the margins.
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<u32>,
    /// With -D: seconds at each end not measured (default: a quarter of
    /// the duration).
    #[arg(short = 'f', long = "margin")]
    pub margin: Option<u32>,
    /// Connect the QPs through rdma_cm, and run the exchange over an
    /// rdma_cm connection too (no TCP), as perftest's -R (RC only here).
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Run until killed, printing the bandwidth of each -D period (default
    /// 5 s).
    #[arg(long = "run_infinitely")]
    pub run_infinitely: bool,
    /// Iterations (perftest's defaults: 5000 for write-bw, 1000 otherwise).
    #[arg(short = 'n', long)]
    pub iters: Option<u32>,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub port: u16,
    /// Work requests posted per doorbell (bandwidth tests).
    #[arg(short = 'l', long = "post_list", alias = "batch", default_value_t = 1)]
    pub batch: u32,
    /// Outstanding work requests (default: 128 for bandwidth, 1 for
    /// latency).
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Sleep on completion events instead of polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Copy small payloads into the WQE (sends and writes) when the QP allows.
    #[arg(
        short = 'I',
        long = "inline_size",
        alias = "inline-size",
        default_value_t = 0
    )]
    pub inline: u32,
    /// Path MTU in bytes (256, 512, 1024, 2048 or 4096; default and upper
    /// limit: the port's active MTU). The smaller of the two sides' is used.
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    /// Accepted for perftest's sake (there: do not fail when the CPU clock
    /// rate cannot be measured); rverbs times with the monotonic clock, so
    /// there is nothing to check.
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Report bandwidth in Gb/s instead of MB/s.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Also write the report to a JSON file (perftest's keys and layout).
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// The JSON file's name.
    #[arg(long = "out_json_file", default_value = "perftest_out.json")]
    pub out_json_file: String,
    /// Give up after this many seconds without progress: no answer on the
    /// TCP exchange, no completion, no event, no byte written by the peer.
    /// The passive side of a one-sided test and a server waiting for its
    /// client wait without limit (perftest's exchange has no heartbeat).
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    pub timeout: Timeout,
    /// The server to connect to (none: be the server).
    pub server: Option<String>,
}

impl PerfArgs {
    /// The message size, perftest's default if none was given.
    pub fn size(&self) -> u32 {
        match self.size {
            _ if self.test.is_atomic() => 8,
            Some(s) => s,
            None if self.test.is_lat() => 2,
            None => 65536,
        }
    }
    pub fn iters(&self) -> u32 {
        self.iters.unwrap_or(if self.test == Test::WriteBw {
            5000
        } else {
            1000
        })
    }
    pub fn tx_depth(&self) -> u32 {
        self.tx_depth
            .unwrap_or(if self.test.is_lat() { 1 } else { 128 })
    }
    /// The sizes to run: one, or all of `-a` (UD: up to `mtu` bytes).
    pub fn sizes(&self, mtu: u32) -> Vec<u32> {
        if self.all && !self.test.is_atomic() {
            let top = if self.conn == Conn::Ud {
                mtu.trailing_zeros() + 1
            } else {
                24
            };
            (1..top).map(|i| 1u32 << i).collect()
        } else {
            vec![self.size()]
        }
    }
    /// Whether the test runs by time (`-D` or `--run_infinitely`).
    pub fn timed(&self) -> bool {
        self.duration.is_some() || self.run_infinitely
    }
    /// The duration's (sample, margin): perftest's default duration is 5 s
    /// and its default margin a quarter of the duration.
    pub fn duration_and_margin(&self) -> (u32, u32) {
        let d = self.duration.unwrap_or(5);
        (d, self.margin.unwrap_or(d / 4))
    }
}

/// The checks that need no device, before anything is opened.
pub fn check_args(a: &PerfArgs) -> Result<()> {
    if a.test.is_atomic() && a.size.is_some_and(|s| s != 8) {
        return Err(bad_value("atomics move 8 bytes: use -s 8"));
    }
    if a.iters() < 5 {
        return Err(bad_value(format!(
            "-n {}: perftest needs at least 5 iterations",
            a.iters()
        )));
    }
    if a.test == Test::WriteLat && a.size() == 0 {
        return Err(bad_value(
            "-s 0: write-lat needs at least 1 byte (each side waits for the last byte of its buffer)",
        ));
    }
    if a.mtu
        .is_some_and(|m| ![256, 512, 1024, 2048, 4096].contains(&m))
    {
        return Err(bad_value(format!(
            "-m {}: the MTU is one of 256, 512, 1024, 2048, 4096",
            a.mtu.unwrap_or(0)
        )));
    }
    let bw_only =
        |flag: &str| bad_value(format!("{flag}: only in bandwidth tests (as perftest's)"));
    if a.test.is_lat() {
        if a.qps > 1 {
            return Err(bw_only("-q"));
        }
        if a.duplex {
            return Err(bw_only("-b"));
        }
        if a.timed() {
            return Err(bw_only("-D/--run_infinitely"));
        }
    }
    if a.qps == 0 || a.qps > 16 * 1024 {
        return Err(bad_value(format!("-q {}: 1..=16384 QPs", a.qps)));
    }
    match (a.conn, a.test) {
        (Conn::Rc, _) => {}
        (Conn::Uc, Test::SendLat | Test::SendBw | Test::WriteLat | Test::WriteBw) => {}
        (Conn::Ud, Test::SendLat | Test::SendBw) => {}
        (c, t) => {
            return Err(bad_value(format!(
                "-c {c:?}: not with {t:?} (perftest: UC for send and write, UD for send)"
            )))
        }
    }
    if a.timed() {
        let (d, m) = a.duration_and_margin();
        if d == 0 || d <= 2 * m {
            return Err(bad_value(format!(
                "-D {d} -f {m}: the duration must be longer than twice the margin"
            )));
        }
        if a.events {
            return Err(bad_value(
                "-e: not with -D or --run_infinitely (as perftest)",
            ));
        }
        if a.all && a.run_infinitely {
            return Err(bad_value("-a: not with --run_infinitely"));
        }
    }
    if a.rdma_cm && a.conn != Conn::Rc {
        return Err(bad_value(format!(
            "-R with -c {:?}: not yet (rverbs perf connects RC QPs through rdma_cm)",
            a.conn
        )));
    }
    if a.run_infinitely && a.duplex && a.test == Test::SendBw {
        return Err(bad_value(
            "--run_infinitely: not with send-bw -b (as perftest)",
        ));
    }
    if a.tx_depth() == 0 {
        return Err(bad_value("-t 0: the send queue needs at least 1 entry"));
    }
    if a.batch == 0 || a.batch > a.tx_depth() {
        return Err(bad_value(format!(
            "-l {} must be 1..=tx-depth ({})",
            a.batch,
            a.tx_depth()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::plan::tests::args;
    use super::*;

    #[test]
    fn defaults_are_perftests() {
        let a = args("write-bw");
        assert_eq!((a.size(), a.iters(), a.tx_depth()), (65536, 5000, 128));
        let a = args("send-bw");
        assert_eq!((a.size(), a.iters(), a.tx_depth()), (65536, 1000, 128));
        let a = args("read-lat");
        assert_eq!((a.size(), a.iters(), a.tx_depth()), (2, 1000, 1));
        assert_eq!(args("atomic-bw").size(), 8);
        assert_eq!((a.port, a.ib_port, a.batch, a.qps), (18515, 1, 1, 1));
        assert_eq!(args("write-bw -D 8").duration_and_margin(), (8, 2));
        assert_eq!(
            args("write-bw --run_infinitely").duration_and_margin(),
            (5, 1)
        );
        assert!(args("write-bw --run_infinitely").timed());
        assert!(!args("write-bw").timed());
    }

    /// Each flag perftest refuses (or we do not support yet) is refused
    /// by name, before anything is opened.
    #[test]
    fn refusals_name_the_flag() {
        for (line, says) in [
            ("atomic-bw -s 16", "atomics move 8 bytes: use -s 8"),
            (
                "send-lat -n 4",
                "-n 4: perftest needs at least 5 iterations",
            ),
            ("write-lat -s 0", "-s 0: write-lat needs at least 1 byte"),
            ("write-bw -m 1000", "-m 1000: the MTU is one of 256"),
            ("send-lat -q 2", "-q: only in bandwidth tests"),
            ("write-lat -b", "-b: only in bandwidth tests"),
            (
                "read-lat -D 4",
                "-D/--run_infinitely: only in bandwidth tests",
            ),
            ("write-bw -q 0", "-q 0: 1..=16384 QPs"),
            ("write-bw -q 16385", "-q 16385: 1..=16384 QPs"),
            ("read-bw -c UC", "-c Uc: not with ReadBw"),
            ("write-bw -c UD", "-c Ud: not with WriteBw"),
            (
                "write-bw -D 4 -f 2",
                "-D 4 -f 2: the duration must be longer",
            ),
            ("write-bw -D 4 -e", "-e: not with -D or --run_infinitely"),
            (
                "write-bw -a --run_infinitely",
                "-a: not with --run_infinitely",
            ),
            ("send-bw -R -c UC", "-R with -c Uc: not yet"),
            (
                "send-bw -b --run_infinitely",
                "--run_infinitely: not with send-bw -b",
            ),
            (
                "write-bw -t 0",
                "-t 0: the send queue needs at least 1 entry",
            ),
            ("write-bw -t 4 -l 8", "-l 8 must be 1..=tx-depth (4)"),
            ("write-bw -l 0", "-l 0 must be 1..=tx-depth (128)"),
        ] {
            let e = check_args(&args(line)).expect_err(line).to_string();
            assert!(e.contains(says), "{line}: {e}");
        }
        for line in [
            "write-bw -q 4 -b -D 4 -f 1",
            "send-bw -c UD -a",
            "write-lat -c UC -s 1",
            "send-lat -R",
            "atomic-lat -s 8",
            "write-bw --run_infinitely -D 3",
        ] {
            assert!(check_args(&args(line)).is_ok(), "{line}");
        }
    }
}

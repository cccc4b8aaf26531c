//! `rverbs perf`: perftest-style latency and bandwidth tests over RC, so
//! that `cargo xtask bench` can set rverbs beside perftest's `ib_*` tools on
//! the same kernel. Both sides are `rverbs perf` (the out-of-band exchange
//! is our own), and the report lines are laid out as perftest's.

mod report;
mod run;

use super::wait::{bad_value, parse_timeout, Timeout, DEFAULT_SECS};
use clap::{Args, ValueEnum};
use rverbs::Result;
use std::process::ExitCode;

/// Which operation, and whether latency or bandwidth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Test {
    /// SEND ping-pong; half the round trip.
    SendLat,
    /// RDMA WRITE ping-pong (each side polls its buffer); half the round trip.
    WriteLat,
    /// RDMA READ, one at a time; the full round trip.
    ReadLat,
    /// Fetch-and-add, one at a time; the full round trip.
    AtomicLat,
    /// SEND stream.
    SendBw,
    /// RDMA WRITE stream.
    WriteBw,
    /// RDMA READ stream.
    ReadBw,
    /// Fetch-and-add stream.
    AtomicBw,
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
    /// GID index (RoCE needs one).
    #[arg(short = 'x', long = "gid-index")]
    pub gid_idx: Option<u32>,
    /// Message size in bytes.
    #[arg(short = 's', long, default_value_t = 2)]
    pub size: u32,
    /// Iterations.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iters: u32,
    /// TCP port of the exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub port: u16,
    /// Work requests posted per doorbell (bandwidth tests).
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Outstanding work requests (bandwidth tests).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    pub tx_depth: u32,
    /// Sleep on completion events instead of polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Copy small payloads into the WQE (sends and writes) when the QP allows.
    #[arg(short = 'I', long = "inline-size", default_value_t = 0)]
    pub inline: u32,
    /// Give up after this many seconds without progress: no answer on the
    /// TCP exchange, no completion, no event, no byte written by the peer
    /// (the passive side of a one-sided test hears from the active side
    /// over TCP while it runs). A server waits for its client to connect
    /// without limit.
    #[arg(long, value_name = "SECS", default_value = DEFAULT_SECS, value_parser = parse_timeout)]
    pub timeout: Timeout,
    /// The server to connect to (none: be the server).
    pub server: Option<String>,
}

pub fn perf(a: &PerfArgs) -> Result<ExitCode> {
    check_args(a)?;
    run::run(a)
}

/// The checks that need no device (those against the device's limits are
/// in [`run::run`]).
fn check_args(a: &PerfArgs) -> Result<()> {
    if matches!(a.test, Test::AtomicLat | Test::AtomicBw) && a.size != 8 && a.size != 2 {
        return Err(bad_value("atomics move 8 bytes: use -s 8"));
    }
    if a.iters == 0 {
        return Err(bad_value("-n 0: at least one iteration is needed"));
    }
    if a.test == Test::SendLat && a.iters < 2 {
        return Err(bad_value(format!(
            "-n {}: send-lat leaves out its first round trip (the warm-up), so it needs at least 2",
            a.iters
        )));
    }
    if a.test == Test::WriteLat && a.size == 0 {
        return Err(bad_value(
            "-s 0: write-lat needs at least 1 byte (each side waits for the last byte of its buffer)",
        ));
    }
    if a.tx_depth == 0 {
        return Err(bad_value("-t 0: the send queue needs at least 1 entry"));
    }
    if a.batch == 0 || a.batch > a.tx_depth {
        return Err(bad_value(format!(
            "--batch {} must be 1..=tx-depth ({})",
            a.batch, a.tx_depth
        )));
    }
    Ok(())
}

//! `rverbs perf`: perftest-style latency and bandwidth tests over RC, so
//! that `cargo xtask bench` can set rverbs beside perftest's `ib_*` tools on
//! the same kernel. Both sides are `rverbs perf` (the out-of-band exchange
//! is our own), and the report lines are laid out as perftest's.

mod report;
mod run;

use clap::{Args, ValueEnum};
use rverbs::{Error, Result};
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
    /// The server to connect to (none: be the server).
    pub server: Option<String>,
}

pub fn perf(a: &PerfArgs) -> Result<ExitCode> {
    if matches!(a.test, Test::AtomicLat | Test::AtomicBw) && a.size != 8 && a.size != 2 {
        return Err(Error::InvalidArgument {
            what: "atomics move 8 bytes: use -s 8".into(),
        });
    }
    if a.batch == 0 || a.batch > a.tx_depth {
        return Err(Error::InvalidArgument {
            what: format!("--batch {} must be 1..=tx-depth ({})", a.batch, a.tx_depth),
        });
    }
    run::run(a)
}

//! Subcommands of the `rverbs` tool, one module each.

mod asyncwatch;
mod cm_common;
mod cmatose;
mod devices;
mod gids;
mod link;
mod mckey;
mod perf;
mod pingpong;
mod rping;
mod selftest;
mod stream;
mod udaddy;
mod wait;

/// The classic rdma_cm client/server, shared with the root crate's
/// `examples/cm_basic.rs` (the file is the example's; the tool includes it).
#[path = "../../../examples/cm_basic.rs"]
mod cm_basic;

use clap::{Args, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "rverbs",
    version,
    about = "RDMA verbs in pure Rust: device tools and tests"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List RDMA devices, like ibv_devices.
    Devices,
    /// Show device attributes, like ibv_devinfo.
    Devinfo(devices::DevinfoArgs),
    /// Show the GID tables, like show_gids.
    Gids {
        /// Only this device.
        #[arg(short = 'd', long = "ib-dev")]
        dev: Option<String>,
    },
    /// Show, add or delete RDMA links, like `rdma link`.
    Link {
        #[command(subcommand)]
        cmd: Option<link::LinkCmd>,
    },
    /// Map RDMA ports to network interfaces, like ibdev2netdev.
    Netdevs,
    /// perftest-style latency and bandwidth tests.
    Perf(perf::PerfArgs),
    /// RC ping-pong, wire-compatible with ibv_rc_pingpong.
    Pingpong(pingpong::PingpongArgs),
    /// RC streams over many QPs, every byte checked and every work request
    /// completed exactly once (for lossy links).
    Stream(stream::StreamArgs),
    /// Print the device's async events, like ibv_asyncwatch.
    Asyncwatch(asyncwatch::AsyncwatchArgs),
    /// RC connections over rdma_cm, like rdma-core's ucmatose.
    Cmatose(cmatose::CmatoseArgs),
    /// UD datagrams over rdma_cm, like rdma-core's udaddy.
    Udaddy(udaddy::UdaddyArgs),
    /// Multicast over rdma_cm, like rdma-core's mckey.
    Mckey(mckey::MckeyArgs),
    /// Loopback checks on one device: send, write, read, atomics, inline.
    Selftest(selftest::SelftestArgs),
    /// RDMA ping over rdma_cm, wire-compatible with rdma-core's rping.
    Rping(rping::RpingArgs),
    /// The classic rdma_cm server: listens on a kernel-chosen port.
    CmServer {
        /// Listen on this port instead (0: let the kernel choose).
        #[arg(short = 'p', long, default_value_t = 0)]
        port: u16,
    },
    /// The classic rdma_cm client: one message each way, then disconnect.
    CmClient {
        /// The server's address.
        addr: String,
        /// The server's port.
        port: u16,
    },
}

/// The subcommand named by `argv[1]`, parsed by a command holding only that
/// subcommand's arguments; `None` for anything else (no such name, a parse
/// error, `--help`), which the full parser then handles and reports.
///
/// Why: building the whole derived command tree costs ~140,000 instructions
/// per run, more than the rest of `rverbs devices` together; a subcommand's
/// own arguments cost a few thousand. The outcome of a successful parse is
/// the same either way, and every message still comes from the full parser.
fn parse_one(argv: &[OsString]) -> Option<Cmd> {
    fn args<A: Args + FromArgMatches>(name: &'static str, argv: &[OsString]) -> Option<A> {
        let m = A::augment_args(clap::Command::new(name))
            .try_get_matches_from(&argv[1..])
            .ok()?;
        A::from_arg_matches(&m).ok()
    }
    let name = argv.get(1)?.to_str()?;
    let bare = argv.len() == 2;
    Some(match name {
        "devices" if bare => Cmd::Devices,
        "netdevs" if bare => Cmd::Netdevs,
        "devinfo" => Cmd::Devinfo(args("devinfo", argv)?),
        "perf" => Cmd::Perf(args("perf", argv)?),
        "pingpong" => Cmd::Pingpong(args("pingpong", argv)?),
        "stream" => Cmd::Stream(args("stream", argv)?),
        "selftest" => Cmd::Selftest(args("selftest", argv)?),
        "rping" => Cmd::Rping(args("rping", argv)?),
        "asyncwatch" => Cmd::Asyncwatch(args("asyncwatch", argv)?),
        "cmatose" => Cmd::Cmatose(args("cmatose", argv)?),
        "udaddy" => Cmd::Udaddy(args("udaddy", argv)?),
        "mckey" => Cmd::Mckey(args("mckey", argv)?),
        _ => return None,
    })
}

/// Runs the command line `argv` (program name first).
pub fn main(argv: Vec<OsString>) -> ExitCode {
    let cmd = match parse_one(&argv) {
        Some(cmd) => cmd,
        None => Cli::parse_from(&argv).cmd,
    };
    let res = match cmd {
        Cmd::Devices => devices::devices(),
        Cmd::Devinfo(a) => devices::devinfo(&a),
        Cmd::Pingpong(a) => pingpong::pingpong(&a),
        Cmd::Stream(a) => stream::stream(&a),
        Cmd::Gids { dev } => gids::gids(dev.as_deref()),
        Cmd::Perf(a) => perf::perf(&a),
        Cmd::Link { cmd } => link::link(cmd.as_ref()),
        Cmd::Netdevs => link::netdevs(),
        Cmd::Rping(a) => rping::rping(&a),
        Cmd::Mckey(a) => mckey::mckey(&a),
        Cmd::Cmatose(a) => cmatose::cmatose(&a),
        Cmd::Asyncwatch(a) => asyncwatch::asyncwatch(&a),
        Cmd::Udaddy(a) => udaddy::udaddy(&a),
        Cmd::Selftest(a) => selftest::selftest(&a),
        Cmd::CmServer { port } => cm_basic::server(port).map(|()| ExitCode::SUCCESS),
        Cmd::CmClient { addr, port } => cm_basic::client(&addr, port).map(|()| ExitCode::SUCCESS),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rverbs: {e}");
            ExitCode::FAILURE
        }
    }
}

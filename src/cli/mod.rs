//! Subcommands of the `rverbs` tool, one module each.

mod devices;
mod gids;
mod link;
mod perf;
mod pingpong;

use clap::{Parser, Subcommand};
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
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Devices => devices::devices(),
        Cmd::Devinfo(a) => devices::devinfo(&a),
        Cmd::Pingpong(a) => pingpong::pingpong(&a),
        Cmd::Gids { dev } => gids::gids(dev.as_deref()),
        Cmd::Perf(a) => perf::perf(&a),
        Cmd::Link { cmd } => link::link(cmd.as_ref()),
        Cmd::Netdevs => link::netdevs(),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rverbs: {e}");
            ExitCode::FAILURE
        }
    }
}

//! Subcommands of the `rverbs` tool, one module each.

mod devices;

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
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Devices => devices::devices(),
        Cmd::Devinfo(a) => devices::devinfo(&a),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rverbs: {e}");
            ExitCode::FAILURE
        }
    }
}

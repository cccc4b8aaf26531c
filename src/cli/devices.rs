//! `rverbs devices` and `rverbs devinfo`.

use clap::Args;
use rverbs::{format_guid, Device, Result};
use std::process::ExitCode;

/// Prints the device list laid out as `ibv_devices` prints it.
pub fn devices() -> Result<ExitCode> {
    println!("    {:<16}\t    node GUID", "device");
    println!("    {:<16}\t----------------", "------");
    for d in Device::list()? {
        println!("    {:<16}\t{}", d.name(), format_guid(d.node_guid()));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct DevinfoArgs {
    /// Use this device (default: all).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Print all attributes.
    #[arg(short = 'v', long)]
    verbose: bool,
}

pub fn devinfo(a: &DevinfoArgs) -> Result<ExitCode> {
    let _ = (&a.dev, a.verbose);
    eprintln!("rverbs devinfo: not implemented yet (needs the core verbs, issue 4)");
    Ok(ExitCode::from(2))
}

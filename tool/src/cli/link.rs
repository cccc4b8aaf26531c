//! `rverbs link` (like iproute2's `rdma link`) and `rverbs netdevs` (like
//! `ibdev2netdev`), over RDMA netlink: no iproute2 needed.

use clap::Subcommand;
use rverbs::link;
use rverbs::{Error, Result};
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum LinkCmd {
    /// List links (the default).
    Show,
    /// Add a software RDMA link: `add NAME type rxe netdev IFACE`.
    Add {
        /// The new device's name.
        name: String,
        /// The word `type`.
        #[arg(value_parser = ["type"])]
        type_kw: String,
        /// The link type (`rxe`).
        link_type: String,
        /// The word `netdev`.
        #[arg(value_parser = ["netdev"])]
        netdev_kw: String,
        /// The network interface.
        netdev: String,
    },
    /// Delete a link: `delete NAME`.
    #[command(alias = "del")]
    Delete {
        /// The device's name.
        name: String,
        /// Wait for the processes that hold the device open to close it
        /// (without it, a device in use is not deleted and they are named).
        #[arg(long)]
        wait: bool,
    },
}

fn port_state(s: u8) -> &'static str {
    match s {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

fn phys_state(s: u8) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION_TRAINING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY_TEST",
        _ => "NOP",
    }
}

pub fn link(cmd: Option<&LinkCmd>) -> Result<ExitCode> {
    match cmd {
        None | Some(LinkCmd::Show) => {
            for l in link::links()? {
                let mut s = format!(
                    "link {}/{} state {} physical_state {}",
                    l.dev,
                    l.port,
                    port_state(l.state),
                    phys_state(l.phys_state)
                );
                if let Some(n) = &l.netdev {
                    s.push_str(&format!(" netdev {n}"));
                }
                println!("{s} ");
            }
        }
        Some(LinkCmd::Add {
            name,
            link_type,
            netdev,
            ..
        }) => {
            if !std::path::Path::new("/sys/class/net").join(netdev).exists() {
                return Err(Error::InvalidArgument {
                    what: format!("link add {name}: no network interface named {netdev}"),
                });
            }
            link::add(name, link_type, netdev).map_err(|e| explain(e, name, link_type, netdev))?;
        }
        Some(LinkCmd::Delete { name, wait: false }) => link::delete(name)?,
        Some(LinkCmd::Delete { name, wait: true }) => link::delete_wait(name)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Turns the kernel's terse errno into what went wrong.
fn explain(e: Error, name: &str, link_type: &str, netdev: &str) -> Error {
    let why = match e.errno().map(|e| e.0) {
        // The RDMA core refuses a taken name with ENFILE; rxe refuses a
        // netdev that already carries a device with EEXIST.
        Some(libc::ENFILE) => format!("a device named {name} already exists"),
        Some(libc::EEXIST) => format!("{netdev} already has an RDMA link"),
        Some(libc::EPERM) | Some(libc::EACCES) => "needs CAP_NET_ADMIN (run as root)".to_string(),
        Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => {
            format!(
                "the kernel has no link type {link_type} (is the rdma_{link_type} module loaded?)"
            )
        }
        _ => return e,
    };
    Error::InvalidArgument {
        what: format!("link add {name}: {why} ({e})"),
    }
}

/// `rxe0 port 1 ==> veth0 (Up)`, as ibdev2netdev prints it.
pub fn netdevs() -> Result<ExitCode> {
    for l in link::links()? {
        let Some(n) = &l.netdev else { continue };
        let oper =
            std::fs::read_to_string(format!("/sys/class/net/{n}/operstate")).unwrap_or_default();
        let up = if oper.trim() == "up" { "Up" } else { "Down" };
        println!("{} port {} ==> {n} ({up})", l.dev, l.port);
    }
    Ok(ExitCode::SUCCESS)
}

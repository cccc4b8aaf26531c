//! `rverbs gids`: the GID tables, laid out like rdma-core's `show_gids`.

use rverbs::{Context, Device, GidType, Result};
use std::process::ExitCode;

/// Prints DEV, PORT, INDEX, GID, IPv4, VER and DEV columns as `show_gids`.
pub fn gids(dev: Option<&str>) -> Result<ExitCode> {
    let devs: Vec<Device> = match dev {
        Some(n) => vec![Device::find(Some(n))?],
        None => Device::list()?,
    };
    println!("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV");
    println!("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---");
    let mut n = 0;
    for d in devs {
        let ctx = Context::open(&d)?;
        {
            for g in ctx.query_gid_table()? {
                let port = g.port;
                let hex: Vec<String> = g
                    .gid
                    .chunks(2)
                    .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
                    .collect();
                let v4 = if g.gid[..10] == [0; 10] && g.gid[10..12] == [0xff, 0xff] {
                    std::net::Ipv4Addr::new(g.gid[12], g.gid[13], g.gid[14], g.gid[15]).to_string()
                } else {
                    String::new()
                };
                let ver = match g.gid_type {
                    GidType::RoceV2 => "v2",
                    // show_gids prints sysfs's "IB/RoCE v1" as v1.
                    GidType::Ib | GidType::RoceV1 => "v1",
                    GidType::Other(_) => "?",
                };
                println!(
                    "{}\t{port}\t{}\t{}\t{:<16}\t{ver}\t{}",
                    d.name(),
                    g.index,
                    hex.join(":"),
                    v4,
                    g.netdev.as_deref().unwrap_or("")
                );
                n += 1;
            }
        }
    }
    println!("n_gids_found={n}");
    Ok(ExitCode::SUCCESS)
}

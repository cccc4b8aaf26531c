//! What the examples share: opening the device named on the command line
//! and the address of a port looped back to itself (rxe answers its own
//! GID, so two QPs of one process can talk through one device).

use rverbs::{AhAttr, Context, Error, GidType, Grh, Result};

/// The device named by the first argument (default: the first device) and
/// the port (second argument, default 1).
pub fn open_from_args() -> Result<(Context, u8)> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let port = args
        .next()
        .map(|p| p.parse::<u8>())
        .transpose()
        .map_err(|e| Error::InvalidArgument {
            what: format!("port: {e}"),
        })?
        .unwrap_or(1);
    Ok((Context::open_by_name(dev.as_deref())?, port))
}

/// The address vector of `port` itself: on Ethernet (RoCE) its RoCE v2
/// IPv4-mapped GID, on InfiniBand its LID.
pub fn own_address(ctx: &Context, port: u8) -> Result<AhAttr> {
    let p = ctx.query_port(port)?;
    if p.link_layer != 2 {
        return Ok(AhAttr {
            dlid: p.lid,
            port_num: port,
            ..AhAttr::default()
        });
    }
    let g = ctx
        .gid_table(port)?
        .into_iter()
        .find(|g| {
            g.gid_type == GidType::RoceV2
                && g.gid[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        })
        .ok_or_else(|| Error::InvalidArgument {
            what: format!("port {port} has no RoCE v2 IPv4 GID: is its netdev up?"),
        })?;
    Ok(AhAttr {
        port_num: port,
        grh: Some(Grh {
            dgid: g.gid,
            sgid_index: g.index as u8,
            hop_limit: 1,
            ..Grh::default()
        }),
        ..AhAttr::default()
    })
}

/// Polls `cq` until `n` completions arrived (or 5 seconds passed) and
/// fails on any that did not succeed.
pub fn wait(cq: &mut rverbs::Cq, n: usize) -> Result<Vec<rverbs::Wc>> {
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut buf = [rverbs::Wc::default(); 8];
    while got.len() < n {
        if std::time::Instant::now() > deadline {
            return Err(Error::InvalidArgument {
                what: format!("{} of {n} completions after 5 s", got.len()),
            });
        }
        let k = cq.poll(&mut buf);
        for wc in &buf[..k] {
            if !wc.is_ok() {
                return Err(Error::InvalidArgument {
                    what: format!("work request {} completed with {}", wc.wr_id, wc.status),
                });
            }
            got.push(*wc);
        }
    }
    Ok(got)
}

//! What nearly every program does the same way, in one call: the port's
//! own address, a QP moved through INIT, RTR and RTS to its peer, a UD QP
//! made ready, a bounded wait for completions. Each is made of the public
//! calls it replaces (`Qp::modify` with `QpAttr`, `Cq::poll`), which stay
//! there for anything these defaults do not fit.

use super::{AhAttr, Grh, Mtu, Qp, QpAttr, QpState};
use crate::context::Context;
use crate::cq::Cq;
use crate::error::{Error, Result};
use crate::mr::Access;
use crate::query::GidType;
use crate::wc::Wc;
use std::time::Instant;

/// `IBV_LINK_LAYER_ETHERNET`: the port speaks RoCE, and addresses are GIDs.
const LINK_ETHERNET: u8 = 2;

impl Context {
    /// The address vector of `port` itself, what a peer on this port's
    /// network (or a QP of this process: rxe answers its own GID) puts in
    /// its [`QpAttr::rtr`] or [`crate::pd::Pd::create_ah`] to reach it. On
    /// Ethernet (RoCE) it routes by the port's RoCE v2 GID (the
    /// IPv4-mapped one if there is one, as rdma-core's tools pick with
    /// `-g`), on InfiniBand by the port's LID.
    pub fn port_address(&self, port: u8) -> Result<AhAttr> {
        let p = self.query_port(port)?;
        if p.link_layer != LINK_ETHERNET {
            return Ok(AhAttr {
                dlid: p.lid,
                port_num: port,
                ..AhAttr::default()
            });
        }
        let v4_mapped = |g: &[u8; 16]| g[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        let gids = self.gid_table(port)?;
        let g = gids
            .iter()
            .filter(|g| g.gid_type == GidType::RoceV2)
            .min_by_key(|g| !v4_mapped(&g.gid))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "port {port} has no RoCE v2 GID: is its network device up and addressed?"
                ))
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
}

impl Qp {
    /// Moves a new RC or UC QP through INIT, RTR and RTS to the peer QP
    /// `peer_qpn` at `peer` (an address such as [`Context::port_address`]
    /// gives): port `port`, remote access `access` for the peer's
    /// requests, both PSNs 0, the port's active MTU, and rdma-core's
    /// pingpong defaults for timeouts and retries ([`QpAttr::rtr`],
    /// [`QpAttr::rts`]). For anything else, [`Qp::modify`] step by step.
    pub fn connect(&mut self, port: u8, access: Access, peer: AhAttr, peer_qpn: u32) -> Result<()> {
        let ctx = Context {
            inner: self.control().ctx.clone(),
        };
        let mtu = Mtu::from_raw(ctx.query_port(port)?.active_mtu).unwrap_or(Mtu::M1024);
        self.modify(&QpAttr::init(port, access))?;
        self.modify(&QpAttr::rtr(peer, mtu, peer_qpn, 0))?;
        self.modify(&QpAttr::rts(0))
    }

    /// Moves a new UD QP through INIT (port `port`, Q_Key `qkey`), RTR and
    /// RTS (send PSN 0): ready to send to address handles and receive.
    pub fn ready_ud(&mut self, port: u8, qkey: u32) -> Result<()> {
        self.modify(&QpAttr::init_ud(port, qkey))?;
        self.modify(&QpAttr::state(QpState::Rtr))?;
        self.modify(&QpAttr::rts_ud(0))
    }
}

impl Cq {
    /// Polls until `out` is full or `deadline` passes, and returns how many
    /// completions it holds: the bounded wait for `n` completions (a
    /// `&mut out[..n]`) that a program must not let hang on a peer that
    /// went away. Spins (no system call, no sleep); the completions come
    /// as [`Cq::poll`] gives them, errors included.
    pub fn poll_until(&mut self, out: &mut [Wc], deadline: Instant) -> usize {
        let mut n = 0;
        while n < out.len() {
            n += self.poll(&mut out[n..]);
            if n < out.len() && Instant::now() >= deadline {
                break;
            }
            std::hint::spin_loop();
        }
        n
    }
}

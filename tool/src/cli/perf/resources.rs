//! The device side of a run: the device and port it runs on, checked
//! against the flags before the exchange starts ([`Device`]), and once
//! the plan is known the memory, CQ and completion channel its QPs share
//! ([`Resources`]).

use super::args::PerfArgs;
use super::cm::Comm;
use super::plan::{self, Plan, LINK_ETHERNET};
use rverbs::{CompChannel, Context, Cq, DeviceAttr, Mr, Pd, PortAttr, QpInit, Result};

/// The device and port of the run, and what the flags make of them.
pub struct Device {
    pub ctx: Context,
    pub ib_port: u8,
    pub port: PortAttr,
    pub attr: DeviceAttr,
    /// Entries of the CQ all QPs share ([`plan::cq_entries`]).
    pub cqe: u32,
    /// The port's link layer is Ethernet (RoCE).
    pub ethernet: bool,
    /// `-x`, or on RoCE the best GID ([`plan::best_gid`]); none on IB
    /// without `-x`.
    pub gid_idx: Option<u32>,
}

impl Device {
    /// Opens `-d`'s device, or with `-R` makes the rdma_cm connection of
    /// the exchange first and runs on the device and port it reached
    /// (returned beside, for the exchange).
    pub fn open(a: &PerfArgs) -> Result<(Device, Option<Comm>)> {
        let comm = if a.rdma_cm {
            Some(Comm::establish(a.server.as_deref(), a.port, a.timeout)?)
        } else {
            None
        };
        let (ctx, ib_port) = match &comm {
            Some(c) => (c.context()?, c.port()?),
            None => (Context::open_by_name(a.dev.as_deref())?, a.ib_port),
        };
        let port = ctx.query_port(ib_port)?;
        let attr = ctx.query_device()?;
        // -R runs on the port rdma_cm reached, yet the largest message is
        // checked against -i's (default 1), as this tool always has; on a
        // device of one port the two are the same.
        let msg_port = if ib_port == a.ib_port {
            port.clone()
        } else {
            ctx.query_port(a.ib_port)?
        };
        let cqe = plan::cq_entries(a, &attr, &msg_port)?;
        let ethernet = port.link_layer == LINK_ETHERNET;
        let gid_idx = match a.gid_idx {
            Some(i) => Some(i),
            None if ethernet => Some(plan::best_gid(&ctx.query_gid_table()?, ib_port)?),
            None => None,
        };
        let dev = Device {
            ctx,
            ib_port,
            port,
            attr,
            cqe,
            ethernet,
            gid_idx,
        };
        Ok((dev, comm))
    }

    /// The GID our address messages carry, if any.
    pub fn gid(&self) -> Result<Option<[u8; 16]>> {
        match self.gid_idx {
            Some(i) => Ok(Some(self.ctx.query_gid(self.ib_port, i)?)),
            None => Ok(None),
        }
    }
}

/// What the QPs share: one MR with two regions per QP (QP `i` sends from,
/// and reads into, region `2i`; the peer targets region `2i + 1`), one CQ,
/// and with `-e` a completion channel.
pub struct Resources {
    pub channel: Option<CompChannel>,
    pub pd: Pd,
    pub mr: Mr,
    pub cq: Cq,
}

impl Resources {
    pub fn new(a: &PerfArgs, dev: &Device, plan: &Plan) -> Result<Resources> {
        let channel = if a.events {
            Some(dev.ctx.create_comp_channel()?)
        } else {
            None
        };
        let pd = dev.ctx.alloc_pd()?;
        let mr = pd.alloc_mr(plan.region * 2 * a.qps as usize, plan::access(a.conn))?;
        let cq = dev.ctx.create_cq(dev.cqe, channel.as_ref(), 0)?;
        Ok(Resources {
            channel,
            pd,
            mr,
            cq,
        })
    }

    /// What each QP is created with.
    pub fn qp_init(&self, a: &PerfArgs) -> QpInit<'_> {
        QpInit {
            qp_type: plan::qp_type(a.conn),
            send_cq: &self.cq,
            recv_cq: &self.cq,
            caps: plan::qp_caps(a),
            sq_sig_all: false,
            srq: None,
        }
    }
}

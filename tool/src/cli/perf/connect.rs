//! The QPs of the test, created and connected to the peer's: through the
//! address rounds of the exchange (RTR and RTS from the peer's address
//! message), or with `-R` through rdma_cm between two blank rounds.

use super::super::wait::bad_value;
use super::args::{Conn, PerfArgs};
use super::bench::Lane;
use super::cm;
use super::exchange::Exchange;
use super::plan::{self, is_v4, mtu_of, Plan, UD_QKEY};
use super::resources::{Device, Resources};
use super::script::Addr;
use rverbs::cm::CmId;
use rverbs::{AhAttr, Grh, Mr, Pd, Qp, QpAttr, QpInit, QpState, Remote, Result};
use rverbs_tool::wire::perf::Peer;
use std::time::Instant;

/// The address message of -R's sync rounds (perftest's, still blank).
const BLANK: Peer = Peer {
    lid: 0,
    out_reads: 0,
    qpn: 0,
    psn: 0,
    rkey: 0,
    addr: 0,
    gid: None,
    srqn: 0,
};

/// The test's QPs, connected, and the address messages both sides sent
/// before the connection (one per QP each).
pub struct Connected {
    pub lanes: Vec<Lane>,
    pub mine: Vec<Peer>,
    pub peers: Vec<Peer>,
    /// `-R`: the QPs' rdma_cm ids, held (never read) as long as the
    /// test runs.
    pub _cm_ids: Option<Vec<CmId>>,
}

/// Creates the QPs, exchanges the addresses before the connection
/// (`plan.script`'s rounds), connects each QP to the peer's and goes
/// through the rounds after. `gid`: ours, which the address messages
/// carry.
pub fn connect(
    a: &PerfArgs,
    plan: &Plan,
    dev: &Device,
    res: &Resources,
    gid: Option<[u8; 16]>,
    ex: &mut Exchange,
) -> Result<Connected> {
    let init = res.qp_init(a);
    let (qps, cm_ids) = if a.rdma_cm {
        let (qps, ids) = cm_qps(a, plan, dev, &res.pd, &init, ex)?;
        (qps, Some(ids))
    } else {
        (create_qps(a, dev.ib_port, &res.pd, &init)?, None)
    };
    let mine = addresses(&qps, dev, &res.mr, plan.region, gid);
    let peers = rounds(ex, plan.script.before_connect, &mine)?;
    // (rdma_cm resolved the path itself: perftest checks no GIDs then.)
    if !a.rdma_cm && gid.is_some_and(|g| is_v4(&g)) != peers[0].gid.is_some_and(|g| is_v4(&g)) {
        return Err(bad_value(
            "the peer's GID is of the other IP version (IPv4 against IPv6): pick another -x",
        ));
    }
    let mut lanes = Vec::with_capacity(qps.len());
    for ((qp, me), peer) in qps.into_iter().zip(&mine).zip(&peers) {
        lanes.push(connect_qp(a, plan, dev, &res.pd, qp, me, peer)?);
    }
    rounds(ex, plan.script.after_connect, &mine)?;
    Ok(Connected {
        lanes,
        mine,
        peers,
        _cm_ids: cm_ids,
    })
}

/// `-q` QPs, each moved to INIT.
fn create_qps(a: &PerfArgs, ib_port: u8, pd: &Pd, init: &QpInit<'_>) -> Result<Vec<Qp>> {
    let mut qps = Vec::with_capacity(a.qps as usize);
    for _ in 0..a.qps {
        let mut qp = pd.create_qp(init)?;
        if a.conn == Conn::Ud {
            qp.modify(&QpAttr::init_ud(ib_port, UD_QKEY))?;
        } else {
            qp.modify(&QpAttr::init(ib_port, plan::access(a.conn)))?;
        }
        qps.push(qp);
    }
    Ok(qps)
}

/// `-R`: rdma_cm connects each QP, between two more rounds (perftest's
/// syncs before and after, its addresses still blank).
fn cm_qps(
    a: &PerfArgs,
    plan: &Plan,
    dev: &Device,
    pd: &Pd,
    init: &QpInit<'_>,
    ex: &mut Exchange,
) -> Result<(Vec<Qp>, Vec<CmId>)> {
    let nq = a.qps as usize;
    // A server listens before the sync round that sends the client.
    let listening = if plan.client {
        None
    } else {
        Some(cm::listen(a.port, nq)?)
    };
    ex.round(&BLANK)?;
    let reads = if plan.spec.reads {
        plan::responder_depth(plan::out_reads(&dev.attr))
    } else {
        0
    };
    let c = cm::connect_qps(
        a.server.as_deref(),
        listening,
        a.port,
        nq,
        pd,
        init,
        reads,
        a.timeout,
    )?;
    let (qps, ids) = (c.qps, c.ids);
    ex.round(&BLANK)?;
    Ok((qps, ids))
}

/// Our address message of each QP: its number, a random PSN, and the
/// region the peer targets (`2i + 1`).
fn addresses(qps: &[Qp], dev: &Device, mr: &Mr, region: usize, gid: Option<[u8; 16]>) -> Vec<Peer> {
    let out_reads = plan::out_reads(&dev.attr);
    qps.iter()
        .enumerate()
        .map(|(i, qp)| Peer {
            lid: dev.port.lid,
            out_reads,
            qpn: qp.qpn(),
            psn: (std::process::id().wrapping_mul(2_654_435_761)
                ^ Instant::now().elapsed().subsec_nanos()
                ^ (i as u32).wrapping_mul(40_503))
                & 0xff_ffff,
            rkey: mr.rkey(),
            addr: mr.addr() + (region * (2 * i + 1)) as u64,
            gid,
            srqn: 0,
        })
        .collect()
}

/// The address rounds `addrs` (each QP's messages in turn for
/// [`Addr::EachQp`]); returns the peer's messages of the per-QP rounds.
fn rounds(ex: &mut Exchange, addrs: &[Addr], mine: &[Peer]) -> Result<Vec<Peer>> {
    let mut peers = Vec::with_capacity(mine.len());
    for addr in addrs {
        match addr {
            Addr::First => {
                ex.round(&mine[0])?;
            }
            Addr::EachQp => {
                for m in mine {
                    peers.push(ex.round(m)?);
                }
            }
        }
    }
    Ok(peers)
}

/// Moves `qp` to RTS towards `peer` (UD: creates the address handle of
/// its sends instead); `me` is our address message of it.
fn connect_qp(
    a: &PerfArgs,
    plan: &Plan,
    dev: &Device,
    pd: &Pd,
    mut qp: Qp,
    me: &Peer,
    peer: &Peer,
) -> Result<Lane> {
    let av = AhAttr {
        port_num: dev.ib_port,
        dlid: peer.lid,
        grh: peer.gid.map(|dgid| Grh {
            dgid,
            sgid_index: dev.gid_idx.unwrap_or(0) as u8,
            hop_limit: 0xff,
            ..Grh::default()
        }),
        ..AhAttr::default()
    };
    let mut ud = None;
    match a.conn {
        // rdma_cm connected it already.
        _ if a.rdma_cm => {}
        Conn::Ud => {
            qp.modify(&QpAttr::state(QpState::Rtr))?;
            qp.modify(&QpAttr::rts_ud(me.psn))?;
            ud = Some((pd.create_ah(&av)?, peer.qpn));
        }
        Conn::Uc => {
            let mut rtr = QpAttr::rtr(av, mtu_of(plan.mtu), peer.qpn, peer.psn);
            // UC has no responder resources, RNR timer or retries: the
            // kernel refuses those attributes on a UC QP.
            rtr.max_dest_rd_atomic = None;
            rtr.min_rnr_timer = None;
            qp.modify(&rtr)?;
            qp.modify(&QpAttr::rts_ud(me.psn))?;
        }
        Conn::Rc => {
            let mut rtr = QpAttr::rtr(av, mtu_of(plan.mtu), peer.qpn, peer.psn);
            rtr.max_dest_rd_atomic = Some(plan::responder_depth(plan::out_reads(&dev.attr)));
            qp.modify(&rtr)?;
            let mut rts = QpAttr::rts(me.psn);
            rts.max_rd_atomic = Some(plan::initiator_depth(peer.out_reads, &dev.attr));
            // perftest's 7, which rxe reads as "retry for ever": a run over
            // a lossy link must behave as perftest's does (with 6, a 64 KiB
            // WRITE at 5% loss ran out of retries in seconds: go-back-N
            // resends all 64 packets from the lost one). `--timeout` still
            // ends a run whose peer is gone.
            rts.retry_cnt = Some(7);
            qp.modify(&rts)?;
        }
    }
    Ok(Lane {
        qp,
        remote: Remote {
            addr: peer.addr,
            rkey: peer.rkey,
        },
        ud,
        recvs: 0,
    })
}

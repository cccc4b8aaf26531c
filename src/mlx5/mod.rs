//! The mlx5 (ConnectX) glue: what the root crate does differently when the
//! device's driver is `mlx5_ib`.
//!
//! mlx5 hands userspace the whole data path. The process allocates every
//! queue buffer and doorbell record itself and passes their addresses to
//! the kernel in the driver udata of `CREATE_CQ`/`CREATE_QP`/`CREATE_SRQ`,
//! which pins them; `GET_CONTEXT` (with the mlx5 request) hands out UAR
//! pages, which we map and ring with plain stores. So, compared with rxe:
//! `GET_CONTEXT` carries udata and is followed by UAR `mmap()`s; objects are
//! created over anonymous mappings we own (kept until the kernel destroyed
//! the object, leaked if it refuses to); posting and polling never enter
//! the kernel (`post`), and a CQ resolves completions through a registry
//! of its QPs' records (`poll`). Sizes and udata come from
//! `provider_mlx5::setup`, the address vector of an AH from
//! `provider_mlx5::av`.
//!
//! **Not run on hardware**: there is no ConnectX here. What is verified
//! is listed in the README; this module's kernel commands have never met
//! an mlx5 kernel driver.

mod dbrec;
mod poll;
mod post;
#[cfg(test)]
mod tests;

pub(crate) use dbrec::DbRecord;
pub(crate) use poll::Poller;
pub(crate) use post::{post_recv, post_send, post_srq_recv};

use crate::ah::{Ah, AhInner};
use crate::context::{Context, ContextInner};
use crate::cq::{CompChannel, Cq, CqInner, Ring};
use crate::error::{Error, Result};
use crate::pd::Pd;
use crate::qp::{AhAttr, Qp, QpCaps, QpInit, QpInner, QpType, Queues};
use crate::srq::{Srq, SrqInner, SrqQueue};
use crate::sys::Mapping;
use poll::{QpEntry, RecvRecs, Registry};
use provider_mlx5::setup::{self, DeviceLimits, UarLayout};
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use uverbs_abi::mlx5 as m;
use zerocopy::{FromBytes, IntoBytes};

/// What an mlx5 context keeps: the driver's answer to `GET_CONTEXT` and
/// the UAR pages mapped from it.
pub(crate) struct Mlx5Ctx {
    pub(crate) resp: m::Mlx5IbAllocUcontextResp,
    pub(crate) uar: UarLayout,
    /// One mapping per UAR page, in `uar`'s page order; unmapped when the
    /// context closes (after every object on it, which hold the context).
    pub(crate) uar_maps: Vec<Mapping>,
    pub(crate) page_size: usize,
    /// Doorbell records of this context's CQs, QPs and SRQs.
    db_pool: Arc<dbrec::DbPool>,
    limits: std::sync::OnceLock<DeviceLimits>,
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// `GET_CONTEXT` with the mlx5 request (through `write()`, which carries
/// driver udata on every kernel), then the UAR `mmap()`s. Returns the async
/// event fd, the completion vector count and the mlx5 state.
pub(crate) fn get_context(fd: &OwnedFd) -> Result<(OwnedFd, u32, Mlx5Ctx)> {
    let page = page_size();
    let req = setup::ucontext_request(page);
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbAllocUcontextResp>()];
    let (async_fd, n) = crate::context::get_context_write_udata(fd, req.as_bytes(), &mut out)?;
    let resp = m::Mlx5IbAllocUcontextResp::read_from_bytes(&out)
        .map_err(|_| Error::bad_answer("GET_CONTEXT: mlx5 response of the wrong size"))?;
    let uar = setup::uar_layout(&req, &resp, page)
        .map_err(|e| Error::bad_answer(format!("GET_CONTEXT: mlx5 UARs: {e}")))?;
    let mut uar_maps = Vec::new();
    for p in 0..uar.pages {
        uar_maps.push(Mapping::shared_write_only(
            fd.as_fd(),
            "mmap of an mlx5 UAR page",
            page,
            uar.mmap_offset(p, page as u64),
        )?);
    }
    let ctx = Mlx5Ctx {
        resp,
        uar,
        uar_maps,
        page_size: page,
        db_pool: Arc::new(dbrec::DbPool::new(page)),
        limits: std::sync::OnceLock::new(),
    };
    Ok((async_fd, n, ctx))
}

impl Mlx5Ctx {
    /// The device limits, queried once per context (as rdma-core caches
    /// its device attributes) rather than at every create.
    fn limits(&self, c: &Context) -> Result<DeviceLimits> {
        if let Some(l) = self.limits.get() {
            return Ok(*l);
        }
        let d = c.query_device()?;
        let l = DeviceLimits::from_context(&self.resp, d.max_sge, d.max_cqe);
        Ok(*self.limits.get_or_init(|| l))
    }

    /// The address of `off` bytes into UAR page `page`.
    fn uar_ptr(&self, page: usize, off: usize) -> Result<NonNull<u8>> {
        let map = self
            .uar_maps
            .get(page)
            .filter(|m| off + 8 <= m.len())
            .ok_or_else(|| Error::bad_answer(format!("UAR page {page} offset {off:#x}")))?;
        // SAFETY: off + 8 <= the mapping's length (checked above).
        Ok(unsafe { NonNull::new_unchecked(map.as_ptr().as_ptr().add(off)) })
    }
}

fn mlx5_of(c: &ContextInner) -> &Mlx5Ctx {
    c.mlx5.as_ref().expect("called for mlx5 contexts only")
}

fn bad(op: &str, e: &dyn std::fmt::Display) -> Error {
    Error::invalid(format!("{op}: {e}"))
}

/// The CQ's memory and QP registry, kept in its `CqInner`.
pub(crate) struct CqShared {
    pub(crate) registry: Arc<Registry>,
    /// CQE buffer and doorbell record: the device writes them until
    /// DESTROY_CQ has succeeded.
    _buf: Mapping,
    _db: DbRecord,
}

/// `CREATE_CQ` over a CQE buffer and doorbell record of ours.
pub(crate) fn create_cq(
    ctx: &Context,
    cqe: u32,
    channel: Option<&CompChannel>,
    comp_vector: u32,
    user_handle: u64,
) -> Result<Cq> {
    let mx = mlx5_of(&ctx.inner);
    let l =
        setup::cq_layout(cqe, &mx.limits(ctx)?, mx.page_size).map_err(|e| bad("CREATE_CQ", &e))?;
    let buf = Mapping::anonymous("mlx5 CQ buffer", l.buf_len)?;
    let db = mx.db_pool.alloc()?;
    let uar = mx.uar_ptr(mx.uar.cq_doorbell_page(), 0)?;
    let cfg = provider_mlx5::CqConfig {
        ncqe: l.ncqe,
        cqe_size: l.cqe_size,
        cqn: 0, // known after CREATE_CQ
    };
    // uar: a mapped UAR page (8 bytes at 0x20 inside) the context keeps.
    // SAFETY: buf (a fresh mapping) and db (a 64-byte record slot) are ours
    // and go into the CqInner below, which outlives the queue and releases
    // them only after DESTROY_CQ; uar: see above.
    let mut q = unsafe {
        provider_mlx5::CompletionQueue::new(buf.as_ptr(), buf.len(), db.as_ptr().cast(), uar, cfg)
    }
    .map_err(|e| bad("CREATE_CQ", &e))?;
    let udata = setup::create_cq_udata(
        &l,
        buf.as_ptr().as_ptr() as u64,
        db.as_ptr().as_ptr() as u64,
    );
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateCqResp>()];
    let resp = crate::cq::create_cq_cmd(
        &ctx.inner,
        user_handle,
        l.granted_cqe,
        comp_vector,
        channel,
        udata.as_bytes(),
        &mut out,
    )?;
    let cqn = m::Mlx5IbCreateCqResp::read_from_bytes(&out)
        .map(|r| r.cqn)
        .map_err(|_| Error::bad_answer("CREATE_CQ: short mlx5 response"))?;
    q.set_cqn(cqn);
    // SAFETY: the scanner lives in the registry, which is used only by the
    // Cq and its QPs, all of which hold the CqInner that keeps buf mapped.
    let registry = Arc::new(Registry::new(unsafe { q.scanner() }));
    let inner = Arc::new(CqInner {
        ctx: ctx.inner.clone(),
        handle: resp.cq_handle,
        cqe: l.granted_cqe,
        user_handle,
        _channel: channel.map(|c| c.inner.clone()),
        ring: Mutex::new(None),
        mlx5: Some(CqShared {
            registry: registry.clone(),
            _buf: buf,
            _db: db,
        }),
        events: AtomicU64::new(0),
    });
    if let Some(ch) = channel {
        ch.inner.count_events_of(user_handle, &inner);
    }
    Ok(Cq::from_parts(
        inner,
        Ring::Mlx5(Box::new(Poller::new(q, registry))),
    ))
}

/// `CREATE_QP` over a work-queue buffer (RQ then SQ) and doorbell record of
/// ours; the QP's records are registered with its CQs.
pub(crate) fn create_qp(pd: &Pd, init: &QpInit<'_>) -> Result<Qp> {
    let pdi = &pd.inner;
    let ctx = Context {
        inner: pdi.ctx.clone(),
    };
    let mx = mlx5_of(&pdi.ctx);
    let c = init.caps;
    let qp_type = match init.qp_type {
        QpType::Rc => provider_mlx5::QpType::Rc,
        QpType::Uc => provider_mlx5::QpType::Uc,
        QpType::Ud => provider_mlx5::QpType::Ud,
    };
    let req = setup::QpRequest {
        qp_type,
        max_send_wr: c.max_send_wr,
        max_recv_wr: if init.srq.is_some() { 0 } else { c.max_recv_wr },
        max_send_sge: c.max_send_sge,
        max_recv_sge: c.max_recv_sge,
        max_inline_data: c.max_inline_data,
        srq: init.srq.is_some(),
        sq_sig_all: init.sq_sig_all,
    };
    let l = setup::qp_layout(&req, &mx.limits(&ctx)?, mx.page_size)
        .map_err(|e| bad("CREATE_QP", &e))?;
    if l.sq_wqe_cnt == 0 {
        // The kernel takes a QP without a send queue; the safe API's Qp
        // always has one.
        return Err(Error::invalid(
            "CREATE_QP: max_send_wr 0 (a receive-only QP) is not supported on mlx5 by rverbs yet",
        ));
    }
    let buf = Mapping::anonymous("mlx5 QP buffer", l.buf_len)?;
    let db = mx.db_pool.alloc()?;
    let udata = setup::create_qp_udata(
        &l,
        buf.as_ptr().as_ptr() as u64,
        db.as_ptr().as_ptr() as u64,
        mx.resp.cqe_version,
        setup::DEFAULT_UIDX,
    )
    .map_err(|e| bad("CREATE_QP", &e))?;
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateQpResp>()];
    // rdma-core reports what its own sizing granted, which is also what the
    // generic command carries (the kernel derives nothing else from it).
    let caps = QpCaps {
        max_send_wr: l.max_send_wr,
        max_recv_wr: l.max_recv_wr,
        max_send_sge: l.sq_max_sge,
        max_recv_sge: l.rq_max_sge,
        max_inline_data: l.max_inline,
    };
    let resp = crate::qp::create_qp_cmd(pdi, init, &caps, udata.as_bytes(), &mut out)?;
    // From here on the kernel object exists: QpInner destroys it on error.
    let mut inner = QpInner::new(pdi, init, &resp, caps);
    let qresp = m::Mlx5IbCreateQpResp::read_from_bytes(&out)
        .map_err(|_| Error::bad_answer("CREATE_QP: short mlx5 response"))?;
    let base = buf.as_ptr();
    let dbrec = db.as_ptr().cast::<u32>();
    inner.maps.push(buf);
    inner.dbrec = Some(db);
    let bf = mx
        .uar
        .bfreg(qresp.bfreg_index)
        .map_err(|e| Error::bad_answer(format!("CREATE_QP bfreg: {e}")))?;
    let bf_reg = mx.uar_ptr(bf.page, bf.offset)?;
    let cfg = l.sq_config(resp.qpn, &bf, init.sq_sig_all);
    let sq_len = l.sq_len();
    // The BlueFlame register lies in a UAR page the context keeps mapped,
    // and `bf.blueflame` is set only for a register this QP has to itself.
    // SAFETY: sq_offset + sq_len <= buf_len (layout), in the buffer QpInner
    // keeps until after DESTROY_QP; the SND word is this queue's alone;
    // the register: see above.
    let sq = unsafe {
        provider_mlx5::SendQueue::new(
            NonNull::new_unchecked(base.as_ptr().add(l.sq_offset)),
            sq_len,
            dbrec,
            bf_reg,
            cfg,
        )
    }
    .map_err(|e| Error::bad_answer(format!("CREATE_QP SQ: {e}")))?;
    let rq = if init.srq.is_none() && l.rq_wqe_cnt > 0 {
        let rq_len = l.rq_len();
        // SAFETY: as for the SQ; the RQ is at rq_offset, before the SQ, and
        // writes only the RCV word of the doorbell record.
        let q = unsafe {
            provider_mlx5::RecvQueue::new(
                NonNull::new_unchecked(base.as_ptr().add(l.rq_offset)),
                rq_len,
                dbrec,
                l.rq_wqe_cnt,
                l.rq_wqe_shift,
                l.rq_max_sge,
            )
        }
        .map_err(|e| Error::bad_answer(format!("CREATE_QP RQ: {e}")))?;
        Some(q)
    } else {
        None
    };
    let recv_recs = match (&rq, init.srq) {
        (Some(q), _) => Some(RecvRecs::Rq(q.shared_records())),
        (None, Some(s)) => s
            .inner
            .mlx5
            .as_ref()
            .map(|(_, _, r)| RecvRecs::Srq(r.clone())),
        (None, None) => None,
    };
    let (send_reg, recv_reg) = match (&init.send_cq.inner.mlx5, &init.recv_cq.inner.mlx5) {
        (Some(s), Some(r)) => (s.registry.clone(), r.registry.clone()),
        _ => return Err(Error::invalid("CREATE_QP: an mlx5 QP needs mlx5 CQs")),
    };
    let id = poll::next_id();
    inner.reg_id = id;
    send_reg.add(QpEntry {
        qpn: resp.qpn,
        id,
        sq: Some(sq.shared_records()),
        rq: None,
        until: None,
    });
    recv_reg.add(QpEntry {
        qpn: resp.qpn,
        id,
        sq: None,
        rq: recv_recs,
        until: None,
    });
    Ok(Qp::from_parts(Arc::new(inner), Queues::Mlx5 { sq, rq }))
}

/// `CREATE_SRQ` over a buffer and doorbell record of ours, the free list
/// linked before the kernel sees it.
pub(crate) fn create_srq(
    pd: &Pd,
    max_wr: u32,
    max_sge: u32,
    srq_limit: u32,
    user_handle: u64,
) -> Result<Srq> {
    let pdi = &pd.inner;
    let ctx = Context {
        inner: pdi.ctx.clone(),
    };
    let mx = mlx5_of(&pdi.ctx);
    let l = setup::srq_layout(max_wr, max_sge, &mx.limits(&ctx)?, mx.page_size)
        .map_err(|e| bad("CREATE_SRQ", &e))?;
    let buf = Mapping::anonymous("mlx5 SRQ buffer", l.buf_len)?;
    let db = mx.db_pool.alloc()?;
    // SAFETY: a fresh mapping and a record slot of ours, kept in the
    // SrqInner (held by the Srq) until after DESTROY_SRQ.
    let q = unsafe {
        provider_mlx5::SharedRecvQueue::new(
            buf.as_ptr(),
            buf.len(),
            db.as_ptr().cast(),
            l.wqe_cnt,
            l.wqe_shift,
            l.max_sge,
        )
    }
    .map_err(|e| Error::bad_answer(format!("CREATE_SRQ: {e}")))?;
    let udata = setup::create_srq_udata(
        &l,
        buf.as_ptr().as_ptr() as u64,
        db.as_ptr().as_ptr() as u64,
        mx.resp.cqe_version,
        setup::DEFAULT_UIDX,
    )
    .map_err(|e| bad("CREATE_SRQ", &e))?;
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateSrqResp>()];
    let resp = crate::srq::create_srq_cmd(
        pdi,
        user_handle,
        (l.max_wr, l.max_sge, srq_limit),
        udata.as_bytes(),
        &mut out,
    )?;
    let records = q.shared_records();
    let srq = Srq::from_parts(
        Arc::new(SrqInner {
            ctx: pdi.ctx.clone(),
            _pd: pdi.clone(),
            handle: resp.srq_handle,
            srqn: resp.srqn,
            max_wr: l.max_wr,
            max_sge: l.max_sge,
            user_handle,
            ring: None,
            mlx5: Some((buf, db, records)),
        }),
        SrqQueue::Mlx5(q),
    );
    // mlx5 ignores the limit at creation (mlx5_ib_create_srq); only
    // MODIFY_SRQ arms it.
    if srq_limit > 0 {
        srq.set_limit(srq_limit)?;
    }
    Ok(srq)
}

/// `CREATE_AH` (for the destination MAC on Ethernet) and the address
/// vector every UD send to it carries.
pub(crate) fn create_ah(pd: &Pd, attr: &AhAttr) -> Result<Ah> {
    use provider_mlx5::av::{address_vector, AvAttr, AvGrh};
    let pdi = &pd.inner;
    let ctx = Context {
        inner: pdi.ctx.clone(),
    };
    let mx = mlx5_of(&pdi.ctx);
    let port = ctx.query_port(attr.port_num)?;
    let ethernet = port.link_layer == 2; // IBV_LINK_LAYER_ETHERNET
    let roce_v2 = match attr.grh {
        Some(g) if ethernet => {
            let table = ctx.gid_table(attr.port_num)?;
            let e = table
                .iter()
                .find(|e| e.index == g.sgid_index as u32)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "CREATE_AH: no GID at index {} of port {}",
                        g.sgid_index, attr.port_num
                    ))
                })?;
            e.gid_type == crate::GidType::RoceV2
        }
        _ => false,
    };
    if ethernet && mx.resp.cmds_supp_uhw & m::Mlx5UserCmdsSuppUhw::CREATE_AH.bits() == 0 {
        return Err(Error::UnsupportedDriver {
            device: ctx.device().name().to_string(),
            driver: "mlx5 without the CREATE_AH MAC answer (MLX5_USER_CMDS_SUPP_UHW_CREATE_AH); \
                     rverbs does not resolve neighbours itself"
                .into(),
        });
    }
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateAhResp>()];
    let handle = crate::ah::create_ah_cmd(pdi, attr, &mut out)?;
    let mut inner = AhInner {
        ctx: pdi.ctx.clone(),
        _pd: pdi.clone(),
        handle,
        ah_num: 0,
        mlx5_av: None,
    };
    let r = m::Mlx5IbCreateAhResp::read_from_bytes(&out)
        .map_err(|_| Error::bad_answer("CREATE_AH: mlx5 answer of the wrong size"))?;
    let need = std::mem::offset_of!(m::Mlx5IbCreateAhResp, dmac) + 6;
    if ethernet && (r.response_length as usize) < need {
        return Err(Error::bad_answer(format!(
            "CREATE_AH: the kernel answered {} bytes, without the destination MAC",
            r.response_length
        )));
    }
    let dmac = r.dmac;
    let av = AvAttr {
        dlid: attr.dlid,
        sl: attr.sl,
        src_path_bits: attr.src_path_bits,
        static_rate: attr.static_rate,
        grh: attr.grh.map(|g| AvGrh {
            dgid: g.dgid,
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
        }),
        ethernet,
        roce_v2,
        dmac,
        udp_sport: random_u16(),
    };
    // Built after the AhInner exists, so that an invalid attribute still
    // destroys the kernel's AH (AhInner's drop).
    inner.mlx5_av = Some(address_vector(&av).map_err(|e| bad("CREATE_AH", &e))?);
    Ok(Ah {
        inner: Arc::new(inner),
    })
}

/// A RoCE v2 UDP source port seed (rdma-core draws a random one per AH).
fn random_u16() -> u16 {
    let mut b = [0u8; 2];
    // SAFETY: b is 2 writable bytes; getrandom writes at most that many.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 2, libc::GRND_NONBLOCK) };
    if n == 2 {
        u16::from_ne_bytes(b)
    } else {
        // No entropy yet: any port in the range is correct, just less spread.
        std::process::id() as u16
    }
}

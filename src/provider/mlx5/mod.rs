//! mlx5 (ConnectX): what rverbs does when the device's driver is
//! `mlx5_ib`.
//!
//! mlx5 hands userspace the whole data path. The process allocates every
//! queue buffer and doorbell record itself and passes their addresses to
//! the kernel in the driver udata of `CREATE_CQ`/`CREATE_QP`/`CREATE_SRQ`,
//! which pins them; `GET_CONTEXT` (with the mlx5 request) hands out UAR
//! pages, which we map and ring with plain stores. So, compared with rxe:
//! `GET_CONTEXT` carries udata and is followed by UAR `mmap()`s; objects are
//! created over anonymous mappings we own (kept by the object's control
//! half until the kernel destroyed the object, leaked if it refuses to);
//! posting and polling never enter the kernel (`post`), and a CQ resolves
//! completions through a registry of its QPs' records
//! (`provider_mlx5::registry`: this module creates a CQ's registry, and
//! registers and retires its QPs there). Sizes and udata come from
//! `provider_mlx5::setup`, the address vector of an AH from
//! `provider_mlx5::av`.
//!
//! **Not run on hardware**: there is no ConnectX here. What is verified
//! is listed in the README; this module's kernel commands have never met
//! an mlx5 kernel driver.

mod dbrec;
mod post;
#[cfg(test)]
mod tests;

pub(crate) use post::{post_recv_list, post_send_list, post_srq_recv_list, push_send};
pub(crate) use provider_mlx5::Poller;

use super::{AhParts, CqParts, CqRing, DeviceInfo, QpInit, QpParts, RecvRing};
use super::{Registration as AnyRegistration, SendRing, SrqParts, SrqShared};
use crate::cmd::context::{self, Opened};
use crate::cmd::cq::CqRequest;
use crate::cmd::device::DeviceId;
use crate::cmd::pd::PdHandle;
use crate::cmd::qp::QpCaps;
use crate::cmd::srq::SrqRequest;
use crate::cmd::{self, CommandPath, Dev};
use crate::error::{Error, Result};
use crate::sys::{self, Mapping};
use provider_mlx5::setup::{self, DeviceLimits, UarLayout};
use provider_mlx5::{QpEntry, RecvRecs, Registry};
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use uverbs_abi::ioctl::RdmaDriverId;
use uverbs_abi::mlx5 as m;
use uverbs_abi::verbs as v;
use zerocopy::{FromBytes, IntoBytes};

/// The driver ABI version rverbs speaks.
pub(crate) const ABI: std::ops::RangeInclusive<u32> =
    m::MLX5_IB_UVERBS_ABI_VERSION..=m::MLX5_IB_UVERBS_ABI_VERSION;

/// What an mlx5 context keeps: the driver's answer to `GET_CONTEXT` and
/// the UAR pages mapped from it.
pub(crate) struct Ctx {
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

/// `GET_CONTEXT` with the mlx5 request (through `write()`, which carries
/// driver udata on every kernel), then the UAR `mmap()`s.
pub(crate) fn open(id: &DeviceId, fd: OwnedFd) -> Result<(Arc<Dev>, Opened, super::Ctx)> {
    let mut dev = Dev::new(fd, &id.name, RdmaDriverId::MLX5.0, CommandPath::Write);
    let page = sys::page_size();
    let req = setup::ucontext_request(page);
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbAllocUcontextResp>()];
    let opened = context::get_context(&mut dev, req.as_bytes(), &mut out)?;
    let dev = Arc::new(dev);
    let resp = m::Mlx5IbAllocUcontextResp::read_from_bytes(&out)
        .map_err(|_| Error::bad_answer("GET_CONTEXT: mlx5 response of the wrong size"))?;
    let uar = setup::uar_layout(&req, &resp, page)
        .map_err(|e| Error::bad_answer(format!("GET_CONTEXT: mlx5 UARs: {e}")))?;
    let mut uar_maps = Vec::new();
    for p in 0..uar.pages {
        uar_maps.push(Mapping::shared_write_only(
            dev.fd.as_fd(),
            "mmap of an mlx5 UAR page",
            page,
            uar.mmap_offset(p, page as u64),
        )?);
    }
    let ctx = Ctx {
        resp,
        uar,
        uar_maps,
        page_size: page,
        db_pool: Arc::new(dbrec::DbPool::new(page)),
        limits: std::sync::OnceLock::new(),
    };
    Ok((dev, opened, super::Ctx::Mlx5(ctx)))
}

/// `ALLOC_PD`: mlx5 answers with `struct mlx5_ib_alloc_pd_resp { pdn; }`
/// and copies it whatever room we gave, so room must be there.
pub(crate) fn alloc_pd(dev: &Arc<Dev>) -> Result<PdHandle> {
    let mut out = [0u8; std::mem::size_of::<m::Mlx5IbAllocPdResp>()];
    cmd::pd::alloc(dev, &mut out)
}

fn bad(op: &str, e: &dyn std::fmt::Display) -> Error {
    Error::invalid(format!("{op}: {e}"))
}

/// The CQ's registry, which its QPs register with.
pub(crate) struct CqShared {
    pub(crate) registry: Arc<Registry>,
}

/// A QP's entries in its CQs' registries: retired when dropped, which the
/// QP does after DESTROY_QP (see `provider_mlx5::registry`).
pub(crate) struct Registration {
    id: u64,
    registries: [Arc<Registry>; 2],
}

impl Drop for Registration {
    fn drop(&mut self) {
        for r in &self.registries {
            r.retire(self.id);
        }
    }
}

impl Ctx {
    /// The device limits, queried once per context (as rdma-core caches
    /// its device attributes) rather than at every create.
    fn limits(&self, info: &dyn DeviceInfo) -> Result<DeviceLimits> {
        if let Some(l) = self.limits.get() {
            return Ok(*l);
        }
        let (max_sge, max_cqe) = info.sge_and_cqe_limits()?;
        let l = DeviceLimits::from_context(&self.resp, max_sge, max_cqe);
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

    /// `CREATE_CQ` over a CQE buffer and doorbell record of ours.
    pub(crate) fn create_cq(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        req: &CqRequest,
    ) -> Result<CqParts> {
        let l = setup::cq_layout(req.cqe, &self.limits(info)?, self.page_size)
            .map_err(|e| bad("CREATE_CQ", &e))?;
        let buf = Mapping::for_device("mlx5 CQ buffer", l.buf_len)?;
        let db = self.db_pool.alloc()?;
        let uar = self.uar_ptr(self.uar.cq_doorbell_page(), 0)?;
        let cfg = provider_mlx5::CqConfig {
            ncqe: l.ncqe,
            cqe_size: l.cqe_size,
            cqn: 0, // known after CREATE_CQ
        };
        // uar: a mapped UAR page (8 bytes at 0x20 inside) the context keeps.
        // SAFETY: buf (a fresh mapping) and db (a 64-byte record slot) are
        // ours and go into the CQ's control half below, which outlives the
        // queue (every user of the queue holds the CQ) and releases them
        // only after DESTROY_CQ; uar: see above.
        let mut q = unsafe {
            provider_mlx5::CompletionQueue::new(
                buf.as_ptr(),
                buf.len(),
                db.as_ptr().cast(),
                uar,
                cfg,
            )
        }
        .map_err(|e| bad("CREATE_CQ", &e))?;
        let udata = setup::create_cq_udata(
            &l,
            buf.as_ptr().as_ptr() as u64,
            db.as_ptr().as_ptr() as u64,
        );
        let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateCqResp>()];
        let mut want = *req;
        want.cqe = l.granted_cqe;
        let (mut handle, _) = match cmd::cq::create(dev, &want, udata.as_bytes(), &mut out) {
            Ok(h) => h,
            Err(e) => {
                // The kernel made nothing: the memory is ours again.
                return Err(e);
            }
        };
        handle.keep(buf);
        handle.keep(db);
        let cqn = m::Mlx5IbCreateCqResp::read_from_bytes(&out)
            .map(|r| r.cqn)
            .map_err(|_| Error::bad_answer("CREATE_CQ: short mlx5 response"))?;
        q.set_cqn(cqn);
        // SAFETY: the scanner lives in the registry, which is used only by
        // the Cq and its QPs, all of which hold the CQ's control half that
        // keeps the buffer mapped.
        let registry = Arc::new(Registry::new(unsafe { q.scanner() }));
        Ok(CqParts {
            handle,
            cqe: l.granted_cqe,
            ring: CqRing::Mlx5(Box::new(Poller::new(q, registry.clone()))),
            shared: super::CqShared::Mlx5(CqShared { registry }),
        })
    }

    /// `CREATE_QP` over a work-queue buffer (RQ then SQ) and doorbell
    /// record of ours; the QP's records are registered with its CQs.
    pub(crate) fn create_qp(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        init: &QpInit<'_>,
    ) -> Result<QpParts> {
        let (send_reg, recv_reg) = match (init.send_cq, init.recv_cq) {
            (super::CqShared::Mlx5(s), super::CqShared::Mlx5(r)) => {
                (s.registry.clone(), r.registry.clone())
            }
            _ => return Err(Error::invalid("CREATE_QP: an mlx5 QP needs mlx5 CQs")),
        };
        let c = init.cmd.caps;
        let qp_type = init.qp_type;
        let srq = init.srq.is_some();
        let req = setup::QpRequest {
            qp_type,
            max_send_wr: c.max_send_wr,
            // With an SRQ, checked against the device but not sized.
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
            srq,
            sq_sig_all: init.cmd.sq_sig_all,
        };
        let l = setup::qp_layout(&req, &self.limits(info)?, self.page_size)
            .map_err(|e| bad("CREATE_QP", &e))?;
        if l.sq_wqe_cnt == 0 {
            // The kernel takes a QP without a send queue; the safe API's Qp
            // always has one.
            return Err(Error::invalid(
                "CREATE_QP: max_send_wr 0 (a receive-only QP) is not supported on mlx5 by rverbs yet",
            ));
        }
        let buf = Mapping::for_device("mlx5 QP buffer", l.buf_len)?;
        let db = self.db_pool.alloc()?;
        let udata = setup::create_qp_udata(
            &l,
            buf.as_ptr().as_ptr() as u64,
            db.as_ptr().as_ptr() as u64,
            self.resp.cqe_version,
            setup::DEFAULT_UIDX,
        )
        .map_err(|e| bad("CREATE_QP", &e))?;
        let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateQpResp>()];
        // rdma-core reports what its own sizing granted, which is also what
        // the generic command carries (the kernel derives nothing else from
        // it).
        let caps = QpCaps {
            max_send_wr: l.max_send_wr,
            max_recv_wr: l.max_recv_wr,
            max_send_sge: l.sq_max_sge,
            max_recv_sge: l.rq_max_sge,
            max_inline_data: l.max_inline,
        };
        let mut want = init.cmd;
        want.caps = caps;
        let mut created = cmd::qp::create(dev, &want, udata.as_bytes(), &mut out)?;
        let base = buf.as_ptr();
        let dbrec = db.as_ptr().cast::<u32>();
        // From here on the kernel object exists: its control half keeps the
        // buffer and record until DESTROY_QP has succeeded.
        created.handle.keep(buf);
        created.handle.keep(db);
        let qresp = m::Mlx5IbCreateQpResp::read_from_bytes(&out)
            .map_err(|_| Error::bad_answer("CREATE_QP: short mlx5 response"))?;
        let bf = self
            .uar
            .bfreg(qresp.bfreg_index)
            .map_err(|e| Error::bad_answer(format!("CREATE_QP bfreg: {e}")))?;
        let bf_reg = self.uar_ptr(bf.page, bf.offset)?;
        let cfg = l.sq_config(created.qpn, &bf, init.cmd.sq_sig_all);
        let sq_len = l.sq_len();
        // The BlueFlame register lies in a UAR page the context keeps
        // mapped, and `bf.blueflame` is set only for a register this QP has
        // to itself.
        // SAFETY: sq_offset + sq_len <= buf_len (layout), in the buffer the
        // QP's control half keeps until after DESTROY_QP; the SND word is
        // this queue's alone; the register: see above.
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
        let rq = if !srq && l.rq_wqe_cnt > 0 {
            let rq_len = l.rq_len();
            // SAFETY: as for the SQ; the RQ is at rq_offset, before the SQ,
            // and writes only the RCV word of the doorbell record.
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
            (None, Some(SrqShared::Mlx5(r))) => Some(RecvRecs::Srq(r.clone())),
            (None, _) => None,
        };
        let id = provider_mlx5::next_id();
        send_reg.add(QpEntry::new(
            created.qpn,
            id,
            Some(sq.shared_records()),
            None,
        ));
        recv_reg.add(QpEntry::new(created.qpn, id, None, recv_recs));
        Ok(QpParts {
            created,
            caps,
            send: SendRing::Mlx5(sq),
            recv: rq.map(RecvRing::Mlx5),
            registration: AnyRegistration::Mlx5 {
                _entries: Registration {
                    id,
                    registries: [send_reg, recv_reg],
                },
            },
        })
    }

    /// `CREATE_SRQ` over a buffer and doorbell record of ours, the free list
    /// linked before the kernel sees it.
    pub(crate) fn create_srq(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        req: &SrqRequest,
    ) -> Result<SrqParts> {
        let l = setup::srq_layout(req.max_wr, req.max_sge, &self.limits(info)?, self.page_size)
            .map_err(|e| bad("CREATE_SRQ", &e))?;
        let buf = Mapping::for_device("mlx5 SRQ buffer", l.buf_len)?;
        let db = self.db_pool.alloc()?;
        // SAFETY: a fresh mapping and a record slot of ours, kept by the
        // SRQ's control half until after DESTROY_SRQ.
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
            self.resp.cqe_version,
            setup::DEFAULT_UIDX,
        )
        .map_err(|e| bad("CREATE_SRQ", &e))?;
        let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateSrqResp>()];
        let mut want = *req;
        want.max_wr = l.max_wr;
        want.max_sge = l.max_sge;
        let (mut handle, resp) = cmd::srq::create(dev, &want, udata.as_bytes(), &mut out)?;
        handle.keep(buf);
        handle.keep(db);
        let records = q.shared_records();
        let parts = SrqParts {
            handle,
            srqn: resp.srqn,
            max_wr: l.max_wr,
            ring: RecvRing::Mlx5Srq(q),
            shared: SrqShared::Mlx5(records),
        };
        // mlx5 ignores the limit at creation (mlx5_ib_create_srq); only
        // MODIFY_SRQ arms it.
        if req.srq_limit > 0 {
            parts
                .shared
                .set_limit(dev, parts.handle.raw(), req.srq_limit)?;
        }
        Ok(parts)
    }

    /// `CREATE_AH` (for the destination MAC on Ethernet) and the address
    /// vector every UD send to it carries.
    pub(crate) fn create_ah(
        &self,
        dev: &Arc<Dev>,
        info: &dyn DeviceInfo,
        pd: u32,
        attr: &v::IbUverbsAhAttr,
    ) -> Result<AhParts> {
        use provider_mlx5::av::{address_vector, AvAttr, AvGrh};
        let ethernet = info.link_layer(attr.port_num)? == 2; // IBV_LINK_LAYER_ETHERNET
        let global = attr.is_global != 0;
        let roce_v2 =
            ethernet && global && info.gid_is_roce_v2(attr.port_num, attr.grh.sgid_index)?;
        if ethernet && self.resp.cmds_supp_uhw & m::Mlx5UserCmdsSuppUhw::CREATE_AH.bits() == 0 {
            return Err(Error::UnsupportedDriver {
                device: info.device_name(),
                driver:
                    "mlx5 without the CREATE_AH MAC answer (MLX5_USER_CMDS_SUPP_UHW_CREATE_AH); \
                         rverbs does not resolve neighbours itself"
                        .into(),
            });
        }
        let mut out = [0u8; std::mem::size_of::<m::Mlx5IbCreateAhResp>()];
        // From here on, an error drops the handle, which destroys the AH.
        let handle = cmd::ah::create(dev, pd, attr, &mut out)?;
        let r = m::Mlx5IbCreateAhResp::read_from_bytes(&out)
            .map_err(|_| Error::bad_answer("CREATE_AH: mlx5 answer of the wrong size"))?;
        let need = std::mem::offset_of!(m::Mlx5IbCreateAhResp, dmac) + 6;
        if ethernet && (r.response_length as usize) < need {
            return Err(Error::bad_answer(format!(
                "CREATE_AH: the kernel answered {} bytes, without the destination MAC",
                r.response_length
            )));
        }
        let g = &attr.grh;
        let av = AvAttr {
            dlid: attr.dlid,
            sl: attr.sl,
            src_path_bits: attr.src_path_bits,
            static_rate: attr.static_rate,
            grh: global.then_some(AvGrh {
                dgid: g.dgid,
                flow_label: g.flow_label,
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
            }),
            ethernet,
            roce_v2,
            dmac: r.dmac,
            // rdma-core draws a random UDP source port seed per AH; with
            // no entropy yet any port in the range is correct, just less
            // spread.
            udp_sport: sys::random_u16().unwrap_or(std::process::id() as u16),
        };
        let av = address_vector(&av).map_err(|e| bad("CREATE_AH", &e))?;
        Ok(AhParts {
            handle,
            addr: av.ah_addr(),
        })
    }
}

//! Connection management (rdma_cm) on rverbs: ids whose QPs the connection
//! drives, as librdmacm does, over the `rverbs-cm` ABI client.
//!
//! A [`CmChannel`] is one open of `/dev/infiniband/rdma_cm`; every id made
//! on it reports its events there. [`CmChannel::get_event`] reads the next
//! one and does what librdmacm does before handing it over:
//!
//! - `CONNECT_REQUEST`: the kernel's new id becomes a [`CmId`] in
//!   [`CmEvent::request`] (drop it to refuse the connection);
//! - `CONNECT_RESPONSE` on an id with a QP: the QP goes to RTR and RTS with
//!   the attributes the kernel negotiated (`INIT_QP_ATTR`), the RTU is sent,
//!   and the event is reported as `ESTABLISHED` (or `CONNECT_ERROR` if a
//!   step failed);
//! - `REJECTED`, `UNREACHABLE`, `CONNECT_ERROR`, `DISCONNECTED`,
//!   `DEVICE_REMOVAL`: the id's QP goes to ERR, so outstanding work
//!   flushes.
//!
//! [`CmId::create_qp`] creates the QP on the id's device and moves it to
//! INIT; [`CmId::accept`] moves it to RTR/RTS before accepting. The user
//! never modifies a connected QP. The QP itself is the user's: posting
//! needs no lock and no cm involvement.
//!
//! The synchronous helpers ([`CmId::resolve`], [`CmId::connect_sync`],
//! [`CmId::wait_event`]) read the id's channel and expect the events to be
//! its own: give such an id a channel of its own, as librdmacm's
//! synchronous mode does. Servers with many ids use one channel and
//! dispatch on [`CmEvent::uid`].
//!
//! Events need no acknowledgement: each is a plain value, and an id's
//! kernel object lives until the id and every event still being processed
//! for it are gone.

use crate::context::ContextInner;
use crate::error::{Error, Result};
use crate::qp::{Qp, QpInit, QpInner, QpType};
use crate::{Context, Device, Pd};
use rverbs_cm as raw;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use uverbs_abi::verbs::IbUverbsQpAttr;

pub use rverbs_cm::{
    AddrInfo, ConnParam, EventType, IdOption, JoinFlags, PortSpace, UdParam, MAX_DEPTH,
};

mod addrinfo;
mod mcast;
mod options;

pub use addrinfo::{getaddrinfo, AddrHints, RdmaAddrInfo};

// `IB_QPS_*` for INIT_QP_ATTR.
const QPS_INIT: u32 = 1;
const QPS_RTR: u32 = 2;
const QPS_RTS: u32 = 3;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The contexts cm ids use, one per device (by node GUID): as librdmacm
/// opens every device once, a PD allocated on one id's context serves the
/// QPs of every id on that device. The table holds them weakly: a context
/// closes with its last user (an id, or an object made on it), so a device
/// whose users are all gone can be deleted (`rverbs link delete`) while the
/// process lives on.
fn device_context(guid: u64) -> Result<Context> {
    /// Node GUID → the context open on that device, if still in use.
    type Table = Mutex<Vec<(u64, Weak<ContextInner>)>>;
    static CONTEXTS: OnceLock<Table> = OnceLock::new();
    let mut all = lock(CONTEXTS.get_or_init(|| Mutex::new(Vec::new())));
    all.retain(|(_, w)| w.strong_count() > 0);
    if let Some(inner) = all
        .iter()
        .find(|(g, _)| *g == guid)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(Context { inner });
    }
    let dev = Device::list()?
        .into_iter()
        .find(|d| d.node_guid() == guid)
        .ok_or_else(|| {
            Error::invalid(format!(
                "the rdma_cm id is bound to node GUID {guid:016x}, which no listed device has"
            ))
        })?;
    let ctx = Context::open(&dev)?;
    all.push((guid, Arc::downgrade(&ctx.inner)));
    Ok(ctx)
}

/// An rdma_cm event channel with the ids created on it.
pub struct CmChannel {
    raw: Arc<raw::EventChannel>,
    ids: Mutex<HashMap<u64, Arc<IdShared>>>,
}

/// The next id's uid: one counter for the process, not one per channel,
/// because an id keeps its uid when it migrates (`MIGRATE_ID`), and two
/// ids of one channel must never share one (events are dispatched by it).
fn next_uid() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl std::fmt::Debug for CmChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmChannel")
            .field("ids", &lock(&self.ids).len())
            .finish()
    }
}

struct IdShared {
    raw: Mutex<raw::Id>,
    st: Mutex<IdState>,
}

#[derive(Default)]
struct IdState {
    qp: Option<Arc<QpInner>>,
    qp_type: Option<QpType>,
    ctx: Option<Context>,
    /// The read depths of the connection (librdmacm's `initiator_depth`
    /// and `responder_resources`): from the peer's request on the passive
    /// side, capped by the device.
    initiator_depth: u8,
    responder_resources: u8,
    /// The multicast groups joined.
    mcs: Vec<mcast::Membership>,
}

/// One rdma_cm event, after rverbs' processing (see the [module](self)
/// docs).
#[derive(Debug)]
pub struct CmEvent {
    /// What happened (`CONNECT_RESPONSE` on an id with a QP is reported as
    /// `ESTABLISHED`).
    pub kind: EventType,
    /// 0, a negative errno, or a reject reason (`REJECTED`: 28 = the peer
    /// rejected, 8 = nobody listens on that port).
    pub status: i32,
    /// The uid of the id the event is about; for `CONNECT_REQUEST`, the
    /// listener's.
    pub uid: u64,
    /// The peer's connection parameters and private data.
    pub conn: ConnParam,
    /// UD parameters (`RDMA_PS_UDP` ids).
    pub ud: UdParam,
    /// For `CONNECT_REQUEST`: the new id of the incoming connection.
    pub request: Option<CmId>,
    /// For `MULTICAST_JOIN` / `MULTICAST_ERROR`: the group's address.
    pub mcast: Option<SocketAddr>,
}

impl CmEvent {
    /// The address vector of a UD event: the peer a UD `ESTABLISHED`
    /// resolved, or the group of a `MULTICAST_JOIN` — what
    /// [`Pd::create_ah`](crate::pd::Pd::create_ah) takes to send there (with
    /// [`CmEvent::ud`]'s `qp_num` and `qkey`).
    pub fn ah_attr(&self) -> crate::ah::AhAttr {
        ud_ah_attr(&self.ud)
    }

    /// `RDMA_CM_EVENT_…`, as librdmacm's `rdma_event_str` names it.
    pub fn name(&self) -> String {
        match self.kind.name() {
            Some(n) => n.to_string(),
            None => format!("UNKNOWN EVENT {}", self.kind.0),
        }
    }
}

impl CmChannel {
    /// Opens `/dev/infiniband/rdma_cm`.
    pub fn new() -> Result<Arc<CmChannel>> {
        Ok(Arc::new(CmChannel {
            raw: Arc::new(raw::EventChannel::open()?),
            ids: Mutex::new(HashMap::new()),
        }))
    }

    /// The channel's fd (readable when an event is queued).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.raw.as_fd()
    }

    /// Waits up to `timeout_ms` (-1: forever) for an event; `false` on
    /// timeout.
    pub fn poll(&self, timeout_ms: i32) -> Result<bool> {
        Ok(self.raw.poll(timeout_ms)?)
    }

    /// Makes [`get_event`](Self::get_event) fail with `EAGAIN` rather than
    /// block.
    pub fn set_nonblocking(&self, nonblocking: bool) -> Result<()> {
        Ok(self.raw.set_nonblocking(nonblocking)?)
    }

    /// Creates an id in port space `ps` (`TCP`: RC; `UDP`: UD).
    pub fn create_id(self: &Arc<Self>, ps: PortSpace) -> Result<CmId> {
        let uid = next_uid();
        let id = raw::Id::create(&self.raw, uid, ps)?;
        Ok(self.register(id, IdState::default()))
    }

    fn register(self: &Arc<Self>, id: raw::Id, st: IdState) -> CmId {
        let uid = id.uid();
        let shared = Arc::new(IdShared {
            raw: Mutex::new(id),
            st: Mutex::new(st),
        });
        lock(&self.ids).insert(uid, shared.clone());
        CmId {
            chan: self.clone(),
            shared,
            uid,
        }
    }

    /// Takes the next event (blocking, unless non-blocking) and processes it
    /// as the [module](self) docs say.
    pub fn get_event(self: &Arc<Self>) -> Result<CmEvent> {
        let ev = self.raw.get_event()?;
        let shared = lock(&self.ids).get(&ev.uid).cloned();
        let mut out = CmEvent {
            kind: ev.kind,
            status: ev.status,
            uid: ev.uid,
            conn: ev.conn.clone(),
            ud: ev.ud.clone(),
            request: None,
            mcast: None,
        };
        match ev.kind {
            EventType::CONNECT_REQUEST => {
                let ps = match &shared {
                    Some(s) => lock(&s.raw).port_space(),
                    None => PortSpace::TCP,
                };
                let uid = next_uid();
                let id = raw::Id::adopt(&self.raw, &ev, uid, ps)?;
                let st = IdState {
                    initiator_depth: ev.conn.initiator_depth,
                    responder_resources: ev.conn.responder_resources,
                    ..IdState::default()
                };
                out.request = Some(self.register(id, st));
            }
            EventType::CONNECT_RESPONSE => {
                if let Some(s) = &shared {
                    if lock(&s.st).qp.is_some() {
                        match s.complete_connect() {
                            Ok(()) => out.kind = EventType::ESTABLISHED,
                            Err(e) => {
                                s.qp_to_error();
                                out.kind = EventType::CONNECT_ERROR;
                                out.status = -e.errno().map_or(libc::EIO, |e| e.0);
                            }
                        }
                    }
                }
            }
            EventType::MULTICAST_JOIN | EventType::MULTICAST_ERROR => {
                if let Some(s) = &shared {
                    s.mcast_event(ev.uid, &mut out);
                }
            }
            EventType::REJECTED
            | EventType::UNREACHABLE
            | EventType::CONNECT_ERROR
            | EventType::DISCONNECTED
            | EventType::DEVICE_REMOVAL => {
                if let Some(s) = &shared {
                    s.qp_to_error();
                }
            }
            _ => {}
        }
        Ok(out)
    }
}

impl IdShared {
    fn qp_to_error(&self) {
        if let Some(qp) = lock(&self.st).qp.clone() {
            // Best effort: the QP may already be in ERR or RESET.
            let _ = qp.to_error();
        }
    }

    fn init_qp_attr(&self, state: u32) -> Result<IbUverbsQpAttr> {
        Ok(lock(&self.raw).init_qp_attr(state)?)
    }

    /// INIT (again, now that the connection set the access flags), RTR and
    /// RTS from the kernel's answers, with the connection's read depths.
    fn qp_to_rts(&self, qp: &QpInner, responder_resources: u8, initiator_depth: u8) -> Result<()> {
        let init = self.init_qp_attr(QPS_INIT)?;
        qp.modify_kernel_attr(&init)?;
        let mut rtr = self.init_qp_attr(QPS_RTR)?;
        if responder_resources != MAX_DEPTH {
            rtr.max_dest_rd_atomic = responder_resources;
        }
        qp.modify_kernel_attr(&rtr)?;
        let mut rts = self.init_qp_attr(QPS_RTS)?;
        if initiator_depth != MAX_DEPTH {
            rts.max_rd_atomic = initiator_depth;
        }
        qp.modify_kernel_attr(&rts)
    }

    /// The active side after `CONNECT_RESPONSE`: RTR, RTS, then the RTU.
    fn complete_connect(&self) -> Result<()> {
        let qp = lock(&self.st).qp.clone();
        if let Some(qp) = qp {
            // As librdmacm: the depths the kernel negotiated stand.
            self.qp_to_rts(&qp, MAX_DEPTH, MAX_DEPTH)?;
        }
        Ok(lock(&self.raw).establish()?)
    }
}

/// An rdma_cm id (`rdma_cm_id`). Dropping it destroys the kernel id (a
/// connection it holds goes away; its QP, if any, stays the user's).
pub struct CmId {
    chan: Arc<CmChannel>,
    shared: Arc<IdShared>,
    uid: u64,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId")
            .field("uid", &self.uid)
            .field("handle", &lock(&self.shared.raw).handle())
            .finish()
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // The kernel id is destroyed when the last reference goes: this
        // one, or an event being processed right now.
        self.shared.drop_memberships(&self.chan);
        lock(&self.chan.ids).remove(&self.uid);
    }
}

impl CmId {
    /// The value this id's events carry in [`CmEvent::uid`].
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// The channel the id's events arrive on.
    pub fn channel(&self) -> &Arc<CmChannel> {
        &self.chan
    }

    fn raw(&self) -> MutexGuard<'_, raw::Id> {
        lock(&self.shared.raw)
    }

    /// Binds to a local address; port 0 picks one, an unspecified address
    /// listens on every RDMA device.
    pub fn bind(&self, addr: &SocketAddr) -> Result<()> {
        Ok(self.raw().bind(addr)?)
    }

    /// Starts address resolution: `ADDR_RESOLVED` or `ADDR_ERROR` follows.
    pub fn resolve_addr(
        &self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        Ok(self.raw().resolve_addr(src, dst, timeout_ms)?)
    }

    /// Starts route resolution: `ROUTE_RESOLVED` or `ROUTE_ERROR` follows.
    pub fn resolve_route(&self, timeout_ms: u32) -> Result<()> {
        Ok(self.raw().resolve_route(timeout_ms)?)
    }

    /// Listens for connection requests.
    pub fn listen(&self, backlog: u32) -> Result<()> {
        Ok(self.raw().listen(backlog)?)
    }

    /// Where the id is bound and connected.
    pub fn query_addr(&self) -> Result<AddrInfo> {
        Ok(self.raw().query_addr()?)
    }

    /// The bound local address (with the port the kernel picked).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.query_addr()?
            .src
            .ok_or_else(|| Error::invalid("the rdma_cm id is not bound"))
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        self.query_addr()?
            .dst
            .ok_or_else(|| Error::invalid("the rdma_cm id has no peer"))
    }

    /// The number of path records of the resolved route.
    pub fn num_paths(&self) -> Result<u32> {
        Ok(self.raw().query_num_paths()?)
    }

    /// The context of the device the id is bound to (after a bind to a
    /// device's address, address resolution, or for a connection request):
    /// one shared context per device.
    pub fn context(&self) -> Result<Context> {
        if let Some(c) = &lock(&self.shared.st).ctx {
            return Ok(c.clone());
        }
        let info = self.query_addr()?;
        if info.node_guid == 0 {
            return Err(Error::invalid(
                "the rdma_cm id is not bound to a device yet (bind to an RDMA address or resolve one)",
            ));
        }
        let ctx = device_context(info.node_guid)?;
        lock(&self.shared.st).ctx = Some(ctx.clone());
        Ok(ctx)
    }

    /// The device port the id is bound to.
    pub fn port_num(&self) -> Result<u8> {
        Ok(self.query_addr()?.port_num)
    }

    /// Creates the id's QP on `pd` (which must belong to
    /// [`context`](Self::context)) and moves it to INIT (RC/UC) or up to RTS (UD) with
    /// the kernel's attributes. The QP is returned to post on; the id keeps
    /// a handle to drive its states.
    pub fn create_qp(&self, pd: &Pd, init: &QpInit<'_>) -> Result<Qp> {
        let ctx = self.context()?;
        if !Arc::ptr_eq(&pd.inner.ctx, &ctx.inner) {
            return Err(Error::invalid(
                "the PD is not on the rdma_cm id's device context (use id.context()?.alloc_pd())",
            ));
        }
        if lock(&self.shared.st).qp.is_some() {
            return Err(Error::invalid("the rdma_cm id already has a QP"));
        }
        let qp = pd.create_qp(init)?;
        let control = qp.control();
        let init_attr = self.shared.init_qp_attr(QPS_INIT)?;
        control.modify_kernel_attr(&init_attr)?;
        if init.qp_type == QpType::Ud {
            // UD needs no peer: straight to RTS, as librdmacm does.
            let rtr = IbUverbsQpAttr {
                qp_attr_mask: crate::qp::attr::mask::STATE,
                qp_state: QPS_RTR,
                ..IbUverbsQpAttr::default()
            };
            control.modify_kernel_attr(&rtr)?;
            let rts = IbUverbsQpAttr {
                qp_attr_mask: crate::qp::attr::mask::STATE | crate::qp::attr::mask::SQ_PSN,
                qp_state: QPS_RTS,
                ..IbUverbsQpAttr::default()
            };
            control.modify_kernel_attr(&rts)?;
        }
        let mut st = lock(&self.shared.st);
        st.qp = Some(control);
        st.qp_type = Some(init.qp_type);
        Ok(qp)
    }

    fn device_depths(&self) -> Result<(u8, u8)> {
        let a = self.context()?.query_device()?;
        let cap = |v: u32| v.min(u32::from(u8::MAX - 1)) as u8;
        Ok((cap(a.max_qp_init_rd_atom), cap(a.max_qp_rd_atom)))
    }

    /// What goes on the wire: the QP number, the SRQ flag, the depths.
    fn wire_param(&self, p: &ConnParam, depths: (u8, u8)) -> ConnParam {
        let st = lock(&self.shared.st);
        let mut k = p.clone();
        if let Some(qp) = &st.qp {
            k.qp_num = qp.qpn();
            k.srq = qp.uses_srq();
        }
        k.initiator_depth = depths.0;
        k.responder_resources = depths.1;
        k
    }

    /// Sends the connection request. With a QP, the response completes the
    /// connection (RTR, RTS, RTU) inside [`CmChannel::get_event`], which
    /// reports `ESTABLISHED`. Depths of [`MAX_DEPTH`] mean "what the device
    /// allows".
    pub fn connect(&self, p: &ConnParam) -> Result<()> {
        let (max_init, max_resp) = self.device_depths()?;
        let init = if p.initiator_depth == MAX_DEPTH {
            max_init
        } else {
            p.initiator_depth
        };
        let resp = if p.responder_resources == MAX_DEPTH {
            max_resp
        } else {
            p.responder_resources
        };
        {
            let mut st = lock(&self.shared.st);
            st.initiator_depth = init;
            st.responder_resources = resp;
        }
        let k = self.wire_param(p, (init, resp));
        Ok(self.raw().connect(&k)?)
    }

    /// Accepts a connection request: moves the QP (if any, not UD) to RTR
    /// and RTS, then `ACCEPT`. Depths of [`MAX_DEPTH`] take the peer's,
    /// capped by the device. `ESTABLISHED` follows.
    pub fn accept(&self, p: &ConnParam) -> Result<()> {
        let (max_init, max_resp) = self.device_depths()?;
        let (init, resp, qp, ud) = {
            let mut st = lock(&self.shared.st);
            if p.initiator_depth == MAX_DEPTH {
                st.initiator_depth = st.initiator_depth.min(max_init);
            } else {
                st.initiator_depth = p.initiator_depth;
            }
            if p.responder_resources == MAX_DEPTH {
                st.responder_resources = st.responder_resources.min(max_resp);
            } else {
                st.responder_resources = p.responder_resources;
            }
            (
                st.initiator_depth,
                st.responder_resources,
                st.qp.clone(),
                st.qp_type == Some(QpType::Ud),
            )
        };
        if let (Some(qp), false) = (&qp, ud) {
            self.shared.qp_to_rts(qp, resp, init)?;
        }
        let k = self.wire_param(p, (init, resp));
        let r = self.raw().accept(&k);
        if r.is_err() {
            self.shared.qp_to_error();
        }
        Ok(r?)
    }

    /// Rejects a connection request with private data (the peer gets
    /// `REJECTED`, status 28, and the data).
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        Ok(self.raw().reject(private_data)?)
    }

    /// Disconnects: the QP goes to ERR (outstanding work flushes), then
    /// `DISCONNECT`; both sides get `DISCONNECTED`.
    pub fn disconnect(&self) -> Result<()> {
        self.shared.qp_to_error();
        Ok(self.raw().disconnect()?)
    }

    /// For an id without a QP whose user drove the QP itself: the RTU after
    /// `CONNECT_RESPONSE`.
    pub fn establish(&self) -> Result<()> {
        Ok(self.raw().establish()?)
    }

    /// The kernel's attributes for a move of a user-driven QP to `state`
    /// (`IB_QPS_*`), as `rdma_init_qp_attr`.
    pub fn init_qp_attr(&self, state: u32) -> Result<IbUverbsQpAttr> {
        self.shared.init_qp_attr(state)
    }

    /// Moves the id to another channel; its later events arrive there.
    pub fn migrate(&mut self, to: &Arc<CmChannel>) -> Result<()> {
        self.raw().migrate(&to.raw)?;
        // The id's uid and its memberships' (their events move with it).
        let mut uids = vec![self.uid];
        uids.extend(lock(&self.shared.st).mcs.iter().map(|m| m.uid));
        let mut from = lock(&self.chan.ids);
        for uid in &uids {
            from.remove(uid);
        }
        drop(from);
        let mut into = lock(&to.ids);
        for uid in uids {
            into.insert(uid, self.shared.clone());
        }
        drop(into);
        self.chan = to.clone();
        Ok(())
    }

    /// Reads the next event of the id's channel and checks it is `expected`
    /// and this id's; anything else is an [`Error::CmEvent`] naming what
    /// came (for an id on a channel of its own).
    pub fn wait_event(&self, expected: EventType) -> Result<CmEvent> {
        let ev = self.chan.get_event()?;
        if ev.kind != expected || (ev.uid != self.uid && ev.kind != EventType::CONNECT_REQUEST) {
            return Err(Error::CmEvent {
                expected: Some(expected),
                got: ev.kind,
                other_id: ev.uid != self.uid,
                status: ev.status,
                private_data: ev.conn.private_data.clone(),
            });
        }
        Ok(ev)
    }

    /// Resolves `dst` (address, then route), waiting for both.
    pub fn resolve(
        &self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        self.resolve_addr(src, dst, timeout_ms)?;
        self.wait_event(EventType::ADDR_RESOLVED)?;
        self.resolve_route(timeout_ms)?;
        self.wait_event(EventType::ROUTE_RESOLVED)?;
        Ok(())
    }

    /// Connects and waits until the connection is established; returns the
    /// peer's parameters (and its private data).
    pub fn connect_sync(&self, p: &ConnParam) -> Result<ConnParam> {
        self.connect(p)?;
        Ok(self.wait_event(EventType::ESTABLISHED)?.conn)
    }
}

/// The address vector a UD event carries (see [`CmEvent::ah_attr`]).
pub(crate) fn ud_ah_attr(ud: &UdParam) -> crate::ah::AhAttr {
    use zerocopy::FromBytes;
    // 32 bytes of `struct ib_uverbs_ah_attr`, exactly its size.
    let a = uverbs_abi::verbs::IbUverbsAhAttr::read_from_bytes(&ud.ah_attr).unwrap_or_default();
    crate::ah::AhAttr {
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        port_num: a.port_num,
        grh: (a.is_global != 0).then_some(crate::ah::Grh {
            dgid: a.grh.dgid,
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        }),
    }
}

//! rverbs: RDMA verbs in Rust, straight on the kernel's uverbs ABI.
//!
//! No rdma-core, no libibverbs: this crate opens `/dev/infiniband/uverbsN`,
//! issues the kernel's commands itself (`uverbs-abi`), maps the queues the
//! kernel shares, and runs the provider's data path in Rust
//! (`provider-rxe` for soft-RoCE, `provider-mlx5` for ConnectX — the
//! latter verified against a device model, not yet on hardware).
//!
//! # Quick start
//! Two reliable-connected QPs of one process on one device (rxe answers its
//! own address), one message from the first to the second. `examples/`
//! has this and more as programs (`rc_send_recv`, `rdma_write`, `ud_ah`,
//! `cm_basic` for rdma_cm).
//!
//! ```no_run
//! use rverbs::{Access, AhAttr, Context, Grh, Mtu, QpAttr, QpCaps, QpInit, QpType};
//! use rverbs::{RecvWr, SendOp, SendWr, Wc};
//!
//! # fn main() -> rverbs::Result<()> {
//! let ctx = Context::open_by_name(Some("rxe0"))?;
//! let pd = ctx.alloc_pd()?;
//! let mut cq = ctx.create_cq(16, None, 0)?;
//! let caps = QpCaps { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1,
//!                     max_inline_data: 0 };
//! let init = QpInit { qp_type: QpType::Rc, send_cq: &cq, recv_cq: &cq, caps,
//!                     sq_sig_all: false, srq: None };
//! let (mut a, mut b) = (pd.create_qp(&init)?, pd.create_qp(&init)?);
//!
//! // Connect them: the port's own RoCE v2 GID (index 1 on an rxe device
//! // over an IPv4 netdev) is where both QPs live.
//! let gid = ctx.query_gid(1, 1)?;
//! let av = AhAttr { port_num: 1, grh: Some(Grh { dgid: gid, sgid_index: 1, hop_limit: 1,
//!                   ..Grh::default() }), ..AhAttr::default() };
//! let (qa, qb) = (a.qpn(), b.qpn());
//! for (qp, peer) in [(&mut a, qb), (&mut b, qa)] {
//!     qp.modify(&QpAttr::init(1, Access::LOCAL_WRITE))?;
//!     qp.modify(&QpAttr::rtr(av, Mtu::M1024, peer, 0))?;
//!     qp.modify(&QpAttr::rts(0))?;
//! }
//!
//! // Memory the device touches is registered, owned by its Mr, and named
//! // in work requests by bounds-checked slices.
//! let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
//! mr.write(0, b"hello")?;
//! let landing = [mr.slice(2048, 64)?];
//! b.post_recv(&[RecvWr { wr_id: 2, sges: &landing }])?;
//! let msg = [mr.slice(0, 5)?];
//! a.post_send(&[SendWr::new(1, SendOp::Send, &msg)])?;
//!
//! let mut wcs = [Wc::default(); 4];
//! let mut seen = 0;
//! while seen < 2 {
//!     let n = cq.poll(&mut wcs);
//!     for wc in &wcs[..n] {
//!         assert!(wc.is_ok(), "{wc:?}");
//!         seen += 1;
//!     }
//! }
//! let mut got = [0u8; 5];
//! mr.read(2048, &mut got)?;
//! assert_eq!(&got, b"hello");
//! # Ok(())
//! # }
//! ```
//!
//! # Object lifetimes
//! Every object holds a reference to what it was created from (an MR its
//! PD, a QP its PD and CQs, everything its context), so objects are
//! destroyed in an order the kernel accepts no matter how the program drops
//! them.
//!
//! # Soundness: memory the device touches
//! See [`Mr`]: registered memory is owned by its [`Mr`] and never exposed
//! as a Rust reference; work requests name it by checked slices; it is
//! unmapped only after the kernel has deregistered it. So a program without
//! `unsafe` cannot let the device touch freed memory or memory Rust code
//! holds a reference to.
//!
//! ```compile_fail
//! // A plain buffer cannot be posted: SGEs are MR slices only.
//! fn post(qp: &mut rverbs::Qp, buf: &[u8]) {
//!     let wr = rverbs::SendWr::new(1, rverbs::SendOp::Send, &[buf]);
//!     qp.post_send(&[wr]).unwrap();
//! }
//! ```
//!
//! ```compile_fail
//! // MR memory is not handed out as a slice without `unsafe`.
//! fn peek(mr: &rverbs::Mr) -> &[u8] {
//!     mr.as_slice()
//! }
//! ```
//!
//! ```compile_fail
//! // A slice cannot outlive the MR it points into.
//! fn dangling(pd: &rverbs::Pd) -> rverbs::Slice<'static> {
//!     let mr = pd.alloc_mr(64, rverbs::Access::LOCAL_WRITE).unwrap();
//!     mr.slice(0, 64).unwrap()
//! }
//! ```
//!
//! The same holds for memory the program owns and registers
//! ([`Pd::register`]): the MR takes the buffer and gives it back only from
//! [`Mr::deregister`], after `DEREG_MR`.
//!
//! ```compile_fail
//! // A registered Vec is the MR's: the program cannot grow (and so move)
//! // it while the device may write it.
//! fn grow(pd: &rverbs::Pd) {
//!     let mut v = vec![0u8; 4096];
//!     let mr = pd.register(v, rverbs::Access::LOCAL_WRITE).unwrap();
//!     v.push(1);
//! }
//! ```
//!
//! ```compile_fail
//! // A borrowed buffer cannot be registered: leaking the MR would leave
//! // the device its rkey after the borrow ends.
//! fn borrowed(pd: &rverbs::Pd, buf: &'static mut [u8]) {
//!     let mr = pd.register(buf, rverbs::Access::LOCAL_WRITE).unwrap();
//! }
//! ```
//!
//! ```compile_fail
//! // The buffer comes back only when no slice or view of the MR is alive.
//! fn back_too_early(pd: &rverbs::Pd) {
//!     let mr = pd.register(vec![0u8; 64], rverbs::Access::LOCAL_WRITE).unwrap();
//!     let view = mr.cells(0, 64).unwrap();
//!     let v: Vec<u8> = mr.deregister().unwrap();
//!     view.get(0).unwrap().store(1, std::sync::atomic::Ordering::Relaxed);
//! }
//! ```
//!
//! ```compile_fail
//! // Memory rverbs does not own is registered only under `unsafe`.
//! fn raw(pd: &rverbs::Pd, p: *mut u8) {
//!     let mr = pd.register_raw(p, 64, rverbs::Access::LOCAL_WRITE).unwrap();
//! }
//! ```
//!
//! ```compile_fail,E0277
//! // Memory registered under `unsafe` comes back as a receipt, not a
//! // buffer: the promise ended at deregistration, so registering the
//! // memory again takes `unsafe` (and a new promise) again.
//! fn again(pd: &rverbs::Pd, mr: rverbs::Mr<rverbs::External>) {
//!     let released = mr.deregister().unwrap();
//!     let mr2 = pd.register(released, rverbs::Access::LOCAL_WRITE).unwrap();
//! }
//! ```
//!
//! ```
//! // What does compile: the buffer back after deregistration, and the
//! // receipt for raw memory.
//! fn round_trip(pd: &rverbs::Pd) -> rverbs::Result<Vec<u8>> {
//!     let mr = pd.register(vec![0u8; 64], rverbs::Access::LOCAL_WRITE)?;
//!     mr.write(0, b"in place")?;
//!     Ok(mr.deregister()?)
//! }
//! fn receipt(mr: rverbs::Mr<rverbs::External>) -> rverbs::Result<rverbs::Released> {
//!     Ok(mr.deregister()?)
//! }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
// Unsafe code is opted into per module: the syscall boundary (`sys`), the
// command layer that hands the kernel response buffers (`cmd`), the
// provider glue that hands queues their memory (`provider`), and MR memory
// (`mr`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod ah;
#[cfg(feature = "tokio")]
pub mod aio;
pub mod cm;
#[allow(unsafe_code)]
mod cmd;
mod context;
mod cq;
mod device;
mod error;
mod event;
mod features;
pub mod link;
#[allow(unsafe_code)] // MR memory, shared with the device
mod mr;
mod mw;
mod odp;
mod pd;
#[allow(unsafe_code)]
mod provider;
mod qp;
mod query;
mod srq;
#[allow(unsafe_code)]
mod sys;
mod wc;
mod wr;

pub use ah::{Ah, NetworkHeader, GRH_LEN};
pub use context::{CommandPath, Context};
pub use cq::{CompChannel, Cq, CqEntry};
pub use device::{format_guid, Device, Driver, NodeType};
pub use error::{Errno, Error, Feature, Limit, PostError, Result};
pub use event::{AsyncEvent, EventType};
pub use features::{Features, Odp, OdpOps, Row};
#[cfg(feature = "memmap2")]
/// The `memmap2` crate, whose `MmapMut` [`Pd::register`] takes (feature
/// `memmap2`): the version rverbs was built with.
pub use memmap2;
pub use mr::{
    Access, BoxParts, ByteCell, CellIter, Cells, DeregisterError, DmabufMr, External, Mr, MrBuffer,
    MrMemory, Pages, Released, VecParts,
};
pub use mw::{Mw, MwType};
pub use odp::Advice;
pub use pd::Pd;
pub use qp::{
    AhAttr, Grh, Mtu, PreparedSend, Qp, QpAttr, QpCaps, QpInit, QpInitAttr, QpQuery, QpState,
    QpType, RecvWr, Remote, SendBuilder, SendFlags, SendList, SendLoop, SendOp, SendPush, SendWr,
    Ud, Unposted,
};
pub use query::{DeviceAttr, DeviceAttrEx, GidEntry, GidType, PortAttr};
pub use srq::{Srq, SrqAttr};
pub use wc::{Wc, WcFlags, WcOpcode, WcStatus};
pub use wr::{FlushLevel, FlushType, MwBind, Sge, Slice, MAX_SGE};

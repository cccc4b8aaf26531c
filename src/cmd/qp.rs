//! Queue pairs: `CREATE_QP`, `MODIFY_QP`, `QUERY_QP`, `DESTROY_QP`, and the
//! `POST_SEND` command that serves rxe as its send doorbell.

use super::{Dev, Handle, Kind};
use crate::error::{Errno, Error, Result};
use crate::sys;
use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// A QP's kind.
pub(crate) enum QpKind {}
/// A QP's control half.
pub(crate) type QpHandle = Handle<QpKind>;

impl Kind for QpKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDestroyQp::new_zeroed();
        c.qp_handle = handle;
        dev.write0::<cmds::DestroyQp>(&c).map(drop)
    }
}

pub use rverbs_types::QpType;

/// Queue sizes asked for at creation, and granted by the kernel. The
/// default asks for what a simple program needs: 16 sends and 16
/// receives of one SGE each, no inline data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once.
    pub max_recv_wr: u32,
    /// SGEs per send work request.
    pub max_send_sge: u32,
    /// SGEs per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> QpCaps {
        QpCaps {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }
}

/// What a QP is created with (kernel handles of its PD, CQs and SRQ).
#[derive(Clone, Copy)]
pub(crate) struct QpRequest {
    pub(crate) user_handle: u64,
    pub(crate) pd: u32,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) srq: Option<u32>,
    pub(crate) qp_type: QpType,
    pub(crate) caps: QpCaps,
    pub(crate) sq_sig_all: bool,
}

/// A created QP: its control half, number and granted sizes.
pub(crate) struct Created {
    pub(crate) handle: QpHandle,
    pub(crate) qpn: u32,
    pub(crate) caps: QpCaps,
}

/// `CREATE_QP` with driver udata.
pub(crate) fn create(
    dev: &Arc<Dev>,
    req: &QpRequest,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<Created> {
    let mut r = v::IbUverbsCreateQp::new_zeroed();
    r.user_handle = req.user_handle;
    r.pd_handle = req.pd;
    r.send_cq_handle = req.send_cq;
    r.recv_cq_handle = req.recv_cq;
    r.srq_handle = req.srq.unwrap_or(0);
    r.max_send_wr = req.caps.max_send_wr;
    r.max_recv_wr = req.caps.max_recv_wr;
    r.max_send_sge = req.caps.max_send_sge;
    r.max_recv_sge = req.caps.max_recv_sge;
    r.max_inline_data = req.caps.max_inline_data;
    r.sq_sig_all = req.sq_sig_all as u8;
    r.qp_type = req.qp_type.raw();
    r.is_srq = req.srq.is_some() as u8;
    let resp = dev.write::<cmds::CreateQp>(&r, udata_in, udata_out)?;
    Ok(Created {
        handle: Handle::new(dev, resp.qp_handle),
        qpn: resp.qpn,
        caps: QpCaps {
            max_send_wr: resp.max_send_wr,
            max_recv_wr: resp.max_recv_wr,
            max_send_sge: resp.max_send_sge,
            max_recv_sge: resp.max_recv_sge,
            max_inline_data: resp.max_inline_data,
        },
    })
}

/// `MODIFY_QP` with an encoded request (its handle already set).
pub(crate) fn modify(dev: &Dev, req: &v::IbUverbsModifyQp) -> Result<()> {
    dev.write0::<cmds::ModifyQp>(req)
}

/// `QUERY_QP` of the attributes in `attr_mask`.
pub(crate) fn query(dev: &Dev, qp: u32, attr_mask: u32) -> Result<v::IbUverbsQueryQpResp> {
    let mut c = v::IbUverbsQueryQp::new_zeroed();
    c.qp_handle = qp;
    c.attr_mask = attr_mask;
    dev.write0::<cmds::QueryQp>(&c)
}

/// A `POST_SEND` command with no work requests, framed once per QP: rxe's
/// send doorbell (the kernel then runs the QP's requester over the ring).
/// The kernel writes `bad_wr` into `resp`, so the whole is boxed at a
/// stable address.
#[repr(C)] // the command first: its address is the doorbell's (one add fewer a post)
pub(crate) struct Doorbell {
    cmd: [u8; DOORBELL_LEN],
    resp: UnsafeCell<v::IbUverbsPostSendResp>,
    /// The device's fd, kept here so that a post needs no path to its
    /// context (callgrind: 4 instructions of a batch's start). Open while
    /// the doorbell lives ([`Doorbell::new`]): `'static` stands for that,
    /// and is never handed out ([`Doorbell::fd`] lends it for `&self`).
    fd: BorrowedFd<'static>,
}

const DOORBELL_LEN: usize = v::write_len::<cmds::PostSend>(0);

// SAFETY: `resp` is written only by the kernel during the write() that
// `ring` makes through `&mut self`, and never read: sharing a `&Doorbell`
// or moving it between threads cannot race with that write.
unsafe impl Send for Doorbell {}
// SAFETY: as above; `&Doorbell` gives access to nothing.
unsafe impl Sync for Doorbell {}

impl Doorbell {
    /// The doorbell of the QP `qp` of the device `dev`.
    ///
    /// # Safety
    /// The doorbell is owned by that QP, which keeps its context, and so
    /// `dev`'s fd, open while the doorbell lives (`Qp` holds an `Arc` of
    /// its context).
    pub(crate) unsafe fn new(dev: &Dev, qp: u32) -> Result<Box<Doorbell>> {
        let mut db = Box::new(Doorbell {
            cmd: [0; DOORBELL_LEN],
            resp: UnsafeCell::new(v::IbUverbsPostSendResp::new_zeroed()),
            // SAFETY: `dev` stays open while the doorbell lives (this
            // function's contract), and the fd is lent out only for a
            // borrow of the doorbell.
            fd: unsafe { BorrowedFd::borrow_raw(dev.fd.as_raw_fd()) },
        });
        let mut c = v::IbUverbsPostSend::new_zeroed();
        c.qp_handle = qp;
        c.wr_count = 0; // the WRs are in the ring already
        c.sge_count = 0;
        // The kernel insists on at least sizeof(struct ib_uverbs_send_wr).
        c.wqe_size = std::mem::size_of::<v::IbUverbsSendWr>() as u32;
        let resp = db.resp.get() as u64;
        v::encode_write::<cmds::PostSend>(&mut db.cmd, &c, &[], resp, 0)
            .map_err(|e| Error::invalid(format!("POST_SEND: {e}")))?;
        Ok(db)
    }

    /// Issues the doorbell. Always inlined: out of line, its `Result`
    /// comes back through memory (callgrind: ~15 instructions of the C
    /// library's `ibv_wr_complete`).
    #[inline(always)]
    pub(crate) fn ring(&mut self) -> Result<()> {
        // SAFETY: the command's one pointer is `resp`, which lives in this
        // boxed Doorbell, borrowed mutably across the call.
        unsafe { sys::write_cmd(self.fd(), "POST_SEND (doorbell)", &self.cmd) }
    }

    /// [`Doorbell::ring`] answering only the errno (`sys::write_cmd_errno`).
    #[inline(always)]
    pub(crate) fn ring_errno(&mut self) -> std::result::Result<(), Errno> {
        // SAFETY: as in ring.
        unsafe { sys::write_cmd_errno(self.fd(), &self.cmd) }
    }

    #[inline(always)]
    fn fd(&self) -> BorrowedFd<'_> {
        self.fd
    }
}

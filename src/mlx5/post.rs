//! Posting through the safe API onto the mlx5 provider's queues: the work
//! request translation and one doorbell per list. No system call, no lock,
//! no allocation: the WQEs are written into our own buffer and the device
//! is told through the doorbell record and the UAR page.

use crate::error::{Error, Result};
use crate::mr::as_mlx5_sges;
use crate::qp::{RecvWr, SendOp, SendWr, MAX_SGE};
use provider_mlx5::wr::{Payload, Remote, SendFlags, UdDest};
use provider_mlx5::PostError;

fn remote(r: crate::qp::Remote) -> Remote {
    Remote {
        addr: r.addr,
        rkey: r.rkey,
    }
}

/// The provider's form of `wr`; `dest` holds its UD destination, which the
/// provider's request borrows.
#[inline(always)]
fn translate<'a>(
    wr: &SendWr<'a>,
    dest: &'a mut Option<UdDest>,
) -> std::result::Result<provider_mlx5::SendWr<'a>, String> {
    use provider_mlx5::SendOp as P;
    let payload = match wr.inline {
        Some(data) => {
            if !wr.sges.is_empty() {
                return Err("both inline data and SGEs given".into());
            }
            Payload::Inline(data)
        }
        None => {
            if wr.sges.len() > MAX_SGE {
                return Err(format!(
                    "{} SGEs, at most {MAX_SGE} per work request",
                    wr.sges.len()
                ));
            }
            Payload::Sges(as_mlx5_sges(wr.sges))
        }
    };
    let op = match wr.op {
        SendOp::Send => P::Send,
        SendOp::SendWithImm(imm) => P::SendImm { imm },
        SendOp::Write(r) => P::Write { remote: remote(r) },
        SendOp::WriteWithImm(r, imm) => P::WriteImm {
            remote: remote(r),
            imm,
        },
        SendOp::Read(r) => P::Read { remote: remote(r) },
        SendOp::CompareSwap {
            remote: r,
            compare,
            swap,
        } => P::CompareSwap {
            remote: remote(r),
            compare,
            swap,
        },
        SendOp::FetchAdd { remote: r, add } => P::FetchAdd {
            remote: remote(r),
            add,
        },
    };
    let mut flags = SendFlags::empty();
    flags.set(SendFlags::SIGNALED, wr.signaled);
    flags.set(SendFlags::SOLICITED, wr.solicited);
    flags.set(SendFlags::FENCE, wr.fence);
    let mut out = provider_mlx5::SendWr::new(wr.wr_id, op, payload);
    out.flags = flags;
    if let Some(u) = wr.ud {
        let av =
            u.ah.inner
                .mlx5_av
                .ok_or("the address handle was not made on an mlx5 device")?;
        *dest = Some(UdDest {
            av,
            remote_qpn: u.remote_qpn,
            qkey: u.remote_qkey,
        });
        out.ud = dest.as_ref();
    }
    Ok(out)
}

fn post_error(e: PostError, queue: &'static str, index: usize) -> Error {
    match e {
        PostError::QueueFull => Error::QueueFull { queue, index },
        e => Error::InvalidWorkRequest {
            index,
            what: e.to_string(),
        },
    }
}

/// Posts `wrs` in order and rings the doorbell once for those accepted; the
/// first refused one ends the list and is named by its index.
pub(crate) fn post_send(sq: &mut provider_mlx5::SendQueue, wrs: &[SendWr<'_>]) -> Result<()> {
    let mut first_err = None;
    for (index, wr) in wrs.iter().enumerate() {
        let mut dest = None;
        let raw = match translate(wr, &mut dest) {
            Ok(r) => r,
            Err(what) => {
                first_err = Some(Error::InvalidWorkRequest { index, what });
                break;
            }
        };
        // SAFETY: every SGE came from an `mr::Slice`, checked to lie inside
        // an Mr that owns its mapping and unmaps it only after DEREG_MR (see
        // the mr module), so the device never reaches memory this process
        // reuses or holds a Rust reference to.
        if let Err(e) = unsafe { sq.post(&raw) } {
            first_err = Some(post_error(e, "send queue", index));
            break;
        }
    }
    sq.ring(); // nothing to do if nothing was posted
    first_err.map_or(Ok(()), Err)
}

/// Posts receives in order into the QP's RQ, then publishes them.
pub(crate) fn post_recv(rq: &mut provider_mlx5::RecvQueue, wrs: &[RecvWr<'_>]) -> Result<()> {
    let r = post_each(wrs, "receive queue", |wr_id, sges| {
        // SAFETY: as in post_send: MR slices only.
        unsafe { rq.post(wr_id, sges) }
    });
    rq.ring();
    r
}

/// Posts receives in order into an SRQ, then publishes them.
pub(crate) fn post_srq_recv(
    srq: &mut provider_mlx5::SharedRecvQueue,
    wrs: &[RecvWr<'_>],
) -> Result<()> {
    let r = post_each(wrs, "SRQ", |wr_id, sges| {
        // SAFETY: as in post_send: MR slices only.
        unsafe { srq.post(wr_id, sges) }
    });
    srq.ring();
    r
}

fn post_each(
    wrs: &[RecvWr<'_>],
    queue: &'static str,
    mut post: impl FnMut(u64, &[provider_mlx5::Sge]) -> std::result::Result<(), PostError>,
) -> Result<()> {
    for (index, wr) in wrs.iter().enumerate() {
        if wr.sges.len() > MAX_SGE {
            return Err(Error::InvalidWorkRequest {
                index,
                what: format!("{} SGEs, at most {MAX_SGE} per work request", wr.sges.len()),
            });
        }
        post(wr.wr_id, as_mlx5_sges(wr.sges)).map_err(|e| post_error(e, queue, index))?;
    }
    Ok(())
}

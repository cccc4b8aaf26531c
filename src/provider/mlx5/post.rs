//! Posting onto the mlx5 provider's queues: the safe API's work requests
//! go to `provider_mlx5` as the caller built them (the vocabulary's
//! requests over MR slices, which are laid out as SGEs), as for rxe. No
//! system call, no lock, no allocation: the WQEs are written into our own
//! buffer and the device is told through the doorbell record and the UAR
//! page, once per list. Completions come back as `Wc`s from the provider's
//! poller (`provider_mlx5::Poller`), with nothing to convert.

use crate::error::Result as VerbsResult;
use crate::provider::post_list;
use crate::wr::Slice;
use rverbs_types::PostError;
use rverbs_types::{as_sges, AddressHandle};

type SendWr<'a, A> = rverbs_types::SendWr<'a, Slice<'a>, A>;
type RecvWr<'a> = rverbs_types::RecvWr<'a, Slice<'a>>;

/// Writes one send request into the SQ as the caller built it.
#[inline(always)]
fn post_send<A: AddressHandle>(
    sq: &mut provider_mlx5::SendQueue,
    wr: &SendWr<'_, A>,
) -> Result<(), PostError> {
    // Every SGE is a `Slice`: a range of a live registration (a safe MR's
    // or dma-buf MR's slice, or one made by the unsafe
    // `Slice::from_raw_parts`, whose caller vouches for it).
    // SAFETY: so each names registered memory, which rverbs gives back only
    // after DEREG_MR succeeded (the device then has no access; a refused
    // one leaks it) and reaches only by raw copies and atomics.
    unsafe { sq.post(wr) }
}

/// Writes one receive request into the QP's RQ.
#[inline(always)]
fn post_recv(rq: &mut provider_mlx5::RecvQueue, wr: &RecvWr<'_>) -> Result<(), PostError> {
    // SAFETY: as in post_send: every SGE is a `Slice`.
    unsafe { rq.post(wr.wr_id, as_sges(wr.sges)) }
}

/// Writes one receive request into an SRQ.
#[inline(always)]
fn post_srq_recv(
    srq: &mut provider_mlx5::SharedRecvQueue,
    wr: &RecvWr<'_>,
) -> Result<(), PostError> {
    // SAFETY: as in post_send: every SGE is a `Slice`.
    unsafe { srq.post(wr.wr_id, as_sges(wr.sges)) }
}

/// Writes one send request into the SQ; the device learns of it at the
/// next `ring`.
pub(crate) fn push_send<A: AddressHandle>(
    sq: &mut provider_mlx5::SendQueue,
    wr: &SendWr<'_, A>,
) -> Result<(), PostError> {
    post_send(sq, wr)
}

/// Posts `wrs` in order and rings the doorbell once for those accepted;
/// the first refused one ends the list and is named by its index.
#[inline(always)]
pub(crate) fn post_send_list<A: AddressHandle>(
    sq: &mut provider_mlx5::SendQueue,
    wrs: &[SendWr<'_, A>],
) -> VerbsResult<()> {
    let (_, refused) = post_list(wrs, "send queue", |wr| post_send(sq, wr));
    sq.ring(); // nothing to do if nothing was posted
    refused.map_or(Ok(()), Err)
}

/// Posts receives in order into the QP's RQ, then publishes them.
pub(crate) fn post_recv_list(
    rq: &mut provider_mlx5::RecvQueue,
    wrs: &[RecvWr<'_>],
    queue: &'static str,
) -> VerbsResult<()> {
    let (_, refused) = post_list(wrs, queue, |wr| post_recv(rq, wr));
    rq.ring();
    refused.map_or(Ok(()), Err)
}

/// Posts receives in order into an SRQ, then publishes them.
pub(crate) fn post_srq_recv_list(
    srq: &mut provider_mlx5::SharedRecvQueue,
    wrs: &[RecvWr<'_>],
    queue: &'static str,
) -> VerbsResult<()> {
    let (_, refused) = post_list(wrs, queue, |wr| post_srq_recv(srq, wr));
    srq.ring();
    refused.map_or(Ok(()), Err)
}

//! Which queue a CQE belongs to: the poller resolves a CQE's QP number to
//! the records of the queue that posted the request ([`WorkQueues`]), then
//! retires it by the CQE's `wqe_counter`. Shared by the CQ ([`crate::cq`])
//! and the decoder ([`crate::wc`]).

use crate::records::{RecvRecords, SendRecords, SrqRecords};

/// The receive side a QP's completions go to.
#[derive(Debug, Clone, Copy)]
pub enum RecvTarget<'a> {
    /// The QP's own receive queue.
    Rq(&'a RecvRecords),
    /// The SRQ the QP was created with.
    Srq(&'a SrqRecords),
}

impl RecvTarget<'_> {
    #[inline]
    pub(crate) fn complete(&self, wqe_counter: u16) -> Option<u64> {
        match self {
            RecvTarget::Rq(q) => q.complete(wqe_counter),
            RecvTarget::Srq(q) => q.complete(wqe_counter),
        }
    }
}

/// Finds the records of the queues a CQE's QP number (and SRQ number /
/// user index, as the CQE carries it) refer to. A CQ may serve many QPs.
/// The records are shared with the posting side ([`crate::records`]), so
/// the poller needs no access to the queues themselves. A CQ's
/// [`crate::Poller`] resolves through its [`crate::Registry`]; tests and
/// single-threaded users can pass [`QpQueues`].
pub trait WorkQueues {
    /// The send queue of QP `qpn`.
    fn send_queue(&mut self, qpn: u32, srqn_uidx: u32) -> Option<&SendRecords>;
    /// The receive queue or SRQ of QP `qpn`.
    fn recv_queue(&mut self, qpn: u32, srqn_uidx: u32) -> Option<RecvTarget<'_>>;
    /// Called before each CQE is resolved with its position (the CQ's
    /// free-running consumer index), for lookups that depend on when a CQE
    /// was written (a QP number reused after a destroy).
    #[inline(always)]
    fn at(&mut self, _ci: u32) {}
    /// Called once per batch, after its CQEs are resolved and before the
    /// SET_CI doorbell record hands the entries before `ci` back to the
    /// device (which may then overwrite them), with that new consumer
    /// index.
    #[inline(always)]
    fn releasing(&mut self, _ci: u32) {}
}

/// The queues of one QP, for [`CompletionQueue::poll`](crate::cq::CompletionQueue::poll); a slice of these
/// serves a CQ shared by several QPs.
#[derive(Debug, Clone, Copy)]
pub struct QpQueues<'a> {
    /// The QP number.
    pub qpn: u32,
    /// Its send queue's records, if this CQ is its send CQ.
    pub sq: Option<&'a SendRecords>,
    /// Its receive side, if this CQ is its receive CQ.
    pub rq: Option<RecvTarget<'a>>,
}

// `#[inline]` on these: they are not generic, so without it a poller in
// another crate calls them out of line (callgrind: 13 instructions and a
// reload of the consumer index per CQE).
impl WorkQueues for QpQueues<'_> {
    #[inline]
    fn send_queue(&mut self, qpn: u32, _: u32) -> Option<&SendRecords> {
        (qpn == self.qpn).then_some(())?;
        self.sq
    }
    #[inline]
    fn recv_queue(&mut self, qpn: u32, _: u32) -> Option<RecvTarget<'_>> {
        (qpn == self.qpn).then_some(())?;
        self.rq
    }
}

impl WorkQueues for [QpQueues<'_>] {
    #[inline]
    fn send_queue(&mut self, qpn: u32, u: u32) -> Option<&SendRecords> {
        self.iter_mut().find(|q| q.qpn == qpn)?.send_queue(qpn, u)
    }
    #[inline]
    fn recv_queue(&mut self, qpn: u32, u: u32) -> Option<RecvTarget<'_>> {
        self.iter_mut().find(|q| q.qpn == qpn)?.recv_queue(qpn, u)
    }
}

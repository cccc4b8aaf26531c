//! Polling an mlx5 CQ from the safe API: resolving a CQE's QP number to
//! the records of the queue that posted the request.
//!
//! A `Cq` and the `Qp`s that use it are separate objects, possibly on
//! different threads, so the poller cannot borrow the QPs' queues. Each
//! QP instead registers the shared records of its queues
//! (`provider_mlx5::records`) with its CQs when it is created and removes
//! them when it is destroyed; the registry is behind a lock, which only
//! those control paths take. The poller keeps its own copy of the table
//! and refreshes it only when the registry's generation has moved (one
//! Acquire load per poll call), so the data path takes no lock and, in
//! the steady state, allocates nothing. The generation is checked for every
//! CQE, so a QP created (or a QP number reused) while a poll is under way
//! is seen before its first CQE is resolved.

use provider_mlx5::{
    Completion, CompletionQueue, RecvRecords, RecvTarget, SendRecords, SrqRecords, WorkQueues,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The receive side a QP registered: its own RQ or its SRQ.
#[derive(Clone)]
pub(crate) enum RecvRecs {
    Rq(Arc<RecvRecords>),
    Srq(Arc<SrqRecords>),
}

/// What one QP registered with one CQ.
#[derive(Clone)]
pub(crate) struct QpEntry {
    pub(crate) qpn: u32,
    pub(crate) sq: Option<Arc<SendRecords>>,
    pub(crate) rq: Option<RecvRecs>,
}

/// The CQ's registry of QPs, shared by the CQ and every QP created on it.
#[derive(Default)]
pub(crate) struct Registry {
    entries: Mutex<Vec<QpEntry>>,
    generation: AtomicU64,
}

impl Registry {
    /// Adds (or merges into) the entry of `e.qpn`: a QP whose send and
    /// receive CQ are the same registers twice, once per side.
    pub(crate) fn add(&self, e: QpEntry) {
        let mut v = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match v.iter_mut().find(|x| x.qpn == e.qpn) {
            Some(x) => {
                x.sq = x.sq.take().or(e.sq);
                x.rq = x.rq.take().or(e.rq);
            }
            None => v.push(e),
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Removes QP `qpn` (after the kernel destroyed it). CQEs of it still
    /// in the ring are then discarded by the poller, as rdma-core's
    /// `__mlx5_cq_clean` removes them at destroy time.
    pub(crate) fn remove(&self, qpn: u32) {
        let mut v = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|x| x.qpn != qpn);
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// The poller's copy of the registry.
struct Table {
    registry: Arc<Registry>,
    entries: Vec<QpEntry>,
    generation: u64,
}

impl Table {
    fn find(&mut self, qpn: u32) -> Option<&QpEntry> {
        let g = self.registry.generation.load(Ordering::Acquire);
        if g != self.generation {
            let v = self
                .registry
                .entries
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            self.entries.clone_from(&v);
            // Read under the lock: no add/remove can fall between the copy
            // and the generation it is marked with.
            self.generation = self.registry.generation.load(Ordering::Acquire);
        }
        self.entries.iter().find(|e| e.qpn == qpn)
    }
}

impl WorkQueues for Table {
    fn send_queue(&mut self, qpn: u32, _: u32) -> Option<&SendRecords> {
        self.find(qpn)?.sq.as_deref()
    }
    fn recv_queue(&mut self, qpn: u32, _: u32) -> Option<RecvTarget<'_>> {
        match self.find(qpn)?.rq.as_ref()? {
            RecvRecs::Rq(r) => Some(RecvTarget::Rq(r)),
            RecvRecs::Srq(s) => Some(RecvTarget::Srq(s)),
        }
    }
}

/// The poller's side of an mlx5 CQ (owned by the `Cq`, used through
/// `&mut`).
pub(crate) struct Poller {
    pub(crate) cq: CompletionQueue,
    table: Table,
    scratch: [Completion; BATCH],
    /// CQEs that named no registered QP or no outstanding request.
    pub(crate) discarded: u64,
    /// Completion events already accounted for in the arm sequence number.
    pub(crate) events_seen: u64,
}

const BATCH: usize = 16;

impl Poller {
    pub(crate) fn new(cq: CompletionQueue, registry: Arc<Registry>) -> Poller {
        Poller {
            cq,
            table: Table {
                registry,
                entries: Vec::new(),
                generation: u64::MAX,
            },
            scratch: [Completion::default(); BATCH],
            discarded: 0,
            events_seen: 0,
        }
    }

    /// Moves up to `out.len()` completions into `out`, converted by `conv`.
    #[inline]
    pub(crate) fn poll<T>(&mut self, out: &mut [T], conv: impl Fn(&Completion) -> T) -> usize {
        let mut n = 0;
        while n < out.len() {
            let want = (out.len() - n).min(BATCH);
            match self.cq.poll(&mut self.table, &mut self.scratch[..want]) {
                Ok(0) => break,
                Ok(got) => {
                    for (o, c) in out[n..n + got].iter_mut().zip(&self.scratch[..got]) {
                        *o = conv(c);
                    }
                    n += got;
                    if got < want {
                        break;
                    }
                }
                // A CQE of a destroyed QP (or a corrupt one): consumed, not
                // reported; the next ones are still polled.
                Err(_) => self.discarded += 1,
            }
        }
        n
    }
}

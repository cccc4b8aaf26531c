//! A CQ's registry of the QPs that use it, and the poller that resolves
//! its CQEs against it.
//!
//! A CQ and the QPs that use it are separate objects, possibly on
//! different threads, so the poller cannot borrow the QPs' queues. Each
//! QP instead registers the shared records of its queues ([`crate::records`])
//! with its CQs when it is created ([`Registry::add`]); the registry is
//! behind a lock, which only control paths take. The [`Poller`] keeps its
//! own copy of the table and refreshes it only when the registry's
//! generation has moved (checked with one Acquire load per CQE), so the
//! data path takes no lock and, in the steady state, allocates nothing; a
//! QP created while a poll is under way is seen before its first CQE.
//!
//! Destroyed QPs: their CQEs may still be in the ring, and the device may
//! give a new QP the same number. rdma-core removes them from the ring at
//! destroy time (`__mlx5_cq_clean`, under the CQ lock). Here the QP's entry
//! becomes a tombstone instead ([`Registry::retire`]): after DESTROY_QP,
//! nothing more is written for it, so its CQEs all lie before the end of
//! what the device has handed to software at that moment (scanned from the
//! consumer index the poller publishes before each SET_CI, again if it
//! moved during the scan: see [`Registry::retire`]). CQEs of that QP number before
//! that position resolve against the dead QP's own records — so SRQ
//! receives it consumed go back to the SRQ — and are dropped (counted in
//! [`Poller::discarded`]); later ones belong to the live QP of that number,
//! if any. Entries are identified by incarnation ([`next_id`]), never by
//! QP number alone.

use crate::cq::{CompletionQueue, CqScan};
use crate::lookup::{RecvTarget, WorkQueues};
use crate::records::{RecvRecords, SendRecords, SrqRecords};
use rverbs_types::Wc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The receive side a QP registered: its own RQ or its SRQ.
#[derive(Debug, Clone)]
pub enum RecvRecs {
    /// The QP's own receive queue.
    Rq(Arc<RecvRecords>),
    /// The SRQ the QP was created with.
    Srq(Arc<SrqRecords>),
}

/// What one QP registered with one CQ.
#[derive(Debug, Clone)]
pub struct QpEntry {
    /// The QP number.
    pub qpn: u32,
    /// This QP's incarnation (unique per process, from [`next_id`]), which
    /// tells it from an earlier or later QP of the same number.
    pub id: u64,
    /// Its send queue's records, if this CQ is its send CQ.
    pub sq: Option<Arc<SendRecords>>,
    /// Its receive side, if this CQ is its receive CQ.
    pub rq: Option<RecvRecs>,
    /// Destroyed: CQEs before this position are this QP's. `None` when
    /// registering.
    pub until: Option<u32>,
}

impl QpEntry {
    /// A live entry of QP `qpn`, incarnation `id`.
    pub fn new(qpn: u32, id: u64, sq: Option<Arc<SendRecords>>, rq: Option<RecvRecs>) -> QpEntry {
        QpEntry {
            qpn,
            id,
            sq,
            rq,
            until: None,
        }
    }
}

/// A fresh incarnation number.
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether the CQE at `pos` comes before position `until` (free-running
/// positions; a tombstone is at most a ring's length ahead of the poller
/// when made, and dropped once passed).
fn before(pos: u32, until: u32) -> bool {
    (until.wrapping_sub(pos) as i32) > 0
}

/// The CQ's registry of QPs, shared by the CQ's poller and every QP
/// created on it.
#[derive(Debug)]
pub struct Registry {
    entries: Mutex<Vec<QpEntry>>,
    generation: AtomicU64,
    /// The poller's consumer index, published before each SET_CI.
    consumed: AtomicU32,
    /// Reads the ring's ownership bits (the ring outlives every user of
    /// the registry: see [`Registry::new`]).
    scan: CqScan,
}

impl Registry {
    /// An empty registry for the CQ `scan` reads (from
    /// [`CompletionQueue::scanner`], whose contract — the ring stays
    /// mapped while the scan is used — must hold for as long as the
    /// registry is used).
    pub fn new(scan: CqScan) -> Registry {
        Registry {
            entries: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            consumed: AtomicU32::new(0),
            scan,
        }
    }

    /// Adds `e`, or merges it into the entry of the same incarnation (a
    /// QP whose send and receive CQ are the same registers once per side).
    pub fn add(&self, e: QpEntry) {
        let mut v = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        self.prune(&mut v);
        // A live entry of this number but another incarnation is a QP the
        // kernel destroyed and whose drop has not yet retired it (the kernel
        // never hands out a live number twice): retire it now, before the
        // new QP can write anything.
        let mut end = None;
        for x in v.iter_mut() {
            if x.qpn == e.qpn && x.id != e.id && x.until.is_none() {
                let at = *end.get_or_insert_with(|| self.end_of_written());
                x.until = Some(at);
            }
        }
        match v.iter_mut().find(|x| x.id == e.id) {
            Some(x) => {
                x.sq = x.sq.take().or(e.sq);
                x.rq = x.rq.take().or(e.rq);
            }
            None => v.push(e),
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Turns incarnation `id` into a tombstone, after the kernel destroyed
    /// the QP (so no CQE of it is written any more).
    pub fn retire(&self, id: u64) {
        let mut v = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let end = self.end_of_written();
        // The first retirement counts (a QP on one CQ for both sides
        // retires twice; a later boundary could swallow a new QP's CQEs).
        if let Some(x) = v.iter_mut().find(|x| x.id == id && x.until.is_none()) {
            x.until = Some(end);
        }
        self.prune(&mut v);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Where the CQEs written so far end: scanned from the consumer index
    /// the poller published, again if it moved meanwhile. The poller
    /// publishes each batch's index before its SET_CI hands the entries
    /// before it back to the device ([`Table::releasing`]), so while the
    /// published index stays put no entry the scan reads can have been
    /// overwritten by a later lap (a scan from a stale index could stop
    /// at once on such an entry, and leave the dead QP's later CQEs to
    /// the live QP of its number).
    fn end_of_written(&self) -> u32 {
        loop {
            let from = self.consumed.load(Ordering::Acquire);
            let end = self.scan.software_owned_end(from);
            // The scan's reads before the second look at the index.
            core::sync::atomic::fence(Ordering::Acquire);
            if self.consumed.load(Ordering::Relaxed) == from {
                return end;
            }
        }
    }

    /// Drops tombstones the poller has passed.
    fn prune(&self, v: &mut Vec<QpEntry>) {
        let ci = self.consumed.load(Ordering::Acquire);
        v.retain(|x| match x.until {
            Some(u) => before(ci, u),
            None => true,
        });
    }
}

/// The poller's copy of the registry, and what it learnt in a batch.
#[derive(Debug)]
struct Table {
    registry: Arc<Registry>,
    entries: Vec<QpEntry>,
    generation: u64,
    /// Position of the CQE being resolved, and of the batch's first.
    pos: u32,
    batch_start: u32,
    /// Bit `i`: the batch's CQE `i` was a dead QP's.
    stale: u32,
    /// Tombstones in `entries`.
    tombstones: usize,
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
            // Read under the lock: no change can fall between the copy and
            // the generation it is marked with.
            self.generation = self.registry.generation.load(Ordering::Acquire);
            drop(v);
            self.tombstones = self.entries.iter().filter(|e| e.until.is_some()).count();
        }
        if self.tombstones > 0 {
            // Passed tombstones go; of the rest, the oldest one the CQE
            // lies before is the QP that wrote it.
            let pos = self.pos;
            let before_len = self.entries.len();
            self.entries.retain(|e| match e.until {
                Some(u) => before(pos, u),
                None => true,
            });
            self.tombstones -= before_len - self.entries.len();
            let dead = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.qpn == qpn && e.until.is_some())
                .min_by_key(|(_, e)| e.until.map(|u| u.wrapping_sub(pos)))
                .map(|(i, _)| i);
            if let Some(i) = dead {
                let bit = self.pos.wrapping_sub(self.batch_start);
                if bit < 32 {
                    self.stale |= 1 << bit;
                }
                return self.entries.get(i);
            }
        }
        self.entries
            .iter()
            .find(|e| e.qpn == qpn && e.until.is_none())
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
    #[inline(always)]
    fn at(&mut self, ci: u32) {
        self.pos = ci;
    }
    /// Publishes the consumer index before SET_CI gives the entries
    /// before it back to the device ([`Registry::end_of_written`] relies
    /// on the order).
    #[inline(always)]
    fn releasing(&mut self, ci: u32) {
        self.registry.consumed.store(ci, Ordering::Release);
        // That store before the doorbell record's, as another CPU sees
        // them (a Release store orders what comes before it only).
        crate::barrier::to_device();
    }
}

/// The consumer side of an mlx5 CQ with its registry: polls completions
/// of every QP registered, drops those of destroyed QPs and CQEs that name
/// nothing outstanding, and arms the CQ. Used through `&mut` by one thread
/// at a time.
#[derive(Debug)]
pub struct Poller {
    cq: CompletionQueue,
    table: Table,
    discarded: u64,
    /// Completion events already accounted for in the arm sequence number.
    events_seen: u64,
}

/// CQEs polled per batch: the width of the stale-CQE mask.
const BATCH: usize = 16;

impl Poller {
    /// The poller of `cq`, whose QPs register with `registry` (made over
    /// `cq`'s scanner).
    pub fn new(cq: CompletionQueue, registry: Arc<Registry>) -> Poller {
        Poller {
            cq,
            table: Table {
                registry,
                entries: Vec::new(),
                generation: u64::MAX,
                pos: 0,
                batch_start: 0,
                stale: 0,
                tombstones: 0,
            },
            discarded: 0,
            events_seen: 0,
        }
    }

    /// The CQ polled.
    pub fn cq(&self) -> &CompletionQueue {
        &self.cq
    }

    /// CQEs dropped so far: those of destroyed QPs, and any naming no
    /// registered QP or no outstanding request.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Moves up to `out.len()` completions into `out`, oldest first, and
    /// returns how many. Never blocks, never makes a system call; takes
    /// no lock unless a QP was registered or retired since the last call.
    ///
    /// CQEs it drops (a destroyed QP's, or ones naming nothing) do not
    /// count against `out`, so it also stops once it has dropped a ring's
    /// worth in one call: a device that keeps writing such CQEs as fast
    /// as they are consumed cannot keep it from returning.
    #[inline]
    pub fn poll(&mut self, out: &mut [Wc]) -> usize {
        let mut n = 0;
        // Counted only on the paths that drop CQEs: a poll that drops none
        // pays nothing for the bound.
        let mut dropped = 0u32;
        let lap = self.cq.config().ncqe;
        while n < out.len() {
            let want = (out.len() - n).min(BATCH);
            self.table.batch_start = self.cq.consumer_index();
            self.table.stale = 0;
            let r = self.cq.poll(&mut self.table, &mut out[n..n + want]);
            let stale = self.table.stale;
            match r {
                Ok(0) => break,
                Ok(got) => {
                    if stale == 0 {
                        n += got;
                    } else {
                        // Close the gaps the dead QPs' completions leave.
                        let mut kept = n;
                        for i in 0..got {
                            if stale & (1 << i) != 0 {
                                self.discarded += 1;
                            } else {
                                out[kept] = out[n + i];
                                kept += 1;
                            }
                        }
                        dropped += (n + got - kept) as u32;
                        n = kept;
                        if dropped >= lap {
                            break;
                        }
                    }
                    if got < want {
                        break;
                    }
                }
                // A CQE naming nothing outstanding (or corrupt): consumed,
                // not reported; the next ones are still polled, up to a
                // ring's worth.
                Err(_) => {
                    self.discarded += 1;
                    dropped += 1;
                    if dropped >= lap {
                        break;
                    }
                }
            }
        }
        // Each batch published its consumer index (`Table::releasing`).
        n
    }

    /// Arms the CQ (the ARM doorbell record and the CQ doorbell), after
    /// advancing the arm sequence number once per completion event read
    /// since the last arm (rdma-core's `mlx5_cq_event`): `events` counts
    /// the events read for this CQ.
    pub fn arm(&mut self, solicited_only: bool, events: u64) {
        while self.events_seen != events {
            self.cq.ack_event();
            self.events_seen = self.events_seen.wrapping_add(1);
        }
        self.cq.arm(solicited_only);
    }
}

#[cfg(test)]
mod tests {
    use super::before;

    #[test]
    fn positions_compare_across_the_wrap() {
        assert!(before(5, 6));
        assert!(!before(6, 6));
        assert!(!before(7, 6));
        assert!(before(u32::MAX, 2));
        assert!(!before(2, u32::MAX));
    }
}

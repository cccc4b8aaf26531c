//! What a queue remembers of the requests it posted, shared between the
//! thread that posts (the queue) and the thread that polls the CQ.
//!
//! mlx5 CQEs carry no wr_id: they name a request by the QP number and a
//! `wqe_counter`, and the poller must find the wr_id in the posting
//! queue's records. In rdma-core the CQ reads the QP's `wrid` array and
//! writes its `tail` directly, relying on C's lack of rules. Here the
//! records live in an `Arc` shared by the producer (one [`SendQueue`],
//! [`RecvQueue`] or [`SharedRecvQueue`], which posts through `&mut self`)
//! and the consumer (whoever polls the CQ), as a single-producer /
//! single-consumer protocol on atomics:
//!
//! - the producer writes a slot's record (Relaxed), then publishes the
//!   posts with a Release store of `rung` when it rings the doorbell;
//! - the consumer loads `rung` with Acquire, accepts a CQE only if it names
//!   a request in `[tail, rung)` — published and not yet retired — reads
//!   that slot, then retires it with a Release store of `tail`;
//! - the producer loads `tail` with Acquire before it reuses a slot, so the
//!   consumer's read of a record happens before the record is overwritten.
//!
//! A slot in `[tail, rung)` is never written by the producer, so an accepted
//! record cannot be torn; a slot outside it may be being rewritten, and is
//! refused whatever its contents. All of it is plain loads and stores on
//! x86_64 (no lock prefix, no lock): the atomics only make the protocol
//! defined Rust. One consumer at a time is assumed (a CQ is polled through
//! `&mut`); two concurrent consumers could complete one request twice, but
//! never touch memory unsoundly.
//!
//! `tests/loom_records.rs` model-checks the protocol with loom, over the
//! real queues (the atomics come from `src/sync.rs`): it fails if either
//! side of any `rung` is weakened to Relaxed. The other direction — `tail`
//! and the SRQ's return ring, which make a consumer's reads of a record
//! happen before the producer rewrites it — guards against a load returning
//! a store the other thread makes later, which loom does not model; that
//! half rests on the argument above.
//!
//! [`SendQueue`]: crate::SendQueue
//! [`RecvQueue`]: crate::RecvQueue
//! [`SharedRecvQueue`]: crate::SharedRecvQueue

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// What a send completion retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendRetired {
    /// The completed request's id.
    pub wr_id: u64,
    /// Its mlx5 opcode, as posted.
    pub opcode: u8,
}

#[derive(Debug, Default)]
struct SendSlot {
    wr_id: AtomicU64,
    /// `start | bbs << 32 | opcode << 40 | seq << 48`, `seq` the low 16
    /// bits of the request's number (read by the producer only).
    meta: AtomicU64,
}

/// The send queue's records: per WQE (indexed by its first basic block)
/// the wr_id, first block and size; `rung` (blocks published) and `tail`
/// (first block not known complete), both free-running.
#[derive(Debug)]
pub struct SendRecords {
    slots: Box<[SendSlot]>,
    mask: u32,
    rung: AtomicU32,
    tail: AtomicU32,
}

impl SendRecords {
    pub(crate) fn new(wqe_cnt: u32) -> SendRecords {
        SendRecords {
            slots: (0..wqe_cnt).map(|_| SendSlot::default()).collect(),
            mask: wqe_cnt - 1,
            rung: AtomicU32::new(0),
            tail: AtomicU32::new(0),
        }
    }

    /// Producer: records the WQE starting at block `start`, request number
    /// `seq`. Its slot lies in the free part of the ring, which the
    /// consumer refuses to read.
    #[inline]
    pub(crate) fn record(&self, start: u32, bbs: u32, wr_id: u64, opcode: u8, seq: u32) {
        let slot = &self.slots[(start & self.mask) as usize];
        slot.wr_id.store(wr_id, Ordering::Relaxed);
        let meta = start as u64
            | (bbs as u64 & 0xff) << 32
            | (opcode as u64) << 40
            | (seq as u16 as u64) << 48;
        slot.meta.store(meta, Ordering::Relaxed);
    }

    /// Producer: the low 16 bits of the number of the request it recorded
    /// at block `start` (its own store: no other thread writes a record).
    #[inline]
    pub(crate) fn seq_at(&self, start: u32) -> u16 {
        (self.slots[(start & self.mask) as usize]
            .meta
            .load(Ordering::Relaxed)
            >> 48) as u16
    }

    /// Producer: every block before `cur_post` is published (the doorbell
    /// is being rung for them).
    #[inline]
    pub(crate) fn publish(&self, cur_post: u32) {
        self.rung.store(cur_post, Ordering::Release);
    }

    /// The first block not yet known complete (the producer's view of
    /// free space).
    #[inline]
    pub fn tail(&self) -> u32 {
        self.tail.load(Ordering::Acquire)
    }

    /// Consumer: retires the WQE a send CQE names by its `wqe_counter`, and
    /// every WQE before it. `None` (and nothing changed) if the counter
    /// names no WQE that has been rung and not yet completed.
    #[inline]
    pub fn complete(&self, wqe_counter: u16) -> Option<SendRetired> {
        let rung = self.rung.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Relaxed);
        let slot = &self.slots[(wqe_counter as u32 & self.mask) as usize];
        let meta = slot.meta.load(Ordering::Relaxed);
        let start = meta as u32;
        if start as u16 != wqe_counter || start.wrapping_sub(tail) >= rung.wrapping_sub(tail) {
            return None;
        }
        let bbs = (meta >> 32) as u8 as u32;
        let retired = SendRetired {
            wr_id: slot.wr_id.load(Ordering::Relaxed),
            opcode: (meta >> 40) as u8,
        };
        self.tail.store(start.wrapping_add(bbs), Ordering::Release);
        Some(retired)
    }
}

/// The receive queue's records: the wr_id of each slot, `rung` (receives
/// published) and `tail` (receives completed), free-running. An RQ
/// completes in order, so a CQE's `wqe_counter` only has to agree with
/// `tail`.
#[derive(Debug)]
pub struct RecvRecords {
    wr_ids: Box<[AtomicU64]>,
    mask: u32,
    rung: AtomicU32,
    tail: AtomicU32,
}

impl RecvRecords {
    pub(crate) fn new(wqe_cnt: u32) -> RecvRecords {
        RecvRecords {
            wr_ids: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            mask: wqe_cnt - 1,
            rung: AtomicU32::new(0),
            tail: AtomicU32::new(0),
        }
    }

    #[inline]
    pub(crate) fn record(&self, head: u32, wr_id: u64) {
        self.wr_ids[(head & self.mask) as usize].store(wr_id, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn publish(&self, head: u32) {
        self.rung.store(head, Ordering::Release);
    }

    /// Receives completed so far (free-running).
    #[inline]
    pub fn tail(&self) -> u32 {
        self.tail.load(Ordering::Acquire)
    }

    /// Consumer: completes the oldest published receive, whose index the
    /// CQE's `wqe_counter` must match (masked). `None`, with nothing
    /// changed, if none is outstanding or the counter disagrees.
    #[inline]
    pub fn complete(&self, wqe_counter: u16) -> Option<u64> {
        let rung = self.rung.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Relaxed);
        if rung == tail || (wqe_counter as u32 & self.mask) != (tail & self.mask) {
            return None;
        }
        let wr_id = self.wr_ids[(tail & self.mask) as usize].load(Ordering::Relaxed);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(wr_id)
    }
}

const POSTED: u64 = 1 << 32;

/// The SRQ's records: per WQE its wr_id and state (posted, and the
/// free-running number of the post that filled it), `rung` (posts
/// published), and a return ring of WQEs the consumers completed, which the
/// producer drains to relink them into its free list (the list itself is
/// the producer's alone, so completing never touches the SRQ buffer).
///
/// Unlike a QP's queues, an SRQ has several consumers: QPs on it may
/// report to different CQs, polled on different threads. So a completion
/// claims its WQE with a compare-and-swap on the WQE's state (a WQE is
/// completed once even if two CQEs named it), and the return ring is
/// multi-producer: a consumer reserves a ticket with `fetch_add`, then
/// publishes its slot with the ticket number (Release); the poster takes
/// ticket `n` only once the slot shows `n` (Acquire). rdma-core takes the
/// SRQ's spinlock here (`mlx5_free_srq_wqe`); this costs two locked
/// instructions per SRQ completion and no lock.
///
/// SRQ completions come back in any order, and one receive may stay
/// outstanding while any number of later ones come and go, so "published"
/// is decided by the post number alone: `rung - seq` in `1..2^31`. A
/// receive outstanding across 2^31 later posts would be misjudged; nothing
/// else is.
#[derive(Debug)]
pub struct SrqRecords {
    wr_ids: Box<[AtomicU64]>,
    state: Box<[AtomicU64]>,
    mask: u32,
    rung: AtomicU32,
    /// Slot of ticket `n`: `(n + 1) << 32 | wqe index`, or 0.
    freed: Box<[AtomicU64]>,
    /// Tickets handed out.
    freed_head: AtomicU32,
}

impl SrqRecords {
    pub(crate) fn new(wqe_cnt: u32) -> SrqRecords {
        SrqRecords {
            wr_ids: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            state: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            mask: wqe_cnt - 1,
            rung: AtomicU32::new(0),
            freed: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            freed_head: AtomicU32::new(0),
        }
    }

    /// Producer: WQE `idx` now holds post number `seq`.
    #[inline]
    pub(crate) fn record(&self, idx: u16, seq: u32, wr_id: u64) {
        let i = (idx as u32 & self.mask) as usize;
        self.wr_ids[i].store(wr_id, Ordering::Relaxed);
        self.state[i].store(POSTED | seq as u64, Ordering::Relaxed);
    }

    /// Producer: every post numbered below `posted` is published.
    #[inline]
    pub(crate) fn publish(&self, posted: u32) {
        self.rung.store(posted, Ordering::Release);
    }

    /// Completions handed back (or being handed back) so far.
    #[inline]
    pub(crate) fn freed_head(&self) -> u32 {
        self.freed_head.load(Ordering::Acquire)
    }

    /// The WQE of ticket `n`, once its consumer has published it.
    #[inline]
    pub(crate) fn freed(&self, n: u32) -> Option<u16> {
        let v = self.freed[(n & self.mask) as usize].load(Ordering::Acquire);
        ((v >> 32) as u32 == n.wrapping_add(1)).then_some(v as u16)
    }

    /// Consumer: completes the receive in WQE `wqe_counter` (masked) and
    /// hands the WQE back to the producer. `None`, with nothing changed, if
    /// that WQE is not posted, or was posted after the last ring.
    #[inline]
    pub fn complete(&self, wqe_counter: u16) -> Option<u64> {
        let rung = self.rung.load(Ordering::Acquire);
        let i = (wqe_counter as u32 & self.mask) as usize;
        let st = self.state[i].load(Ordering::Relaxed);
        // Posts since the last ring have seq in rung..; published ones
        // come before rung.
        let age = rung.wrapping_sub(st as u32);
        if st & POSTED == 0 || age == 0 || age >= 1 << 31 {
            return None;
        }
        let wr_id = self.wr_ids[i].load(Ordering::Relaxed);
        // Claim it: only one consumer completes a WQE.
        self.state[i]
            .compare_exchange(st, st & !POSTED, Ordering::AcqRel, Ordering::Relaxed)
            .ok()?;
        // At most capacity (wqe_cnt - 1) tickets are outstanding at once:
        // a ticket is only taken for a posted WQE, and the poster reposts a
        // WQE only after draining its ticket. So slot n is free again.
        let n = self.freed_head.fetch_add(1, Ordering::AcqRel);
        let v = (n.wrapping_add(1) as u64) << 32 | i as u64;
        self.freed[(n & self.mask) as usize].store(v, Ordering::Release);
        Some(wr_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    /// A producer thread posts WQEs of varying sizes into a small ring and
    /// a consumer thread retires them as "CQEs" arrive (a channel stands in
    /// for the device): every wr_id comes back once, in order, and the
    /// producer never overwrites a record the consumer has yet to read.
    #[test]
    fn send_records_across_threads() {
        // Miri (`cargo xtask test`) interprets every step of both threads,
        // so it gets a few hundred requests; that still wraps the ring many
        // times, and its scheduler preempts at random points.
        const N: u64 = if cfg!(miri) { 300 } else { 200_000 };
        let recs = Arc::new(SendRecords::new(16));
        let (tx, rx) = mpsc::sync_channel::<u32>(64);
        let prod = {
            let recs = recs.clone();
            std::thread::spawn(move || {
                let mut cur = 0u32;
                for k in 0..N {
                    let bbs = 1 + (k % 4) as u32;
                    while cur.wrapping_sub(recs.tail()) + bbs > 16 {
                        std::hint::spin_loop();
                    }
                    recs.record(cur, bbs, k, (k % 7) as u8, k as u32);
                    let start = cur;
                    cur = cur.wrapping_add(bbs);
                    recs.publish(cur);
                    tx.send(start).unwrap();
                }
            })
        };
        for k in 0..N {
            let start = rx.recv().unwrap();
            // A counter the device has not reported yet is refused.
            assert_eq!(recs.complete(start.wrapping_add(16) as u16), None);
            let r = recs.complete(start as u16).expect("outstanding");
            assert_eq!((r.wr_id, r.opcode), (k, (k % 7) as u8));
            assert_eq!(recs.complete(start as u16), None, "completed twice");
        }
        prod.join().unwrap();
    }

    /// A thread posting `n` receives into an 8-WQE SRQ's records, reusing
    /// the WQEs its consumers hand back, telling `deliver` (the device)
    /// which WQE holds which receive.
    fn srq_poster(
        recs: &Arc<SrqRecords>,
        n: u64,
        deliver: impl Fn(u16, u64) + Send + 'static,
    ) -> std::thread::JoinHandle<()> {
        let recs = recs.clone();
        std::thread::spawn(move || {
            // One WQE always stays in the free list: 7 receives at most.
            let mut free: std::collections::VecDeque<u16> = (0..7).collect();
            let (mut seq, mut taken) = (0u32, 0u32);
            for k in 0..n {
                while free.is_empty() {
                    while let Some(i) = recs.freed(taken) {
                        free.push_back(i);
                        taken = taken.wrapping_add(1);
                    }
                    std::hint::spin_loop();
                }
                let idx = free.pop_front().unwrap();
                recs.record(idx, seq, k);
                seq = seq.wrapping_add(1);
                recs.publish(seq);
                deliver(idx, k);
            }
        })
    }

    /// The same for an SRQ whose receives complete out of order: each WQE
    /// handed back is reused only after the consumer released it.
    #[test]
    fn srq_records_across_threads() {
        const N: u64 = if cfg!(miri) { 200 } else { 100_000 }; // (see above)
        let recs = Arc::new(SrqRecords::new(8));
        let (tx, rx) = mpsc::sync_channel::<(u16, u64)>(64);
        let prod = srq_poster(&recs, N, move |idx, k| tx.send((idx, k)).unwrap());
        // Complete pairs in reverse order to exercise out-of-order returns.
        let mut held: Option<(u16, u64)> = None;
        for _ in 0..N {
            let (idx, k) = rx.recv().unwrap();
            match held.take() {
                None => held = Some((idx, k)),
                Some((i0, k0)) => {
                    assert_eq!(recs.complete(idx), Some(k));
                    assert_eq!(recs.complete(i0), Some(k0));
                    // (No second complete() here: the producer may already
                    // have reposted i0, legitimately.)
                }
            }
        }
        if let Some((i0, k0)) = held {
            assert_eq!(recs.complete(i0), Some(k0));
        }
        prod.join().unwrap();
    }

    /// Two consumers (QPs on one SRQ reporting to two CQs polled on two
    /// threads) complete alternate receives while the producer reposts what
    /// they hand back: every receive completes exactly once and no WQE is
    /// lost from the free list (the producer would stall).
    #[test]
    fn srq_records_with_two_consumers() {
        const N: u64 = if cfg!(miri) { 200 } else { 100_000 }; // (see above)
        let recs = Arc::new(SrqRecords::new(8));
        let (tx_a, rx_a) = mpsc::sync_channel::<(u16, u64)>(8);
        let (tx_b, rx_b) = mpsc::sync_channel::<(u16, u64)>(8);
        let prod = srq_poster(&recs, N, move |idx, k| {
            let tx = if k % 2 == 0 { &tx_a } else { &tx_b };
            tx.send((idx, k)).unwrap()
        });
        let consumer = |rx: mpsc::Receiver<(u16, u64)>| {
            let recs = recs.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for (idx, k) in rx {
                    assert_eq!(recs.complete(idx), Some(k));
                    got.push(k);
                }
                got
            })
        };
        let (a, b) = (consumer(rx_a), consumer(rx_b));
        prod.join().unwrap();
        let mut all = a.join().unwrap();
        all.extend(b.join().unwrap());
        all.sort_unstable();
        assert!(all.iter().copied().eq(0..N));
        assert_eq!(recs.freed_head(), N as u32);
    }
}

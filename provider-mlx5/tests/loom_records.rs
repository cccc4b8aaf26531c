//! Loom models of the records a queue shares with the pollers of its CQs
//! (`src/records.rs`): for every interleaving loom explores (and every
//! value a Relaxed load may return), each request completes exactly once,
//! with its wr_id, and no ring slot, WQE or free-list entry is lost.
//!
//! Built only with `--cfg loom`, which swaps the records' atomics for
//! loom's (`src/sync.rs`); `cargo xtask test` runs it as
//! `RUSTFLAGS="--cfg loom" cargo test -p provider-mlx5 --test loom_records
//! --release --target-dir target/loom`.
//!
//! The poster is the real queue ([`SendQueue`], [`RecvQueue`],
//! [`SharedRecvQueue`]) over heap memory, so its flow control (the free
//! space it reads from the records' `tail`, the WQEs it takes back from
//! the SRQ's return ring) is modelled too. The model thread posts, rings
//! and then plays the device: it writes one "CQE" per completion, the
//! request's `wqe_counter`, into a word the poller waits on. That word is
//! written and read Relaxed: on hardware the device writes a CQE only
//! after reading the doorbell record that the barrier orders after the
//! records' `rung`, but the Rust memory model knows nothing of that path,
//! so the model grants no such help and the records must make the poller's
//! reads safe by themselves. A poller that meets a CQE before it can see
//! the post therefore gets `None` (nothing changed) and tries again; the
//! real poller would drop such a CQE, which on hardware cannot arrive that
//! early.
//!
//! What loom cannot show: a load returning a store that another thread
//! makes later in the interleaving (load buffering). So these models pin
//! the publishing half of the protocol (each `rung`'s Release store and
//! Acquire load: weakening any of them to Relaxed fails a model), not the
//! handing-back half (`tail`, the SRQ's return ring), whose orderings keep
//! a poller's reads of a record before the poster's rewrite of it.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::{mpsc, Arc};
use loom::thread;
use provider_mlx5::{PostError, QpType, RecvQueue, SendQueue, SharedRecvQueue, SqConfig};
use provider_mlx5_model::mem::SharedBuf;

/// Runs `f` under loom, with at most three preemptions per execution
/// unless `LOOM_MAX_PREEMPTIONS` says otherwise: every model here finishes
/// in seconds at that bound, and the interleavings that break these
/// protocols need one or two.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound.get_or_insert(3);
    b.check(f);
}

/// One "CQE" per expected completion: 0 until the device writes it, then
/// the `wqe_counter` it reports, plus one.
fn cqes(n: usize) -> Arc<Vec<AtomicU32>> {
    Arc::new((0..n).map(|_| AtomicU32::new(0)).collect())
}

/// The device reports `wqe_counter` in CQE `cqe` (Relaxed: see the
/// module's comment).
fn deliver(cqes: &[AtomicU32], cqe: usize, wqe_counter: u32) {
    cqes[cqe].store((wqe_counter & 0xffff) + 1, Ordering::Relaxed);
}

/// The poller: waits for CQE `cqe`, then completes it through `complete`
/// (the records' `complete`, as the CQ's lookup calls it), retrying while
/// the post is not yet visible.
fn poll<T>(cqes: &[AtomicU32], cqe: usize, mut complete: impl FnMut(u16) -> Option<T>) -> T {
    loop {
        let v = cqes[cqe].load(Ordering::Relaxed);
        if v != 0 {
            if let Some(t) = complete((v - 1) as u16) {
                return t;
            }
        }
        thread::yield_now();
    }
}

/// Posts with `post` until the queue has room.
fn post_when_room(mut post: impl FnMut() -> Result<(), PostError>) {
    loop {
        match post() {
            Ok(()) => return,
            Err(PostError::QueueFull) => thread::yield_now(),
            Err(e) => panic!("post refused: {e:?}"),
        }
    }
}

/// Four NOPs through a two-block SQ (so the poster must wait for the
/// poller twice and reuse both slots), the second unsignaled: the CQE of
/// the third retires it with the third. The poller sees wr_ids 0, 2, 3 in
/// order, each once (a repeated CQE is refused), and at the end every
/// block is free again.
#[test]
fn send_records_one_poster_one_poller() {
    model(|| {
        const SIGNALED: [bool; 4] = [true, false, true, true];
        let (ring, dbrec, bf) = (
            SharedBuf::new(2 * 64, 64),
            SharedBuf::new(8, 8),
            SharedBuf::new(8, 8),
        );
        let cfg = SqConfig {
            qpn: 1,
            qp_type: QpType::Rc,
            wqe_cnt: 2,
            max_wr: 2,
            max_sge: 1,
            max_inline: 0,
            bf_size: 0,
            blueflame: false,
            prefer_blueflame: false,
            sig_all: false,
        };
        // SAFETY: three live allocations of the sizes given, used by
        // nothing else, which outlive the queue (dropped first, below).
        let mut sq =
            unsafe { SendQueue::new(ring.ptr(), ring.len(), dbrec.ptr32(), bf.ptr(), cfg) }
                .unwrap();
        let cqes = cqes(3);
        let poller = {
            let (recs, cqes) = (sq.shared_records(), cqes.clone());
            thread::spawn(move || {
                let mut got = Vec::new();
                for i in 0..3 {
                    let (c, r) = poll(&cqes, i, |c| recs.complete(c).map(|r| (c, r)));
                    assert_eq!(recs.complete(c), None, "completed twice");
                    got.push(r.wr_id);
                }
                got
            })
        };
        let mut n = 0;
        for (k, signaled) in SIGNALED.into_iter().enumerate() {
            let start = sq.cur_post();
            post_when_room(|| sq.post_nop(k as u64, signaled));
            sq.ring();
            if signaled {
                deliver(&cqes, n, start);
                n += 1;
            }
        }
        assert_eq!(poller.join().unwrap(), [0, 2, 3]);
        assert_eq!(sq.free_wqebbs(), 2, "a block was lost");
        drop(sq);
    });
}

/// Three receives through a two-slot RQ: each completes once, in order,
/// with its wr_id, and the RQ ends empty.
#[test]
fn recv_records_one_poster_one_poller() {
    model(|| {
        let (ring, dbrec) = (SharedBuf::new(2 * 16, 16), SharedBuf::new(8, 8));
        // SAFETY: two live allocations of the sizes given, used by nothing
        // else, which outlive the queue (dropped first, below).
        let mut rq =
            unsafe { RecvQueue::new(ring.ptr(), ring.len(), dbrec.ptr32(), 2, 4, 1) }.unwrap();
        let cqes = cqes(3);
        let poller = {
            let (recs, cqes) = (rq.shared_records(), cqes.clone());
            thread::spawn(move || {
                let mut got = Vec::new();
                for i in 0..3 {
                    let (c, wr_id) = poll(&cqes, i, |c| recs.complete(c).map(|w| (c, w)));
                    assert_eq!(recs.complete(c), None, "completed twice");
                    got.push(wr_id);
                }
                got
            })
        };
        for k in 0..3u32 {
            // The RQ consumes in order: receive k is in slot k.
            // SAFETY: no SGEs, so no memory is named.
            post_when_room(|| unsafe { rq.post(k as u64, &[]) });
            rq.ring();
            deliver(&cqes, k as usize, k);
        }
        assert_eq!(poller.join().unwrap(), [0, 1, 2]);
        assert_eq!(rq.outstanding(), 0);
        drop(rq);
    });
}

/// SRQ WQE stride (32 bytes: the next segment and one data segment).
const SRQ_SHIFT: u32 = 5;

/// An SRQ of four WQEs (three receives at once) and the device's walk of
/// its free list.
struct Srq {
    srq: SharedRecvQueue,
    ring: SharedBuf,
    _dbrec: SharedBuf,
    /// The WQE the device takes next (it starts at WQE 0 and follows each
    /// WQE's `next_wqe_index`, as a ConnectX does).
    device_head: u16,
}

impl Srq {
    fn new() -> Srq {
        let (ring, dbrec) = (SharedBuf::new(4 << SRQ_SHIFT, 64), SharedBuf::new(4, 4));
        // SAFETY: two live allocations of the sizes given, used by nothing
        // else, which outlive the queue (declared before them in Srq, so
        // dropped first).
        let srq =
            unsafe { SharedRecvQueue::new(ring.ptr(), ring.len(), dbrec.ptr32(), 4, SRQ_SHIFT, 1) }
                .unwrap();
        Srq {
            srq,
            ring,
            _dbrec: dbrec,
            device_head: 0,
        }
    }

    /// Posts receive `wr_id` (waiting for a WQE to come back if none is
    /// free), rings, and returns the WQE the device puts it in.
    fn post(&mut self, wr_id: u64) -> u16 {
        // SAFETY: no SGEs, so no memory is named.
        post_when_room(|| unsafe { self.srq.post(wr_id, &[]) });
        self.srq.ring();
        let idx = self.device_head & 3;
        self.device_head = self.ring.be16(((idx as usize) << SRQ_SHIFT) + 2);
        idx
    }

    /// After every receive completed: nothing is outstanding and the free
    /// list still holds every WQE once (three more receives fit, land in
    /// three different WQEs and complete with their own wr_ids).
    fn check_free_list(mut self) {
        assert_eq!(self.srq.outstanding(), 0);
        let idx: Vec<u16> = (100..103).map(|k| self.post(k)).collect();
        for (k, i) in (100..103).zip(idx) {
            assert_eq!(self.srq.complete(i), Some(k), "WQE {i} doubly listed");
        }
    }
}

/// Four receives through an SRQ of three, completed by one poller out of
/// order (1, 0, 3, 2, as receives on different QPs may complete), the
/// fourth post waiting for a WQE to come back: each completes once with
/// its wr_id, and the free list stays whole.
#[test]
fn srq_records_one_poster_one_poller() {
    model(|| {
        let mut srq = Srq::new();
        let cqes = cqes(4);
        let poller = {
            let (recs, cqes) = (srq.srq.shared_records(), cqes.clone());
            thread::spawn(move || [1, 0, 3, 2].map(|i| poll(&cqes, i, |c| recs.complete(c))))
        };
        for k in 0..4 {
            let idx = srq.post(k as u64);
            deliver(&cqes, k, idx as u32);
        }
        assert_eq!(poller.join().unwrap(), [1, 0, 3, 2]);
        srq.check_free_list();
    });
}

/// A poller of an SRQ that waits for the CQEs sent to it, without
/// spinning, completes each, and returns what each completion gave.
///
/// Two pollers that both spin waiting for a third thread can take turns
/// forever under loom (each yield hands over to the other), which loom
/// reports as a livelock; so with two pollers the CQEs come through a
/// channel, which also orders them after the post (Release/Acquire) as the
/// device does. What these models check is the pollers' race with each
/// other (claiming a WQE, taking tickets on the return ring) and with the
/// poster draining that ring; the single-poller models check publication
/// without the device's ordering.
fn srq_poller(
    recs: std::sync::Arc<provider_mlx5::SrqRecords>,
    n: usize,
) -> (mpsc::Sender<u16>, thread::JoinHandle<Vec<Option<u64>>>) {
    let (tx, rx) = mpsc::channel::<u16>();
    let h = thread::spawn(move || (0..n).map(|_| recs.complete(rx.recv().unwrap())).collect());
    (tx, h)
}

/// Four receives through an SRQ of three, completed by two pollers (QPs on
/// one SRQ reporting to two CQs): receives 0 and 2 by one, 1 and 3 by the
/// other, racing each other on the return ring while the poster takes
/// WQEs back from it for the fourth post. Each completes once with its
/// wr_id, and no WQE is lost from or doubled in the free list.
#[test]
fn srq_records_one_poster_two_pollers() {
    model(|| {
        let mut srq = Srq::new();
        let (a_tx, a) = srq_poller(srq.srq.shared_records(), 2);
        let (b_tx, b) = srq_poller(srq.srq.shared_records(), 2);
        for k in 0..4u64 {
            let idx = srq.post(k);
            [&a_tx, &b_tx][k as usize % 2].send(idx).unwrap();
        }
        assert_eq!(a.join().unwrap(), [Some(0), Some(2)]);
        assert_eq!(b.join().unwrap(), [Some(1), Some(3)]);
        srq.check_free_list();
    });
}

/// One receive whose CQE reaches both pollers (a repeated CQE, on two
/// CQs): exactly one of them completes it, and the WQE comes back to the
/// free list once.
#[test]
fn srq_repeated_cqe_completes_once() {
    model(|| {
        let mut srq = Srq::new();
        let (a_tx, a) = srq_poller(srq.srq.shared_records(), 1);
        let (b_tx, b) = srq_poller(srq.srq.shared_records(), 1);
        let idx = srq.post(7);
        a_tx.send(idx).unwrap();
        b_tx.send(idx).unwrap();
        let got = [a.join().unwrap()[0], b.join().unwrap()[0]];
        assert!(matches!(got, [Some(7), None] | [None, Some(7)]), "{got:?}");
        srq.check_free_list();
    });
}

//! A CQ's registry of QPs and its poller (`provider_mlx5::registry`)
//! against the device model: completions resolve through the records the
//! QPs registered, a destroyed QP's leftover CQEs are dropped even when its
//! number is reused at once, and SRQ receives go back to the SRQ through
//! whichever CQ reports them.

use provider_mlx5::{
    next_id, AhAddr, CompletionQueue, Poller, QpEntry, RecvRecs, Registry, Remote, SendOp,
    SendQueue, SendWr, Sge, SharedRecvQueue, Wc, WcOpcode,
};
use provider_mlx5_model::mem::access;
use provider_mlx5_model::{Device, RecvSide};
use std::sync::Arc;

/// A send request over plain SGEs.
type Wr<'a> = SendWr<'a, Sge, AhAddr>;

fn registry_of(cq: &CompletionQueue) -> Arc<Registry> {
    // SAFETY: the model's ring outlives the test's pollers and registries
    // (the Device is dropped last).
    Arc::new(Registry::new(unsafe { cq.scanner() }))
}

fn entry(qpn: u32, id: u64, sq: Option<&SendQueue>, rq: Option<RecvRecs>) -> QpEntry {
    QpEntry::new(qpn, id, sq.map(|q| q.shared_records()), rq)
}

/// Posts `wrs` on `sq` and rings once.
fn post(sq: &mut SendQueue, wrs: &[Wr<'_>]) {
    for wr in wrs {
        // SAFETY: every SGE in these tests names a model region, which
        // outlives the queues.
        unsafe { sq.post(wr) }.unwrap();
    }
    sq.ring();
}

struct Bed {
    // Provider objects before the model that owns their memory.
    sq_a: SendQueue,
    poller: Poller,
    registry: Arc<Registry>,
    id_a: u64,
    dev: Device,
    a: usize,
    mr_a: usize,
    mr_b: usize,
}

/// QP a sends to QP b; both report to one CQ, polled through a registry.
fn bed() -> Bed {
    let mut dev = Device::new();
    let c = dev.add_cq(64, 64);
    let rq = RecvSide::Rq { cnt: 16, shift: 6 };
    let a = dev.add_qp(false, 16, RecvSide::Rq { cnt: 16, shift: 6 }, c, c, 256);
    let b = dev.add_qp(false, 16, rq, c, c, 256);
    dev.connect(a, b);
    let mr_a = dev.mem.reg(4096, access::ALL);
    let mr_b = dev.mem.reg(4096, access::ALL);
    let sq_a = dev.provider_sq(a, 4, 64, true);
    let rq_b = dev.provider_rq(b, 4);
    let cq = dev.provider_cq(c);
    let registry = registry_of(&cq);
    let id_a = next_id();
    registry.add(entry(dev.qps[a].qpn, id_a, Some(&sq_a), None));
    registry.add(entry(
        dev.qps[b].qpn,
        next_id(),
        None,
        Some(RecvRecs::Rq(rq_b.shared_records())),
    ));
    let poller = Poller::new(cq, registry.clone());
    Bed {
        sq_a,
        poller,
        registry,
        id_a,
        dev,
        a,
        mr_a,
        mr_b,
    }
}

impl Bed {
    fn sge(&self, off: u64, len: u32) -> [Sge; 1] {
        let m = &self.dev.mem.mrs[self.mr_a];
        [Sge {
            addr: m.buf.addr() + off,
            length: len,
            lkey: m.lkey,
        }]
    }
    fn remote(&self, off: u64) -> Remote {
        let m = &self.dev.mem.mrs[self.mr_b];
        Remote {
            addr: m.buf.addr() + off,
            rkey: m.rkey,
        }
    }
    /// Posts and rings one RDMA WRITE of a's first 8 bytes, and lets the
    /// device run it.
    fn write(&mut self, wr_id: u64) {
        let src = self.sge(0, 8);
        let wr = [Wr::new(wr_id, SendOp::Write(self.remote(0)), &src)];
        post(&mut self.sq_a, &wr);
        self.dev.process();
    }
    fn poll(&mut self) -> Vec<Wc> {
        let mut out = [Wc::default(); 32];
        let n = self.poller.poll(&mut out);
        out[..n].to_vec()
    }
}

/// A QP is destroyed with a completion still in the ring and its number
/// is reused at once: the old CQE is dropped (it lies before the
/// tombstone's position), the new QP's completions are reported.
#[test]
fn a_destroyed_qps_cqes_are_dropped_and_its_number_can_be_reused() {
    let mut t = bed();
    t.write(5);
    // As the root crate's QP drop does after DESTROY_QP.
    let qpn_a = t.dev.qps[t.a].qpn;
    t.registry.retire(t.id_a);
    // A new QP of the same number registers (the model's QP a stands in
    // for it, so its records are the same object).
    t.registry.add(entry(qpn_a, next_id(), Some(&t.sq_a), None));
    t.write(6);
    let ids: Vec<u64> = t.poll().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [6]);
    assert_eq!(t.poller.discarded(), 1);
    // A number registered again without the old incarnation retired (its
    // drop still running): the add retires it.
    t.write(7);
    t.registry.add(entry(qpn_a, next_id(), Some(&t.sq_a), None));
    t.write(8);
    let ids: Vec<u64> = t.poll().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [8]);
    assert_eq!(t.poller.discarded(), 2);
}

/// Two QPs receive through one SRQ, on two CQs: each CQ resolves its QP's
/// receives through the SRQ records the QPs registered, and the SRQ takes
/// back what either completed.
#[test]
fn srq_receives_resolve_through_the_registry_of_each_cq() {
    let mut dev = Device::new();
    let (cs, c1, c2) = (dev.add_cq(64, 64), dev.add_cq(64, 64), dev.add_cq(64, 64));
    let s = dev.add_srq(8, 6);
    let a1 = dev.add_qp(false, 16, RecvSide::None, cs, cs, 256);
    let a2 = dev.add_qp(false, 16, RecvSide::None, cs, cs, 256);
    let b1 = dev.add_qp(false, 16, RecvSide::Srq(s), c1, c1, 256);
    let b2 = dev.add_qp(false, 16, RecvSide::Srq(s), c2, c2, 256);
    dev.connect(a1, b1);
    dev.connect(a2, b2);
    let mr = dev.mem.reg(4096, access::ALL);
    let mut srq = dev.provider_srq(s, 2);
    let mut sq1 = dev.provider_sq(a1, 1, 64, true);
    let mut sq2 = dev.provider_sq(a2, 1, 64, true);
    let (cq_s, cq1, cq2) = (
        dev.provider_cq(cs),
        dev.provider_cq(c1),
        dev.provider_cq(c2),
    );
    let (reg_s, reg1, reg2) = (registry_of(&cq_s), registry_of(&cq1), registry_of(&cq2));
    for (q, sq) in [(a1, &sq1), (a2, &sq2)] {
        reg_s.add(entry(dev.qps[q].qpn, next_id(), Some(sq), None));
    }
    let mut ids = [0; 2];
    for (k, (q, reg)) in [(b1, &reg1), (b2, &reg2)].into_iter().enumerate() {
        ids[k] = next_id();
        let rq = RecvRecs::Srq(srq.shared_records());
        reg.add(entry(dev.qps[q].qpn, ids[k], None, Some(rq)));
    }
    let mut p_s = Poller::new(cq_s, reg_s);
    let mut p1 = Poller::new(cq1, reg1.clone());
    let mut p2 = Poller::new(cq2, reg2);
    let (base, lkey) = (dev.mem.mrs[mr].buf.addr(), dev.mem.mrs[mr].lkey);
    let mut out = [Wc::default(); 16];
    let mut next = 0u64;
    for round in 0..6u64 {
        // Refill the SRQ (7 receives at most), then publish once.
        let room = srq_room(&srq);
        for i in 0..room {
            let sge = [Sge {
                addr: base + (next + i) % 32 * 64,
                length: 64,
                lkey,
            }];
            // SAFETY: region mr outlives the SRQ.
            unsafe { srq.post(next + i, &sge) }.unwrap();
        }
        next += room;
        srq.ring();
        let m = [round as u8; 8];
        for (i, sq) in [&mut sq1, &mut sq2].into_iter().enumerate() {
            post(sq, &[Wr::inline(100 + i as u64, SendOp::Send, &m)]);
        }
        dev.process();
        // Poll b2's CQ first: its receive came second off the SRQ.
        let n2 = p2.poll(&mut out);
        let w2 = out[0];
        let n1 = p1.poll(&mut out);
        let w1 = out[0];
        assert_eq!((n1, n2), (1, 1), "round {round}");
        assert_eq!(
            (w1.opcode, w1.byte_len, w1.qp_num),
            (WcOpcode::RECV, 8, dev.qps[b1].qpn)
        );
        assert_eq!(w2.qp_num, dev.qps[b2].qpn);
        assert_eq!(
            w2.wr_id,
            w1.wr_id + 1,
            "SRQ WQEs are consumed in posting order"
        );
        assert_eq!(p_s.poll(&mut out), 2);
    }
    assert_eq!(srq.outstanding(), 7 - 2);
    assert_eq!(p1.discarded() + p2.discarded() + p_s.discarded(), 0);
    // b1 receives once more, then is destroyed before its CQ is polled:
    // the receive's SRQ WQE still comes back (rdma-core's cq_clean frees
    // it too), and the completion is dropped.
    let m = [9u8; 8];
    post(&mut sq1, &[Wr::inline(200, SendOp::Send, &m)]);
    dev.process();
    assert_eq!(p_s.poll(&mut out), 1);
    assert_eq!(
        srq.outstanding(),
        5,
        "consumed by the device, not completed"
    );
    reg1.retire(ids[0]);
    assert_eq!(p1.poll(&mut out), 0);
    assert_eq!((p1.discarded(), srq.outstanding()), (1, 4));
}

fn srq_room(srq: &SharedRecvQueue) -> u64 {
    (srq.capacity() - srq.outstanding()) as u64
}

/// A device that writes CQEs naming no QP as fast as the poller consumes
/// them (a broken or hostile one): the poller drops them, and returns
/// once it has dropped a ring's worth in one call, instead of polling for
/// as long as the device keeps writing. The device here is a second
/// thread that keeps every entry from the published consumer index on
/// owned by software; it gives up after ten seconds, so that a poller
/// without the bound ends too (having dropped far more than a ring).
#[test]
#[cfg_attr(miri, ignore)] // a second thread writing the ring as a device does: a race by design
fn a_flood_of_cqes_naming_nothing_ends_the_poll_after_a_ring() {
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
    use std::time::{Duration, Instant};
    const NCQE: u32 = 64;
    let mut dev = Device::new();
    let c = dev.add_cq(NCQE, 64);
    let cq = dev.provider_cq(c);
    let registry = registry_of(&cq);
    let mut poller = Poller::new(cq, registry);
    // Every entry a requester CQE of QP 0xabcde, which no one registered;
    // only the owner byte (opcode and owner bit) changes from lap to lap.
    for slot in 0..NCQE as usize {
        let mut b = [0u8; 64];
        b[56..60].copy_from_slice(&0xabcde_u32.to_be_bytes());
        b[63] = 0xf0; // invalid until the device hands it over
        dev.cqs[c].buf.write(slot * 64, &b);
    }
    let ring = dev.cqs[c].buf.ptr().as_ptr() as usize;
    let dbrec = dev.cqs[c].dbrec.ptr32().as_ptr() as usize;
    // Hands software the entries up to a lap past the published consumer
    // index, from `*done` on (only those the poller gave back since).
    let hand_over = move |done: &mut u32| {
        // SAFETY: the model's doorbell record, alive for the test; the
        // provider writes it with volatile stores.
        let ci = u32::from_be(unsafe { (dbrec as *const u32).read_volatile() }) & 0xff_ffff;
        let end = ci + NCQE;
        for p in std::mem::replace(done, end)..end {
            let owner = ((p & NCQE) != 0) as u8;
            let at = ring + (p & (NCQE - 1)) as usize * 64 + 63;
            // SAFETY: byte 63 of an entry of the model's ring, alive for
            // the test; stored atomically, as the device's last store.
            unsafe { AtomicU8::from_ptr(at as *mut u8) }.store(owner, Ordering::Release);
        }
    };
    let mut done = 0;
    hand_over(&mut done);
    let (stop, running) = (AtomicBool::new(false), AtomicBool::new(false));
    let (stop, running) = (&stop, &running);
    let gave_up = std::thread::scope(|s| {
        let device = s.spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop.load(Ordering::Relaxed) {
                if Instant::now() > deadline {
                    return true;
                }
                hand_over(&mut done);
                running.store(true, Ordering::Relaxed);
            }
            false
        });
        // The poll starts with the device at work.
        while !running.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
        let mut out = [Wc::default(); 4];
        let n = poller.poll(&mut out);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(n, 0, "nothing to report");
        device.join().unwrap()
    });
    assert!(!gave_up, "the poll returned only once the device stopped");
    assert!(
        (1..=NCQE as u64).contains(&poller.discarded()),
        "dropped {} CQEs in one poll; at most a ring's worth ({NCQE})",
        poller.discarded()
    );
}

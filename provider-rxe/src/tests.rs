//! The data path against a stand-in for the kernel's side of each ring:
//! random sequences of posts and consumes across many wraps.

use crate::queue::testing::FakeRing;
use crate::queue::{CONSUMER_OFFSET, DATA_OFFSET, INDEX_MASK_OFFSET, PRODUCER_OFFSET};
use crate::wqe::{get_u32, get_u64, recv, send, wc, WC_SIZE};
use crate::*;
use proptest::prelude::*;
use rverbs_types::{PostError, QpType};

/// Requests over plain SGEs; these tests have no UD destinations (`AhAddr`
/// stands in for the address handle type).
type Wr<'a> = SendWr<'a, Sge, AhAddr>;

const SIGNALED: u32 = 2;
const SOLICITED: u32 = 4;
const INLINE: u32 = 8;
const RDMA_WRITE_WITH_IMM: u32 = 1;

/// The kernel's consumer: reads slot `cons`, advances the consumer index.
fn kernel_consume(r: &mut FakeRing, elem: usize) -> Vec<u8> {
    let mask = r.get_u32(INDEX_MASK_OFFSET);
    let cons = r.get_u32(CONSUMER_OFFSET);
    assert_ne!(
        cons,
        r.get_u32(PRODUCER_OFFSET),
        "kernel consumes from an empty ring"
    );
    let off = DATA_OFFSET + cons as usize * elem;
    let slot = r.bytes()[off..off + elem].to_vec();
    r.set_u32(CONSUMER_OFFSET, (cons + 1) & mask);
    slot
}

fn sq_ring(slots: u32) -> (FakeRing, SendQueue) {
    sq_ring_of(slots, QpType::Rc)
}

/// An SQ of `slots` 256-byte slots (a header and 3 SGEs, or 48 inline
/// bytes) for a QP of `qp_type`.
pub(crate) fn sq_ring_of(slots: u32, qp_type: QpType) -> (FakeRing, SendQueue) {
    let mut r = FakeRing::new(slots, 8);
    let q = r.queue(208);
    let sq = SendQueue::new(q, 3, 48, qp_type).unwrap();
    (r, sq)
}

/// Two SGEs, of 10 and 20 bytes.
pub(crate) const TWO_SGES: [Sge; 2] = [
    Sge {
        addr: 0x1000,
        length: 10,
        lkey: 7,
    },
    Sge {
        addr: 0x2000,
        length: 20,
        lkey: 8,
    },
];

#[test]
fn send_wqe_fields_land_where_the_kernel_reads_them() {
    let (mut r, mut sq) = sq_ring(4);
    let sges = TWO_SGES;
    let remote = Remote {
        addr: 0xdead_0000,
        rkey: 0x55,
    };
    let op = SendOp::WriteWithImm(remote, 0x1234_5678);
    let wr = Wr::new(0xabcdef, op, &sges).solicited(true);
    // SAFETY: the SGEs are never dereferenced by the fake kernel.
    unsafe { sq.post(&wr) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u64(&w, send::WR_ID), 0xabcdef);
    assert_eq!(get_u32(&w, send::OPCODE), RDMA_WRITE_WITH_IMM);
    assert_eq!(get_u32(&w, send::SEND_FLAGS), SIGNALED | SOLICITED);
    // Immediates are stored in wire (big-endian) order.
    assert_eq!(get_u32(&w, send::EX_IMM), 0x1234_5678u32.to_be());
    assert_eq!(get_u64(&w, send::RDMA_REMOTE_ADDR), 0xdead_0000);
    assert_eq!(get_u32(&w, send::RDMA_RKEY), 0x55);
    assert_eq!(get_u64(&w, send::IOVA), 0xdead_0000);
    assert_eq!(get_u32(&w, send::DMA_LENGTH), 30);
    assert_eq!(get_u32(&w, send::DMA_RESID), 30);
    assert_eq!(get_u32(&w, send::DMA_NUM_SGE), 2);
    assert_eq!(get_u32(&w, send::STATUS), 0);
    assert_eq!(get_u32(&w, send::STATE), 0);
    assert_eq!(get_u64(&w, send::PAYLOAD), 0x1000);
    assert_eq!(get_u32(&w, send::PAYLOAD + 8), 10);
    assert_eq!(get_u32(&w, send::PAYLOAD + 12), 7);
    assert_eq!(get_u64(&w, send::PAYLOAD + 16), 0x2000);
}

#[test]
fn atomics_and_inline() {
    let (mut r, mut sq) = sq_ring(4);
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    let cas = |addr| SendOp::CompareSwap {
        remote: Remote { addr, rkey: 3 },
        compare: 5,
        swap: 9,
    };
    let mut wr = Wr::new(1, cas(0x8000), &sge);
    // SAFETY: nothing dereferences the SGE.
    unsafe { sq.post(&wr) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u64(&w, send::ATOMIC_REMOTE_ADDR), 0x8000);
    assert_eq!(get_u64(&w, send::ATOMIC_COMPARE_ADD), 5);
    assert_eq!(get_u64(&w, send::ATOMIC_SWAP), 9);
    assert_eq!(get_u32(&w, send::ATOMIC_RKEY), 3);
    wr.op = cas(0x8004);
    // SAFETY: as above.
    assert_eq!(unsafe { sq.post(&wr) }, Err(PostError::BadAtomic));

    let data = *b"hello, inline world";
    let wr = Wr::inline(2, SendOp::Send, &data).signaled(false);
    // SAFETY: inline payloads are copied from a live slice.
    unsafe { sq.post(&wr) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::SEND_FLAGS), INLINE);
    assert_eq!(&w[send::PAYLOAD..send::PAYLOAD + data.len()], &data);
    assert_eq!(get_u32(&w, send::DMA_LENGTH), data.len() as u32);
    let big = [0u8; 49];
    // SAFETY: as above.
    let e = unsafe { sq.post(&Wr::inline(3, SendOp::Send, &big)) };
    assert_eq!(e, Err(PostError::InlineTooLong { given: 49, max: 48 }));
    let four = [sge[0]; 4];
    // SAFETY: as above.
    let e = unsafe { sq.post(&Wr::new(3, SendOp::Send, &four)) };
    assert_eq!(e, Err(PostError::TooManySges { given: 4, max: 3 }));
    // SAFETY: as above.
    let e = unsafe { sq.post(&Wr::inline(3, SendOp::Read(Remote::default()), b"x")) };
    assert_eq!(e, Err(PostError::InlineNotAllowed { opcode: 4 }));
    let mut both = Wr::new(3, SendOp::Send, &sge);
    both.inline = Some(b"x");
    // SAFETY: as above.
    assert_eq!(unsafe { sq.post(&both) }, Err(PostError::InlineAndSges));
}

#[test]
fn capabilities_larger_than_the_slots_are_refused() {
    let mut r = FakeRing::new(4, 8);
    let q = r.queue(208);
    assert!(matches!(
        SendQueue::new(q, 4, 0, QpType::Rc),
        Err(RingError { .. })
    ));
}

proptest! {
    /// Posts and kernel consumes in random order over many wraps: the ring
    /// never takes more than slots - 1, refuses (not drops) when full, and
    /// the kernel sees every WR exactly once, in order, with its ssn.
    #[test]
    fn sq_never_loses_or_duplicates(ops in proptest::collection::vec(any::<bool>(), 1..400), slots_log in 1u32..5) {
        let slots = 1u32 << slots_log;
        let (mut r, mut sq) = sq_ring(slots);
        let sge = [Sge { addr: 0x1000, length: 1, lkey: 1 }];
        let (mut next_id, mut next_seen, mut in_ring) = (0u64, 0u64, 0u32);
        for post in ops {
            if post {
                let wr = Wr::new(next_id, SendOp::Send, &sge);
                // SAFETY: the fake kernel never dereferences SGEs.
                match unsafe { sq.post(&wr) } {
                    Ok(()) => { next_id += 1; in_ring += 1; }
                    Err(PostError::QueueFull) => prop_assert_eq!(in_ring, slots - 1),
                    Err(e) => prop_assert!(false, "unexpected {e:?}"),
                }
            } else if in_ring > 0 {
                let w = kernel_consume(&mut r, 256);
                prop_assert_eq!(get_u64(&w, send::WR_ID), next_seen);
                prop_assert_eq!(get_u32(&w, send::SSN) as u64, next_seen);
                next_seen += 1;
                in_ring -= 1;
            }
            prop_assert_eq!(sq.outstanding(), in_ring);
        }
    }

    /// As above with list posts: requests posted unpublished are not the
    /// kernel's until `publish` (it consumes only published ones), the
    /// room is never overestimated, and every request arrives once, in
    /// order.
    #[test]
    fn unpublished_posts_wait_for_publish(ops in proptest::collection::vec(0u8..3, 1..400), slots_log in 1u32..5) {
        let slots = 1u32 << slots_log;
        let (mut r, mut sq) = sq_ring(slots);
        let sge = [Sge { addr: 0x1000, length: 1, lkey: 1 }];
        let (mut next_id, mut next_seen, mut written, mut published) = (0u64, 0u64, 0u32, 0u32);
        for op in ops {
            match op {
                0 => {
                    let wr = Wr::new(next_id, SendOp::Send, &sge);
                    // SAFETY: the fake kernel never dereferences SGEs.
                    match unsafe { sq.post_unpublished(&wr) } {
                        Ok(()) => { next_id += 1; written += 1; }
                        Err(PostError::QueueFull) => prop_assert_eq!(written, slots - 1),
                        Err(e) => prop_assert!(false, "unexpected {e:?}"),
                    }
                }
                1 => {
                    sq.publish();
                    published = written;
                }
                _ if published > 0 => {
                    let w = kernel_consume(&mut r, 256);
                    prop_assert_eq!(get_u64(&w, send::WR_ID), next_seen);
                    next_seen += 1;
                    published -= 1;
                    written -= 1;
                }
                _ => {}
            }
            // The kernel sees exactly the published requests.
            let seen = r.get_u32(PRODUCER_OFFSET).wrapping_sub(r.get_u32(CONSUMER_OFFSET)) & (slots - 1);
            prop_assert_eq!(seen, published);
        }
    }

    /// The same for receives, with random SGE counts.
    #[test]
    fn rq_never_loses_or_duplicates(ops in proptest::collection::vec(0usize..4, 1..400)) {
        let mut r = FakeRing::new(8, 7); // 128-byte slots: header + 5 SGEs
        let q = r.queue(40);
        let mut rq = RecvQueue::new(q, 5).unwrap();
        let sges = [Sge { addr: 0x1000, length: 3, lkey: 9 }; 3];
        let (mut next_id, mut next_seen, mut in_ring) = (0u64, 0u64, 0u32);
        for op in ops {
            if op > 0 {
                // SAFETY: the fake kernel never dereferences SGEs.
                match unsafe { rq.post(next_id, &sges[..op]) } {
                    Ok(()) => { next_id += 1; in_ring += 1; }
                    Err(PostError::QueueFull) => prop_assert_eq!(in_ring, 7),
                    Err(e) => prop_assert!(false, "unexpected {e:?}"),
                }
            } else if in_ring > 0 {
                let w = kernel_consume(&mut r, 128);
                prop_assert_eq!(get_u64(&w, recv::WR_ID), next_seen);
                let n = get_u32(&w, recv::DMA_NUM_SGE);
                prop_assert_eq!(get_u32(&w, recv::DMA_LENGTH), 3 * n);
                next_seen += 1;
                in_ring -= 1;
            }
        }
    }

    /// The kernel produces completions; polls in random batch sizes return
    /// each exactly once, in order, and hand the slots back.
    #[test]
    fn cq_polls_each_completion_once(batches in proptest::collection::vec((0u32..10, 0usize..6), 1..100)) {
        let mut r = FakeRing::new(8, 6);
        let q = r.queue(WC_SIZE);
        let mut cq = CompletionQueue::new(q).unwrap();
        let (mut produced, mut seen) = (0u64, 0u64);
        let mut out = [Wc::default(); 8];
        for (produce, poll) in batches {
            for _ in 0..produce {
                let prod = r.get_u32(PRODUCER_OFFSET);
                let cons = r.get_u32(CONSUMER_OFFSET);
                if (prod + 1) & 7 == cons { break; } // the kernel's full check
                let off = DATA_OFFSET + prod as usize * 64;
                r.set_u32(off + wc::WR_ID, produced as u32);
                r.set_u32(off + wc::STATUS, WcStatus::WR_FLUSH_ERR.0);
                r.set_u32(PRODUCER_OFFSET, (prod + 1) & 7);
                produced += 1;
            }
            let n = cq.poll(&mut out[..poll]);
            for wc in &out[..n] {
                prop_assert_eq!(wc.wr_id, seen);
                prop_assert_eq!(wc.status, WcStatus::WR_FLUSH_ERR);
                seen += 1;
            }
            prop_assert_eq!(r.get_u32(CONSUMER_OFFSET) as u64, seen % 8);
        }
        let n = cq.poll(&mut out);
        seen += n as u64;
        prop_assert_eq!(seen, produced);
    }
}

#[test]
fn ud_queues_take_sends_to_rxe_address_handles_only() {
    let mut r = FakeRing::new(4, 8);
    let q = r.queue(208);
    let mut sq = SendQueue::new(q, 3, 48, QpType::Ud).unwrap();
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    let ah = AhAddr::Number(17);
    let wr = Wr::new(1, SendOp::Send, &sge).to(&ah, 0x22, 0x1111);
    // SAFETY: nothing dereferences the SGE.
    unsafe { sq.post(&wr) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::UD_REMOTE_QPN), 0x22);
    assert_eq!(get_u32(&w, send::UD_REMOTE_QKEY), 0x1111);
    assert_eq!(get_u32(&w, send::UD_AH_NUM), 17);
    let read = Wr::new(2, SendOp::Read(Remote::default()), &sge).to(&ah, 0x22, 1);
    // SAFETY: as above.
    let e = unsafe { sq.post(&read) };
    assert_eq!(
        e,
        Err(PostError::NotOnTransport {
            opcode: 4,
            qp_type: QpType::Ud
        })
    );
    let foreign = AhAddr::Vector([0; rverbs_types::AV_LEN]);
    let wr = Wr::new(3, SendOp::Send, &sge).to(&foreign, 0x22, 1);
    // SAFETY: as above.
    let e = unsafe { sq.post(&wr) };
    assert_eq!(e, Err(PostError::ForeignAddressHandle));
    let no_dest = Wr::new(4, SendOp::Send, &sge);
    // SAFETY: as above.
    let e = unsafe { sq.post(&no_dest) };
    assert_eq!(e, Err(PostError::UdMismatch { qp_is_ud: true }));
}

#[test]
fn extended_operations_land_where_the_kernel_reads_them() {
    let (mut r, mut sq) = sq_ring(8);
    let remote = Remote {
        addr: 0x9000,
        rkey: 0x77,
    };
    let sge = [Sge {
        addr: 0x1000,
        length: 5,
        lkey: 1,
    }];
    // SEND with invalidate: a SEND's payload, the rkey in host order.
    // SAFETY: the fake kernel never dereferences SGEs.
    unsafe { sq.post(&Wr::new(1, SendOp::SendWithInv(0xabcd_ef01), &sge)) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::OPCODE), 9);
    assert_eq!(get_u32(&w, send::EX_IMM), 0xabcd_ef01);
    assert_eq!(get_u32(&w, send::DMA_LENGTH), 5);
    assert_eq!(get_u32(&w, send::DMA_NUM_SGE), 1);

    // SAFETY: as above (no SGEs at all).
    unsafe { sq.post(&Wr::new(2, SendOp::LocalInv(0x1234), &[])) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::OPCODE), 7);
    assert_eq!(get_u32(&w, send::EX_IMM), 0x1234);
    assert_eq!(get_u32(&w, send::DMA_LENGTH), 0);

    // ATOMIC WRITE: the 8 bytes in dma.atomic_wr (the payload's place).
    let value = *b"8 bytes!";
    let op = SendOp::AtomicWrite { remote, value };
    // SAFETY: as above.
    unsafe { sq.post(&Wr::new(3, op, &[])) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::OPCODE), 15);
    assert_eq!(get_u64(&w, send::RDMA_REMOTE_ADDR), 0x9000);
    assert_eq!(get_u32(&w, send::RDMA_RKEY), 0x77);
    assert_eq!(get_u64(&w, send::IOVA), 0x9000);
    assert_eq!(&w[send::PAYLOAD..send::PAYLOAD + 8], &value);
    assert_eq!(get_u32(&w, send::DMA_LENGTH), 8);
    assert_eq!(get_u32(&w, send::DMA_RESID), 8);
    assert_eq!(get_u32(&w, send::DMA_NUM_SGE), 0);
    assert_eq!(get_u32(&w, send::SEND_FLAGS), SIGNALED);

    // FLUSH: the flush member, the length as dma.resid (the RETH's).
    let op = SendOp::Flush {
        remote,
        len: 4096,
        placement: FlushType::Persistent,
        level: FlushLevel::Mr,
    };
    // SAFETY: as above.
    unsafe { sq.post(&Wr::new(4, op, &[])) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::OPCODE), 14);
    assert_eq!(get_u64(&w, send::FLUSH_REMOTE_ADDR), 0x9000);
    assert_eq!(get_u32(&w, send::FLUSH_LENGTH), 4096);
    assert_eq!(get_u32(&w, send::FLUSH_RKEY), 0x77);
    assert_eq!((w[send::FLUSH_TYPE], w[send::FLUSH_LEVEL]), (2, 1));
    assert_eq!(get_u32(&w, send::DMA_RESID), 4096);

    let bind = MwBind {
        mw_rkey: 0x100,
        new_rkey: 0x101,
        mr_lkey: 0x200,
        addr: 0x5000,
        length: 0x300,
        access: 6,
    };
    // SAFETY: as above.
    unsafe { sq.post(&Wr::new(5, SendOp::BindMw(bind), &[])) }.unwrap();
    let w = kernel_consume(&mut r, 256);
    assert_eq!(get_u32(&w, send::OPCODE), 8);
    assert_eq!(get_u64(&w, send::MW_ADDR), 0x5000);
    assert_eq!(get_u64(&w, send::MW_LENGTH), 0x300);
    assert_eq!(get_u32(&w, send::MW_MR_LKEY), 0x200);
    assert_eq!(get_u32(&w, send::MW_MW_RKEY), 0x100);
    assert_eq!(get_u32(&w, send::MW_RKEY), 0x101);
    assert_eq!(get_u32(&w, send::MW_ACCESS), 6);
}

#[test]
fn extended_operations_are_refused_before_the_ring() {
    let (_r, mut sq) = sq_ring(4);
    let remote = Remote {
        addr: 0x9004,
        rkey: 1,
    };
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    let value = [0; 8];
    let flush = SendOp::Flush {
        remote,
        len: 8,
        placement: FlushType::Global,
        level: FlushLevel::Range,
    };
    let post = |sq: &mut SendQueue, wr: &Wr<'_>| {
        // SAFETY: nothing dereferences the SGEs (and none of these posts
        // reaches the ring).
        unsafe { sq.post(wr) }
    };
    let e = post(
        &mut sq,
        &Wr::new(1, SendOp::AtomicWrite { remote, value }, &[]),
    );
    assert_eq!(e, Err(PostError::BadAtomic));
    let e = post(&mut sq, &Wr::new(1, SendOp::LocalInv(1), &sge));
    assert_eq!(e, Err(PostError::NoPayload { opcode: 7 }));
    let e = post(&mut sq, &Wr::inline(1, flush, b"x"));
    assert_eq!(e, Err(PostError::NoPayload { opcode: 14 }));
    sq.set_offered(false, false);
    let remote = Remote {
        addr: 0x9000,
        rkey: 1,
    };
    let e = post(
        &mut sq,
        &Wr::new(1, SendOp::AtomicWrite { remote, value }, &[]),
    );
    assert_eq!(e, Err(PostError::NotOffered { opcode: 15 }));
    let e = post(&mut sq, &Wr::new(1, flush, &[]));
    assert_eq!(e, Err(PostError::NotOffered { opcode: 14 }));
    assert_eq!(sq.outstanding(), 0);
}

/// One prepared-send case: the operation (0..5: SEND, SEND with
/// immediate, WRITE, WRITE with immediate, READ), UD or not, flags, and
/// the posts' ids, SGEs and remote addresses.
#[derive(Debug, Clone)]
struct PreparedCase {
    op: u8,
    ud: bool,
    flags: (bool, bool, bool),
    imm: u32,
    rkey: u32,
    posts: Vec<(u64, Sge, Option<u64>)>,
}

fn prepared_case() -> impl Strategy<Value = PreparedCase> {
    let sge = (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(addr, length, lkey)| Sge {
        addr,
        length,
        lkey,
    });
    (
        0u8..5,
        any::<bool>(),
        any::<(bool, bool, bool)>(),
        any::<u32>(),
        any::<u32>(),
        proptest::collection::vec((any::<u64>(), sge, any::<Option<u64>>()), 1..40),
    )
        .prop_map(|(op, ud, flags, imm, rkey, posts)| PreparedCase {
            op,
            ud,
            flags,
            imm,
            rkey,
            posts,
        })
}

/// A ring whose slot bytes start as `fill`, so that a byte one path
/// writes and the other leaves shows as a difference.
fn filled_sq(fill: u8, qp_type: QpType) -> (FakeRing, SendQueue) {
    let mut r = FakeRing::new(4, 8);
    let q = r.queue(208);
    let word = u64::from_ne_bytes([fill; 8]);
    for w in &mut r.buf[DATA_OFFSET / 8..] {
        *w = word;
    }
    (r, SendQueue::new(q, 3, 48, qp_type).unwrap())
}

proptest! {
    /// A prepared send posts the bytes `post` writes for the same request,
    /// every byte of the WQE and its SGE, across ring wraps; and it is
    /// refused what `post` refuses.
    #[test]
    fn prepared_sends_write_what_post_writes(c in prepared_case()) {
        let remote = Remote { addr: 0x1000, rkey: c.rkey };
        let ah = AhAddr::Number(9);
        let qp_type = if c.ud { QpType::Ud } else { QpType::Rc };
        let (mut a, mut qa) = filled_sq(0x11, qp_type);
        let (mut b, mut qb) = filled_sq(0xee, qp_type);
        let op_at = |addr: u64| {
            let r = Remote { addr, rkey: c.rkey };
            match c.op {
                0 => SendOp::Send,
                1 => SendOp::SendWithImm(c.imm),
                2 => SendOp::Write(r),
                3 => SendOp::WriteWithImm(r, c.imm),
                _ => SendOp::Read(r),
            }
        };
        let shape_sge = [Sge::default()];
        fn shape<'a>(op: SendOp, sges: &'a [Sge], ah: Option<&'a AhAddr>, f: (bool, bool, bool)) -> Wr<'a> {
            let wr = Wr::new(0, op, sges).signaled(f.0).solicited(f.1).fence(f.2);
            match ah { Some(ah) => wr.to(ah, 0x22, 0x1111), None => wr }
        }
        let dest = c.ud.then_some(&ah);
        let prepared = qb.prepare(&shape(op_at(remote.addr), &shape_sge, dest, c.flags));
        let expected = qa.validate(&shape(op_at(remote.addr), &shape_sge, dest, c.flags)).map(|_| ());
        match (&prepared, expected) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(f)) => { prop_assert_eq!(*e, f); return Ok(()); }
            (p, e) => prop_assert!(false, "prepare {p:?}, post {e:?}"),
        }
        let t = prepared.unwrap();
        prop_assert_eq!(t.takes_remote_address(), c.op >= 2);
        for (wr_id, sge, raddr) in &c.posts {
            let raddr = raddr.filter(|_| t.takes_remote_address());
            let sges = [*sge];
            let wr = shape(op_at(raddr.unwrap_or(remote.addr)), &sges, dest, c.flags);
            let mut wr = wr;
            wr.wr_id = *wr_id;
            // SAFETY: the fake kernel never dereferences SGEs.
            unsafe { qa.post(&wr) }.unwrap();
            // SAFETY: as above; `t` is this queue's.
            unsafe { qb.post_prepared_unpublished(&t, *wr_id, *sge, raddr) }.unwrap();
            qb.publish();
            let (mut wa, mut wb) = (kernel_consume(&mut a, 256), kernel_consume(&mut b, 256));
            if c.ud {
                // The UD member's `pad` and `av`, which rxe reads only for
                // AH number 0: `post` leaves the slot's bytes there, the
                // template carries zeros. Every other byte must agree.
                let ignored = send::UD_AH_NUM + 4..send::WR_UNION + send::WR_UNION_LEN;
                prop_assert!(wa[ignored.clone()].iter().all(|&b| b == 0x11), "post wrote the av");
                wa[ignored.clone()].fill(0);
                wb[ignored].fill(0);
            }
            let end = send::PAYLOAD + 16;
            prop_assert_eq!(&wa[..end], &wb[..end]);
        }
        if !t.takes_remote_address() {
            // SAFETY: as above.
            let e = unsafe { qb.post_prepared_unpublished(&t, 1, Sge::default(), Some(8)) };
            prop_assert_eq!(e, Err(PostError::NoRemoteAddress { opcode: op_at(0).opcode() }));
        }
    }
}

#[test]
fn a_full_queue_refuses_a_prepared_send() {
    let (_r, mut sq) = sq_ring(4);
    let sge = [Sge::default()];
    let t = sq.prepare(&Wr::new(0, SendOp::Send, &sge)).unwrap();
    for i in 0..3 {
        // SAFETY: nothing dereferences the SGE.
        unsafe { sq.post_prepared_unpublished(&t, i, Sge::default(), None) }.unwrap();
    }
    // SAFETY: as above.
    let e = unsafe { sq.post_prepared_unpublished(&t, 3, Sge::default(), None) };
    assert_eq!(e, Err(PostError::QueueFull));
}

#[test]
fn a_cq_ring_of_slots_smaller_than_a_wc_is_refused() {
    let mut r = FakeRing::new(4, 5); // 32-byte slots
    let e = CompletionQueue::new(r.queue(8)).unwrap_err();
    assert_eq!((e.elem_size, e.need), (32, WC_SIZE));
    let mut r = FakeRing::new(4, 6);
    assert!(CompletionQueue::new(r.queue(8)).is_ok());
}

/// A queue limited to the depth the kernel granted (Linux 6.1's rxe makes
/// the ring larger than it grants) refuses the request past it on every
/// path: a post, a built batch, a prepared send, a receive; the kernel's
/// consuming makes room again, and a consumer index that claims more in
/// flight than the depth (untrusted) leaves no room rather than wrapping.
#[test]
fn a_queue_takes_no_more_than_its_granted_depth() {
    let (mut r, mut sq) = sq_ring(16);
    sq.limit_depth(5);
    assert_eq!((sq.depth(), sq.capacity()), (5, 15));
    let sge = [Sge::default()];
    let wr = Wr::new(0, SendOp::Send, &sge);
    for _ in 0..5 {
        // SAFETY: nothing dereferences the SGE.
        unsafe { sq.post(&wr) }.unwrap();
    }
    // SAFETY: as above.
    assert_eq!(unsafe { sq.post(&wr) }, Err(PostError::QueueFull));
    sq.build_begin();
    assert_eq!(
        sq.build_start(1, SendOp::Send, 0),
        Err(PostError::QueueFull)
    );
    sq.build_abort();
    let t = sq.prepare(&wr).unwrap();
    // SAFETY: as above.
    let e = unsafe { sq.post_prepared_unpublished(&t, 2, Sge::default(), None) };
    assert_eq!(e, Err(PostError::QueueFull));
    // The kernel consumes two: two more fit, not three.
    r.set_u32(CONSUMER_OFFSET, 2);
    for _ in 0..2 {
        // SAFETY: as above.
        unsafe { sq.post(&wr) }.unwrap();
    }
    // SAFETY: as above.
    assert_eq!(unsafe { sq.post(&wr) }, Err(PostError::QueueFull));
    // A consumer index behind what was ever posted: 7 - 15 & 15 = 8 in
    // flight, more than the depth.
    r.set_u32(CONSUMER_OFFSET, 15);
    // SAFETY: as above.
    assert_eq!(unsafe { sq.post(&wr) }, Err(PostError::QueueFull));

    let mut r = FakeRing::new(16, 7);
    let mut rq = RecvQueue::new(r.queue(48), 2).unwrap();
    rq.limit_depth(5);
    assert_eq!(rq.capacity(), 5);
    for i in 0..5 {
        // SAFETY: nothing dereferences the SGE.
        unsafe { rq.post(i, &sge) }.unwrap();
    }
    // SAFETY: as above.
    assert_eq!(unsafe { rq.post(5, &sge) }, Err(PostError::QueueFull));
    r.set_u32(CONSUMER_OFFSET, 1);
    // SAFETY: as above.
    unsafe { rq.post(6, &sge) }.unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { rq.post(7, &sge) }, Err(PostError::QueueFull));
    // A depth above the ring's is the ring's.
    rq.limit_depth(100);
    assert_eq!(rq.capacity(), 15);
}

//! Shared receive queues against rdma-core: receive lists posted through
//! `mlx5_post_srq_recv` and provider-mlx5's `SharedRecvQueue`, consumed
//! by the device in list order, completed out of order (QPs share the
//! SRQ) through `mlx5_poll_cq` and `CompletionQueue::poll`.
//!
//! The two keep their free lists differently: rdma-core 56.1 marks a
//! completed WQE in a bitmap and links free WQEs in lazily, when the list
//! runs down to its last (`set_next_tail`, `set_next_contig_wqes`);
//! provider-mlx5 appends each completed WQE at the tail, in completion
//! order. So the slots differ, and the test compares what the device sees:
//! from the device's position, the chain of posted WQEs (each WQE's
//! `next_wqe_index`) holds the posted requests' scatter lists in posting
//! order on both sides, the doorbell records are equal, both refuse the
//! same request when full, and the completions — each CQE naming the slot
//! its side's device took — are the same, field by field.

mod common;

use common::{poll_both, Mem, OurCq};
use proptest::prelude::*;
use provider_mlx5::{QpQueues, RecvTarget, Sge, SharedRecvQueue};
use rverbs_mlx5_oracle::Oracle;
use std::collections::VecDeque;

/// `MLX5_CQE_RESP_SEND`.
const RESP_SEND: u8 = 2;
/// Responder syndromes and the flush (not the ODP page fault, which
/// rdma-core reposts internally and provider-mlx5 does not support).
const SYNDROMES: &[u8] = &[0x01, 0x02, 0x04, 0x05, 0x11, 0x12, 0x13, 0x14];
/// `MLX5_INVALID_LKEY`: the scatter list's terminator.
const INVALID_LKEY: u32 = 0x100;

#[derive(Debug, Clone)]
struct Cfg {
    nwqes: u32,
    max_sge: u32,
    spare_shift: u32,
    ncqe: u32,
    srqn: u32,
    /// The QPs the SRQ serves (their numbers in the CQEs).
    qpns: [u32; 3],
}

/// Per completion: the QP it came through (of three), its byte count,
/// and an error (syndrome, vendor syndrome) or none.
type CqeSpec = (usize, u32, Option<(u8, u8)>);

/// One round: lists posted, then the device takes some of the posted
/// receives in list order and completes some of those it took, in any
/// order.
#[derive(Debug, Clone)]
struct Round {
    lists: Vec<Vec<Vec<Sge>>>,
    consume: prop::sample::Index,
    /// Which of the taken receives complete, in this order (indexes into
    /// what is pending; fewer than a CQ's worth).
    complete: Vec<prop::sample::Index>,
    cqes: Vec<CqeSpec>,
    polls: Vec<usize>,
}

fn sge() -> impl Strategy<Value = Sge> {
    // Zero lengths too: provider-mlx5 leaves them out of the scatter list
    // (as rdma-core's RQ post does), rdma-core's SRQ post writes them.
    (
        any::<u64>(),
        prop_oneof![Just(0u32), 0u32..=1 << 28],
        any::<u32>(),
    )
        .prop_map(|(addr, length, lkey)| Sge { addr, length, lkey })
}

fn round(c: Cfg) -> impl Strategy<Value = Round> {
    let most = c.nwqes as usize;
    (
        prop::collection::vec(
            prop::collection::vec(
                prop::collection::vec(sge(), 0..=c.max_sge as usize),
                1..=most,
            ),
            1..=3,
        ),
        any::<prop::sample::Index>(),
        prop::collection::vec(any::<prop::sample::Index>(), 0..=c.ncqe as usize),
        prop::collection::vec(
            (
                0usize..3,
                any::<u32>(),
                prop::option::weighted(0.2, (prop::sample::select(SYNDROMES), any::<u8>())),
            ),
            8,
        ),
        prop::collection::vec(1usize..=8, 8),
    )
        .prop_map(|(lists, consume, complete, cqes, polls)| Round {
            lists,
            consume,
            complete,
            cqes,
            polls,
        })
}

fn case() -> impl Strategy<Value = (Cfg, Vec<Round>)> {
    (
        prop::sample::select(vec![2u32, 4, 16, 64]),
        1u32..=8,
        0u32..=1,
        prop::sample::select(vec![16u32, 32, 64]),
        1u32..1 << 24,
        [0u32..1 << 24, 0u32..1 << 24, 0u32..1 << 24],
    )
        .prop_map(|(nwqes, max_sge, spare_shift, ncqe, srqn, qpns)| Cfg {
            nwqes,
            max_sge,
            spare_shift,
            ncqe,
            srqn,
            qpns,
        })
        .prop_flat_map(|c| (Just(c.clone()), prop::collection::vec(round(c), 1..=8)))
}

/// `ilog2(roundup_pow_of_two(max(32, 16 + max_sge * 16)))`, as
/// `mlx5_alloc_srq_buf` sizes a WQE, plus the spare doublings.
fn wqe_shift(c: &Cfg) -> u32 {
    (16 + c.max_sge * 16)
        .max(32)
        .next_power_of_two()
        .trailing_zeros()
        + c.spare_shift
}

/// provider-mlx5's side: SRQ ring, doorbell record, CQ.
struct Ours {
    ring: Mem,
    dbrec: Mem,
    srq: SharedRecvQueue,
    cq: OurCq,
}

/// One side's device: where it takes the next receive, and the ring it
/// reads the links of.
struct Device {
    pos: u16,
}

impl Device {
    /// Takes the receive at its position and moves along the WQE's link;
    /// returns the slot taken.
    fn take(&mut self, ring: &[u8], shift: u32, nwqes: u32) -> Result<u16, TestCaseError> {
        let slot = self.pos;
        let at = (slot as usize) << shift;
        let next = u16::from_be_bytes([ring[at + 2], ring[at + 3]]);
        prop_assert!(
            u32::from(next) < nwqes,
            "WQE {} links to {} of {}",
            slot,
            next,
            nwqes
        );
        self.pos = next;
        Ok(slot)
    }
}

/// The scatter list a posted request's WQE holds on one side: its SGEs
/// (without the zero-length ones on provider-mlx5's), then the terminator
/// if there is room.
fn expected(sges: &[Sge], cap: usize, skip_empty: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = 0;
    for s in sges.iter().filter(|s| !skip_empty || s.length != 0) {
        out.extend_from_slice(&s.length.to_be_bytes());
        out.extend_from_slice(&s.lkey.to_be_bytes());
        out.extend_from_slice(&s.addr.to_be_bytes());
        n += 1;
    }
    if n < cap {
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&INVALID_LKEY.to_be_bytes());
        out.extend_from_slice(&0u64.to_be_bytes());
    }
    out
}

/// One side of the comparison: its name, and whether its scatter lists
/// leave zero-length SGEs out.
struct Side {
    name: &'static str,
    skip_empty: bool,
}

const OURS: Side = Side {
    name: "provider-mlx5",
    skip_empty: true,
};
const THEIRS: Side = Side {
    name: "rdma-core",
    skip_empty: false,
};

/// Walks `outstanding` posted WQEs from `pos` on one side's ring (`nwqes`
/// WQEs of `1 << shift` bytes) and checks each holds its request's
/// scatter list.
fn check_chain(
    side: &Side,
    ring: &[u8],
    (shift, nwqes): (u32, u32),
    pos: u16,
    outstanding: &VecDeque<(u64, Vec<Sge>)>,
    what: &str,
) -> Result<(), TestCaseError> {
    let Side {
        name: side,
        skip_empty,
    } = *side;
    let cap = ((1usize << shift) - 16) / 16;
    let mut d = Device { pos };
    for (k, (wr_id, sges)) in outstanding.iter().enumerate() {
        let slot = d.pos;
        let at = ((slot as usize) << shift) + 16;
        let want = expected(sges, cap, skip_empty);
        prop_assert_eq!(
            &ring[at..at + want.len()],
            &want[..],
            "{}: {}'s chain, receive {} (wr_id {}) in WQE {}",
            what,
            side,
            k,
            wr_id,
            slot
        );
        d.take(ring, shift, nwqes)?;
    }
    Ok(())
}

fn cqe_bytes(
    c: &Cfg,
    qpn: u32,
    slot: u16,
    byte_cnt: u32,
    err: Option<(u8, u8)>,
    owner: bool,
) -> [u8; 64] {
    let mut b = [0u8; 64];
    // flags_rqpn: a source QP.
    b[24..28].copy_from_slice(&(qpn ^ 0x5a5a5a).to_be_bytes());
    // srqn_uidx: the SRQ's number (CQE version 0).
    b[32..36].copy_from_slice(&c.srqn.to_be_bytes());
    b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    b[56..60].copy_from_slice(&qpn.to_be_bytes());
    b[60..62].copy_from_slice(&slot.to_be_bytes());
    common::finish_resp_cqe(&mut b, RESP_SEND, err, owner);
    b
}

fn run_case(c: Cfg, rounds: Vec<Round>) -> Result<(), TestCaseError> {
    let shift = wqe_shift(&c);
    let cap = ((1u32 << shift) - 16) / 16;
    let qp = common::receiver_qp(c.qpns[0]);
    let mut theirs = Oracle::new(&qp, 64);
    theirs.cq_init(c.ncqe);
    // rdma-core's max_gs is the stride's entries, whatever was asked (the
    // kernel reports the same as max_sge).
    theirs.srq_init(c.nwqes, shift, cap, c.srqn);
    let ring = Mem::new((c.nwqes as usize) << shift);
    let dbrec = Mem::new(4);
    // SAFETY: ring and record live beside the queue in `Ours`, on the
    // heap, reached only through the pointers handed over (Mem), between
    // the queue's calls.
    let srq = unsafe {
        SharedRecvQueue::new(
            ring.ptr(),
            ring.len(),
            dbrec.ptr().cast(),
            c.nwqes,
            shift,
            c.max_sge,
        )
    }
    .map_err(|e| TestCaseError::fail(format!("SharedRecvQueue::new: {e:?}")))?;
    let mut ours = Ours {
        ring,
        dbrec,
        srq,
        cq: OurCq::new(c.ncqe),
    };
    let (mut dev_ours, mut dev_theirs) = (Device { pos: 0 }, Device { pos: 0 });
    // Posted and not taken by the device, in order; taken and not
    // completed: (our slot, their slot, wr_id).
    let mut posted: VecDeque<(u64, Vec<Sge>)> = VecDeque::new();
    let mut taken: Vec<(u16, u16, u64)> = Vec::new();
    let (mut wr_id, mut written, mut count) = (0u64, 0u32, 0u32);
    for (k, r) in rounds.iter().enumerate() {
        for (l, list) in r.lists.iter().enumerate() {
            let what = format!("round {k} list {l}");
            // The scatter lists of every WQE a side does not hold get a
            // pattern first, so that a list or terminator a post failed
            // to write shows (the links stay: rdma-core reads its free
            // list's links from the ring).
            let fill = vec![0x3c ^ (k * 4 + l) as u8; (1usize << shift) - 16];
            let g = (shift, c.nwqes);
            let held = |pos: u16, ring: &[u8], taken: &mut dyn Iterator<Item = u16>| {
                let mut d = Device { pos };
                let mut slots: Vec<u16> = taken.collect();
                for _ in 0..posted.len() {
                    slots.push(d.take(ring, g.0, g.1).expect("a posted WQE's link"));
                }
                slots
            };
            let ours_held = held(
                dev_ours.pos,
                ours.ring.bytes(),
                &mut taken.iter().map(|t| t.0),
            );
            let theirs_held = held(
                dev_theirs.pos,
                theirs.srq_ring(),
                &mut taken.iter().map(|t| t.1),
            );
            for slot in 0..c.nwqes as u16 {
                let at = ((slot as usize) << shift) + 16;
                if !ours_held.contains(&slot) {
                    ours.ring.write(at, &fill);
                }
                if !theirs_held.contains(&slot) {
                    theirs.srq_write(at, &fill);
                }
            }
            let reqs = common::recv_reqs(list, wr_id);
            // SAFETY: each request's SGEs are alive here; nothing reads
            // their memory.
            let (errno, bad) = unsafe { theirs.post_srq_recv(&reqs) };
            let mut refused = None;
            for (i, s) in list.iter().enumerate() {
                // SAFETY: as above.
                if let Err(e) = unsafe { ours.srq.post(wr_id + i as u64, s) } {
                    refused = Some((i, e));
                    break;
                }
            }
            ours.srq.ring();
            // Both take the same requests: all, or those before the one
            // that found the queue full (ENOMEM, QueueFull).
            match (refused, errno, bad) {
                (None, 0, None) => {}
                (Some((i, provider_mlx5::PostError::QueueFull)), libc::ENOMEM, Some(j))
                    if i == j => {}
                other => {
                    return Err(TestCaseError::fail(format!(
                    "{what}: refusals differ (provider-mlx5, rdma-core errno, bad_wr): {other:?}"
                )))
                }
            }
            let n = bad.unwrap_or(list.len());
            for (i, s) in list.iter().take(n).enumerate() {
                posted.push_back((wr_id + i as u64, s.clone()));
            }
            wr_id += list.len() as u64;
            count = count.wrapping_add(n as u32);
            prop_assert_eq!(
                ours.dbrec.be32(0),
                count & 0xffff,
                "{}: provider-mlx5's doorbell record",
                what
            );
            prop_assert_eq!(
                theirs.srq_dbrec(),
                count & 0xffff,
                "{}: rdma-core's doorbell record",
                what
            );
            check_chain(&OURS, ours.ring.bytes(), g, dev_ours.pos, &posted, &what)?;
            check_chain(
                &THEIRS,
                theirs.srq_ring(),
                g,
                dev_theirs.pos,
                &posted,
                &what,
            )?;
        }
        // The device takes some of the posted receives, in list order.
        let take = r.consume.index(posted.len() + 1);
        for _ in 0..take {
            let (id, _) = posted.pop_front().unwrap();
            let a = dev_ours.take(ours.ring.bytes(), shift, c.nwqes)?;
            let b = dev_theirs.take(theirs.srq_ring(), shift, c.nwqes)?;
            taken.push((a, b, id));
        }
        // And completes some of those, in any order.
        let mut done = Vec::new();
        for (i, pick) in r.complete.iter().enumerate() {
            if taken.is_empty() {
                break;
            }
            let (a, b, id) = taken.swap_remove(pick.index(taken.len()));
            let (q, byte_cnt, err) = r.cqes[i % r.cqes.len()];
            let qpn = c.qpns[q];
            let owner = written & c.ncqe != 0;
            ours.cq
                .put(written, &cqe_bytes(&c, qpn, a, byte_cnt, err, owner));
            theirs.put_cqe(written, &cqe_bytes(&c, qpn, b, byte_cnt, err, owner));
            written += 1;
            done.push(id);
        }
        let records = ours.srq.records();
        let mut seen = Vec::new();
        for (j, &m) in r.polls.iter().cycle().enumerate() {
            let mut qs = c.qpns.map(|qpn| QpQueues {
                qpn,
                sq: None,
                rq: Some(RecvTarget::Srq(records)),
            });
            let what = format!("round {k}, poll {j}");
            let pairs = poll_both(&mut ours.cq, &mut qs, &mut theirs, m, &what)?;
            for (x, y) in pairs.iter().filter(|(_, y)| y.status == 0) {
                let what = format!("{what}: ours {x:?}, rdma-core {y:?}");
                prop_assert_eq!(x.opcode.0, y.opcode, "{}", what);
                prop_assert_eq!(x.byte_len, y.byte_len, "{}", what);
                prop_assert_eq!(x.src_qp, y.src_qp, "{}", what);
            }
            seen.extend(pairs.iter().map(|(x, _)| x.wr_id));
            if pairs.is_empty() {
                break;
            }
        }
        prop_assert_eq!(seen, done, "round {}: completions in the order written", k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn srq_receives_post_and_complete_as_in_rdma_core((c, rounds) in case()) {
        run_case(c, rounds)?;
    }
}

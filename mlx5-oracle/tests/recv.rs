//! The receive side against rdma-core: receive lists posted through
//! `mlx5_post_recv` and provider-mlx5's `RecvQueue` (the RQ rings byte for
//! byte and the RCV doorbell records equal after each list), then the
//! responder CQEs a device writes for them — SEND, SEND with immediate or
//! invalidate, WRITE with immediate, with random lengths, immediates, source
//! QPs, service levels, GRH bits, SLIDs, path bits and pkey indexes; or,
//! from a failing receive on, an error and flushes — polled by
//! `mlx5_poll_cq` and `CompletionQueue::poll` in the same batches: the same
//! completions, field by field. In some cases the receives' buffers are
//! real and some CQEs carry their data scattered into the CQE
//! (`MLX5_INLINE_SCATTER_32`): rdma-core copies it and reports success,
//! provider-mlx5 reports a general error (docs/mlx5.md).

mod common;

use common::{poll_both_scattered, Mem, OurCq};
use proptest::prelude::*;
use provider_mlx5::{QpQueues, RecvQueue, RecvTarget, Sge};
use rverbs_mlx5_oracle::Oracle;
use std::collections::HashSet;

/// Responder CQE opcodes (`MLX5_CQE_RESP_*`).
const RESP_WR_IMM: u8 = 1;
const RESP_SEND: u8 = 2;
const RESP_SEND_IMM: u8 = 3;
const RESP_SEND_INV: u8 = 4;
/// Responder syndromes, and the flush.
const SYNDROMES: &[u8] = &[0x01, 0x02, 0x04, 0x11, 0x12, 0x13, 0x14];
const FLUSH: u8 = 0x05;

/// `IBV_WC_*` flags and the kernel's `IB_WC_*`.
const IBV_GRH: u32 = 1;
const IBV_WITH_IMM: u32 = 2;
const IBV_WITH_INV: u32 = 8;
const IB_GRH: u32 = 1;

#[derive(Debug, Clone)]
struct Cfg {
    wqe_cnt: u32,
    max_sge: u32,
    /// Extra doublings of the WQE stride beyond what `max_sge` needs.
    spare_shift: u32,
    ncqe: u32,
    qpn: u32,
    /// The receives' buffers are real (in an arena), and CQEs may carry
    /// their data.
    scatter: bool,
}

/// The arena a scattering case's SGEs point into; every SGE starts at
/// least 32 bytes (the most a 64-byte CQE carries) before its end.
const ARENA: usize = 1 << 16;
/// `MLX5_INLINE_SCATTER_32` in `op_own`.
const INLINE_SCATTER_32: u8 = 0x04;

/// One round: lists of receives (each a list of SGEs), then the device's
/// answer to a prefix of them.
#[derive(Debug, Clone)]
struct Round {
    lists: Vec<Vec<Vec<Sge>>>,
    /// How many of the round's receives the device completes (by index).
    completed: prop::sample::Index,
    error: Option<(prop::sample::Index, u8, u8)>,
    cqes: Vec<RespCqe>,
    polls: Vec<usize>,
}

/// The fields of one responder CQE.
#[derive(Debug, Clone)]
struct RespCqe {
    op: u8,
    byte_cnt: u32,
    imm_inval_pkey: u32,
    flags_rqpn: u32,
    slid: u16,
    ml_path: u8,
    junk: [u8; 32],
    /// In a scattering case, the data (up to 32 bytes of `junk`) in the
    /// CQE, when the receive has room for it.
    scatter: bool,
}

fn resp_cqe() -> impl Strategy<Value = RespCqe> {
    (
        prop::sample::select(vec![RESP_WR_IMM, RESP_SEND, RESP_SEND_IMM, RESP_SEND_INV]),
        any::<(u32, u32, u32, u16, u8)>(),
        prop::array::uniform32(any::<u8>()),
        prop::bool::weighted(0.4),
    )
        .prop_map(
            |(op, (byte_cnt, imm_inval_pkey, flags_rqpn, slid, ml_path), junk, scatter)| RespCqe {
                op,
                byte_cnt,
                imm_inval_pkey,
                flags_rqpn,
                slid,
                ml_path,
                junk,
                scatter,
            },
        )
}

fn round(c: Cfg) -> impl Strategy<Value = Round> {
    // Up to 2^28 each: eight stay within the 2^31 bytes of the largest
    // message, which provider-mlx5 enforces on receives too (docs/mlx5.md).
    let sge = (
        any::<u64>(),
        prop_oneof![Just(0u32), 0u32..=1 << 28],
        any::<u32>(),
    )
        .prop_map(|(addr, length, lkey)| Sge { addr, length, lkey });
    // Lists of up to a third of the ring (16 at the least).
    let most = c.wqe_cnt as usize;
    let per_list = most.div_ceil(3).max(1);
    (
        prop::collection::vec(
            prop::collection::vec(
                prop::collection::vec(sge, 0..=c.max_sge as usize),
                1..=per_list,
            ),
            1..=3,
        )
        .prop_filter("within the ring", move |l| {
            l.iter().map(Vec::len).sum::<usize>() <= most
        }),
        any::<prop::sample::Index>(),
        prop::option::weighted(
            0.3,
            (
                any::<prop::sample::Index>(),
                prop::sample::select(SYNDROMES),
                any::<u8>(),
            ),
        ),
        prop::collection::vec(resp_cqe(), 16),
        prop::collection::vec(1usize..=8, 16),
    )
        .prop_map(|(lists, completed, error, cqes, polls)| Round {
            lists,
            completed,
            error,
            cqes,
            polls,
        })
}

fn case() -> impl Strategy<Value = (Cfg, Vec<Round>)> {
    (
        prop::sample::select(vec![16u32, 64, 256]),
        1u32..=8,
        0u32..=1,
        prop::sample::select(vec![16u32, 32, 64]),
        0u32..1 << 24,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(wqe_cnt, max_sge, spare_shift, ncqe, qpn, scatter)| Cfg {
            wqe_cnt,
            max_sge,
            spare_shift,
            ncqe,
            qpn,
            scatter,
        })
        .prop_flat_map(|c| (Just(c.clone()), prop::collection::vec(round(c), 1..=6)))
}

/// `ilog2(roundup_pow_of_two(max_sge * 16))`, as rdma-core sizes a receive
/// WQE without signature, plus the spare doublings.
fn wqe_shift(c: &Cfg) -> u32 {
    (c.max_sge * 16).next_power_of_two().trailing_zeros().max(4) + c.spare_shift
}

/// provider-mlx5's receive side over memory: RQ, doorbell record, CQ.
struct Ours {
    rq_ring: Mem,
    dbrec: Mem,
    rq: RecvQueue,
    cq: OurCq,
}

impl Ours {
    fn new(c: &Cfg) -> Ours {
        let shift = wqe_shift(c);
        let rq_ring = Mem::new((c.wqe_cnt as usize) << shift);
        let dbrec = Mem::new(8);
        // SAFETY: ring and record live beside the queue in `Ours`, on the
        // heap, reached only through the pointers handed over (Mem),
        // between the queue's calls.
        let rq = unsafe {
            RecvQueue::new(
                rq_ring.ptr(),
                rq_ring.len(),
                dbrec.ptr().cast(),
                c.wqe_cnt,
                shift,
                c.max_sge,
            )
        }
        .expect("RecvQueue::new");
        Ours {
            rq_ring,
            dbrec,
            rq,
            cq: OurCq::new(c.ncqe),
        }
    }
}

/// The CQE for `r`; with `scatter`, its byte count at most 32 and its
/// data (the first 32 bytes, `junk`) marked scattered into it.
fn cqe_bytes(
    r: &RespCqe,
    qpn: u32,
    counter: u16,
    err: Option<(u8, u8)>,
    owner: bool,
    scatter: bool,
) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..32].copy_from_slice(&r.junk);
    b[32..64].copy_from_slice(&r.junk);
    // Bytes 0..16 and the rest of what a responder CQE leaves undefined
    // stay random; the defined fields (mlx5_cqe64):
    b[19] = r.ml_path;
    b[22..24].copy_from_slice(&r.slid.to_be_bytes());
    b[24..28].copy_from_slice(&r.flags_rqpn.to_be_bytes());
    // srqn_uidx: no SRQ (CQE version 0: the SRQ number, 0 for a QP's own
    // receive queue).
    b[32..36].fill(0);
    b[36..40].copy_from_slice(&r.imm_inval_pkey.to_be_bytes());
    let byte_cnt = if scatter { r.byte_cnt % 33 } else { r.byte_cnt };
    b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
    b[56..60].copy_from_slice(&qpn.to_be_bytes());
    b[60..62].copy_from_slice(&counter.to_be_bytes());
    // No solicited bit (op_own bit 1); inline scatter (bit 2) only if asked.
    common::finish_resp_cqe(&mut b, r.op, err, owner);
    if scatter {
        b[63] |= INLINE_SCATTER_32;
    }
    b
}

fn run_case(c: Cfg, mut rounds: Vec<Round>) -> Result<(), TestCaseError> {
    let shift = wqe_shift(&c);
    // A scattering case's receives name memory: rdma-core copies scattered
    // data into it.
    let arena = Mem::new(ARENA);
    if c.scatter {
        let base = arena.ptr().as_ptr() as u64;
        for s in rounds
            .iter_mut()
            .flat_map(|r| r.lists.iter_mut().flatten().flatten())
        {
            s.addr = base + s.addr % (ARENA as u64 - 32);
        }
    }
    // Every receive posted, by wr_id (its index): what a scattered CQE may
    // carry is what its receive has room for.
    let mut room: Vec<u64> = Vec::new();
    let mut scattered: HashSet<u64> = HashSet::new();
    let qp = common::receiver_qp(c.qpn);
    let mut theirs = Oracle::new(&qp, 64);
    theirs.cq_init(c.ncqe);
    // rdma-core's rq.max_gs is the stride's entries (mlx5_calc_rq_size),
    // whatever was asked; the kernel reports the same as max_recv_sge.
    theirs.rq_init(c.wqe_cnt, shift, (1 << shift) / 16);
    let mut ours = Ours::new(&c);
    // Receives posted and completed so far, and CQEs written.
    let (mut posted, mut completed, mut written) = (0u32, 0u32, 0u32);
    let mut wr_id = 0u64;
    for (k, r) in rounds.iter().enumerate() {
        for (l, list) in r.lists.iter().enumerate() {
            // A list that would overflow the ring waits for a later round
            // (both would refuse it, at different requests).
            if (posted - completed) as usize + list.len() > c.wqe_cnt as usize {
                continue;
            }
            // Both rings refilled before each list, so that a byte one
            // writes and the other leaves shows; not in a scattering case,
            // where rdma-core reads the outstanding receives' SGEs back.
            if !c.scatter {
                let fill = 0x3c ^ (k * 4 + l) as u8;
                theirs.fill_rq(fill);
                ours.rq_ring.fill(fill);
            }
            let reqs = common::recv_reqs(list, wr_id);
            // SAFETY: each request's SGEs are alive here; their memory is
            // written only in a scattering case, where each SGE starts at
            // least 32 bytes before the arena's end and a CQE scatters at
            // most 32 bytes, no more than its receive's SGEs hold.
            let (errno, bad) = unsafe { theirs.post_recv(&reqs) };
            prop_assert_eq!((errno, bad), (0, None), "round {} list {}: rdma-core", k, l);
            for (i, s) in list.iter().enumerate() {
                // SAFETY: as above.
                let e = unsafe { ours.rq.post(wr_id + i as u64, s) };
                prop_assert!(e.is_ok(), "round {} list {}: provider-mlx5 {:?}", k, l, e);
            }
            ours.rq.ring();
            wr_id += list.len() as u64;
            posted += list.len() as u32;
            room.extend(
                list.iter()
                    .map(|sges| sges.iter().map(|s| u64::from(s.length)).sum::<u64>()),
            );
            let (a, b) = (ours.rq_ring.bytes(), theirs.rq_ring());
            if a != b {
                let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap();
                let w = at >> shift;
                return Err(TestCaseError::fail(format!(
                    "round {k} list {l}: RQ rings differ at byte {at} (WQE {w}, offset {}): ours {:02x?}, rdma-core {:02x?}",
                    at - (w << shift),
                    &a[w << shift..(w + 1) << shift],
                    &b[w << shift..(w + 1) << shift],
                )));
            }
            prop_assert_eq!(
                ours.dbrec.be32(0),
                theirs.rcv_dbrec(),
                "round {} list {}: RCV doorbell record",
                k,
                l
            );
        }
        // The device completes the oldest `done` outstanding receives,
        // at most a CQ's worth, failing one of them and flushing the rest
        // if so generated; the others stay posted into the next round.
        let outstanding = (posted - completed) as usize;
        let done = r.completed.index(outstanding + 1).min(c.ncqe as usize);
        let fail = r
            .error
            .as_ref()
            .map(|(i, s, v)| (i.index(done.max(1)), *s, *v));
        for i in 0..done {
            let err = match fail {
                Some((f, s, v)) if i == f => Some((s, v)),
                Some((f, _, v)) if i > f => Some((FLUSH, v)),
                _ => None,
            };
            let counter = (completed + i as u32) as u16;
            let owner = written & c.ncqe != 0;
            let cqe = &r.cqes[i % r.cqes.len()];
            let id = u64::from(completed) + i as u64;
            let scatter = c.scatter
                && cqe.scatter
                && err.is_none()
                && room
                    .get(id as usize)
                    .is_some_and(|&n| n >= u64::from(cqe.byte_cnt % 33));
            if scatter {
                scattered.insert(id);
            }
            let b = cqe_bytes(cqe, c.qpn, counter, err, owner, scatter);
            theirs.put_cqe(written, &b);
            ours.cq.put(written, &b);
            written += 1;
        }
        let mut seen = 0;
        for (j, &m) in r.polls.iter().cycle().enumerate() {
            let mut qs = [QpQueues {
                qpn: c.qpn,
                sq: None,
                rq: Some(RecvTarget::Rq(ours.rq.records())),
            }];
            let what = format!("round {k}, poll {j}");
            let pairs = poll_both_scattered(&mut ours.cq, &mut qs, &mut theirs, m, &what, &|id| {
                scattered.contains(&id)
            })?;
            let got = pairs.len();
            // Scattered ones too: provider-mlx5 reports their fields.
            for (x, y) in pairs.iter().filter(|(_, y)| y.status == 0) {
                let what = format!("{what}: ours {x:?}, rdma-core {y:?}");
                prop_assert_eq!(x.opcode.0, y.opcode, "{}", what);
                prop_assert_eq!(x.byte_len, y.byte_len, "{}", what);
                prop_assert_eq!(x.src_qp, y.src_qp, "{}", what);
                prop_assert_eq!(x.sl, y.sl, "{}", what);
                prop_assert_eq!(x.slid, y.slid, "{}", what);
                prop_assert_eq!(x.pkey_index, y.pkey_index, "{}", what);
                prop_assert_eq!(x.dlid_path_bits, y.dlid_path_bits, "{}", what);
                prop_assert_eq!(
                    x.flags.bits() & IB_GRH != 0,
                    y.wc_flags & IBV_GRH != 0,
                    "{} (GRH)",
                    what
                );
                prop_assert_eq!(
                    x.imm_data(),
                    (y.wc_flags & IBV_WITH_IMM != 0).then_some(u32::from_be(y.imm_data)),
                    "{} (immediate)",
                    what
                );
                prop_assert_eq!(
                    x.invalidated_rkey(),
                    (y.wc_flags & IBV_WITH_INV != 0).then_some(y.imm_data),
                    "{} (invalidated rkey)",
                    what
                );
            }
            seen += got;
            if got == 0 {
                break;
            }
        }
        prop_assert_eq!(seen, done, "round {}: completions", k);
        completed += done as u32;
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn receives_post_and_complete_as_in_rdma_core((c, rounds) in case()) {
        run_case(c, rounds)?;
    }
}

//! The poll differential, send side: the requests of `post.rs`'s generator
//! posted through both stacks, then one stream of requester CQEs — what a
//! device writes for them: a CQE for each signaled WQE, or, from a failed
//! one on, an error CQE with the generated syndrome and flush errors for
//! every later WQE — written into both CQ rings byte for byte, and polled
//! by rdma-core's `mlx5_poll_cq` and provider-mlx5's `CompletionQueue::poll`
//! with the same batch sizes: the same completions, field by field, and
//! both stop at the first CQE the device has not written (its owner bit is
//! the previous pass's, or it is one of the ring's initial invalid CQEs).
//! The bytes of a CQE that a requester completion does not define are
//! random. (Receive and SRQ completions: not yet; docs/mlx5.md.)

mod common;

use common::*;
use proptest::prelude::*;
use provider_mlx5::{AhAddr, QpQueues};
use rverbs_mlx5_oracle::{opcode, Ah, Oracle, QpCfg};

/// `enum ibv_wc_status` values of the syndromes an mlx5 requester CQE
/// carries (`MLX5_CQE_SYNDROME_*`), and the flush.
const SYNDROMES: &[u8] = &[
    0x01, // local length
    0x02, // local QP operation
    0x04, // local protection
    0x06, // memory-window bind
    0x10, // bad response
    0x11, // local access
    0x12, // remote invalid request
    0x13, // remote access
    0x14, // remote operation
    0x15, // transport retry counter exceeded
    0x16, // RNR retry counter exceeded
    0x22, // remote aborted
];
/// `MLX5_CQE_SYNDROME_WR_FLUSH_ERR`.
const FLUSH: u8 = 0x05;

/// The mlx5 opcode (`MLX5_OPCODE_*`) a request's WQE carries.
fn mlx5_opcode(op: i32) -> u8 {
    match op {
        opcode::SEND => 0x0a,
        opcode::SEND_WITH_IMM => 0x0b,
        opcode::RDMA_WRITE => 0x08,
        opcode::RDMA_WRITE_WITH_IMM => 0x09,
        opcode::RDMA_READ => 0x10,
        opcode::ATOMIC_CMP_AND_SWP => 0x11,
        _ => 0x12,
    }
}

/// One round: lists of requests, then the device's answer.
#[derive(Debug, Clone)]
struct Round {
    lists: Vec<Vec<Req>>,
    /// The WQE (by index among the round's) that fails, and with which
    /// syndrome and vendor syndrome.
    error: Option<(prop::sample::Index, u8, u8)>,
    /// A READ's completed length, per WQE.
    byte_cnt: Vec<u32>,
    /// The undefined bytes of each CQE.
    junk: Vec<[u8; 64]>,
    /// Batch sizes of the polls.
    polls: Vec<usize>,
}

fn round(c: QpCfg) -> impl Strategy<Value = Round> {
    (
        // At most 12 WQEs of at most 5 blocks: the smallest ring holds
        // them (rdma-core counts WQEs, provider-mlx5 blocks).
        prop::collection::vec(prop::collection::vec(req(c), 1..=4), 1..=3),
        prop::option::weighted(
            0.3,
            (
                any::<prop::sample::Index>(),
                prop::sample::select(SYNDROMES),
                any::<u8>(),
            ),
        ),
        prop::collection::vec(any::<u32>(), 12),
        prop::collection::vec(prop::array::uniform32(any::<u8>()), 12),
        prop::collection::vec(1usize..=8, 16),
    )
        .prop_map(|(lists, error, byte_cnt, junk, polls)| Round {
            lists,
            error,
            byte_cnt,
            junk: junk
                .into_iter()
                .map(|h| {
                    let mut j = [0u8; 64];
                    j[..32].copy_from_slice(&h);
                    j[32..].copy_from_slice(&h);
                    j
                })
                .collect(),
            polls,
        })
}

fn case() -> impl Strategy<Value = (QpCfg, u32, Vec<Round>)> {
    cfg().prop_flat_map(|c| {
        (
            Just(c),
            prop::sample::select(vec![16u32, 32, 64]),
            prop::collection::vec(round(c), 1..=6),
        )
    })
}

/// A CQE as the device writes it for WQE `start` of mlx5 opcode `op`:
/// success, or (`err`) a requester error with (syndrome, vendor syndrome).
fn cqe(
    junk: &[u8; 64],
    qpn: u32,
    start: u32,
    op: u8,
    byte_cnt: u32,
    err: Option<(u8, u8)>,
    owner: bool,
) -> [u8; 64] {
    let mut b = *junk;
    let word = (u32::from(op) << 24) | qpn;
    b[56..60].copy_from_slice(&word.to_be_bytes());
    b[60..62].copy_from_slice(&(start as u16).to_be_bytes());
    let kind = match err {
        None => {
            b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
            0x0 // MLX5_CQE_REQ
        }
        Some((syndrome, vendor)) => {
            b[54] = vendor;
            b[55] = syndrome;
            0xd // MLX5_CQE_REQ_ERR
        }
    };
    b[63] = (kind << 4) | owner as u8;
    b
}

/// `IBV_WC_WITH_IMM` and the kernel's `IB_WC_WITH_IMM`.
const IBV_WITH_IMM: u32 = 1 << 1;
const IB_WITH_IMM: u32 = 1 << 1;

fn run_case(c: QpCfg, ncqe: u32, rounds: Vec<Round>) -> Result<(), TestCaseError> {
    let mut ours =
        Ours::new(&c).map_err(|e| TestCaseError::fail(format!("SendQueue::new: {e}")))?;
    let mut theirs = Oracle::new(&c, c.wqe_cnt);
    theirs.cq_init(ncqe);
    let mut our_cq = OurCq::new(ncqe);
    let av = [0u8; 48];
    let (ah, addr) = (Ah::new(&av), AhAddr::Vector(av));
    // CQEs written so far: the next one's slot and owner bit.
    let mut written = 0u32;
    for (k, r) in rounds.iter().enumerate() {
        // Post, and keep each WQE's (start, mlx5 opcode, signaled).
        let mut wqes = Vec::new();
        for list in &r.lists {
            let p = post_list(&c, &mut ours, &mut theirs, &ah, &addr, list);
            prop_assert!(
                p.refused.is_none() && p.errno == 0,
                "round {k}: a post was refused: {:?} / errno {}",
                p.refused,
                p.errno
            );
            for (s, req) in p.starts.iter().zip(list) {
                wqes.push((*s, mlx5_opcode(req.op), req.signaled || c.sig_all));
            }
        }
        // The device's CQEs.
        let fail = r
            .error
            .as_ref()
            .map(|(i, s, v)| (i.index(wqes.len()), *s, *v));
        let mut n = 0;
        for (i, &(start, op, signaled)) in wqes.iter().enumerate() {
            let err = match fail {
                Some((f, s, v)) if i == f => Some((s, v)),
                Some((f, _, v)) if i > f => Some((FLUSH, v)),
                _ if signaled => None,
                _ => continue,
            };
            let owner = written & ncqe != 0;
            let b = cqe(&r.junk[i], c.qpn, start, op, r.byte_cnt[i], err, owner);
            theirs.put_cqe(written, &b);
            our_cq.put(written, &b);
            written += 1;
            n += 1;
        }
        // Poll both, batch by batch, until both are empty.
        let mut seen = 0;
        for (j, &m) in r.polls.iter().cycle().enumerate() {
            let mut qs = [QpQueues {
                qpn: c.qpn,
                sq: Some(ours.sq.records()),
                rq: None,
            }];
            let what = format!("round {k}, poll {j}");
            let pairs = poll_both(&mut our_cq, &mut qs, &mut theirs, m, &what)?;
            let got = pairs.len();
            for (x, y) in pairs.iter().filter(|(_, y)| y.status == 0) {
                let what = format!("{what}: ours {x:?}, rdma-core {y:?}");
                prop_assert_eq!(x.opcode.0, y.opcode, "{}", what);
                // rdma-core sets byte_len for READ and atomics only.
                if y.opcode == 2 || y.opcode == 3 || y.opcode == 4 {
                    prop_assert_eq!(x.byte_len, y.byte_len, "{}", what);
                }
                prop_assert_eq!(
                    x.flags.bits() & IB_WITH_IMM != 0,
                    y.wc_flags & IBV_WITH_IMM != 0,
                    "{} (WITH_IMM)",
                    what
                );
            }
            seen += got;
            if got == 0 {
                break;
            }
        }
        prop_assert_eq!(seen, n, "round {}: completions", k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn polls_read_what_rdma_core_reads((c, ncqe, rounds) in case()) {
        run_case(c, ncqe, rounds)?;
    }
}

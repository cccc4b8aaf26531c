//! The provider against the software device model: random sequences of
//! posts, rings, polls and arms over many ring wraps, without and with
//! errors.

use proptest::prelude::*;
use provider_mlx5_model::driver::{Bad, Driver, Op, INJECTABLE, MAX_LEN};
use provider_mlx5_model::harness::{Pair, PairCfg};

fn op() -> impl Strategy<Value = Op> {
    let len = 0..=MAX_LEN;
    prop_oneof![
        4 => (len.clone(), any::<bool>(), proptest::option::of(any::<u32>()), any::<bool>(), any::<bool>())
            .prop_map(|(len, inline, imm, signaled, solicited)| Op::Send { len, inline, imm, signaled, solicited }),
        3 => (1..=MAX_LEN, any::<bool>(), proptest::option::weighted(0.3, any::<u32>()), any::<bool>(), 0usize..1900)
            .prop_map(|(len, inline, imm, signaled, off)| Op::Write { len, inline, imm, signaled, off }),
        2 => (1..=MAX_LEN, any::<bool>(), 0usize..1900).prop_map(|(len, signaled, off)| Op::Read { len, signaled, off }),
        1 => (0usize..128, any::<u64>(), any::<bool>(), any::<bool>())
            .prop_map(|(slot, swap, equal, signaled)| Op::Cas { slot, swap, equal, signaled }),
        1 => (0usize..128, any::<u64>(), any::<bool>()).prop_map(|(slot, add, signaled)| Op::Faa { slot, add, signaled }),
        1 => any::<bool>().prop_map(|signaled| Op::Nop { signaled }),
        2 => Just(Op::PostRecv),
        3 => Just(Op::Ring),
        2 => (1usize..8).prop_map(|max| Op::Poll { max }),
        1 => any::<bool>().prop_map(|solicited| Op::Arm { solicited }),
    ]
}

fn cfg() -> impl Strategy<Value = PairCfg> {
    (2u32..=4, 2u32..=4, any::<bool>(), any::<bool>()).prop_map(|(sq, rq, big, bf)| {
        let (sq_cnt, rq_cnt) = (1 << sq, 1 << rq);
        PairCfg {
            sq_cnt,
            rq_cnt,
            ncqe: (sq_cnt + rq_cnt).next_power_of_two(),
            cqe_size: if big { 128 } else { 64 },
            blueflame: bf,
            ..PairCfg::default()
        }
    })
}

fn bad() -> impl Strategy<Value = Bad> {
    prop_oneof![
        Just(Bad::Lkey),
        Just(Bad::Rkey),
        Just(Bad::TooLong),
        proptest::sample::select(&INJECTABLE[..]).prop_map(Bad::Inject),
    ]
}

proptest! {
    /// Every signaled request completes exactly once, in order, with its
    /// wr_id, opcode and length; every receive with its data; RDMA and
    /// atomics leave the memory the oracle predicts; CQ, SQ and RQ wrap
    /// many times; events follow arms.
    #[test]
    fn random_traffic(cfg in cfg(), ops in proptest::collection::vec(op(), 1..300)) {
        let mut d = Driver::new(Pair::new(cfg));
        for op in &ops {
            d.step(op);
        }
        d.finish();
    }

    /// A failing request completes with its named status (the vendor
    /// syndrome kept), everything after it on the QP flushes, and the
    /// provider's bookkeeping stays exact.
    #[test]
    fn errors_flush_the_rest(
        cfg in cfg(),
        before in proptest::collection::vec(op(), 0..80),
        bad in bad(),
        after in proptest::collection::vec(op(), 0..80),
    ) {
        let mut d = Driver::new(Pair::new(cfg));
        for op in &before {
            d.step(op);
        }
        d.post_bad(bad);
        for op in &after {
            d.step(op);
        }
        d.finish();
    }
}

/// The rings really do wrap: a long deterministic run over the smallest
/// queues, counting wraps.
#[test]
fn many_wraps() {
    let cfg = PairCfg {
        sq_cnt: 4,
        rq_cnt: 4,
        ncqe: 8,
        cqe_size: 128,
        ..PairCfg::default()
    };
    let mut d = Driver::new(Pair::new(cfg));
    for i in 0..2000usize {
        let op = match i % 7 {
            0 => Op::Send {
                len: i % 65,
                inline: i % 3 == 0,
                imm: (i % 5 == 0).then_some(i as u32),
                signaled: i % 2 == 0,
                solicited: false,
            },
            1 => Op::Write {
                len: 1 + i % 64,
                inline: i % 2 == 0,
                imm: None,
                signaled: false,
                off: i % 1900,
            },
            2 => Op::Read {
                len: 1 + i % 64,
                signaled: true,
                off: (i * 13) % 1900,
            },
            3 => Op::Ring,
            4 => Op::Faa {
                slot: i % 128,
                add: i as u64,
                signaled: i % 3 == 0,
            },
            5 => Op::Poll { max: 3 },
            _ => Op::Cas {
                slot: i % 128,
                swap: i as u64,
                equal: i % 2 == 0,
                signaled: true,
            },
        };
        d.step(&op);
    }
    d.finish();
    assert!(
        d.p.a_sq.cur_post() > 40 * 4,
        "SQ wrapped {} times",
        d.p.a_sq.cur_post() / 4
    );
    assert!(
        d.p.cq.consumer_index() > 40 * 8,
        "CQ wrapped {} times",
        d.p.cq.consumer_index() / 8
    );
}

//! The device model answers to rdma-core: WQEs written by rdma-core's
//! `mlx5_post_send` (not by provider-mlx5) run on provider-mlx5-model, and
//! every request must complete with the right data. A model that accepted
//! only our provider's output would prove little: where the two providers'
//! WQEs differ (`docs/mlx5.md`: padding, an unused field), the model must
//! not care.
//!
//! Each case is the model's pair of connected RC QPs and a list of one to
//! four requests from QP a — SEND (into receives posted at b), SEND with
//! immediate, WRITE, WRITE with immediate, READ, compare-and-swap and
//! fetch-and-add; one or two SGEs or inline data; signaled or not, and
//! the last always signaled — each over its own slice of the two regions.
//! rdma-core posts the list over a ring of QP a's geometry; its ring, SND
//! doorbell record and BlueFlame register are copied into the model's,
//! which then runs. The completions are read through provider-mlx5's CQ,
//! with a shadow send queue of ours (over scratch memory, never seen by
//! the model) holding the requests' records.
//!
//! A third of the cases run on UC QPs instead: SEND and WRITE (with or
//! without immediate) only, and some WRITEs with an rkey the responder
//! does not know, which UC drops there while the request still completes
//! (nothing comes back on UC).
//!
//! And UD: two UD QPs, rdma-core's SENDs from the first through an
//! address handle, to the second (delivered after the 40-byte GRH area),
//! to it with a wrong Q_Key or to a QP that does not exist (both dropped,
//! as on the wire; the send still completes).

mod common;

use common::Ours;
use proptest::prelude::*;
use provider_mlx5::{AhAddr, QpQueues, RecvTarget, Sge, Wc, WcOpcode, WcStatus};
use provider_mlx5_model::harness::{Pair, PairCfg, MR_LEN};
use provider_mlx5_model::mem::access;
use provider_mlx5_model::{Device, RecvSide, BF_REG};
use rverbs_mlx5_oracle::Ah;
use rverbs_mlx5_oracle::{opcode, qp_type, send_flags, Oracle, OracleReq, QpCfg};

/// Each request's share of a region.
const SLICE: usize = MR_LEN / 4;

#[derive(Debug, Clone)]
struct Op {
    op: i32,
    /// Payload length (1..=SLICE / 2), or 8 for atomics.
    len: usize,
    /// Split into two SGEs at this point (if inside), or sent inline.
    split: usize,
    inline: bool,
    signaled: bool,
    imm: u32,
    compare: u64,
    swap: u64,
    /// On UC, a WRITE to an rkey the responder does not know: dropped
    /// there, completed here.
    dropped: bool,
    /// The bytes at the source and the destination before it runs.
    src: Vec<u8>,
    dst: Vec<u8>,
}

fn op(max_inline: u32, uc: bool) -> impl Strategy<Value = Op> {
    let mut ops = vec![
        opcode::SEND,
        opcode::SEND_WITH_IMM,
        opcode::RDMA_WRITE,
        opcode::RDMA_WRITE_WITH_IMM,
    ];
    if !uc {
        ops.extend([
            opcode::RDMA_READ,
            opcode::ATOMIC_CMP_AND_SWP,
            opcode::ATOMIC_FETCH_AND_ADD,
        ]);
    }
    (
        prop::sample::select(ops),
        prop::bool::weighted(0.25),
        1usize..=SLICE / 2,
        any::<prop::sample::Index>(),
        any::<(bool, bool, u32, u64, u64)>(),
        prop::collection::vec(any::<u8>(), SLICE / 2),
        prop::collection::vec(any::<u8>(), SLICE / 2),
    )
        .prop_map(
            move |(op, drop, len, split, (inline, signaled, imm, compare, swap), src, dst)| {
                let atomic = matches!(
                    op,
                    opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD
                );
                let len = if atomic { 8 } else { len };
                let inline =
                    inline && !atomic && op != opcode::RDMA_READ && len <= max_inline as usize;
                Op {
                    op,
                    len,
                    // An atomic takes one 8-byte SGE (the model refuses more).
                    split: if atomic { 0 } else { split.index(len + 1) },
                    inline,
                    signaled,
                    imm,
                    compare: if op == opcode::ATOMIC_CMP_AND_SWP && compare % 2 == 0 {
                        // Half the compare-and-swaps compare equal.
                        u64::from_le_bytes(dst[..8].try_into().unwrap())
                    } else {
                        compare
                    },
                    swap,
                    // Only a plain WRITE: a dropped message that takes a
                    // receive would leave its receive to the next one.
                    dropped: uc && drop && op == opcode::RDMA_WRITE,
                    src,
                    dst,
                }
            },
        )
}

fn case() -> impl Strategy<Value = (bool, u32, bool, Vec<Op>)> {
    (
        any::<bool>(),
        prop::sample::select(vec![0u32, 64, 128]),
        prop::bool::weighted(1.0 / 3.0),
    )
        .prop_flat_map(|(bf, max_inline, uc)| {
            (
                Just(bf),
                Just(max_inline),
                Just(uc),
                prop::collection::vec(op(max_inline, uc), 1..=4),
            )
        })
}

/// Whether `op` consumes a receive at the responder.
fn consumes_receive(op: i32) -> bool {
    matches!(
        op,
        opcode::SEND | opcode::SEND_WITH_IMM | opcode::RDMA_WRITE_WITH_IMM
    )
}

fn run_case(blueflame: bool, max_inline: u32, uc: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let cfg = PairCfg {
        sq_cnt: 64,
        rq_cnt: 8,
        ncqe: 64,
        cqe_size: 64,
        bf_size: 256,
        blueflame,
        max_inline,
    };
    let mut p = Pair::of_type(cfg, uc);
    let (a, b, a_mr, b_mr) = (p.a, p.b, p.a_mr, p.b_mr);
    let qc = QpCfg {
        qp_type: if uc { qp_type::UC } else { qp_type::RC },
        qpn: p.qpn(a),
        wqe_cnt: cfg.sq_cnt,
        max_sge: 4,
        max_inline,
        bf_size: cfg.bf_size,
        blueflame,
        prefer_bf: false,
        sig_all: false,
    };
    let mut theirs = Oracle::new(&qc, cfg.sq_cnt);
    let mut shadow = Ours::new(&qc).map_err(TestCaseError::fail)?;
    // The regions: request i reads (or, for READ and atomics, writes) at
    // slice i of a's region, and its peer side is slice i of b's.
    let mut sges: Vec<Vec<Sge>> = Vec::new();
    let mut reqs = Vec::new();
    let last = ops.len() - 1;
    for (i, o) in ops.iter().enumerate() {
        let (la, lb) = (i * SLICE, i * SLICE);
        p.write(a_mr, la, &o.src);
        p.write(b_mr, lb, &o.dst);
        let at = |off: usize, n: usize| Sge {
            addr: p.addr(a_mr, la + off),
            length: n as u32,
            lkey: p.lkey(a_mr),
        };
        let list = if o.inline {
            // Inline data is read by the CPU at post time, from a's slice.
            vec![at(0, o.split), at(o.split, o.len - o.split)]
        } else if o.split > 0 && o.split < o.len {
            vec![at(0, o.split), at(o.split, o.len - o.split)]
        } else {
            vec![at(0, o.len)]
        };
        if consumes_receive(o.op) {
            // A receive at b over its slice (one SGE); a WRITE with
            // immediate takes one too, for its completion.
            let r = [Sge {
                addr: p.addr(b_mr, lb),
                length: SLICE as u32,
                lkey: p.lkey(b_mr),
            }];
            // SAFETY: the model's region, alive with the pair.
            unsafe { p.b_rq.post(1000 + i as u64, &r) }.expect("receive");
        }
        sges.push(list);
        reqs.push((i, o));
    }
    p.b_rq.ring();
    // A dropped WRITE's rkey names no region of the model's.
    let rkey = |o: &Op| p.rkey(b_mr) ^ if o.dropped { 0x5500 } else { 0 };
    let c_reqs: Vec<OracleReq> = reqs
        .iter()
        .map(|&(i, o)| OracleReq {
            wr_id: i as u64,
            remote_addr: p.addr(b_mr, i * SLICE),
            compare_add: o.compare,
            swap: o.swap,
            sges: sges[i].as_ptr(),
            ah: std::ptr::null_mut(),
            opcode: o.op,
            send_flags: if o.signaled || i == last {
                send_flags::SIGNALED
            } else {
                0
            } | if o.inline { send_flags::INLINE } else { 0 },
            imm_or_inv: o.imm.to_be(),
            num_sge: sges[i].len() as i32,
            rkey: rkey(o),
            remote_qpn: 0,
            remote_qkey: 0,
            pad: 0,
        })
        .collect();
    // SAFETY: the SGEs name the model's region (alive), inline data too.
    let (errno, bad) = unsafe { theirs.post(&c_reqs) };
    prop_assert_eq!((errno, bad), (0, None), "rdma-core refused the list");
    // The shadow queue: the same requests through our provider, into
    // scratch memory, for the records the CQ resolves completions with.
    let list: Vec<common::Req> = reqs
        .iter()
        .map(|&(i, o)| common::Req {
            wr_id: i as u64,
            op: o.op,
            sges: sges[i].clone(),
            inline: o.inline.then(|| (o.src[..o.len].to_vec(), vec![o.split])),
            signaled: o.signaled || i == last,
            solicited: false,
            fence: false,
            imm: o.imm,
            remote: provider_mlx5::Remote {
                addr: p.addr(b_mr, i * SLICE),
                rkey: rkey(o),
            },
            compare: o.compare,
            swap: o.swap,
            remote_qpn: 0,
            remote_qkey: 0,
        })
        .collect();
    for r in &list {
        let wr = common::send_wr(r);
        // SAFETY: the shadow ring is scratch; nothing reads the SGEs.
        unsafe { shadow.sq.post(&wr) }
            .map_err(|e| TestCaseError::fail(format!("shadow: {e:?}")))?;
    }
    shadow.sq.ring();
    // What rdma-core wrote, where the device reads it.
    {
        let m = &p.dev.qps[a];
        m.sq.write(0, theirs.ring());
        m.dbrec.write(4, &theirs.snd_dbrec().to_be_bytes());
        m.uar.write(BF_REG, theirs.uar());
    }
    p.dev.process();
    // Every signaled request and every receive completes, successfully.
    let (qa, qb) = (p.qpn(a), p.qpn(b));
    let mut got = Vec::new();
    loop {
        let mut out = [Wc::default(); 8];
        let mut qs = [
            QpQueues {
                qpn: qa,
                sq: Some(shadow.sq.records()),
                rq: Some(RecvTarget::Rq(p.a_rq.records())),
            },
            QpQueues {
                qpn: qb,
                sq: Some(p.b_sq.records()),
                rq: Some(RecvTarget::Rq(p.b_rq.records())),
            },
        ];
        let n =
            p.cq.poll(&mut qs[..], &mut out)
                .map_err(|e| TestCaseError::fail(format!("bad CQE: {e:?}")))?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&out[..n]);
    }
    let model_qp = &p.dev.qps[a];
    prop_assert!(!model_qp.error, "the model failed QP a");
    let sends = ops.iter().filter(|o| consumes_receive(o.op)).count();
    let signaled = ops
        .iter()
        .enumerate()
        .filter(|(i, o)| o.signaled || *i == last)
        .count();
    prop_assert_eq!(got.len(), signaled + sends, "completions: {:?}", got);
    for w in &got {
        prop_assert_eq!(w.status, WcStatus::SUCCESS, "{:?}", w);
    }
    // The data.
    for (i, o) in ops.iter().enumerate() {
        let (sa, sb) = (i * SLICE, i * SLICE);
        let what = format!("request {i}: {o:?}");
        match o.op {
            // Dropped at the responder: its bytes as they were.
            _ if o.dropped => {
                prop_assert_eq!(p.read(b_mr, sb, o.len), o.dst[..o.len].to_vec(), "{}", what);
            }
            opcode::SEND
            | opcode::SEND_WITH_IMM
            | opcode::RDMA_WRITE
            | opcode::RDMA_WRITE_WITH_IMM => {
                prop_assert_eq!(p.read(b_mr, sb, o.len), o.src[..o.len].to_vec(), "{}", what);
            }
            opcode::RDMA_READ => {
                prop_assert_eq!(p.read(a_mr, sa, o.len), o.dst[..o.len].to_vec(), "{}", what);
            }
            _ => {
                // The model's atomics work on little-endian words (exec.rs).
                let old = u64::from_le_bytes(o.dst[..8].try_into().unwrap());
                let new = if o.op == opcode::ATOMIC_CMP_AND_SWP {
                    if old == o.compare {
                        o.swap
                    } else {
                        old
                    }
                } else {
                    old.wrapping_add(o.compare)
                };
                prop_assert_eq!(
                    p.read(a_mr, sa, 8),
                    old.to_le_bytes().to_vec(),
                    "{} (old value)",
                    what
                );
                prop_assert_eq!(
                    p.read(b_mr, sb, 8),
                    new.to_le_bytes().to_vec(),
                    "{} (new value)",
                    what
                );
            }
        }
        // A receive reports the immediate it carried.
        let kind = match o.op {
            opcode::SEND_WITH_IMM => Some(WcOpcode::RECV),
            opcode::RDMA_WRITE_WITH_IMM => Some(WcOpcode::RECV_RDMA_WITH_IMM),
            _ => None,
        };
        if let Some(kind) = kind {
            let r = got.iter().find(|w| w.wr_id == 1000 + i as u64);
            prop_assert_eq!(r.and_then(|w| w.imm_data()), Some(o.imm), "{}", what);
            prop_assert_eq!(r.map(|w| w.opcode), Some(kind), "{}", what);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn the_model_runs_rdma_cores_wqes((bf, max_inline, uc, ops) in case()) {
        run_case(bf, max_inline, uc, ops)?;
    }
}

/// One UD send: payload, where it is cut into two SGEs (or sent inline),
/// with immediate or not, signaled or not, and where it goes: 0 the
/// peer, 1 the peer with a wrong Q_Key, 2 a QP number nobody has.
#[derive(Debug, Clone)]
struct UdSend {
    data: Vec<u8>,
    split: usize,
    inline: bool,
    imm: Option<u32>,
    signaled: bool,
    to: u8,
}

fn ud_send(max_inline: u32) -> impl Strategy<Value = UdSend> {
    (
        prop::collection::vec(any::<u8>(), 1..=SLICE / 2),
        any::<prop::sample::Index>(),
        any::<(bool, bool)>(),
        prop::option::of(any::<u32>()),
        prop::sample::select(vec![0u8, 0, 0, 1, 2]),
    )
        .prop_map(move |(data, split, (inline, signaled), imm, to)| UdSend {
            split: split.index(data.len() + 1),
            inline: inline && data.len() <= max_inline as usize,
            data,
            imm,
            signaled,
            to,
        })
}

fn ud_case() -> impl Strategy<Value = (bool, u32, [u8; 48], Vec<UdSend>)> {
    (
        any::<bool>(),
        prop::sample::select(vec![0u32, 64, 128]),
        prop::collection::vec(any::<u8>(), 48),
    )
        .prop_flat_map(|(bf, max_inline, av)| {
            let mut a = [0u8; 48];
            a.copy_from_slice(&av);
            // `key`, which mlx5_create_ah leaves zero: the send writes
            // the Q_Key there.
            a[..8].fill(0);
            (
                Just(bf),
                Just(max_inline),
                Just(a),
                prop::collection::vec(ud_send(max_inline), 1..=4),
            )
        })
}

fn run_ud_case(
    blueflame: bool,
    max_inline: u32,
    av: [u8; 48],
    sends: Vec<UdSend>,
) -> Result<(), TestCaseError> {
    let mut dev = Device::new();
    let c = dev.add_cq(64, 64);
    let rq = || RecvSide::Rq { cnt: 8, shift: 5 };
    let (u1, u2) = (
        dev.add_qp(true, 64, rq(), c, c, 256),
        dev.add_qp(true, 64, rq(), c, c, 256),
    );
    let (src_mr, dst_mr) = (
        dev.mem.reg(MR_LEN, access::ALL),
        dev.mem.reg(MR_LEN, access::ALL),
    );
    let (q1, q2, qkey) = (dev.qps[u1].qpn, dev.qps[u2].qpn, dev.qps[u2].qkey);
    let nobody = (q1.max(q2) + 1) & 0xff_ffff;
    let (src_lkey, src_base) = (dev.mem.mrs[src_mr].lkey, dev.mem.mrs[src_mr].buf.addr());
    let (dst_lkey, dst_base) = (dev.mem.mrs[dst_mr].lkey, dev.mem.mrs[dst_mr].buf.addr());
    let mut rq1 = dev.provider_rq(u1, 2);
    let mut rq2 = dev.provider_rq(u2, 2);
    let mut cq = dev.provider_cq(c);
    // One receive at u2 for each send that reaches it, slice k for the
    // k-th, which the sends reach in order.
    let delivered: Vec<usize> = (0..sends.len()).filter(|&i| sends[i].to == 0).collect();
    for k in 0..delivered.len() {
        let r = [Sge {
            addr: dst_base + (k * SLICE) as u64,
            length: SLICE as u32,
            lkey: dst_lkey,
        }];
        // SAFETY: the model's region, alive with the device.
        unsafe { rq2.post(1000 + k as u64, &r) }.expect("receive");
    }
    rq2.ring();
    rq1.ring();
    let qc = QpCfg {
        qp_type: qp_type::UD,
        qpn: q1,
        wqe_cnt: 64,
        max_sge: 4,
        max_inline,
        bf_size: 256,
        blueflame,
        prefer_bf: false,
        sig_all: false,
    };
    let mut theirs = Oracle::new(&qc, 64);
    let mut shadow = Ours::new(&qc).map_err(TestCaseError::fail)?;
    let ah = Ah::new(&av);
    let last = sends.len() - 1;
    let mut list = Vec::new();
    for (i, s) in sends.iter().enumerate() {
        dev.mem.mrs[src_mr].buf.write(i * SLICE, &s.data);
        let at = |off: usize, n: usize| Sge {
            addr: src_base + (i * SLICE + off) as u64,
            length: n as u32,
            lkey: src_lkey,
        };
        let n = s.data.len();
        let sges = if s.split > 0 && s.split < n {
            vec![at(0, s.split), at(s.split, n - s.split)]
        } else {
            vec![at(0, n)]
        };
        let (dqpn, dqkey) = match s.to {
            0 => (q2, qkey),
            1 => (q2, qkey ^ 0x8000),
            _ => (nobody, qkey),
        };
        list.push(common::Req {
            wr_id: i as u64,
            op: if s.imm.is_some() {
                opcode::SEND_WITH_IMM
            } else {
                opcode::SEND
            },
            sges,
            inline: s.inline.then(|| (s.data.clone(), vec![s.split])),
            signaled: s.signaled || i == last,
            solicited: false,
            fence: false,
            imm: s.imm.unwrap_or(0),
            remote: provider_mlx5::Remote { addr: 0, rkey: 0 },
            compare: 0,
            swap: 0,
            remote_qpn: dqpn,
            remote_qkey: dqkey,
        });
    }
    // rdma-core posts the list (through `ah`) and the shadow queue the
    // same requests (through the same address vector), for the records.
    let posted = common::post_list(
        &qc,
        &mut shadow,
        &mut theirs,
        &ah,
        &AhAddr::Vector(av),
        &list,
    );
    prop_assert_eq!(
        (posted.refused.is_none(), posted.errno, posted.bad),
        (true, 0, None),
        "a side refused the list"
    );
    {
        let m = &dev.qps[u1];
        m.sq.write(0, theirs.ring());
        m.dbrec.write(4, &theirs.snd_dbrec().to_be_bytes());
        m.uar.write(BF_REG, theirs.uar());
    }
    dev.process();
    let mut got = Vec::new();
    loop {
        let mut out = [Wc::default(); 8];
        let mut qs = [
            QpQueues {
                qpn: q1,
                sq: Some(shadow.sq.records()),
                rq: Some(RecvTarget::Rq(rq1.records())),
            },
            QpQueues {
                qpn: q2,
                sq: None,
                rq: Some(RecvTarget::Rq(rq2.records())),
            },
        ];
        let n = cq
            .poll(&mut qs[..], &mut out)
            .map_err(|e| TestCaseError::fail(format!("bad CQE: {e:?}")))?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&out[..n]);
    }
    prop_assert!(!dev.qps[u1].error, "the model failed QP u1");
    // Every signaled send completes, delivered or not; every delivered
    // one fills its receive: the GRH area, then the payload.
    let signaled: Vec<u64> = (0..sends.len())
        .filter(|&i| sends[i].signaled || i == last)
        .map(|i| i as u64)
        .collect();
    let send_ids: Vec<u64> = got
        .iter()
        .filter(|w| w.wr_id < 1000)
        .map(|w| w.wr_id)
        .collect();
    prop_assert_eq!(send_ids, signaled, "send completions: {:?}", got);
    for w in got.iter().filter(|w| w.wr_id < 1000) {
        prop_assert_eq!(w.status, WcStatus::SUCCESS, "{:?}", w);
    }
    for (k, &i) in delivered.iter().enumerate() {
        let s = &sends[i];
        let what = format!("send {i} (receive {k}): {s:?}");
        let r = got.iter().find(|w| w.wr_id == 1000 + k as u64);
        prop_assert!(r.is_some(), "{}: no receive completion in {:?}", what, got);
        let r = r.unwrap();
        prop_assert_eq!(r.status, WcStatus::SUCCESS, "{}", what);
        prop_assert_eq!(r.opcode, WcOpcode::RECV, "{}", what);
        prop_assert_eq!(r.byte_len as usize, 40 + s.data.len(), "{}", what);
        prop_assert_eq!(r.src_qp, q1, "{}", what);
        prop_assert_eq!(r.imm_data(), s.imm, "{}", what);
        prop_assert_eq!(
            dev.mem.mrs[dst_mr].buf.read(k * SLICE + 40, s.data.len()),
            s.data.clone(),
            "{}",
            what
        );
    }
    let receives = got.iter().filter(|w| w.wr_id >= 1000).count();
    prop_assert_eq!(receives, delivered.len(), "receive completions: {:?}", got);
    Ok(())
}

proptest! {
    #![proptest_config(common::config())]

    #[test]
    fn the_model_runs_rdma_cores_ud_wqes((bf, max_inline, av, sends) in ud_case()) {
        run_ud_case(bf, max_inline, av, sends)?;
    }
}

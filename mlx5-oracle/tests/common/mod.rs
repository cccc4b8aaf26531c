//! What the differential tests share: the generated QPs and requests,
//! provider-mlx5's send queue over plain memory, and one list posted
//! through both stacks.
#![allow(dead_code)] // each test file uses its part

use proptest::prelude::*;
use provider_mlx5::{
    AhAddr, CompletionQueue, CqConfig, QpQueues, QpType, Remote, SendOp, SendQueue, SendWr, Sge,
    SqConfig, Wc, WcStatus,
};
use rverbs_mlx5_oracle::{
    opcode, qp_type, send_flags, Ah, IbvWc, Oracle, OracleRecv, OracleReq, QpCfg,
};
use std::ptr::NonNull;

/// Generated cases a run, for every differential (issue 29's floor).
pub const CASES: u32 = 10_000;

/// The differentials' proptest configuration: [`CASES`] cases, and a
/// bounded shrink (a failure's first report already names the bytes).
pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

/// The operations each transport posts, both stacks (C opcode).
pub fn ops_of(t: i32) -> &'static [i32] {
    use opcode::*;
    match t {
        // SEND with invalidate: provider-mlx5 refuses it (NotImplemented,
        // docs/mlx5.md), as it does LOCAL_INV and memory-window binds.
        qp_type::RC => &[
            SEND,
            SEND_WITH_IMM,
            RDMA_WRITE,
            RDMA_WRITE_WITH_IMM,
            RDMA_READ,
            ATOMIC_CMP_AND_SWP,
            ATOMIC_FETCH_AND_ADD,
        ],
        qp_type::UC => &[SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM],
        _ => &[SEND, SEND_WITH_IMM],
    }
}

/// One generated request.
#[derive(Debug, Clone)]
pub struct Req {
    pub wr_id: u64,
    pub op: i32,
    pub sges: Vec<Sge>,
    /// Inline data and where the C side splits it into SGEs.
    pub inline: Option<(Vec<u8>, Vec<usize>)>,
    pub signaled: bool,
    pub solicited: bool,
    pub fence: bool,
    pub imm: u32,
    pub remote: Remote,
    pub compare: u64,
    pub swap: u64,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

pub fn sge() -> impl Strategy<Value = Sge> {
    // Up to 2^28 each, so that six stay within the 2^31 bytes of the
    // largest message, which provider-mlx5 enforces and rdma-core leaves
    // to the device (docs/mlx5.md; `refusals` below).
    let len = prop_oneof![Just(0u32), 1u32..=64, 1u32..=(1 << 20), 0u32..=(1 << 28)];
    (any::<u64>(), len, any::<u32>()).prop_map(|(addr, length, lkey)| Sge { addr, length, lkey })
}

pub fn req(cfg: QpCfg) -> impl Strategy<Value = Req> {
    let ops = ops_of(cfg.qp_type);
    (
        (0..ops.len()).prop_map(move |i| ops[i]),
        prop::collection::vec(sge(), 0..=cfg.max_sge as usize),
        (
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..=cfg.max_inline as usize),
        ),
        prop::collection::vec(any::<prop::sample::Index>(), 0..cfg.max_sge as usize),
        any::<(bool, bool, bool)>(),
        any::<(u64, u32, u32, u64, u64)>(),
        (0u32..1 << 24, any::<u32>()),
    )
        .prop_map(
            move |(
                op,
                sges,
                (want_inline, data),
                cuts,
                flags,
                (raddr, rkey, imm, cmp, swp),
                ud,
            )| {
                use opcode::*;
                let atomic = matches!(op, ATOMIC_CMP_AND_SWP | ATOMIC_FETCH_AND_ADD);
                let may_inline = cfg.max_inline > 0 && !atomic && op != RDMA_READ && want_inline;
                // Atomics: one 8-byte SGE at an aligned remote address,
                // the only shape the verbs allow (see docs/mlx5.md).
                let sges = if atomic {
                    vec![Sge {
                        length: 8,
                        ..sges.first().copied().unwrap_or_default()
                    }]
                } else {
                    sges
                };
                let inline = may_inline.then(|| {
                    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
                    at.sort_unstable();
                    (data, at)
                });
                Req {
                    wr_id: raddr ^ u64::from(imm),
                    op,
                    sges,
                    inline,
                    signaled: flags.0,
                    solicited: flags.1,
                    fence: flags.2,
                    imm,
                    remote: Remote {
                        addr: if atomic { raddr & !7 } else { raddr },
                        rkey,
                    },
                    compare: cmp,
                    swap: swp,
                    remote_qpn: ud.0,
                    remote_qkey: ud.1,
                }
            },
        )
}

pub fn cfg() -> impl Strategy<Value = QpCfg> {
    (
        prop::sample::select(vec![qp_type::RC, qp_type::UC, qp_type::UD]),
        prop::sample::select(vec![64u32, 128, 256]),
        1u32..=6,
        prop::sample::select(vec![0u32, 16, 44, 64, 100, 128, 256]),
        prop::sample::select(vec![64u32, 128, 256]),
        any::<(bool, bool, bool)>(),
        0u32..1 << 24,
    )
        .prop_map(
            |(t, wqe_cnt, max_sge, max_inline, bf_size, (bf, prefer, sig_all), qpn)| QpCfg {
                qp_type: t,
                qpn,
                wqe_cnt,
                max_sge,
                max_inline,
                bf_size,
                blueflame: bf,
                prefer_bf: prefer,
                sig_all,
            },
        )
}

/// A basic block, aligned as a ring must be.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Block([u8; 64]);

/// Memory handed to one of provider-mlx5's queues: owned here, and after
/// the hand-over reached only through the pointer the queue was given, so
/// that no new reference to the memory invalidates the queue's (the queue
/// writes through its pointer whenever it posts or polls).
pub struct Mem {
    _blocks: Vec<Block>,
    ptr: NonNull<u8>,
    len: usize,
}

impl Mem {
    /// `len` zero bytes, 64-byte aligned.
    pub fn new(len: usize) -> Mem {
        let mut blocks = vec![Block([0; 64]); len.div_ceil(64).max(1)];
        let ptr = NonNull::new(blocks.as_mut_ptr().cast::<u8>()).unwrap();
        Mem {
            _blocks: blocks,
            ptr,
            len,
        }
    }

    /// The pointer to hand over (every access here derives from it too).
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes (one slice, so that comparing and copying are memcmp and
    /// memcpy even unoptimized). Read while the queue is not in a call.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: len initialised bytes at ptr, alive with self; the queue
        // writes them only inside its calls, which take the queue (never
        // this Mem) and so cannot overlap the returned borrow's use by the
        // single-threaded tests.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Fills every byte with `v` (between the queue's calls).
    pub fn fill(&mut self, v: u8) {
        // SAFETY: as in bytes; &mut self: no slice of it is alive.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), v, self.len) }
    }

    /// Writes `data` at `off` (between the queue's calls).
    pub fn write(&mut self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len, "write past the buffer");
        // SAFETY: in bounds (asserted); &mut self: no slice of it is alive.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len())
        }
    }

    /// The big-endian word at `off` (a doorbell record's).
    pub fn be32(&self, off: usize) -> u32 {
        u32::from_be_bytes(self.bytes()[off..off + 4].try_into().unwrap())
    }
}

/// provider-mlx5's side: a send queue over memory of the same geometry.
pub struct Ours {
    pub ring: Mem,
    pub dbrec: Mem,
    pub uar: Mem,
    pub sq: SendQueue,
}

impl Ours {
    pub fn new(c: &QpCfg) -> Result<Ours, String> {
        Ours::with_max_wr(c, c.wqe_cnt)
    }

    /// A queue of at most `max_wr` outstanding requests (the oracle's
    /// `max_post`).
    #[allow(dead_code)] // not every test file asks for one
    pub fn with_max_wr(c: &QpCfg, max_wr: u32) -> Result<Ours, String> {
        let ring = Mem::new(c.wqe_cnt as usize * 64);
        let dbrec = Mem::new(8);
        let uar = Mem::new(c.bf_size as usize * 2);
        let cfg = SqConfig {
            qpn: c.qpn,
            qp_type: match c.qp_type {
                qp_type::RC => QpType::Rc,
                qp_type::UC => QpType::Uc,
                _ => QpType::Ud,
            },
            wqe_cnt: c.wqe_cnt,
            max_wr,
            max_sge: c.max_sge,
            max_inline: c.max_inline,
            bf_size: c.bf_size,
            blueflame: c.blueflame,
            prefer_blueflame: c.prefer_bf,
            sig_all: c.sig_all,
        };
        // SAFETY: the three buffers live in `Ours` beside the queue, on
        // the heap, and are reached only through the pointers handed over
        // (Mem), between the queue's calls.
        let sq =
            unsafe { SendQueue::new(ring.ptr(), ring.len(), dbrec.ptr().cast(), uar.ptr(), cfg) }
                .map_err(|e| format!("{e:?}"))?;
        Ok(Ours {
            ring,
            dbrec,
            uar,
            sq,
        })
    }

    /// The SND doorbell record (host order).
    pub fn snd_dbrec(&self) -> u32 {
        self.dbrec.be32(4)
    }
}

/// provider-mlx5's CQ over memory: `ncqe` 64-byte CQEs, every one invalid
/// and owned by the hardware, as the kernel hands a ring over (and as
/// `oracle_cq_init` leaves rdma-core's).
pub struct OurCq {
    ring: Mem,
    _dbrec: Mem,
    _uar: Mem,
    pub cq: CompletionQueue,
}

impl OurCq {
    pub fn new(ncqe: u32) -> OurCq {
        let mut ring = Mem::new(ncqe as usize * 64);
        for i in 0..ncqe as usize {
            ring.write(i * 64 + 63, &[0xf << 4]);
        }
        let (dbrec, uar) = (Mem::new(8), Mem::new(64));
        // SAFETY: the buffers live beside the queue, on the heap, reached
        // only through the pointers handed over (Mem); the tests write
        // CQEs only through `put`, between polls, as the device would.
        let cq = unsafe {
            CompletionQueue::new(
                ring.ptr(),
                ring.len(),
                dbrec.ptr().cast(),
                uar.ptr(),
                CqConfig {
                    ncqe,
                    cqe_size: 64,
                    cqn: 7,
                },
            )
        }
        .expect("CompletionQueue::new");
        OurCq {
            ring,
            _dbrec: dbrec,
            _uar: uar,
            cq,
        }
    }

    /// Writes `cqe` into slot `i` (masked), between polls.
    pub fn put(&mut self, i: u32, cqe: &[u8; 64]) {
        let n = (self.ring.len() / 64) as u32;
        self.ring.write((i & (n - 1)) as usize * 64, cqe);
    }
}

pub fn op_of(r: &Req) -> SendOp {
    use opcode::*;
    match r.op {
        SEND => SendOp::Send,
        SEND_WITH_IMM => SendOp::SendWithImm(r.imm),
        SEND_WITH_INV => SendOp::SendWithInv(r.imm),
        RDMA_WRITE => SendOp::Write(r.remote),
        RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm(r.remote, r.imm),
        RDMA_READ => SendOp::Read(r.remote),
        ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote: r.remote,
            compare: r.compare,
            swap: r.swap,
        },
        _ => SendOp::FetchAdd {
            remote: r.remote,
            add: r.compare,
        },
    }
}

/// The C SGEs of `r`: its SGEs, or its inline data cut where generated.
pub fn c_sges(r: &Req) -> Vec<Sge> {
    match &r.inline {
        None => r.sges.clone(),
        Some((data, cuts)) => {
            let mut out = Vec::new();
            let mut from = 0;
            for &to in cuts.iter().chain(std::iter::once(&data.len())) {
                out.push(Sge {
                    addr: data[from..].as_ptr() as u64,
                    length: (to - from) as u32,
                    lkey: 0,
                });
                from = to;
            }
            out
        }
    }
}

/// `r` as provider-mlx5's request (no UD destination).
pub fn send_wr(r: &Req) -> SendWr<'_, Sge, AhAddr> {
    let op = op_of(r);
    match &r.inline {
        Some((data, _)) => SendWr::inline(r.wr_id, op, data),
        None => SendWr::new(r.wr_id, op, &r.sges),
    }
    .signaled(r.signaled)
    .solicited(r.solicited)
    .fence(r.fence)
}

/// Receive lists in rdma-core's form: the `i`-th SGE list as request
/// `first + i` (the SGE arrays stay `lists`', alive while these are).
pub fn recv_reqs(lists: &[Vec<Sge>], first: u64) -> Vec<OracleRecv> {
    lists
        .iter()
        .enumerate()
        .map(|(i, s)| OracleRecv {
            wr_id: first + i as u64,
            sges: s.as_ptr(),
            num_sge: s.len() as i32,
            pad: 0,
        })
        .collect()
}

/// `MLX5_CQE_RESP_ERR`.
pub const RESP_ERR: u8 = 0xe;

/// A responder CQE's last fields: on error the vendor syndrome and the
/// syndrome (bytes 54 and 55); `op_own`, the opcode `ok` (or
/// `MLX5_CQE_RESP_ERR`) and the owner bit, no inline scatter (bits 2 and
/// 3), no solicited bit (1).
pub fn finish_resp_cqe(b: &mut [u8; 64], ok: u8, err: Option<(u8, u8)>, owner: bool) {
    let kind = match err {
        None => ok,
        Some((syndrome, vendor)) => {
            b[54] = vendor;
            b[55] = syndrome;
            RESP_ERR
        }
    };
    b[63] = (kind << 4) | owner as u8;
}

/// The rdma-core QP a receive test's oracle is built around: RC, QP
/// number `qpn`, a minimal send queue the tests never post to.
pub fn receiver_qp(qpn: u32) -> QpCfg {
    QpCfg {
        qp_type: qp_type::RC,
        qpn,
        wqe_cnt: 64,
        max_sge: 1,
        max_inline: 0,
        bf_size: 256,
        blueflame: false,
        prefer_bf: false,
        sig_all: false,
    }
}

/// What one list did on both sides.
pub struct Posted {
    /// provider-mlx5's refusal: (index, error).
    pub refused: Option<(usize, provider_mlx5::PostError)>,
    /// rdma-core's errno and `bad_wr` index.
    pub errno: i32,
    pub bad: Option<usize>,
    /// The basic-block counter of each WQE provider-mlx5 posted.
    pub starts: Vec<u32>,
}

/// Posts `list` through rdma-core (one `ibv_send_wr` list) and through
/// provider-mlx5 (one `post` each, then one `ring`); a UD QP's requests
/// go to `ah` (rdma-core) and `addr` (ours), the same address vector.
pub fn post_list(
    c: &QpCfg,
    ours: &mut Ours,
    theirs: &mut Oracle,
    ah: &Ah,
    addr: &AhAddr,
    list: &[Req],
) -> Posted {
    let ud = c.qp_type == qp_type::UD;
    let sges: Vec<Vec<Sge>> = list.iter().map(c_sges).collect();
    let reqs: Vec<OracleReq> = list
        .iter()
        .zip(&sges)
        .map(|(r, s)| OracleReq {
            wr_id: r.wr_id,
            remote_addr: r.remote.addr,
            compare_add: r.compare,
            swap: r.swap,
            sges: s.as_ptr(),
            ah: if ud {
                ah.as_ptr()
            } else {
                std::ptr::null_mut()
            },
            opcode: r.op,
            send_flags: (r.fence as u32 * send_flags::FENCE)
                | (r.signaled as u32 * send_flags::SIGNALED)
                | (r.solicited as u32 * send_flags::SOLICITED)
                | (r.inline.is_some() as u32 * send_flags::INLINE),
            imm_or_inv: if r.op == opcode::SEND_WITH_INV {
                r.imm
            } else {
                r.imm.to_be()
            },
            num_sge: s.len() as i32,
            rkey: r.remote.rkey,
            remote_qpn: r.remote_qpn,
            remote_qkey: r.remote_qkey,
            pad: 0,
        })
        .collect();
    // SAFETY: each request's SGEs are `sges`' (alive here); inline ones
    // point into the requests' data (alive here); ah is ours.
    let (errno, bad) = unsafe { theirs.post(&reqs) };
    let mut refused = None;
    let mut starts = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let wr = send_wr(r);
        let wr = if ud {
            wr.to(addr, r.remote_qpn, r.remote_qkey)
        } else {
            wr
        };
        let start = ours.sq.cur_post();
        // SAFETY: nothing reads the SGEs' memory: the queue only copies
        // them (and inline data, which is alive) into the ring.
        match unsafe { ours.sq.post(&wr) } {
            Ok(()) => starts.push(start),
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    ours.sq.ring();
    Posted {
        refused,
        errno,
        bad,
        starts,
    }
}

/// One poll of up to `m` completions on both sides: provider-mlx5's CQ
/// over `qs`, rdma-core's `mlx5_poll_cq`. The counts must agree, and each
/// pair the `wr_id`, status and QP number, and on error the vendor
/// syndrome (provider-mlx5 keeps the syndrome above it, docs/mlx5.md).
/// Returns the pairs, for the caller's checks of what its completions
/// define.
pub fn poll_both(
    ours: &mut OurCq,
    qs: &mut [QpQueues<'_>],
    theirs: &mut Oracle,
    m: usize,
    what: &str,
) -> Result<Vec<(Wc, IbvWc)>, TestCaseError> {
    poll_both_scattered(ours, qs, theirs, m, what, &|_| false)
}

/// [`poll_both`], where the completions whose `wr_id` `scattered` names
/// had their data scattered into the CQE: rdma-core copies it into the
/// receive's buffers and reports success; provider-mlx5, whose QPs never
/// ask for scatter-to-CQE, reports a general error with no vendor
/// syndrome (docs/mlx5.md). Every other field as for the rest.
pub fn poll_both_scattered(
    ours: &mut OurCq,
    qs: &mut [QpQueues<'_>],
    theirs: &mut Oracle,
    m: usize,
    what: &str,
    scattered: &dyn Fn(u64) -> bool,
) -> Result<Vec<(Wc, IbvWc)>, TestCaseError> {
    let mut a = vec![Wc::default(); m];
    let mut b = vec![IbvWc::default(); m];
    let got = ours
        .cq
        .poll(qs, &mut a)
        .map_err(|e| TestCaseError::fail(format!("{what}: provider-mlx5: {e:?}")))?;
    let want = theirs.poll(&mut b);
    prop_assert_eq!(got as i32, want, "{}: counts", what);
    let pairs: Vec<(Wc, IbvWc)> = a.into_iter().zip(b).take(got).collect();
    for (x, y) in &pairs {
        let what = format!("{what}: ours {x:?}, rdma-core {y:?}");
        prop_assert_eq!(x.wr_id, y.wr_id, "{}", what);
        prop_assert_eq!(x.qp_num, y.qp_num, "{}", what);
        if scattered(x.wr_id) {
            prop_assert_eq!(y.status, 0, "{} (rdma-core copies scattered data)", what);
            prop_assert_eq!(x.status, WcStatus::GENERAL_ERR, "{} (scattered)", what);
            prop_assert_eq!(x.vendor_err, 0, "{} (scattered)", what);
            continue;
        }
        prop_assert_eq!(x.status.0, y.status, "{}", what);
        if y.status != 0 {
            prop_assert_eq!(x.vendor_err & 0xff, y.vendor_err, "{}", what);
            prop_assert!(x.vendor_err >> 16 == 0, "{}", what);
        }
    }
    Ok(pairs)
}

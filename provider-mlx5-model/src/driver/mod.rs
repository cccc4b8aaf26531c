//! Drives a [`Pair`] through a sequence of operations while keeping an
//! independent account of what must happen: which completions appear, in
//! which order, with which wr_id, status and data.
//!
//! QP `a` is the requester, QP `b` the responder. Memory:
//! - a: SEND sources at 0 (32 × 64 B), READ destinations at 2048
//!   (16 × 64 B), atomic results at 3072 (128 × 8 B);
//! - b: receive buffers at 0 (one 64-byte slot per RQ slot), atomic
//!   targets at 1024 (128 × 8 B), the RDMA WRITE/READ area at 2048.

mod post;

use crate::exec::{syn, VENDOR};
use crate::harness::Pair;
use provider_mlx5::{
    wc, AhAddr, PostError, Remote, SendOp, SendWr, Sge, Status, Wc, WcFlags, WcOpcode, WcStatus,
};
use std::collections::VecDeque;

const SEND_SRC: usize = 0;
const READ_DST: usize = 2048;
const ATOMIC_RES: usize = 3072;
const ATOMIC_TGT: usize = 1024;
const RDMA: usize = 2048;
/// Largest SEND/WRITE/READ the driver posts (a receive holds 64 bytes).
pub const MAX_LEN: usize = 64;
/// Basic blocks of the largest request the driver posts.
const MAX_BBS: u32 = 3;

/// One step.
#[derive(Debug, Clone)]
pub enum Op {
    Send {
        len: usize,
        inline: bool,
        imm: Option<u32>,
        signaled: bool,
        solicited: bool,
    },
    Write {
        len: usize,
        inline: bool,
        imm: Option<u32>,
        signaled: bool,
        off: usize,
    },
    Read {
        len: usize,
        signaled: bool,
        off: usize,
    },
    Cas {
        slot: usize,
        swap: u64,
        equal: bool,
        signaled: bool,
    },
    Faa {
        slot: usize,
        add: u64,
        signaled: bool,
    },
    Nop {
        signaled: bool,
    },
    PostRecv,
    Ring,
    Poll {
        max: usize,
    },
    Arm {
        solicited: bool,
    },
}

/// A request that fails.
#[derive(Debug, Clone, Copy)]
pub enum Bad {
    /// A SEND gathering under an unknown lkey: LOCAL_PROT.
    Lkey,
    /// An RDMA WRITE under an unknown rkey: REMOTE_ACCESS.
    Rkey,
    /// A SEND longer than the receive: LOCAL_LENGTH at b, REMOTE_INVAL_REQ
    /// at a.
    TooLong,
    /// A NOP the model fails with this syndrome.
    Inject(u8),
}

#[derive(Debug)]
struct SendExp {
    wr_id: u64,
    opcode: WcOpcode,
    status: Status,
    byte_len: u32,
}

#[derive(Debug)]
enum RecvUse {
    Send { data: Vec<u8>, imm: Option<u32> },
    WriteImm { len: u32, imm: u32 },
    Fail(Status),
}

#[derive(Debug)]
struct RecvExp {
    wr_id: u64,
    slot: usize,
    by: Option<RecvUse>,
}

/// The driver: a pair and the expectations.
pub struct Driver {
    pub p: Pair,
    seq: u64,
    sends: VecDeque<SendExp>,
    /// Every WQE on a's SQ not yet retired: (wr_id, basic blocks).
    posted: VecDeque<(u64, u32)>,
    recvs: VecDeque<RecvExp>,
    recv_seq: u64,
    shadow: Vec<u8>,
    atomics: Vec<u64>,
    checks: Vec<(usize, Vec<u8>)>,
    reads: usize,
    atomic_seq: usize,
    pub a_err: bool,
    b_err: bool,
    armed: Option<(bool, u32)>,
    events: u32,
    /// Completions seen, by kind, for the report.
    pub seen: usize,
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31) as usize + i * 7) as u8)
        .collect()
}

impl Driver {
    pub fn new(p: Pair) -> Driver {
        let shadow = pattern(99, crate::harness::MR_LEN - RDMA);
        p.write(p.b_mr, RDMA, &shadow);
        let atomics: Vec<u64> = (0..128).map(|i| i * 1000).collect();
        for (i, v) in atomics.iter().enumerate() {
            p.write(p.b_mr, ATOMIC_TGT + i * 8, &v.to_le_bytes());
        }
        Driver {
            p,
            seq: 1,
            sends: VecDeque::new(),
            posted: VecDeque::new(),
            recvs: VecDeque::new(),
            recv_seq: 0,
            shadow,
            atomics,
            checks: Vec::new(),
            reads: 0,
            atomic_seq: 0,
            a_err: false,
            b_err: false,
            armed: None,
            events: 0,
            seen: 0,
        }
    }

    /// Runs one step.
    pub fn step(&mut self, op: &Op) {
        match op {
            Op::PostRecv => self.post_recv(),
            Op::Ring => self.ring(),
            Op::Poll { max } => self.poll(*max),
            Op::Arm { solicited } => {
                let ci = self.p.cq.consumer_index();
                self.p.cq.arm(*solicited);
                self.armed = Some((*solicited, ci));
                self.p.dev.process();
                self.sync_events();
            }
            _ => self.post_op(op),
        }
    }

    /// Rings, lets the device run, and checks memory the device wrote.
    pub fn ring(&mut self) {
        self.p.ring();
        self.sync_events();
        for (off, want) in self.checks.drain(..) {
            assert_eq!(
                self.p.read(self.p.a_mr, off, want.len()),
                want,
                "data at a+{off}"
            );
        }
        let area = self.p.read(self.p.b_mr, RDMA, self.shadow.len());
        assert!(area == self.shadow, "RDMA WRITE area differs");
        let targets: Vec<u8> = self.atomics.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(
            self.p.read(self.p.b_mr, ATOMIC_TGT, targets.len()) == targets,
            "atomic targets differ"
        );
    }

    fn sync_events(&mut self) {
        let events = self.p.dev.cqs[0].events;
        let new = events - self.events;
        assert!(new <= self.armed.is_some() as u32, "event without an arm");
        for _ in 0..new {
            self.p.cq.ack_event();
            self.armed = None;
        }
        self.events = events;
        if let Some((false, ci)) = self.armed {
            assert_eq!(
                self.p.dev.cqs[0].pi & 0xff_ffff,
                ci & 0xff_ffff,
                "armed CQ got a CQE and no event"
            );
        }
    }

    #[allow(unsafe_code)] // posting names memory by address
    fn post_recv(&mut self) {
        if self.p.b_rq.outstanding() == self.p.b_rq.capacity() {
            self.ring();
            self.drain();
        }
        if self.p.b_rq.outstanding() == self.p.b_rq.capacity() {
            return; // every receive is waiting for a consumer
        }
        let idx = self.recv_seq;
        let slot = (idx % self.p.b_rq.capacity() as u64) as usize;
        let (lkey, base) = (
            self.p.lkey(self.p.b_mr),
            self.p.addr(self.p.b_mr, slot * 64),
        );
        self.p.write(self.p.b_mr, slot * 64, &[0xcc; 64]);
        let two = [
            Sge {
                addr: base,
                length: 16,
                lkey,
            },
            Sge {
                addr: base + 16,
                length: 48,
                lkey,
            },
        ];
        let sges = if idx.is_multiple_of(3) {
            &two[..]
        } else {
            &[Sge {
                addr: base,
                length: 64,
                lkey,
            }][..]
        };
        // SAFETY: the SGEs name the model's registered region b, which
        // outlives the queue; the test reads it only through the model.
        unsafe { self.p.b_rq.post(0x8000_0000 + idx, sges) }.unwrap();
        let by = self.b_err.then_some(RecvUse::Fail(Status::WrFlush));
        self.recvs.push_back(RecvExp {
            wr_id: 0x8000_0000 + idx,
            slot,
            by,
        });
        self.recv_seq += 1;
    }

    fn poll(&mut self, max: usize) {
        let got = self.p.poll(max).expect("no bad CQEs");
        assert!(got.len() <= max);
        for c in got {
            self.check(&c);
        }
        self.check_accounting();
    }

    /// The SQ counts exactly the blocks of the WQEs not yet retired.
    fn check_accounting(&self) {
        let left: u32 = self.posted.iter().map(|p| p.1).sum();
        assert_eq!(self.p.a_sq.outstanding_wqebbs(), left, "SQ accounting");
    }

    /// Polls everything there is.
    pub fn drain(&mut self) {
        for c in self.p.drain() {
            self.check(&c);
        }
        self.check_accounting();
    }

    fn check(&mut self, c: &Wc) {
        self.seen += 1;
        if c.qp_num == self.p.qpn(self.p.a) {
            let e = self
                .sends
                .pop_front()
                .unwrap_or_else(|| panic!("unexpected send completion {c:?}"));
            assert_eq!(
                (c.wr_id, c.status, Status::of(c)),
                (e.wr_id, e.status.wc_status(), e.status),
                "send completion {c:?}, expected {e:?}"
            );
            if e.status.is_ok() {
                assert_eq!((c.opcode, c.byte_len), (e.opcode, e.byte_len), "{c:?}");
            }
            // The completion retires its WQE and every earlier one, exactly.
            while let Some((id, _)) = self.posted.pop_front() {
                if id == c.wr_id {
                    break;
                }
            }

            check_vendor(c);
            return;
        }
        assert_eq!(
            c.qp_num,
            self.p.qpn(self.p.b),
            "completion for an unknown QP"
        );
        let r = self
            .recvs
            .pop_front()
            .unwrap_or_else(|| panic!("unexpected receive completion {c:?}"));
        assert_eq!(c.wr_id, r.wr_id, "receive completion out of order: {c:?}");
        match r.by {
            Some(RecvUse::Send { data, imm }) => {
                assert_eq!(c.status, WcStatus::SUCCESS, "{c:?}");
                assert_eq!(
                    (c.opcode, c.byte_len, c.src_qp),
                    (WcOpcode::RECV, data.len() as u32, self.p.qpn(self.p.a))
                );
                assert_eq!(c.flags.contains(WcFlags::WITH_IMM), imm.is_some(), "{c:?}");
                assert_eq!(imm, c.imm_data());
                assert_eq!(
                    self.p.read(self.p.b_mr, r.slot * 64, data.len()),
                    data,
                    "received data"
                );
            }
            Some(RecvUse::WriteImm { len, imm }) => {
                assert_eq!(c.status, WcStatus::SUCCESS, "{c:?}");
                assert_eq!(
                    (c.opcode, c.byte_len, c.imm_data()),
                    (WcOpcode::RECV_RDMA_WITH_IMM, len, Some(imm)),
                    "{c:?}"
                );
                assert!(c.flags.contains(WcFlags::WITH_IMM));
            }
            Some(RecvUse::Fail(s)) => {
                assert_eq!((c.status, Status::of(c)), (s.wc_status(), s), "{c:?}")
            }
            None => panic!("receive {c:?} completed without a consumer"),
        }
        check_vendor(c);
    }

    /// Ends the run: everything posted completes, and every expectation is
    /// met.
    pub fn finish(&mut self) {
        self.ring();
        self.drain();
        self.post_op(&Op::Nop { signaled: true });
        self.ring();
        self.drain();
        assert!(
            self.sends.is_empty(),
            "send completions missing: {:?}",
            self.sends
        );
        assert_eq!(self.p.a_sq.outstanding_wqebbs(), 0);
        let waiting = self.recvs.iter().filter(|r| r.by.is_some()).count();
        assert_eq!(waiting, 0, "receive completions missing: {:?}", self.recvs);
        if self.a_err {
            assert!(self.p.dev.qps[self.p.a].error);
        }
    }
}

/// `vendor_err` keeps the CQE's vendor syndrome (low byte) and syndrome
/// (next byte).
fn check_vendor(c: &Wc) {
    let vendor = (c.vendor_err & 0xff) as u8;
    match Status::of(c) {
        Status::Success => assert_eq!(c.vendor_err, 0),
        Status::WrFlush => assert_eq!((vendor, wc::syndrome(c)), (0, syn::WR_FLUSH), "{c:?}"),
        s => assert_eq!((vendor, wc::syndrome(c)), (VENDOR, s.syndrome()), "{c:?}"),
    }
    assert_eq!(c.vendor_err >> 16, 0, "{c:?}");
}

/// The syndromes the model can be told to fail with.
pub const INJECTABLE: [u8; 13] = [
    syn::LOCAL_LENGTH,
    0x02,
    syn::LOCAL_PROT,
    syn::WR_FLUSH,
    0x06,
    0x10,
    0x11,
    syn::REMOTE_INVAL_REQ,
    syn::REMOTE_ACCESS,
    syn::REMOTE_OP,
    syn::RETRY_EXC,
    syn::RNR_RETRY_EXC,
    0x22,
];

//! A software model of an mlx5 device, for testing the provider without
//! hardware.
//!
//! The model owns every buffer the provider is handed (SQ/RQ/SRQ rings,
//! doorbell records, UAR pages, CQ rings) and the registered memory. When
//! told to [`Device::process`], it does what the device would do after the
//! provider's doorbells: it takes arm requests, consumes each SQ's WQEs from
//! its own consumer index up to the SND doorbell record (checking the
//! 64-bit doorbell or BlueFlame copy left in the UAR), performs them between
//! model QPs (loopback: SEND into the peer's receive, RDMA WRITE/READ,
//! atomics, with lkey/rkey checks), writes CQEs with the right owner bit,
//! and puts QPs in the error state on failures, flushing what follows. It
//! knows the hardware formats only from `mlx5dv.h`, written out afresh.
//!
//! It implements the device as rdma-core and the headers describe it, which
//! is also all the provider is built from: agreement shows the provider does
//! what its author believes the device wants, not what a ConnectX does.
//!
//! Test support only, never for production: provider-mlx5's integration
//! tests (`tests/model_*.rs`) and its benchmark (`examples/bench_model.rs`
//! here) drive the provider's queues over it, and the root crate's unit
//! tests drive its mlx5 glue over it.
// Unsafe code is opted into where the model hands the provider raw memory
// or posts requests that name it.
#![deny(unsafe_code)]

pub mod cq;
pub mod driver;
pub mod exec;
pub mod harness;
pub mod mem;
pub mod wqe;

use cq::ModelCq;
use mem::{Memory, SharedBuf};
use provider_mlx5::{
    CompletionQueue, CqConfig, QpType, RecvQueue, SendQueue, SharedRecvQueue, SqConfig,
};

/// Offset of the BlueFlame register in a QP's UAR page.
pub const BF_REG: usize = 0x800;

/// The receive side of a model QP.
pub enum RecvSide {
    /// None (send-only).
    None,
    /// Its own RQ: `cnt` WQEs of `1 << shift` bytes.
    Rq { cnt: u32, shift: u32 },
    /// A model SRQ, by index.
    Srq(usize),
}

pub struct ModelQp {
    pub qpn: u32,
    pub ud: bool,
    /// Unreliable connected (set after [`Device::add_qp`]; `ud` false):
    /// see `exec.rs`'s `uc_send`.
    pub uc: bool,
    pub sq: SharedBuf,
    pub sq_cnt: u32,
    pub sq_ci: u32,
    pub rq: Option<(SharedBuf, u32, u32)>,
    pub rq_ci: u32,
    pub srq: Option<usize>,
    pub dbrec: SharedBuf,
    pub uar: SharedBuf,
    pub bf_size: u32,
    bf_half: u32,
    pub send_cq: usize,
    pub recv_cq: usize,
    pub peer: Option<usize>,
    pub error: bool,
    pub qkey: u32,
    /// Doorbells seen, and how many were BlueFlame copies.
    pub doorbells: u64,
    pub blueflame_copies: u64,
    inject: Option<u8>,
}

pub struct ModelSrq {
    pub srqn: u32,
    pub buf: SharedBuf,
    pub cnt: u32,
    pub shift: u32,
    pub dbrec: SharedBuf,
    head: u16,
    consumed: u16,
}

#[derive(Default)]
pub struct Device {
    pub mem: Memory,
    pub qps: Vec<ModelQp>,
    pub cqs: Vec<ModelCq>,
    pub srqs: Vec<ModelSrq>,
}

impl Device {
    pub fn new() -> Device {
        Device::default()
    }

    /// A CQ of `ncqe` entries of `cqe_size` bytes.
    pub fn add_cq(&mut self, ncqe: u32, cqe_size: usize) -> usize {
        let cqn = 0x40 + self.cqs.len() as u32;
        self.cqs.push(ModelCq::new(cqn, ncqe, cqe_size));
        self.cqs.len() - 1
    }

    /// An SRQ of `cnt` WQEs of `1 << shift` bytes.
    pub fn add_srq(&mut self, cnt: u32, shift: u32) -> usize {
        self.srqs.push(ModelSrq {
            srqn: 0x80 + self.srqs.len() as u32,
            buf: SharedBuf::new((cnt as usize) << shift, 4096),
            cnt,
            shift,
            dbrec: SharedBuf::new(64, 64),
            head: 0,
            consumed: 0,
        });
        self.srqs.len() - 1
    }

    /// A QP with an SQ of `sq_cnt` basic blocks.
    pub fn add_qp(
        &mut self,
        ud: bool,
        sq_cnt: u32,
        recv: RecvSide,
        send_cq: usize,
        recv_cq: usize,
        bf_size: u32,
    ) -> usize {
        let (rq, srq) = match recv {
            RecvSide::None => (None, None),
            RecvSide::Rq { cnt, shift } => (
                Some((SharedBuf::new((cnt as usize) << shift, 4096), cnt, shift)),
                None,
            ),
            RecvSide::Srq(s) => (None, Some(s)),
        };
        self.qps.push(ModelQp {
            qpn: 0x1_0000 * (self.qps.len() as u32 + 1) + 0x123,
            ud,
            uc: false,
            sq: SharedBuf::new(sq_cnt as usize * 64, 4096),
            sq_cnt,
            sq_ci: 0,
            rq,
            rq_ci: 0,
            srq,
            dbrec: SharedBuf::new(64, 64),
            uar: SharedBuf::new(4096, 4096),
            bf_size,
            bf_half: 0,
            send_cq,
            recv_cq,
            peer: None,
            error: false,
            qkey: 0x1111_0000 + self.qps.len() as u32,
            doorbells: 0,
            blueflame_copies: 0,
            inject: None,
        });
        self.qps.len() - 1
    }

    /// Connects two RC QPs to each other.
    pub fn connect(&mut self, a: usize, b: usize) {
        self.qps[a].peer = Some(b);
        self.qps[b].peer = Some(a);
    }

    /// Makes the next WQE QP `q` executes fail with `syndrome`.
    pub fn inject(&mut self, q: usize, syndrome: u8) {
        self.qps[q].inject = Some(syndrome);
    }

    /// Does everything the doorbells written so far ask for.
    pub fn process(&mut self) {
        for c in &mut self.cqs {
            c.take_arm();
        }
        for q in 0..self.qps.len() {
            self.service_sq(q);
        }
        for q in 0..self.qps.len() {
            if self.qps[q].error {
                self.flush_rq(q);
            }
        }
    }

    /// Consumes the WQEs QP `q`'s SND record publishes.
    fn service_sq(&mut self, q: usize) {
        let db = self.qps[q].dbrec.be32(4) as u16;
        let pending = db.wrapping_sub(self.qps[q].sq_ci as u16) as u32;
        assert!(
            pending <= self.qps[q].sq_cnt,
            "SND record runs ahead of the ring"
        );
        let mut done = 0;
        let mut last = None;
        while done < pending {
            let qp = &self.qps[q];
            let w = wqe::read_send(&qp.sq, qp.sq_cnt, qp.sq_ci, qp.ud);
            assert_eq!(
                w.index, qp.sq_ci as u16,
                "WQE index is not the block counter"
            );
            assert_eq!(w.qpn, qp.qpn, "WQE for another QP");
            self.execute(q, &w);
            done += w.bbs();
            self.qps[q].sq_ci = self.qps[q].sq_ci.wrapping_add(w.bbs());
            last = Some(w);
        }
        assert_eq!(done, pending, "SND record points inside a WQE");
        self.check_doorbell(q, last.as_ref());
    }

    /// Checks the UAR: after a ring, the current BlueFlame half holds the
    /// last WQE's first 8 bytes (or the whole WQE), the other is untouched.
    fn check_doorbell(&mut self, q: usize, last: Option<&wqe::SendWqe>) {
        let qp = &mut self.qps[q];
        let size = (qp.bf_size as usize).max(8);
        let cur = qp.uar.read(BF_REG + qp.bf_half as usize, size);
        if qp.bf_size != 0 {
            let other = qp
                .uar
                .read(BF_REG + (qp.bf_half ^ qp.bf_size) as usize, size);
            assert!(
                other.iter().all(|&b| b == 0),
                "doorbell written to the wrong BlueFlame half"
            );
        }
        let Some(w) = last else {
            assert!(cur.iter().all(|&b| b == 0), "doorbell without a new WQE");
            return;
        };
        assert_eq!(
            &cur[..8],
            &w.raw[..8],
            "doorbell is not the last WQE's first 8 bytes"
        );
        if cur[8..].iter().any(|&b| b != 0) {
            assert_eq!(
                &cur[..w.raw.len()],
                &w.raw[..],
                "BlueFlame copy differs from the WQE"
            );
            qp.blueflame_copies += 1;
        }
        qp.doorbells += 1;
        qp.uar.fill(BF_REG + qp.bf_half as usize, size, 0);
        qp.bf_half ^= qp.bf_size;
    }
}

/// The provider's queues over the model's memory (its `unsafe`
/// constructors).
#[allow(unsafe_code)]
impl Device {
    /// The provider's CQ over model CQ `c`.
    pub fn provider_cq(&self, c: usize) -> CompletionQueue {
        let m = &self.cqs[c];
        let cfg = CqConfig {
            ncqe: m.ncqe,
            cqe_size: m.cqe_size,
            cqn: m.cqn,
        };
        // SAFETY: the model's buffers live as long as the Device, which
        // every test drops after the provider objects; the model writes the
        // ring only as the device would.
        unsafe {
            CompletionQueue::new(m.buf.ptr(), m.buf.len(), m.dbrec.ptr32(), m.uar.ptr(), cfg)
                .unwrap()
        }
    }

    /// The provider's SQ over model QP `q`.
    pub fn provider_sq(
        &self,
        q: usize,
        max_sge: u32,
        max_inline: u32,
        blueflame: bool,
    ) -> SendQueue {
        let m = &self.qps[q];
        let cfg = SqConfig {
            qpn: m.qpn,
            qp_type: match (m.ud, m.uc) {
                (true, _) => QpType::Ud,
                (false, true) => QpType::Uc,
                (false, false) => QpType::Rc,
            },
            wqe_cnt: m.sq_cnt,
            max_wr: m.sq_cnt,
            max_sge,
            max_inline,
            bf_size: m.bf_size,
            blueflame,
            prefer_blueflame: false,
            sig_all: false,
        };
        // SAFETY: as in provider_cq; the UAR page is 4096 bytes, the
        // register at 0x800 with two halves of bf_size <= 1024 bytes.
        unsafe {
            let bf = m.uar.ptr().add(BF_REG);
            SendQueue::new(m.sq.ptr(), m.sq.len(), m.dbrec.ptr32(), bf, cfg).unwrap()
        }
    }

    /// The provider's RQ over model QP `q`.
    pub fn provider_rq(&self, q: usize, max_sge: u32) -> RecvQueue {
        let m = &self.qps[q];
        let (buf, cnt, shift) = m.rq.as_ref().expect("QP has an RQ");
        // SAFETY: as in provider_cq.
        unsafe {
            RecvQueue::new(buf.ptr(), buf.len(), m.dbrec.ptr32(), *cnt, *shift, max_sge).unwrap()
        }
    }

    /// The provider's SRQ over model SRQ `s`.
    pub fn provider_srq(&self, s: usize, max_sge: u32) -> SharedRecvQueue {
        let m = &self.srqs[s];
        // SAFETY: as in provider_cq.
        unsafe {
            SharedRecvQueue::new(
                m.buf.ptr(),
                m.buf.len(),
                m.dbrec.ptr32(),
                m.cnt,
                m.shift,
                max_sge,
            )
            .unwrap()
        }
    }
}

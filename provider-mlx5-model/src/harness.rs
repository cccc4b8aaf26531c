//! Two RC QPs connected in loopback on one CQ, with the provider's queues
//! over the model's memory.

use crate::mem::access;
use crate::{Device, RecvSide};
use provider_mlx5::{BadCqe, CompletionQueue, QpQueues, RecvQueue, RecvTarget, SendQueue, Wc};

/// Sizes of a [`Pair`].
#[derive(Debug, Clone, Copy)]
pub struct PairCfg {
    pub sq_cnt: u32,
    pub rq_cnt: u32,
    pub ncqe: u32,
    pub cqe_size: usize,
    pub bf_size: u32,
    pub blueflame: bool,
    pub max_inline: u32,
}

impl Default for PairCfg {
    fn default() -> PairCfg {
        PairCfg {
            sq_cnt: 16,
            rq_cnt: 8,
            ncqe: 32,
            cqe_size: 64,
            bf_size: 256,
            blueflame: true,
            max_inline: 128,
        }
    }
}

/// Bytes in each QP's registered region.
pub const MR_LEN: usize = 4096;

/// QP `a` and QP `b`, connected, sharing one CQ. Provider objects come
/// first so they are dropped before the model that owns their memory.
pub struct Pair {
    pub a_sq: SendQueue,
    pub a_rq: RecvQueue,
    pub b_sq: SendQueue,
    pub b_rq: RecvQueue,
    pub cq: CompletionQueue,
    pub dev: Device,
    pub a: usize,
    pub b: usize,
    pub a_mr: usize,
    pub b_mr: usize,
}

impl Pair {
    pub fn new(cfg: PairCfg) -> Pair {
        Pair::of_type(cfg, false)
    }

    /// The pair as RC QPs, or as UC ones (`uc`).
    pub fn of_type(cfg: PairCfg, uc: bool) -> Pair {
        let mut dev = Device::new();
        let c = dev.add_cq(cfg.ncqe, cfg.cqe_size);
        let rq = || RecvSide::Rq {
            cnt: cfg.rq_cnt,
            shift: 5,
        };
        let a = dev.add_qp(false, cfg.sq_cnt, rq(), c, c, cfg.bf_size);
        let b = dev.add_qp(false, cfg.sq_cnt, rq(), c, c, cfg.bf_size);
        dev.qps[a].uc = uc;
        dev.qps[b].uc = uc;
        dev.connect(a, b);
        let a_mr = dev.mem.reg(MR_LEN, access::ALL);
        let b_mr = dev.mem.reg(MR_LEN, access::ALL);
        Pair {
            a_sq: dev.provider_sq(a, 4, cfg.max_inline, cfg.blueflame),
            a_rq: dev.provider_rq(a, 2),
            b_sq: dev.provider_sq(b, 4, cfg.max_inline, cfg.blueflame),
            b_rq: dev.provider_rq(b, 2),
            cq: dev.provider_cq(c),
            dev,
            a,
            b,
            a_mr,
            b_mr,
        }
    }

    pub fn qpn(&self, q: usize) -> u32 {
        self.dev.qps[q].qpn
    }
    pub fn lkey(&self, mr: usize) -> u32 {
        self.dev.mem.mrs[mr].lkey
    }
    pub fn rkey(&self, mr: usize) -> u32 {
        self.dev.mem.mrs[mr].rkey
    }
    pub fn addr(&self, mr: usize, off: usize) -> u64 {
        self.dev.mem.mrs[mr].buf.addr() + off as u64
    }
    pub fn write(&self, mr: usize, off: usize, data: &[u8]) {
        self.dev.mem.mrs[mr].buf.write(off, data)
    }
    pub fn read(&self, mr: usize, off: usize, n: usize) -> Vec<u8> {
        self.dev.mem.mrs[mr].buf.read(off, n)
    }

    /// Rings every queue, then lets the device run.
    pub fn ring(&mut self) {
        self.a_sq.ring();
        self.b_sq.ring();
        self.a_rq.ring();
        self.b_rq.ring();
        self.dev.process();
    }

    /// Runs `f` on the CQ with the lookup of both QPs' queues: send and
    /// receive, or (`recv` false) send only, as the write benches want, so
    /// that they count the lookup they need and nothing more.
    pub fn with_queues<R>(
        &mut self,
        recv: bool,
        f: impl FnOnce(&mut CompletionQueue, &mut [QpQueues<'_>]) -> R,
    ) -> R {
        let (qa, qb) = (self.qpn(self.a), self.qpn(self.b));
        let mut qs = [
            QpQueues {
                qpn: qa,
                sq: Some(self.a_sq.records()),
                rq: recv.then(|| RecvTarget::Rq(self.a_rq.records())),
            },
            QpQueues {
                qpn: qb,
                sq: Some(self.b_sq.records()),
                rq: recv.then(|| RecvTarget::Rq(self.b_rq.records())),
            },
        ];
        f(&mut self.cq, &mut qs)
    }

    /// Polls at most `max` completions.
    pub fn poll(&mut self, max: usize) -> Result<Vec<Wc>, BadCqe> {
        let mut out = vec![Wc::default(); max];
        let n = self.with_queues(true, |cq, qs| cq.poll(qs, &mut out))?;
        out.truncate(n);
        Ok(out)
    }

    /// Polls until the CQ is empty.
    pub fn drain(&mut self) -> Vec<Wc> {
        let mut all = Vec::new();
        loop {
            let got = self.poll(4).expect("no bad CQEs");
            if got.is_empty() {
                return all;
            }
            all.extend(got);
        }
    }
}

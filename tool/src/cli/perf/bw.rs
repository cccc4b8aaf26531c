//! The bandwidth loops: perftest's `run_iter_bw` (and `run_iter_bi`,
//! the bidirectional send test's) posting on every QP, and
//! `run_iter_bw_server`, the receiving side of send-bw; each by
//! iterations, by duration or forever ([`Length`]).

use super::args::PerfArgs;
use super::bench::{bench_post_send, work_request, Bench};
use super::plan::{Length, Phase, CQ_MOD};
use super::report;
use super::script::op_for;
use rverbs::{Ah, Mr, Result, SendOp, SendWr, Slice, Wc, WcOpcode};
use rverbs_tool::wire::perf::BwReport;
use std::time::Instant;

/// What a bandwidth run posts, fixed for the run.
struct Posting<'m> {
    /// Each lane's requests (`u32::MAX` when timed).
    iters: u32,
    /// Requests in flight per lane at most.
    depth: u32,
    /// A signaled request in every `cq_mod`.
    cq_mod: u32,
    /// Requests per doorbell (`-l`).
    batch: u32,
    /// Bytes per request.
    len: u32,
    /// This run's tag in the top byte of the wr_id, so that completions of
    /// a timed run's last requests (which it does not wait for, as
    /// perftest does not) are not counted by the next.
    tag: u64,
    /// The payload, where it is sent inline.
    inline: Option<&'m [u8]>,
    /// Each lane's message (its region `2i`).
    sges: Vec<[Slice<'m>; 1]>,
    /// Each lane's operation and, on UD, destination.
    dests: Vec<(SendOp, Option<(Ah, u32)>)>,
}

impl<'m> Posting<'m> {
    /// `mr` and `zeros` are clones of the bench's, so that the requests do
    /// not borrow it.
    fn new(
        b: &mut Bench,
        a: &PerfArgs,
        mr: &'m Mr,
        zeros: &'m [u8],
        len: u32,
        length: Length,
    ) -> Result<Posting<'m>> {
        let depth = b.lanes[0].qp.caps().max_send_wr.min(a.tx_depth());
        b.generation = b.generation.wrapping_add(1);
        let mut sges = Vec::with_capacity(b.lanes.len());
        for l in 0..b.lanes.len() {
            sges.push([mr.slice(b.region * 2 * l, len)?]);
        }
        let dests: Vec<(SendOp, Option<(Ah, u32)>)> = b
            .lanes
            .iter()
            .map(|l| (op_for(a.test, l.remote), l.ud.clone()))
            .collect();
        let inline = len <= b.inline && matches!(dests[0].0, SendOp::Write(_) | SendOp::Send);
        Ok(Posting {
            iters: match length {
                Length::Iters(n) => n,
                _ => u32::MAX,
            },
            depth,
            // At least one signaled request among `depth` in flight.
            cq_mod: CQ_MOD.min(depth).max(1),
            batch: a.batch,
            len,
            tag: u64::from(b.generation) << 56,
            inline: inline.then(|| &zeros[..len as usize]),
            sges,
            dests,
        })
    }

    /// The wr_id of lane `l`'s request number `n`: the tag, the lane, and
    /// the count of the lane's requests its completion covers.
    fn wr_id(&self, l: usize, n: u32) -> u64 {
        self.tag | (l as u64) << 32 | u64::from(n)
    }

    /// The lane and count of a completion's wr_id, if it is this run's.
    fn lane_and_count(&self, wr_id: u64) -> Option<(usize, u32)> {
        (wr_id & (0xff << 56) == self.tag)
            .then_some((((wr_id >> 32) & 0xff_ffff) as usize, wr_id as u32))
    }
}

/// A bandwidth run's counts.
struct Counts {
    /// Per lane: requests posted and requests completed.
    posted: Vec<u32>,
    completed: Vec<u32>,
    /// Requests completed on all lanes.
    done: u64,
    /// Receives completed (the bidirectional send test).
    received: u64,
}

/// Where a run is in its [`Length`]: the phase of a run by duration, the
/// periods of an endless one (each printed as it ends), and what completed
/// in the sample or the period.
struct Clock {
    length: Length,
    start: Instant,
    period_start: Instant,
    /// Messages completed in the sample (by duration) or in the period
    /// (forever).
    counted: u64,
    /// Bytes per message, and the report's unit, for the figures.
    size: u32,
    gbits: bool,
}

impl Clock {
    fn new(length: Length, start: Instant, size: u32, gbits: bool) -> Clock {
        Clock {
            length,
            start,
            period_start: start,
            counted: 0,
            size,
            gbits,
        }
    }

    /// The phase at `now`. Run forever (whose phase is always the sample):
    /// once a period is over, prints its figures and starts the next.
    fn phase(&mut self, now: Instant) -> Phase {
        let phase = self.length.phase(now.duration_since(self.start));
        if let Length::Forever { period } = self.length {
            let dt = now.duration_since(self.period_start);
            if dt >= period {
                let r = timed_report(self.size, self.counted, dt.as_secs_f64(), self.gbits);
                println!("{}", report::bw_line(&r));
                self.counted = 0;
                self.period_start = now;
            }
        }
        phase
    }

    /// `k` messages completed in `phase`.
    fn count(&mut self, phase: Phase, k: u64) {
        if phase == Phase::Sample {
            self.counted += k;
        }
    }

    /// The figures of a run by duration (the sample's, no peak), or
    /// `otherwise`'s.
    fn report(&self, otherwise: impl FnOnce() -> BwReport) -> BwReport {
        match self.length {
            Length::Timed { sample, .. } => {
                timed_report(self.size, self.counted, sample.as_secs_f64(), self.gbits)
            }
            _ => otherwise(),
        }
    }
}

/// The peak bandwidth over windows of a round of signaled completions (one
/// per lane): lanes complete close together, so a single completion's
/// interval says nothing.
struct Peak {
    window: u64,
    start: Instant,
    chunk: u64,
    bytes_per_sec: f64,
}

impl Peak {
    fn add(&mut self, k: u64, len: u32) {
        self.chunk += k;
        if self.chunk >= self.window {
            let now = Instant::now();
            let dt = now.duration_since(self.start).as_secs_f64();
            if dt > 0.0 {
                self.bytes_per_sec = self
                    .bytes_per_sec
                    .max(self.chunk as f64 * f64::from(len) / dt);
            }
            self.start = now;
            self.chunk = 0;
        }
    }
}

impl Bench {
    /// perftest's `run_iter_bw` (and, with `recv`, `run_iter_bi`: the
    /// receiving half of a bidirectional send test, keeping receives
    /// posted): posts round robin on every lane, each up to the TX depth,
    /// signaling one request in [`CQ_MOD`], until each lane's iterations
    /// complete, the duration ends or, run infinitely, never (printing
    /// each period's figures).
    pub fn bw(&mut self, a: &PerfArgs, len: u32, length: Length, recv: bool) -> Result<BwReport> {
        let nq = self.lanes.len();
        let (mr, zeros) = (self.mr.clone(), self.zeros.clone());
        let p = Posting::new(self, a, &mr, &zeros, len, length)?;
        let total = u64::from(p.iters) * nq as u64;
        let mut c = Counts {
            posted: vec![0; nq],
            completed: vec![0; nq],
            done: 0,
            received: 0,
        };
        let mut batch = Vec::with_capacity(a.batch as usize);
        let mut wc = [Wc::default(); 16];
        let start = Instant::now();
        let mut peak = Peak {
            window: u64::from(p.cq_mod) * nq as u64,
            start,
            chunk: 0,
            bytes_per_sec: 0.0,
        };
        let mut clock = Clock::new(length, start, len, a.report_gbits);
        let mut progress = start;
        let timed = length.timed();
        loop {
            // The clock is read only in timed runs.
            let now = if timed { Instant::now() } else { start };
            let phase = clock.phase(now);
            if phase == Phase::End {
                break;
            }
            self.post_all(&p, &mut c, &mut batch)?;
            if c.done >= total && (!recv || c.received >= total) {
                break;
            }
            let done = c.done;
            let what = || {
                if timed {
                    format!("a completion after {done} (timed run)")
                } else {
                    format!("the completion of work request {} of {total}", done + 1)
                }
            };
            let n = self.completions(timed, &mut wc, &mut progress, what)?;
            let peak = matches!(length, Length::Iters(_)).then_some(&mut peak);
            let k = self.take(&p, &mut c, &wc[..n], total, peak)?;
            clock.count(phase, k);
        }
        Ok(clock.report(|| {
            let secs = start.elapsed().as_secs_f64();
            report::bw_report(len.into(), total, secs, peak.bytes_per_sec, a.report_gbits)
        }))
    }

    /// Posts on every lane, in batches of `-l`, while its iterations last
    /// and its requests in flight stay within the depth.
    fn post_all<'p>(
        &mut self,
        p: &'p Posting<'_>,
        c: &mut Counts,
        batch: &mut Vec<SendWr<'p>>,
    ) -> Result<()> {
        for (l, lane) in self.lanes.iter_mut().enumerate() {
            let (op, ud) = &p.dests[l];
            while c.posted[l] < p.iters
                && c.posted[l] - c.completed[l] + p.batch.min(p.iters - c.posted[l]) <= p.depth
            {
                batch.clear();
                for _ in 0..p.batch.min(p.iters - c.posted[l]) {
                    c.posted[l] += 1;
                    let signaled = c.posted[l] % p.cq_mod == 0 || c.posted[l] == p.iters;
                    let id = p.wr_id(l, c.posted[l]);
                    let wr = work_request(id, *op, &p.sges[l], p.inline, ud.as_ref());
                    batch.push(wr.signaled(signaled));
                }
                bench_post_send(&mut lane.qp, batch)?;
            }
        }
        Ok(())
    }

    /// Takes a poll's completions: a receive of the bidirectional send
    /// test (its wr_id is the lane; the lane's receives are kept posted
    /// while more may come), or a lane's signaled request, which covers
    /// the lane's requests up to its count. Completions of an earlier run
    /// or out of range are passed over. Returns the requests completed.
    fn take(
        &mut self,
        p: &Posting<'_>,
        c: &mut Counts,
        wcs: &[Wc],
        total: u64,
        mut peak: Option<&mut Peak>,
    ) -> Result<u64> {
        let nq = self.lanes.len();
        let mut completed = 0;
        for w in wcs {
            if w.opcode == WcOpcode::RECV {
                let l = (w.wr_id as usize).min(nq - 1);
                c.received += 1;
                self.recv_done(l);
                if c.received + u64::from(self.lanes[l].recvs) < total {
                    self.post_recv(l, 1)?;
                }
                continue;
            }
            let Some((l, upto)) = p.lane_and_count(w.wr_id) else {
                continue;
            };
            if l >= nq || upto <= c.completed[l] || upto > c.posted[l] {
                continue;
            }
            let k = upto - c.completed[l];
            c.completed[l] = upto;
            c.done += u64::from(k);
            completed += u64::from(k);
            if let Some(peak) = peak.as_deref_mut() {
                peak.add(u64::from(k), p.len);
            }
        }
        Ok(completed)
    }

    /// The bidirectional send test's run (`run_iter_bi`): sends and
    /// receives at once.
    pub fn send_bi(&mut self, a: &PerfArgs, len: u32, length: Length) -> Result<BwReport> {
        self.bw(a, len, length, true)
    }

    /// The receiving side of send-bw: counts each lane's messages, keeping
    /// receives posted (the first were posted before the address round).
    pub fn send_bw_server(&mut self, a: &PerfArgs, size: u32, length: Length) -> Result<BwReport> {
        let nq = self.lanes.len();
        let iters = match length {
            Length::Iters(n) => u64::from(n),
            _ => u64::MAX,
        };
        let total = iters.saturating_mul(nq as u64);
        let mut got = 0u64;
        let mut wc = [Wc::default(); 16];
        let mut start = None;
        // A timed run's clock starts with the run, as perftest's alarm.
        let mut progress = Instant::now();
        let mut clock = Clock::new(length, progress, size, a.report_gbits);
        while got < total {
            let what = || {
                format!(
                    "the client's message {} (does it use the same -n, -q?)",
                    got + 1
                )
            };
            let n = self.completions(length.timed(), &mut wc, &mut progress, what)?;
            let now = Instant::now();
            if n > 0 {
                start.get_or_insert(now);
            }
            let phase = clock.phase(now);
            if phase == Phase::End {
                break;
            }
            for w in wc[..n].iter().filter(|w| w.opcode == WcOpcode::RECV) {
                let l = (w.wr_id as usize).min(nq - 1);
                got += 1;
                clock.count(phase, 1);
                self.recv_done(l);
                // Keep the lane's receives posted while more may come.
                let depth = u64::from(self.recv_depth(l));
                if u64::from(self.lanes[l].recvs) < depth.min(total - got) {
                    self.post_recv(l, 1)?;
                }
            }
        }
        Ok(clock.report(|| {
            let secs = start.map_or(0.0, |s| s.elapsed().as_secs_f64()).max(1e-9);
            report::bw_report(size.into(), total, secs, 0.0, a.report_gbits)
        }))
    }
}

/// The figures of `count` messages of `size` bytes in `secs` of a timed
/// run, which has no peak (perftest's `noPeak` by duration).
fn timed_report(size: u32, count: u64, secs: f64, gbits: bool) -> BwReport {
    let mut r = report::bw_report(size.into(), count, secs, 0.0, gbits);
    r.bw_peak = 0.0;
    r
}

//! The connected QPs under test ([`Bench`]) and the primitives the
//! latency and bandwidth loops share: one work request, receives, and the
//! waits for completions.

use super::super::wait::{failed_completion, Timeout};
use super::plan::{RX_DEPTH, UD_QKEY};
use rverbs::{Ah, CompChannel, Cq, Mr, Qp, RecvWr, Remote, Result, SendOp, SendWr, Slice, Wc};
use std::time::Instant;

/// One QP of the test and what it targets at the peer. QP `i` sends from
/// (and reads into) region `2i` of the MR; the peer targets region
/// `2i + 1`.
pub struct Lane {
    pub qp: Qp,
    pub remote: Remote,
    /// UD: the peer's address and QPN.
    pub ud: Option<(Ah, u32)>,
    /// Receives posted and not yet completed.
    pub recvs: u32,
}

pub struct Bench {
    pub cq: Cq,
    pub lanes: Vec<Lane>,
    pub mr: Mr,
    pub channel: Option<CompChannel>,
    /// Bytes per region.
    pub region: usize,
    /// Largest payload sent inline.
    pub inline: u32,
    /// The payload of inline sends and writes (its content does not matter
    /// to the measurement).
    pub zeros: Vec<u8>,
    /// How long a wait may see no progress.
    pub timeout: Timeout,
    /// Counts bandwidth runs (the tag of their wr_ids).
    pub generation: u8,
}

/// The library's `Qp::post_send`, out of line: the library's data path is
/// inlinable, so that a program pays no call for it; the benchmark needs a
/// function boundary to count one call's instructions under callgrind
/// (`cargo xtask bench` reads this name). Nothing but the library runs
/// inside.
#[inline(never)]
pub fn bench_post_send(qp: &mut Qp, wrs: &[SendWr<'_>]) -> Result<()> {
    qp.post_send(wrs)
}

/// The library's `Cq::poll`, out of line for the same reason.
#[inline(never)]
fn bench_poll(cq: &mut Cq, out: &mut [Wc]) -> usize {
    cq.poll(out)
}

/// One work request: its payload copied into the WQE where `inline` is
/// given, else gathered from `sges`; to `ud`'s address and QPN on a UD QP.
pub fn work_request<'a>(
    wr_id: u64,
    op: SendOp,
    sges: &'a [Slice<'a>],
    inline: Option<&'a [u8]>,
    ud: Option<&'a (Ah, u32)>,
) -> SendWr<'a> {
    let wr = match inline {
        Some(payload) => SendWr::inline(wr_id, op, payload),
        None => SendWr::new(wr_id, op, sges),
    };
    match ud {
        Some((ah, qpn)) => wr.to(ah, *qpn, UD_QKEY),
        None => wr,
    }
}

impl Bench {
    /// Polls (or, with events, polls and waits for an event only when the
    /// CQ is empty) until at least one completion, at most the timeout;
    /// fails on an error status. `what` names what is awaited, for the
    /// timeout's error.
    ///
    /// With events, completions already in the CQ raise no new event: so
    /// the CQ is polled before waiting, and re-armed before the poll that
    /// follows an event (a completion after the arm raises the next one).
    pub fn next_completions(&mut self, wc: &mut [Wc], what: impl Fn() -> String) -> Result<usize> {
        loop {
            let n = match &self.channel {
                Some(ch) => match bench_poll(&mut self.cq, wc) {
                    0 => {
                        self.timeout.event(ch, &what)?;
                        self.cq.req_notify(false)?;
                        bench_poll(&mut self.cq, wc)
                    }
                    n => n,
                },
                None => {
                    let cq = &mut self.cq;
                    self.timeout.spin(&what, || {
                        let n = bench_poll(cq, wc);
                        Ok((n > 0).then_some(n))
                    })?
                }
            };
            check_wcs(&wc[..n])?;
            if n > 0 {
                return Ok(n);
            }
        }
    }

    /// One poll, for the timed runs, which look at the clock between polls
    /// (perftest's alarm); fails on an error status, or when nothing has
    /// completed for the timeout since `progress`.
    pub fn poll_once(
        &mut self,
        wc: &mut [Wc],
        progress: &mut Instant,
        what: impl Fn() -> String,
    ) -> Result<usize> {
        let n = bench_poll(&mut self.cq, wc);
        check_wcs(&wc[..n])?;
        if n > 0 {
            *progress = Instant::now();
        } else if progress.elapsed() > self.timeout.duration() {
            return Err(self.timeout.expired(&what()));
        }
        Ok(n)
    }

    /// [`Bench::poll_once`] in a timed run, [`Bench::next_completions`]
    /// otherwise.
    pub fn completions(
        &mut self,
        timed: bool,
        wc: &mut [Wc],
        progress: &mut Instant,
        what: impl Fn() -> String,
    ) -> Result<usize> {
        if timed {
            self.poll_once(wc, progress, what)
        } else {
            self.next_completions(wc, what)
        }
    }

    /// Posts `n` receives on lane `l`, each of the lane's whole target
    /// region (so that receives left over from a smaller size of `-a` fit
    /// the next size too); the wr_id is the lane.
    pub fn post_recv(&mut self, l: usize, n: u32) -> Result<()> {
        let s = [self
            .mr
            .slice(self.region * (2 * l + 1), self.region as u32)?];
        let lane = &mut self.lanes[l];
        for _ in 0..n {
            lane.qp.post_recv(&[RecvWr {
                wr_id: l as u64,
                sges: &s,
            }])?;
            lane.recvs += 1;
        }
        Ok(())
    }

    /// The receives lane `l` keeps posted: the receive depth, or what its
    /// QP was granted if less.
    pub fn recv_depth(&self, l: usize) -> u32 {
        RX_DEPTH.min(self.lanes[l].qp.caps().max_recv_wr)
    }

    /// Tops every lane's receives up to the receive depth.
    pub fn fill_recvs(&mut self) -> Result<()> {
        for l in 0..self.lanes.len() {
            self.post_recv(l, self.recv_depth(l).saturating_sub(self.lanes[l].recvs))?;
        }
        Ok(())
    }

    /// Tops lane 0's receives up to 16 (send-lat: the peer's first
    /// messages may come before this side reposts).
    pub fn top_up_recvs(&mut self) -> Result<()> {
        self.post_recv(0, 16u32.saturating_sub(self.lanes[0].recvs))
    }

    /// A receive of lane `l` completed: one fewer posted.
    pub fn recv_done(&mut self, l: usize) {
        self.lanes[l].recvs = self.lanes[l].recvs.saturating_sub(1);
    }

    /// One signaled-or-not request on lane 0 (the latency tests').
    pub fn send(&mut self, op: SendOp, len: u32, signaled: bool) -> Result<()> {
        let s = [self.mr.slice(0, len)?];
        // An inline payload is copied at post time.
        let inline = (len <= self.inline && !matches!(op, SendOp::Read(_)))
            .then(|| &self.zeros[..len as usize]);
        let lane = &mut self.lanes[0];
        let wr = work_request(0, op, &s, inline, lane.ud.as_ref());
        bench_post_send(&mut lane.qp, &[wr.signaled(signaled)])
    }
}

/// Fails on the first completion with an error status.
fn check_wcs(wcs: &[Wc]) -> Result<()> {
    match wcs.iter().find(|w| !w.is_ok()) {
        Some(bad) => Err(failed_completion(
            format!(
                "completion with status {} (wr_id {})",
                bad.status, bad.wr_id
            ),
            bad,
        )),
        None => Ok(()),
    }
}

//! The latency loops, one sample per iteration (in microseconds), as
//! perftest's `run_iter_lat_send`, `run_iter_lat_write` and
//! `run_iter_lat`.

use super::args::Test;
use super::bench::Bench;
use super::script::op_for;
use rverbs::{Result, SendOp, Wc, WcOpcode};
use std::time::Instant;

/// Latency samples reserved up front (more grow the vector as they come).
const SAMPLES_RESERVED: u32 = 1 << 20;

fn samples(iters: u32) -> Vec<f64> {
    Vec::with_capacity(iters.min(SAMPLES_RESERVED) as usize)
}

impl Bench {
    /// perftest's `run_iter_lat_send`: the client sends first, the server
    /// answers each message; one sample per round trip, halved. The
    /// receives for the first messages are posted before (and the peer is
    /// told so by an address round).
    pub fn send_lat(&mut self, size: u32, iters: u32, client: bool) -> Result<Vec<f64>> {
        let mut samples = samples(iters);
        let mut wc = [Wc::default(); 4];
        let mut last = Instant::now();
        // Receives that arrived but that the loop has not consumed yet.
        let mut arrived = 0u32;
        for _ in 0..iters {
            if client {
                self.send(SendOp::Send, size, true)?;
            }
            while arrived == 0 {
                let n = self.next_completions(&mut wc, || {
                    format!(
                        "the peer's message {} of {iters} (does it use the same -n?)",
                        samples.len() + 1,
                    )
                })?;
                for w in &wc[..n] {
                    if w.opcode == WcOpcode::RECV {
                        arrived += 1;
                        self.recv_done(0);
                        self.post_recv(0, 1)?;
                    }
                }
            }
            arrived -= 1;
            if !client {
                self.send(SendOp::Send, size, true)?;
            }
            let now = Instant::now();
            samples.push(now.duration_since(last).as_secs_f64() * 1e6 / 2.0);
            last = now;
        }
        Ok(samples)
    }

    /// perftest's `run_iter_lat_write`: each side writes a running count
    /// (mod 256) into the last byte of the message it writes to the peer,
    /// and spins on the last byte of its own region for the peer's count.
    /// The server writes first; the client answers each write.
    pub fn write_lat(&mut self, size: u32, iters: u32, client: bool) -> Result<Vec<f64>> {
        let last = self.region + size as usize - 1;
        let remote = self.lanes[0].remote;
        let mut samples = samples(iters);
        let mut wc = [Wc::default(); 4];
        let mut t = Instant::now();
        let what = |i: u32| {
            move || {
                format!("the peer's RDMA WRITE {i} of {iters} (does it use the same -n and -s?)")
            }
        };
        let mut rcnt = 0u32;
        for i in 1..=iters {
            if client || i > 1 {
                rcnt += 1;
                self.await_byte(last, rcnt as u8, what(rcnt))?;
            }
            self.mr.write(size as usize - 1, &[i as u8])?;
            self.send(SendOp::Write(remote), size, true)?;
            self.next_completions(&mut wc, || format!("the completion of our RDMA WRITE {i}"))?;
            let now = Instant::now();
            samples.push(now.duration_since(t).as_secs_f64() * 1e6 / 2.0);
            t = now;
        }
        while rcnt < iters {
            rcnt += 1;
            self.await_byte(last, rcnt as u8, what(rcnt))?;
        }
        Ok(samples)
    }

    /// Spins until the byte at `offset` of our MR is `value` (the peer's
    /// RDMA WRITE landed), at most the timeout.
    fn await_byte(&self, offset: usize, value: u8, what: impl FnOnce() -> String) -> Result<()> {
        let mr = &self.mr;
        self.timeout.spin(what, || {
            Ok((mr.read_volatile_u8(offset)? == value).then_some(()))
        })
    }

    /// perftest's `run_iter_lat` for READs and atomics: one at a time, the
    /// full round trip.
    pub fn one_sided_lat(&mut self, test: Test, size: u32, iters: u32) -> Result<Vec<f64>> {
        let op = op_for(test, self.lanes[0].remote);
        let mut samples = samples(iters);
        let mut wc = [Wc::default(); 4];
        for i in 1..=iters {
            let t = Instant::now();
            self.send(op, size, true)?;
            self.next_completions(&mut wc, || format!("the completion of operation {i}"))?;
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(samples)
    }
}

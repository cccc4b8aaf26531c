//! `rverbs perf`: perftest's latency and bandwidth tests over RC, UC and
//! UD, speaking perftest's own out-of-band exchange
//! ([`rverbs_tool::wire::perf`]), so that either side can be perftest's
//! `ib_*` tool of the same test (or `rverbs perf` again). Flags, defaults
//! and the report are perftest's.
//!
//! A run is a pipeline, one file a step:
//! 1. [`args`]: the flags, checked where no device is needed;
//! 2. [`resources::Device`]: the device and port, checked against the
//!    flags (with `-R`, after the rdma_cm connection of [`cm`]);
//! 3. [`exchange`]: the connection to the peer and the messages before
//!    the addresses (version, cycle buffer, cache line, MTU);
//! 4. [`plan`]: what the flags, the device and the peer's numbers make of
//!    the run (sizes, MTU, memory, the steps of the exchange), pure and
//!    unit-tested;
//! 5. [`resources::Resources`]: memory, CQ, completion channel;
//! 6. [`connect`]: the QPs, the address rounds around their connection;
//! 7. the plan's steps ([`Runner`]): the loops of [`lat`] and [`bw`] on
//!    the connected QPs ([`bench`]) between the exchange's rounds, and
//!    the lines of [`report`].

mod args;
mod bench;
mod bw;
mod cm;
mod connect;
mod exchange;
mod lat;
mod plan;
mod report;
mod resources;
mod script;

pub use args::PerfArgs;

use args::check_args;
use bench::Bench;
use exchange::{io, Exchange};
use plan::Plan;
use resources::{Device, Resources};
use rverbs::Result;
use rverbs_tool::wire::perf::{BwReport, Peer};
use script::{Figures, Measure, Step};
use std::process::ExitCode;

pub fn perf(a: &PerfArgs) -> Result<ExitCode> {
    check_args(a)?;
    let (dev, comm) = Device::open(a)?;
    let mut ex = Exchange::open(a, comm, dev.gid_idx)?;
    let agreed = ex.preamble(plan::offered_mtu(a.mtu, dev.port.active_mtu))?;
    let plan = Plan::new(a, agreed.mtu, agreed.cycle);
    let res = Resources::new(a, &dev, &plan)?;
    let gid = dev.gid()?;
    let conn = connect::connect(a, &plan, &dev, &res, gid, &mut ex)?;
    let inline = a.inline.min(conn.lanes[0].qp.caps().max_inline_data);
    let mut bench = Bench {
        cq: res.cq,
        lanes: conn.lanes,
        mr: res.mr,
        channel: res.channel,
        region: plan.region,
        inline,
        zeros: vec![0; inline as usize],
        timeout: a.timeout,
        generation: 0,
    };
    if bench.channel.is_some() {
        bench.cq.req_notify(false)?;
    }

    let device = dev.ctx.device().name().to_string();
    let out_reads = plan::out_reads(&dev.attr);
    let info = report::Info::new(
        a,
        &plan,
        &device,
        dev.ethernet,
        dev.gid_idx,
        inline,
        out_reads,
    );
    let (mine, peers) = (&conn.mine, &conn.peers);
    let head = report::head(&info, mine, peers, plan.spec.addr_fields, report::header(a));
    println!("{head}");
    let mut run = Runner {
        a,
        plan: &plan,
        bench: &mut bench,
        ex: &mut ex,
        me: &mine[0],
        last: Outcome::Bw(BwReport::default()),
        json: String::new(),
    };
    run.all()?;
    let json = run.json;
    println!("{}", report::LINE);
    if a.out_json {
        std::fs::write(&a.out_json_file, report::json(&info, &json))
            .map_err(|e| io(&format!("writing {}", a.out_json_file), e))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What the last measurement or figures were, for the result line.
enum Outcome {
    /// A latency run's size and samples.
    Lat(u32, Vec<f64>),
    Bw(BwReport),
}

/// Carries out the plan's steps on the connected QPs.
struct Runner<'r> {
    a: &'r PerfArgs,
    plan: &'r Plan,
    bench: &'r mut Bench,
    ex: &'r mut Exchange,
    /// QP 0's address message, which the rounds after the connection send.
    me: &'r Peer,
    last: Outcome,
    /// The results blocks of `--out_json`.
    json: String,
}

impl Runner<'_> {
    /// The steps of each size, then the closing ones.
    fn all(&mut self) -> Result<()> {
        let script = &self.plan.script;
        for &size in &self.plan.sizes {
            for &step in &script.each_size {
                self.step(step, size)?;
            }
        }
        for &step in &script.tail {
            // The closing steps measure nothing: no size.
            self.step(step, 0)?;
        }
        Ok(())
    }

    fn step(&mut self, step: Step, size: u32) -> Result<()> {
        match step {
            Step::Round => {
                self.ex.round(self.me)?;
            }
            Step::AwaitRound => {
                self.ex.await_round(self.me)?;
            }
            Step::FillRecvs => self.bench.fill_recvs()?,
            Step::TopUpRecvs => self.bench.top_up_recvs()?,
            Step::Measure(m) => self.last = self.measure(m, size)?,
            Step::Figures(f) => self.last = Outcome::Bw(self.figures(f)?),
            Step::Print => {
                let (line, json) = match &mut self.last {
                    Outcome::Lat(size, samples) => report::lat_result(*size, samples),
                    Outcome::Bw(r) => report::bw_result(r),
                };
                println!("{line}");
                self.json.push_str(&json);
            }
            Step::Done => self.ex.done()?,
        }
        Ok(())
    }

    fn measure(&mut self, m: Measure, size: u32) -> Result<Outcome> {
        let (a, b) = (self.a, &mut *self.bench);
        let (iters, length, client) = (a.iters(), self.plan.length, self.plan.client);
        Ok(match m {
            Measure::SendLat => Outcome::Lat(size, b.send_lat(size, iters, client)?),
            Measure::WriteLat => Outcome::Lat(size, b.write_lat(size, iters, client)?),
            Measure::OneSidedLat => Outcome::Lat(size, b.one_sided_lat(a.test, size, iters)?),
            Measure::Bw => Outcome::Bw(b.bw(a, size, length, false)?),
            Measure::SendBi => Outcome::Bw(b.send_bi(a, size, length)?),
            Measure::SendBwServer => Outcome::Bw(b.send_bw_server(a, size, length)?),
        })
    }

    /// The five figures each way; what the result line shows after.
    fn figures(&mut self, f: Figures) -> Result<BwReport> {
        let mine = match self.last {
            Outcome::Bw(r) => r,
            Outcome::Lat(..) => BwReport::default(),
        };
        Ok(match f {
            Figures::Sum => mine.plus(&self.ex.figures(&mine)?),
            Figures::Theirs => self.ex.figures(&BwReport::default())?,
            Figures::Give => {
                self.ex.figures(&mine)?;
                mine
            }
        })
    }
}

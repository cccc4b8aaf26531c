//! What each test does differently (the test table) and the steps of the
//! exchange in the order they go on the wire, for each test in each role:
//! the address rounds around the QPs' connection, then per size and at the
//! end. Pure, like the rest of the plan: the tests pin perftest's sequence.

use super::args::{PerfArgs, Test};
use rverbs::{Remote, SendOp};

/// How a test's exchange goes: perftest's tools differ in the number and
/// place of the address rounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    /// write-bw, read-bw, atomic-bw: the server only waits.
    RdmaBw,
    SendBw,
    SendLat,
    /// write-lat (both run), read-lat and atomic-lat (the server only
    /// waits).
    RdmaLat,
}

/// What perftest's tool of one test does differently from the others.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Spec {
    /// The report's title ("RDMA_Write BW"), before `-b` and `-l` add to
    /// it ([`title`]).
    pub title: &'static str,
    pub shape: Shape,
    /// RDMA READs or atomics: the QPs need responder resources, and the
    /// report shows the outstanding reads in place of the inline size.
    pub reads: bool,
    /// What the address lines show besides the QP
    /// ([`super::report::address`]): 0 nothing, 1 the rkey and address,
    /// 2 also the outstanding reads.
    pub addr_fields: u8,
}

/// The test table.
pub fn spec(t: Test) -> Spec {
    use Shape::*;
    let (title, shape, reads, addr_fields) = match t {
        Test::SendLat => ("Send Latency", SendLat, false, 0),
        Test::WriteLat => ("RDMA_Write Latency", RdmaLat, false, 1),
        Test::ReadLat => ("RDMA_Read Latency", RdmaLat, true, 2),
        Test::AtomicLat => ("Atomic FETCH_AND_ADD Latency", RdmaLat, true, 0),
        Test::SendBw => ("Send BW", SendBw, false, 0),
        Test::WriteBw => ("RDMA_Write BW", RdmaBw, false, 1),
        Test::ReadBw => ("RDMA_Read BW", RdmaBw, true, 2),
        Test::AtomicBw => ("Atomic FETCH_AND_ADD BW", RdmaBw, true, 0),
    };
    Spec {
        title,
        shape,
        reads,
        addr_fields,
    }
}

/// The report's title: the test's, with perftest's words for `-b` and a
/// bandwidth test's `-l`.
pub fn title(a: &PerfArgs) -> String {
    let title = spec(a.test).title;
    match (a.duplex, a.batch > 1 && !a.test.is_lat()) {
        (true, true) => title.replace(" BW", " Bidirectional Post List BW"),
        (true, false) => title.replace(" BW", " Bidirectional BW"),
        (false, true) => title.replace(" BW", " Post List BW"),
        (false, false) => title.to_string(),
    }
}

/// The operation of `test` on `remote`.
pub fn op_for(test: Test, remote: Remote) -> SendOp {
    match test {
        Test::ReadLat | Test::ReadBw => SendOp::Read(remote),
        Test::AtomicLat | Test::AtomicBw => SendOp::FetchAdd { remote, add: 1 },
        Test::WriteBw | Test::WriteLat => SendOp::Write(remote),
        Test::SendBw | Test::SendLat => SendOp::Send,
    }
}

/// Which of our address messages a round sends (the peer's answers to all
/// but the rounds before the connection are not used).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Addr {
    /// One round of QP 0's address.
    First,
    /// One round per QP, each QP's address (perftest prints them as they
    /// come).
    EachQp,
}

/// The five figures of a bandwidth run going each way (`xchg_bw_reports`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Figures {
    /// Ours to the peer, the peer's added to ours (`-b`: each side prints
    /// the sum of both directions).
    Sum,
    /// Zeros to the client, the client's taken (the server of a one-sided
    /// test prints the client's).
    Theirs,
    /// Ours to the server (the client of a one-sided test).
    Give,
}

/// The measurement of one size: which loop runs it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Measure {
    /// `run_iter_lat_send`.
    SendLat,
    /// `run_iter_lat_write`.
    WriteLat,
    /// `run_iter_lat`: READs or atomics, one at a time.
    OneSidedLat,
    /// `run_iter_bw`: posts on every QP.
    Bw,
    /// `run_iter_bi` of send-bw: posts and keeps receives posted.
    SendBi,
    /// `run_iter_bw_server`: the receiving side of send-bw.
    SendBwServer,
}

/// One step of the run, in the order it goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step {
    /// One round of QP 0's address, bounded by the timeout.
    Round,
    /// One round of QP 0's address while the peer runs: no time limit.
    AwaitRound,
    /// Top every QP's receives up to the receive depth.
    FillRecvs,
    /// Top QP 0's receives up to 16 (send-lat).
    TopUpRecvs,
    /// The measurement of one size.
    Measure(Measure),
    Figures(Figures),
    /// The result line (and `--out_json`'s block) of the last measurement
    /// or figures.
    Print,
    /// `"done"` each way (TCP only: perftest's rdma_cm exchange just ends).
    Done,
}

/// The exchange from the first address round on: the rounds before the
/// QPs connect and after, then the steps of each size and the closing
/// ones.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Script {
    pub before_connect: &'static [Addr],
    pub after_connect: &'static [Addr],
    pub each_size: Vec<Step>,
    pub tail: Vec<Step>,
}

/// perftest's sequence for `a`'s test on the client or the server (with
/// `-a`, `-b`, `-D` changing the steps of each size).
pub fn script(a: &PerfArgs, client: bool) -> Script {
    use Addr::*;
    let shape = spec(a.test).shape;
    Script {
        before_connect: if shape == Shape::RdmaLat {
            &[First, EachQp]
        } else {
            &[EachQp]
        },
        // Send tests take the single round first.
        after_connect: if shape == Shape::SendBw {
            &[First, EachQp]
        } else {
            &[EachQp, First]
        },
        each_size: each_size(a, client, shape),
        tail: tail(a, client, shape),
    }
}

fn each_size(a: &PerfArgs, client: bool, shape: Shape) -> Vec<Step> {
    use Step::{FillRecvs, Print, Round, TopUpRecvs};
    let round_if_all = a.all.then_some(Round);
    match shape {
        // The server of a one-sided test only waits.
        Shape::RdmaBw if !client && !a.duplex => vec![],
        Shape::RdmaLat if !client && a.test != Test::WriteLat => vec![],
        Shape::RdmaBw if a.duplex => [Some(Round), Some(Step::Measure(Measure::Bw)), round_if_all]
            .into_iter()
            .flatten()
            .chain([Step::Figures(Figures::Sum), Print])
            .collect(),
        Shape::RdmaBw => vec![Step::Measure(Measure::Bw), Print],
        Shape::SendBw => {
            let measure = match (a.duplex, client) {
                (true, _) => Measure::SendBi,
                (false, true) => Measure::Bw,
                (false, false) => Measure::SendBwServer,
            };
            [
                (!client || a.duplex).then_some(FillRecvs),
                Some(Round),
                Some(Step::Measure(measure)),
                // By duration each side prints its own (perftest exchanges
                // no figures then).
                (a.duplex && !a.timed()).then_some(Step::Figures(Figures::Sum)),
                Some(Print),
                round_if_all,
            ]
            .into_iter()
            .flatten()
            .collect()
        }
        Shape::SendLat => vec![TopUpRecvs, Round, Step::Measure(Measure::SendLat), Print],
        Shape::RdmaLat if a.test == Test::WriteLat => vec![Step::Measure(Measure::WriteLat), Print],
        Shape::RdmaLat => vec![Step::Measure(Measure::OneSidedLat), Print],
    }
}

fn tail(a: &PerfArgs, client: bool, shape: Shape) -> Vec<Step> {
    use Step::{AwaitRound, Done, Print, Round};
    match shape {
        Shape::RdmaBw if !client && !a.duplex => {
            vec![
                AwaitRound,
                Step::Figures(Figures::Theirs),
                Print,
                Round,
                Done,
            ]
        }
        Shape::RdmaBw if !a.duplex => vec![Round, Step::Figures(Figures::Give), Round, Done],
        // ib_write_lat ends without a closing round: each side's last wait
        // was for the other's last write.
        Shape::RdmaLat if a.test == Test::WriteLat => vec![],
        Shape::RdmaLat if !client => vec![AwaitRound, Done],
        _ => vec![Round, Done],
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::tests::args;
    use super::*;

    #[test]
    fn the_test_table() {
        let row = |t: &str| {
            let s = spec(args(t).test);
            (s.title, s.shape, s.reads, s.addr_fields)
        };
        assert_eq!(row("send-lat"), ("Send Latency", Shape::SendLat, false, 0));
        assert_eq!(
            row("write-lat"),
            ("RDMA_Write Latency", Shape::RdmaLat, false, 1)
        );
        assert_eq!(
            row("read-lat"),
            ("RDMA_Read Latency", Shape::RdmaLat, true, 2)
        );
        assert_eq!(
            row("atomic-lat"),
            ("Atomic FETCH_AND_ADD Latency", Shape::RdmaLat, true, 0)
        );
        assert_eq!(row("send-bw"), ("Send BW", Shape::SendBw, false, 0));
        assert_eq!(row("write-bw"), ("RDMA_Write BW", Shape::RdmaBw, false, 1));
        assert_eq!(row("read-bw"), ("RDMA_Read BW", Shape::RdmaBw, true, 2));
        assert_eq!(
            row("atomic-bw"),
            ("Atomic FETCH_AND_ADD BW", Shape::RdmaBw, true, 0)
        );
        let r = Remote { addr: 8, rkey: 9 };
        assert!(matches!(op_for(Test::ReadBw, r), SendOp::Read(_)));
        assert!(matches!(op_for(Test::WriteLat, r), SendOp::Write(_)));
        assert!(matches!(
            op_for(Test::AtomicLat, r),
            SendOp::FetchAdd { add: 1, .. }
        ));
        assert!(matches!(op_for(Test::SendBw, r), SendOp::Send));
    }

    #[test]
    fn titles_say_bidirectional_and_post_list_as_perftest() {
        assert_eq!(title(&args("write-bw")), "RDMA_Write BW");
        assert_eq!(title(&args("write-bw -b")), "RDMA_Write Bidirectional BW");
        assert_eq!(title(&args("send-bw -l 4")), "Send Post List BW");
        assert_eq!(
            title(&args("read-bw -b -l 2")),
            "RDMA_Read Bidirectional Post List BW"
        );
        // -l on a latency test changes nothing.
        assert_eq!(title(&args("send-lat -l 1")), "Send Latency");
    }

    /// The address rounds around the connection: one message per QP, and
    /// one of QP 0's before them for the RDMA latency tests; after the
    /// connection, send-bw takes the single round first.
    #[test]
    fn address_rounds_around_the_connection_by_shape() {
        use Addr::*;
        for (line, before, after) in [
            ("write-bw", &[EachQp][..], &[EachQp, First][..]),
            ("read-bw -q 3", &[EachQp], &[EachQp, First]),
            ("atomic-bw", &[EachQp], &[EachQp, First]),
            ("send-bw", &[EachQp], &[First, EachQp]),
            ("send-lat", &[EachQp], &[EachQp, First]),
            ("write-lat", &[First, EachQp], &[EachQp, First]),
            ("read-lat", &[First, EachQp], &[EachQp, First]),
            ("atomic-lat", &[First, EachQp], &[EachQp, First]),
        ] {
            for client in [false, true] {
                let s = script(&args(line), client);
                assert_eq!(
                    (s.before_connect, s.after_connect),
                    (before, after),
                    "{line}"
                );
            }
        }
    }

    use Step::{AwaitRound, Done, FillRecvs, Print, Round, TopUpRecvs};
    const BW: Step = Step::Measure(Measure::Bw);
    const SUM: Step = Step::Figures(Figures::Sum);

    /// Each case: the flags, whether the client, the steps of each size and
    /// the closing steps.
    fn check(cases: &[(&str, bool, &[Step], &[Step])]) {
        for &(line, client, each, tail) in cases {
            let s = script(&args(line), client);
            assert_eq!(
                (&s.each_size[..], &s.tail[..]),
                (each, tail),
                "{line} (client {client})"
            );
        }
    }

    /// One-sided bandwidth: the server waits for the client's end, then
    /// prints the client's figures; with -b both run and sum.
    #[test]
    fn rdma_bw_runs_go_as_perftests() {
        let (theirs, give) = (Step::Figures(Figures::Theirs), Step::Figures(Figures::Give));
        check(&[
            (
                "write-bw",
                false,
                &[],
                &[AwaitRound, theirs, Print, Round, Done],
            ),
            (
                "read-bw -a",
                true,
                &[BW, Print],
                &[Round, give, Round, Done],
            ),
            (
                "atomic-bw -b",
                false,
                &[Round, BW, SUM, Print],
                &[Round, Done],
            ),
            (
                "write-bw -b -a",
                true,
                &[Round, BW, Round, SUM, Print],
                &[Round, Done],
            ),
            (
                "write-bw -D 4",
                false,
                &[],
                &[AwaitRound, theirs, Print, Round, Done],
            ),
        ]);
    }

    /// send-bw: the receiver posts its receives before each size's round;
    /// -a adds a round after each size; by duration each side prints its
    /// own figures.
    #[test]
    fn send_bw_runs_go_as_perftests() {
        let server = Step::Measure(Measure::SendBwServer);
        let bi = Step::Measure(Measure::SendBi);
        check(&[
            ("send-bw", true, &[Round, BW, Print], &[Round, Done]),
            (
                "send-bw",
                false,
                &[FillRecvs, Round, server, Print],
                &[Round, Done],
            ),
            (
                "send-bw -a",
                false,
                &[FillRecvs, Round, server, Print, Round],
                &[Round, Done],
            ),
            (
                "send-bw -b",
                true,
                &[FillRecvs, Round, bi, SUM, Print],
                &[Round, Done],
            ),
            (
                "send-bw -b -D 4",
                false,
                &[FillRecvs, Round, bi, Print],
                &[Round, Done],
            ),
        ]);
    }

    /// Latency: send-lat posts and rounds before each size; ib_write_lat
    /// has both sides run and just ends; read and atomic servers wait.
    #[test]
    fn latency_runs_go_as_perftests() {
        let write = Step::Measure(Measure::WriteLat);
        let one_sided = Step::Measure(Measure::OneSidedLat);
        let send = Step::Measure(Measure::SendLat);
        check(&[
            (
                "send-lat -a",
                false,
                &[TopUpRecvs, Round, send, Print],
                &[Round, Done],
            ),
            (
                "send-lat",
                true,
                &[TopUpRecvs, Round, send, Print],
                &[Round, Done],
            ),
            ("write-lat", false, &[write, Print], &[]),
            ("write-lat -a", true, &[write, Print], &[]),
            ("read-lat", false, &[], &[AwaitRound, Done]),
            ("atomic-lat", false, &[], &[AwaitRound, Done]),
            ("atomic-lat", true, &[one_sided, Print], &[Round, Done]),
            ("read-lat -a", true, &[one_sided, Print], &[Round, Done]),
        ]);
    }
}

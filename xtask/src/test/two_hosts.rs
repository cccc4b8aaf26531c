//! Two VMs on one socket netdev (host 1 at 10.77.0.1, host 2 at
//! 10.77.0.2), every check in one boot: host 2 serves each check in turn,
//! host 1 is its client. rdma-core's tools against each other (the bed
//! itself), then ours against theirs in both roles: RC and UD pingpong,
//! rping, cmatose, perf write-bw, and our own rdma_cm pair.

use super::script::{client_says, judge, scripts, Judge, Pair};
use super::Tally;
use crate::vm;
use std::time::Duration;

/// How many of a section's lines hold `text`.
fn count(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|l| l.contains(text)).count()
}

/// Both sides of `cmatose`/`ucmatose` finished their transfers.
fn cmatose_done() -> Judge {
    Box::new(|c, s| {
        [c, s].iter().all(|l| {
            l.iter().any(|l| l.trim_end() == "data transfers complete")
                && l.iter().any(|l| l.trim_end() == "return status 0")
        })
    })
}

/// The commands of one tool, ours and rdma-core's, and their names in
/// the checks' descriptions.
struct Tool<'a> {
    ours: (&'a str, &'a str),
    theirs: (&'a str, &'a str),
}

/// Adds `tool`'s check in both roles, ours as the client of rdma-core's
/// server (on `port`) and the other way round (on `port + 1`): `server`
/// and `client` make a command line from a tool's command and the port.
fn both_roles(
    pairs: &mut Vec<Pair>,
    tool: Tool<'_>,
    port: u16,
    server: impl Fn(&str, u16) -> String,
    client: impl Fn(&str, u16) -> String,
    judge: impl Fn() -> Judge,
) {
    let (ours, theirs) = (tool.ours, tool.theirs);
    for (s, c, port) in [(theirs, ours, port), (ours, theirs, port + 1)] {
        pairs.push(Pair {
            what: format!("two hosts: {} client -> {} server", c.1, s.1),
            server: server(s.0, port),
            client: client(c.0, port),
            judge: judge(),
        });
    }
}

/// The pingpong checks, RC and UD, ours against rdma-core's in both roles
/// (and rdma-core's against itself first): what every kernel runs.
fn pingpong(bin: &str) -> Vec<Pair> {
    let server = |cmd: &str, port| format!("{cmd} -p {port}");
    let client = |cmd: &str, port| format!("{cmd} -p {port} $RVERBS_PEER_ADDR");
    let theirs = "ibv_rc_pingpong -d rxe0 -g 1 -n 20";
    let mut pairs = vec![Pair {
        what: "two hosts: ibv_rc_pingpong 10.77.0.1 <-> 10.77.0.2".into(),
        server: server(theirs, 18600),
        client: client(theirs, 18600),
        judge: client_says("20 iters in"),
    }];
    let ours = format!("{bin} pingpong -d rxe0 -g 1 -n 20");
    let tool = Tool {
        ours: (&ours, "rverbs pingpong"),
        theirs: (theirs, "ibv_rc_pingpong"),
    };
    both_roles(&mut pairs, tool, 18602, server, client, || {
        client_says("20 iters in")
    });
    let ours = format!("{bin} pingpong --ud -c -d rxe0 -g 1 -n 20");
    let tool = Tool {
        ours: (&ours, "rverbs pingpong --ud"),
        theirs: ("ibv_ud_pingpong -c -d rxe0 -g 1 -n 20", "ibv_ud_pingpong"),
    };
    both_roles(&mut pairs, tool, 18604, server, client, || {
        client_says("20 iters in")
    });
    pairs
}

/// rdma_cm across the link: rping and cmatose in both roles against
/// rdma-core's, our cm-server/cm-client pair; and perf write-bw against
/// perftest in both roles (-F: perftest's clock check is too strict under
/// an emulated CPU).
fn cm_and_perf(bin: &str) -> Vec<Pair> {
    let mut pairs = Vec::new();
    let ours = format!("{bin} rping");
    both_roles(
        &mut pairs,
        Tool {
            ours: (&ours, "rverbs rping"),
            theirs: ("rping", "rdma-core rping"),
        },
        7500,
        |cmd, port| format!("{cmd} -s -p {port} -v"),
        |cmd, port| format!("{cmd} -c -a $RVERBS_PEER_ADDR -p {port} -C 20 -V -v"),
        || {
            Box::new(|c, s| {
                count(c, "ping data: rdma-ping-") >= 20
                    && count(s, "server ping data: rdma-ping-") == 20
            })
        },
    );
    // cmatose, 10 messages each way. One connection: with more, a client
    // started between the server's bind and listen could have some
    // rejected and others accepted, and its retry would find the server's
    // count spent.
    let ours = format!("{bin} cmatose");
    both_roles(
        &mut pairs,
        Tool {
            ours: (&ours, "rverbs cmatose"),
            theirs: ("ucmatose", "ucmatose"),
        },
        7502,
        |cmd, port| format!("{cmd} -p {port} -c 1 -C 10"),
        |cmd, port| format!("{cmd} -s $RVERBS_PEER_ADDR -p {port} -c 1 -C 10"),
        cmatose_done,
    );
    // cm-server runs until its peer disconnects; it is stopped once the
    // client's message has come and the peer has gone.
    pairs.push(Pair {
        what: "two hosts: rverbs cm-client -> rverbs cm-server".into(),
        server: format!(
            "sh -c \"{bin} cm-server -p 7504 > /tmp/s.out 2>&1 & P=\\$!; \
             for i in \\$(seq 300); do grep -q 'peer disconnected.' /tmp/s.out && break; sleep 0.2; done; \
             kill \\$P; cat /tmp/s.out; grep -q 'received message: message from active/client side' /tmp/s.out\""
        ),
        client: format!("{bin} cm-client $RVERBS_PEER_ADDR 7504"),
        judge: client_says("received message: message from passive/server side"),
    });
    let ours = format!("{bin} perf write-bw -d rxe0 -x 1 -F -n 200");
    both_roles(
        &mut pairs,
        Tool {
            ours: (&ours, "rverbs perf write-bw"),
            theirs: ("ib_write_bw -d rxe0 -x 1 -F -n 200", "ib_write_bw"),
        },
        18610,
        |cmd, port| format!("{cmd} -p {port}"),
        |cmd, port| format!("{cmd} -p {port} $RVERBS_PEER_ADDR"),
        || client_says(" 65536      200 "),
    );
    pairs
}

/// Last in the boot: the server host's script ends as soon as the client
/// has reached it once (one TCP connection to busybox's nc), and 3 s
/// later the client's host still reaches it. A host whose command is done
/// stays on the link until every host is (once a perftest server exited,
/// its host powered off, and the reply TCP had to retransmit never came).
fn linger() -> Pair {
    Pair {
        what: "two hosts: a host whose command ended stays on the link until every host is done"
            .into(),
        server: format!("busybox nc -l -p {LINGER_PORT} < /dev/null"),
        client: format!(
            "busybox nc $RVERBS_PEER_ADDR {LINGER_PORT} < /dev/null && sleep 3 && busybox ping -c 1 -W 5 $RVERBS_PEER_ADDR"
        ),
        judge: client_says("1 packets received"),
    }
}

/// The linger check's TCP port (no other check's).
const LINGER_PORT: u16 = 7998;

/// Runs the two-host checks in one boot on `base`'s kernel: the pingpong
/// ones, and with `all` the rdma_cm and perf ones too.
pub(super) fn checks(tally: &mut Tally, base: &vm::Options, bin: &str, all: bool) {
    let mut pairs = pingpong(bin);
    if all {
        pairs.extend(cm_and_perf(bin));
    }
    pairs.push(linger());
    let (servers, clients) = scripts(&pairs);
    let run = vm::run(&vm::Options {
        hosts: 2,
        every_host: false,
        cmd: vec!["sh".into(), "-c".into(), clients],
        peer_cmd: Some(servers),
        timeout: Duration::from_secs(1500),
        ..base.clone()
    });
    match run {
        Ok(o) => judge(tally, &pairs, &o.lines[0], &o.lines[1]),
        Err(e) => {
            for p in &pairs {
                tally.fail(&p.what, &e);
            }
        }
    }
}

//! The tool against peers that die, say nothing or say nonsense, and
//! against values that cannot work: every case ends in bounded time with a
//! named error and exit status 1 (never a hang, never a panic's 101).
//!
//! Each run sets `--timeout 2`, so a wait that sees no progress ends two
//! seconds after the peer went away; the bounds below leave room for the
//! emulated VM (a killed peer may instead end the survivor's sends with
//! RETRY_EXC_ERR, in a second or two).

mod common;

use common::{env, rverbs_bin};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static PORT: AtomicU16 = AtomicU16::new(19500);

/// The `--timeout` every run here uses.
const TIMEOUT: &str = "2";
/// How long after its peer went away a survivor may take to exit.
const BOUND: Duration = Duration::from_secs(10);

fn port() -> u16 {
    PORT.fetch_add(1, Ordering::Relaxed)
}

/// A running `rverbs` whose output is collected as it comes.
struct Proc {
    what: String,
    child: Option<Child>,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

/// How a process ended.
struct Ended {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    /// From the moment asked for (the peer's death, the end of the
    /// exchange) to the exit.
    took: Duration,
}

impl Ended {
    fn show(&self) -> String {
        format!(
            "status {}, after {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status, self.took, self.stdout, self.stderr
        )
    }

    /// Exit status 1 with `rverbs: ` and one of `phrases` on stderr, no
    /// panic, within `BOUND` of the moment measured from.
    fn assert_named_failure(&self, who: &str, phrases: &[&str]) {
        assert_eq!(self.status.code(), Some(1), "{who}: {}", self.show());
        assert!(!self.stderr.contains("panicked"), "{who}: {}", self.show());
        assert!(self.stderr.contains("rverbs: "), "{who}: {}", self.show());
        assert!(
            phrases.iter().any(|p| self.stderr.contains(p)),
            "{who}: expected one of {phrases:?}: {}",
            self.show()
        );
        assert!(self.took < BOUND, "{who}: {}", self.show());
    }
}

fn rverbs(args: &[&str]) -> Command {
    let mut c = Command::new(rverbs_bin());
    c.args(args);
    c
}

/// Appends what `pipe` gives to `sink` until it closes.
fn collect(mut pipe: impl Read + Send + 'static, sink: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut b = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut b) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&b[..n]));
        }
    })
}

impl Proc {
    fn spawn(what: &str, cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let out = Arc::new(Mutex::new(String::new()));
        let err = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), out.clone()),
            collect(child.stderr.take().unwrap(), err.clone()),
        ];
        Proc {
            what: what.to_string(),
            child: Some(child),
            out,
            err,
            readers,
        }
    }

    fn stdout(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Whether it has exited.
    fn exited(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_some()
    }

    /// Waits until stdout contains `needle`; false if the process exited
    /// first or `limit` passed.
    fn wait_for(&mut self, needle: &str, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self.stdout().contains(needle) {
                return true;
            }
            if self.exited() {
                return self.stdout().contains(needle);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// kill -9.
    fn kill9(&mut self) {
        let c = self.child.as_mut().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Waits for the exit, at most `BOUND` past `since` (then kills it and
    /// fails, naming it).
    fn end(mut self, since: Instant) -> Ended {
        let mut child = self.child.take().unwrap();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if since.elapsed() > BOUND + Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                panic!(
                    "{} still ran {:?} later\nstdout:\n{}\nstderr:\n{}",
                    self.what,
                    since.elapsed(),
                    self.stdout(),
                    self.err.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = since.elapsed();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let stderr = self.err.lock().unwrap().clone();
        Ended {
            status,
            stdout: self.stdout(),
            stderr,
            took,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `args` to its end (at most `BOUND` + 20 s).
fn run(what: &str, args: &[&str]) -> Ended {
    let start = Instant::now();
    Proc::spawn(what, &mut rverbs(args)).end(start)
}

/// `pingpong` arguments for a long run (it is killed long before the end).
fn pingpong_args(port: u16, events: bool) -> Vec<String> {
    let e = env();
    let mut a: Vec<String> = [
        "pingpong",
        "-d",
        &e.dev,
        "-g",
        &e.gid.to_string(),
        "-n",
        "100000000",
        "-p",
        &port.to_string(),
        "--timeout",
        TIMEOUT,
    ]
    .map(String::from)
    .to_vec();
    if events {
        a.push("-e".into());
    }
    a
}

/// Starts a pingpong server and client that are exchanging messages.
fn pingpong_pair(events: bool) -> (Proc, Proc) {
    let port = port();
    let a = pingpong_args(port, events);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut server = Proc::spawn("pingpong server", &mut rverbs(&a));
    let addr = env().addr;
    let until = Instant::now() + Duration::from_secs(30);
    let mut client = loop {
        let mut c = Proc::spawn("pingpong client", rverbs(&a).arg(&addr));
        if c.wait_for("remote address", Duration::from_secs(10)) {
            break c;
        }
        // The server may not listen yet.
        assert!(Instant::now() < until, "no connection: {}", c.stdout());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        server.wait_for("remote address", Duration::from_secs(10)),
        "server: {}",
        server.stdout()
    );
    // Let the messages flow.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!server.exited() && !client.exited(), "both still run");
    (server, client)
}

/// What the survivor of a killed peer may say: its outstanding send ended
/// in error, or nothing came for the timeout.
const PEER_GONE: &[&str] = &["Failed status", "nothing for 2 s: the peer died"];

#[test]
fn a_killed_peer_ends_pingpong_in_bounded_time_polling_and_with_events() {
    for events in [false, true] {
        for kill_client in [true, false] {
            let (mut server, mut client) = pingpong_pair(events);
            let (victim, survivor, who) = if kill_client {
                (&mut client, server, "server")
            } else {
                (&mut server, client, "client")
            };
            victim.kill9();
            let t0 = Instant::now();
            let end = survivor.end(t0);
            end.assert_named_failure(&format!("{who} (events {events})"), PEER_GONE);
            assert!(!end.stdout.contains("iters in"), "{}", end.show());
        }
    }
}

/// Starts a perf server and client running `test` for a long time.
fn perf_pair(test: &str, extra: &[&str]) -> (Proc, Proc) {
    let e = env();
    let port = port().to_string();
    let gid = e.gid.to_string();
    let mut a = vec![
        "perf",
        test,
        "-d",
        &e.dev,
        "-x",
        &gid,
        "-n",
        "100000000",
        "-p",
        &port,
        "--timeout",
        TIMEOUT,
    ];
    a.extend_from_slice(extra);
    let mut server = Proc::spawn("perf server", &mut rverbs(&a));
    // The client retries its connection until the server listens.
    let mut client = Proc::spawn("perf client", rverbs(&a).arg(&e.addr));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !server.exited() && !client.exited(),
        "both still run: server {} client {}",
        server.stdout(),
        client.stdout()
    );
    (server, client)
}

#[test]
fn a_killed_peer_ends_perf_send_bw_and_write_lat_in_bounded_time() {
    for (test, size) in [("send-bw", "4096"), ("write-lat", "64")] {
        for kill_client in [true, false] {
            let (mut server, mut client) = perf_pair(test, &["-s", size]);
            let (victim, survivor, who) = if kill_client {
                (&mut client, server, "server")
            } else {
                (&mut server, client, "client")
            };
            victim.kill9();
            let t0 = Instant::now();
            let end = survivor.end(t0);
            end.assert_named_failure(
                &format!("perf {test} {who}"),
                &[
                    "completion with status",
                    "nothing for 2 s: the peer died",
                    "telling the peer the test goes on",
                ],
            );
        }
    }
}

#[test]
fn perf_with_events_ends_when_the_client_is_killed() {
    let (server, mut client) = perf_pair("send-bw", &["-s", "4096", "-e"]);
    client.kill9();
    let t0 = Instant::now();
    let end = server.end(t0);
    end.assert_named_failure(
        "perf send-bw -e server",
        &["waiting for the client's message"],
    );
    assert!(end.stderr.contains("nothing for 2 s"), "{}", end.show());
}

/// A TCP listener on a free port that accepts one connection and then
/// says `reply` (nothing if empty) and holds it open until dropped.
struct FakeServer {
    port: u16,
    held: Arc<Mutex<Option<TcpStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    fn start(reply: Vec<u8>) -> FakeServer {
        let l = TcpListener::bind(("0.0.0.0", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let held = Arc::new(Mutex::new(None));
        let h = held.clone();
        let thread = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            if !reply.is_empty() {
                let _ = s.write_all(&reply);
            }
            *h.lock().unwrap() = Some(s);
        });
        FakeServer {
            port,
            held,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(s) = self.held.lock().unwrap().take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        // The accept has happened in every test that gets here normally.
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// Connects to a tool's server port on the VM's address, retrying while
/// it does not listen yet.
fn connect(port: u16) -> TcpStream {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect((env().addr.as_str(), port)) {
            Ok(s) => return s,
            Err(e) if Instant::now() > until => panic!("connect to port {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn tool_args(tool: &str, port: u16) -> Vec<String> {
    let e = env();
    let gid_flag = if tool == "pingpong" { "-g" } else { "-x" };
    let mut a: Vec<String> = if tool == "pingpong" {
        vec!["pingpong".into()]
    } else {
        vec!["perf".into(), "send-lat".into()]
    };
    a.extend(
        [
            "-d",
            &e.dev,
            gid_flag,
            &e.gid.to_string(),
            "-p",
            &port.to_string(),
            "--timeout",
            TIMEOUT,
        ]
        .map(String::from),
    );
    a
}

#[test]
fn a_silent_tcp_peer_times_out_both_roles() {
    for (tool, what) in [
        ("pingpong", "Couldn't read remote address: nothing for 2 s"),
        ("perf", "reading the peer's version: nothing for 2 s"),
    ] {
        // The tool as client, against a listener that says nothing.
        let fake = FakeServer::start(Vec::new());
        let mut a = tool_args(tool, fake.port);
        a.push("127.0.0.1".into());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let end = run(&format!("{tool} client"), &a);
        end.assert_named_failure(&format!("{tool} client"), &[what]);
        assert!(end.took >= Duration::from_secs(2), "{}", end.show());
        drop(fake);

        // The tool as server, with a client that connects and says nothing.
        let port = port();
        let a = tool_args(tool, port);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let server = Proc::spawn(&format!("{tool} server"), &mut rverbs(&a));
        let silent = connect(port);
        let t0 = Instant::now();
        let end = server.end(t0);
        end.assert_named_failure(&format!("{tool} server"), &[what]);
        drop(silent);
    }
}

/// A pingpong message whose GID field holds a two-byte UTF-8 character
/// across the boundary of two digit pairs (this used to panic: "byte index
/// 2 is not a char boundary").
fn pingpong_msg_with_utf8_gid() -> Vec<u8> {
    let mut m = b"0000:000011:a2f3b0:0".to_vec();
    m.extend_from_slice("é".as_bytes());
    m.extend_from_slice(&[b'0'; 29]);
    m.push(0);
    assert_eq!(m.len(), 52);
    m
}

/// What a perftest client sends before its address (version 6.06, cycle
/// buffer and cache line sizes, MTU 1024), then `address` as its
/// 108-byte address message with a GID.
fn perf_stream(address: &[u8]) -> Vec<u8> {
    let mut m = b"6.06".to_vec();
    m.resize(16, 0);
    m.extend_from_slice(&4096u32.to_be_bytes());
    m.extend_from_slice(&64u32.to_be_bytes());
    m.extend_from_slice(b"3\0");
    let mut a = address.to_vec();
    a.resize(108, 0);
    m.extend_from_slice(&a);
    m
}

/// perf's address message with a two-byte UTF-8 character in a GID byte.
fn perf_msg_with_utf8_gid() -> Vec<u8> {
    let mut a = b"0000:0080:000012:a5099b:000002eb:0000556da9bbf000:".to_vec();
    a.extend_from_slice("\u{e9}:".as_bytes());
    for _ in 0..15 {
        a.extend_from_slice(b"00:");
    }
    a.extend_from_slice(b"00000000:");
    perf_stream(&a)
}

#[test]
fn hostile_exchange_messages_are_named_errors_not_panics() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "pingpong",
            pingpong_msg_with_utf8_gid(),
            "malformed pingpong address from the peer: GID is not 32 hex digits",
        ),
        (
            "pingpong",
            vec![0xff; 52],
            "malformed pingpong address from the peer: no QPN field",
        ),
        (
            "pingpong",
            b"0000:zz:".to_vec(),
            "the peer closed the connection before sending it",
        ),
        (
            "perf",
            perf_msg_with_utf8_gid(),
            "malformed perftest address from the peer: a GID byte is not a 8-bit hex number",
        ),
        (
            "perf",
            perf_stream(
                &(0..108u8)
                    .map(|i| i.wrapping_mul(37) | 0x80)
                    .collect::<Vec<_>>(),
            ),
            "malformed perftest address from the peer: 1 fields, expected 7",
        ),
        (
            "perf",
            b"000011:a2f3b0:0\xc3\xa9000000000000".to_vec(),
            "malformed perftest version from the peer: not a decimal number",
        ),
    ];
    for (tool, msg, what) in cases {
        // The tool as server: we connect and send the message (then close
        // if it is short of a whole one).
        let port = port();
        let a = tool_args(tool, port);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let server = Proc::spawn(&format!("{tool} server"), &mut rverbs(&a));
        let mut s = connect(port);
        s.write_all(&msg).unwrap();
        if msg.len() < 52 {
            s.shutdown(Shutdown::Write).unwrap();
        }
        let t0 = Instant::now();
        let end = server.end(t0);
        end.assert_named_failure(&format!("{tool} server fed {msg:?}"), &[what]);
        drop(s);

        // The tool as client: a fake server answers with the message.
        if msg.len() >= 52 {
            let fake = FakeServer::start(msg.clone());
            let mut a = tool_args(tool, fake.port);
            a.push("127.0.0.1".into());
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let end = run(&format!("{tool} client"), &a);
            end.assert_named_failure(&format!("{tool} client fed {msg:?}"), &[what]);
        }
    }
}

#[test]
fn bad_values_are_named_errors() {
    let e = env();
    let dev = e.dev.as_str();
    let cases: &[(&[&str], &str)] = &[
        (
            &["perf", "send-lat", "-n", "0"],
            "-n 0: perftest needs at least 5 iterations",
        ),
        (
            &["perf", "send-lat", "-n", "4"],
            "-n 4: perftest needs at least 5 iterations",
        ),
        (
            &["perf", "read-lat", "-n", "0"],
            "-n 0: perftest needs at least 5 iterations",
        ),
        (
            &["perf", "write-lat", "-n", "0"],
            "-n 0: perftest needs at least 5 iterations",
        ),
        (
            &["perf", "write-lat", "-s", "0"],
            "-s 0: write-lat needs at least 1 byte",
        ),
        (
            &["perf", "send-bw", "-t", "0"],
            "-t 0: the send queue needs at least 1 entry",
        ),
        (
            &["perf", "send-bw", "-t", "4294967295", "--batch", "1"],
            "-t 4294967295: larger than the device's max_qp_wr",
        ),
        (
            &["perf", "send-bw", "-s", "4294967295"],
            "-s 4294967295: larger than the port's largest message",
        ),
        (
            &["pingpong", "-r", "4294967295"],
            "-r 4294967295: the receive depth must be 1 to",
        ),
        (
            &["pingpong", "-r", "0"],
            "-r 0: the receive depth must be 1 to",
        ),
        (
            &["pingpong", "-n", "0"],
            "-n 0: at least one message must be exchanged",
        ),
        (
            &["pingpong", "-s", "4294967295"],
            "-s 4294967295: larger than the port's largest message",
        ),
    ];
    for (args, what) in cases {
        let port = port().to_string();
        let mut a: Vec<&str> = args.to_vec();
        a.extend_from_slice(&["-d", dev, "-p", &port, "--timeout", TIMEOUT]);
        let end = run(&format!("{a:?}"), &a);
        end.assert_named_failure(&format!("{a:?}"), &[what]);
        assert!(end.took < Duration::from_secs(5), "{a:?}: {}", end.show());
    }
    // A timeout that is no timeout: clap's usage error (status 2).
    for bad in ["0", "-1", "soon"] {
        let end = run("--timeout", &["pingpong", &format!("--timeout={bad}")]);
        assert_eq!(end.status.code(), Some(2), "{}", end.show());
        assert!(
            end.stderr.contains("invalid value") && end.stderr.contains("--timeout"),
            "{}",
            end.show()
        );
    }
}

#[test]
fn mismatched_iteration_counts_end_with_a_named_error() {
    let e = env();
    // pingpong: the client wants 50 messages, the server sends 5.
    let pp_port = port().to_string();
    let gid = e.gid.to_string();
    let base = [
        "pingpong",
        "-d",
        &e.dev,
        "-g",
        &gid,
        "-p",
        &pp_port,
        "--timeout",
        TIMEOUT,
    ];
    let server = Proc::spawn("pingpong server -n 5", rverbs(&base).args(["-n", "5"]));
    let start = Instant::now();
    let client = loop {
        let mut c = Proc::spawn(
            "pingpong client -n 50",
            rverbs(&base).args(["-n", "50", &e.addr]),
        );
        if c.wait_for("remote address", Duration::from_secs(10)) {
            break c;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no connection");
        std::thread::sleep(Duration::from_millis(200));
    };
    let server = server.end(Instant::now());
    assert!(server.status.success(), "{}", server.show());
    let end = client.end(Instant::now());
    end.assert_named_failure(
        "pingpong client -n 50 with a server -n 5",
        &["does the peer use the same -n?", "Failed status"],
    );

    // perf send-lat: the server answers 5 messages, the client sends 50.
    let port = port().to_string();
    let perf = [
        "perf",
        "send-lat",
        "-d",
        &e.dev,
        "-x",
        &gid,
        "-p",
        &port,
        "--timeout",
        TIMEOUT,
    ];
    let server = Proc::spawn("perf server -n 5", rverbs(&perf).args(["-n", "5"]));
    let client = Proc::spawn(
        "perf client -n 50",
        rverbs(&perf).args(["-n", "50", &e.addr]),
    );
    let t0 = Instant::now();
    let server = server.end(t0);
    let client = client.end(t0);
    // The server finished its 5, then waited for the client's end-of-test
    // sync, which never came; the client waited for answer 6.
    client.assert_named_failure(
        "perf send-lat client -n 50",
        &["does it use the same -n?", "completion with status"],
    );
    assert_eq!(server.status.code(), Some(1), "{}", server.show());
    assert!(!server.stderr.contains("panicked"), "{}", server.show());
}

#[test]
fn a_stopped_rping_client_ends_the_server_in_bounded_time() {
    // A peer that is alive but stuck (SIGSTOP): its kernel still answers
    // at the transport level, but its next message never comes.
    let e = env();
    let port = port().to_string();
    let common = ["-a", &e.addr, "-p", &port, "--timeout", TIMEOUT];
    let server = Proc::spawn("rping server", rverbs(&["rping", "-s"]).args(common));
    let start = Instant::now();
    let mut client = loop {
        let mut c = Proc::spawn(
            "rping client",
            rverbs(&["rping", "-c", "-v", "-C", "0"]).args(common),
        );
        if c.wait_for("ping data: rdma-ping-", Duration::from_secs(10)) {
            break c;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no connection");
        std::thread::sleep(Duration::from_millis(200));
    };
    let pid = client.child.as_ref().unwrap().id().to_string();
    let stop = Command::new("kill").args(["-STOP", &pid]).status().unwrap();
    assert!(stop.success());
    let t0 = Instant::now();
    let end = server.end(t0);
    end.assert_named_failure(
        "rping server with a stopped client",
        &["waiting for a completion from the peer: nothing for 2 s"],
    );
    client.kill9();
}

//! Bounded waits. Every wait of `pingpong`, `perf` and `rping` on their
//! peer — a TCP read or write, a completion poll, a completion-channel
//! event, a busy-wait on a byte the peer writes — gives up after the
//! `--timeout` without progress, with an error naming what it waited for,
//! so that a peer that died, disconnected or says nothing ends the program
//! (non-zero) instead of hanging it.

use rverbs::{CompChannel, Error, Result, Wc, WcStatus};
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The default `--timeout`, in seconds.
pub const DEFAULT_SECS: &str = "10";

/// How long one wait may last without progress (`--timeout SECS`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeout(Duration);

/// Empty polls between two looks at the clock in a busy-wait.
const SPINS_PER_CLOCK: u32 = 1024;

/// clap's parser of `--timeout`: seconds, more than 0 and at most a day
/// (fractions allowed).
pub fn parse_timeout(s: &str) -> std::result::Result<Timeout, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(format!(
            "{s} is out of range: more than 0 and at most 86400 seconds"
        ));
    }
    Ok(Timeout(Duration::from_secs_f64(secs)))
}

impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} s", self.0.as_secs_f64())
    }
}

impl Timeout {
    /// The limit.
    pub fn duration(self) -> Duration {
        self.0
    }

    /// The limit in milliseconds, for poll(2) (at least 1).
    pub fn millis(self) -> i32 {
        self.0.as_millis().clamp(1, i32::MAX as u128) as i32
    }

    /// The error of a wait for `what` that saw nothing for the whole limit.
    pub fn expired(self, what: &str) -> Error {
        Error::Io {
            what: format!("waiting for {what}"),
            source: io::Error::new(ErrorKind::TimedOut, self.why()),
        }
    }

    fn why(self) -> String {
        format!(
            "nothing for {self}: the peer died, disconnected or is stuck (--timeout SECS sets the limit)"
        )
    }

    /// Calls `f` until it returns a value, at most the limit: a busy-wait
    /// (completion polls, a byte in registered memory). `what` names what
    /// is awaited, for the error; it is called only then.
    pub fn spin<T>(
        self,
        what: impl FnOnce() -> String,
        mut f: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let start = Instant::now();
        let mut n = 0u32;
        loop {
            if let Some(v) = f()? {
                return Ok(v);
            }
            n = n.wrapping_add(1);
            if n % SPINS_PER_CLOCK == 0 && start.elapsed() > self.0 {
                // One last look: the answer may have come while the clock
                // was read.
                return f()?.ok_or_else(|| self.expired(&what()));
            }
        }
    }

    /// Sleeps on a completion channel for one event, at most the limit.
    pub fn event(self, ch: &CompChannel, what: impl FnOnce() -> String) -> Result<u64> {
        ch.get_event_timeout(self.millis())?
            .ok_or_else(|| self.expired(&what()))
    }

    /// Bounds every read and write on `s` by the limit.
    pub fn bound(self, s: &TcpStream) -> Result<()> {
        s.set_read_timeout(Some(self.0))
            .and_then(|()| s.set_write_timeout(Some(self.0)))
            .map_err(|e| Error::Io {
                what: "setting the TCP socket's timeouts".into(),
                source: e,
            })
    }

    /// Connects to `host:port` (each of its addresses in turn), each
    /// attempt bounded by the limit, and bounds the stream's reads and
    /// writes.
    pub fn connect(self, host: &str, port: u16) -> io::Result<TcpStream> {
        let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
        let mut last = io::Error::new(ErrorKind::NotFound, format!("{host} has no address"));
        for a in addrs {
            match TcpStream::connect_timeout(&a, self.0) {
                Ok(s) => {
                    s.set_read_timeout(Some(self.0))?;
                    s.set_write_timeout(Some(self.0))?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// A failed TCP read or write of `what`, with a timeout and the peer's
    /// close said as such.
    pub fn tcp_error(self, what: &str, e: io::Error) -> Error {
        let source = match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                io::Error::new(ErrorKind::TimedOut, self.why())
            }
            ErrorKind::UnexpectedEof => io::Error::new(
                ErrorKind::UnexpectedEof,
                "the peer closed the connection before sending it",
            ),
            _ => e,
        };
        Error::Io {
            what: what.to_string(),
            source,
        }
    }
}

/// TCP keepalive on a connection a program may wait on without a limit
/// (perftest's exchange has no heartbeat, so a bandwidth test's passive
/// side waits for its peer's end however long the test runs): after
/// [`KEEPALIVE_IDLE_SECS`] of silence the kernel probes the peer every
/// [`KEEPALIVE_INTVL_SECS`] and, after [`KEEPALIVE_PROBES`] unanswered
/// probes, fails the read with `ETIMEDOUT`. A killed peer process closes
/// the connection at once; this bounds a peer whose host died or whose
/// network went away, which closes nothing: 10 + 3 × 5 = 25 s.
///
/// Keepalive probes only an idle connection: one with data of ours the
/// peer never acknowledged (its host went away right after we wrote) is
/// left to the retransmission timer, which gives up after about 15
/// minutes. `TCP_USER_TIMEOUT` bounds that case by the same 25 s (and,
/// with keepalive on, also decides when the probes have failed). A live
/// peer's kernel acknowledges within milliseconds, however slow its
/// program, so a slow transfer is never cut.
pub fn keepalive(s: &TcpStream) -> Result<()> {
    use std::os::fd::AsRawFd;
    let fd = s.as_raw_fd();
    for (level, name, value, what) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1, "SO_KEEPALIVE"),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            KEEPALIVE_IDLE_SECS,
            "TCP_KEEPIDLE",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            KEEPALIVE_INTVL_SECS,
            "TCP_KEEPINTVL",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            KEEPALIVE_PROBES,
            "TCP_KEEPCNT",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            USER_TIMEOUT_MS,
            "TCP_USER_TIMEOUT",
        ),
    ] {
        let v: libc::c_int = value;
        // SAFETY: fd is the stream's open socket for the whole call (the
        // borrow keeps it open); the option value is a live c_int of the
        // length passed, which the kernel only reads.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                std::ptr::from_ref(&v).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Error::Io {
                what: format!("setting {what} on the TCP connection"),
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// Seconds of silence before the first keepalive probe.
pub const KEEPALIVE_IDLE_SECS: libc::c_int = 10;
/// Seconds between keepalive probes.
pub const KEEPALIVE_INTVL_SECS: libc::c_int = 5;
/// Unanswered probes before the connection is declared dead.
pub const KEEPALIVE_PROBES: libc::c_int = 3;
/// Milliseconds data of ours may stay unacknowledged before the
/// connection is declared dead: the keepalive bound.
pub const USER_TIMEOUT_MS: libc::c_int =
    (KEEPALIVE_IDLE_SECS + KEEPALIVE_INTVL_SECS * KEEPALIVE_PROBES) * 1000;

/// A completion in error, `what` followed by what its status usually
/// means for a program talking to one peer.
pub fn failed_completion(what: String, wc: &Wc) -> Error {
    let why = match wc.status {
        WcStatus::RETRY_EXC_ERR => "the peer never acknowledged it: it died, or its QP went away",
        WcStatus::RNR_RETRY_EXC_ERR => {
            "the peer had no receive posted for it: it stopped receiving"
        }
        WcStatus::WR_FLUSH_ERR => "flushed: the QP is in the error state after an earlier failure",
        _ => "the work request failed",
    };
    Error::Io {
        what,
        source: io::Error::other(why),
    }
}

/// A value given on the command line that cannot work.
pub fn bad_value(what: impl Into<String>) -> Error {
    Error::InvalidArgument { what: what.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_in_range_only() {
        assert_eq!(
            parse_timeout("10").unwrap().duration(),
            Duration::from_secs(10)
        );
        assert_eq!(parse_timeout("0.5").unwrap().millis(), 500);
        assert_eq!(parse_timeout("0.0001").unwrap().millis(), 1);
        for bad in ["0", "-1", "nan", "inf", "86401", "", "ten"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_timeout("2.5").unwrap().to_string(), "2.5 s");
    }

    #[test]
    fn spins_end_at_the_limit_with_a_named_error() {
        let t = parse_timeout("0.05").unwrap();
        let start = Instant::now();
        let e = t.spin(|| "a thing".into(), || Ok(None::<()>)).unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert!(start.elapsed() < Duration::from_secs(5));
        let s = e.to_string();
        assert!(
            s.starts_with("waiting for a thing: nothing for 0.05 s"),
            "{s}"
        );
        let mut n = 0;
        assert_eq!(
            t.spin(String::new, || {
                n += 1;
                Ok((n == 3).then_some(7))
            })
            .unwrap(),
            7
        );
    }

    #[test]
    fn failed_completions_say_what_the_status_means() {
        let wc = Wc {
            status: WcStatus::RETRY_EXC_ERR,
            wr_id: 2,
            ..Wc::default()
        };
        let e = failed_completion("Failed status X for wr_id 2".into(), &wc);
        assert_eq!(
            e.to_string(),
            "Failed status X for wr_id 2: the peer never acknowledged it: it died, or its QP went away"
        );
    }

    #[test]
    fn tcp_errors_say_timeout_and_close() {
        let t = parse_timeout("3").unwrap();
        let e = t.tcp_error("Couldn't read X", io::Error::from(ErrorKind::WouldBlock));
        assert!(
            e.to_string()
                .starts_with("Couldn't read X: nothing for 3 s: the peer died"),
            "{e}"
        );
        let e = t.tcp_error("Couldn't read X", io::Error::from(ErrorKind::UnexpectedEof));
        assert_eq!(
            e.to_string(),
            "Couldn't read X: the peer closed the connection before sending it"
        );
    }

    /// What `keepalive` sets is what the kernel then holds for the socket
    /// (read back with getsockopt on a loopback connection): the probes of
    /// an idle connection, and `TCP_USER_TIMEOUT` for one whose data the
    /// peer never acknowledged (the soak's churn server once waited out
    /// the retransmission timer for a client whose VM had powered off).
    #[test]
    fn keepalive_sets_the_probe_schedule() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        keepalive(&c).unwrap();
        for (level, name, want) in [
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, KEEPALIVE_IDLE_SECS),
            (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, KEEPALIVE_INTVL_SECS),
            (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, KEEPALIVE_PROBES),
            (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 25_000),
        ] {
            let mut v: libc::c_int = -1;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: an open socket; v and len are live and of the sizes
            // passed, written by the kernel only within them.
            let rc = unsafe {
                libc::getsockopt(
                    c.as_raw_fd(),
                    level,
                    name,
                    std::ptr::from_mut(&mut v).cast(),
                    &mut len,
                )
            };
            assert_eq!((rc, v), (0, want), "option {name}");
        }
    }
}

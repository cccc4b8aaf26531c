//! The shell scripts of the multi-check boots: each check's commands are
//! framed by `BEGIN tag` lines, and a client retries until its server
//! listens. A boot costs 10–20 s under TCG, so checks share one where
//! they can; each is still judged, and named, on its own.

use super::Tally;

/// A check's verdict on its sections (the client's lines, the server's),
/// asked only when both exited 0.
pub(super) type Judge = Box<dyn Fn(&[String], &[String]) -> bool>;

/// One check of a two-host boot: a server on one host, a client on the
/// other, and what their output must show.
pub(super) struct Pair {
    pub what: String,
    pub server: String,
    pub client: String,
    pub judge: Judge,
}

/// A judge: some line of the client's output holds `text`.
pub(super) fn client_says(text: &'static str) -> Judge {
    Box::new(move |c, _| c.iter().any(|l| l.contains(text)))
}

/// The two hosts' scripts for `pairs`, each pair in section `i` of both:
/// (the servers' script, the clients'). A server gets 120 s; a client
/// retries until its server listens. Every pair needs a port of its own:
/// a client retried after its server left must not reach the next one.
pub(super) fn scripts(pairs: &[Pair]) -> (String, String) {
    let (mut servers, mut clients) = (String::new(), String::new());
    for (i, p) in pairs.iter().enumerate() {
        servers.push_str(&format!(
            "echo BEGIN {i}\ntimeout 120 {}; echo \"RC {i} $?\"\n",
            p.server
        ));
        clients.push_str(&format!(
            "echo BEGIN {i}\n{}; echo \"RC {i} $?\"\n",
            retry(&p.client)
        ));
    }
    (servers, clients)
}

/// Counts each of `pairs` passed or failed from the output lines of the
/// host that ran the clients and of the one that ran the servers.
pub(super) fn judge(tally: &mut Tally, pairs: &[Pair], clients: &[String], servers: &[String]) {
    for (i, p) in pairs.iter().enumerate() {
        let c = section(clients, &i.to_string());
        let s = section(servers, &i.to_string());
        let rc = format!("RC {i} 0");
        if c.contains(&rc) && s.contains(&rc) && (p.judge)(&c, &s) {
            tally.pass(&p.what)
        } else {
            tally.fail(
                &p.what,
                &format!("client: {}; server: {}", last(&c), last(&s)),
            )
        }
    }
}

/// How a client waits for its server: it retries while the server starts
/// (or while rxe's link on the other host comes up), for
/// [`RETRY_SECS`] in all. A bound on time, not on tries: a try that waits
/// out its own timeouts (the tools' connect retries for 10 s) must not
/// multiply into a run that outlasts the boot's limit, as 120 tries once
/// did after a server had gone.
pub(super) fn retry(client: &str) -> String {
    retry_for(client, RETRY_SECS)
}

fn retry_for(client: &str, secs: u32) -> String {
    format!(
        "( end=$(($(date +%s) + {secs})); while :; do {client} && exit 0; [ $(date +%s) -lt $end ] || exit 1; sleep 0.5; done )"
    )
}

/// How long a client retries: less than a server's own limit (120 s),
/// so that a client that failed for real gives up while the next
/// check's server still waits, and that check's client reaches it (a
/// longer window would make every later check late by the difference,
/// and fail them all). A server that starts late because the one before
/// waited out its limit is still reached: its client started retrying
/// when the previous client gave up.
const RETRY_SECS: u32 = 100;

/// The lines between `BEGIN tag` and the next `BEGIN`.
pub(super) fn section(lines: &[String], tag: &str) -> Vec<String> {
    let begin = format!("BEGIN {tag}");
    lines
        .iter()
        .skip_while(|l| **l != begin)
        .skip(1)
        .take_while(|l| !l.starts_with("BEGIN "))
        .cloned()
        .collect()
}

/// The last few lines of a section, for a failure's message.
pub(super) fn last(s: &[String]) -> String {
    if s.is_empty() {
        return "no output (the check never started)".into();
    }
    s[s.len().saturating_sub(6)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::{retry_for, section};
    use std::process::Command;
    use std::time::{Duration, Instant};

    /// The retry loop stops at its deadline however many tries that is,
    /// and ends at the first try that succeeds.
    #[test]
    fn retries_until_success_or_the_deadline() {
        let sh = |script: &str| Command::new("sh").arg("-c").arg(script).status().unwrap();
        let t = Instant::now();
        assert_eq!(sh(&retry_for("false", 2)).code(), Some(1));
        let took = t.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(10),
            "{took:?}"
        );
        let dir = std::env::temp_dir().join(format!("xtask-retry-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let count = dir.join("n");
        // Fails twice, then succeeds: three tries, exit 0.
        let client = format!(
            "{{ echo x >> {c}; [ $(wc -l < {c}) -ge 3 ]; }}",
            c = count.display()
        );
        assert_eq!(sh(&retry_for(&client, 60)).code(), Some(0));
        assert_eq!(std::fs::read_to_string(&count).unwrap().lines().count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sections_split_on_markers() {
        let lines: Vec<String> = ["x", "BEGIN 0", "a", "RC 0 0", "BEGIN 1", "b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(section(&lines, "0"), ["a", "RC 0 0"]);
        assert_eq!(section(&lines, "1"), ["b"]);
        assert!(section(&lines, "2").is_empty());
    }
}

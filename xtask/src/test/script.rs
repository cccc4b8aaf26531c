//! The shell scripts of the multi-check boots: each check's commands are
//! framed by `BEGIN tag` lines, and a client retries until its server
//! listens.

/// How a client waits for its server: it retries while the server starts
/// (or while rxe's link on the other host comes up).
pub(super) fn retry(client: &str) -> String {
    format!("( for t in $(seq 120); do {client} && exit 0; sleep 0.5; done; exit 1 )")
}

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
    use super::section;

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

//! Reading libtest's output: the `test result:` lines that `cargo test`
//! and `cargo miri test` print, counted by `test` and `checkers` alike.

/// `test result: ok. 3 passed; 0 failed; 0 ignored; ...` → (3, 0).
pub fn parse_test_result(line: &str) -> Option<(u64, u64)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let mut passed = None;
    let mut failed = None;
    for part in rest.split(';') {
        let words: Vec<&str> = part.split_whitespace().collect();
        let n = words.len();
        if n >= 2 {
            match words[n - 1] {
                "passed" => passed = words[n - 2].parse().ok(),
                "failed" => failed = words[n - 2].parse().ok(),
                _ => {}
            }
        }
    }
    Some((passed?, failed?))
}

#[cfg(test)]
mod tests {
    use super::parse_test_result;

    #[test]
    fn libtest_summary_is_parsed() {
        assert_eq!(
            parse_test_result("test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s"),
            Some((12, 0))
        );
        assert_eq!(
            parse_test_result(
                "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out"
            ),
            Some((3, 2))
        );
        assert_eq!(parse_test_result("running 3 tests"), None);
    }
}

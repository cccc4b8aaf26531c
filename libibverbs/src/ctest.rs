//! Test-time C, for the tests that hold this crate against rdma-core's
//! headers and library: a program is compiled now with the system's `cc`
//! against the installed `<infiniband/*.h>` and run, and its output is
//! what the Rust side must equal. One copy of the compile-and-run steps
//! for every such test (layouts, the `_ex` structs, the rates).

use std::process::Command;

/// Compiles `prog` (a whole C file), linking rdma-core's libibverbs when
/// `link`, runs it and returns its stdout. `tag` names the temporary
/// directory. Panics naming what is missing (`cc`, libibverbs-dev) or
/// what the compiler said.
pub(crate) fn run_c(tag: &str, prog: &str, link: bool) -> String {
    let dir = std::env::temp_dir().join(format!("rverbs-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (src, exe) = (dir.join("t.c"), dir.join("t"));
    std::fs::write(&src, prog).expect("write the C file");
    let mut cc = Command::new("cc");
    cc.arg("-o").arg(&exe).arg(&src);
    if link {
        cc.arg("-libverbs");
    }
    let out = cc
        .output()
        .unwrap_or_else(|e| panic!("this test needs `cc` (gcc) and libibverbs-dev: {e}"));
    assert!(
        out.status.success(),
        "cc failed on {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run the C program");
    assert!(run.status.success(), "{} failed", exe.display());
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout).expect("utf-8")
}

/// Each C expression of `checks` (evaluated as `size_t` with `headers`
/// included) equals the Rust value beside it; a mismatch names the
/// expression.
pub(crate) fn assert_c_values(tag: &str, headers: &[&str], checks: &[(String, usize)]) {
    let mut prog = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    for h in headers {
        prog += &format!("#include <{h}>\n");
    }
    prog += "int main(void) {\n";
    for (c, _) in checks {
        prog += &format!("printf(\"%zu\\n\", (size_t)({c}));\n");
    }
    prog += "return 0; }\n";
    let text = run_c(tag, &prog, false);
    let got: Vec<usize> = text.lines().map(|l| l.parse().expect("a number")).collect();
    assert_eq!(got.len(), checks.len(), "one line per expression");
    for ((c, want), got) in checks.iter().zip(&got) {
        assert_eq!(got, want, "{c}");
    }
}

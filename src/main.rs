//! The `rverbs` command-line tool.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("devinfo") => {
            eprintln!("rverbs devinfo: not implemented yet (the core verbs land with issue 4)");
            ExitCode::from(2)
        }
        _ => {
            eprintln!("usage: rverbs devinfo [-d DEV]");
            ExitCode::from(2)
        }
    }
}

//! `cargo xtask test` and `cargo xtask demo` (being written).
use crate::host::Result;
use std::process::ExitCode;

pub fn run(_args: &[String]) -> Result<ExitCode> {
    Err("not yet".into())
}

pub fn demo() -> Result<ExitCode> {
    Err("not yet".into())
}

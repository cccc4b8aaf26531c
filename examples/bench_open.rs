//! Start-up cost, whole process: exec, open a device context, exit — the
//! rverbs side of `cargo xtask bench`'s start-up row (rdma-core's side is
//! xtask/bench-ref/startup/ibv_open.c, doing the same through libibverbs).
//! xtask builds it static, like the `rverbs` tool, and counts every
//! instruction of the process under callgrind in the VM.
//!
//! ```text
//! bench_open [DEVICE]     (the first device if none is named)
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let name = std::env::args().nth(1);
    match rverbs::Context::open_by_name(name.as_deref()) {
        Ok(ctx) => {
            drop(ctx);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_open: {e}");
            ExitCode::FAILURE
        }
    }
}

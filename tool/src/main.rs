//! The `rverbs` command-line tool.

mod cli;

fn main() -> std::process::ExitCode {
    // Like any Unix filter: a closed pipe (`rverbs gids | grep -q`) ends the
    // program quietly instead of making println! panic.
    // SAFETY: restoring the default disposition of SIGPIPE before any
    // thread exists has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::main()
}

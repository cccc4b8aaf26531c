//! rverbs' VM tests: the integration tests under `tests/`, which need a
//! kernel with an rxe device. `cargo xtask test` builds them, builds the
//! `rverbs` tool they run (`-p rverbs-tool`), and runs every one inside the
//! VM. Run anywhere else they fail (never skip), naming what is missing.
//!
//! This package is a workspace member outside `default-members`, so that a
//! plain `cargo test` on a host without RDMA leaves it out; `cargo clippy
//! --workspace` still checks it.

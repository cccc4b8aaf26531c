//! The library's examples run on rxe0 and do what they say: each moves real
//! data between two QPs of one process and checks every byte itself (a
//! failed check panics, a failed verb returns an error: either is a
//! non-zero exit).

mod common;

use std::process::Command;

fn run_example(name: &str, expect: &str) {
    let e = common::env();
    let out = Command::new(common::example_bin(name))
        .args([e.dev.as_str(), "1"])
        .output()
        .expect("run the example");
    let text = common::show(&out);
    assert!(out.status.success(), "{name} failed:\n{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(expect), "{name} printed:\n{text}");
}

#[test]
fn rc_send_recv_delivers_the_message() {
    run_example("rc_send_recv", "\"hello over RC\"");
}

#[test]
fn rdma_write_lands_in_the_target_range() {
    run_example("rdma_write", "RDMA WRITE of 2048 bytes completed");
}

#[test]
fn ud_datagram_arrives_through_the_address_handle() {
    run_example("ud_ah", "\"a datagram\"");
}

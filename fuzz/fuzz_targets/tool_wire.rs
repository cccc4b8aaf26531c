//! The `rverbs` tool's exchange messages — pingpong's (rdma-core's
//! `ibv_rc_pingpong` format), perf's and rping's — over arbitrary bytes:
//! a named error or a message that encodes back to what decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rverbs_tool::wire::{perf::Peer, pingpong::Dest, rping::Info};

fuzz_target!(|data: &[u8]| {
    match Dest::decode(data) {
        Ok(d) => assert_eq!(Dest::decode(&d.encode()), Ok(d)),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match Peer::decode(data) {
        Ok(p) => assert_eq!(Peer::decode(&p.encode()), Ok(p)),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match Info::decode(data) {
        Ok(i) => assert_eq!(&i.encode()[..], data),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});

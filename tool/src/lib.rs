//! The pure parts of the `rverbs` tool: what it sends to and reads from a
//! peer over TCP. They live in a library of their own (the binary `rverbs`
//! uses it) so that the fuzz targets under `fuzz/` can feed them arbitrary
//! bytes. Nothing here touches a device, a socket or the clock.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod wire;

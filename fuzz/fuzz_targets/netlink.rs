//! RDMA netlink replies: uverbs-abi's checked views (message iterator,
//! classification, attributes, nested attributes, every accessor, the
//! multi-datagram reply reader), the one codec the library reads the
//! kernel's replies with, over arbitrary datagrams. Malformed bytes must be
//! an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs_abi::netlink::{Attrs, NlMessage, NlMsgIter, ReplyReader};

/// Walks attributes and, to a bounded depth, the nested ones.
fn walk(attrs: Attrs<'_>, depth: u32) {
    for a in attrs.iter() {
        let _ = (a.kind(), a.raw_type(), a.data());
        let _ = (a.u8(), a.u16(), a.u32(), a.u64(), a.str());
        if depth < 4 {
            if let Ok(inner) = a.nested() {
                walk(inner, depth + 1);
            }
        }
    }
    let _ = attrs.find(1);
}

fuzz_target!(|data: &[u8]| {
    for m in NlMsgIter::new(data) {
        let Ok(m) = m else { break };
        let _ = (m.header(), m.payload());
        if let Ok(attrs) = m.attrs() {
            walk(attrs, 0);
        }
        if let Ok(NlMessage::Error { message, .. }) = NlMessage::classify(m) {
            let _ = message.map(str::len);
        }
    }
    // The reply reader, with the request's sequence number and flags taken
    // from the first bytes (so that some messages belong to the reply).
    let seq = data
        .get(8..12)
        .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let flags = data
        .get(6..8)
        .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]));
    let mut r = ReplyReader::new(seq, flags);
    for chunk in data.chunks(512) {
        if r.is_done() {
            break;
        }
        if let Ok(msgs) = r.feed(chunk) {
            for m in msgs {
                let _ = m.attrs().map(|a| walk(a, 0));
            }
        }
    }
    let _ = r.interrupted();
});

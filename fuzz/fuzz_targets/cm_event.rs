//! rdma_cm events: `rverbs_cm::Event::from_kernel` over arbitrary bytes of
//! a `struct rdma_ucm_event_resp` (short inputs are zero-padded, as a
//! response buffer is zeroed before `GET_EVENT`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs_abi::cm::RdmaUcmEventResp;
use zerocopy::{FromZeros, IntoBytes};

fuzz_target!(|data: &[u8]| {
    let mut resp = RdmaUcmEventResp::new_zeroed();
    let b = resp.as_mut_bytes();
    let n = data.len().min(b.len());
    b[..n].copy_from_slice(&data[..n]);
    let e = rverbs_cm::Event::from_kernel(&resp);
    let _ = e.name();
    assert!(e.conn.private_data.len() <= 256);
    assert!(e.ud.private_data.len() <= 256);
    let _ = resp.ud().ah_attr_as::<[u32; 8]>();
});

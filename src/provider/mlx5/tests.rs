//! The mlx5 glue's data path — the safe API's requests posted as they
//! are, one doorbell per list, errors named by index, completions polled
//! as `Wc`s through the CQ's registry — driven over the provider's
//! software device model (no kernel, no hardware: the kernel commands of
//! this module are not exercised here). The registry itself (tombstones,
//! SRQ receives across CQs) is tested in provider-mlx5's
//! `tests/model_registry.rs`.

use super::post::{post_recv_list, post_send_list as post_send};
use crate::error::{Error, PostError};
use crate::qp::{RecvWr, Remote, SendOp, SendWr};
use crate::wc::{Wc, WcFlags, WcOpcode, WcStatus};
use crate::wr::Slice;
use provider_mlx5::{next_id, Poller, QpEntry, RecvRecs, Registry};
use provider_mlx5_model::mem::access;
use provider_mlx5_model::{Device, RecvSide};
use std::sync::Arc;

struct Bed {
    // Provider objects before the model that owns their memory.
    sq_a: provider_mlx5::SendQueue,
    rq_b: provider_mlx5::RecvQueue,
    poller: Poller,
    dev: Device,
    a: usize,
    b: usize,
    mr_a: usize,
    mr_b: usize,
}

fn bed() -> Bed {
    let mut dev = Device::new();
    let c = dev.add_cq(64, 64);
    let rq = RecvSide::Rq { cnt: 16, shift: 6 };
    let a = dev.add_qp(false, 16, RecvSide::Rq { cnt: 16, shift: 6 }, c, c, 256);
    let b = dev.add_qp(false, 16, rq, c, c, 256);
    dev.connect(a, b);
    let mr_a = dev.mem.reg(4096, access::ALL);
    let mr_b = dev.mem.reg(4096, access::ALL);
    let sq_a = dev.provider_sq(a, 4, 64, true);
    let rq_b = dev.provider_rq(b, 4);
    let cq = dev.provider_cq(c);
    let registry = registry_of(&cq);
    registry.add(entry(dev.qps[a].qpn, next_id(), Some(&sq_a), None));
    registry.add(entry(
        dev.qps[b].qpn,
        next_id(),
        None,
        Some(RecvRecs::Rq(rq_b.shared_records())),
    ));
    let poller = Poller::new(cq, registry);
    Bed {
        sq_a,
        rq_b,
        poller,
        dev,
        a,
        b,
        mr_a,
        mr_b,
    }
}

fn registry_of(cq: &provider_mlx5::CompletionQueue) -> Arc<Registry> {
    // SAFETY: the model's ring outlives the test's pollers and registries
    // (the Device is dropped last).
    Arc::new(Registry::new(unsafe { cq.scanner() }))
}

fn entry(
    qpn: u32,
    id: u64,
    sq: Option<&provider_mlx5::SendQueue>,
    rq: Option<RecvRecs>,
) -> QpEntry {
    QpEntry::new(qpn, id, sq.map(|q| q.shared_records()), rq)
}

impl Bed {
    fn slice(&self, mr: usize, off: u64, len: u32) -> Slice<'static> {
        let m = &self.dev.mem.mrs[mr];
        Slice::raw_for_model(m.buf.addr() + off, len, m.lkey)
    }
    fn remote(&self, mr: usize, off: u64) -> Remote {
        let m = &self.dev.mem.mrs[mr];
        Remote {
            addr: m.buf.addr() + off,
            rkey: m.rkey,
        }
    }
    fn poll(&mut self) -> Vec<Wc> {
        let mut out = [Wc::default(); 32];
        let n = self.poller.poll(&mut out);
        out[..n].to_vec()
    }
}

#[test]
fn send_imm_and_write_complete_through_the_registry() {
    let mut t = bed();
    t.dev.mem.mrs[t.mr_a].buf.write(0, b"hello, mlx5 model");
    let recv = [t.slice(t.mr_b, 1024, 64)];
    post_recv_list(
        &mut t.rq_b,
        &[RecvWr {
            wr_id: 77,
            sges: &recv,
        }],
        "receive queue",
    )
    .unwrap();
    let src = [t.slice(t.mr_a, 0, 17)];
    let wrs = [
        SendWr::new(1, SendOp::SendWithImm(0xdead_beef), &src),
        SendWr::new(2, SendOp::Write(t.remote(t.mr_b, 2048)), &src),
        SendWr::inline(3, SendOp::Send, b"inl").signaled(false),
    ];
    // The third has no receive waiting; keep it off the wire: post two.
    post_send(&mut t.sq_a, &wrs[..2]).unwrap();
    t.dev.process();
    let wcs = t.poll();
    let by_id = |id| wcs.iter().find(|w| w.wr_id == id).copied().unwrap();
    assert_eq!(wcs.len(), 3, "{wcs:?}");
    let r = by_id(77);
    assert_eq!(
        (r.status, r.opcode, r.byte_len),
        (WcStatus::SUCCESS, WcOpcode::RECV, 17)
    );
    assert_eq!(r.imm_data(), Some(0xdead_beef));
    assert!(r.flags.contains(WcFlags::WITH_IMM));
    assert_eq!(r.qp_num, t.dev.qps[t.b].qpn);
    assert_eq!(r.src_qp, t.dev.qps[t.a].qpn);
    assert_eq!(by_id(1).opcode, WcOpcode::SEND);
    assert_eq!(by_id(2).opcode, WcOpcode::RDMA_WRITE);
    let b = &t.dev.mem.mrs[t.mr_b].buf;
    assert_eq!(b.read(1024, 17), b"hello, mlx5 model");
    assert_eq!(b.read(2048, 17), b"hello, mlx5 model");
    assert_eq!(t.poll(), vec![], "each completes once");
}

#[test]
fn a_refused_request_is_named_by_index_and_the_rest_is_rung() {
    let mut t = bed();
    let src = [t.slice(t.mr_a, 0, 8)];
    let five = [src[0]; 5];
    let wrs = [
        SendWr::new(1, SendOp::Write(t.remote(t.mr_b, 0)), &src),
        SendWr::new(2, SendOp::Write(t.remote(t.mr_b, 8)), &five),
        SendWr::new(3, SendOp::Write(t.remote(t.mr_b, 16)), &src),
    ];
    match post_send(&mut t.sq_a, &wrs) {
        Err(Error::InvalidWorkRequest {
            index: 1,
            reason: PostError::TooManySges { given: 5, .. },
        }) => {}
        other => panic!("{other:?}"),
    }
    t.dev.process();
    let ids: Vec<u64> = t.poll().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [1], "the first was rung, the rest not posted");
    // Fill the 16-block SQ: the 17th single-block write is refused by index.
    let wrs: Vec<SendWr<'_>> = (0..17)
        .map(|i| SendWr::new(10 + i, SendOp::Write(t.remote(t.mr_b, 0)), &src))
        .collect();
    match post_send(&mut t.sq_a, &wrs) {
        Err(Error::QueueFull {
            queue: "send queue",
            index: 16,
        }) => {}
        other => panic!("{other:?}"),
    }
    t.dev.process();
    assert_eq!(t.poll().len(), 16);
}

#[test]
fn errors_map_to_named_statuses_and_flush() {
    let mut t = bed();
    let src = [t.slice(t.mr_a, 0, 8)];
    let mut bad = t.remote(t.mr_b, 0);
    bad.rkey ^= 0x100;
    let wrs = [
        SendWr::new(1, SendOp::Write(bad), &src),
        SendWr::new(2, SendOp::Write(t.remote(t.mr_b, 0)), &src),
    ];
    post_send(&mut t.sq_a, &wrs).unwrap();
    t.dev.process();
    let wcs = t.poll();
    let st: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        st,
        [(1, WcStatus::REM_ACCESS_ERR), (2, WcStatus::WR_FLUSH_ERR)]
    );
    assert_ne!(wcs[0].vendor_err, 0, "the vendor syndrome is kept");
}

#[test]
fn operations_mlx5_does_not_build_are_refused_as_unsupported_by_index() {
    let mut t = bed();
    let src = [t.slice(t.mr_a, 0, 8)];
    let remote = t.remote(t.mr_b, 0);
    let wrs = [
        SendWr::new(1, SendOp::Write(remote), &src),
        SendWr::new(
            2,
            SendOp::AtomicWrite {
                remote,
                value: [1; 8],
            },
            &[],
        ),
    ];
    match post_send(&mut t.sq_a, &wrs) {
        Err(Error::InvalidWorkRequest { index: 1, reason }) => {
            assert!(reason.is_unsupported(), "{reason}");
            assert_eq!(
                reason,
                PostError::NotImplemented {
                    opcode: SendOp::AtomicWrite {
                        remote,
                        value: [1; 8]
                    }
                    .opcode()
                }
            );
        }
        r => panic!("expected an unsupported request, got {r:?}"),
    }
    // The WRITE before it was posted and rung.
    t.dev.process();
    let wcs = t.poll();
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!((wcs[0].wr_id, wcs[0].opcode), (1, WcOpcode::RDMA_WRITE));
}

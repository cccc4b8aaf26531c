//! Construction checks: every layout the constructors must refuse.
//! (The data path is tested against the C header in `tests/golden.rs` and
//! against the device model in `tests/model_*.rs`.)
#![allow(unsafe_code)] // raw memory shared with the device; each block says why it is sound

use crate::*;
use core::ptr::NonNull;

#[repr(C, align(4096))]
struct Page([u8; 4096]);

fn page() -> Box<Page> {
    Box::new(Page([0; 4096]))
}

fn ptr(p: &mut Page, off: usize) -> NonNull<u8> {
    NonNull::new(p.0[off..].as_mut_ptr()).unwrap()
}

fn sq_cfg() -> SqConfig {
    SqConfig {
        qpn: 1,
        qp_type: QpType::Rc,
        wqe_cnt: 16,
        max_wr: 16,
        max_sge: 4,
        max_inline: 64,
        bf_size: 256,
        blueflame: true,
        prefer_blueflame: false,
        sig_all: false,
    }
}

#[test]
fn send_queue_layouts() {
    let (mut ring, mut db, mut uar) = (page(), page(), page());
    let mut make = |ring_off: usize, len: usize, db_off: usize, bf_off: usize, cfg: SqConfig| {
        let (r, d, b) = (
            ptr(&mut ring, ring_off),
            ptr(&mut db, db_off),
            ptr(&mut uar, bf_off),
        );
        // SAFETY: three live pages; the queue is dropped at once.
        unsafe { SendQueue::new(r, len, d.cast(), b, cfg) }.map(|_| ())
    };
    assert_eq!(make(0, 1024, 0, 0x800, sq_cfg()), Ok(()));
    assert_eq!(
        make(0, 1000, 0, 0x800, sq_cfg()),
        Err(LayoutError::TooShort {
            need: 1024,
            len: 1000
        })
    );
    assert!(matches!(
        make(8, 1024, 0, 0x800, sq_cfg()),
        Err(LayoutError::Misaligned { .. })
    ));
    assert!(matches!(
        make(0, 1024, 2, 0x800, sq_cfg()),
        Err(LayoutError::Misaligned { .. })
    ));
    assert!(matches!(
        make(0, 1024, 0, 0x804, sq_cfg()),
        Err(LayoutError::Misaligned { .. })
    ));
    let bad = |f: fn(&mut SqConfig)| {
        let mut c = sq_cfg();
        f(&mut c);
        c
    };
    assert_eq!(
        make(0, 4096, 0, 0x800, bad(|c| c.wqe_cnt = 12)),
        Err(LayoutError::BadCount { count: 12 })
    );
    for n in [0, 17] {
        assert_eq!(
            make(
                0,
                4096,
                0,
                0x800,
                SqConfig {
                    max_wr: n,
                    ..sq_cfg()
                }
            ),
            Err(LayoutError::BadCount { count: n }),
            "max_wr {n} of 16 blocks"
        );
    }
    assert_eq!(
        make(0, 4096, 0, 0x800, bad(|c| c.bf_size = 100)),
        Err(LayoutError::BadBlueFlameSize { size: 100 })
    );
    assert_eq!(
        make(0, 4096, 0, 0x800, bad(|c| c.bf_size = 0)),
        Err(LayoutError::BadBlueFlameSize { size: 0 })
    );
    assert_eq!(
        make(0, 4096, 0, 0x800, bad(|c| c.max_sge = 70)),
        Err(LayoutError::CapsTooLarge { ds: 73 })
    );
    // ctrl + UD address vector + 64 inline bytes: 9 octowords, 3 blocks.
    assert_eq!(
        make(
            0,
            64,
            0,
            0x800,
            bad(|c| {
                c.wqe_cnt = 1;
                c.max_wr = 1;
                c.qp_type = QpType::Ud
            })
        ),
        Err(LayoutError::CapsTooLarge { ds: 9 })
    );
}

/// A QP's CQs are sized for its `max_send_wr` requests, and small WQEs
/// would fit more in the ring: the queue counts requests too, as
/// rdma-core's `mlx5_wq_overflow` does, and a completion gives back every
/// request it retires (the unsignaled ones before it included).
#[test]
fn sends_are_bounded_by_max_wr_not_only_by_blocks() {
    let (mut ring, mut db, mut uar) = (page(), page(), page());
    let cfg = SqConfig {
        max_wr: 4,
        ..sq_cfg()
    };
    // SAFETY: three live pages that outlive the queue (dropped at the end
    // of this test); nothing else touches them.
    let mut sq = unsafe {
        SendQueue::new(
            ptr(&mut ring, 0),
            1024,
            ptr(&mut db, 0).cast(),
            ptr(&mut uar, 0x800),
            cfg,
        )
    }
    .unwrap();
    // One-block NOPs: 16 would fit the ring; 4 are taken.
    let mut taken = 0u32;
    while sq.post_nop(u64::from(taken), taken % 2 == 1).is_ok() {
        taken += 1;
        assert!(taken <= 16, "the ring's blocks bound it, not max_wr");
    }
    assert_eq!(taken, 4);
    assert_eq!(sq.post_nop(9, true), Err(PostError::QueueFull));
    assert_eq!(
        sq.free_wqebbs(),
        12,
        "the blocks are free; the requests not"
    );
    sq.ring();
    // The device completes the second NOP (signaled): it and the first go.
    let r = sq.complete(1).expect("outstanding");
    assert_eq!(r.wr_id, 1);
    assert_eq!(sq.records().tail(), 2);
    assert!(sq.post_nop(10, true).is_ok());
    assert!(sq.post_nop(11, true).is_ok());
    assert_eq!(sq.post_nop(12, true), Err(PostError::QueueFull));
    sq.ring();
    // The last of them (block 5) retires all four outstanding.
    assert_eq!(sq.complete(5).map(|r| r.wr_id), Some(11));
    assert_eq!(sq.records().tail(), 6);
    for k in 0..4 {
        assert!(sq.post_nop(20 + k, false).is_ok(), "request {k}");
    }
    assert_eq!(sq.post_nop(24, true), Err(PostError::QueueFull));
}

#[test]
fn receive_and_completion_layouts() {
    let (mut ring, mut db, mut uar) = (page(), page(), page());
    let (r, d, u) = (ptr(&mut ring, 0), ptr(&mut db, 0).cast(), ptr(&mut uar, 0));
    let rq = |len, cnt, shift, sge| {
        // SAFETY: live pages; the queue is dropped at once.
        unsafe { RecvQueue::new(r, len, d, cnt, shift, sge) }.map(|_| ())
    };
    assert_eq!(rq(4096, 64, 6, 4), Ok(()));
    assert_eq!(rq(4096, 64, 6, 5), Err(LayoutError::CapsTooLarge { ds: 5 }));
    assert_eq!(rq(4096, 64, 3, 1), Err(LayoutError::BadStride { shift: 3 }));
    assert_eq!(
        rq(4096, 128, 6, 1),
        Err(LayoutError::TooShort {
            need: 8192,
            len: 4096
        })
    );
    let srq = |cnt, shift, sge| {
        // SAFETY: live pages; the queue is dropped at once.
        unsafe { SharedRecvQueue::new(r, 4096, d, cnt, shift, sge) }.map(|_| ())
    };
    assert_eq!(srq(64, 6, 3), Ok(()));
    assert_eq!(srq(64, 6, 4), Err(LayoutError::CapsTooLarge { ds: 4 }));
    assert_eq!(srq(1, 6, 1), Err(LayoutError::BadCount { count: 1 }));
    let cq = |len, ncqe, cqe_size| {
        let cfg = CqConfig {
            ncqe,
            cqe_size,
            cqn: 7,
        };
        // SAFETY: as above.
        unsafe { CompletionQueue::new(r, len, d, u, cfg) }.map(|_| ())
    };
    assert_eq!(cq(4096, 32, 128), Ok(()));
    assert_eq!(
        cq(4096, 64, 128),
        Err(LayoutError::TooShort {
            need: 8192,
            len: 4096
        })
    );
    assert_eq!(cq(4096, 48, 64), Err(LayoutError::BadCount { count: 48 }));
    assert!(matches!(
        cq(4096, 32, 96),
        Err(LayoutError::BadStride { .. })
    ));
    // The CQ marks every entry invalid: opcode 0xF, owner 0.
    assert!((0..32).all(|i| ring.0[i * 128 + 127] == 0xf0));
}

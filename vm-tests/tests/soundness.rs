//! The safe API's promises where the kernel is involved (issue 25; the
//! rules and the tests that pin each are listed in `docs/soundness.md`):
//! drop order never matters for a posted UD send's address handle; a CQ
//! resize moves the overrun budget with it; an IOVA range that leaves the
//! 64-bit space is refused before the kernel; an MR kept by a memory
//! window says so when deregistration is refused, and one the kernel
//! refuses to deregister comes back to try again; a list posted
//! all-or-nothing is posted whole or not at all.

mod common;

use common::rc::{caps, ok, pair, self_av, wait, RW};
use rverbs::{
    Access, DeregisterError, Error, MwBind, MwType, QpInit, QpState, QpType, RecvWr, Remote,
    SendOp, SendWr, WcOpcode, WcStatus,
};

/// Issue 25, item 4, as a new user writes it: every UD send gets a fresh
/// AH, dropped at the end of the loop body while the send may still be
/// queued. rxe looks the AH up only when it runs the send, so before the
/// QP kept its AHs, most of these flushed (7 of 16 delivered; with 50,
/// none) and the QP went to ERR. Now every one is delivered, each once.
#[test]
fn an_ah_dropped_right_after_its_ud_send_does_not_kill_the_qp() {
    const N: usize = 50;
    const QKEY: u32 = 0x1111_1111;
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(256, None, 0).unwrap();
    let mk = || {
        pd.create_qp(&QpInit {
            caps: caps(64),
            sq_sig_all: true,
            ..QpInit::new(QpType::Ud, &cq)
        })
        .unwrap()
    };
    let (mut a, mut b) = (mk(), mk());
    for q in [&mut a, &mut b] {
        q.ready_ud(1, QKEY).unwrap();
    }
    let av = self_av(&ctx);
    // Each receive: the 40-byte GRH, then 8 bytes of message.
    let rbuf = pd.alloc_mr(N * 48, Access::LOCAL_WRITE).unwrap();
    for i in 0..N {
        let s = [rbuf.slice(i * 48, 48).unwrap()];
        b.post_recv(&[RecvWr {
            wr_id: 1000 + i as u64,
            sges: &s,
        }])
        .unwrap();
    }
    let sbuf = pd.alloc_mr(N * 8, Access::LOCAL_WRITE).unwrap();
    for i in 0..N {
        sbuf.write(i * 8, &(i as u64).to_le_bytes()).unwrap();
        let ah = pd.create_ah(&av).unwrap();
        let s = [sbuf.slice(i * 8, 8).unwrap()];
        a.post_send(&[SendWr::new(i as u64, SendOp::Send, &s).to(&ah, b.qpn(), QKEY)])
            .unwrap();
        // `ah` is dropped here, while its send may still be queued.
    }
    let done = wait(&mut cq, 2 * N);
    let bad: Vec<_> = done
        .iter()
        .filter(|w| w.status != WcStatus::SUCCESS)
        .collect();
    assert!(bad.is_empty(), "{} of {} failed: {bad:?}", bad.len(), 2 * N);
    let mut sends: Vec<u64> = done
        .iter()
        .filter(|w| w.opcode == WcOpcode::SEND)
        .map(|w| w.wr_id)
        .collect();
    sends.sort_unstable();
    assert_eq!(sends, (0..N as u64).collect::<Vec<_>>());
    // Every message arrived once, intact (after its GRH).
    let mut got = Vec::new();
    for w in done.iter().filter(|w| w.opcode == WcOpcode::RECV) {
        let mut m = [0u8; 8];
        rbuf.read((w.wr_id - 1000) as usize * 48 + 40, &mut m)
            .unwrap();
        got.push(u64::from_le_bytes(m));
    }
    got.sort_unstable();
    assert_eq!(got, (0..N as u64).collect::<Vec<_>>());
    assert_eq!(a.query_state().unwrap(), QpState::Rts);
}

/// Issue 25, item 3: the room QPs reserve on a CQ follows `Cq::resize`.
/// A shrink below what is reserved is refused before the kernel (it could
/// overrun); a grow makes room for QPs the old size refused.
#[test]
fn a_cq_resize_moves_the_overrun_budget() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let qp = |pd: &rverbs::Pd, cq: &rverbs::Cq, n: u32| {
        pd.create_qp(&QpInit {
            caps: caps(n),
            ..QpInit::new(QpType::Rc, cq)
        })
    };
    let first = qp(&pd, &cq, 32).expect("32 + 32 on a CQ of 64");
    let e = cq.resize(16).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { what } if what.contains("reserved 64")),
        "{e}"
    );
    assert!(cq.cqe() >= 64, "a refused shrink keeps the size");
    // Full: a second QP does not fit until the CQ grows.
    assert!(qp(&pd, &cq, 32).is_err());
    cq.resize(256).unwrap();
    let second = qp(&pd, &cq, 64).expect("64 + 64 more after growing to 256");
    drop((first, second));
    // Their reservations are gone with them: the CQ may shrink again.
    cq.resize(16).unwrap();
}

/// Issue 25, item 5: an IOVA whose range would pass `u64::MAX` is refused
/// by name before the kernel (slicing such an MR overflowed).
#[test]
fn an_iova_range_past_the_end_of_the_address_space_is_refused() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let page = 4096u64;
    let buf = vec![0u8; 2 * page as usize];
    // The IOVA keeps the buffer's offset in its page, as it must.
    let off = buf.as_ptr() as u64 % page;
    let iova = (u64::MAX - page + 1) + off;
    let e = pd
        .register_iova(buf, Access::LOCAL_WRITE, iova)
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { what } if what.contains("64-bit")),
        "{e}"
    );
}

/// Issue 25, error texts: an MR kept by a memory window is not
/// deregistered, and the refusal names the window (it said "other clones
/// of the MR exist", which the program did not hold); once the window is
/// gone, the buffer comes back.
#[test]
fn deregistering_an_mr_a_window_keeps_names_the_window() {
    let mut p = pair();
    let mr =
        p.pd.register(vec![7u8; 8192], Access::LOCAL_WRITE | Access::MW_BIND)
            .unwrap();
    let mut mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    p.b.qp
        .bind_mw(1, &mut mw, &mr, 0, 4096, RW - Access::LOCAL_WRITE)
        .unwrap();
    ok(&wait(&mut p.b.cq, 1)[0], WcOpcode::BIND_MW);
    let mr = match mr.deregister() {
        Err(DeregisterError::Windows(mr, w)) => {
            assert_eq!(w, vec![mw.rkey() >> 8]);
            let text = DeregisterError::Windows(mr.clone(), w).to_string();
            assert!(text.contains("window"), "{text}");
            assert!(!text.contains("clones"), "{text}");
            mr
        }
        other => panic!("expected the window named, got {other:?}"),
    };
    drop(mw);
    assert_eq!(mr.deregister().unwrap(), vec![7u8; 8192]);
}

/// A deregistration the kernel refuses hands the MR back, still
/// registered, to try again once the cause is gone — as `ibv_dereg_mr`
/// leaves a C program its MR (issue 25, item 6: the C ABI needs this to
/// answer as rdma-core does). The refusal here is rxe's: a type 1 window
/// bound to the MR by a raw `BIND_MW` request, which the safe API's
/// window bookkeeping does not see.
#[test]
fn a_refused_deregistration_keeps_the_mr_to_try_again() {
    let mut p = pair();
    let mr =
        p.pd.register(vec![9u8; 8192], Access::LOCAL_WRITE | Access::MW_BIND)
            .unwrap();
    let mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    let bind = MwBind {
        mw_rkey: mw.rkey(),
        new_rkey: (mw.rkey() & !0xff) | ((mw.rkey() + 1) & 0xff),
        mr_lkey: mr.lkey(),
        addr: mr.iova(),
        length: 4096,
        access: Access::REMOTE_READ.bits(),
    };
    p.b.qp
        .post_send(&[SendWr::new(1, SendOp::BindMw(bind), &[])])
        .unwrap();
    ok(&wait(&mut p.b.cq, 1)[0], WcOpcode::BIND_MW);
    let mr = match mr.deregister() {
        Err(DeregisterError::Kernel(mr, e)) => {
            assert_eq!(e.errno().map(|e| e.0), Some(libc_einval()), "{e}");
            mr
        }
        other => panic!("expected the kernel's refusal, got {other:?}"),
    };
    // Still registered: the memory is reachable through the MR.
    mr.write(0, b"still here").unwrap();
    mw.dealloc().unwrap();
    let back = mr.deregister().unwrap();
    assert_eq!(&back[..10], b"still here");
}

fn libc_einval() -> i32 {
    22
}

/// An all-or-nothing post (`Qp::post_send_all`, what `ibv_wr_complete`
/// needs) posts nothing when one request is invalid or the queue cannot
/// take them all, and names the first one that does not go.
#[test]
fn post_send_all_posts_a_whole_list_or_nothing() {
    let mut p = pair();
    let src = p.pd.alloc_mr(4096, RW).unwrap();
    let dst = p.pd.alloc_mr(4096, RW).unwrap();
    let r = Remote {
        addr: dst.iova(),
        rkey: dst.rkey(),
    };
    let s = [src.slice(0, 8).unwrap()];
    let three = [s[0]; 3];
    let bad = [
        SendWr::new(1, SendOp::Write(r), &s),
        SendWr::new(2, SendOp::Write(r), &s),
        SendWr::new(3, SendOp::Write(r), &three),
    ];
    match p.a.qp.post_send_all(&bad).unwrap_err() {
        Error::InvalidWorkRequest { index: 2, .. } => {}
        e => panic!("expected request 2 refused, got {e}"),
    }
    let many: Vec<SendWr> = (0..p.a.qp.caps().max_send_wr as u64 + 40)
        .map(|i| SendWr::new(10 + i, SendOp::Write(r), &s).signaled(true))
        .collect();
    match p.a.qp.post_send_all(&many).unwrap_err() {
        Error::QueueFull { .. } => {}
        e => panic!("expected a full queue, got {e}"),
    }
    // Neither list reached the ring: no completion comes.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut out = [rverbs::Wc::default(); 4];
    assert_eq!(p.a.cq.poll(&mut out), 0, "{:?}", &out[..]);
    // A list that fits goes whole.
    p.a.qp.post_send_all(&many[..4]).unwrap();
    let done = wait(&mut p.a.cq, 4);
    assert!(done.iter().all(|w| w.is_ok()), "{done:?}");
}

/// A QP's queues hold no more requests than the kernel granted, which is
/// what the QP reserved on its CQs: Linux 6.1's rxe grants the depth asked
/// for but makes each ring the next power of two less one (16 asked, 31
/// slots), and the queues took requests until the ring was full, so a CQ
/// sized for the granted depths could overrun. The QP here sends to a QP
/// number nobody has: nothing is acknowledged, so every request stays in
/// the queue while the test posts.
#[test]
fn a_queue_holds_no_more_than_its_granted_depth() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let mut qp = pd
        .create_qp(&QpInit {
            caps: caps(16),
            ..QpInit::new(QpType::Rc, &cq)
        })
        .unwrap();
    let granted = qp.caps();
    assert!(
        granted.max_send_wr >= 16 && granted.max_recv_wr >= 16,
        "{granted:?}"
    );
    let buf = pd.alloc_mr(4096, RW).unwrap();
    let s = [buf.slice(0, 8).unwrap()];
    let full = |e: Error| matches!(e, Error::QueueFull { .. });
    for i in 0..granted.max_recv_wr as u64 {
        qp.post_recv(&[RecvWr { wr_id: i, sges: &s }])
            .unwrap_or_else(|e| panic!("receive {i} of {granted:?}: {e}"));
    }
    let e = qp
        .post_recv(&[RecvWr {
            wr_id: 99,
            sges: &s,
        }])
        .unwrap_err();
    assert!(
        full(e),
        "one receive past max_recv_wr {}",
        granted.max_recv_wr
    );
    qp.connect(1, RW, self_av(&ctx), 0xfff_ff0).unwrap();
    let r = Remote {
        addr: buf.iova(),
        rkey: buf.rkey(),
    };
    for i in 0..granted.max_send_wr as u64 {
        qp.post_send(&[SendWr::new(i, SendOp::Write(r), &s)])
            .unwrap_or_else(|e| panic!("send {i} of {granted:?}: {e}"));
    }
    let e = qp
        .post_send(&[SendWr::new(99, SendOp::Write(r), &s)])
        .unwrap_err();
    assert!(full(e), "one send past max_send_wr {}", granted.max_send_wr);
    let e = qp.build_send().map(|mut b| {
        b.start(100, SendOp::Write(r), Default::default());
        b.sge(s[0]);
        b.finish()
    });
    assert!(
        matches!(e, Ok(Err(Error::QueueFull { .. }))),
        "built: {e:?}"
    );
    drop(qp);
    let mut out = [rverbs::Wc::default(); 64];
    let _ = cq.poll(&mut out);
}

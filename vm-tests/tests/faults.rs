//! Fault injection on rxe0: many objects made and destroyed with nothing
//! left behind, and the network device going down under a connection.
//! Each test asserts bounded time, a named outcome, and that every posted
//! work request completed exactly once. The tests of this file run one at
//! a time (they share veth0's state): each takes `SERIAL`.

mod common;

use common::rc::{caps, connect, wait_up_to};
use rverbs::{
    Access, Context, Cq, Pd, Qp, QpAttr, QpInit, QpType, Result, SendOp, SendWr, Wc, WcStatus,
};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// A new RC QP on `cq`, 8 sends and 8 receives deep.
fn rc(pd: &Pd, cq: &Cq) -> Result<Qp> {
    pd.create_qp(&QpInit {
        caps: caps(8),
        ..QpInit::new(QpType::Rc, cq)
    })
}

/// Two RC QPs of one process connected through the port's own address
/// (an error, not a panic, while the port's GID is gone with its link).
fn connect_rw(ctx: &Context, a: &mut Qp, b: &mut Qp) -> Result<()> {
    let av = ctx.port_address(1)?;
    connect(a, b, Access::LOCAL_WRITE | Access::REMOTE_WRITE, av)
}

/// 10,000 rounds of PD, MR, CQ, QP (to RTS and back to ERR) made and
/// dropped: the process's fds and resident memory stay flat — every
/// DESTROY ran, every mapping went.
#[test]
fn ten_thousand_create_destroy_cycles_leave_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (ctx, _) = common::open();
    let round = |i: u32| -> Result<()> {
        let pd = ctx.alloc_pd()?;
        let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
        let cq = ctx.create_cq(16, None, 0)?;
        let mut qp = rc(&pd, &cq)?;
        qp.modify(&QpAttr::init(1, Access::LOCAL_WRITE))?;
        mr.write(0, &i.to_ne_bytes())?;
        Ok(())
    };
    // Warm up (allocator arenas, the first mappings), then measure.
    for i in 0..200 {
        round(i).unwrap();
    }
    let (fds0, rss0) = common::fds_and_rss();
    let start = Instant::now();
    for i in 0..10_000 {
        round(i).unwrap_or_else(|e| panic!("round {i}: {e}"));
    }
    let (fds1, rss1) = common::fds_and_rss();
    eprintln!(
        "10,000 rounds in {:?}: fds {fds0} -> {fds1}, RSS {rss0} -> {rss1} KiB",
        start.elapsed()
    );
    assert_eq!(fds0, fds1, "fds leaked");
    assert!(
        rss1 < rss0 + 4096,
        "resident memory grew from {rss0} to {rss1} KiB"
    );
}

/// veth0, under rxe0, goes down while a connection is up: a send ends in
/// bounded time with an error status (rxe flushes the QP when its port
/// goes down), exactly once; once veth0 is up again the device carries
/// traffic again on a new connection.
#[test]
fn netdev_down_and_up() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let mut cq = ctx.create_cq(64, None, 0).unwrap();
    let (mut a, mut b) = (rc(&pd, &cq).unwrap(), rc(&pd, &cq).unwrap());
    connect_rw(&ctx, &mut a, &mut b).unwrap();
    let src = pd.alloc_mr(64, Access::LOCAL_WRITE).unwrap();
    let dst = pd
        .alloc_mr(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let remote = rverbs::Remote {
        addr: dst.addr(),
        rkey: dst.rkey(),
    };
    let s = [src.slice(0, 8).unwrap()];
    let ip = |state: &str| {
        let o = Command::new("ip")
            .args(["link", "set", "veth0", state])
            .output()
            .expect("run ip");
        assert!(o.status.success(), "{}", common::show(&o));
    };

    ip("down");
    let start = Instant::now();
    a.post_send(&[SendWr::new(1, SendOp::Write(remote), &s)])
        .unwrap();
    let c = wait_up_to(&mut cq, 1, Duration::from_secs(20));
    ip("up");
    assert_eq!(c.len(), 1, "the write did not complete in 20 s: {c:?}");
    assert_eq!(c[0].wr_id, 1);
    // 6.12 and later flush the QP when the port goes down (or retry until
    // the retry count runs out); 6.1's rxe fails to transmit and completes
    // the WQE as a local QP operation error.
    let expected: &[WcStatus] = match common::kernel_series().as_str() {
        "6.1" => &[WcStatus::LOC_QP_OP_ERR],
        _ => &[WcStatus::WR_FLUSH_ERR, WcStatus::RETRY_EXC_ERR],
    };
    assert!(
        expected.contains(&c[0].status),
        "a write with the link down: {:?}",
        c[0]
    );
    eprintln!(
        "write with veth0 down: {} after {:?}",
        c[0].status,
        start.elapsed()
    );
    // Exactly once: nothing more arrives.
    std::thread::sleep(Duration::from_millis(300));
    let mut more = [Wc::default(); 4];
    assert_eq!(cq.poll(&mut more), 0, "{more:?}");

    // Back up: a fresh connection moves data again (the port and its GID
    // may take a moment to come back).
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let ok = (|| -> Result<bool> {
            let mut cq2 = ctx.create_cq(64, None, 0)?;
            let (mut c1, mut c2) = (rc(&pd, &cq2)?, rc(&pd, &cq2)?);
            connect_rw(&ctx, &mut c1, &mut c2)?;
            c1.post_send(&[SendWr::new(2, SendOp::Write(remote), &s)])?;
            let c = wait_up_to(&mut cq2, 1, Duration::from_secs(5));
            Ok(c.len() == 1 && c[0].status == WcStatus::SUCCESS)
        })();
        if let Ok(true) = ok {
            break;
        }
        assert!(
            Instant::now() < until,
            "no traffic 20 s after veth0 came back: {ok:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

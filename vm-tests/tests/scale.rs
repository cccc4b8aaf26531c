//! Many objects at once on rxe0: a thousand connected RC QPs carrying a
//! message each over two shared CQs, 64 QPs receiving through one SRQ;
//! and what a QP costs to create (time, resident memory, and kernel
//! commands counted by strace) through our API, through a C program over
//! our `libibverbs.so.1`, and over rdma-core's.
//! Run with `--nocapture` for the figures.

mod common;

use common::ibverbs_so::{build_c, lib_dir, ours, run, theirs};
use common::rc::{caps, connect, self_av, wait};
use common::{env, show};
use rverbs::{Access, Cq, Pd, Qp, QpInit, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};
use std::collections::BTreeSet;
use std::time::Instant;

/// `n` RC QPs of two sends and two receives, all on `cq`.
fn rc_qps(pd: &Pd, cq: &Cq, n: usize) -> Vec<Qp> {
    (0..n)
        .map(|i| {
            pd.create_qp(&QpInit {
                caps: caps(2),
                ..QpInit::new(QpType::Rc, cq)
            })
            .unwrap_or_else(|e| panic!("QP {i} of {n}: {e}"))
        })
        .collect()
}

const N: usize = 1000;

/// 1,000 RC QPs on one CQ, each connected to one of 1,000 others on a
/// second CQ, one SEND each way's completion checked: every wr_id once on
/// each CQ, every message on its own QP with its own bytes; then all
/// dropped, and the process has the fds it had before.
#[test]
fn a_thousand_rc_qps_connect_and_carry_a_message_each_over_two_shared_cqs() {
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let av = self_av(&ctx);
    let (fds0, rss0) = common::fds_and_rss();
    // 1,000 QPs of 2 + 2 entries: 4,000 a CQ must hold.
    let mut cq_a = ctx.create_cq(4 * N as u32, None, 0).unwrap();
    let mut cq_b = ctx.create_cq(4 * N as u32, None, 0).unwrap();
    let t = Instant::now();
    let mut a = rc_qps(&pd, &cq_a, N);
    let created = t.elapsed();
    let (_, rss1) = common::fds_and_rss();
    let mut b = rc_qps(&pd, &cq_b, N);
    let t = Instant::now();
    for (x, y) in a.iter_mut().zip(b.iter_mut()) {
        connect(x, y, Access::LOCAL_WRITE, av).unwrap();
    }
    let connected = t.elapsed();
    let sbuf = pd.alloc_mr(8 * N, Access::LOCAL_WRITE).unwrap();
    let rbuf = pd.alloc_mr(8 * N, Access::LOCAL_WRITE).unwrap();
    for (i, q) in b.iter_mut().enumerate() {
        sbuf.write(8 * i, &(i as u64 ^ 0x5ca1e).to_le_bytes())
            .unwrap();
        let rs = [rbuf.slice(8 * i, 8).unwrap()];
        q.post_recv(&[RecvWr {
            wr_id: i as u64,
            sges: &rs,
        }])
        .unwrap();
    }
    for (i, q) in a.iter_mut().enumerate() {
        let ss = [sbuf.slice(8 * i, 8).unwrap()];
        q.post_send(&[SendWr::new(i as u64, SendOp::Send, &ss)])
            .unwrap();
    }
    let sent = wait(&mut cq_a, N);
    let received = wait(&mut cq_b, N);
    let mut seen = BTreeSet::new();
    for w in &sent {
        assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
        assert_eq!(w.qp_num, a[w.wr_id as usize].qpn(), "{w:?}");
        assert!(seen.insert(w.wr_id), "send {} completed twice", w.wr_id);
    }
    seen.clear();
    for w in &received {
        let i = w.wr_id as usize;
        assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
        assert_eq!(w.opcode, WcOpcode::RECV, "{w:?}");
        assert_eq!((w.qp_num, w.byte_len), (b[i].qpn(), 8), "{w:?}");
        assert!(seen.insert(w.wr_id), "receive {i} completed twice");
        let mut got = [0u8; 8];
        rbuf.read(8 * i, &mut got).unwrap();
        assert_eq!(u64::from_le_bytes(got), i as u64 ^ 0x5ca1e, "message {i}");
    }
    drop((a, b, sbuf, rbuf, cq_a, cq_b));
    let (fds2, rss2) = common::fds_and_rss();
    assert_eq!(fds2, fds0, "fds before and after");
    println!(
        "rverbs ({} build): {N} RC QPs created in {:.1} ms ({:.0} us per QP), +{} KiB RSS ({:.1} KiB per QP); {N} pairs connected in {:.1} ms; RSS {rss0} -> {rss2} KiB after all dropped",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        created.as_secs_f64() * 1e3,
        created.as_secs_f64() * 1e6 / N as f64,
        rss1 - rss0,
        (rss1 - rss0) as f64 / N as f64,
        connected.as_secs_f64() * 1e3,
    );
}

/// The C program of `scale.c` creating 1,000 QPs, over rdma-core's
/// libibverbs and over ours: both create them all and destroy them all;
/// the time and memory per QP are printed beside each other. Ours here is
/// `target/cshim`'s library, a debug build (the README's figures are of
/// the `cshim-release` one).
#[test]
fn a_thousand_qps_from_c_over_rdma_core_and_over_ours() {
    let exe = build_c("scale", include_str!("scale.c"), &["-O2"]);
    let dev = env().dev;
    for (who, mut c) in [("rdma-core", theirs(&exe)), ("rverbs", ours(&exe))] {
        c.args([dev.as_str(), &N.to_string()]);
        let o = run(c);
        assert!(o.status.success(), "scale over {who}: {}", show(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        let f: Vec<i64> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [n, ns, before, after] = f[..] else {
            panic!("scale over {who}: {text}")
        };
        assert_eq!(n, N as i64, "{text}");
        println!(
            "C over {who}: {N} RC QPs created in {:.1} ms ({:.0} us per QP), +{} KiB RSS ({:.1} KiB per QP)",
            ns as f64 / 1e6,
            ns as f64 / 1e3 / N as f64,
            after - before,
            (after - before) as f64 / N as f64
        );
    }
}

/// The kernel commands (`ioctl()`s and, on the write path, `write()`s to
/// the uverbs fd) of `scale.c` creating and destroying `n` QPs over one
/// library, counted by strace.
fn commands(is_ours: bool, exe: &str, dev: &str, n: usize) -> (usize, usize) {
    let trace = format!(
        "/tmp/scale-{}-{n}.strace",
        if is_ours { "ours" } else { "theirs" }
    );
    let mut c = common::ibverbs_so::over(is_ours, "strace");
    c.args([
        "-f",
        "-qq",
        "-e",
        "trace=ioctl,write,openat",
        "-o",
        &trace,
        exe,
        dev,
    ])
    .arg(n.to_string());
    let o = run(c);
    assert!(o.status.success(), "strace of scale {n}: {}", show(&o));
    let text = std::fs::read_to_string(&trace).expect("strace's output");
    // The library that ran is the one meant: a count of rdma-core's
    // commands under the name of ours would prove nothing.
    let ours_dir = lib_dir().display().to_string();
    let loaded_ours = text.lines().any(|l| {
        l.contains("openat(")
            && l.contains(&ours_dir)
            && l.contains("libibverbs.so.1")
            && !l.contains("= -1")
    });
    assert_eq!(
        loaded_ours, is_ours,
        "our libibverbs.so.1 loaded: {loaded_ours}"
    );
    let count = |call: &str| text.lines().filter(|l| l.contains(call)).count();
    (count("ioctl("), count("write("))
}

/// Creating a QP over our `libibverbs.so.1` takes no more kernel commands
/// than over rdma-core's: the difference between 200 QPs and 100 QPs
/// (the device opening, the program's own writes and the rest counted
/// once cancel out) is each library's commands for 100 QPs created and
/// destroyed. rdma-core's rxe provider issues CREATE_QP and DESTROY_QP and
/// nothing else per QP; ours did one QUERY_DEVICE_EX more per QP until the
/// device's capability flags were cached per context.
#[test]
fn a_qp_costs_no_more_kernel_commands_over_ours_than_over_rdma_core() {
    let exe = build_c("scale", include_str!("scale.c"), &["-O2"]);
    let dev = env().dev;
    let per_100 = |is_ours: bool| {
        let (i1, w1) = commands(is_ours, &exe, &dev, 100);
        let (i2, w2) = commands(is_ours, &exe, &dev, 200);
        (i2 - i1) + (w2 - w1)
    };
    let (theirs, ours) = (per_100(false), per_100(true));
    println!("kernel commands per 100 QPs created and destroyed: rdma-core {theirs}, ours {ours}");
    assert!(
        theirs >= 200,
        "rdma-core: CREATE_QP and DESTROY_QP per QP at least ({theirs})"
    );
    assert!(
        ours <= theirs,
        "over ours a QP takes more kernel commands ({ours} per 100) than over rdma-core ({theirs})"
    );
}

/// 64 RC QPs receiving through one SRQ, each sent four messages by its
/// own peer: the SRQ's 256 receives complete once each, every one naming
/// the QP it arrived on and holding that QP's bytes.
#[test]
fn sixty_four_qps_receive_through_one_srq() {
    const QPS: usize = 64;
    const EACH: usize = 4;
    let (ctx, _) = common::open();
    let pd = ctx.alloc_pd().unwrap();
    let av = self_av(&ctx);
    let mut scq = ctx.create_cq((QPS * 4) as u32, None, 0).unwrap();
    let mut rcq = ctx.create_cq((QPS * EACH * 2) as u32, None, 0).unwrap();
    let mut srq = pd.create_srq((QPS * EACH) as u32, 1, 0).unwrap();
    let mut senders = rc_qps(&pd, &scq, QPS);
    let mut receivers: Vec<Qp> = (0..QPS)
        .map(|_| {
            pd.create_qp(&QpInit {
                caps: caps(EACH as u32),
                srq: Some(&srq),
                ..QpInit::new(QpType::Rc, &rcq)
            })
            .unwrap()
        })
        .collect();
    for (x, y) in senders.iter_mut().zip(receivers.iter_mut()) {
        connect(x, y, Access::LOCAL_WRITE, av).unwrap();
    }
    let rbuf = pd.alloc_mr(8 * QPS * EACH, Access::LOCAL_WRITE).unwrap();
    for r in 0..QPS * EACH {
        let rs = [rbuf.slice(8 * r, 8).unwrap()];
        srq.post_recv(&[RecvWr {
            wr_id: r as u64,
            sges: &rs,
        }])
        .unwrap();
    }
    let sbuf = pd.alloc_mr(8 * QPS, Access::LOCAL_WRITE).unwrap();
    for (q, s) in senders.iter_mut().enumerate() {
        sbuf.write(8 * q, &(q as u64).to_le_bytes()).unwrap();
        let ss = [sbuf.slice(8 * q, 8).unwrap()];
        // Two at a time: each QP has room for two sends.
        for m in 0..EACH {
            s.post_send(&[SendWr::new((q * EACH + m) as u64, SendOp::Send, &ss)])
                .unwrap();
            if m % 2 == 1 {
                for w in wait(&mut scq, 2) {
                    assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
                }
            }
        }
    }
    let got = wait(&mut rcq, QPS * EACH);
    let mut per_qp = vec![0; QPS];
    let mut seen = BTreeSet::new();
    for w in &got {
        assert_eq!(w.status, WcStatus::SUCCESS, "{w:?}");
        assert!(seen.insert(w.wr_id), "SRQ receive {} twice", w.wr_id);
        let q = receivers
            .iter()
            .position(|r| r.qpn() == w.qp_num)
            .unwrap_or_else(|| panic!("a receive on no QP of ours: {w:?}"));
        let mut b = [0u8; 8];
        rbuf.read(8 * w.wr_id as usize, &mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), q as u64, "{w:?}");
        per_qp[q] += 1;
    }
    assert!(per_qp.iter().all(|&n| n == EACH), "{per_qp:?}");
}

//! Two connected RC QPs of one PD on the test device, and the few helpers
//! the tests that move data between them share.

use rverbs::{
    Access, AhAttr, Context, Cq, Grh, Mtu, Pd, Qp, QpAttr, QpCaps, QpInit, QpType, Wc, WcOpcode,
    WcStatus,
};
use std::time::{Duration, Instant};

/// Local write, remote write and remote read.
pub const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// One end: its CQ (sends and receives) and its QP.
pub struct Side {
    pub cq: Cq,
    pub qp: Qp,
}

/// Two RC QPs of one PD on the test device, connected to each other.
pub struct Pair {
    pub ctx: Context,
    pub pd: Pd,
    pub a: Side,
    pub b: Side,
}

fn side(ctx: &Context, pd: &Pd) -> Side {
    let cq = ctx.create_cq(64, None, 0).expect("create CQ");
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 0,
    };
    let qp = pd
        .create_qp(&QpInit {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            caps,
            sq_sig_all: false,
            srq: None,
        })
        .expect("create QP");
    Side { cq, qp }
}

/// Opens the test device and connects two RC QPs (RESET → INIT → RTR →
/// RTS), each allowing remote write, read and atomics.
pub fn pair() -> Pair {
    pair_with(RW | Access::REMOTE_ATOMIC)
}

/// [`pair`], with the QPs allowing `qp_access` instead (FLUSH needs the
/// QP's FLUSH access as well as the MR's).
pub fn pair_with(qp_access: Access) -> Pair {
    let e = super::env();
    let ctx = Context::open_by_name(Some(&e.dev)).expect("open the test device");
    let pd = ctx.alloc_pd().expect("alloc PD");
    let (mut a, mut b) = (side(&ctx, &pd), side(&ctx, &pd));
    let gid = ctx.query_gid(1, e.gid).expect("query GID");
    let av = AhAttr {
        port_num: 1,
        grh: Some(Grh {
            dgid: gid,
            sgid_index: e.gid as u8,
            hop_limit: 1,
            ..Grh::default()
        }),
        ..AhAttr::default()
    };
    let (qa, qb) = (a.qp.qpn(), b.qp.qpn());
    for (s, peer) in [(&mut a, qb), (&mut b, qa)] {
        s.qp.modify(&QpAttr::init(1, qp_access)).expect("to INIT");
        s.qp.modify(&QpAttr::rtr(av, Mtu::M1024, peer, 0))
            .expect("to RTR");
        s.qp.modify(&QpAttr::rts(0)).expect("to RTS");
    }
    Pair { ctx, pd, a, b }
}

/// Polls until `n` completions arrived (or 10 s passed).
pub fn wait(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    let mut buf = [Wc::default(); 8];
    while out.len() < n {
        let k = cq.poll(&mut buf);
        out.extend_from_slice(&buf[..k]);
        assert!(
            Instant::now() < until,
            "timed out with {} of {n} completions: {out:?}",
            out.len()
        );
    }
    out
}

/// Asserts a successful completion of `opcode`.
pub fn ok(wc: &Wc, opcode: WcOpcode) {
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::SUCCESS, opcode),
        "{wc:?}"
    );
}

/// `len` bytes of a pattern that differs with `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8)
        .collect()
}

//! QPs of the test device connected to each other, and what the tests
//! that move data between them share: the access sets, queue sizes, the
//! port's own address, and bounded waits for completions.

use rverbs::{
    Access, AhAttr, Context, Cq, Mr, MrMemory, Pd, Qp, QpCaps, QpInit, QpType, Result, Wc,
    WcOpcode, WcStatus,
};
use std::time::Duration;

/// Local write, remote write and remote read.
pub const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// [`RW`] and remote atomics.
pub const ALL: Access = RW.union(Access::REMOTE_ATOMIC);

/// How long [`wait`] waits for the completions it was asked for.
pub const WAIT: Duration = Duration::from_secs(20);

/// `depth` sends and `depth` receives of one SGE each, no inline data
/// ([`QpCaps::default`] with another depth).
pub fn caps(depth: u32) -> QpCaps {
    QpCaps {
        max_send_wr: depth,
        max_recv_wr: depth,
        ..QpCaps::default()
    }
}

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

/// A CQ of 64 entries and a new RC QP (RESET) with `caps` on it.
pub fn side(ctx: &Context, pd: &Pd, caps: QpCaps) -> Side {
    let cq = ctx.create_cq(64, None, 0).expect("create CQ");
    let qp = pd
        .create_qp(&QpInit {
            caps,
            ..QpInit::new(QpType::Rc, &cq)
        })
        .expect("create QP");
    Side { cq, qp }
}

/// The test port's own address ([`Context::port_address`]), which a QP of
/// this device puts in its RTR or AH to reach another QP of it; checked
/// to route by the GID the VM named, so that the tests address what they
/// did when they built it from `RVERBS_TEST_GID` themselves.
pub fn self_av(ctx: &Context) -> AhAttr {
    let av = ctx.port_address(1).expect("the port's own address");
    let gid = super::env().gid;
    assert_eq!(
        av.grh.map(|g| u32::from(g.sgid_index)),
        Some(gid),
        "the port's address routes by the test GID: {av:?}"
    );
    av
}

/// Connects two new RC or UC QPs (RESET) of the test device to each other
/// at `av` (one device: each reaches the other at the port's own address,
/// [`self_av`]): each through INIT, RTR and RTS in one [`Qp::connect`]
/// (port 1, PSNs 0), allowing the peer `access`.
pub fn connect(a: &mut Qp, b: &mut Qp, access: Access, av: AhAttr) -> Result<()> {
    let (qa, qb) = (a.qpn(), b.qpn());
    a.connect(1, access, av, qb)?;
    b.connect(1, access, av, qa)
}

/// Opens the test device and connects two RC QPs (RESET → INIT → RTR →
/// RTS), each allowing remote write, read and atomics.
pub fn pair() -> Pair {
    pair_with(ALL)
}

/// [`pair`], with the QPs allowing `qp_access` instead (FLUSH needs the
/// QP's FLUSH access as well as the MR's).
pub fn pair_with(qp_access: Access) -> Pair {
    let (ctx, _) = super::open();
    let pd = ctx.alloc_pd().expect("alloc PD");
    let caps = QpCaps {
        max_send_sge: 2,
        max_recv_sge: 2,
        ..caps(16)
    };
    let (mut a, mut b) = (side(&ctx, &pd, caps), side(&ctx, &pd, caps));
    connect(&mut a.qp, &mut b.qp, qp_access, self_av(&ctx)).expect("connect the pair");
    Pair { ctx, pd, a, b }
}

/// Polls until `n` completions arrived and returns them as they came,
/// errors included; panics after [`WAIT`], naming those that came. Takes
/// no more than `n`: later ones stay in the CQ.
pub fn wait(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let got = wait_up_to(cq, n, WAIT);
    assert_eq!(
        got.len(),
        n,
        "timed out with {} of {n} completions: {got:?}",
        got.len()
    );
    got
}

/// Polls until `n` completions arrived or `limit` passed, and returns
/// those that came: fewer than `n` is no failure here, for the tests where
/// how many came is the outcome they check.
pub fn wait_up_to(cq: &mut Cq, n: usize, limit: Duration) -> Vec<Wc> {
    let mut out = vec![Wc::default(); n];
    let got = cq.poll_until(&mut out, std::time::Instant::now() + limit);
    out.truncate(got);
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

/// Every byte of `mr`.
pub fn contents<B: MrMemory>(mr: &Mr<B>) -> Vec<u8> {
    let mut v = vec![0u8; mr.len()];
    mr.read(0, &mut v).unwrap();
    v
}

/// `len` bytes of a pattern that differs with `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8)
        .collect()
}

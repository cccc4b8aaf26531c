//! Memory windows on rxe, type 1 and type 2: a peer's WRITE and READ
//! through a bound window move real bytes (checked over the whole MR, so
//! that nothing outside the window changes), and every way of closing a
//! window is followed by the access that must now fail with
//! `REM_ACCESS_ERR`, as in rdma-core's `test_mr.py` window tests: a rebind
//! (the old rkey), a local invalidate, a peer's SEND with invalidate. The
//! kernel's own refusals come back as the statuses rdma-core expects
//! (a failed local operation: the QP goes to ERR).

mod common;

use common::rc::{contents, ok, pair, pattern, wait, Pair, RW};
use rverbs::{
    Access, Error, Mr, Mw, MwBind, MwType, QpState, RecvWr, Remote, SendOp, SendWr, WcFlags,
    WcOpcode, WcStatus,
};

const LEN: usize = 16384;
/// The window: 4 KiB from offset 4096 of the MR.
const WIN_OFF: usize = 4096;
const WIN_LEN: usize = 4096;

/// The target MR: local write and window binds only — no remote access of
/// its own, so every remote access below goes through a window.
fn target(p: &Pair) -> Mr {
    let mr =
        p.pd.alloc_mr(LEN, Access::LOCAL_WRITE | Access::MW_BIND)
            .unwrap();
    mr.write(0, &pattern(LEN, 1)).unwrap();
    mr
}

/// Binds `mw` on B's QP (where the peer's requests arrive) and waits for
/// the bind's completion.
fn bind(p: &mut Pair, mw: &mut Mw, mr: &Mr, access: Access) -> u32 {
    let rkey =
        p.b.qp
            .bind_mw(100, mw, mr, WIN_OFF, WIN_LEN, access)
            .expect("post BIND_MW");
    let wc = wait(&mut p.b.cq, 1)[0];
    ok(&wc, WcOpcode::BIND_MW);
    assert_eq!(wc.wr_id, 100);
    assert_eq!(mw.rkey(), rkey);
    rkey
}

/// A writes `data` at `off` of the window `rkey` opens onto `mr`; returns
/// the completion.
fn write_through(p: &mut Pair, mr: &Mr, rkey: u32, off: usize, data: &[u8]) -> rverbs::Wc {
    let src = p.pd.alloc_mr(data.len(), RW).unwrap();
    src.write(0, data).unwrap();
    let s = [src.all().unwrap()];
    let remote = Remote {
        addr: mr.iova() + off as u64,
        rkey,
    };
    p.a.qp
        .post_send(&[SendWr::new(1, SendOp::Write(remote), &s)])
        .unwrap();
    wait(&mut p.a.cq, 1)[0]
}

/// A reads `len` bytes at `off` through `rkey`.
fn read_through(p: &mut Pair, addr: u64, rkey: u32, len: usize) -> (rverbs::Wc, Vec<u8>) {
    let dst = p.pd.alloc_mr(len, RW).unwrap();
    let s = [dst.all().unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(2, SendOp::Read(Remote { addr, rkey }), &s)])
        .unwrap();
    let wc = wait(&mut p.a.cq, 1)[0];
    let mut v = vec![0; len];
    dst.read(0, &mut v).unwrap();
    (wc, v)
}

/// WRITE then READ back through the window, checking the whole MR.
fn round_trip(p: &mut Pair, mr: &Mr, rkey: u32, seed: u32) {
    let data = pattern(WIN_LEN, seed);
    let mut want = contents(mr);
    ok(
        &write_through(p, mr, rkey, WIN_OFF, &data),
        WcOpcode::RDMA_WRITE,
    );
    want[WIN_OFF..WIN_OFF + WIN_LEN].copy_from_slice(&data);
    assert_eq!(contents(mr), want, "only the window's bytes changed");
    let (wc, got) = read_through(p, mr.iova() + WIN_OFF as u64, rkey, WIN_LEN);
    ok(&wc, WcOpcode::RDMA_READ);
    assert_eq!(got, data);
}

fn assert_remote_access_error(wc: &rverbs::Wc) {
    assert_eq!(wc.status, WcStatus::REM_ACCESS_ERR, "{wc:?}");
}

/// A pair, B's target MR and a window of type `ty` bound onto it for
/// remote read and write: the start of most tests below.
fn bound_rw(ty: MwType) -> (Pair, Mr, Mw, u32) {
    let mut p = pair();
    let mr = target(&p);
    let mut mw = p.pd.alloc_mw(ty).unwrap();
    let rkey = bind(
        &mut p,
        &mut mw,
        &mr,
        Access::REMOTE_WRITE | Access::REMOTE_READ,
    );
    (p, mr, mw, rkey)
}

/// A's WRITE through `rkey` fails with REM_ACCESS_ERR and changes nothing.
fn assert_write_refused(p: &mut Pair, mr: &Mr, rkey: u32) {
    let before = contents(mr);
    assert_remote_access_error(&write_through(p, mr, rkey, WIN_OFF, &[1; 64]));
    assert_eq!(contents(mr), before, "a refused write changed nothing");
}

/// B invalidates `rkey` locally (wr_id `wr_id`), without waiting.
fn post_local_inv(p: &mut Pair, wr_id: u64, rkey: u32) {
    p.b.qp
        .post_send(&[SendWr::new(wr_id, SendOp::LocalInv(rkey), &[])])
        .unwrap();
}

#[test]
fn type1_window_moves_bytes_and_its_old_rkey_dies_on_rebind() {
    let mut p = pair();
    let mr = target(&p);
    let mut mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    assert_eq!(mw.mw_type(), MwType::Type1);
    let first = mw.rkey();
    let rkey = bind(
        &mut p,
        &mut mw,
        &mr,
        Access::REMOTE_WRITE | Access::REMOTE_READ,
    );
    // Same window index, next key (ibv_inc_rkey).
    assert_eq!((rkey >> 8, rkey & 0xff), (first >> 8, (first + 1) & 0xff));
    round_trip(&mut p, &mr, rkey, 2);
    // Rebinding read-only moves the rkey; the new one reads...
    let rkey2 = bind(&mut p, &mut mw, &mr, Access::REMOTE_READ);
    assert_ne!(rkey2, rkey);
    let before = contents(&mr);
    let (wc, got) = read_through(&mut p, mr.iova() + WIN_OFF as u64, rkey2, WIN_LEN);
    ok(&wc, WcOpcode::RDMA_READ);
    assert_eq!(got, before[WIN_OFF..WIN_OFF + WIN_LEN]);
    // ...but does not write (the window grants read only).
    let wc = write_through(&mut p, &mr, rkey2, WIN_OFF, &[7; 64]);
    assert_remote_access_error(&wc);
    assert_eq!(contents(&mr), before, "a refused write changed nothing");
}

#[test]
fn type1_old_rkey_after_rebind_is_a_remote_access_error() {
    let mut p = pair();
    let mr = target(&p);
    let mut mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    let old = bind(&mut p, &mut mw, &mr, Access::REMOTE_WRITE);
    bind(&mut p, &mut mw, &mr, Access::REMOTE_WRITE);
    assert_write_refused(&mut p, &mr, old);
}

/// rxe in Linux 6.12 does not confine a peer to the window: the
/// responder (`check_rkey` in `rxe_resp.c`) resolves the window's rkey to
/// its MR and checks the access against the MR's range, never the
/// window's. A WRITE through the window's rkey outside the window lands in
/// the MR. Pinned here so that a fixed kernel fails this test (then make
/// it assert REM_ACCESS_ERR and drop the warning in `rverbs::mw`).
#[test]
fn rxe_does_not_bound_accesses_by_the_window() {
    let mut p = pair();
    let mr = target(&p);
    let mut mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    let rkey = bind(&mut p, &mut mw, &mr, Access::REMOTE_WRITE);
    let mut want = contents(&mr);
    // The MR's first page is outside the window.
    let wc = write_through(&mut p, &mr, rkey, 0, &[0xee; 64]);
    ok(&wc, WcOpcode::RDMA_WRITE);
    want[..64].fill(0xee);
    assert_eq!(contents(&mr), want);
}

#[test]
fn type2_window_dies_on_local_invalidate() {
    let (mut p, mr, _mw, rkey) = bound_rw(MwType::Type2);
    round_trip(&mut p, &mr, rkey, 3);
    post_local_inv(&mut p, 5, rkey);
    let wc = wait(&mut p.b.cq, 1)[0];
    ok(&wc, WcOpcode::LOCAL_INV);
    assert_eq!(wc.wr_id, 5);
    assert_write_refused(&mut p, &mr, rkey);
}

#[test]
fn type2_window_dies_on_the_peers_send_with_invalidate() {
    let (mut p, mr, _mw, rkey) = bound_rw(MwType::Type2);
    round_trip(&mut p, &mr, rkey, 4);
    // A's SEND with invalidate lands in B's receive and closes the window.
    let inbox = p.pd.alloc_mr(512, RW).unwrap();
    let rs = [inbox.all().unwrap()];
    p.b.qp
        .post_recv(&[RecvWr {
            wr_id: 6,
            sges: &rs,
        }])
        .unwrap();
    let msg = pattern(512, 9);
    let src = p.pd.alloc_mr(512, RW).unwrap();
    src.write(0, &msg).unwrap();
    let ss = [src.all().unwrap()];
    p.a.qp
        .post_send(&[SendWr::new(7, SendOp::SendWithInv(rkey), &ss)])
        .unwrap();
    ok(&wait(&mut p.a.cq, 1)[0], WcOpcode::SEND);
    let wc = wait(&mut p.b.cq, 1)[0];
    ok(&wc, WcOpcode::RECV);
    assert_eq!(wc.wr_id, 6);
    assert_eq!(wc.byte_len, 512);
    assert!(wc.flags.contains(WcFlags::WITH_INVALIDATE), "{wc:?}");
    assert_eq!(wc.invalidated_rkey(), Some(rkey));
    assert_eq!(wc.imm_data(), None);
    let mut got = vec![0; 512];
    inbox.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
    assert_write_refused(&mut p, &mr, rkey);
}

#[test]
fn a_type1_window_cannot_be_invalidated() {
    // o10-37.2.26: rxe fails the local invalidate of a type 1 window.
    let mut p = pair();
    let mr = target(&p);
    let mut mw = p.pd.alloc_mw(MwType::Type1).unwrap();
    let rkey = bind(&mut p, &mut mw, &mr, Access::REMOTE_WRITE);
    post_local_inv(&mut p, 5, rkey);
    assert_local_op_failed(&mut p, 5);
}

/// rxe's requester marks a failed local operation (`LOC_QP_OP_ERR` for an
/// invalidate, `MW_BIND_ERR` for a bind, in `rxe_do_local_ops`) and moves
/// the QP to ERR; on Linux 6.12 the completer then flushes the send queue
/// before it reports that status, so the request completes as
/// `WR_FLUSH_ERR`. Either way the QP is in ERR and nothing was done.
fn assert_local_op_failed(p: &mut Pair, wr_id: u64) {
    let wc = wait(&mut p.b.cq, 1)[0];
    assert_eq!(wc.wr_id, wr_id);
    assert!(
        [
            WcStatus::WR_FLUSH_ERR,
            WcStatus::LOC_QP_OP_ERR,
            WcStatus::MW_BIND_ERR
        ]
        .contains(&wc.status),
        "{wc:?}"
    );
    assert_eq!(p.b.qp.query_state().unwrap(), QpState::Err);
}

#[test]
fn a_bind_the_kernel_refuses_fails_and_moves_the_qp_to_err() {
    let mut p = pair();
    // An MR without MW_BIND: the safe call refuses before posting...
    let plain = p.pd.alloc_mr(LEN, Access::LOCAL_WRITE).unwrap();
    let mut mw = p.pd.alloc_mw(MwType::Type2).unwrap();
    let r =
        p.b.qp
            .bind_mw(1, &mut mw, &plain, 0, 64, Access::REMOTE_READ);
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    // ...and a bind posted by hand reaches the kernel, which refuses it.
    let bind = MwBind {
        mw_rkey: mw.rkey(),
        new_rkey: mw.rkey() + 1,
        mr_lkey: plain.lkey(),
        addr: plain.iova(),
        length: 64,
        access: Access::REMOTE_READ.bits(),
    };
    p.b.qp
        .post_send(&[SendWr::new(2, SendOp::BindMw(bind), &[])])
        .unwrap();
    assert_local_op_failed(&mut p, 2);
}

#[test]
fn a_window_keeps_its_mr_registered_after_the_mr_is_dropped() {
    let (mut p, mr, mw, rkey) = bound_rw(MwType::Type1);
    let (iova, want) = (mr.iova(), contents(&mr));
    drop(mr);
    // The program's last handle is gone; the window still opens onto the
    // same, still registered memory.
    let (wc, got) = read_through(&mut p, iova + WIN_OFF as u64, rkey, WIN_LEN);
    ok(&wc, WcOpcode::RDMA_READ);
    assert_eq!(got, want[WIN_OFF..WIN_OFF + WIN_LEN]);
    drop(mw);
    // With the window deallocated its rkey resolves to nothing (and the
    // MR, its last reference gone, is deregistered).
    let (wc, _) = read_through(&mut p, iova + WIN_OFF as u64, rkey, 64);
    assert_remote_access_error(&wc);
}

//! RDMA WRITE: one QP writes straight into the other's memory, named by
//! the address and rkey the owner would advertise to its peer; the target
//! posts nothing and sees no completion.
//!
//! ```text
//! cargo run --example rdma_write -- [DEVICE] [PORT]
//! ```

mod common;

use rverbs::{Access, QpInit, QpType, Remote, Result, SendOp, SendWr};

fn main() -> Result<()> {
    let (ctx, port) = common::open_from_args()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(64, None, 0)?;
    let init = QpInit::new(QpType::Rc, &cq);
    let mut writer = pd.create_qp(&init)?;
    let mut target = pd.create_qp(&init)?;
    let me = ctx.port_address(port)?;
    let (qw, qt) = (writer.qpn(), target.qpn());
    // The target must grant remote write on the QP and on the MR.
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    writer.connect(port, access, me, qt)?;
    target.connect(port, access, me, qw)?;

    let local = pd.alloc_mr(4096, Access::LOCAL_WRITE)?;
    let remote_mr = pd.alloc_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    local.fill(0, 4096, 0x5a)?;
    // What the target would send its peer: address and rkey.
    let remote = Remote {
        addr: remote_mr.addr() + 1024,
        rkey: remote_mr.rkey(),
    };
    let src = [local.slice(0, 2048)?];
    writer.post_send(&[SendWr::new(7, SendOp::Write(remote), &src)])?;
    let wc = common::wait(&mut cq, 1)?;

    let mut got = vec![0u8; 4096];
    remote_mr.read(0, &mut got)?;
    assert!(
        got[..1024].iter().all(|&b| b == 0),
        "nothing before the target range"
    );
    assert!(
        got[1024..3072].iter().all(|&b| b == 0x5a),
        "the written range"
    );
    assert!(got[3072..].iter().all(|&b| b == 0), "nothing after it");
    println!(
        "RDMA WRITE of 2048 bytes completed (wr_id {}); the target's bytes 1024..3072 hold them",
        wc[0].wr_id
    );
    Ok(())
}

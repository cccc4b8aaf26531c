//! RC send/receive: two reliable-connected QPs of one process, on one
//! device looped back to itself; one posts a receive, the other sends a
//! message into it.
//!
//! ```text
//! cargo run --example rc_send_recv -- [DEVICE] [PORT]
//! ```

mod common;

use rverbs::{Access, QpInit, QpType, RecvWr, Result, SendOp, SendWr};

fn main() -> Result<()> {
    let (ctx, port) = common::open_from_args()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(64, None, 0)?;
    let init = QpInit::new(QpType::Rc, &cq);
    let mut sender = pd.create_qp(&init)?;
    let mut receiver = pd.create_qp(&init)?;

    // Connect the two (INIT, RTR, RTS), each to the other's QP number at
    // the port's own address: rxe answers its own GID.
    let me = ctx.port_address(port)?;
    let (qs, qr) = (sender.qpn(), receiver.qpn());
    sender.connect(port, Access::LOCAL_WRITE, me, qr)?;
    receiver.connect(port, Access::LOCAL_WRITE, me, qs)?;

    // Registered memory is owned by its Mr and named by checked slices.
    let src = pd.alloc_mr(64, Access::LOCAL_WRITE)?;
    let dst = pd.alloc_mr(64, Access::LOCAL_WRITE)?;
    let msg = b"hello over RC";
    src.write(0, msg)?;

    let landing = [dst.slice(0, 64)?];
    receiver.post_recv(&[RecvWr {
        wr_id: 2,
        sges: &landing,
    }])?;
    let payload = [src.slice(0, msg.len() as u32)?];
    sender.post_send(&[SendWr::new(1, SendOp::Send, &payload)])?;

    let wcs = common::wait(&mut cq, 2)?;
    let recv = wcs
        .iter()
        .find(|w| w.wr_id == 2)
        .expect("the receive completed");
    let mut got = vec![0u8; recv.byte_len as usize];
    dst.read(0, &mut got)?;
    assert_eq!(got, msg);
    println!(
        "received {} bytes on QP {:#x}: {:?}",
        recv.byte_len,
        recv.qp_num,
        String::from_utf8_lossy(&got)
    );
    Ok(())
}

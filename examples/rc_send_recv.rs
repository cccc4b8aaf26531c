//! RC send/receive: two reliable-connected QPs of one process, on one
//! device looped back to itself; one posts a receive, the other sends a
//! message into it.
//!
//! ```text
//! cargo run --example rc_send_recv -- [DEVICE] [PORT]
//! ```

mod common;

use rverbs::{Access, Mtu, QpAttr, QpCaps, QpInit, QpType, RecvWr, Result, SendOp, SendWr};

fn main() -> Result<()> {
    let (ctx, port) = common::open_from_args()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16, None, 0)?;
    let init = QpInit {
        qp_type: QpType::Rc,
        send_cq: &cq,
        recv_cq: &cq,
        caps: QpCaps {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
        srq: None,
    };
    let mut sender = pd.create_qp(&init)?;
    let mut receiver = pd.create_qp(&init)?;

    // Connect the two: INIT, then RTR towards the peer's QP number, RTS.
    let av = common::own_address(&ctx, port)?;
    let (qs, qr) = (sender.qpn(), receiver.qpn());
    for (qp, peer) in [(&mut sender, qr), (&mut receiver, qs)] {
        qp.modify(&QpAttr::init(port, Access::LOCAL_WRITE))?;
        qp.modify(&QpAttr::rtr(av, Mtu::M1024, peer, 0))?;
        qp.modify(&QpAttr::rts(0))?;
    }

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

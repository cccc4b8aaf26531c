//! UD with an address handle: a datagram QP sends to another through an
//! AH made from the port's own address. A UD receive starts with the
//! 40-byte GRH slot ([`rverbs::GRH_LEN`]), then the payload.
//!
//! ```text
//! cargo run --example ud_ah -- [DEVICE] [PORT]
//! ```

mod common;

use rverbs::{QpInit, QpType, RecvWr, Result, SendOp, SendWr, WcFlags, GRH_LEN as GRH};

const QKEY: u32 = 0x1111_1111;

fn main() -> Result<()> {
    let (ctx, port) = common::open_from_args()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(64, None, 0)?;
    let init = QpInit::new(QpType::Ud, &cq);
    let mut a = pd.create_qp(&init)?;
    let mut b = pd.create_qp(&init)?;
    a.ready_ud(port, QKEY)?;
    b.ready_ud(port, QKEY)?;
    let ah = pd.create_ah(&ctx.port_address(port)?)?;

    let buf = pd.alloc_mr(4096, rverbs::Access::LOCAL_WRITE)?;
    let msg = b"a datagram";
    buf.write(0, msg)?;
    let landing = [buf.slice(1024, (GRH + 256) as u32)?];
    b.post_recv(&[RecvWr {
        wr_id: 2,
        sges: &landing,
    }])?;
    let payload = [buf.slice(0, msg.len() as u32)?];
    a.post_send(&[SendWr::new(1, SendOp::Send, &payload).to(&ah, b.qpn(), QKEY)])?;

    let wcs = common::wait(&mut cq, 2)?;
    let recv = wcs
        .iter()
        .find(|w| w.wr_id == 2)
        .expect("the receive completed");
    assert!(
        recv.flags.contains(WcFlags::GRH),
        "RoCE datagrams carry a GRH"
    );
    assert_eq!(recv.src_qp, a.qpn());
    let mut got = vec![0u8; recv.byte_len as usize - GRH];
    buf.read(1024 + GRH, &mut got)?;
    assert_eq!(got, msg);
    println!(
        "datagram of {} bytes from QP {:#x}: {:?}",
        got.len(),
        recv.src_qp,
        String::from_utf8_lossy(&got)
    );
    Ok(())
}

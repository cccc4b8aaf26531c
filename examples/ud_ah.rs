//! UD with an address handle: a datagram QP sends to another through an
//! AH made from the port's own address. A UD receive starts with the
//! 40-byte GRH slot, then the payload.
//!
//! ```text
//! cargo run --example ud_ah -- [DEVICE] [PORT]
//! ```

mod common;

use rverbs::{QpAttr, QpCaps, QpInit, QpState, QpType, RecvWr, Result, SendOp, SendWr, WcFlags};

const QKEY: u32 = 0x1111_1111;
const GRH: usize = 40;

fn main() -> Result<()> {
    let (ctx, port) = common::open_from_args()?;
    let pd = ctx.alloc_pd()?;
    let mut cq = ctx.create_cq(16, None, 0)?;
    let init = QpInit {
        qp_type: QpType::Ud,
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
    let mut a = pd.create_qp(&init)?;
    let mut b = pd.create_qp(&init)?;
    for qp in [&mut a, &mut b] {
        qp.modify(&QpAttr::init_ud(port, QKEY))?;
        qp.modify(&QpAttr::state(QpState::Rtr))?;
        qp.modify(&QpAttr::rts_ud(0))?;
    }
    let ah = pd.create_ah(&common::own_address(&ctx, port)?)?;

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

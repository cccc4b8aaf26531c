//! `rverbs selftest [-d DEV]`: two RC QPs on one device connected to each
//! other, and one check per operation — the first thing to run on a new
//! machine or a new NIC. Each check moves real data and verifies every
//! byte (atomics against their arithmetic); the exit status is 0 only if
//! all pass.

use clap::Args;
use rverbs::{
    Access, AhAttr, Context, Cq, Device, Error, Grh, Mr, Mtu, Pd, Qp, QpAttr, QpCaps, QpInit,
    QpType, RecvWr, Remote, Result, SendOp, SendWr, Wc, WcOpcode, WcStatus,
};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct SelftestArgs {
    /// The device (default: the first).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// The port.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    port: u8,
}

const LEN: usize = 4096;

struct Bed {
    _ctx: Context,
    pd: Pd,
    cq: Cq,
    a: Qp,
    b: Qp,
}

fn fail(what: impl Into<String>) -> Error {
    Error::InvalidArgument { what: what.into() }
}

/// The address vector of the port itself, and how to name it: the LID on
/// InfiniBand, the RoCE v2 IPv4-mapped GID on Ethernet, as
/// [`Context::port_address`] finds them; failing those, the port's first
/// GID, whatever its type (where the library would take the first RoCE v2
/// GID, or refuse a port without one).
fn self_av(ctx: &Context, port: u8) -> Result<(AhAttr, String)> {
    let v4_mapped = |gid: &[u8; 16]| gid[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
    let av = match ctx.port_address(port) {
        Ok(av) if av.grh.is_none_or(|g| v4_mapped(&g.dgid)) => av,
        Ok(_) => first_gid(ctx, port)?,
        Err(e) => first_gid(ctx, port).map_err(|_| e)?,
    };
    let how = match av.grh {
        None => format!("LID {}", av.dlid),
        Some(g) => format!(
            "GID index {} ({})",
            g.sgid_index,
            std::net::Ipv6Addr::from(g.dgid)
        ),
    };
    Ok((av, how))
}

/// The address vector of the port's first GID.
fn first_gid(ctx: &Context, port: u8) -> Result<AhAttr> {
    let g = ctx
        .gid_table(port)?
        .into_iter()
        .next()
        .ok_or_else(|| fail(format!("port {port} has no GID: is its netdev up?")))?;
    Ok(AhAttr {
        port_num: port,
        grh: Some(Grh {
            dgid: g.gid,
            sgid_index: g.index as u8,
            hop_limit: 1,
            ..Grh::default()
        }),
        ..AhAttr::default()
    })
}

fn bed(ctx: &Context, port: u8) -> Result<(Bed, String)> {
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(64, None, 0)?;
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 64,
    };
    let mk = || {
        pd.create_qp(&QpInit {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            caps,
            sq_sig_all: true,
            srq: None,
        })
    };
    let mut a = mk()?;
    let mut b = mk()?;
    let (av, how) = self_av(ctx, port)?;
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let (qa, qb) = (a.qpn(), b.qpn());
    for (q, peer, psn) in [(&mut a, qb, 1), (&mut b, qa, 2)] {
        q.modify(&QpAttr::init(port, access))?;
        let mut rtr = QpAttr::rtr(av, Mtu::M1024, peer, 3 - psn);
        rtr.max_dest_rd_atomic = Some(1);
        q.modify(&rtr)?;
        let mut rts = QpAttr::rts(psn);
        rts.max_rd_atomic = Some(1);
        q.modify(&rts)?;
    }
    Ok((
        Bed {
            _ctx: ctx.clone(),
            pd,
            cq,
            a,
            b,
        },
        how,
    ))
}

impl Bed {
    fn mr(&self) -> Result<Mr> {
        self.pd.alloc_mr(
            LEN,
            Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC,
        )
    }

    /// Waits for `n` completions, each of which must succeed.
    fn wait(&mut self, n: usize) -> Result<Vec<Wc>> {
        let mut out = Vec::new();
        let until = Instant::now() + Duration::from_secs(5);
        let mut buf = [Wc::default(); 8];
        while out.len() < n {
            let k = self.cq.poll(&mut buf);
            out.extend_from_slice(&buf[..k]);
            if Instant::now() > until {
                return Err(fail(format!(
                    "{} of {n} completions within 5 s: {out:?}",
                    out.len()
                )));
            }
        }
        if let Some(w) = out.iter().find(|w| w.status != WcStatus::SUCCESS) {
            return Err(fail(format!(
                "work request {} completed with {:?}",
                w.wr_id, w.status
            )));
        }
        Ok(out)
    }
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn check_bytes(mr: &Mr, off: usize, want: &[u8]) -> Result<()> {
    let mut got = vec![0u8; want.len()];
    mr.read(off, &mut got)?;
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None => Ok(()),
        Some(i) => Err(fail(format!(
            "byte {} is {:#04x}, expected {:#04x}",
            off + i,
            got[i],
            want[i]
        ))),
    }
}

fn send_recv(t: &mut Bed) -> Result<()> {
    let (src, dst) = (t.mr()?, t.mr()?);
    let data = pattern(1);
    src.write(0, &data)?;
    // Two SGEs on each side, split at different places.
    let rs = [dst.slice(0, 1000)?, dst.slice(1000, (LEN - 1000) as u32)?];
    t.b.post_recv(&[RecvWr {
        wr_id: 2,
        sges: &rs,
    }])?;
    let ss = [src.slice(0, 3000)?, src.slice(3000, (LEN - 3000) as u32)?];
    t.a.post_send(&[SendWr::new(1, SendOp::SendWithImm(0x1234_5678), &ss)])?;
    let w = t.wait(2)?;
    let r = w
        .iter()
        .find(|w| w.opcode == WcOpcode::RECV)
        .ok_or_else(|| fail("no receive completion"))?;
    if r.byte_len as usize != LEN || r.imm_data() != Some(0x1234_5678) {
        return Err(fail(format!("receive completion {r:?}")));
    }
    check_bytes(&dst, 0, &data)
}

fn write(t: &mut Bed) -> Result<()> {
    let (src, dst) = (t.mr()?, t.mr()?);
    let data = pattern(2);
    src.write(0, &data)?;
    let r = Remote {
        addr: dst.addr(),
        rkey: dst.rkey(),
    };
    t.a.post_send(&[SendWr::new(3, SendOp::Write(r), &[src.all()?])])?;
    t.wait(1)?;
    check_bytes(&dst, 0, &data)
}

fn read(t: &mut Bed) -> Result<()> {
    let (src, dst) = (t.mr()?, t.mr()?);
    let data = pattern(3);
    src.write(0, &data)?;
    let r = Remote {
        addr: src.addr(),
        rkey: src.rkey(),
    };
    t.b.post_send(&[SendWr::new(4, SendOp::Read(r), &[dst.all()?])])?;
    t.wait(1)?;
    check_bytes(&dst, 0, &data)
}

fn atomics(t: &mut Bed) -> Result<()> {
    let (target, out) = (t.mr()?, t.mr()?);
    target.write(0, &40u64.to_ne_bytes())?;
    let r = Remote {
        addr: target.addr(),
        rkey: target.rkey(),
    };
    let o = [out.slice(0, 8)?];
    t.a.post_send(&[SendWr::new(5, SendOp::FetchAdd { remote: r, add: 2 }, &o)])?;
    t.wait(1)?;
    let (old, new) = (out.read_u64(0)?, target.read_u64(0)?);
    if (old, new) != (40, 42) {
        return Err(fail(format!(
            "fetch-and-add: returned {old}, left {new} (want 40, 42)"
        )));
    }
    let o = [out.slice(8, 8)?];
    let cas = SendOp::CompareSwap {
        remote: r,
        compare: 42,
        swap: 7,
    };
    t.a.post_send(&[SendWr::new(6, cas, &o)])?;
    t.wait(1)?;
    let (old, new) = (out.read_u64(8)?, target.read_u64(0)?);
    if (old, new) != (42, 7) {
        return Err(fail(format!(
            "compare-and-swap: returned {old}, left {new} (want 42, 7)"
        )));
    }
    Ok(())
}

fn inline(t: &mut Bed) -> Result<()> {
    let dst = t.mr()?;
    t.b.post_recv(&[RecvWr {
        wr_id: 8,
        sges: &[dst.slice(0, 64)?],
    }])?;
    let msg = b"inline data: no MR on the sending side";
    let mut wr = SendWr::new(7, SendOp::Send, &[]);
    wr.inline = Some(msg);
    t.a.post_send(&[wr])?;
    t.wait(2)?;
    check_bytes(&dst, 0, msg)
}

pub fn selftest(a: &SelftestArgs) -> Result<ExitCode> {
    let dev = Device::find(a.dev.as_deref())?;
    println!(
        "device {} (driver {}, {}), port {}",
        dev.name(),
        dev.driver_name(),
        dev.dev_path().display(),
        a.port
    );
    let ctx = Context::open(&dev)?;
    let (mut t, how) = bed(&ctx, a.port)?;
    println!("two RC QPs connected to each other through {how}");
    type Check = fn(&mut Bed) -> Result<()>;
    let checks: [(&str, Check); 5] = [
        ("send with immediate, 4 KiB over 2+2 SGEs", send_recv),
        ("RDMA write, 4 KiB", write),
        ("RDMA read, 4 KiB", read),
        ("atomic fetch-and-add and compare-and-swap", atomics),
        ("inline send", inline),
    ];
    let mut failed = 0;
    for (name, f) in checks {
        match f(&mut t) {
            Ok(()) => println!("PASS  {name}"),
            Err(e) => {
                failed += 1;
                println!("FAIL  {name}: {e}");
            }
        }
    }
    println!(
        "{} of {} checks passed",
        checks.len() - failed,
        checks.len()
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

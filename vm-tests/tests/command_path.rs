//! The two kernel interfaces: a context opened on the ioctl path (the
//! default on this kernel) and one forced onto the write path answer the
//! same queries, and both move data.

mod common;

use rverbs::{CommandPath, Context, Device, GidType};

fn open(path: CommandPath) -> Context {
    let e = common::env();
    let dev = Device::find(Some(&e.dev)).expect("device");
    Context::open_via(&dev, path).expect("open")
}

#[test]
fn the_default_is_the_ioctl_path_and_write_is_honoured() {
    let e = common::env();
    let ctx = Context::open_by_name(Some(&e.dev)).unwrap();
    assert_eq!(ctx.command_path(), CommandPath::Ioctl);
    assert_eq!(open(CommandPath::Write).command_path(), CommandPath::Write);
    // The async event fd from ASYNC_EVENT_ALLOC (ioctl) is a real fd.
    assert!(ctx.num_comp_vectors() >= 1);
}

#[test]
fn both_paths_report_the_same_device_port_and_gids() {
    let io = open(CommandPath::Ioctl);
    let wr = open(CommandPath::Write);

    let d_io = io.query_device().unwrap();
    let d_wr = wr.query_device().unwrap();
    assert_eq!(format!("{d_io:?}"), format!("{d_wr:?}"));
    let ex = io.query_device_ex().unwrap();
    assert_eq!(format!("{:?}", ex.orig), format!("{d_io:?}"));
    // The kernel filled the extended response; its low 32 flag bits are
    // the legacy ones.
    assert!(ex.response_length as usize > 176, "{}", ex.response_length);
    assert_eq!(ex.device_cap_flags_ex as u32, d_io.device_cap_flags);
    assert_eq!(io.num_comp_vectors(), wr.num_comp_vectors());

    let mut p_io = io.query_port(1).unwrap();
    let p_wr = wr.query_port(1).unwrap();
    // Only the ioctl answer carries port_cap_flags2 / active_speed_ex.
    p_io.port_cap_flags2 = 0;
    p_io.active_speed_ex = 0;
    assert_eq!(format!("{p_io:?}"), format!("{p_wr:?}"));

    let g_io = io.query_gid_table().unwrap();
    let g_wr = wr.query_gid_table().unwrap();
    assert!(!g_io.is_empty());
    assert_eq!(g_io.len(), g_wr.len(), "{g_io:?} vs {g_wr:?}");
    for (a, b) in g_io.iter().zip(&g_wr) {
        assert_eq!((a.port, a.index, a.gid), (b.port, b.index, b.gid));
        assert_eq!(a.gid_type, b.gid_type);
        // ioctl gives the ifindex, sysfs the name: they name one netdev.
        assert_ne!(a.netdev_ifindex, 0);
        assert_eq!(a.netdev, b.netdev);
        assert_eq!(io.query_gid(1, a.index).unwrap(), a.gid);
        assert_eq!(wr.query_gid(1, a.index).unwrap(), a.gid);
    }
    let e = common::env();
    let v4 = g_io
        .iter()
        .find(|g| g.index == e.gid)
        .expect("the test GID is in the table");
    assert_eq!(v4.gid_type, GidType::RoceV2);
    let addr: std::net::Ipv4Addr = e.addr.parse().unwrap();
    assert_eq!(v4.gid[12..], addr.octets());
}

#[test]
fn a_gid_index_past_the_table_is_a_named_error_on_both_paths() {
    let io = open(CommandPath::Ioctl);
    let wr = open(CommandPath::Write);
    let len = io.query_port(1).unwrap().gid_tbl_len;
    let err = io.query_gid(1, len + 5).unwrap_err();
    assert!(err.to_string().contains("QUERY_GID_ENTRY"), "{err}");
    assert!(err.errno().is_some(), "{err:?}");
    assert!(wr.query_gid(1, len + 5).is_err());
    let err = io.query_port(9).unwrap_err();
    assert!(err.to_string().contains("QUERY_PORT"), "{err}");
}

/// An RC send and an RDMA write between two QPs of a context on the given
/// path: every object (PD, MR, CQ, QP) is created through that context.
fn loopback(path: CommandPath) {
    use common::rc::{caps, self_av, wait};
    use rverbs::{Access, Mtu, QpAttr, QpInit, QpType, RecvWr, Remote, SendOp, SendWr, WcStatus};
    let ctx = open(path);
    let pd = ctx.alloc_pd().unwrap();
    let acc = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let mut cqs = [
        ctx.create_cq(16, None, 0).unwrap(),
        ctx.create_cq(16, None, 0).unwrap(),
    ];
    let mk = |cq| {
        pd.create_qp(&QpInit {
            caps: caps(8),
            sq_sig_all: true,
            ..QpInit::new(QpType::Rc, cq)
        })
        .unwrap()
    };
    let mut a = mk(&cqs[0]);
    let mut b = mk(&cqs[1]);
    // Each modify spelled out (PSNs 7), a command on the path under test.
    let av = self_av(&ctx);
    let (qa, qb) = (a.qpn(), b.qpn());
    for (q, peer) in [(&mut a, qb), (&mut b, qa)] {
        q.modify(&QpAttr::init(1, acc)).unwrap();
        q.modify(&QpAttr::rtr(av, Mtu::M1024, peer, 7)).unwrap();
        q.modify(&QpAttr::rts(7)).unwrap();
    }
    let src = pd.alloc_mr(64, acc).unwrap();
    let dst = pd.alloc_mr(64, acc).unwrap();
    src.write(0, b"via the other path").unwrap();
    b.post_recv(&[RecvWr {
        wr_id: 2,
        sges: &[dst.slice(32, 32).unwrap()],
    }])
    .unwrap();
    let s = [src.slice(0, 18).unwrap()];
    a.post_send(&[
        SendWr::new(
            1,
            SendOp::Write(Remote {
                addr: dst.addr(),
                rkey: dst.rkey(),
            }),
            &s,
        ),
        SendWr::new(3, SendOp::Send, &s),
    ])
    .unwrap();
    // Every send signals: the write and the send on a's CQ, the receive
    // on b's.
    let [cq_a, cq_b] = &mut cqs;
    let mut got = wait(cq_a, 2);
    got.extend(wait(cq_b, 1));
    assert!(got.iter().all(|w| w.status == WcStatus::SUCCESS), "{got:?}");
    let mut ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3]);
    let mut out = [0u8; 18];
    dst.read(0, &mut out).unwrap();
    assert_eq!(&out, b"via the other path");
    dst.read(32, &mut out).unwrap();
    assert_eq!(&out, b"via the other path");
}

#[test]
fn data_moves_on_the_write_path() {
    loopback(CommandPath::Write);
}

#[test]
fn data_moves_on_the_ioctl_path() {
    loopback(CommandPath::Ioctl);
}

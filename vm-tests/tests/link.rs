//! RDMA link management over netlink, with no iproute2 on our side:
//! `rverbs link` agrees with `rdma link`, links come and go, errors are
//! named, and a program holding a deleted device gets DEVICE_FATAL.

mod common;

use common::{rverbs_bin, show};
use rverbs::{link, Context, Device, Driver, EventType};
use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(rverbs_bin())
        .args(args)
        .output()
        .expect("rverbs runs")
}

#[test]
fn link_show_matches_rdma_link_and_netdevs_matches_ibdev2netdev_layout() {
    let e = common::env();
    let ours = run(&["link"]);
    assert!(ours.status.success(), "{}", show(&ours));
    let theirs = Command::new("rdma").arg("link").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&theirs.stdout)
    );
    let n = run(&["netdevs"]);
    let text = String::from_utf8_lossy(&n.stdout);
    assert!(
        text.contains(&format!("{} port 1 ==> veth0 (Up)", e.dev)),
        "{text}"
    );
}

#[test]
fn add_open_and_delete_a_link_from_the_library() {
    link::add("rxe1", "rxe", "veth1").expect("link add rxe1");
    let dev = Device::find(Some("rxe1")).expect("rxe1 is listed");
    assert_eq!(dev.driver(), Driver::Rxe, "driver id over netlink");
    let ctx = Context::open(&dev).unwrap();
    assert_eq!(ctx.query_port(1).unwrap().link_layer, 2);
    drop(ctx);
    // A second link on the same netdev is refused, with the errno.
    let e = link::add("rxe1", "rxe", "veth1").unwrap_err();
    assert_eq!(e.errno().map(|e| e.0), Some(17), "EEXIST: {e}");
    link::delete("rxe1").expect("link delete rxe1");
    assert!(Device::find(Some("rxe1")).is_err(), "rxe1 is gone");
    assert!(matches!(
        link::delete("rxe1"),
        Err(rverbs::Error::NoDevice { .. })
    ));
}

#[test]
fn cli_errors_name_what_is_wrong() {
    let o = run(&["link", "add", "rxe9", "type", "rxe", "netdev", "nosuchif"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no network interface named nosuchif"),
        "{}",
        show(&o)
    );
    let o = run(&["link", "add", "rxe0", "type", "rxe", "netdev", "veth1"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("a device named rxe0 already exists"),
        "{}",
        show(&o)
    );
    let o = run(&["link", "add", "rxe9", "type", "rxe", "netdev", "veth0"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("veth0 already has an RDMA link"),
        "{}",
        show(&o)
    );
    // Without CAP_NET_ADMIN (nobody).
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            rverbs_bin(),
        ])
        .args(["link", "add", "rxe9", "type", "rxe", "netdev", "veth1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("CAP_NET_ADMIN"),
        "{}",
        show(&o)
    );
}

#[test]
fn deleting_a_device_in_use_names_its_users_or_waits_for_them() {
    link::add("rxe2", "rxe", "veth1").expect("link add rxe2");
    let ctx = Context::open_by_name(Some("rxe2")).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    // Without waiting: refused at once, naming this process.
    let start = std::time::Instant::now();
    match link::delete("rxe2") {
        Err(rverbs::Error::DeviceInUse { device, holders }) => {
            assert_eq!(device, "rxe2");
            let me = std::process::id();
            assert!(holders.iter().any(|(pid, _)| *pid == me), "{holders:?}");
        }
        other => panic!("expected DeviceInUse, got {other:?}"),
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert!(Device::find(Some("rxe2")).is_ok(), "still there");
    // rxe cannot disassociate a user context, so the kernel's unregister
    // waits for every user to close the device: the waiting delete blocks.
    let deleter = std::thread::spawn(|| link::delete_wait("rxe2"));
    let event = ctx.wait_async_event(3_000).unwrap();
    let ev = if event {
        Some(ctx.get_async_event().unwrap())
    } else {
        None
    };
    eprintln!("async event while the device is being deleted: {ev:?}");
    assert!(
        !deleter.is_finished(),
        "the delete returned while the device was still open"
    );
    if let Some(ev) = ev {
        assert_eq!(ev.event_type, EventType::DEVICE_FATAL, "{ev:?}");
    }
    drop(pd);
    drop(ctx);
    // Once the last user is gone the delete completes, cleanly.
    deleter
        .join()
        .unwrap()
        .expect("link delete rxe2 after the last close");
    assert!(Device::find(Some("rxe2")).is_err());
}

//! The test bed itself is sound before our code is judged by it: the VM has
//! the uverbs device and rxe0, and rdma-core's ibv_rc_pingpong runs on it.

mod common;

use common::{env, retry_until_ok, show, Background};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn uverbs_device_and_rxe0_exist() {
    let e = env();
    assert!(
        Path::new("/dev/infiniband/uverbs0").exists(),
        "/dev/infiniband/uverbs0 is missing"
    );
    let sys = format!("/sys/class/infiniband/{}", e.dev);
    assert!(Path::new(&sys).exists(), "{sys} is missing");
    let node_type = std::fs::read_to_string(format!("{sys}/node_type")).unwrap();
    assert_eq!(node_type.trim(), "1: CA");
    let gid = std::fs::read_to_string(format!("{sys}/ports/1/gids/{}", e.gid)).unwrap();
    let octets: Vec<u8> = e.addr.split('.').map(|o| o.parse().unwrap()).collect();
    let want = format!(
        "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}",
        octets[0], octets[1], octets[2], octets[3]
    );
    assert_eq!(gid.trim(), want, "GID {} of {}", e.gid, e.dev);
}

#[test]
fn ibv_rc_pingpong_exchanges_100_messages() {
    let e = env();
    let gid = e.gid.to_string();
    let args = [
        "-d",
        e.dev.as_str(),
        "-g",
        gid.as_str(),
        "-n",
        "100",
        "-p",
        "18600",
    ];
    let server = Background::spawn(Command::new("ibv_rc_pingpong").args(args));
    let client = retry_until_ok(Duration::from_secs(20), || {
        let mut c = Command::new("ibv_rc_pingpong");
        c.args(args).arg(&e.addr);
        c
    });
    assert!(client.status.success(), "client: {}", show(&client));
    let server = server.wait(Duration::from_secs(60));
    assert!(server.status.success(), "server: {}", show(&server));
    for (who, out) in [("client", &client), ("server", &server)] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("100 iters in"),
            "{who} did not report 100 iterations: {}",
            show(out)
        );
    }
}

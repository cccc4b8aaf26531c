//! rverbs' `libibverbs.so.1` under rdma-core's own librdmacm and async
//! event users, unchanged: `rping` and `ucmatose` (rdma-core's librdmacm
//! over our library) against the same program over rdma-core in the other
//! role; `ibv_asyncwatch` over ours sees the port events rdma-core's sees;
//! a C program compiled here (QP async events: `SQ_DRAINED` names the QP,
//! `async_fd` polls, the ack counts) prints the same over both; perftest's
//! `ib_write_bw`, `ib_send_lat`, `ib_read_bw`, `ib_atomic_bw` (and two
//! with `-R`, through librdmacm) over ours against rdma-core's, both
//! roles, print what rdma-core prints (numbers aside).

mod common;

use common::asyncwatch::{assert_same_events, Watcher};
use common::cm::{
    assert_lines, assert_rping_client, CMATOSE_CLIENT, CMATOSE_SERVER, UDADDY_CLIENT, UDADDY_SERVER,
};
use common::ibverbs_so::{assert_loads_ours, build_c, over};
use common::{env, retry_until_ok, show, wait_cm_listening, Background};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

static PORT: AtomicU16 = AtomicU16::new(19600);

fn who(ours: bool) -> &'static str {
    if ours {
        "ours"
    } else {
        "rdma-core"
    }
}

/// The loader's account (`LD_DEBUG=libs`): `prog` over ours initialised
/// our libibverbs, and rdma-core's librdmacm, not Debian's libibverbs.
fn assert_ours_loaded(prog: &str, args: &[&str]) {
    let out = assert_loads_ours(prog, args);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("librdmacm.so.1"),
        "{prog} did not load librdmacm: {}",
        show(&out)
    );
}

/// `rping -C 100 -V -v`, the server over `server_ours ? ours : rdma-core`
/// and the client over the other: 100 validated pings of `size` bytes.
fn rping_pair(server_ours: bool, size: usize) {
    let e = env();
    let port = PORT.fetch_add(1, Ordering::Relaxed).to_string();
    let size_s = size.to_string();
    let srv = Background::spawn(
        over(server_ours, "rping").args(["-s", "-a", &e.addr, "-p", &port, "-S", &size_s, "-v"]),
    );
    let out = retry_until_ok(Duration::from_secs(20), || {
        let mut c = over(!server_ours, "rping");
        c.args([
            "-c", "-a", &e.addr, "-p", &port, "-S", &size_s, "-C", "100", "-V", "-v",
        ]);
        c
    });
    let what = format!(
        "rping server over {}, client over {}, {size} B",
        who(server_ours),
        who(!server_ours)
    );
    assert_rping_client(&what, &out, size);
    let s = srv.wait(Duration::from_secs(30));
    assert!(s.status.success(), "{what}: server: {}", show(&s));
    let n = String::from_utf8_lossy(&s.stdout)
        .lines()
        .filter(|l| l.starts_with("server ping data: "))
        .count();
    assert_eq!(n, 100, "{what}: server: {}", show(&s));
}

#[test]
fn rping_over_ours_against_rdma_core_both_roles() {
    assert_ours_loaded("rping", &["-h"]);
    for size in [64, 200] {
        rping_pair(true, size);
        rping_pair(false, size);
    }
}

fn ucmatose_pair(server_ours: bool, extra: &[&str]) {
    let port = PORT.fetch_add(1, Ordering::Relaxed);
    let (addr, port_s) = (env().addr, port.to_string());
    let mut s = Background::spawn(
        over(server_ours, "ucmatose")
            .args(["-b", &addr, "-p", &port_s])
            .args(extra),
    );
    wait_cm_listening(&mut s, "TCP", port);
    let c = retry_until_ok(Duration::from_secs(20), || {
        let mut c = over(!server_ours, "ucmatose");
        c.args(["-s", &addr, "-p", &port_s]).args(extra);
        c
    });
    let s = s.wait(Duration::from_secs(60));
    let ctx = format!(
        "server over {}, client over {} {extra:?}",
        who(server_ours),
        who(!server_ours)
    );
    assert_lines(&format!("server ({ctx})"), &s, CMATOSE_SERVER);
    assert_lines(&format!("client ({ctx})"), &c, CMATOSE_CLIENT);
}

#[test]
fn ucmatose_over_ours_against_rdma_core_both_roles() {
    assert_ours_loaded("ucmatose", &["-h"]);
    let many = ["-c", "4", "-C", "20", "-S", "1000"];
    ucmatose_pair(true, &many);
    ucmatose_pair(false, &many);
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip");
    assert!(o.status.success(), "ip {args:?}: {}", show(&o));
}

#[test]
fn ibv_asyncwatch_over_ours_sees_the_port_events() {
    let watcher = |ours: bool| {
        let name = format!("ibv-{}", who(ours));
        Watcher::spawn(&name, over(ours, "ibv_asyncwatch").args(["-d", &env().dev]))
    };
    let theirs = watcher(false);
    let ours = watcher(true);
    theirs.wait_ready();
    ours.wait_ready();
    ip(&["link", "set", "veth0", "down"]);
    std::thread::sleep(Duration::from_millis(500));
    ip(&["link", "set", "veth0", "up"]);
    // The port comes back before the tests that follow run.
    let until = Instant::now() + Duration::from_secs(20);
    let state = format!("/sys/class/infiniband/{}/ports/1/state", env().dev);
    while !std::fs::read_to_string(&state)
        .unwrap_or_default()
        .contains("ACTIVE")
    {
        assert!(Instant::now() < until, "the port did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let o = assert_same_events(&theirs, &ours);
    for want in [
        "  event_type IBV_EVENT_PORT_ERR (10), port 1",
        "  event_type IBV_EVENT_PORT_ACTIVE (9), port 1",
    ] {
        assert!(o.iter().any(|l| l == want), "no {want:?}: {o:?}");
    }
    // The fd C programs print is the one rverbs reads (a real, open fd).
    let first = ours.text();
    let fd: i32 = first
        .lines()
        .next()
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fd in {first:?}"));
    let link = std::fs::read_link(format!("/proc/{}/fd/{fd}", ours.pid()))
        .expect("the async fd is open in the process");
    assert!(
        link.to_string_lossy().contains("[infinibandevent]"),
        "{link:?}"
    );
}

/// A C program over `verbs.h`: an RC QP connected to itself, moved to SQD
/// with `en_sqd_async_notify`; it polls `async_fd`, reads the
/// `SQ_DRAINED` event, checks it names its QP, acks it; back in RTS, a
/// completion event whose ack a thread delays, which `ibv_destroy_cq`
/// waits for; then destroys everything. Prints what it saw, the same over
/// both libraries.
const ASYNC_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #x); return 1; } } while (0)

static void *late_ack(void *cq) {
    usleep(300000);
    ibv_ack_cq_events(cq, 1);
    return NULL;
}

int main(int argc, char **argv) {
    int n, gid_index = atoi(argv[2]);
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(ibv_get_device_name(list[i]), argv[1])) dev = list[i];
    CHECK(dev);
    struct ibv_context *ctx = ibv_open_device(dev);
    CHECK(ctx);
    struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
    CHECK(poll(&p, 1, 0) == 0);
    printf("no event before: ok\n");
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
    CHECK(ch);
    struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, ch, 0);
    CHECK(pd && cq);
    struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    CHECK(qp);
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0);
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
    CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR; a.path_mtu = IBV_MTU_1024; a.dest_qp_num = qp->qp_num;
    a.rq_psn = 0; a.max_dest_rd_atomic = 1; a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1; a.ah_attr.grh.dgid = gid; a.ah_attr.grh.sgid_index = gid_index;
    a.ah_attr.grh.hop_limit = 1; a.ah_attr.port_num = 1;
    CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS; a.timeout = 14; a.retry_cnt = 7; a.rnr_retry = 7;
    a.sq_psn = 0; a.max_rd_atomic = 1;
    CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    printf("rts: ok\n");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_SQD; a.en_sqd_async_notify = 1;
    CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY) == 0);
    printf("sqd: ok\n");
    CHECK(poll(&p, 1, 5000) == 1);
    struct ibv_async_event ev;
    CHECK(ibv_get_async_event(ctx, &ev) == 0);
    printf("event %d (%s), names our qp: %s\n", ev.event_type,
        ibv_event_type_str(ev.event_type), ev.element.qp == qp ? "yes" : "no");
    printf("events_completed before ack: %u\n", qp->events_completed);
    ibv_ack_async_event(&ev);
    printf("events_completed after ack: %u\n", qp->events_completed);
    /* Back to RTS; a completion event; ibv_destroy_cq waits for its ack. */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
    CHECK(ibv_req_notify_cq(cq, 0) == 0);
    struct ibv_recv_wr rw = { .wr_id = 1 }, *brw;
    CHECK(ibv_post_recv(qp, &rw, &brw) == 0);
    struct ibv_send_wr sw = { .wr_id = 2, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bsw;
    CHECK(ibv_post_send(qp, &sw, &bsw) == 0);
    struct ibv_cq *evcq;
    void *evctx;
    CHECK(ibv_get_cq_event(ch, &evcq, &evctx) == 0 && evcq == cq);
    struct ibv_wc wc[4];
    int got = 0;
    for (long spin = 0; got < 2 && spin < 1000000000L; spin++) {
        int r = ibv_poll_cq(cq, 4 - got, wc + got);
        CHECK(r >= 0);
        for (int i = got; i < got + r; i++)
            if (wc[i].status != IBV_WC_SUCCESS) {
                printf("wc %d: status %s\n", i, ibv_wc_status_str(wc[i].status));
                return 1;
            }
        got += r;
    }
    printf("completion event: ok, %d completions\n", got);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, late_ack, cq) == 0);
    CHECK(ibv_destroy_qp(qp) == 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(ibv_destroy_cq(cq) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    printf("destroy_cq waited for the ack: %s\n", ms >= 250 ? "yes" : "no");
    CHECK(ibv_destroy_comp_channel(ch) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
    CHECK(poll(&p, 1, 0) == 0);
    printf("nothing left: ok\n");
    printf("%s\n", ibv_event_type_str(IBV_EVENT_PORT_ACTIVE));
    CHECK(ibv_close_device(ctx) == 0);
    ibv_free_device_list(list);
    return 0;
}
"#;

#[test]
fn qp_async_events_through_verbs_h_the_same_over_both() {
    let exe = build_c("async", ASYNC_C, &["-O1", "-pthread"]);
    let e = env();
    let run = |ours: bool| {
        let mut c = over(ours, &exe);
        c.args([e.dev.as_str(), &e.gid.to_string()]);
        let o = c.output().expect("run the async program");
        assert!(o.status.success(), "over {}: {}", who(ours), show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let (theirs, ours) = (run(false), run(true));
    assert!(
        theirs.contains("event 5 (send queue drained), names our qp: yes"),
        "{theirs}"
    );
    assert!(
        theirs.contains("destroy_cq waited for the ack: yes"),
        "{theirs}"
    );
    assert_eq!(ours, theirs, "over ours vs over rdma-core");
}

/// Waits until something listens on TCP `port` (perftest's client does not
/// retry its connection).
fn wait_tcp_listening(server: &mut Background, port: u16) {
    let hex = format!(":{port:04X} ");
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        if tcp
            .lines()
            .any(|l| l.contains(&hex) && l.split_whitespace().nth(3) == Some("0A"))
        {
            return;
        }
        if let Some(st) = server.0.as_mut().and_then(|c| c.try_wait().unwrap()) {
            panic!("the server exited ({st}) before listening");
        }
        assert!(Instant::now() < until, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A figure of perftest's: a token that holds a digit, or one of the
/// non-numbers printf gives a figure computed from too few or too spread
/// samples (`-nan`, `inf`): under TCG a 100-170 ms stall of the guest now
/// and then makes `t_stdev` print `-nan`, over either library.
fn is_figure(t: &str) -> bool {
    let word = t.trim_start_matches(['-', '+']).to_ascii_lowercase();
    t.bytes().any(|b| b.is_ascii_digit()) || word == "nan" || word == "inf"
}

/// perftest's output with every figure masked: the layout (banner,
/// header, columns), not the figures, QPNs or addresses.
fn layout(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| if is_figure(t) { "#" } else { t })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|l| !l.is_empty())
        .collect()
}

/// One perftest run: the server over `server_ours ? ours : rdma-core`,
/// the client over the other, same flags; (server, client) output.
fn perftest_pair(tool: &str, server_ours: bool, extra: &[&str]) -> (Output, Output) {
    let e = env();
    let port = PORT.fetch_add(1, Ordering::Relaxed);
    let (p, gid) = (port.to_string(), e.gid.to_string());
    // -F: under an emulated CPU perftest's clock check is too noisy.
    let mut args = vec![
        "-d",
        e.dev.as_str(),
        "-x",
        &gid,
        "-p",
        &p,
        "-F",
        "-n",
        "100",
    ];
    args.extend_from_slice(extra);
    let rdma_cm = extra.contains(&"-R");
    let cmd = |ours: bool| {
        // perftest waits for its peer without limit.
        let mut c = over(ours, "timeout");
        c.args(["90", tool]).args(&args);
        c
    };
    let mut s = Background::spawn(&mut cmd(server_ours));
    if rdma_cm {
        wait_cm_listening(&mut s, "TCP", port);
    } else {
        wait_tcp_listening(&mut s, port);
    }
    let c = cmd(!server_ours)
        .arg(&e.addr)
        .output()
        .expect("run perftest");
    let s = s.wait(Duration::from_secs(120));
    let what = format!(
        "{tool} {extra:?}: server over {}, client over {}",
        who(server_ours),
        who(!server_ours)
    );
    assert!(c.status.success(), "client of {what}: {}", show(&c));
    assert!(s.status.success(), "server of {what}: {}", show(&s));
    (s, c)
}

/// `tool` over ours in both roles against rdma-core's: every run reports
/// one result row under perftest's header, and ours prints in each role
/// exactly what rdma-core printed in that role (numbers masked).
fn perftest_both_roles(tool: &str, extra: &[&str]) {
    let (ours_srv, theirs_cli) = perftest_pair(tool, true, extra);
    let (theirs_srv, ours_cli) = perftest_pair(tool, false, extra);
    for (role, o, t) in [
        ("server", &ours_srv, &theirs_srv),
        ("client", &ours_cli, &theirs_cli),
    ] {
        let text = String::from_utf8_lossy(&t.stdout);
        // The servers of ib_read_lat and ib_atomic_lat only wait: they
        // print no results.
        let passive = role == "server" && matches!(tool, "ib_read_lat" | "ib_atomic_lat");
        assert!(
            passive || text.contains("#bytes"),
            "{tool} {extra:?} {role} over rdma-core printed no results: {}",
            show(t)
        );
        assert_eq!(
            layout(o),
            layout(t),
            "{tool} {extra:?} {role}: over ours:\n{}\nover rdma-core:\n{}",
            show(o),
            show(t)
        );
    }
}

#[test]
fn perftest_over_ours_against_rdma_core_both_roles() {
    assert_ours_loaded("ib_write_bw", &["-h"]);
    for tool in [
        "ib_write_bw",
        "ib_send_bw",
        "ib_read_bw",
        "ib_atomic_bw",
        "ib_send_lat",
        "ib_write_lat",
        "ib_read_lat",
        "ib_atomic_lat",
    ] {
        perftest_both_roles(tool, &[]);
    }
    // Connection through rdma_cm: rdma-core's librdmacm over ours.
    for tool in ["ib_write_bw", "ib_send_lat"] {
        perftest_both_roles(tool, &["-R"]);
    }
}

/// A C program of the `ibv_wr_*` API: an extended RC QP connected to
/// itself posts one batch of each operation (write, send, send-imm,
/// write-imm, read, both atomics), then an aborted batch and an empty
/// one; it polls an extended CQ (`ibv_start_poll` …, `ibv_wc_read_*`),
/// prints the completions and checks the memory. The same output over
/// both.
const WR_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>

#define CHECK(x) do { if (!(x)) { printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #x); return 1; } } while (0)

static char buf[65536] __attribute__((aligned(4096)));
enum { SRC = 0, DST = 4096, RECV = 8192, RD = 16384, ATOM = 20480, OLD = 20488, OLD2 = 20496,
       MSG = 24576, MSG2 = 24640 };

static int connect_self(struct ibv_qp *qp, union ibv_gid gid, int gid_index) {
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return 1;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR; a.path_mtu = IBV_MTU_1024; a.dest_qp_num = qp->qp_num;
    a.max_dest_rd_atomic = 4; a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1; a.ah_attr.grh.dgid = gid; a.ah_attr.grh.sgid_index = gid_index;
    a.ah_attr.grh.hop_limit = 1; a.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) return 1;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS; a.timeout = 14; a.retry_cnt = 7; a.rnr_retry = 7; a.max_rd_atomic = 4;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv) {
    int n, gid_index = atoi(argv[2]);
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(ibv_get_device_name(list[i]), argv[1])) dev = list[i];
    CHECK(dev);
    struct ibv_context *ctx = ibv_open_device(dev);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    CHECK(ctx && pd);
    /* An extended CQ, polled with ibv_start_poll/ibv_next_poll below and
     * with ibv_poll_cq through ibv_cq_ex_to_cq. */
    struct ibv_cq_init_attr_ex cqa = { .cqe = 64,
        .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM };
    struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &cqa);
    CHECK(cqx);
    struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE |
        IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    CHECK(mr);
    /* A QP from ibv_create_qp has no ibv_qp_ex view. */
    struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
    struct ibv_qp *plain = ibv_create_qp(pd, &ia);
    CHECK(plain);
    CHECK(ibv_qp_to_qp_ex(plain) == NULL);
    CHECK(ibv_destroy_qp(plain) == 0);
    printf("plain qp has no qp_ex: ok\n");

    struct ibv_qp_init_attr_ex ax = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2,
                 .max_inline_data = 64 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = pd,
        .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD };
    struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ax);
    CHECK(qp);
    CHECK(ax.cap.max_send_wr >= 16 && ax.cap.max_inline_data >= 64);
    struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
    CHECK(qx && ibv_qp_to_qp_ex(qp) == qx && &qx->qp_base == qp);
    printf("create_qp_ex: ok\n");
    union ibv_gid gid;
    CHECK(ibv_query_gid(ctx, 1, gid_index, &gid) == 0);
    CHECK(connect_self(qp, gid, gid_index) == 0);

    for (int i = 0; i < 4096; i++) buf[SRC + i] = (char)(i * 7 + 3);
    *(uint64_t *)(buf + ATOM) = 100;
    for (int i = 0; i < 3; i++) {
        struct ibv_sge s = { .addr = (uintptr_t)(buf + RECV + i * 1024), .length = 1024, .lkey = mr->lkey };
        struct ibv_recv_wr r = { .wr_id = 100 + i, .sg_list = &s, .num_sge = 1 }, *bad;
        CHECK(ibv_post_recv(qp, &r, &bad) == 0);
    }
    char msg[16] = "inline-sixteen!";
    struct ibv_data_buf parts[2] = { { "abc", 3 }, { "defgh", 5 } };
    struct ibv_sge two[2] = {
        { .addr = (uintptr_t)(buf + SRC), .length = 10, .lkey = mr->lkey },
        { .addr = (uintptr_t)(buf + SRC + 100), .length = 20, .lkey = mr->lkey } };

    /* "full" (run over ours only): the SEND over a two-SGE list, the
     * SEND_IMM with ibv_wr_set_inline_data and the WRITE_IMM with an inline
     * list. rdma-core 44's rxe provider gets those wrong (a SEND over an
     * SGE list carries the last SGE only; inline SENDs carry 0 bytes), so
     * the run compared with it names the same bytes by single SGEs. */
    int full = argc > 3 && !strcmp(argv[3], "full");
    memcpy(buf + MSG, "inline-sixteen!", 16);
    memcpy(buf + MSG2, "abcdefgh", 8);
    ibv_wr_start(qx);
    qx->wr_id = 1; qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)(buf + DST));
    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + SRC), 1024);
    qx->wr_id = 2;
    ibv_wr_send(qx);
    if (full)
        ibv_wr_set_sge_list(qx, 2, two);
    else
        ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + SRC), 30);
    qx->wr_id = 3;
    ibv_wr_send_imm(qx, htobe32(0x1234));
    if (full)
        ibv_wr_set_inline_data(qx, msg, 16);
    else
        ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + MSG), 16);
    memset(msg, 'x', sizeof msg); /* inline data is copied at the call */
    qx->wr_id = 4;
    ibv_wr_rdma_write_imm(qx, mr->rkey, (uintptr_t)(buf + DST + 2048), htobe32(7));
    if (full)
        ibv_wr_set_inline_data_list(qx, 2, parts);
    else
        ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + MSG2), 8);
    qx->wr_id = 5;
    ibv_wr_rdma_read(qx, mr->rkey, (uintptr_t)(buf + SRC));
    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + RD), 512);
    qx->wr_id = 6;
    ibv_wr_atomic_fetch_add(qx, mr->rkey, (uintptr_t)(buf + ATOM), 5);
    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + OLD), 8);
    qx->wr_id = 7;
    ibv_wr_atomic_cmp_swp(qx, mr->rkey, (uintptr_t)(buf + ATOM), 105, 42);
    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + OLD2), 8);
    CHECK(ibv_wr_complete(qx) == 0);

    printf("batch of 7 posted: ok\n");

    struct rec { uint64_t wr_id; int opcode; uint32_t byte_len, flags, imm, qpn; };
    struct rec sends[8], recvs[3];
    struct ibv_wc wcs[10];
    struct ibv_poll_cq_attr pa = {};
    int ns = 0, nr = 0;
    /* "full": the extended CQ's own polling (ibv_start_poll, ibv_next_poll,
     * ibv_wc_read_*); else ibv_poll_cq on it. rdma-core 44's rxe provider
     * reads send completions of this batch through start/next_poll as
     * zeros, so only ours runs that path; it must print the same. */
    for (long spin = 0; full && ns + nr < 10 && spin < 2000000000L; spin++) {
        int r = ibv_start_poll(cqx, &pa);
        if (r == ENOENT)
            continue;
        CHECK(r == 0);
        do {
            CHECK(cqx->status == IBV_WC_SUCCESS);
            struct rec x = { cqx->wr_id, ibv_wc_read_opcode(cqx), ibv_wc_read_byte_len(cqx),
                ibv_wc_read_wc_flags(cqx), 0, ibv_wc_read_qp_num(cqx) };
            if (x.flags & IBV_WC_WITH_IMM)
                x.imm = be32toh(ibv_wc_read_imm_data(cqx));
            if (x.opcode & IBV_WC_RECV) { CHECK(nr < 3); recvs[nr++] = x; }
            else { CHECK(ns < 7); sends[ns++] = x; }
        } while ((r = ibv_next_poll(cqx)) == 0);
        CHECK(r == ENOENT);
        ibv_end_poll(cqx);
    }
    for (long spin = 0; !full && ns + nr < 10 && spin < 2000000000L; spin++) {
        int got = ibv_poll_cq(cq, 10, wcs);
        CHECK(got >= 0);
        for (int i = 0; i < got; i++) {
            if (wcs[i].status != IBV_WC_SUCCESS)
                printf("wc wr_id %llu status %d (%s) opcode %d\n", (unsigned long long)wcs[i].wr_id,
                    wcs[i].status, ibv_wc_status_str(wcs[i].status), wcs[i].opcode);
            CHECK(wcs[i].status == IBV_WC_SUCCESS);
            struct rec x = { wcs[i].wr_id, wcs[i].opcode, wcs[i].byte_len, wcs[i].wc_flags,
                (wcs[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(wcs[i].imm_data) : 0, wcs[i].qp_num };
            if (x.opcode & IBV_WC_RECV) { CHECK(nr < 3); recvs[nr++] = x; }
            else { CHECK(ns < 7); sends[ns++] = x; }
        }
    }
    CHECK(ns == 7 && nr == 3);
    for (int i = 0; i < ns; i++)
        printf("send wc wr_id %llu opcode %d\n", (unsigned long long)sends[i].wr_id, sends[i].opcode);
    for (int i = 0; i < nr; i++)
        printf("recv wc wr_id %llu opcode %d byte_len %u imm %s %x our qp %s\n",
            (unsigned long long)recvs[i].wr_id, recvs[i].opcode, recvs[i].byte_len,
            (recvs[i].flags & IBV_WC_WITH_IMM) ? "yes" : "no", recvs[i].imm,
            recvs[i].qpn == qp->qp_num ? "yes" : "no");
    CHECK(memcmp(buf + DST, buf + SRC, 1024) == 0);
    CHECK(memcmp(buf + RD, buf + SRC, 512) == 0);
    if (full)
        CHECK(memcmp(buf + RECV, buf + SRC, 10) == 0 && memcmp(buf + RECV + 10, buf + SRC + 100, 20) == 0);
    else
        CHECK(memcmp(buf + RECV, buf + SRC, 30) == 0);
    CHECK(memcmp(buf + RECV + 1024, "inline-sixteen!", 16) == 0);
    CHECK(memcmp(buf + DST + 2048, "abcdefgh", 8) == 0);
    CHECK(*(uint64_t *)(buf + OLD) == 100 && *(uint64_t *)(buf + OLD2) == 105);
    CHECK(*(uint64_t *)(buf + ATOM) == 42);
    printf("memory: ok\n");

    /* An aborted batch posts nothing; an empty one completes. */
    ibv_wr_start(qx);
    qx->wr_id = 9; qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)(buf + DST));
    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)(buf + SRC), 8);
    ibv_wr_abort(qx);
    ibv_wr_start(qx);
    CHECK(ibv_wr_complete(qx) == 0);
    for (int i = 0; i < 100000; i++) CHECK(ibv_poll_cq(cq, 1, wcs) == 0);
    printf("abort and empty batch: ok\n");

    CHECK(ibv_destroy_qp(qp) == 0);
    CHECK(ibv_dereg_mr(mr) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
    CHECK(ibv_close_device(ctx) == 0);
    ibv_free_device_list(list);
    return 0;
}
"#;

#[test]
fn ibv_wr_api_and_cq_ex_the_same_over_both() {
    let exe = build_c("wr", WR_C, &["-O1", "-pthread"]);
    let e = env();
    let run = |ours: bool, full: bool| {
        let mut c = over(ours, &exe);
        c.args([e.dev.as_str(), &e.gid.to_string()]);
        if full {
            c.arg("full");
        }
        let o = c.output().expect("run the wr program");
        assert!(o.status.success(), "over {}: {}", who(ours), show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let (theirs, ours) = (run(false, false), run(true, false));
    assert!(theirs.contains("memory: ok"), "{theirs}");
    assert!(theirs.contains("abort and empty batch: ok"), "{theirs}");
    assert_eq!(ours, theirs, "over ours vs over rdma-core");
    // SGE lists, inline data and the extended CQ's polling, over ours
    // only (see WR_C): the same completions and bytes.
    assert_eq!(
        run(true, true),
        ours,
        "SGE lists, inline data, ibv_start_poll over ours"
    );
}

/// rdma-core's `udaddy` (UD over rdma_cm: service-ID resolution, then
/// datagrams both ways through AHs) over ours against rdma-core's, one
/// pair; udaddy's port is fixed (7174), so the two roles run in turn.
fn udaddy_pair(server_ours: bool) {
    let addr = env().addr;
    let extra = ["-c", "2", "-C", "10", "-S", "500"];
    let mut s = Background::spawn(over(server_ours, "udaddy").args(["-b", &addr]).args(extra));
    wait_cm_listening(&mut s, "UDP", 7174);
    let c = retry_until_ok(Duration::from_secs(20), || {
        let mut c = over(!server_ours, "udaddy");
        c.args(["-s", &addr]).args(extra);
        c
    });
    let s = s.wait(Duration::from_secs(60));
    let ctx = format!(
        "server over {}, client over {}",
        who(server_ours),
        who(!server_ours)
    );
    assert_lines(&format!("server ({ctx})"), &s, UDADDY_SERVER);
    assert_lines(&format!("client ({ctx})"), &c, UDADDY_CLIENT);
}

#[test]
fn udaddy_over_ours_against_rdma_core_both_roles() {
    assert_ours_loaded("udaddy", &["-h"]);
    udaddy_pair(true);
    udaddy_pair(false);
}

/// rdma-core's `mckey`, one over ours and one over rdma-core's library:
/// the receiver (started first, counting 20 datagrams) and the sender (1000
/// datagrams a run). mckey destroys its address handle right after
/// posting; rxe looks the AH up by number only when it sends, so over
/// rdma-core's library the sends still queued fail with the QP, at times
/// every one (docs/loss.md). A sender over rdma-core's library therefore
/// runs again, at most 5 times, until the receiver has its count. Ours
/// keeps a queued send's AH until its slot is reused: a sender over ours
/// runs once, and must be enough. A receiver that never gets its count
/// fails the test.
fn mckey_pair(receiver_ours: bool, group: &str) {
    let e = env();
    let what = format!(
        "mckey receiver over {}, sender over {}",
        who(receiver_ours),
        who(!receiver_ours)
    );
    let mut r = Background::spawn(
        over(receiver_ours, "mckey").args(["-m", group, "-b", &e.addr, "-C", "20"]),
    );
    // The receiver joins well within the sender's 3 s pause.
    std::thread::sleep(Duration::from_secs(1));
    let tries = if receiver_ours { 5 } else { 1 };
    let mut runs = 0;
    loop {
        runs += 1;
        let s = over(!receiver_ours, "mckey")
            .args(["-m", group, "-b", &e.addr, "-s", "-C", "1000"])
            .output()
            .expect("run mckey");
        assert!(s.status.success(), "{what}: sender: {}", show(&s));
        let done = r.0.as_mut().unwrap().try_wait().unwrap().is_some();
        if done || runs == tries {
            break;
        }
    }
    let out = r.wait(Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} ({runs} sender runs): {}",
        show(&out)
    );
    for l in [
        "receiving data transfers",
        "data transfers complete",
        "return status 0",
    ] {
        assert!(
            text.lines().any(|t| t == l),
            "{what} ({runs} sender runs): the receiver lacks {l:?}: {}",
            show(&out)
        );
    }
    eprintln!("{what}: the receiver had its 20 after {runs} sender run(s)");
}

#[test]
fn mckey_over_ours_against_rdma_core_both_roles() {
    assert_ours_loaded("mckey", &["-h"]);
    mckey_pair(true, "239.77.4.1");
    mckey_pair(false, "239.77.4.2");
}

//! Four hosts on one segment (issue 31): the bed boots four VMs on a VDE
//! hub, every host pings every other with `rverbs pingpong` and with
//! rdma-core's `ibv_rc_pingpong`, and three clients connect to one
//! rdma_cm server at once (two of them rdma-core's `ucmatose`, one ours).

use super::Tally;
use crate::vm;
use std::time::Duration;

/// Hosts in the check.
const HOSTS: usize = 4;

/// Every host runs this: a server per tool on its own port that takes its
/// N-1 peers one after another, and a client per tool to each peer, which
/// retries while that peer's server is busy with another. Then the fan-in
/// on host 1's rdma_cm port. One line per outcome; the status is nonzero
/// if any client or server failed.
const SCRIPT: &str = r#"
H=$RVERBS_VM_HOST; N=$RVERBS_VM_HOSTS; R=$RVERBS_BIN; rc=0
serve() {
    i=1; r=0
    while [ $i -lt $N ]; do
        $1 -d rxe0 -g 1 -p $2 -n 5 > /tmp/s.$2.$i 2>&1 || { r=1; echo "SERVE $1 FAILED"; cat /tmp/s.$2.$i; }
        i=$((i + 1))
    done
    return $r
}
ping_peer() {
    for t in $(seq 300); do
        if $1 -d rxe0 -g 1 -p $3 -n 5 $2 > /tmp/c.out 2>&1; then
            echo "PING $4 host$H -> $2 ok"; return 0
        fi
        sleep 0.2
    done
    echo "PING $4 host$H -> $2 FAILED"; cat /tmp/c.out; return 1
}
serve ibv_rc_pingpong $((18500 + H)) & S1=$!
serve "$R pingpong" $((18600 + H)) & S2=$!
for a in $RVERBS_HOST_ADDRS; do
    [ "$a" = "$RVERBS_TEST_ADDR" ] && continue
    p=${a##*.}
    ping_peer ibv_rc_pingpong $a $((18500 + p)) ibv_rc_pingpong || rc=1
    ping_peer "$R pingpong" $a $((18600 + p)) rverbs || rc=1
done
wait $S1 || rc=1
wait $S2 || rc=1
# rdma_cm fan-in: three connections, one from each other host.
if [ $H = 1 ]; then
    $R cmatose -c 3 -C 10 --timeout 120 > /tmp/fanin.out 2>&1 && echo "FANIN server: 3 clients ok" || { rc=1; echo "FANIN server FAILED"; cat /tmp/fanin.out; }
else
    if [ $H = 4 ]; then C="$R cmatose"; else C=ucmatose; fi
    ok=0
    for t in $(seq 300); do
        if $C -s 10.77.0.1 -c 1 -C 10 > /tmp/fanin.out 2>&1; then ok=1; break; fi
        sleep 0.2
    done
    if [ $ok = 1 ]; then echo "FANIN client host$H ($C) ok"; else rc=1; echo "FANIN client host$H FAILED"; cat /tmp/fanin.out; fi
fi
exit $rc
"#;

/// The four-host check on `base`'s kernel, with the tool at `bin`.
pub(super) fn checks(tally: &mut Tally, base: &vm::Options, bin: &str) {
    let what = format!(
        "{HOSTS} hosts on a VDE hub: each pings every other with ibv_rc_pingpong and rverbs pingpong (both ways), and 3 clients (2 ucmatose, 1 rverbs cmatose) connect at once to one rverbs cmatose"
    );
    let run = vm::run(&vm::Options {
        hosts: HOSTS,
        every_host: true,
        cmd: vec!["sh".into(), "-c".into(), SCRIPT.into()],
        peer_cmd: None,
        env: vec![("RVERBS_BIN".into(), bin.into())],
        timeout: Duration::from_secs(600),
        ..base.clone()
    });
    let o = match run {
        Ok(o) => o,
        Err(e) => return tally.fail(&what, &e),
    };
    let count = |p: &str| {
        o.lines
            .iter()
            .flatten()
            .filter(|l| l.starts_with(p) && l.ends_with(" ok"))
            .count()
    };
    let pings = count("PING ");
    let fanin = count("FANIN ");
    // Each ordered pair once per tool, and the fan-in's four lines.
    let want = HOSTS * (HOSTS - 1) * 2;
    if o.success() && pings == want && fanin == HOSTS {
        tally.pass(&what)
    } else {
        tally.fail(
            &what,
            &format!(
                "statuses {:?}; {pings} of {want} pings, {fanin} of {HOSTS} fan-in lines",
                o.status
            ),
        )
    }
}

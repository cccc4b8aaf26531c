//! The plan of a run: everything `rverbs perf` decides from the flags, the
//! device's limits and the two numbers the peer sends before its address
//! (cycle buffer and MTU): the sizes, the MTU, the CQ depth, the memory
//! per QP, the QPs' attributes, how a bandwidth run ends, and with
//! [`super::script`] what each test does and in which order.
//!
//! Nothing here touches a device, a socket or the clock, so that each
//! decision has a unit test; the other files carry the plan out.

use super::super::wait::bad_value;
use super::args::{Conn, PerfArgs};
use super::script::{script, spec, Script, Spec};
use rverbs::{Access, DeviceAttr, GidEntry, GidType, Mtu, PortAttr, QpCaps, QpType, Result};
use rverbs_tool::wire::perf::{parse_mtu, MTU_LEN};
use std::time::Duration;

/// Signal one work request in this many on bandwidth tests (perftest's
/// default CQ moderation).
pub const CQ_MOD: u32 = 100;
/// Receives kept posted by a send test's receiver (perftest's rx depth).
pub const RX_DEPTH: u32 = 512;
/// Our cycle buffer (perftest's default: the page size) and cache line.
pub const CYCLE_BUFFER: u32 = 4096;
pub const CACHE_LINE: u32 = 64;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const LINK_ETHERNET: u8 = 2;
/// perftest's Q_Key for UD.
pub const UD_QKEY: u32 = 0x1111_1111;
/// The global routing header in front of each UD receive.
const GRH_BYTES: u32 = 40;
/// Send queue entries of a latency test at least: it signals every
/// request, and a few more entries than perftest's depth of 1 keep a
/// completion that is polled late from stalling the next post.
const LAT_MIN_SEND_WR: u32 = 16;

/// Checks the sizes and depths asked for against the device's and the
/// port's limits; returns the entries of the CQ all QPs share: per QP, two
/// TX depths (at least 16 each) and [`RX_DEPTH`] receives.
pub fn cq_entries(a: &PerfArgs, dev: &DeviceAttr, port: &PortAttr) -> Result<u32> {
    if a.tx_depth() > dev.max_qp_wr {
        return Err(bad_value(format!(
            "-t {}: larger than the device's max_qp_wr ({})",
            a.tx_depth(),
            dev.max_qp_wr
        )));
    }
    let cqe = a
        .tx_depth()
        .max(16)
        .checked_mul(2)
        .and_then(|d| d.checked_add(RX_DEPTH))
        .and_then(|d| d.checked_mul(a.qps))
        .filter(|&c| c <= dev.max_cqe)
        .ok_or_else(|| {
            bad_value(format!(
                "-t {} -q {}: the CQ they share ((2 x tx-depth + {RX_DEPTH} receives) per QP) exceeds the device's max_cqe ({})",
                a.tx_depth(),
                a.qps,
                dev.max_cqe
            ))
        })?;
    // UD's sizes stop at the path MTU, agreed later: the largest possible.
    let max_size = a.sizes(4096).iter().copied().max().unwrap_or(2);
    if max_size > port.max_msg_sz {
        return Err(bad_value(format!(
            "-s {max_size}: larger than the port's largest message ({} bytes)",
            port.max_msg_sz
        )));
    }
    Ok(cqe)
}

/// The MTU this side offers (an `ibv_mtu` value): the port's active one,
/// or `-m`'s where it is lower (perftest's `set_mtu`).
pub fn offered_mtu(flag: Option<u32>, active: u8) -> u8 {
    match flag {
        Some(bytes) => (bytes / 128).trailing_zeros() as u8,
        None => active,
    }
    .min(active)
}

/// The MTU both sides use: the smaller of ours and the peer's, ours where
/// the peer's message is no `ibv_mtu` value (as perftest).
pub fn agreed_mtu(ours: u8, msg: &[u8; MTU_LEN]) -> u8 {
    parse_mtu(msg).map_or(ours, |p| p.min(ours))
}

/// Bytes of an `ibv_mtu` value.
pub fn mtu_bytes(mtu: u8) -> u32 {
    128u32 << mtu
}

/// The QP attribute of an `ibv_mtu` value (1024 for one we do not know).
pub fn mtu_of(v: u8) -> Mtu {
    match v {
        1 => Mtu::M256,
        2 => Mtu::M512,
        4 => Mtu::M2048,
        5 => Mtu::M4096,
        _ => Mtu::M1024,
    }
}

/// The sizes to run at `mtu_bytes`: `-s` (or the default) or all of `-a`;
/// UD lowers each to the MTU, since a UD message fits in one packet
/// (perftest does so to its 64 KiB default too).
pub fn sizes(a: &PerfArgs, mtu_bytes: u32) -> Vec<u32> {
    let mut sizes = a.sizes(mtu_bytes);
    if a.conn == Conn::Ud {
        for s in &mut sizes {
            *s = (*s).min(mtu_bytes);
        }
        sizes.dedup();
    }
    sizes
}

/// Bytes of each of a QP's two regions (the one it sends from, the one the
/// peer targets). The peer's RDMA may cycle through a buffer of `cycle`
/// bytes starting at any cache line below it: room for that and one more
/// message (and a UD receive's GRH), in whole pages.
pub fn region(max_size: u32, cycle: u32) -> usize {
    (max_size.max(cycle) as usize + max_size as usize + GRH_BYTES as usize).next_multiple_of(4096)
}

/// perftest's choice of GID when none is given on RoCE: of `port`'s, an
/// IPv4 one over an IPv6 one, RoCE v2 over v1, then the lowest index.
pub fn best_gid(table: &[GidEntry], port: u8) -> Result<u32> {
    let score =
        |e: &GidEntry| u8::from(is_v4(&e.gid)) * 2 + u8::from(e.gid_type == GidType::RoceV2);
    table
        .iter()
        .filter(|e| e.port == u32::from(port))
        .max_by_key(|e| (score(e), std::cmp::Reverse(e.index)))
        .map(|e| e.index)
        .ok_or_else(|| bad_value(format!("port {port} has no GID: pass -x")))
}

/// Whether a GID is an IPv4-mapped address.
pub fn is_v4(g: &[u8; 16]) -> bool {
    g[..10] == [0; 10] && g[10..12] == [0xff, 0xff]
}

/// The memory access the peer's operations need.
pub fn access(conn: Conn) -> Access {
    match conn {
        Conn::Rc => {
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
        }
        Conn::Uc => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        Conn::Ud => Access::LOCAL_WRITE,
    }
}

pub fn qp_type(conn: Conn) -> QpType {
    match conn {
        Conn::Rc => QpType::Rc,
        Conn::Uc => QpType::Uc,
        Conn::Ud => QpType::Ud,
    }
}

/// The queue sizes each QP asks for.
pub fn qp_caps(a: &PerfArgs) -> QpCaps {
    QpCaps {
        max_send_wr: a
            .tx_depth()
            .max(if a.test.is_lat() { LAT_MIN_SEND_WR } else { 1 }),
        max_recv_wr: RX_DEPTH,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: a.inline,
    }
}

/// The RDMA READs and atomics this side accepts at once (its address
/// message's `OUT_READS`, which the peer takes as its initiator depth).
pub fn out_reads(dev: &DeviceAttr) -> u16 {
    dev.max_qp_rd_atom.clamp(1, 255) as u16
}

/// The responder resources of an RC QP (`max_dest_rd_atomic`).
pub fn responder_depth(out_reads: u16) -> u8 {
    out_reads.min(255) as u8
}

/// The initiator depth of an RC QP (`max_rd_atomic`): the peer's
/// `OUT_READS` within the device's limit, at least 1.
pub fn initiator_depth(peer_out_reads: u16, dev: &DeviceAttr) -> u8 {
    peer_out_reads
        .min(dev.max_qp_init_rd_atom.clamp(1, 255) as u16)
        .max(1) as u8
}

/// The phases of a timed run (perftest's alarm states): a margin not
/// measured, the sample, another margin, the end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    Warm,
    Sample,
    Cool,
    End,
}

/// How a bandwidth run ends: after its iterations, after a duration
/// (`-D`), or never (`--run_infinitely`, printing each period).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Length {
    Iters(u32),
    Timed { margin: Duration, sample: Duration },
    Forever { period: Duration },
}

impl Length {
    pub fn of(a: &PerfArgs) -> Length {
        let (d, m) = a.duration_and_margin();
        if a.run_infinitely {
            Length::Forever {
                period: Duration::from_secs(d.into()),
            }
        } else if a.duration.is_some() {
            Length::Timed {
                margin: Duration::from_secs(m.into()),
                sample: Duration::from_secs((d - 2 * m).into()),
            }
        } else {
            Length::Iters(a.iters())
        }
    }

    /// Whether the run looks at the clock (by duration, or forever).
    pub fn timed(self) -> bool {
        !matches!(self, Length::Iters(_))
    }

    /// The phase `t` after the start.
    pub fn phase(self, t: Duration) -> Phase {
        match self {
            Length::Timed { margin, .. } if t < margin => Phase::Warm,
            Length::Timed { margin, sample } if t < margin + sample => Phase::Sample,
            Length::Timed { margin, sample } if t < margin * 2 + sample => Phase::Cool,
            Length::Timed { .. } => Phase::End,
            _ => Phase::Sample,
        }
    }
}

/// What the run does, decided once the peer's cycle buffer and MTU are
/// known.
pub struct Plan {
    pub client: bool,
    pub spec: Spec,
    pub sizes: Vec<u32>,
    /// The agreed `ibv_mtu` value.
    pub mtu: u8,
    /// Bytes of each of a QP's two regions ([`region`]).
    pub region: usize,
    pub length: Length,
    pub script: Script,
}

impl Plan {
    /// The plan for `a` with the agreed MTU and the larger cycle buffer.
    pub fn new(a: &PerfArgs, mtu: u8, cycle: u32) -> Plan {
        let client = a.server.is_some();
        let sizes = sizes(a, mtu_bytes(mtu));
        let max_size = sizes.iter().copied().max().unwrap_or(2);
        Plan {
            client,
            spec: spec(a.test),
            region: region(max_size, cycle),
            sizes,
            mtu,
            length: Length::of(a),
            script: script(a, client),
        }
    }

    pub fn mtu_bytes(&self) -> u32 {
        mtu_bytes(self.mtu)
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use clap::{Args, Command, FromArgMatches};

    /// `rverbs perf ARGS` as clap parses it.
    pub fn args(line: &str) -> PerfArgs {
        let m = PerfArgs::augment_args(Command::new("perf"))
            .try_get_matches_from(std::iter::once("perf").chain(line.split_whitespace()))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        PerfArgs::from_arg_matches(&m).unwrap()
    }

    fn dev(max_qp_wr: u32, max_cqe: u32) -> DeviceAttr {
        DeviceAttr {
            max_qp_wr,
            max_cqe,
            ..DeviceAttr::default()
        }
    }

    fn port(max_msg_sz: u32) -> PortAttr {
        PortAttr {
            max_msg_sz,
            ..PortAttr::default()
        }
    }

    #[test]
    fn sizes_are_perftests_defaults_one_size_or_every_power_of_two() {
        assert_eq!(sizes(&args("write-bw"), 4096), [65536]);
        assert_eq!(sizes(&args("send-lat"), 4096), [2]);
        assert_eq!(sizes(&args("atomic-bw"), 4096), [8]);
        assert_eq!(sizes(&args("read-lat -s 300"), 4096), [300]);
        let all = sizes(&args("write-bw -a"), 1024);
        assert_eq!(all.len(), 23);
        assert_eq!((all[0], all[22]), (2, 1 << 23));
        assert!(all.windows(2).all(|w| w[1] == 2 * w[0]));
        // Atomics move 8 bytes, -a or not.
        assert_eq!(sizes(&args("atomic-lat -a"), 4096), [8]);
    }

    #[test]
    fn ud_caps_every_size_at_the_mtu() {
        assert_eq!(sizes(&args("send-bw -c UD"), 1024), [1024]);
        assert_eq!(sizes(&args("send-lat -c UD -s 4000"), 2048), [2048]);
        assert_eq!(sizes(&args("send-lat -c UD -s 100"), 2048), [100]);
        assert_eq!(
            sizes(&args("send-bw -c UD -a"), 1024),
            [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
        );
        // UC is not capped.
        assert_eq!(sizes(&args("send-bw -c UC"), 1024), [65536]);
    }

    #[test]
    fn the_mtu_is_the_smallest_of_port_flag_and_peer() {
        assert_eq!(offered_mtu(None, 3), 3);
        assert_eq!(offered_mtu(Some(256), 3), 1);
        assert_eq!(offered_mtu(Some(2048), 5), 4);
        assert_eq!(offered_mtu(Some(4096), 3), 3, "-m above the port's");
        assert_eq!(agreed_mtu(3, b"5\0"), 3);
        assert_eq!(agreed_mtu(3, b"2\0"), 2);
        // A peer's value that is no ibv_mtu: ours.
        assert_eq!(agreed_mtu(3, b"9\0"), 3);
        assert_eq!(agreed_mtu(3, b"x\0"), 3);
        assert_eq!([1, 2, 3, 4, 5].map(mtu_bytes), [256, 512, 1024, 2048, 4096]);
        assert_eq!(mtu_of(1), Mtu::M256);
        assert_eq!(mtu_of(5), Mtu::M4096);
        assert_eq!(mtu_of(0), Mtu::M1024);
    }

    #[test]
    fn the_cq_holds_two_tx_depths_and_the_receives_of_each_qp() {
        let (d, p) = (dev(16384, 1 << 20), port(1 << 31));
        assert_eq!(
            cq_entries(&args("write-bw"), &d, &p).unwrap(),
            2 * 128 + 512
        );
        assert_eq!(
            cq_entries(&args("write-bw -q 4 -t 200"), &d, &p).unwrap(),
            4 * (400 + 512)
        );
        // Latency tests' depth of 1 counts as 16.
        assert_eq!(cq_entries(&args("send-lat"), &d, &p).unwrap(), 32 + 512);
    }

    #[test]
    fn limits_are_named_errors() {
        let p = port(1 << 31);
        let e = cq_entries(&args("send-bw -t 300"), &dev(256, 1 << 20), &p).unwrap_err();
        assert_eq!(
            e.to_string(),
            bad_value("-t 300: larger than the device's max_qp_wr (256)").to_string()
        );
        let e = cq_entries(&args("send-bw -q 100"), &dev(16384, 4096), &p).unwrap_err();
        assert!(
            e.to_string()
                .contains("-t 128 -q 100: the CQ they share ((2 x tx-depth + 512 receives) per QP) exceeds the device's max_cqe (4096)"),
            "{e}"
        );
        // An overflow is the same error, not a wrap.
        let e = cq_entries(
            &args("send-bw -q 16384 -t 4294967295 -l 1"),
            &dev(u32::MAX, u32::MAX),
            &p,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("exceeds the device's max_cqe"),
            "{e}"
        );
        let e = cq_entries(&args("write-bw -a"), &dev(16384, 1 << 20), &port(1 << 20)).unwrap_err();
        assert!(
            e.to_string()
                .contains("-s 8388608: larger than the port's largest message (1048576 bytes)"),
            "{e}"
        );
        // UD's -a is checked at the largest MTU.
        assert!(cq_entries(&args("send-bw -c UD -a"), &dev(16384, 1 << 20), &port(4096)).is_ok());
    }

    #[test]
    fn a_region_holds_the_peers_cycle_and_one_more_message_in_pages() {
        assert_eq!(region(2, 4096), 8192);
        assert_eq!(region(65536, 4096), 135168);
        // A larger cycle buffer of the peer's.
        assert_eq!(region(2, 65536), 65536 + 4096);
        // Exactly a page of message and cycle: the GRH needs one more.
        assert_eq!(region(4096, 4096), 12288);
        for (size, cycle) in [(1, 4096), (4097, 4096), (1 << 23, 16384)] {
            let r = region(size, cycle);
            assert_eq!(r % 4096, 0);
            assert!(r >= (size.max(cycle) + size + 40) as usize);
        }
    }

    fn gid(port: u32, index: u32, v4: bool, gid_type: GidType) -> GidEntry {
        let mut gid = [0u8; 16];
        if v4 {
            gid[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
        } else {
            gid[..2].copy_from_slice(&[0xfe, 0x80]);
        }
        GidEntry {
            port,
            index,
            gid,
            gid_type,
            netdev_ifindex: 0,
            netdev: None,
        }
    }

    #[test]
    fn the_best_gid_is_ipv4_roce_v2_at_the_lowest_index() {
        let t = [
            gid(1, 0, false, GidType::RoceV1),
            gid(1, 1, false, GidType::RoceV2),
            gid(1, 2, true, GidType::RoceV1),
            gid(1, 3, true, GidType::RoceV2),
            gid(1, 4, true, GidType::RoceV2),
            gid(2, 5, true, GidType::RoceV2),
        ];
        assert_eq!(best_gid(&t, 1).unwrap(), 3);
        assert_eq!(best_gid(&t[..3], 1).unwrap(), 2);
        assert_eq!(best_gid(&t[..2], 1).unwrap(), 1);
        assert_eq!(best_gid(&t, 2).unwrap(), 5);
        assert!(best_gid(&t, 3)
            .unwrap_err()
            .to_string()
            .contains("port 3 has no GID: pass -x"));
        assert!(is_v4(&t[2].gid) && !is_v4(&t[1].gid));
    }

    #[test]
    fn qp_attributes() {
        assert_eq!(access(Conn::Ud), Access::LOCAL_WRITE);
        assert_eq!(access(Conn::Uc), Access::LOCAL_WRITE | Access::REMOTE_WRITE);
        assert!(access(Conn::Rc).contains(Access::REMOTE_ATOMIC | Access::REMOTE_READ));
        assert_eq!(qp_type(Conn::Uc), QpType::Uc);
        let c = qp_caps(&args("send-lat -I 64"));
        assert_eq!(
            (c.max_send_wr, c.max_recv_wr, c.max_inline_data),
            (16, 512, 64)
        );
        assert_eq!(qp_caps(&args("write-bw -t 1")).max_send_wr, 1);
        assert_eq!(qp_caps(&args("write-bw -t 4")).max_send_wr, 4);
        assert_eq!(qp_caps(&args("write-lat -t 20")).max_send_wr, 20);
        let d = |rd, init| DeviceAttr {
            max_qp_rd_atom: rd,
            max_qp_init_rd_atom: init,
            ..DeviceAttr::default()
        };
        assert_eq!(out_reads(&d(0, 0)), 1);
        assert_eq!(out_reads(&d(128, 0)), 128);
        assert_eq!(out_reads(&d(1000, 0)), 255);
        assert_eq!(responder_depth(300), 255);
        assert_eq!(initiator_depth(16, &d(0, 128)), 16);
        assert_eq!(initiator_depth(200, &d(0, 128)), 128);
        assert_eq!(initiator_depth(0, &d(0, 128)), 1, "at least one");
        assert_eq!(initiator_depth(16, &d(0, 0)), 1);
    }

    #[test]
    fn timed_runs_have_a_margin_a_sample_and_a_margin() {
        let s = Duration::from_secs;
        assert_eq!(Length::of(&args("write-bw")), Length::Iters(5000));
        assert_eq!(Length::of(&args("send-bw -n 30")), Length::Iters(30));
        let l = Length::of(&args("write-bw -D 10"));
        assert_eq!(
            l,
            Length::Timed {
                margin: s(2),
                sample: s(6)
            }
        );
        assert_eq!(
            Length::of(&args("write-bw -D 10 -f 1")),
            Length::Timed {
                margin: s(1),
                sample: s(8)
            }
        );
        let at = |ms| l.phase(Duration::from_millis(ms));
        assert_eq!(
            [0, 1999, 2000, 7999, 8000, 9999, 10000, 60000].map(at),
            [
                Phase::Warm,
                Phase::Warm,
                Phase::Sample,
                Phase::Sample,
                Phase::Cool,
                Phase::Cool,
                Phase::End,
                Phase::End
            ]
        );
        let f = Length::of(&args("write-bw --run_infinitely"));
        assert_eq!(f, Length::Forever { period: s(5) });
        assert_eq!(
            Length::of(&args("write-bw --run_infinitely -D 3")),
            Length::Forever { period: s(3) }
        );
        // Iterations and forever: always the sample.
        assert_eq!(f.phase(s(1000)), Phase::Sample);
        assert_eq!(Length::Iters(5).phase(s(1000)), Phase::Sample);
        assert!(f.timed() && l.timed() && !Length::Iters(5).timed());
    }

    #[test]
    fn the_plan_after_the_peers_numbers() {
        let p = Plan::new(&args("send-bw -c UD -a 10.0.0.1"), 2, 16384);
        assert!(p.client);
        assert_eq!(p.mtu_bytes(), 512);
        assert_eq!(p.sizes.last(), Some(&512));
        assert_eq!(p.region, region(512, 16384));
        let p = Plan::new(&args("write-bw -s 100000"), 3, 4096);
        assert!(!p.client);
        assert_eq!(p.region, region(100000, 4096));
        assert_eq!(p.length, Length::Iters(5000));
    }
}

//! The creation differential against the fake mlx5 device (issue 29):
//! the same generated cases (a dma-buf MR, a CQ, an SRQ or none, a QP of
//! RC, UC or UD with random caps) created by rdma-core's libmlx5
//! (`fake/cases.c`) and by rverbs (`src/bin/fake_cases.rs` of the oracle
//! crate), each in one process against the fake. Each case must end the same way in both
//! (what each step granted, or its errno), and the kernel must have been
//! asked for the same objects: the fake logs each creation's fields, the
//! udata's and the memory the kernel would pin (`umem`, from the counts
//! and sizes, as mlx5_ib derives it), and every field must agree but for
//! the listed differences (docs/mlx5.md), each counted.

use crate::host::Result;
use std::collections::BTreeMap;

/// Cases a run: the floor.
pub(super) const CASES: usize = 10_000;

/// The fake's `max_srq_recv_wr` (GET_CONTEXT's `max_srq_recv_wr`): an
/// SRQ of `w` receives gets rdma-core's wait queue when `2w + 1` fits.
const MAX_SRQ_RECV_WR: u64 = 1 << 15;

/// mlx5's `MLX5_QP_FLAG_SCATTER_CQE`.
const SCATTER_CQE: u64 = 1 << 1;

/// One case, as both drivers read it (see fake/cases.c).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Case {
    cqe: u32,
    srq_wr: u32,
    srq_sge: u32,
    qp_type: u32,
    send_wr: u32,
    recv_wr: u32,
    send_sge: u32,
    recv_sge: u32,
    inline: u32,
    sig_all: u32,
    /// The dma-buf MR: offset into the 16 MiB "dma-buf", length, IOVA,
    /// access flags.
    dm_offset: u64,
    dm_length: u64,
    dm_iova: u64,
    dm_access: u32,
}

impl Case {
    pub(super) fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            self.cqe,
            self.srq_wr,
            self.srq_sge,
            self.qp_type,
            self.send_wr,
            self.recv_wr,
            self.send_sge,
            self.recv_sge,
            self.inline,
            self.sig_all,
            self.dm_offset,
            self.dm_length,
            self.dm_iova,
            self.dm_access
        )
    }
}

/// xorshift64*: the cases from a seed, the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % (u64::from(hi - lo) + 1)) as u32
    }

    /// `lo..=hi` with every power of two as likely (sizes spread over
    /// their magnitudes, with the edges around each power).
    fn log(&mut self, lo: u32, hi: u32) -> u32 {
        let bits = 32 - hi.leading_zeros();
        let b = self.range(0, bits);
        let top = if b >= 32 {
            u32::MAX
        } else {
            (1u32 << b).saturating_sub(1)
        };
        self.range(lo, top.clamp(lo, hi))
    }

    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

/// `n` cases from `seed`: mostly within the device's limits, a few past
/// them (both stacks must refuse those), every QP type, SRQs in a third.
pub(super) fn generate(seed: u64, n: usize) -> Vec<Case> {
    // Every seed its own stream (xorshift needs a state that is not 0).
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..n)
        .map(|_| {
            let cqe = match r.next() % 100 {
                0..=1 => r.range(1 << 24, 1 << 25),
                2 => 0,
                3..=9 => r.log(4097, 1 << 16),
                _ => r.log(1, 4096),
            };
            let (srq_wr, srq_sge) = if r.percent(33) {
                let w = if r.percent(2) {
                    r.range(1 << 15, 1 << 16)
                } else {
                    r.log(1, 20_000)
                };
                let s = if r.percent(3) {
                    r.range(32, 40)
                } else {
                    r.range(1, 31)
                };
                (w, s)
            } else {
                (0, 0)
            };
            let wr = |r: &mut Rng| match r.next() % 100 {
                0..=1 => 0,
                2..=3 => r.range(1 << 15, 1 << 16),
                _ => r.log(1, 8192),
            };
            let send_wr = wr(&mut r);
            let recv_wr = wr(&mut r);
            let sge = |r: &mut Rng| {
                if r.percent(3) {
                    r.range(33, 40)
                } else {
                    r.range(0, 32)
                }
            };
            let send_sge = sge(&mut r);
            let recv_sge = sge(&mut r);
            let inline = match r.next() % 100 {
                0..=49 => 0,
                50..=52 => r.range(1025, 2048),
                _ => r.log(1, 1024),
            };
            // The dma-buf MR: mostly inside the 16 MiB and at the offset's
            // place in its page; some past its end, empty, or off its
            // place; access flags from the ones a ConnectX takes, now and
            // then an unknown bit.
            const DMABUF: u64 = 16 << 20;
            let dm_offset = match r.next() % 100 {
                0..=69 => u64::from(r.range(0, 4095)) * 4096,
                70..=89 => r.next() % DMABUF,
                _ => DMABUF + r.next() % DMABUF,
            };
            let dm_length = if r.percent(5) {
                0
            } else {
                u64::from(r.log(1, 1 << 24))
            };
            let page = (r.next() % (1 << 36)) * 4096;
            let dm_iova = if r.percent(90) {
                page + dm_offset % 4096
            } else {
                page + (dm_offset + 8) % 4096
            };
            let mut dm_access = 0;
            for (bit, p) in [(1, 80), (2, 50), (4, 50), (8, 50), (1 << 20, 50)] {
                if r.percent(p) {
                    dm_access |= bit;
                }
            }
            if r.percent(3) {
                dm_access |= 1 << 12;
            }
            Case {
                dm_offset,
                dm_length,
                dm_iova,
                dm_access,
                cqe,
                srq_wr,
                srq_sge,
                qp_type: r.range(2, 4),
                send_wr,
                recv_wr,
                send_sge,
                recv_sge,
                inline,
                sig_all: r.range(0, 1),
            }
        })
        .collect()
}

/// A creation the fake logged (`  obj KIND k=v ...`) or a refusal.
#[derive(Debug, Clone, PartialEq)]
struct Obj {
    kind: String,
    fields: BTreeMap<String, String>,
}

impl Obj {
    fn num(&self, k: &str) -> Result<u64> {
        let v = self
            .fields
            .get(k)
            .ok_or(format!("{} has no {k}", self.kind))?;
        let (digits, radix) = match v.strip_prefix("0x") {
            Some(h) => (h, 16),
            None => (v.as_str(), 10),
        };
        u64::from_str_radix(digits, radix).map_err(|e| format!("{} {k}={v}: {e}", self.kind))
    }
}

/// The fake's log split at the drivers' `case N` lines: what came before
/// the first (the PD and the MR), then each case's creations, refusals
/// left out (the drivers' errnos say how each step ended).
fn split_log(text: &str) -> (Vec<Obj>, Vec<Vec<Obj>>) {
    let mut cases: Vec<Vec<Obj>> = vec![Vec::new()];
    for line in text.lines() {
        if line.starts_with("case ") {
            cases.push(Vec::new());
        } else if let (Some(rest), Some(c)) = (line.strip_prefix("  obj "), cases.last_mut()) {
            let mut it = rest.split_whitespace();
            let kind = it.next().unwrap_or("").to_string();
            let fields = it
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            c.push(Obj { kind, fields });
        }
    }
    let preamble = cases.remove(0);
    (preamble, cases)
}

/// A driver's line for a case: `cq=0/15 srq=22 qp=0/1/2/3/4/5` as a map.
fn steps(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .skip(2)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The listed differences, counted over a run.
#[derive(Debug, Default)]
pub(super) struct Listed {
    /// rverbs refuses a QP without a send queue (rdma-core creates one).
    receive_only: usize,
    /// rdma-core asks for scatter-to-CQE on its QPs; rverbs does not.
    scatter_cqe: usize,
    /// rdma-core gives each QP a user index (CQE version 1); rverbs
    /// reads version 0 and sends none.
    uidx: usize,
    /// rdma-core's SRQ asks the kernel for its wait queue too.
    srq_wait_queue: usize,
    /// rverbs' CREATE_QP carries the caps its sizing granted; rdma-core's
    /// what was asked.
    core_caps: usize,
    /// rdma-core grants -4 bytes of inline data (as unsigned) to a QP
    /// with no send SGEs and none asked; rverbs 0.
    inline_wrapped: usize,
}

impl std::fmt::Display for Listed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "listed differences: receive-only QPs refused by rverbs {}, SCATTER_CQE {}, user index {}, SRQ wait queue {}, core caps as granted {}, inline -4 {}",
            self.receive_only, self.scatter_cqe, self.uidx, self.srq_wait_queue, self.core_caps, self.inline_wrapped
        )
    }
}

fn pow2_at_least(v: u64) -> u64 {
    v.next_power_of_two()
}

/// One case: the drivers' lines and the kernel's creations, equal but for
/// the listed differences.
fn compare_case(
    case: &Case,
    (their_line, theirs): (&str, &[Obj]),
    (our_line, ours): (&str, &[Obj]),
    listed: &mut Listed,
) -> Result<()> {
    let mut ts = steps(their_line);
    let os = steps(our_line);
    let mut theirs: Vec<&Obj> = theirs.iter().collect();
    if case.send_wr == 0 && ts.get("qp").is_some_and(|v| v.starts_with("0/")) {
        // A receive-only QP: rdma-core creates it, rverbs refuses it
        // (EINVAL) before asking the kernel.
        if os.get("qp").map(String::as_str) != Some("22") {
            return Err(format!(
                "a receive-only QP: rverbs {our_line:?}, expected qp=22"
            ));
        }
        ts.insert("qp".into(), "22".into());
        theirs.retain(|o| o.kind != "qp");
        listed.receive_only += 1;
    }
    // rdma-core's granted max_inline_data of a QP with no send SGEs and
    // no inline data: its WQE size less the overheads, -4, as unsigned;
    // rverbs answers 0.
    if let (Some(t), Some(o)) = (ts.get_mut("qp"), os.get("qp")) {
        if let (Some(tp), Some(op)) = (t.strip_suffix("/4294967292"), o.strip_suffix("/0")) {
            if tp == op && case.send_sge == 0 && case.inline == 0 {
                *t = o.clone();
                listed.inline_wrapped += 1;
            }
        }
    }
    if ts != os {
        return Err(format!("rdma-core: {their_line}\n  rverbs: {our_line}"));
    }
    if theirs.len() != ours.len() {
        return Err(format!(
            "the kernel was asked for {} objects by rdma-core, {} by rverbs: {theirs:?} / {ours:?}",
            theirs.len(),
            ours.len()
        ));
    }
    for (t, o) in theirs.into_iter().zip(ours) {
        if t.kind != o.kind {
            return Err(format!(
                "rdma-core created a {}, rverbs a {}",
                t.kind, o.kind
            ));
        }
        let mut t = t.clone();
        let mut o = o.clone();
        match o.kind.as_str() {
            "srq" => {
                let w = u64::from(case.srq_wr);
                let ours_wqes = pow2_at_least(w + 1);
                // rdma-core: a wait queue when 2w + 1 <= max_srq_recv_wr.
                let their_wqes = if 2 * w < MAX_SRQ_RECV_WR {
                    listed.srq_wait_queue += 1;
                    pow2_at_least(2 * w + 1)
                } else {
                    ours_wqes
                };
                if o.num("max_wr")? != ours_wqes - 1 || t.num("max_wr")? != their_wqes - 1 {
                    return Err(format!(
                        "SRQ of {w}: kernel max_wr rverbs {}, rdma-core {} (expected {} and {})",
                        o.num("max_wr")?,
                        t.num("max_wr")?,
                        ours_wqes - 1,
                        their_wqes - 1
                    ));
                }
                // The same WQE size: the buffers in proportion.
                if t.num("umem")? * ours_wqes != o.num("umem")? * their_wqes {
                    return Err(format!(
                        "SRQ of {w}: buffer rverbs {}, rdma-core {}",
                        o.num("umem")?,
                        t.num("umem")?
                    ));
                }
                for k in ["max_wr", "umem"] {
                    t.fields.remove(k);
                    o.fields.remove(k);
                }
            }
            "qp" => {
                let (tf, of) = (t.num("flags")?, o.num("flags")?);
                if tf & SCATTER_CQE != 0 && of & SCATTER_CQE == 0 {
                    listed.scatter_cqe += 1;
                }
                if tf & !SCATTER_CQE != of {
                    return Err(format!("QP flags: rverbs {of:#x}, rdma-core {tf:#x}"));
                }
                if o.num("uidx")? != 0xff_ffff {
                    return Err(format!("rverbs sent a user index {:#x}", o.num("uidx")?));
                }
                listed.uidx += 1;
                // rverbs' core caps are what it granted (and printed).
                let granted = os.get("qp").map(String::as_str).unwrap_or("");
                let sent = format!(
                    "0/{}/{}/{}/{}/{}",
                    o.num("max_send_wr")?,
                    o.num("max_recv_wr")?,
                    o.num("max_send_sge")?,
                    o.num("max_recv_sge")?,
                    o.num("max_inline_data")?
                );
                if sent != granted {
                    return Err(format!(
                        "rverbs' CREATE_QP carries {sent}, granted {granted}"
                    ));
                }
                let mut asked = true;
                for k in [
                    "flags",
                    "uidx",
                    "max_send_wr",
                    "max_recv_wr",
                    "max_send_sge",
                    "max_recv_sge",
                    "max_inline_data",
                ] {
                    asked &= k == "flags" || k == "uidx" || t.fields.get(k) == o.fields.get(k);
                    t.fields.remove(k);
                    o.fields.remove(k);
                }
                if !asked {
                    listed.core_caps += 1;
                }
            }
            _ => {}
        }
        if t != o {
            return Err(format!(
                "{}: rdma-core {:?}\n  rverbs {:?}",
                o.kind, t.fields, o.fields
            ));
        }
    }
    Ok(())
}

/// Every case of a run: the drivers' outputs and the fake's logs.
pub(super) fn compare(
    cases: &[Case],
    (their_out, their_log): (&str, &str),
    (our_out, our_log): (&str, &str),
) -> Result<Listed> {
    let ((tp, tl), (op, ol)) = (split_log(their_log), split_log(our_log));
    // The PD and the MR (8 KiB, LOCAL_WRITE | REMOTE_WRITE, its IOVA its
    // address) both made first.
    let kinds = |v: &[Obj]| v.iter().map(|o| o.kind.clone()).collect::<Vec<_>>();
    if tp != op || kinds(&op) != ["pd", "mr"] {
        return Err(format!(
            "before the cases: rdma-core {tp:?}\n  rverbs {op:?}"
        ));
    }
    let (to, oo): (Vec<&str>, Vec<&str>) = (their_out.lines().collect(), our_out.lines().collect());
    for (who, out, log) in [("rdma-core", &to, &tl), ("rverbs", &oo, &ol)] {
        if out.len() != cases.len() || log.len() != cases.len() {
            return Err(format!(
                "{who}: {} cases, {} lines printed, {} in the fake's log",
                cases.len(),
                out.len(),
                log.len()
            ));
        }
    }
    let mut listed = Listed::default();
    let mut problems = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        if let Err(e) = compare_case(case, (to[k], &tl[k]), (oo[k], &ol[k]), &mut listed) {
            problems.push(format!("case {k} ({}): {e}", case.line()));
        }
    }
    if problems.is_empty() {
        Ok(listed)
    } else {
        let n = problems.len();
        problems.truncate(12);
        Err(format!(
            "{n} of {} cases differ; the first:\n{}",
            cases.len(),
            problems.join("\n")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{compare, generate};

    // One case of a run (seed 1, case 148): a UD QP on an SRQ.
    const CASE: &str = "13 13 30 4 2228 4431 12 8 0 1 8192 4096 1175439360000 7";
    const THEIR_OUT: &str = "case 0 dmabuf=0 cq=0/15 srq=0/15 qp=0/4096/0/12/0/188\n";
    const PREAMBLE: &str = "  obj pd
  obj mr length=8192 hca_va_is_start=1 access=0x3
";
    const THEIR_LOG: &str = "case 0
  obj dmabuf_mr attrs=0:0:1,1:0:1,2:8:1,3:8:1,4:8:1,5:4:1,6:4:1,7:4:1,8:4:1 driver_id=1 offset=8192 length=4096 iova=0x11110000000 access=0x7
  obj cq cqe=15 comp_vector=0 channel=-1 udata=32 cqe_size=64 flags=0 uar_page_index=0 umem=1024 entries=16
  obj srq max_wr=31 max_sge=31 limit=0 udata=32 flags=0 umem=16384
  obj qp type=4 sig_all=1 is_srq=1 max_send_wr=2228 max_recv_wr=4431 max_send_sge=12 max_recv_sge=8 max_inline_data=188 udata=56 sq_wqe_count=16384 rq_wqe_count=0 rq_wqe_shift=0 flags=0x2 uidx=0 bfreg_index=24 umem=1048576
";
    const OUR_LOG: &str = "case 0
  obj dmabuf_mr attrs=0:0:1,1:0:1,2:8:1,3:8:1,4:8:1,5:4:1,6:4:1,7:4:1,8:4:1 driver_id=1 offset=8192 length=4096 iova=0x11110000000 access=0x7
  obj cq cqe=15 comp_vector=0 channel=-1 udata=32 cqe_size=64 flags=0 uar_page_index=0 umem=1024 entries=16
  obj srq max_wr=15 max_sge=31 limit=0 udata=32 flags=0 umem=8192
  obj qp type=4 sig_all=1 is_srq=1 max_send_wr=4096 max_recv_wr=0 max_send_sge=12 max_recv_sge=0 max_inline_data=188 udata=56 sq_wqe_count=16384 rq_wqe_count=0 rq_wqe_shift=0 flags=0 uidx=0xffffff bfreg_index=24 umem=1048576
";

    fn case() -> super::Case {
        let v: Vec<u64> = CASE.split(' ').map(|x| x.parse().unwrap()).collect();
        super::Case {
            cqe: v[0] as u32,
            srq_wr: v[1] as u32,
            srq_sge: v[2] as u32,
            qp_type: v[3] as u32,
            send_wr: v[4] as u32,
            recv_wr: v[5] as u32,
            send_sge: v[6] as u32,
            recv_sge: v[7] as u32,
            inline: v[8] as u32,
            sig_all: v[9] as u32,
            dm_offset: v[10],
            dm_length: v[11],
            dm_iova: v[12],
            dm_access: v[13] as u32,
        }
    }

    #[test]
    fn only_the_listed_differences_pass() {
        let c = [case()];
        assert_eq!(c[0].line(), CASE);
        let their_log = format!("{PREAMBLE}{THEIR_LOG}");
        let our_log = format!("{PREAMBLE}{OUR_LOG}");
        let l = compare(&c, (THEIR_OUT, &their_log), (THEIR_OUT, &our_log)).unwrap();
        assert_eq!(
            (l.scatter_cqe, l.uidx, l.srq_wait_queue, l.core_caps),
            (1, 1, 1, 1)
        );
        // Each of these in rverbs' log or line fails the case.
        for (from, to) in [
            (
                "rq_wqe_count=0 rq_wqe_shift=0 flags=0 ",
                "rq_wqe_count=0 rq_wqe_shift=0 flags=0x1 ",
            ),
            ("sq_wqe_count=16384", "sq_wqe_count=8192"),
            ("cqe_size=64", "cqe_size=128"),
            ("max_wr=15 max_sge=31", "max_wr=15 max_sge=30"),
            (
                "max_wr=15 max_sge=31 limit=0 udata=32 flags=0 umem=8192",
                "max_wr=15 max_sge=31 limit=0 udata=32 flags=0 umem=16384",
            ),
            ("uidx=0xffffff", "uidx=0x1"),
            (
                "max_send_wr=4096 max_recv_wr=0",
                "max_send_wr=2228 max_recv_wr=0",
            ),
            ("  obj cq", "  refused cq"),
            ("access=0x3", "access=0x1"),
            ("5:4:1,6:4:1", "5:8:1,6:4:1"),
            ("access=0x7", "access=0x5"),
        ] {
            assert!(our_log.contains(from), "{from}");
            let ours = our_log.replacen(from, to, 1);
            assert!(
                compare(&c, (THEIR_OUT, &their_log), (THEIR_OUT, &ours)).is_err(),
                "{to}"
            );
        }
        let our_out = THEIR_OUT.replace("0/188", "0/124");
        assert!(compare(&c, (THEIR_OUT, &their_log), (&our_out, &our_log)).is_err());
        // A case missing from a log; no MR.
        assert!(compare(&c, (THEIR_OUT, &their_log), (THEIR_OUT, PREAMBLE)).is_err());
        assert!(compare(&c, (THEIR_OUT, &their_log), (THEIR_OUT, OUR_LOG)).is_err());
    }

    #[test]
    fn a_receive_only_qp_is_the_one_refusal_listed() {
        let mut c = case();
        c.send_wr = 0;
        let theirs = THEIR_OUT.replace("qp=0/4096", "qp=0/0");
        let their_log = THEIR_LOG.replace("sq_wqe_count=16384", "sq_wqe_count=0");
        let ours = "case 0 dmabuf=0 cq=0/15 srq=0/15 qp=22\n";
        let our_log: String = OUR_LOG
            .lines()
            .filter(|l| !l.contains("obj qp"))
            .map(|l| format!("{l}\n"))
            .collect();
        let (their_log, our_log) = (
            format!("{PREAMBLE}{their_log}"),
            format!("{PREAMBLE}{our_log}"),
        );
        let l = compare(&[c], (&theirs, &their_log), (ours, &our_log)).unwrap();
        assert_eq!(l.receive_only, 1);
        // Refusing it with another errno, or a QP with a send queue, fails.
        let other = ours.replace("qp=22", "qp=12");
        assert!(compare(&[c], (&theirs, &their_log), (&other, &our_log)).is_err());
        let full = format!("{PREAMBLE}{THEIR_LOG}");
        assert!(compare(&[case()], (THEIR_OUT, &full), (ours, &our_log)).is_err());
    }

    #[test]
    fn cases_come_from_the_seed_and_cover_the_kinds() {
        let a = generate(7, 2000);
        assert_eq!(a, generate(7, 2000));
        assert_ne!(a, generate(6, 2000));
        for ty in 2..=4 {
            assert!(a.iter().any(|c| c.qp_type == ty));
        }
        assert!(a.iter().any(|c| c.srq_wr > 0) && a.iter().any(|c| c.srq_wr == 0));
        assert!(a.iter().any(|c| c.send_wr == 0));
        assert!(a.iter().any(|c| c.cqe > 1 << 24) && a.iter().any(|c| c.cqe == 0));
        assert!(a.iter().any(|c| c.send_wr > 1 << 15) && a.iter().any(|c| c.recv_sge > 32));
        assert!(a.iter().any(|c| c.inline > 1024));
        assert!(a.iter().any(|c| c.dm_length == 0) && a.iter().any(|c| c.dm_offset >= 16 << 20));
        assert!(a.iter().any(|c| c.dm_iova % 4096 != c.dm_offset % 4096));
        assert!(a.iter().any(|c| c.dm_access & (1 << 12) != 0));
    }
}

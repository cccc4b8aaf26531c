//! The machinery of `tests/golden.rs`: the C program builder and runner,
//! the proptest-drawn inputs, and posting one request into a scratch SQ.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use provider_mlx5::seg::{opcode, DatagramSeg, WQEBB};
use provider_mlx5::wr::{mlx5_opcode, AhAddr, Remote, SendOp, SendWr, Sge};
use provider_mlx5::{QpType, SendQueue, SqConfig};
use std::fmt::Write as _;
use std::process::Command;
use std::ptr::NonNull;

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// A C program under construction: one output line per check, with the
/// line this crate expects and a label for the report.
pub struct Golden {
    c: String,
    checks: Vec<(String, String)>,
}

impl Golden {
    /// An empty program with the `dump` helper.
    pub fn new() -> Golden {
        let c =
            "#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n#include <stdint.h>\n\
                 #include <endian.h>\n#include <infiniband/mlx5dv.h>\n\
                 static void dump(const void *p, size_t n) { const unsigned char *b = p; \
                 for (size_t i = 0; i < n; i++) printf(\"%02x\", b[i]); putchar('\\n'); }\n\
                 int main(void) {\n"
                .to_string();
        Golden {
            c,
            checks: Vec::new(),
        }
    }

    /// Checks that the C expression `expr` (an integer) equals `want`.
    pub fn expr(&mut self, label: &str, expr: &str, want: usize) {
        let _ = writeln!(self.c, "printf(\"%llu\\n\", (unsigned long long)({expr}));");
        self.checks.push((label.to_string(), want.to_string()));
    }

    /// Checks that the C statement `stmt`, which dumps bytes, prints `ours`.
    pub fn bytes(&mut self, label: &str, stmt: &str, ours: &[u8]) {
        self.line(label, stmt, hex(ours));
    }

    /// As [`Golden::bytes`], for the `mlx5dv_x86_*` helpers (x86_64 only).
    pub fn bytes_x86(&mut self, label: &str, stmt: &str, ours: &[u8]) {
        if cfg!(target_arch = "x86_64") {
            let stmt =
                format!("\n#if !defined(__SSE3__)\n#error x86 helpers need SSE3\n#endif\n{stmt}");
            self.line(&format!("x86 {label}"), &stmt, hex(ours));
        }
    }

    /// Checks that the C statement `stmt` prints the line `ours`.
    pub fn line(&mut self, label: &str, stmt: &str, ours: String) {
        let _ = writeln!(self.c, "{stmt}");
        self.checks.push((label.to_string(), ours));
    }

    /// Compiles and runs the program, and asserts every line matches.
    /// Returns the number of checks.
    pub fn run(mut self) -> usize {
        self.c.push_str("return 0; }\n");
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("mlx5-golden-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, bin) = (dir.join("golden.c"), dir.join("golden"));
        std::fs::write(&src, &self.c).unwrap();
        let mut cc = Command::new("cc");
        cc.arg("-O1")
            .arg("-I/usr/include")
            .arg(&src)
            .arg("-o")
            .arg(&bin);
        if cfg!(target_arch = "x86_64") {
            cc.arg("-mssse3");
        }
        let out = cc.output().unwrap_or_else(|e| {
            panic!("the golden test needs a C compiler `cc` (and libibverbs-dev's mlx5dv.h): {e}")
        });
        assert!(
            out.status.success(),
            "cc failed (is /usr/include/infiniband/mlx5dv.h installed? apt install libibverbs-dev):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&bin).output().expect("run the golden program");
        assert!(run.status.success(), "golden program failed");
        let got: Vec<String> = String::from_utf8_lossy(&run.stdout)
            .lines()
            .map(String::from)
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            got.len(),
            self.checks.len(),
            "C printed a different number of lines"
        );
        let bad: Vec<String> = self
            .checks
            .iter()
            .zip(&got)
            .filter(|((_, w), g)| w != *g)
            .map(|((l, w), g)| format!("{l}\n   rust {w}\n   C    {g}"))
            .collect();
        assert!(
            bad.is_empty(),
            "{} mismatches:\n{}",
            bad.len(),
            bad.join("\n")
        );
        self.checks.len()
    }
}

/// The arguments of `mlx5dv_set_dgram_seg`, plus a Q_Key.
#[derive(Debug, Clone)]
pub struct Dgram {
    pub key: u64,
    pub dqp: u32,
    pub ext: bool,
    pub sl: u8,
    pub fl: u8,
    pub rlid: u16,
    pub rmac: [u8; 6],
    pub tclass: u8,
    pub hop: u8,
    pub grh: u32,
    pub rgid: [u8; 16],
    pub qkey: u32,
}

fn dgram() -> impl Strategy<Value = Dgram> {
    (
        (
            any::<u64>(),
            any::<u32>(),
            any::<bool>(),
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
        ),
        (
            any::<[u8; 6]>(),
            any::<u8>(),
            any::<u8>(),
            any::<u32>(),
            any::<[u8; 16]>(),
            any::<u32>(),
        ),
    )
        .prop_map(
            |((key, dqp, ext, sl, fl, rlid), (rmac, tclass, hop, grh, rgid, qkey))| Dgram {
                key,
                dqp: dqp & 0x7fff_ffff,
                ext,
                sl,
                fl,
                rlid,
                rmac,
                tclass,
                hop,
                grh,
                rgid,
                qkey,
            },
        )
}

/// One send request to post, with what the C side needs to rebuild it.
#[derive(Debug, Clone)]
pub struct WrInput {
    pub kind: u8,
    pub nops: u32,
    pub pi: u16,
    pub opcode: u8,
    pub qpn: u32,
    pub signaled: bool,
    pub solicited: bool,
    pub fence: bool,
    pub fm_ce_se: u8,
    pub imm: u32,
    pub remote: Option<(u64, u32)>,
    pub atomic: Option<(u64, u64)>,
    pub sges: Vec<(u64, u32, u32)>,
    pub inline: Option<Vec<u8>>,
    pub ud: Option<Dgram>,
}

impl WrInput {
    /// The operation, or `None` for a NOP (kind 7).
    fn op(&self) -> Option<SendOp> {
        let remote = self
            .remote
            .map(|(addr, rkey)| Remote { addr, rkey })
            .unwrap_or_default();
        let (a, b) = self.atomic.unwrap_or_default();
        Some(match self.kind {
            0 | 8 | 10 | 11 => SendOp::Send,
            1 => SendOp::SendWithImm(self.imm),
            2 | 9 => SendOp::Write(remote),
            3 => SendOp::WriteWithImm(remote, self.imm),
            4 => SendOp::Read(remote),
            5 => SendOp::CompareSwap {
                remote,
                compare: b,
                swap: a,
            },
            6 => SendOp::FetchAdd { remote, add: a },
            _ => return None,
        })
    }
}

type Raw = (
    u8,
    u32,
    u8,
    u32,
    u32,
    (u64, u32),
    (u64, u64),
    Vec<(u64, u32, u32)>,
    Vec<u8>,
    Dgram,
);

fn wr_input() -> impl Strategy<Value = WrInput> {
    (
        0u8..12,
        0u32..16,
        0u8..8,
        0u32..0x100_0000,
        any::<u32>(),
        (any::<u64>(), any::<u32>()),
        (any::<u64>(), any::<u64>()),
        vec(
            (
                any::<u64>(),
                prop_oneof![Just(0u32), any::<u32>()],
                any::<u32>(),
            ),
            0..5,
        ),
        vec(any::<u8>(), 0..150),
        dgram(),
    )
        .prop_map(|raw: Raw| {
            let (kind, nops, fl, qpn, imm, remote, atomic, mut sges, data, d) = raw;
            // A NOP takes no solicited or fence bit (SendQueue::post_nop).
            let fl = if kind == 7 { fl & 1 } else { fl };
            let (signaled, solicited, fence) = (fl & 1 != 0, fl & 2 != 0, fl & 4 != 0);
            let mut w = WrInput {
                kind,
                nops,
                pi: 0,
                opcode: 0,
                qpn,
                signaled,
                solicited,
                fence,
                fm_ce_se: [(signaled, 0x08), (solicited, 0x02), (fence, 0x80)]
                    .iter()
                    .filter(|(f, _)| *f)
                    .map(|(_, v)| v)
                    .sum(),
                imm: 0,
                remote: None,
                atomic: None,
                sges: Vec::new(),
                inline: None,
                ud: None,
            };
            for s in &mut sges {
                s.1 &= 0x7fff_ffff >> 3; // keep the total under 2^31
            }
            match kind {
                0..=4 | 10 => w.sges = sges,
                5 | 6 => w.sges = vec![(sges.first().map_or(0, |s| s.0), 8, imm)],
                8 | 9 | 11 => w.inline = Some(data),
                _ => {}
            }
            if matches!(kind, 1 | 3) {
                w.imm = imm;
            }
            if matches!(kind, 2..=6 | 9) {
                w.remote = Some((
                    remote.0 & if (5..=6).contains(&kind) { !7 } else { !0 },
                    remote.1,
                ));
            }
            if kind == 5 {
                w.atomic = Some(atomic);
            } else if kind == 6 {
                w.atomic = Some((atomic.0, 0));
            }
            if kind >= 10 {
                w.ud = Some(d);
            }
            w.opcode = w.op().map_or(opcode::NOP, |op| mlx5_opcode(&op));
            w
        })
}

/// The arguments of `mlx5dv_set_ctrl_seg` after the segment.
pub type CtrlArgs = (u16, u8, u8, u32, u8, u8, u8, u32);

/// Every input of one golden run.
pub struct Inputs {
    pub ctrl: Vec<CtrlArgs>,
    pub data: Vec<(u32, u32, u64)>,
    pub dgram: Vec<Dgram>,
    pub remote: Vec<(u64, u32, u64, u64)>,
    pub cqes: Vec<Vec<u8>>,
    pub wrs: Vec<WrInput>,
}

/// Draws `n` inputs of each kind (with the extremes first).
pub fn inputs(n: usize) -> Inputs {
    let mut runner = TestRunner::default();
    let mut ctrl: Vec<_> = vec![(0, 0, 0, 0, 0, 0, 0, 0), (!0, !0, !0, !0, !0, !0, !0, !0)];
    let mut data = vec![(0, 0, 0), (!0, !0, !0)];
    let mut remote = vec![(0, 0, 0, 0), (!0, !0, !0, !0)];
    let mut cqes = vec![vec![0u8; 64], vec![0xffu8; 64]];
    macro_rules! draw {
        ($s:expr) => {
            $s.new_tree(&mut runner).expect("draw inputs").current()
        };
    }
    ctrl.extend(draw!(vec(any::<(u16, u8, u8, u32, u8, u8, u8, u32)>(), n)));
    data.extend(draw!(vec(any::<(u32, u32, u64)>(), n)));
    remote.extend(draw!(vec(any::<(u64, u32, u64, u64)>(), n)));
    cqes.extend(draw!(vec(vec(any::<u8>(), 64), n)));
    let dgram = draw!(vec(dgram(), n / 2));
    let mut wrs = draw!(vec(wr_input(), n));
    for w in &mut wrs {
        let (pi, _) = post_prepare(w);
        w.pi = pi;
    }
    Inputs {
        ctrl,
        data,
        dgram,
        remote,
        cqes,
        wrs,
    }
}

#[repr(C, align(64))]
struct Ring([u8; RING]);
const RING: usize = 16 * WQEBB;

struct Scratch {
    ring: Box<Ring>,
    dbrec: Box<[u32; 2]>,
    bf: Box<[u64; 64]>,
}

fn sq(scratch: &mut Scratch, w: &WrInput) -> SendQueue {
    let cfg = SqConfig {
        qpn: w.qpn,
        qp_type: if w.ud.is_some() {
            QpType::Ud
        } else {
            QpType::Rc
        },
        wqe_cnt: 16,
        max_wr: 16,
        max_sge: 8,
        max_inline: 160,
        bf_size: 256,
        blueflame: true,
        prefer_blueflame: false,
        sig_all: false,
    };
    // SAFETY: the three boxes are exclusive to this SQ and outlive it (the
    // caller drops the queue before the scratch); sizes: 1024-byte ring,
    // 8-byte record, 512-byte register.
    unsafe {
        SendQueue::new(
            NonNull::new(scratch.ring.0.as_mut_ptr()).unwrap(),
            RING,
            NonNull::new(scratch.dbrec.as_mut_ptr()).unwrap(),
            NonNull::new(scratch.bf.as_mut_ptr().cast()).unwrap(),
            cfg,
        )
        .unwrap()
    }
}

/// Calls `f` with the request `w` describes (not a NOP).
fn with_wr<R>(w: &WrInput, f: impl FnOnce(&SendWr<'_, Sge, AhAddr>) -> R) -> R {
    let sges: Vec<Sge> = w
        .sges
        .iter()
        .map(|&(addr, length, lkey)| Sge { addr, length, lkey })
        .collect();
    let ah = w.ud.as_ref().map(|d| {
        DatagramSeg::new(
            0, 0, false, d.sl, d.fl, d.rlid, d.rmac, d.tclass, d.hop, d.grh, d.rgid,
        )
        .ah_addr()
    });
    let op = w.op().expect("not a NOP");
    let mut wr = match &w.inline {
        Some(d) => SendWr::inline(7, op, d),
        None => SendWr::new(7, op, &sges),
    }
    .signaled(w.signaled)
    .solicited(w.solicited)
    .fence(w.fence);
    if let (Some(d), Some(ah)) = (&w.ud, &ah) {
        wr = wr.to(ah, d.dqp & 0xff_ffff, d.qkey);
    }
    f(&wr)
}

fn scratch() -> Scratch {
    Scratch {
        ring: Box::new(Ring([0xee; RING])),
        dbrec: Box::new([0; 2]),
        bf: Box::new([0; 64]),
    }
}

/// The NOP count that leaves room for `w`, and its size in blocks.
fn post_prepare(w: &WrInput) -> (u16, u32) {
    let mut s = scratch();
    let q = sq(&mut s, w);
    let bbs = match w.op() {
        Some(_) => {
            with_wr(w, |wr| q.plan(wr))
                .expect("generated requests are valid")
                .bbs
        }
        None => 1,
    };
    ((w.nops % (16 - bbs + 1)) as u16, bbs)
}

/// Posts `w.pi` NOPs and then `w` into a fresh 16-block SQ, and returns the
/// WQE's bytes as the ring holds them (unwrapped).
pub fn post_one(w: &WrInput) -> Vec<u8> {
    let mut s = scratch();
    let mut q = sq(&mut s, w);
    for i in 0..w.pi {
        q.post_nop(i as u64, true).unwrap();
    }
    let ds = match w.op() {
        Some(_) => with_wr(w, |wr| {
            let ds = q.plan(wr).unwrap().ds;
            // SAFETY: the device is not involved; the ring only stores the
            // SGEs' numbers.
            unsafe { q.post(wr) }.unwrap();
            ds
        }),
        None => {
            q.post_nop(7, w.signaled).unwrap();
            1
        }
    };
    drop(q);
    let start = w.pi as usize * WQEBB;
    (0..ds as usize * 16)
        .map(|i| s.ring.0[(start + i) % RING])
        .collect()
}

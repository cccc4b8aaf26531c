//! The device side of a CQ: writing CQEs with the owner bit, reading the
//! consumer index back, and the arm/event state machine.

use crate::mem::SharedBuf;

/// A CQE the model produces, before it is laid out.
#[derive(Debug, Clone, Copy, Default)]
pub struct CqeSpec {
    pub opcode: u8,
    pub qpn: u32,
    pub send_opcode: u8,
    pub wqe_counter: u16,
    pub byte_cnt: u32,
    pub imm: u32,
    pub src_qp: u32,
    pub srqn: u32,
    pub syndrome: u8,
    pub vendor: u8,
    pub solicited: bool,
}

impl CqeSpec {
    /// The 64 bytes of `struct mlx5_cqe64` / `mlx5_err_cqe`, `op_own`
    /// without the owner bit. Offsets are from `mlx5dv.h`, written out here
    /// independently of the crate under test.
    fn bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[24..28].copy_from_slice(&(self.src_qp & 0xff_ffff).to_be_bytes());
        b[32..36].copy_from_slice(&self.srqn.to_be_bytes());
        b[36..40].copy_from_slice(&self.imm.to_be_bytes());
        b[44..48].copy_from_slice(&self.byte_cnt.to_be_bytes());
        b[54] = self.vendor;
        b[55] = self.syndrome;
        let sop = (self.send_opcode as u32) << 24 | (self.qpn & 0xff_ffff);
        b[56..60].copy_from_slice(&sop.to_be_bytes());
        b[60..62].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[63] = self.opcode << 4 | if self.solicited { 2 } else { 0 };
        b
    }

    fn wakes_solicited(&self) -> bool {
        self.solicited || self.opcode == 13 || self.opcode == 14
    }
}

pub struct ModelCq {
    pub cqn: u32,
    pub buf: SharedBuf,
    pub ncqe: u32,
    pub cqe_size: usize,
    pub dbrec: SharedBuf,
    pub uar: SharedBuf,
    /// CQEs written so far.
    pub pi: u32,
    armed: Option<bool>,
    /// Completion events raised.
    pub events: u32,
    solicited: Vec<bool>,
    /// Every CQE written, for checks.
    pub written: u64,
}

impl ModelCq {
    pub fn new(cqn: u32, ncqe: u32, cqe_size: usize) -> ModelCq {
        ModelCq {
            cqn,
            buf: SharedBuf::new(ncqe as usize * cqe_size, 4096),
            ncqe,
            cqe_size,
            dbrec: SharedBuf::new(64, 64),
            uar: SharedBuf::new(4096, 4096),
            pi: 0,
            armed: None,
            events: 0,
            solicited: vec![false; ncqe as usize],
            written: 0,
        }
    }

    /// The consumer index the provider last published (SET_CI).
    pub fn ci(&self) -> u32 {
        self.dbrec.be32(0) & 0xff_ffff
    }

    /// Entries written and not yet consumed.
    pub fn backlog(&self) -> u32 {
        (self.pi.wrapping_sub(self.ci())) & 0xff_ffff
    }

    /// Writes one CQE; an overflow is a bug in the test or the provider.
    pub fn push(&mut self, spec: CqeSpec) {
        assert!(self.backlog() < self.ncqe, "CQ {:#x} overflow", self.cqn);
        let slot = (self.pi & (self.ncqe - 1)) as usize * self.cqe_size;
        let off = slot + self.cqe_size - 64;
        if self.cqe_size == 128 {
            self.buf.fill(slot, 64, 0x5a); // the half the provider must skip
        }
        let mut b = spec.bytes();
        let owner = ((self.pi & self.ncqe) != 0) as u8;
        let op_own = b[63] | owner;
        b[63] = 0xf0; // stays invalid until the last store
        self.buf.write(off, &b);
        self.buf.write(off + 63, &[op_own]);
        self.solicited[(self.pi & (self.ncqe - 1)) as usize] = spec.wakes_solicited();
        self.pi = self.pi.wrapping_add(1);
        self.written += 1;
        match self.armed {
            Some(sol) if !sol || spec.wakes_solicited() => self.fire(),
            _ => {}
        }
    }

    fn fire(&mut self) {
        self.armed = None;
        self.events += 1;
    }

    /// Takes an arm doorbell written to the UAR since the last look,
    /// checking it against the ARM doorbell record.
    pub fn take_arm(&mut self) {
        let raw = self.uar.read(0x20, 8);
        if raw == [0; 8] {
            return;
        }
        self.uar.fill(0x20, 8, 0);
        let word = u32::from_be_bytes(raw[..4].try_into().unwrap());
        let cqn = u32::from_be_bytes(raw[4..].try_into().unwrap());
        assert_eq!(cqn, self.cqn, "arm doorbell for another CQ");
        assert_eq!(
            self.dbrec.be32(4),
            word,
            "ARM record differs from the doorbell"
        );
        let (sn, cmd, ci) = (word >> 28, word & 0x0f00_0000, word & 0xff_ffff);
        assert!(cmd == 0 || cmd == 1 << 24, "bad arm command {cmd:#x}");
        assert_eq!(sn, self.events & 3, "arm sequence number out of step");
        assert_eq!(ci, self.ci(), "arm ci differs from SET_CI");
        let solicited = cmd != 0;
        // Entries already past ci raise the event at once.
        let pending =
            (ci..self.pi).any(|i| !solicited || self.solicited[(i & (self.ncqe - 1)) as usize]);
        self.armed = Some(solicited);
        if pending {
            self.fire();
        }
    }
}

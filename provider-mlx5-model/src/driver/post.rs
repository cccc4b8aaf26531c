//! Building and posting the driver's send requests, keeping the
//! expectations in step.

use super::*;

/// A send request before it is posted (`op` is `None` for a NOP).
struct Request {
    op: Option<SendOp>,
    signaled: bool,
    solicited: bool,
    data: Vec<u8>,
    inline: bool,
    sges: Vec<Sge>,
    byte_len: u32,
}

impl Request {
    fn new(op: Option<SendOp>, signaled: bool, byte_len: u32) -> Request {
        Request {
            op,
            signaled,
            solicited: false,
            data: Vec::new(),
            inline: false,
            sges: Vec::new(),
            byte_len,
        }
    }
}

impl Driver {
    /// Gives the next receive without a consumer to `by`, posting one first
    /// if there is none.
    pub(super) fn consume_recv(&mut self, by: RecvUse) {
        if !self.recvs.iter().any(|r| r.by.is_none()) {
            self.post_recv();
        }
        let r = self
            .recvs
            .iter_mut()
            .find(|r| r.by.is_none())
            .expect("a free receive");
        r.by = Some(by);
    }

    pub(super) fn post_op(&mut self, op: &Op) {
        self.make_room();
        let wr_id = self.seq;
        self.seq += 1;
        let r = match *op {
            Op::Send {
                len,
                inline,
                imm,
                signaled,
                solicited,
            } => self.send_req(wr_id, len, inline, imm, signaled, solicited),
            Op::Write {
                len,
                inline,
                imm,
                signaled,
                off,
            } => self.write_req(wr_id, len, inline, imm, signaled, off),
            Op::Read { len, signaled, off } => self.read_req(len, signaled, off),
            Op::Cas {
                slot,
                swap,
                equal,
                signaled,
            } => {
                let mut r = Request::new(None, signaled, 8);
                let (remote, old) = self.atomic_prep(slot, &mut r.sges);
                let compare = if equal { old } else { old ^ 1 };
                if !self.a_err && equal {
                    self.atomics[slot] = swap;
                }
                r.op = Some(SendOp::CompareSwap {
                    remote,
                    compare,
                    swap,
                });
                r
            }
            Op::Faa {
                slot,
                add,
                signaled,
            } => {
                let mut r = Request::new(None, signaled, 8);
                let (remote, old) = self.atomic_prep(slot, &mut r.sges);
                if !self.a_err {
                    self.atomics[slot] = old.wrapping_add(add);
                }
                r.op = Some(SendOp::FetchAdd { remote, add });
                r
            }
            Op::Nop { signaled } => Request::new(None, signaled, 0),
            _ => unreachable!("not a send request"),
        };
        self.post_request(wr_id, r);
    }

    fn send_req(
        &mut self,
        wr_id: u64,
        len: usize,
        inline: bool,
        imm: Option<u32>,
        signaled: bool,
        solicited: bool,
    ) -> Request {
        let op = imm.map_or(SendOp::Send, SendOp::SendWithImm);
        let mut r = Request::new(Some(op), signaled, 0);
        r.solicited = solicited;
        r.data = pattern(wr_id, len);
        r.inline = inline;
        if !self.a_err {
            self.consume_recv(RecvUse::Send {
                data: r.data.clone(),
                imm,
            });
        }
        r
    }

    fn write_req(
        &mut self,
        wr_id: u64,
        len: usize,
        inline: bool,
        imm: Option<u32>,
        signaled: bool,
        off: usize,
    ) -> Request {
        let remote = Remote {
            addr: self.p.addr(self.p.b_mr, RDMA + off),
            rkey: self.p.rkey(self.p.b_mr),
        };
        let op = imm.map_or(SendOp::Write(remote), |imm| {
            SendOp::WriteWithImm(remote, imm)
        });
        let mut r = Request::new(Some(op), signaled, 0);
        r.data = pattern(wr_id, len);
        r.inline = inline;
        if !self.a_err {
            if let Some(imm) = imm {
                self.consume_recv(RecvUse::WriteImm {
                    len: len as u32,
                    imm,
                });
            }
            self.shadow[off..off + len].copy_from_slice(&r.data);
        }
        r
    }

    fn read_req(&mut self, len: usize, signaled: bool, off: usize) -> Request {
        let remote = Remote {
            addr: self.p.addr(self.p.b_mr, RDMA + off),
            rkey: self.p.rkey(self.p.b_mr),
        };
        let mut r = Request::new(Some(SendOp::Read(remote)), signaled, len as u32);
        let dst = READ_DST + (self.reads % 16) * 64;
        self.reads += 1;
        let lkey = self.p.lkey(self.p.a_mr);
        r.sges.push(Sge {
            addr: self.p.addr(self.p.a_mr, dst),
            length: len as u32,
            lkey,
        });
        if !self.a_err {
            self.checks
                .push((dst, self.shadow[off..off + len].to_vec()));
        }
        r
    }

    /// Stages a request's gather data in region a and posts it.
    fn post_request(&mut self, wr_id: u64, mut r: Request) {
        let a_mr = self.p.a_mr;
        if !r.data.is_empty() && !r.inline {
            let src = SEND_SRC + (wr_id as usize % 32) * 64;
            self.p.write(a_mr, src, &r.data);
            let lkey = self.p.lkey(a_mr);
            r.sges.push(Sge {
                addr: self.p.addr(a_mr, src),
                length: r.data.len() as u32,
                lkey,
            });
        }
        let status = if self.a_err {
            Status::WrFlush
        } else {
            Status::Success
        };
        self.post(wr_id, &r, status);
    }

    /// The result SGE and target of an atomic on target `slot`, and the
    /// value it must find there.
    fn atomic_prep(&mut self, slot: usize, sges: &mut Vec<Sge>) -> (Remote, u64) {
        let res = ATOMIC_RES + (self.atomic_seq % 128) * 8;
        self.atomic_seq += 1;
        let lkey = self.p.lkey(self.p.a_mr);
        sges.push(Sge {
            addr: self.p.addr(self.p.a_mr, res),
            length: 8,
            lkey,
        });
        let remote = Remote {
            addr: self.p.addr(self.p.b_mr, ATOMIC_TGT + slot * 8),
            rkey: self.p.rkey(self.p.b_mr),
        };
        let old = self.atomics[slot];
        if !self.a_err {
            self.checks.push((res, old.to_le_bytes().to_vec()));
        }
        (remote, old)
    }

    /// Makes room for the largest request, before a request changes any
    /// expectation.
    pub(super) fn make_room(&mut self) {
        if self.p.a_sq.free_wqebbs() < MAX_BBS {
            self.ring();
            self.drain();
            assert!(self.p.a_sq.free_wqebbs() >= MAX_BBS, "SQ does not drain");
        }
    }

    /// Posts on a's SQ, signaling whenever the post leaves less than room
    /// for the largest request (so the queue always drains), and records
    /// the completion that must follow.
    #[allow(unsafe_code)] // posting names memory by address
    fn post(&mut self, wr_id: u64, r: &Request, status: Status) {
        let wr = r.op.map(|op| {
            let wr: SendWr<'_, Sge, AhAddr> = if r.inline {
                SendWr::inline(wr_id, op, &r.data)
            } else {
                SendWr::new(wr_id, op, &r.sges)
            };
            wr.solicited(r.solicited)
        });
        let need = match &wr {
            Some(wr) => self.p.a_sq.plan(wr).expect("driver requests are valid").bbs,
            None => 1, // a NOP is its control segment
        };
        assert!(need <= MAX_BBS);
        let signaled = r.signaled || self.p.a_sq.free_wqebbs() - need < MAX_BBS;
        let posted = match wr {
            // SAFETY: every SGE names region a, registered and owned by
            // the model, which outlives the queue.
            Some(wr) => unsafe { self.p.a_sq.post(&wr.signaled(signaled)) },
            None => self.p.a_sq.post_nop(wr_id, signaled),
        };
        match posted {
            Ok(()) => {}
            Err(PostError::QueueFull) => panic!("SQ full after make_room"),
            Err(e) => panic!("post failed: {e}"),
        }
        self.posted.push_back((wr_id, need));
        if signaled || status != Status::Success {
            let opcode = match r.op {
                Some(SendOp::Send | SendOp::SendWithImm(_)) => WcOpcode::SEND,
                Some(SendOp::Write(_) | SendOp::WriteWithImm(..)) => WcOpcode::RDMA_WRITE,
                Some(SendOp::Read(_)) => WcOpcode::RDMA_READ,
                Some(SendOp::CompareSwap { .. }) => WcOpcode::COMP_SWAP,
                Some(SendOp::FetchAdd { .. }) => WcOpcode::FETCH_ADD,
                // The driver posts none of these (mlx5 refuses them).
                Some(op) => unreachable!("the model driver posted {op:?}"),
                None => wc::NOP,
            };
            self.sends.push_back(SendExp {
                wr_id,
                opcode,
                status,
                byte_len: r.byte_len,
            });
        }
    }

    /// Posts the failing request `bad`, after a ring so it is the next WQE
    /// the device runs.
    pub fn post_bad(&mut self, bad: Bad) {
        self.make_room();
        self.ring();
        let wr_id = self.seq;
        self.seq += 1;
        let (a_mr, b_mr) = (self.p.a_mr, self.p.b_mr);
        let lkey = self.p.lkey(a_mr);
        let sge_len = if matches!(bad, Bad::TooLong) { 100 } else { 8 };
        let mut sge = Sge {
            addr: self.p.addr(a_mr, SEND_SRC),
            length: sge_len,
            lkey,
        };
        let (op, status) = match bad {
            Bad::Lkey => {
                sge.lkey ^= 0x4000;
                (Some(SendOp::Send), Status::LocalProt)
            }
            Bad::Rkey => {
                let remote = Remote {
                    addr: self.p.addr(b_mr, RDMA),
                    rkey: self.p.rkey(b_mr) ^ 0x4000,
                };
                (Some(SendOp::Write(remote)), Status::RemoteAccess)
            }
            Bad::TooLong => {
                self.consume_recv(RecvUse::Fail(Status::LocalLength));
                self.b_err = true;
                for r in self.recvs.iter_mut().filter(|r| r.by.is_none()) {
                    r.by = Some(RecvUse::Fail(Status::WrFlush));
                }
                (Some(SendOp::Send), Status::RemoteInvalReq)
            }
            Bad::Inject(s) => {
                self.p.dev.inject(self.p.a, s);
                (None, Status::from_syndrome(s))
            }
        };
        let mut r = Request::new(op, false, 0);
        if op.is_some() {
            r.sges.push(sge);
        }
        self.post(wr_id, &r, status);
        self.a_err = true;
    }
}

//! Executing send WQEs between model QPs, and the receive side.

use crate::cq::CqeSpec;
use crate::mem::access;
use crate::wqe::{read_scatter, SendWqe};
use crate::Device;

/// Syndromes (`MLX5_CQE_SYNDROME_*`).
pub mod syn {
    pub const LOCAL_LENGTH: u8 = 0x01;
    pub const LOCAL_QP_OP: u8 = 0x02;
    pub const LOCAL_PROT: u8 = 0x04;
    pub const WR_FLUSH: u8 = 0x05;
    pub const REMOTE_INVAL_REQ: u8 = 0x12;
    pub const REMOTE_ACCESS: u8 = 0x13;
    pub const REMOTE_OP: u8 = 0x14;
    pub const RETRY_EXC: u8 = 0x15;
    pub const RNR_RETRY_EXC: u8 = 0x16;
}

/// The vendor syndrome the model puts in error CQEs other than flushes.
pub const VENDOR: u8 = 0x42;
/// Bytes a UD receive reserves for the GRH.
pub const GRH: usize = 40;

/// A receive WQE the device took.
struct Recv {
    counter: u16,
    sges: Vec<(u32, u32, u64)>,
    srqn: u32,
}

type Sg = [(u32, u32, u64)];

impl Device {
    /// Executes one WQE of QP `q` and writes its requester CQE.
    pub(super) fn execute(&mut self, q: usize, w: &SendWqe) {
        let result = if self.qps[q].error {
            Err(syn::WR_FLUSH)
        } else if let Some(s) = self.qps[q].inject.take() {
            Err(s)
        } else {
            self.operate(q, w)
        };
        let qpn = self.qps[q].qpn;
        let mut c = CqeSpec {
            qpn,
            send_opcode: w.opcode,
            wqe_counter: w.index,
            ..CqeSpec::default()
        };
        match result {
            Ok(byte_cnt) if w.signaled() => {
                c.byte_cnt = byte_cnt;
                self.cqs[self.qps[q].send_cq].push(c);
            }
            Ok(_) => {}
            Err(s) => {
                self.qps[q].error = true;
                c.opcode = 13;
                c.syndrome = s;
                c.vendor = if s == syn::WR_FLUSH { 0 } else { VENDOR };
                self.cqs[self.qps[q].send_cq].push(c);
            }
        }
    }

    fn operate(&mut self, q: usize, w: &SendWqe) -> Result<u32, u8> {
        if self.qps[q].ud {
            return self.ud_send(q, w);
        }
        if self.qps[q].uc {
            return self.uc_send(q, w);
        }
        let Some(peer) = self.qps[q].peer else {
            return if w.opcode == 0 {
                Ok(0)
            } else {
                Err(syn::RETRY_EXC)
            };
        };
        let src = self.qps[q].qpn;
        match w.opcode {
            0x00 => Ok(0),
            0x0a | 0x0b => {
                let data = self.payload(w)?;
                let (op, imm) = if w.opcode == 0x0b { (3, w.imm) } else { (2, 0) };
                self.deliver(peer, src, Some(&data), 0, op, imm, w.solicited())?;
                Ok(0)
            }
            0x08 | 0x09 => {
                let data = self.payload(w)?;
                let (raddr, rkey) = w.remote.unwrap();
                let (mr, off) = self
                    .mem
                    .check(rkey, true, raddr, data.len(), access::REMOTE_WRITE)
                    .ok_or(syn::REMOTE_ACCESS)?;
                mr.buf.write(off, &data);
                if w.opcode == 0x09 {
                    // WRITE with immediate reports its length at the responder.
                    self.deliver(peer, src, None, data.len() as u32, 1, w.imm, w.solicited())?;
                }
                Ok(0)
            }
            0x10 => {
                let (raddr, rkey) = w.remote.unwrap();
                let len: usize = w.sges.iter().map(|s| s.0 as usize).sum();
                let (mr, off) = self
                    .mem
                    .check(rkey, true, raddr, len, access::REMOTE_READ)
                    .ok_or(syn::REMOTE_ACCESS)?;
                let data = mr.buf.read(off, len);
                self.scatter(&w.sges, &data, syn::LOCAL_PROT)?;
                Ok(len as u32)
            }
            0x11 | 0x12 => self.atomic(w),
            _ => Err(syn::REMOTE_INVAL_REQ),
        }
    }

    fn atomic(&mut self, w: &SendWqe) -> Result<u32, u8> {
        let (raddr, rkey) = w.remote.unwrap();
        let (swap_add, compare) = w.atomic.unwrap();
        let (mr, off) = self
            .mem
            .check(rkey, true, raddr, 8, access::REMOTE_ATOMIC)
            .ok_or(syn::REMOTE_ACCESS)?;
        if raddr % 8 != 0 {
            return Err(syn::REMOTE_ACCESS);
        }
        let old = u64::from_le_bytes(mr.buf.read(off, 8).try_into().unwrap());
        let new = if w.opcode == 0x11 {
            if old == compare {
                swap_add
            } else {
                old
            }
        } else {
            old.wrapping_add(swap_add)
        };
        // The local SGE is checked before the target changes.
        if w.sges.len() != 1 || w.sges[0].0 != 8 {
            return Err(syn::LOCAL_LENGTH);
        }
        let (l, lk, la) = w.sges[0];
        self.mem
            .check(lk, false, la, l as usize, access::LOCAL_WRITE)
            .ok_or(syn::LOCAL_PROT)?;
        mr.buf.write(off, &new.to_le_bytes());
        self.scatter(&w.sges, &old.to_le_bytes(), syn::LOCAL_PROT)?;
        Ok(8)
    }

    /// The bytes a SEND/WRITE carries: inline, or gathered under lkeys.
    fn payload(&self, w: &SendWqe) -> Result<Vec<u8>, u8> {
        if let Some(d) = &w.inline {
            return Ok(d.clone());
        }
        let mut v = Vec::new();
        for &(len, lkey, addr) in &w.sges {
            let (mr, off) = self
                .mem
                .check(lkey, false, addr, len as usize, 0)
                .ok_or(syn::LOCAL_PROT)?;
            v.extend(mr.buf.read(off, len as usize));
        }
        Ok(v)
    }

    /// Writes `data` across `sges` (LOCAL_WRITE required); `prot` is the
    /// syndrome for a bad key.
    fn scatter(&self, sges: &Sg, data: &[u8], prot: u8) -> Result<(), u8> {
        let room: usize = sges.iter().map(|s| s.0 as usize).sum();
        if data.len() > room {
            return Err(syn::LOCAL_LENGTH);
        }
        let mut rest = data;
        for &(len, lkey, addr) in sges {
            let n = rest.len().min(len as usize);
            let (mr, off) = self
                .mem
                .check(lkey, false, addr, n, access::LOCAL_WRITE)
                .ok_or(prot)?;
            mr.buf.write(off, &rest[..n]);
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Takes the next receive of QP `q` (its RQ or its SRQ), if one is
    /// published.
    fn take_recv(&mut self, q: usize) -> Option<Recv> {
        if let Some(s) = self.qps[q].srq {
            let srq = &mut self.srqs[s];
            let posted = srq.dbrec.be32(0) as u16;
            if posted == srq.consumed {
                return None;
            }
            let stride = 1usize << srq.shift;
            let idx = srq.head as usize & (srq.cnt as usize - 1);
            let sges = read_scatter(&srq.buf, idx * stride + 16, stride - 16);
            srq.head = srq.buf.be16(idx * stride + 2);
            srq.consumed = srq.consumed.wrapping_add(1);
            return Some(Recv {
                counter: idx as u16,
                sges,
                srqn: srq.srqn,
            });
        }
        let qp = &mut self.qps[q];
        let (buf, cnt, shift) = qp.rq.as_ref()?;
        let posted = qp.dbrec.be32(0) as u16;
        if posted == qp.rq_ci as u16 {
            return None;
        }
        let idx = (qp.rq_ci & (cnt - 1)) as usize;
        let sges = read_scatter(buf, idx << shift, 1 << shift);
        let counter = qp.rq_ci as u16;
        qp.rq_ci = qp.rq_ci.wrapping_add(1);
        Some(Recv {
            counter,
            sges,
            srqn: 0,
        })
    }

    /// Delivers a message to QP `dst`: consumes a receive, scatters `data`
    /// (none for WRITE with immediate) and writes the responder CQE. The
    /// error is the requester's syndrome.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        dst: usize,
        src_qpn: u32,
        data: Option<&[u8]>,
        byte_cnt: u32,
        op: u8,
        imm: u32,
        se: bool,
    ) -> Result<(), u8> {
        if self.qps[dst].error {
            return Err(syn::RETRY_EXC);
        }
        let Some(r) = self.take_recv(dst) else {
            return Err(syn::RNR_RETRY_EXC);
        };
        let mut c = CqeSpec {
            opcode: op,
            qpn: self.qps[dst].qpn,
            wqe_counter: r.counter,
            imm,
            src_qp: src_qpn,
            srqn: r.srqn,
            solicited: se,
            byte_cnt,
            ..CqeSpec::default()
        };
        let cq = self.qps[dst].recv_cq;
        if let Some(d) = data {
            if let Err(s) = self.scatter(&r.sges, d, syn::LOCAL_PROT) {
                self.qps[dst].error = true;
                c.opcode = 14;
                c.syndrome = s;
                c.vendor = VENDOR;
                self.cqs[cq].push(c);
                return Err(if s == syn::LOCAL_LENGTH {
                    syn::REMOTE_INVAL_REQ
                } else {
                    syn::REMOTE_OP
                });
            }
            c.byte_cnt = d.len() as u32;
        }
        self.cqs[cq].push(c);
        Ok(())
    }

    /// A UC request: SEND and WRITE (with or without immediate) only — a
    /// READ or an atomic is a local QP operation error. Nothing comes back
    /// from the responder on UC: the request completes once it is sent,
    /// and whatever goes wrong there (no peer, a bad rkey, no receive
    /// posted, a receive too small, which fails the receive at the
    /// responder as on RC) is the responder's alone.
    fn uc_send(&mut self, q: usize, w: &SendWqe) -> Result<u32, u8> {
        let op = match w.opcode {
            0x00 => return Ok(0),
            0x08..=0x0b => w.opcode,
            _ => return Err(syn::LOCAL_QP_OP),
        };
        let data = self.payload(w)?;
        let Some(peer) = self.qps[q].peer else {
            return Ok(0);
        };
        let src = self.qps[q].qpn;
        match op {
            0x0a | 0x0b => {
                let (kind, imm) = if op == 0x0b { (3, w.imm) } else { (2, 0) };
                let _dropped = self.deliver(peer, src, Some(&data), 0, kind, imm, w.solicited());
            }
            _ => {
                let (raddr, rkey) = w.remote.unwrap_or_default();
                let Some((mr, off)) =
                    self.mem
                        .check(rkey, true, raddr, data.len(), access::REMOTE_WRITE)
                else {
                    return Ok(0);
                };
                mr.buf.write(off, &data);
                if op == 0x09 {
                    let n = data.len() as u32;
                    let _dropped = self.deliver(peer, src, None, n, 1, w.imm, w.solicited());
                }
            }
        }
        Ok(0)
    }

    /// A UD send: find the destination by QPN, check the Q_Key, deliver
    /// after a 40-byte GRH area. Losses are silent, as on the wire.
    fn ud_send(&mut self, q: usize, w: &SendWqe) -> Result<u32, u8> {
        if w.opcode == 0 {
            return Ok(0);
        }
        let data = self.payload(w)?;
        let (dqpn, qkey) = w.ud.unwrap();
        let Some(dst) = self.qps.iter().position(|p| p.qpn == dqpn && p.ud) else {
            return Ok(0);
        };
        if self.qps[dst].qkey != qkey || self.qps[dst].error {
            return Ok(0);
        }
        let mut msg = vec![0u8; GRH];
        msg.extend(&data);
        let (op, imm) = if w.opcode == 0x0b { (3, w.imm) } else { (2, 0) };
        let src = self.qps[q].qpn;
        let _ = self.deliver(dst, src, Some(&msg), 0, op, imm, w.solicited());
        Ok(0)
    }

    /// Flushes every published receive of QP `q` (in error), RQ only: an
    /// SRQ's receives belong to the SRQ.
    pub(super) fn flush_rq(&mut self, q: usize) {
        if self.qps[q].srq.is_some() {
            return;
        }
        while let Some(r) = self.take_recv(q) {
            let c = CqeSpec {
                opcode: 14,
                qpn: self.qps[q].qpn,
                wqe_counter: r.counter,
                syndrome: syn::WR_FLUSH,
                ..CqeSpec::default()
            };
            let cq = self.qps[q].recv_cq;
            self.cqs[cq].push(c);
        }
    }
}

//! The data path `verbs.h`'s inline functions reach through
//! `ibv_context.ops`: `post_send`, `post_recv`, `poll_cq`,
//! `req_notify_cq`. Each translates the C work requests or completions
//! to rverbs' and calls the safe API, which runs the provider's ring code.
//!
//! `bad_wr` as libibverbs reports it: the requests before the bad one are
//! posted, it and the rest are not, and the return is an errno.

use crate::abi::*;
use crate::errno_of;
use crate::verbs::{cq_of, qp_of};
use rverbs::{Error, RecvWr, Remote, SendOp, SendWr, Slice, Wc};
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

/// Fills the context's op table with this module's functions.
pub(crate) fn fill_ops(ops: &mut IbvContextOps) {
    ops.poll_cq = Some(poll_cq);
    ops.req_notify_cq = Some(req_notify_cq);
    ops.post_send = Some(post_send);
    ops.post_recv = Some(post_recv);
    // verbs.h's ibv_post_srq_recv calls this slot unchecked: present, and
    // refusing (no SRQs through this library yet).
    ops.post_srq_recv = Some(post_srq_recv);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which request failed and why, from a post's error.
fn post_error(e: &Error) -> (Option<usize>, c_int) {
    match e {
        Error::QueueFull { index, .. } => (Some(*index), libc::ENOMEM),
        Error::InvalidWorkRequest { index, .. } => (Some(*index), libc::EINVAL),
        e => (None, errno_of(e)),
    }
}

/// Most requests per list (a guard against a cyclic `next` chain).
const MAX_LIST: usize = 1 << 20;

/// One C send request, read and checked.
struct SendReq {
    wr_id: u64,
    op: SendOp,
    flags: u32,
    /// Range in the flat SGE list, or the inline buffer's index.
    sges: std::ops::Range<usize>,
    inline: Option<usize>,
}

/// The SGEs of a C request as rverbs slices.
///
/// # Safety
/// `list` points to `n` readable `ibv_sge`s, each naming memory its lkey's
/// MR covers (the C caller's contract).
unsafe fn sges(list: *const IbvSge, n: c_int, out: &mut Vec<Slice<'static>>) -> Result<(), c_int> {
    if n < 0 || (n > 0 && list.is_null()) || n as usize > rverbs::wr::MAX_SGE {
        return Err(libc::EINVAL);
    }
    for i in 0..n as usize {
        // SAFETY: i < n readable SGEs (caller's contract).
        let s = unsafe { list.add(i).read_unaligned() };
        // SAFETY: the C caller vouches that the lkey's MR covers the range
        // until the request completes (ibv_post_send's contract).
        out.push(unsafe { Slice::from_raw_parts(s.addr, s.length, s.lkey) });
    }
    Ok(())
}

/// The gathered bytes of an inline request (copied now, as the provider
/// will copy them into the WQE).
///
/// # Safety
/// As for [`sges`]; the memory is readable.
unsafe fn gather(list: *const IbvSge, n: c_int) -> Result<Vec<u8>, c_int> {
    if n < 0 || (n > 0 && list.is_null()) {
        return Err(libc::EINVAL);
    }
    let mut v = Vec::new();
    for i in 0..n as usize {
        // SAFETY: i < n readable SGEs (caller's contract).
        let s = unsafe { list.add(i).read_unaligned() };
        if s.length == 0 {
            continue;
        }
        // SAFETY: inline data is read by the CPU from addr..addr+length,
        // which the caller promises readable.
        let bytes =
            unsafe { std::slice::from_raw_parts(s.addr as usize as *const u8, s.length as usize) };
        v.extend_from_slice(bytes);
    }
    Ok(v)
}

/// The rverbs operation for a C request.
fn send_op(w: &IbvSendWr) -> Result<SendOp, c_int> {
    use wr_opcode::*;
    let imm = u32::from_be(w.imm_data);
    // SAFETY: reading a union member is a plain load of bytes the C caller
    // initialised for the opcode it chose; every member is plain data.
    let (rdma, atomic) = unsafe { (w.wr.rdma, w.wr.atomic) };
    let remote = Remote {
        addr: rdma.remote_addr,
        rkey: rdma.rkey,
    };
    let aremote = Remote {
        addr: atomic.remote_addr,
        rkey: atomic.rkey,
    };
    Ok(match w.opcode {
        SEND => SendOp::Send,
        SEND_WITH_IMM => SendOp::SendWithImm(imm),
        RDMA_WRITE => SendOp::Write(remote),
        RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm(remote, imm),
        RDMA_READ => SendOp::Read(remote),
        ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote: aremote,
            compare: atomic.compare_add,
            swap: atomic.swap,
        },
        ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
            remote: aremote,
            add: atomic.compare_add,
        },
        _ => return Err(libc::EINVAL),
    })
}

unsafe extern "C" fn post_send(
    q: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad: *mut *mut IbvSendWr,
) -> c_int {
    // SAFETY: a QP of ours (C contract).
    let Some(b) = (unsafe { qp_of(q) }) else {
        return libc::EINVAL;
    };
    let ud = b.c.qp_type == 4;
    let mut ptrs = Vec::new();
    let mut reqs = Vec::new();
    let mut flat = Vec::new();
    let mut inlines: Vec<Vec<u8>> = Vec::new();
    let mut failed: Option<c_int> = None;
    let mut p = wr;
    while !p.is_null() && ptrs.len() < MAX_LIST {
        ptrs.push(p);
        // SAFETY: a readable ibv_send_wr in the caller's list.
        let w = unsafe { &*p };
        let r = (|| {
            if ud {
                // Address handles are not implemented here yet.
                return Err(libc::EOPNOTSUPP);
            }
            let op = send_op(w)?;
            let start = flat.len();
            let inline = if w.send_flags & send_flags::INLINE != 0 {
                // SAFETY: the caller's SGE list (C contract).
                inlines.push(unsafe { gather(w.sg_list, w.num_sge) }?);
                Some(inlines.len() - 1)
            } else {
                // SAFETY: the caller's SGE list (C contract).
                unsafe { sges(w.sg_list, w.num_sge, &mut flat) }?;
                None
            };
            Ok(SendReq {
                wr_id: w.wr_id,
                op,
                flags: w.send_flags,
                sges: start..flat.len(),
                inline,
            })
        })();
        match r {
            Ok(r) => reqs.push(r),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
        p = w.next;
    }
    let wrs: Vec<SendWr<'_>> = reqs
        .iter()
        .map(|r| {
            let w = match r.inline {
                Some(i) => SendWr::inline(r.wr_id, r.op, &inlines[i]),
                None => SendWr::new(r.wr_id, r.op, &flat[r.sges.clone()]),
            };
            w.signaled(r.flags & send_flags::SIGNALED != 0)
                .solicited(r.flags & send_flags::SOLICITED != 0)
                .fence(r.flags & send_flags::FENCE != 0)
        })
        .collect();
    let set_bad = |i: usize| {
        if !bad.is_null() {
            // SAFETY: bad is a writable pointer slot (C contract).
            unsafe { *bad = ptrs.get(i).copied().unwrap_or(std::ptr::null_mut()) };
        }
    };
    if !wrs.is_empty() {
        if let Err(e) = lock(&b.qp).post_send(&wrs) {
            let (i, errno) = post_error(&e);
            set_bad(i.unwrap_or(0));
            return errno;
        }
    }
    match failed {
        Some(e) => {
            set_bad(wrs.len());
            e
        }
        None => 0,
    }
}

unsafe extern "C" fn post_recv(
    q: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    // SAFETY: a QP of ours (C contract).
    let Some(b) = (unsafe { qp_of(q) }) else {
        return libc::EINVAL;
    };
    let mut ptrs = Vec::new();
    let mut ranges = Vec::new();
    let mut flat = Vec::new();
    let mut failed = None;
    let mut p = wr;
    while !p.is_null() && ptrs.len() < MAX_LIST {
        ptrs.push(p);
        // SAFETY: a readable ibv_recv_wr in the caller's list.
        let w = unsafe { &*p };
        let start = flat.len();
        // SAFETY: the caller's SGE list (C contract).
        if let Err(e) = unsafe { sges(w.sg_list, w.num_sge, &mut flat) } {
            failed = Some(e);
            break;
        }
        ranges.push((w.wr_id, start..flat.len()));
        p = w.next;
    }
    let wrs: Vec<RecvWr<'_>> = ranges
        .iter()
        .map(|(id, r)| RecvWr {
            wr_id: *id,
            sges: &flat[r.clone()],
        })
        .collect();
    let set_bad = |i: usize| {
        if !bad.is_null() {
            // SAFETY: bad is a writable pointer slot (C contract).
            unsafe { *bad = ptrs.get(i).copied().unwrap_or(std::ptr::null_mut()) };
        }
    };
    if !wrs.is_empty() {
        if let Err(e) = lock(&b.qp).post_recv(&wrs) {
            let (i, errno) = post_error(&e);
            set_bad(i.unwrap_or(0));
            return errno;
        }
    }
    match failed {
        Some(e) => {
            set_bad(wrs.len());
            e
        }
        None => 0,
    }
}

unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    if !bad.is_null() {
        // SAFETY: bad is a writable pointer slot (C contract).
        unsafe { *bad = wr };
    }
    libc::EOPNOTSUPP
}

fn c_wc(w: &Wc) -> IbvWc {
    IbvWc {
        wr_id: w.wr_id,
        status: w.status.0 as c_int,
        opcode: w.opcode.0 as c_int,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: w.imm_data.map_or(0, u32::to_be),
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.flags.bits(),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: 0,
    }
}

/// `ops.poll_cq`: how many completions were written (negative on error).
unsafe extern "C" fn poll_cq(c: *mut IbvCq, n: c_int, out: *mut IbvWc) -> c_int {
    // SAFETY: a CQ of ours (C contract).
    let Some(b) = (unsafe { cq_of(c) }) else {
        return -libc::EINVAL;
    };
    if n < 0 || (n > 0 && out.is_null()) {
        return -libc::EINVAL;
    }
    let mut cq = lock(&b.cq);
    let mut buf = [Wc::default(); 16];
    let mut done = 0usize;
    while done < n as usize {
        let want = (n as usize - done).min(buf.len());
        let got = cq.poll(&mut buf[..want]);
        for (i, w) in buf[..got].iter().enumerate() {
            // SAFETY: out has room for n entries (C contract); done + i < n.
            unsafe { out.add(done + i).write(c_wc(w)) };
        }
        done += got;
        if got < want {
            break;
        }
    }
    done as c_int
}

/// `ops.req_notify_cq`: 0 or an errno.
unsafe extern "C" fn req_notify_cq(c: *mut IbvCq, solicited_only: c_int) -> c_int {
    // SAFETY: a CQ of ours (C contract).
    let Some(b) = (unsafe { cq_of(c) }) else {
        return libc::EINVAL;
    };
    match lock(&b.cq).req_notify(solicited_only != 0) {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}

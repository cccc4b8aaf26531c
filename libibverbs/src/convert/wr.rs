//! Work requests and completions in C's form and rverbs': SGE lists
//! (viewed in place), send operations, window binds, send flags, and
//! `struct ibv_wc` both ways.

use crate::abi::*;
use crate::member;
use rverbs::Sge;
use rverbs::{MwBind, Remote, SendOp, SendWr, Slice, Wc, WcFlags};
use std::ffi::c_int;

/// A C SGE array as rverbs slices, in place.
///
/// # Safety
/// `list` points to `n` readable SGEs, each naming memory its lkey's MR
/// covers until the request completes (`ibv_post_send`'s contract).
pub(crate) unsafe fn sges(
    list: *const IbvSge,
    n: c_int,
) -> Result<&'static [Slice<'static>], c_int> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    // SAFETY: the caller's contract, forwarded; IbvSge and Sge are both
    // `struct ibv_sge` (checked against verbs.h and the uapi header).
    unsafe { Slice::list_from_raw_parts(list.cast::<Sge>(), n) }.ok_or(libc::EINVAL)
}

/// `EINVAL` unless `0 <= n <= max` (the queue's granted SGEs).
pub(crate) fn check_sges(n: c_int, max: u32) -> Result<(), c_int> {
    match u32::try_from(n) {
        Ok(n) if n <= max => Ok(()),
        _ => Err(libc::EINVAL),
    }
}

/// The rverbs operation for a C request of `opcode`. Only the members
/// that opcode uses are read (the immediate, one member of the `wr`
/// union, the bind): the caller need not set the others.
///
/// # Safety
/// `w` points to a readable send request of `opcode` (C contract).
pub(crate) unsafe fn send_op(w: *const IbvSendWr, opcode: c_int) -> Result<SendOp, c_int> {
    use wr_opcode::*;
    // `invalidate_rkey` shares imm_data's bytes, in host order.
    // SAFETY: the member `opcode` uses, set by the caller.
    let imm = || unsafe { member!(w, imm_data) };
    // SAFETY: as above, for the RDMA opcodes.
    let rdma = || unsafe { member!(w, wr.rdma) };
    // SAFETY: as above, for the atomic opcodes.
    let atomic = || unsafe { member!(w, wr.atomic) };
    let remote = |r: IbvSendWrRdma| Remote {
        addr: r.remote_addr,
        rkey: r.rkey,
    };
    let aremote = |a: &IbvSendWrAtomic| Remote {
        addr: a.remote_addr,
        rkey: a.rkey,
    };
    Ok(match opcode {
        SEND => SendOp::Send,
        SEND_WITH_IMM => SendOp::SendWithImm(u32::from_be(imm())),
        RDMA_WRITE => SendOp::Write(remote(rdma())),
        RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm(remote(rdma()), u32::from_be(imm())),
        RDMA_READ => SendOp::Read(remote(rdma())),
        ATOMIC_CMP_AND_SWP => {
            let a = atomic();
            SendOp::CompareSwap {
                remote: aremote(&a),
                compare: a.compare_add,
                swap: a.swap,
            }
        }
        ATOMIC_FETCH_AND_ADD => {
            let a = atomic();
            SendOp::FetchAdd {
                remote: aremote(&a),
                add: a.compare_add,
            }
        }
        LOCAL_INV => SendOp::LocalInv(imm()),
        SEND_WITH_INV => SendOp::SendWithInv(imm()),
        // SAFETY: a BIND_MW request (C contract).
        BIND_MW => SendOp::BindMw(unsafe { bind_of(w) }?),
        _ => return Err(libc::EINVAL),
    })
}

/// The window bind an `IBV_WR_BIND_MW` request carries, as rxe's provider
/// reads it: the window's rkey now, the new one the caller chose, the MR's
/// lkey (none for an unbind).
///
/// # Safety
/// `w` points to a readable `IBV_WR_BIND_MW` request (C contract).
unsafe fn bind_of(w: *const IbvSendWr) -> Result<MwBind, c_int> {
    // SAFETY: the bind_mw member, which the caller set for BIND_MW; plain
    // data.
    let b = unsafe { member!(w, bind_mw_or_tso.bind_mw) };
    // SAFETY: NULL or a live window of ours (C contract).
    unsafe { mw_bind(b.mw, b.rkey, &b.bind_info) }
}

/// A bind of `mw` to `new_rkey` over `info` (shared by `IBV_WR_BIND_MW`
/// and `ibv_wr_bind_mw`): `EINVAL` for no window, or for an MR missing
/// from a bind of a non-zero length.
///
/// # Safety
/// `mw` is NULL or a live window of ours; `info.mr` NULL or a live MR.
pub(crate) unsafe fn mw_bind(
    mw: *mut IbvMw,
    new_rkey: u32,
    info: &IbvMwBindInfo,
) -> Result<MwBind, c_int> {
    if mw.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a live window of ours (the caller's contract); its C struct
    // is the box's UnsafeCell (ibv_bind_mw writes the rkey), so it is read
    // through the pointer, not a reference.
    let mw_rkey = unsafe { std::ptr::addr_of!((*mw).rkey).read() };
    // SAFETY: NULL (unbind) or a live MR (C contract).
    let mr_lkey = match unsafe { info.mr.as_ref() } {
        Some(mr) => mr.lkey,
        None if info.length == 0 => 0,
        None => return Err(libc::EINVAL),
    };
    Ok(MwBind {
        mw_rkey,
        new_rkey,
        mr_lkey,
        addr: info.addr,
        length: info.length,
        access: info.mw_access_flags,
    })
}

/// `r` with the `IBV_SEND_SIGNALED`, `_SOLICITED` and `_FENCE` of
/// `flags` (the others are the poster's: `IBV_SEND_INLINE`).
pub(crate) fn with_flags(r: SendWr<'_>, flags: u32) -> SendWr<'_> {
    r.signaled(flags & send_flags::SIGNALED != 0)
        .solicited(flags & send_flags::SOLICITED != 0)
        .fence(flags & send_flags::FENCE != 0)
}

/// rverbs' completion as `struct ibv_wc`.
pub(crate) fn c_wc(w: &Wc) -> IbvWc {
    IbvWc {
        wr_id: w.wr_id,
        status: w.status.0 as c_int,
        opcode: w.opcode.0 as c_int,
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        // The union of imm_data (big-endian) and invalidated_rkey, stored
        // as in `ibv_wc`.
        imm_data: w.ex,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: w.flags.bits(),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

/// The parts of a C completion that address a reply
/// (`ibv_init_ah_from_wc`), as rverbs' [`Wc`].
pub(crate) fn wc(w: &IbvWc) -> Wc {
    Wc {
        wr_id: w.wr_id,
        byte_len: w.byte_len,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        flags: WcFlags::from_bits_retain(w.wc_flags),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
        ..Wc::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sge_counts_are_checked_before_the_array_is_read() {
        assert_eq!(check_sges(0, 1), Ok(()));
        assert_eq!(check_sges(1, 1), Ok(()));
        assert_eq!(check_sges(2, 1), Err(libc::EINVAL));
        assert_eq!(check_sges(-1, 32), Err(libc::EINVAL));
        // A NULL array of one SGE is refused, not read.
        // SAFETY: n = 1 with a NULL pointer: checked, never dereferenced.
        let r = unsafe { sges(std::ptr::null(), 1) };
        assert_eq!(r.err(), Some(libc::EINVAL));
    }
}

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
        // rdma-core's rxe refuses a bind with an immediate (a request
        // struct reused from a SEND_WITH_IMM, say) before anything else.
        BIND_MW if imm() != 0 => return Err(libc::EINVAL),
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

/// Writes rverbs' completion at `at` as `struct ibv_wc`: one 48-byte
/// copy, as rdma-core's rxe provider `memcpy`s the kernel's
/// `struct ib_uverbs_wc` into the caller's `ibv_wc` (rverbs' [`Wc`] has
/// that layout; the two bytes after `dlid_path_bits`, `port_num` and
/// `reserved` there, are padding in `ibv_wc`).
///
/// # Safety
/// `at` is valid for a write of one `struct ibv_wc` and aligned for it
/// (C contract); it may be uninitialised (it is not read).
#[inline(always)]
pub(crate) unsafe fn put_wc(at: *mut IbvWc, w: Wc) {
    // SAFETY: the caller's contract; Wc and IbvWc have one size and
    // alignment and every IbvWc member at its offset in Wc with its type's
    // size (checked below), so the bytes are those members.
    unsafe { at.cast::<Wc>().write(w) }
}

// `put_wc`'s layout contract: Wc is `struct ibv_wc` member for member.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Wc>() == size_of::<IbvWc>());
    assert!(align_of::<Wc>() == align_of::<IbvWc>());
    assert!(offset_of!(Wc, wr_id) == offset_of!(IbvWc, wr_id));
    assert!(offset_of!(Wc, status) == offset_of!(IbvWc, status));
    assert!(offset_of!(Wc, opcode) == offset_of!(IbvWc, opcode));
    assert!(offset_of!(Wc, vendor_err) == offset_of!(IbvWc, vendor_err));
    assert!(offset_of!(Wc, byte_len) == offset_of!(IbvWc, byte_len));
    assert!(offset_of!(Wc, ex) == offset_of!(IbvWc, imm_data));
    assert!(offset_of!(Wc, qp_num) == offset_of!(IbvWc, qp_num));
    assert!(offset_of!(Wc, src_qp) == offset_of!(IbvWc, src_qp));
    assert!(offset_of!(Wc, flags) == offset_of!(IbvWc, wc_flags));
    assert!(offset_of!(Wc, pkey_index) == offset_of!(IbvWc, pkey_index));
    assert!(offset_of!(Wc, slid) == offset_of!(IbvWc, slid));
    assert!(offset_of!(Wc, sl) == offset_of!(IbvWc, sl));
    assert!(offset_of!(Wc, dlid_path_bits) == offset_of!(IbvWc, dlid_path_bits));
    assert!(size_of::<rverbs::WcStatus>() == size_of::<c_int>());
    assert!(size_of::<rverbs::WcOpcode>() == size_of::<c_int>());
    assert!(size_of::<WcFlags>() == size_of::<std::ffi::c_uint>());
};

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

    /// `put_wc` writes every member of an `ibv_wc` the caller has not
    /// initialised (Miri reads them all back), each where C reads it.
    #[test]
    fn a_completion_is_written_into_uninitialised_memory() {
        let w = Wc {
            wr_id: 0x1122_3344_5566_7788,
            status: rverbs::WcStatus(5),
            opcode: rverbs::WcOpcode(128),
            vendor_err: 9,
            byte_len: 64,
            ex: 0xdead_beef,
            qp_num: 17,
            src_qp: 18,
            flags: WcFlags::from_bits_retain(3),
            pkey_index: 2,
            slid: 7,
            sl: 4,
            dlid_path_bits: 1,
            port_num: 1,
            reserved: 0,
        };
        let mut out = [std::mem::MaybeUninit::<IbvWc>::uninit(); 2];
        // SAFETY: out[1] is a writable, aligned ibv_wc.
        unsafe { put_wc(out[1].as_mut_ptr(), w) };
        // SAFETY: put_wc wrote every member of out[1].
        let c = unsafe { out[1].assume_init() };
        assert_eq!(
            (c.wr_id, c.status, c.opcode, c.vendor_err, c.byte_len),
            (0x1122_3344_5566_7788, 5, 128, 9, 64)
        );
        assert_eq!(
            (c.imm_data, c.qp_num, c.src_qp, c.wc_flags),
            (0xdead_beef, 17, 18, 3)
        );
        assert_eq!((c.pkey_index, c.slid, c.sl, c.dlid_path_bits), (2, 7, 4, 1));
    }

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

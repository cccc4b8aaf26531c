//! Work requests.

use uverbs_abi::verbs as v;

/// One scatter/gather element (`struct ib_uverbs_sge`, `struct ibv_sge`):
/// the layout both providers copy into their WQEs.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address inside a registered memory region.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The region's lkey.
    pub lkey: u32,
}

const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Sge>() == size_of::<v::IbUverbsSge>());
    assert!(align_of::<Sge>() == align_of::<v::IbUverbsSge>());
    assert!(offset_of!(Sge, addr) == offset_of!(v::IbUverbsSge, addr));
    assert!(offset_of!(Sge, length) == offset_of!(v::IbUverbsSge, length));
    assert!(offset_of!(Sge, lkey) == offset_of!(v::IbUverbsSge, lkey));
};

/// A type laid out exactly as [`Sge`], so that a list of it *is* an SGE
/// list (the safe API's checked MR slices are one).
///
/// # Safety
/// Implementers must be `repr(C)` (or `repr(transparent)` over such a
/// type) with the size, alignment and field offsets of [`Sge`], every
/// byte of which is an initialised field of the same type, and must carry
/// nothing else but zero-sized markers.
#[allow(unsafe_code)]
pub unsafe trait AsSge: Copy {}

// SAFETY: Sge is itself.
#[allow(unsafe_code)]
unsafe impl AsSge for Sge {}

/// A list of [`AsSge`] elements as the SGE list it is, without copying.
#[inline(always)]
pub fn as_sges<S: AsSge>(list: &[S]) -> &[Sge] {
    // SAFETY: S has Sge's layout and fully initialised fields (AsSge's
    // contract); the result borrows the same memory for no longer than the
    // input.
    #[allow(unsafe_code)]
    unsafe {
        core::slice::from_raw_parts(list.as_ptr().cast(), list.len())
    }
}

/// A remote buffer: address and rkey, as the peer advertised them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Remote {
    /// The address in the peer MR's I/O virtual address space (its
    /// buffer's own address unless it was registered at another IOVA).
    pub addr: u64,
    /// The peer MR's rkey.
    pub rkey: u32,
}

/// What a send work request does, with its operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data (host order; sent big-endian).
    SendWithImm(u32),
    /// RDMA WRITE to `Remote`.
    Write(Remote),
    /// RDMA WRITE with immediate (consumes a receive at the peer).
    WriteWithImm(Remote, u32),
    /// RDMA READ from `Remote` into the SGEs.
    Read(Remote),
    /// 64-bit compare-and-swap at `remote`; the old value lands in the SGE.
    CompareSwap {
        /// Where (8-byte aligned).
        remote: Remote,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 64-bit fetch-and-add at `remote`; the old value lands in the SGE.
    FetchAdd {
        /// Where (8-byte aligned).
        remote: Remote,
        /// Addend.
        add: u64,
    },
    /// SEND that also invalidates `rkey` at the peer (an MR's or a type-2
    /// window's): the peer's receive completes with
    /// [`crate::WcFlags::WITH_INVALIDATE`] and the rkey.
    SendWithInv(u32),
    /// Invalidates `rkey` locally (a type-2 window or a fast-registered
    /// MR): takes no payload and moves no data.
    LocalInv(u32),
    /// 8-byte ATOMIC WRITE (IBA oA19; Linux 6.2): `value` is placed at
    /// `remote` (8-byte aligned) as one unit. Takes no SGEs: the bytes
    /// travel in the work request.
    AtomicWrite {
        /// Where (8-byte aligned; the peer MR needs remote write access).
        remote: Remote,
        /// The bytes, as they are to appear in the peer's memory.
        value: [u8; 8],
    },
    /// FLUSH (IBA oA19; Linux 6.2): makes earlier writes to the peer's
    /// memory visible at the placement type's level. Moves no data.
    Flush {
        /// The range's start (its MR needs the placement type's FLUSH
        /// access).
        remote: Remote,
        /// The range's length (ignored for [`FlushLevel::Mr`]).
        len: u32,
        /// To global visibility or to persistence.
        placement: FlushType,
        /// The range or the whole MR.
        level: FlushLevel,
    },
    /// Binds a memory window (`IBV_WR_BIND_MW`): type 2 windows are bound
    /// only this way, type 1 windows through `ibv_bind_mw`, which rdma-core
    /// also turns into this request.
    BindMw(MwBind),
}

/// The placement type of a FLUSH (`IBV_FLUSH_GLOBAL`,
/// `IBV_FLUSH_PERSISTENT`: the FETH's `PLT` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FlushType {
    /// Global visibility.
    Global = 1,
    /// Persistence.
    Persistent = 2,
}

/// The selectivity of a FLUSH (`IBV_FLUSH_RANGE`, `IBV_FLUSH_MR`: the
/// FETH's `SEL` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FlushLevel {
    /// The range given.
    Range = 0,
    /// The whole MR the rkey names.
    Mr = 1,
}

/// What a memory-window bind says (`struct ibv_mw_bind_info` with the
/// window and its next rkey; `wr.mw` of `struct rxe_send_wr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MwBind {
    /// The window's rkey now.
    pub mw_rkey: u32,
    /// The rkey it has once bound (the device takes its low 8 bits, the
    /// key; the rest is the window's index).
    pub new_rkey: u32,
    /// The lkey of the MR the window opens onto (0 with `length` 0).
    pub mr_lkey: u32,
    /// Where the window starts, in the MR's address space.
    pub addr: u64,
    /// Its length in bytes (0 unbinds a type 1 window).
    pub length: u64,
    /// The access it grants (`enum ib_access_flags`: remote read, write,
    /// atomic).
    pub access: u32,
}

impl SendOp {
    /// `enum ib_uverbs_wr_opcode`.
    #[inline(always)]
    pub fn opcode(&self) -> u32 {
        use v::IbUverbsWrOpcode as Op;
        match self {
            SendOp::Write(_) => Op::RDMA_WRITE.0,
            SendOp::WriteWithImm(..) => Op::RDMA_WRITE_WITH_IMM.0,
            SendOp::Send => Op::SEND.0,
            SendOp::SendWithImm(_) => Op::SEND_WITH_IMM.0,
            SendOp::Read(_) => Op::RDMA_READ.0,
            SendOp::CompareSwap { .. } => Op::ATOMIC_CMP_AND_SWP.0,
            SendOp::FetchAdd { .. } => Op::ATOMIC_FETCH_AND_ADD.0,
            SendOp::SendWithInv(_) => Op::SEND_WITH_INV.0,
            SendOp::LocalInv(_) => Op::LOCAL_INV.0,
            SendOp::AtomicWrite { .. } => Op::ATOMIC_WRITE.0,
            SendOp::Flush { .. } => Op::FLUSH.0,
            SendOp::BindMw(_) => Op::BIND_MW.0,
        }
    }

    /// True for the operations after the first seven (invalidations,
    /// ATOMIC WRITE, FLUSH, window binds), which not every provider or
    /// kernel takes: a provider checks them apart, so that the common
    /// operations pay nothing for them.
    #[inline(always)]
    pub fn is_extended(&self) -> bool {
        !matches!(
            self,
            SendOp::Send
                | SendOp::SendWithImm(_)
                | SendOp::Write(_)
                | SendOp::WriteWithImm(..)
                | SendOp::Read(_)
                | SendOp::CompareSwap { .. }
                | SendOp::FetchAdd { .. }
        )
    }

    /// The rkey to invalidate (`ex.invalidate_rkey`), for SEND with
    /// invalidate and local invalidate.
    #[inline(always)]
    pub fn invalidate_rkey(&self) -> Option<u32> {
        match *self {
            SendOp::SendWithInv(k) | SendOp::LocalInv(k) => Some(k),
            _ => None,
        }
    }

    /// The immediate (host order), for the two `...WithImm` operations.
    #[inline(always)]
    pub fn imm(&self) -> Option<u32> {
        match *self {
            SendOp::SendWithImm(i) | SendOp::WriteWithImm(_, i) => Some(i),
            _ => None,
        }
    }

    /// The remote operand, for RDMA and atomics.
    #[inline(always)]
    pub fn remote(&self) -> Option<Remote> {
        match *self {
            SendOp::Write(r)
            | SendOp::WriteWithImm(r, _)
            | SendOp::Read(r)
            | SendOp::CompareSwap { remote: r, .. }
            | SendOp::FetchAdd { remote: r, .. }
            | SendOp::AtomicWrite { remote: r, .. }
            | SendOp::Flush { remote: r, .. } => Some(r),
            SendOp::Send
            | SendOp::SendWithImm(_)
            | SendOp::SendWithInv(_)
            | SendOp::LocalInv(_)
            | SendOp::BindMw(_) => None,
        }
    }

    /// True for the two atomics.
    #[inline(always)]
    pub fn is_atomic(&self) -> bool {
        matches!(self, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
    }

    /// True for the operations that write the local SGEs (READ, atomics),
    /// which therefore cannot take inline data. (The extended operations
    /// other than SEND with invalidate take no payload at all; providers
    /// check that apart.)
    #[inline(always)]
    pub fn reads_remote(&self) -> bool {
        matches!(
            self,
            SendOp::Read(_) | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
        )
    }
}

/// Bytes of an mlx5 address vector (`struct mlx5_wqe_av`).
pub const AV_LEN: usize = 48;

/// Where UD sends to an address handle go, in the form the provider's
/// WQEs carry it (made by the provider when the AH was created).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AhAddr {
    /// A number the kernel gave the AH (rxe's `ah_num`): the kernel looks
    /// the address up.
    Number(u32),
    /// An address vector written into every WQE (mlx5).
    Vector([u8; AV_LEN]),
}

/// An address handle, as a provider reads it.
pub trait AddressHandle {
    /// What UD sends to it carry.
    fn address(&self) -> &AhAddr;
}

impl AddressHandle for AhAddr {
    #[inline(always)]
    fn address(&self) -> &AhAddr {
        self
    }
}

/// The destination of a UD send.
#[derive(Debug)]
pub struct Ud<'a, A> {
    /// Where the peer is.
    pub ah: &'a A,
    /// The peer's QP number.
    pub remote_qpn: u32,
    /// The peer's Q_Key.
    pub remote_qkey: u32,
}

impl<A> Clone for Ud<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Ud<'_, A> {}

/// One send work request, over SGE-shaped elements `S` and, on a UD QP,
/// an address handle `A`.
#[derive(Debug)]
pub struct SendWr<'a, S, A> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local memory to gather from (or scatter into, for READ/atomics).
    pub sges: &'a [S],
    /// Bytes to copy into the WQE instead of `sges` (sends and writes).
    pub inline: Option<&'a [u8]>,
    /// Generate a completion.
    pub signaled: bool,
    /// Set the solicited-event bit.
    pub solicited: bool,
    /// Wait for earlier READs and atomics first.
    pub fence: bool,
    /// The destination, on a UD QP.
    pub ud: Option<Ud<'a, A>>,
}

impl<S, A> Clone for SendWr<'_, S, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S, A> Copy for SendWr<'_, S, A> {}

impl<'a, S, A> SendWr<'a, S, A> {
    /// A signaled work request of `op` over `sges`.
    pub fn new(wr_id: u64, op: SendOp, sges: &'a [S]) -> Self {
        SendWr {
            wr_id,
            op,
            sges,
            inline: None,
            signaled: true,
            solicited: false,
            fence: false,
            ud: None,
        }
    }

    /// A signaled work request of `op` whose payload is copied into the
    /// WQE at post time (`IBV_SEND_INLINE`).
    pub fn inline(wr_id: u64, op: SendOp, data: &'a [u8]) -> Self {
        SendWr {
            inline: Some(data),
            ..SendWr::new(wr_id, op, &[])
        }
    }

    /// Sets whether the work request generates a completion.
    pub fn signaled(mut self, yes: bool) -> Self {
        self.signaled = yes;
        self
    }

    /// Sets the solicited-event bit.
    pub fn solicited(mut self, yes: bool) -> Self {
        self.solicited = yes;
        self
    }

    /// Sends to `ah`/`remote_qpn`/`remote_qkey` (UD QPs).
    pub fn to(mut self, ah: &'a A, remote_qpn: u32, remote_qkey: u32) -> Self {
        self.ud = Some(Ud {
            ah,
            remote_qpn,
            remote_qkey,
        });
        self
    }

    /// Sets the fence bit.
    pub fn fence(mut self, yes: bool) -> Self {
        self.fence = yes;
        self
    }

    /// `enum ib_uverbs_send_flags` of the request (without INLINE, which
    /// the payload says).
    #[inline(always)]
    pub fn send_flags(&self) -> u32 {
        use v::IbSendFlags as F;
        (self.fence as u32 * F::FENCE.bits())
            | (self.signaled as u32 * F::SIGNALED.bits())
            | (self.solicited as u32 * F::SOLICITED.bits())
    }
}

/// One receive work request.
#[derive(Debug)]
pub struct RecvWr<'a, S> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message lands.
    pub sges: &'a [S],
}

impl<S> Clone for RecvWr<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for RecvWr<'_, S> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_and_flags_are_the_kernels() {
        let r = Remote { addr: 8, rkey: 1 };
        assert_eq!(SendOp::Write(r).opcode(), 0);
        assert_eq!(SendOp::WriteWithImm(r, 1).opcode(), 1);
        assert_eq!(SendOp::Send.opcode(), 2);
        assert_eq!(SendOp::SendWithImm(1).opcode(), 3);
        assert_eq!(SendOp::Read(r).opcode(), 4);
        let cas = SendOp::CompareSwap {
            remote: r,
            compare: 0,
            swap: 0,
        };
        assert_eq!(cas.opcode(), 5);
        assert_eq!(SendOp::FetchAdd { remote: r, add: 1 }.opcode(), 6);
        let wr: SendWr<'_, Sge, AhAddr> = SendWr::new(1, SendOp::Send, &[]);
        assert_eq!(wr.send_flags(), 2);
        assert_eq!(
            wr.signaled(false).fence(true).solicited(true).send_flags(),
            5
        );
        assert_eq!(cas.remote(), Some(r));
        assert_eq!(SendOp::SendWithImm(9).imm(), Some(9));
        assert!(cas.is_atomic() && cas.reads_remote() && SendOp::Read(r).reads_remote());
        assert!(!cas.is_extended() && !SendOp::Send.is_extended());
        let value = [1; 8];
        let flush = SendOp::Flush {
            remote: r,
            len: 8,
            placement: FlushType::Global,
            level: FlushLevel::Range,
        };
        for (op, code) in [
            (SendOp::LocalInv(7), 7),
            (SendOp::BindMw(MwBind::default()), 8),
            (SendOp::SendWithInv(7), 9),
            (flush, 14),
            (SendOp::AtomicWrite { remote: r, value }, 15),
        ] {
            assert_eq!(op.opcode(), code);
            assert!(op.is_extended());
        }
        assert_eq!(SendOp::SendWithInv(7).invalidate_rkey(), Some(7));
        assert_eq!(flush.remote(), Some(r));
        // The new operations do not make a work request larger.
        assert_eq!(core::mem::size_of::<SendOp>(), 40);
    }

    #[test]
    fn an_sge_list_is_viewed_in_place() {
        let l = [Sge {
            addr: 1,
            length: 2,
            lkey: 3,
        }];
        assert_eq!(as_sges(&l).as_ptr(), l.as_ptr());
        assert_eq!(as_sges(&l)[0], l[0]);
    }
}

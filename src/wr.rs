//! Work requests: the one vocabulary the safe API and both provider glues
//! speak. Memory is named by checked MR slices, laid out as SGEs, so a
//! request's scatter/gather list reaches the provider's ring as it is.
//!
//! The types are generic over the address handle `A` of a UD send only so
//! that the provider floor can take them without naming the public
//! [`crate::Ah`]; the public API uses them as [`crate::SendWr`].

use std::marker::PhantomData;

/// The most SGEs one work request may carry through the safe API (rxe's
/// own limit is 32).
pub const MAX_SGE: usize = 32;

/// A checked piece of an MR for a work request: offset and length are
/// inside the MR ([`crate::Mr::slice`]). Borrows the MR so that it is not
/// dropped while the work request is being built.
///
/// Laid out exactly as an SGE (`struct ibv_sge`: `addr`, `length`, `lkey`;
/// the borrow is zero-sized), so that a list of slices *is* the SGE list a
/// provider copies into its ring: no conversion on the data path.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Slice<'a> {
    addr: u64,
    len: u32,
    lkey: u32,
    _mr: PhantomData<&'a ()>,
}

const _: () = {
    use uverbs_abi::verbs::IbUverbsSge as K;
    assert!(size_of::<Slice<'static>>() == size_of::<K>());
    assert!(std::mem::offset_of!(Slice<'static>, addr) == std::mem::offset_of!(K, addr));
    assert!(std::mem::offset_of!(Slice<'static>, len) == std::mem::offset_of!(K, length));
    assert!(std::mem::offset_of!(Slice<'static>, lkey) == std::mem::offset_of!(K, lkey));
};

impl<'a> Slice<'a> {
    /// A slice the caller has checked to lie inside a live MR that the
    /// lifetime `'a` borrows.
    pub(crate) fn checked(addr: u64, len: u32, lkey: u32) -> Slice<'a> {
        Slice {
            addr,
            len,
            lkey,
            _mr: PhantomData,
        }
    }

    /// The address the device uses (`addr` of the SGE).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The length in bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The MR's lkey.
    #[inline]
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
}

impl Slice<'static> {
    /// A slice over memory that is not an `Mr`'s: for tests that run the
    /// data path over a device model's memory, never for the device.
    #[cfg(test)]
    pub(crate) fn raw_for_model(addr: u64, len: u32, lkey: u32) -> Slice<'static> {
        Slice::checked(addr, len, lkey)
    }
}

/// A remote buffer: address and rkey, as the peer advertised them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The peer's virtual address.
    pub addr: u64,
    /// The peer MR's rkey.
    pub rkey: u32,
}

/// What a send work request does.
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

/// One send work request ([`crate::SendWr`]).
#[derive(Debug)]
pub struct SendWr<'a, A> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local memory to gather from (or scatter into, for READ/atomics).
    pub sges: &'a [Slice<'a>],
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

impl<A> Clone for SendWr<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for SendWr<'_, A> {}

impl<'a, A> SendWr<'a, A> {
    /// A signaled work request of `op` over `sges`.
    pub fn new(wr_id: u64, op: SendOp, sges: &'a [Slice<'a>]) -> Self {
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

    /// A signaled work request of `op` whose payload is copied at post time.
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
}

/// One receive work request.
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where the message lands.
    pub sges: &'a [Slice<'a>],
}

/// Checks a work request's SGE count against the safe API's limit.
#[inline(always)]
pub(crate) fn check_sges(sges: &[Slice<'_>]) -> Result<(), String> {
    if sges.len() > MAX_SGE {
        return Err(format!(
            "{} SGEs, at most {MAX_SGE} per work request",
            sges.len()
        ));
    }
    Ok(())
}

//! The send queue: build `rxe_send_wqe`s in the shared SQ ring.
//!
//! Posting writes the producer slot and release-stores the producer index;
//! the kernel only looks at the ring when told to, so the caller must then
//! ring the doorbell (a `POST_SEND` command with no work requests, which
//! makes rxe run its requester for this QP). One doorbell may cover a whole
//! list of posts.

mod build;
mod prepared;

pub use prepared::SendTemplate;

use crate::queue::{Queue, SlotRing};
use crate::slot::{Refused, SlotMut};
use crate::wqe::{send, SGE_SIZE};
use crate::wr::{as_sges, AddressHandle, AhAddr, AsSge, SendOp, SendWr};
use crate::RingError;
use rverbs_types::{check_send, PostError, QpType, SendLimits};

/// `IB_SEND_INLINE`: the payload is in the WQE.
const INLINE: u32 = uverbs_abi::verbs::IbSendFlags::INLINE.bits();

/// Bytes of a send WQE before its SGEs / inline data.
const HEADER: usize = send::PAYLOAD;

/// The producer side of an rxe SQ.
#[derive(Debug)]
pub struct SendQueue {
    q: SlotRing<HEADER>,
    prod: u32,
    /// Slots known free: read from the consumer index only when it runs
    /// out, not on every post (the kernel only ever frees more, so this is
    /// never more than the truth).
    room: u32,
    /// Slots of the ring past the QP's granted `max_send_wr`, which the
    /// queue never fills ([`SendQueue::limit_depth`]): kept as the
    /// difference, so that the room's refill compares and subtracts it in
    /// place (callgrind: a register less in every post).
    unused: u32,
    ssn: u32,
    limits: SendLimits,
    /// Whether the kernel takes ATOMIC WRITE, and FLUSH (Linux 6.2).
    atomic_write: bool,
    flush: bool,
    /// The batch being built in place (`build.rs`).
    build: build::Build,
}

impl SendQueue {
    /// Wraps a validated SQ ring with the QP's negotiated capabilities.
    ///
    /// Fails if the ring's slots cannot hold a WQE with `max_sge` SGEs or
    /// `max_inline` bytes (the kernel sized them; a smaller slot would mean
    /// a corrupted header).
    pub fn new(
        q: Queue,
        max_sge: u32,
        max_inline: u32,
        qp_type: QpType,
    ) -> Result<SendQueue, RingError> {
        let need = HEADER + (max_sge as usize * SGE_SIZE).max(max_inline as usize);
        let elem_size = q.elem_size();
        let too_small = RingError { elem_size, need };
        if elem_size < need {
            return Err(too_small);
        }
        let q = SlotRing::new(q).map_err(|_| too_small)?;
        // Start where the ring is: a fresh QP's indices are 0, but taking
        // the header's value keeps us in step with the kernel either way.
        let prod = q.queue().load_producer();
        Ok(SendQueue {
            q,
            prod,
            room: 0,
            unused: 0,
            ssn: 0,
            limits: SendLimits::new(qp_type, max_sge, max_inline),
            atomic_write: true,
            flush: true,
            build: build::Build::default(),
        })
    }

    /// Says whether the kernel offers ATOMIC WRITE and FLUSH (both are
    /// taken until told otherwise; the device's `device_cap_flags_ex`
    /// reports them). A request the kernel lacks is refused with
    /// [`PostError::NotOffered`] before it reaches the ring.
    pub fn set_offered(&mut self, atomic_write: bool, flush: bool) {
        self.atomic_write = atomic_write;
        self.flush = flush;
    }

    /// Slots that can hold work requests (one of the ring's stays empty).
    pub fn capacity(&self) -> u32 {
        self.q.queue().mask()
    }

    /// Holds at most `max_wr` requests at once, where the ring holds more:
    /// the QP's granted `max_send_wr`, which is what its CQ was sized
    /// for. (Linux 6.1's rxe grants the depth asked for and makes the
    /// ring the next power of two less one: 16 asked, 31 slots.)
    pub fn limit_depth(&mut self, max_wr: u32) {
        self.unused = self.capacity() - max_wr.min(self.capacity());
        self.room = 0;
    }

    /// Requests the queue may hold at once.
    pub fn depth(&self) -> u32 {
        self.capacity() - self.unused
    }

    /// The slot the next work request goes into (0..=capacity). A slot is
    /// written again only after the kernel has consumed the request that
    /// was in it, i.e. after the request completed (rxe's completer moves
    /// the consumer index past a WQE only when it retires it).
    #[inline(always)]
    pub fn producer(&self) -> u32 {
        self.prod
    }

    /// Work requests posted but not yet consumed by the kernel.
    pub fn outstanding(&self) -> u32 {
        let q = self.q.queue();
        self.prod.wrapping_sub(q.load_consumer()) & q.mask()
    }

    /// Validates `wr` against the queue's limits without posting it, and
    /// returns its total length.
    #[inline]
    pub fn validate<S: AsSge, A: AddressHandle>(
        &self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<u32, PostError> {
        self.check(wr)?;
        let length: u64 = match wr.inline {
            Some(data) => data.len() as u64,
            None => as_sges(wr.sges).iter().map(|s| s.length as u64).sum(),
        };
        check_length(wr, length)
    }

    /// Every check that does not need the total length: the shared ones
    /// (transport, destination, SGE count, inline size), then rxe's: no
    /// inline data for an operation that reads the peer.
    #[inline(always)]
    fn check<S: AsSge, A: AddressHandle>(&self, wr: &SendWr<'_, S, A>) -> Result<(), PostError> {
        check_send(&self.limits, wr)?;
        if wr.inline.is_some() && wr.op.reads_remote() {
            return Err(PostError::InlineNotAllowed {
                opcode: wr.op.opcode(),
            });
        }
        if wr.op.is_extended() {
            // The operation and whether a payload came, by value: a
            // reference to `wr` passed out of line would keep a request
            // built by the caller in memory (callgrind: the C library's
            // post stored and reloaded its translation).
            let payload = !wr.sges.is_empty() || wr.inline.is_some();
            return self.check_extended(wr.op, payload);
        }
        Ok(())
    }

    /// Posts one work request: validates it, writes the WQE into the
    /// producer slot and publishes it. The caller rings the doorbell.
    ///
    /// # Safety
    /// Every SGE of an `Sges` payload names memory registered under its lkey. The device may
    /// read it (for READ and atomics, write it) until the request completes
    /// or the registration is gone: until then the caller keeps it
    /// allocated, and reaches it only in ways the device's concurrent
    /// access cannot make undefined (no Rust references into it).
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    pub unsafe fn post<S: AsSge, A: AddressHandle>(
        &mut self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<(), PostError> {
        self.post_checked::<S, A, true>(wr)
    }

    /// [`SendQueue::post`] without publishing: the WQE is written and the
    /// producer moved past it, but the kernel sees it only after
    /// [`SendQueue::publish`]. A list post publishes once, after its last
    /// request (callgrind: 3 instructions a request fewer).
    ///
    /// # Safety
    /// As for [`SendQueue::post`].
    #[inline(always)]
    #[allow(unsafe_code)] // the declaration only: the body is safe code
    pub unsafe fn post_unpublished<S: AsSge, A: AddressHandle>(
        &mut self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<(), PostError> {
        self.post_checked::<S, A, false>(wr)
    }

    /// Release-stores the producer index: the kernel may read every WQE
    /// posted so far (a no-op if [`SendQueue::post`] published them).
    #[inline(always)]
    pub fn publish(&self) {
        self.q.queue().store_producer(self.prod);
    }

    /// [`SendQueue::post`]: validate, build, and publish if `PUBLISH`.
    #[inline(always)]
    fn post_checked<S: AsSge, A: AddressHandle, const PUBLISH: bool>(
        &mut self,
        wr: &SendWr<'_, S, A>,
    ) -> Result<(), PostError> {
        self.check(wr)?;
        self.ensure_room()?;
        let next = self.q.queue().next(self.prod);
        let mut w = self.q.slot_mut(self.prod);
        // SendQueue::new checked that every valid request fits a slot, so
        // no store is refused; if one were, the WQE stays unpublished.
        let elem_size = w.len();
        let refused = |r: Refused| PostError::WqeTooLarge {
            bytes: r.end(),
            max: elem_size,
        };
        let total = write_wqe(&mut w, wr, self.ssn).map_err(|e| e.post_error(elem_size))?;
        // The length checks come after the copy, and a failure leaves the
        // slot unpublished.
        let length = check_length(wr, total)?;
        w.u32(send::DMA_LENGTH, length).map_err(refused)?;
        w.u32(send::DMA_RESID, length).map_err(refused)?;
        self.ssn = self.ssn.wrapping_add(1);
        self.prod = next;
        // A batch's requests start past what a post wrote: its `build_*`
        // pieces never reach a slot a post filled (and may have published),
        // and its abort never takes one back.
        self.build.posted(next);
        self.room -= 1;
        if PUBLISH {
            self.q.queue().store_producer(next);
        }
        Ok(())
    }

    /// Makes sure one slot is free: the cached room, refilled from the
    /// consumer index only when it ran out (the kernel only ever frees
    /// more), less the slots the granted depth leaves unused.
    #[inline(always)]
    fn ensure_room(&mut self) -> Result<(), PostError> {
        if self.room == 0 {
            // `unused` compared and subtracted in place: the refill is
            // inlined in every post, and one value more in a register there
            // made each post save and restore three (callgrind, the C
            // builders: +5 per request). A consumer index (untrusted) that
            // claims more in flight than the depth gives no room.
            let free = self.free_slots();
            if free <= self.unused {
                return Err(PostError::QueueFull);
            }
            self.room = free - self.unused;
        }
        Ok(())
    }

    /// Slots of the ring free for new requests: read from the consumer
    /// index (an acquire load of the page the kernel writes).
    #[inline(always)]
    fn free_slots(&self) -> u32 {
        let q = self.q.queue();
        q.mask() - (self.prod.wrapping_sub(q.load_consumer()) & q.mask())
    }
}

/// Writes the send WQE for `wr` into `w`, all but `dma.length` and
/// `dma.resid`, and returns the payload's total length (SGEs copied and
/// summed in one pass).
///
/// Every offset is a constant inside `struct rxe_send_wqe` (`HEADER`
/// bytes, which the slot was checked to hold), so those stores cannot be
/// refused and cost no check; only the payload's is checked. Plain stores
/// suffice: the kernel reads the slot only after the release store of the
/// producer index.
#[inline(always)]
fn write_wqe<S: AsSge, A: AddressHandle>(
    w: &mut SlotMut<'_, HEADER>,
    wr: &SendWr<'_, S, A>,
    ssn: u32,
) -> Result<u64, WqeError> {
    let inline = wr.inline.is_some();
    let flags = wr.send_flags() | if inline { INLINE } else { 0 };
    let opcode = wr.op.opcode();
    match wr.ud {
        // A UD send (check_send let only SEND and SEND with immediate
        // through): the `ud` member's first 16 bytes, pkey_index 0. Its
        // `pad` and `av` keep what the slot held: rxe reads the `av` only
        // for AH number 0 (`rxe_get_av`), the form of kernels whose
        // CREATE_AH returns no number, which create_ah refuses, so a
        // number is always written (callgrind: 7 stores fewer than
        // zeroing the 120-byte union).
        Some(ud) => {
            // Resolved here, as the member is written, not before: one
            // test of `wr.ud` fewer (callgrind). A refusal leaves the
            // slot unpublished.
            let AhAddr::Number(ah_num) = *ud.ah.address() else {
                return Err(WqeError::ForeignAh);
            };
            w.u32(send::UD_REMOTE_QPN, ud.remote_qpn)?;
            w.u32(send::UD_REMOTE_QKEY, ud.remote_qkey)?;
            w.u32(send::UD_PKEY_INDEX, 0)?;
            w.u32(send::UD_AH_NUM, ah_num)?;
        }
        // Zero the opcode-specific union as rdma-core does, so that no
        // field of another opcode carries a stale value from the slot's
        // last use.
        None => w.zero(send::WR_UNION, send::WR_UNION_LEN)?,
    }
    w.u64(send::WR_ID, wr.wr_id)?;
    w.u32(send::WR_RESERVED, 0)?;
    w.u32(send::OPCODE, opcode)?;
    w.u32(send::SEND_FLAGS, flags)?;
    // One match on the operation writes its members and yields what the
    // common part needs of it: the `ex` word (an immediate travels
    // big-endian, in wire order; an rkey to invalidate in host order, as
    // rdma-core's wr_send_inv / wr_local_inv store it) and the remote
    // address (IOVA). Separate `remote()` / `imm()` matches cost a jump
    // table each (callgrind).
    let (ex, iova) = match wr.op {
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => {
            w.u64(send::ATOMIC_REMOTE_ADDR, remote.addr)?;
            w.u64(send::ATOMIC_COMPARE_ADD, compare)?;
            w.u64(send::ATOMIC_SWAP, swap)?;
            w.u32(send::ATOMIC_RKEY, remote.rkey)?;
            (0, remote.addr)
        }
        SendOp::FetchAdd { remote, add } => {
            w.u64(send::ATOMIC_REMOTE_ADDR, remote.addr)?;
            w.u64(send::ATOMIC_COMPARE_ADD, add)?;
            w.u32(send::ATOMIC_RKEY, remote.rkey)?;
            (0, remote.addr)
        }
        SendOp::Write(remote) | SendOp::Read(remote) => {
            w.u64(send::RDMA_REMOTE_ADDR, remote.addr)?;
            w.u32(send::RDMA_RKEY, remote.rkey)?;
            (0, remote.addr)
        }
        SendOp::WriteWithImm(remote, imm) => {
            w.u64(send::RDMA_REMOTE_ADDR, remote.addr)?;
            w.u32(send::RDMA_RKEY, remote.rkey)?;
            (imm.to_be(), remote.addr)
        }
        SendOp::Send => (0, 0),
        SendOp::SendWithImm(imm) => (imm.to_be(), 0),
        SendOp::SendWithInv(rkey) | SendOp::LocalInv(rkey) => (rkey, 0),
        SendOp::AtomicWrite { remote, value } => {
            // The kernel's requester copies `dma.atomic_wr` (the payload's
            // place, no SGEs: check_extended refused them) into the packet.
            w.u64(send::RDMA_REMOTE_ADDR, remote.addr)?;
            w.u32(send::RDMA_RKEY, remote.rkey)?;
            w.bytes(send::PAYLOAD, &value)?;
            (0, remote.addr)
        }
        SendOp::Flush {
            remote,
            len,
            placement,
            level,
        } => {
            // The length travels as the RETH's, from dma.resid
            // (check_length); the member keeps it too, as rdma-core does.
            w.u64(send::FLUSH_REMOTE_ADDR, remote.addr)?;
            w.u32(send::FLUSH_LENGTH, len)?;
            w.u32(send::FLUSH_RKEY, remote.rkey)?;
            w.put(send::FLUSH_TYPE, placement as u8)?;
            w.put(send::FLUSH_LEVEL, level as u8)?;
            (0, remote.addr)
        }
        SendOp::BindMw(b) => {
            w.u64(send::MW_ADDR, b.addr)?;
            w.u64(send::MW_LENGTH, b.length)?;
            w.u32(send::MW_MR_LKEY, b.mr_lkey)?;
            w.u32(send::MW_MW_RKEY, b.mw_rkey)?;
            w.u32(send::MW_RKEY, b.new_rkey)?;
            w.u32(send::MW_ACCESS, b.access)?;
            (0, 0)
        }
    };
    w.u32(send::EX_IMM, ex)?;
    // Posted state; the kernel's requester fills its own fields, which
    // start from zero as in a fresh WQE.
    w.u32(send::STATUS, 0)?;
    w.u32(send::STATE, 0)?;
    w.u64(send::IOVA, iova)?;
    w.u32(send::MASK, 0)?;
    w.u32(send::FIRST_PSN, 0)?;
    w.u32(send::LAST_PSN, 0)?;
    w.u32(send::ACK_LENGTH, 0)?;
    w.u32(send::SSN, ssn)?;
    w.u32(send::HAS_RD_ATOMIC, 0)?;
    w.u32(send::DMA_CUR_SGE, 0)?;
    w.u32(send::DMA_SGE_OFFSET, 0)?;
    w.u32(send::DMA_RESERVED, 0)?;
    match wr.inline {
        None => {
            let sges = as_sges(wr.sges);
            w.u32(send::DMA_NUM_SGE, sges.len() as u32)?;
            w.sges(send::PAYLOAD, sges)
        }
        Some(data) => {
            // rdma-core reports the caller's SGE count here; the kernel's
            // inline path reads only length/resid, so one piece is the
            // honest count.
            w.u32(send::DMA_NUM_SGE, 1)?;
            w.bytes(send::PAYLOAD, data)?;
            Ok(data.len() as u64)
        }
    }
    .map_err(WqeError::Refused)
}

/// Why [`write_wqe`] wrote no WQE.
enum WqeError {
    /// A store the slot refused.
    Refused(Refused),
    /// A UD send's AH carries an address vector, not an rxe AH number.
    ForeignAh,
}

impl WqeError {
    /// The refusal a post reports, for a slot of `max` bytes.
    #[cold]
    fn post_error(self, max: usize) -> PostError {
        match self {
            WqeError::Refused(r) => PostError::WqeTooLarge {
                bytes: r.end(),
                max,
            },
            WqeError::ForeignAh => PostError::ForeignAddressHandle,
        }
    }
}

impl From<Refused> for WqeError {
    fn from(r: Refused) -> WqeError {
        WqeError::Refused(r)
    }
}

/// The checks that need the work request's total length.
#[inline(always)]
fn check_length<S, A>(wr: &SendWr<'_, S, A>, length: u64) -> Result<u32, PostError> {
    let length = u32::try_from(length).map_err(|_| PostError::TooLong {
        length,
        max: u32::MAX.into(),
    })?;
    match wr.op {
        SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. }
            if length < 8 || remote.addr & 7 != 0 =>
        {
            return Err(PostError::BadAtomic)
        }
        // No SGEs (check_extended): the length is the operation's own, the
        // 8 bytes in the WQE or the range to flush.
        SendOp::AtomicWrite { .. } => return Ok(8),
        SendOp::Flush { len, .. } => return Ok(len),
        _ => {}
    }
    Ok(length)
}

impl SendQueue {
    /// The checks of the operations beyond the first seven
    /// ([`SendOp::is_extended`]), apart so that those pay nothing for them.
    #[cold]
    fn check_extended(&self, op: SendOp, payload: bool) -> Result<(), PostError> {
        let opcode = op.opcode();
        let offered = match op {
            SendOp::AtomicWrite { .. } => self.atomic_write,
            SendOp::Flush { .. } => self.flush,
            _ => true,
        };
        if !offered {
            return Err(PostError::NotOffered { opcode });
        }
        check_extended_payload(op, payload, opcode)
    }
}

/// The payload rules of the extended operations.
fn check_extended_payload(op: SendOp, payload: bool, opcode: u32) -> Result<(), PostError> {
    match op {
        // A SEND: its payload as any SEND's.
        SendOp::SendWithInv(_) => return Ok(()),
        SendOp::AtomicWrite { remote, .. } if remote.addr & 7 != 0 => {
            return Err(PostError::BadAtomic)
        }
        _ => {}
    }
    // The rest carry no payload (the ATOMIC WRITE's 8 bytes are in the
    // operation): SGEs or inline bytes would be ignored by the kernel, or
    // worse, taken for the operation's own bytes.
    if payload {
        return Err(PostError::NoPayload { opcode });
    }
    Ok(())
}

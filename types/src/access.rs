//! Access rights of memory regions and windows.

use bitflags::bitflags;

bitflags! {
    /// MR access rights (`enum ib_uverbs_access_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access: u32 {
        /// The local device may write (needed for receives, READ, atomics).
        const LOCAL_WRITE = 1;
        /// Peers may RDMA WRITE.
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// Peers may perform atomics (the device must offer atomics).
        const REMOTE_ATOMIC = 1 << 3;
        /// Memory windows may be bound to the MR (the device must offer
        /// memory windows).
        const MW_BIND = 1 << 4;
        /// Zero-based addressing for windows bound to the MR (the MR's own
        /// addressing is its IOVA: see `rverbs::Pd::register_iova`). rxe refuses
        /// it for MRs (named `rverbs::Error::Unsupported`).
        const ZERO_BASED = 1 << 5;
        /// On-demand paging: pages are faulted in when the device touches
        /// them, not pinned at registration (the device must offer ODP;
        /// rxe does from Linux 6.14).
        const ON_DEMAND = 1 << 6;
        /// The memory is in huge pages (a hint some drivers use; rxe
        /// refuses it, and needs none: `rverbs::Pd::alloc_mr_huge` works without).
        const HUGETLB = 1 << 7;
        /// Peers may FLUSH to global visibility (Linux 6.2; the device must
        /// offer it).
        const FLUSH_GLOBAL = 1 << 8;
        /// Peers may FLUSH to persistence (Linux 6.2; the device must offer
        /// it, and the memory must be persistent).
        const FLUSH_PERSISTENT = 1 << 9;
        /// PCIe relaxed ordering. One of the kernel's *optional* flags:
        /// a device that lacks it ignores it (the kernel's rule, which
        /// rdma-core keeps), so it is never refused.
        const RELAXED_ORDERING = 1 << 20;
    }
}

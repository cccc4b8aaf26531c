//! What the mlx5 provider computes before it issues the kernel's commands:
//! the GET_CONTEXT request, which UAR pages to map and where each BlueFlame
//! register lies in them, the QP/CQ/SRQ buffer sizes and offsets, and the
//! driver udata of CREATE_QP, CREATE_CQ and CREATE_SRQ.
//!
//! Pure arithmetic: no memory is touched and no system call made. The rules
//! are rdma-core's (`providers/mlx5/verbs.c`, `mlx5.c`, `srq.c`) checked
//! against what the kernel (`drivers/infiniband/hw/mlx5/`) accepts; each
//! function names the C function a rule comes from. Where this crate's
//! queues take less than rdma-core would (ring sizes, the 63-octoword
//! WQE builder, no SRQ wait queue), the layout is refused or trimmed here,
//! so that every layout this module returns is accepted by
//! [`SendQueue::new`](crate::SendQueue::new),
//! [`RecvQueue::new`](crate::RecvQueue::new),
//! [`SharedRecvQueue::new`](crate::SharedRecvQueue::new) and
//! [`CompletionQueue::new`](crate::CompletionQueue::new).
//!
//! Choices (see each item for the source):
//! - CQE version 0 ([`CQE_VERSION`]): CQEs name the QP by number and, for
//!   SRQ receives, the SRQ by number, which is how [`WorkQueues`] resolves
//!   them; user indexes are then the kernel's default `0xffffff`.
//! - Static bfregs only: the request asks for `MLX5_LIB_CAP_4K_UAR` but not
//!   `MLX5_LIB_CAP_DYN_UAR`, so the kernel allocates the bfregs at
//!   GET_CONTEXT, picks one for every QP itself and reports it in the
//!   CREATE_QP response, and every CQ rings the first UAR page.
//!
//! One file per object, as the kernel's commands are: `context.rs` (the
//! GET_CONTEXT request, the UAR pages and bfregs its answer describes),
//! `qp.rs`, `cq.rs` and `srq.rs` (each object's sizes and CREATE udata).
//! This file holds what they share: [`DeviceLimits`], [`SizeError`], the
//! CQE version and the user index it implies. Everything is re-exported
//! here (`provider_mlx5::setup::qp_layout`, ...).
//!
//! [`WorkQueues`]: crate::WorkQueues

mod context;
mod cq;
mod qp;
mod srq;

pub use context::{
    uar_layout, ucontext_request, BfregLocation, UarLayout, BFREGS_PER_UAR, BF_OFFSET, MAX_UARS,
    NON_FP_BFREGS_PER_UAR,
};
pub use cq::{cq_layout, create_cq_udata, CqLayout};
pub use qp::{create_qp_udata, qp_layout, QpLayout, QpRequest};
pub use srq::{create_srq_udata, srq_layout, SrqLayout};

use crate::seg::DataSeg;
use core::fmt;
use core::mem::size_of;
use uverbs_abi::mlx5::Mlx5IbAllocUcontextResp;

/// The CQE version this crate asks for (`max_cqe_version` of GET_CONTEXT).
///
/// Version 0 because the completion path resolves a CQE by its QP number
/// and, for SRQ receives, by the SRQ number in `srqn_uidx`; with version 1
/// that field carries a user index instead (rdma-core asks for 1 and keeps
/// a uidx table). The kernel answers `min(device cqe_version,
/// max_cqe_version)` (`mlx5_ib_alloc_ucontext`), so 0 is granted by every
/// kernel and device, and then wants uidx `0xffffff` in CREATE_QP/SRQ
/// (`get_qp_user_index`, `get_srq_user_index`).
pub const CQE_VERSION: u8 = 0;

/// `MLX5_IB_DEFAULT_UIDX`: the user index the kernel requires with CQE
/// version 0 (and refuses with version 1).
pub const DEFAULT_UIDX: u32 = 0x00ff_ffff;

/// `MLX5_ADAPTER_PAGE_SIZE`: the device's page, the smallest UAR.
const ADAPTER_PAGE: usize = 4096;

/// Ring limit of this crate's work queues: SQ/RQ/SRQ indices are 16-bit
/// (`check_layout`, `check_ring`).
const MAX_WQ_ENTRIES: u64 = 1 << 15;
/// Largest receive stride this crate's RQ/SRQ take (`check_ring`).
const MAX_RECV_STRIDE: u64 = 1 << 12;

const DATA_SEG: u64 = size_of::<DataSeg>() as u64;

/// Why a request or a kernel answer cannot be laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeError {
    /// A requested capability above the device's.
    ExceedsDevice {
        /// The capability (`"max_send_sge"`, `"max_recv_wr"`, `"cqe"`, ...).
        what: &'static str,
        /// What was asked.
        given: u64,
        /// The device's limit.
        max: u64,
    },
    /// A WQE larger than the device's descriptor size allows
    /// (`max_sq_desc_sz` / `max_rq_desc_sz`).
    WqeTooLarge {
        /// `"send"`, `"receive"` or `"SRQ"`.
        queue: &'static str,
        /// Its size in bytes.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// A ring with more entries than the device or this crate takes.
    RingTooLarge {
        /// `"SQ"` (64-byte blocks), `"RQ"`, `"SRQ"` or `"CQ"`.
        queue: &'static str,
        /// Entries it would need.
        entries: u64,
        /// The limit.
        max: u64,
        /// Whose limit: a device field or this crate.
        limit: &'static str,
    },
    /// A capability this crate's WQE builder cannot honour (a send WQE is
    /// at most 63 octowords).
    CrateLimit {
        /// The capability.
        what: &'static str,
        /// What was asked.
        given: u64,
        /// The most this crate takes.
        max: u64,
    },
    /// Zero where at least one is needed.
    Zero {
        /// What was zero.
        what: &'static str,
    },
    /// A user index the kernel would refuse for CQE version 1 (it must be
    /// below `0xffffff`).
    BadUserIndex {
        /// The index.
        uidx: u32,
    },
    /// A CQE version other than 0 or 1.
    UnsupportedCqeVersion {
        /// The version.
        version: u8,
    },
    /// A page size that is not a power of two of at least 4096.
    BadPageSize {
        /// The size.
        page_size: usize,
    },
    /// The context has no static bfregs (`tot_bfregs` is 0: the kernel
    /// expects dynamic UARs, which need the ioctl interface).
    NoStaticBfregs,
    /// The GET_CONTEXT response describes UARs that cannot be mapped.
    BadUar {
        /// What is wrong.
        reason: &'static str,
    },
    /// A bfreg index that names no register of this context.
    BadBfreg {
        /// The index (`bfreg_index` of the CREATE_QP response).
        index: u32,
        /// What is wrong.
        reason: &'static str,
    },
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SizeError::ExceedsDevice { what, given, max } => {
                write!(f, "{what} {given} exceeds the device's {max}")
            }
            SizeError::WqeTooLarge { queue, bytes, max } => write!(
                f,
                "a {queue} WQE of {bytes} bytes exceeds the device's descriptor size {max}"
            ),
            SizeError::RingTooLarge {
                queue,
                entries,
                max,
                limit,
            } => write!(f, "{queue} of {entries} entries exceeds {limit} {max}"),
            SizeError::CrateLimit { what, given, max } => {
                write!(
                    f,
                    "{what} {given} exceeds the {max} this crate's queues take"
                )
            }
            SizeError::Zero { what } => write!(f, "{what} must be at least 1"),
            SizeError::BadUserIndex { uidx } => {
                write!(f, "user index {uidx:#x} is not below 0xffffff")
            }
            SizeError::UnsupportedCqeVersion { version } => {
                write!(f, "CQE version {version} is not 0 or 1")
            }
            SizeError::BadPageSize { page_size } => {
                write!(f, "page size {page_size} is not a power of two >= 4096")
            }
            SizeError::NoStaticBfregs => write!(
                f,
                "the context has no static bfregs (tot_bfregs is 0; dynamic UARs are not supported)"
            ),
            SizeError::BadUar { reason } => write!(f, "unusable UAR layout: {reason}"),
            SizeError::BadBfreg { index, reason } => write!(f, "bfreg {index}: {reason}"),
        }
    }
}

impl std::error::Error for SizeError {}

/// The device limits the sizing rules read: the GET_CONTEXT response's,
/// plus `max_sge` and `max_cqe` from QUERY_DEVICE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest send WQE in bytes (`max_wqe_sz_sq`).
    pub max_sq_desc_sz: u32,
    /// Largest receive WQE in bytes (`max_wqe_sz_rq`).
    pub max_rq_desc_sz: u32,
    /// Most 64-byte blocks in an SQ (`1 << log_max_qp_sz`).
    pub max_send_wqebb: u32,
    /// Most receive WQEs in an RQ (`1 << log_max_qp_sz`).
    pub max_recv_wr: u32,
    /// Most WQEs in an SRQ (`1 << log_max_srq_sz`).
    pub max_srq_recv_wr: u32,
    /// QUERY_DEVICE `max_sge`.
    pub max_sge: u32,
    /// QUERY_DEVICE `max_cqe`.
    pub max_cqe: u32,
}

impl DeviceLimits {
    /// The limits from a GET_CONTEXT response and QUERY_DEVICE's `max_sge`
    /// and `max_cqe` (rdma-core's `mlx5_set_context` keeps the same fields).
    pub fn from_context(resp: &Mlx5IbAllocUcontextResp, max_sge: u32, max_cqe: u32) -> Self {
        DeviceLimits {
            max_sq_desc_sz: resp.max_sq_desc_sz.into(),
            max_rq_desc_sz: resp.max_rq_desc_sz.into(),
            max_send_wqebb: resp.max_send_wqebb,
            max_recv_wr: resp.max_recv_wr,
            max_srq_recv_wr: resp.max_srq_recv_wr,
            max_sge,
            max_cqe,
        }
    }
}

fn check_page_size(page_size: usize) -> Result<(), SizeError> {
    if page_size.is_power_of_two() && page_size >= ADAPTER_PAGE {
        Ok(())
    } else {
        Err(SizeError::BadPageSize { page_size })
    }
}

fn exceeds(what: &'static str, given: u32, max: u32) -> Result<(), SizeError> {
    if given > max {
        return Err(SizeError::ExceedsDevice {
            what,
            given: given.into(),
            max: max.into(),
        });
    }
    Ok(())
}

fn align_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Refuses a ring of `entries` over `max` (whose owner `limit` names).
fn ring_limit(
    queue: &'static str,
    entries: u64,
    max: u64,
    limit: &'static str,
) -> Result<(), SizeError> {
    if entries > max {
        return Err(SizeError::RingTooLarge {
            queue,
            entries,
            max,
            limit,
        });
    }
    Ok(())
}

/// `len` rounded up to whole pages, as rdma-core allocates every queue
/// buffer (`mlx5_alloc_qp_buf`, `mlx5_alloc_cq_buf`, `mlx5_alloc_srq_buf`).
fn page_round(len: u64, page_size: usize, queue: &'static str) -> Result<usize, SizeError> {
    let rounded = align_up(len, page_size as u64);
    usize::try_from(rounded).map_err(|_| SizeError::RingTooLarge {
        queue,
        entries: len,
        max: usize::MAX as u64,
        limit: "the address space",
    })
}

/// The user index to send for `cqe_version`: the kernel's
/// `get_qp_user_index`/`get_srq_user_index` with a full-length udata demand
/// exactly `0xffffff` under version 0 and refuse it (or anything wider than
/// 24 bits) under version 1.
fn user_index(cqe_version: u8, uidx: u32) -> Result<u32, SizeError> {
    match cqe_version {
        0 => Ok(DEFAULT_UIDX),
        1 if uidx < DEFAULT_UIDX => Ok(uidx),
        1 => Err(SizeError::BadUserIndex { uidx }),
        version => Err(SizeError::UnsupportedCqeVersion { version }),
    }
}

#[cfg(test)]
mod tests {
    //! Fixtures the objects' tests share, and the tests of this file.
    use super::*;
    use core::ptr::NonNull;
    use zerocopy::FromZeros;

    pub(super) const PAGE: usize = 4096;

    /// Plausible ConnectX-5 values (not read from a device): 1 KiB send
    /// descriptors, 512-byte receive descriptors, 2^15-entry QPs, 2^23-entry
    /// SRQs, 30 SGEs, 2^22 - 1 CQEs.
    pub(super) fn dev() -> DeviceLimits {
        DeviceLimits {
            max_sq_desc_sz: 1024,
            max_rq_desc_sz: 512,
            max_send_wqebb: 1 << 15,
            max_recv_wr: 1 << 15,
            max_srq_recv_wr: 1 << 23,
            max_sge: 30,
            max_cqe: (1 << 22) - 1,
        }
    }

    /// A GET_CONTEXT response with the limits of [`dev`] and 512-byte
    /// BlueFlame registers.
    pub(super) fn resp(
        tot_bfregs: u32,
        log_uar_size: u32,
        uars_per_page: u32,
    ) -> Mlx5IbAllocUcontextResp {
        let mut r = Mlx5IbAllocUcontextResp::new_zeroed();
        r.tot_bfregs = tot_bfregs;
        r.bf_reg_size = 512;
        r.log_uar_size = log_uar_size;
        r.num_uars_per_page = uars_per_page;
        r.max_sq_desc_sz = 1024;
        r.max_rq_desc_sz = 512;
        r.max_send_wqebb = 1 << 15;
        r.max_recv_wr = 1 << 15;
        r.max_srq_recv_wr = 1 << 23;
        r
    }

    /// Page-aligned memory to build queues over.
    #[repr(C, align(4096))]
    #[derive(Clone)]
    pub(super) struct Page([u8; PAGE]);

    pub(super) fn pages(len: usize) -> Vec<Page> {
        vec![Page([0; PAGE]); len.div_ceil(PAGE).max(1)]
    }

    pub(super) fn base(p: &mut [Page], off: usize) -> NonNull<u8> {
        NonNull::new(p.as_mut_ptr().cast::<u8>().wrapping_add(off)).unwrap()
    }

    #[test]
    fn device_limits_from_context() {
        let d = DeviceLimits::from_context(&resp(16, 12, 1), 30, (1 << 22) - 1);
        assert_eq!(d, dev());
    }
}

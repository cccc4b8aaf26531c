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
//! [`WorkQueues`]: crate::WorkQueues

use crate::seg::{
    AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineSeg, RaddrSeg, SrqNextSeg, MAX_DS, OCTOWORD,
    WQEBB,
};
use crate::sq::SqConfig;
use crate::wqe::{self, Limits};
use crate::QpType;
use core::fmt;
use core::mem::size_of;
use uverbs_abi::mlx5::{
    mlx5_mmap_offset, Mlx5IbAllocUcontextReqV2, Mlx5IbAllocUcontextResp, Mlx5IbCreateCq,
    Mlx5IbCreateQp, Mlx5IbCreateQpDciStreams, Mlx5IbCreateSrq, Mlx5IbMmapCmd, Mlx5LibCaps,
};

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

/// `MLX5_BF_OFFSET`: the first BlueFlame register's offset in a UAR.
pub const BF_OFFSET: usize = 0x800;

/// `MLX5_NUM_NON_FP_BFREGS_PER_UAR`: bfregs per UAR the kernel hands out.
pub const NON_FP_BFREGS_PER_UAR: u32 = 2;

/// `NUM_BFREGS_PER_UAR`: bfregs per UAR in the numbering of CREATE_QP's
/// `bfreg_index` (the kernel's `adjust_bfregn`: two more "fast path" ones
/// per UAR are never handed to a user QP).
pub const BFREGS_PER_UAR: u32 = 4;

/// `MLX5_MAX_UARS`: most static UAR pages a context can have.
pub const MAX_UARS: u32 = 1 << 8;

/// `MLX5_ADAPTER_PAGE_SIZE`: the device's page, the smallest UAR.
const ADAPTER_PAGE: usize = 4096;

/// `MLX5_DEF_TOT_UUARS`, `MLX5_MED_BFREGS_TSHOLD` and the default of
/// `MLX5_NUM_LOW_LAT_UUARS` (rdma-core `mlx5-abi.h`, `get_num_low_lat_uuars`).
const DEF_TOT_BFREGS: u32 = 8 * NON_FP_BFREGS_PER_UAR;
const MED_BFREGS_THRESHOLD: u32 = 12;
const DEF_LOW_LAT_BFREGS: u32 = 4;

/// Ring limits of this crate's queues: SQ/RQ/SRQ indices are 16-bit
/// (`check_layout`, `check_ring`), CQs at most 2^22 entries.
const MAX_WQ_ENTRIES: u64 = 1 << 15;
const MAX_CQ_ENTRIES: u64 = 1 << 22;
/// rdma-core's own CQ limit (`create_cq`: `ncqe > 1 << 24`).
const RDMA_CORE_MAX_CQ_ENTRIES: u64 = 1 << 24;
/// Largest receive stride this crate's RQ/SRQ take (`check_ring`).
const MAX_RECV_STRIDE: u64 = 1 << 12;

const DATA_SEG: u64 = size_of::<DataSeg>() as u64;
const CTRL_SEG: u64 = size_of::<CtrlSeg>() as u64;
/// `struct mlx5_wqe_inl_data_seg`: the 4-byte inline header.
const INLINE_HDR: u64 = size_of::<InlineSeg>() as u64;
/// `struct mlx5_wqe_umr_ctrl_seg` and `struct mlx5_wqe_mkey_context_seg`
/// (`mlx5dv.h`): segments of memory-window and UMR WQEs, which this crate
/// never writes but rdma-core reserves room for in every RC/UC WQE.
const UMR_CTRL_SEG: u64 = 48;
const MKEY_CONTEXT_SEG: u64 = 64;
/// `max(sizeof(struct mlx5_wqe_umr_klm_seg), 64)` in `_sq_overhead`.
const UMR_KLM_ROOM: u64 = 64;

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

/// `len` rounded up to whole pages, as rdma-core allocates every queue
/// buffer (`mlx5_alloc_qp_buf`, `mlx5_alloc_cq_buf`, `mlx5_alloc_srq_buf`).
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

fn page_round(len: u64, page_size: usize, queue: &'static str) -> Result<usize, SizeError> {
    let rounded = align_up(len, page_size as u64);
    usize::try_from(rounded).map_err(|_| SizeError::RingTooLarge {
        queue,
        entries: len,
        max: usize::MAX as u64,
        limit: "the address space",
    })
}

// ---------------------------------------------------------------------------
// Context and UARs
// ---------------------------------------------------------------------------

/// The GET_CONTEXT driver request.
///
/// Bfreg counts are rdma-core's defaults (`get_total_uuars`,
/// `get_num_low_lat_uuars`): 16 bfregs, or one page's worth when a page
/// holds more (`page_size / 4096 * 2`), and `max(4, total - 12)` of them
/// low-latency (dedicated to one QP each by the kernel's `alloc_bfreg`).
///
/// Where rdma-core differs: `max_cqe_version` is [`CQE_VERSION`] (0, not
/// 1); `lib_caps` is `MLX5_LIB_CAP_4K_UAR` without `MLX5_LIB_CAP_DYN_UAR`,
/// because with DYN_UAR the kernel allocates no static bfregs
/// (`tot_bfregs` 0) and QPs and CQs then need UARs from the
/// `MLX5_IB_METHOD_UAR_OBJ_ALLOC` ioctl; `flags` has no
/// `MLX5_IB_ALLOC_UCTX_DEVX` (rdma-core tries it and retries without; DEVX
/// is not used here and needs `CAP_NET_RAW`).
pub fn ucontext_request(page_size: usize) -> Mlx5IbAllocUcontextReqV2 {
    let per_page = (page_size / ADAPTER_PAGE) as u32 * NON_FP_BFREGS_PER_UAR;
    let total = DEF_TOT_BFREGS
        .max(per_page)
        .next_multiple_of(NON_FP_BFREGS_PER_UAR)
        .min(MAX_UARS * NON_FP_BFREGS_PER_UAR);
    let low_latency = DEF_LOW_LAT_BFREGS.max(total.saturating_sub(MED_BFREGS_THRESHOLD));
    Mlx5IbAllocUcontextReqV2 {
        total_num_bfregs: total,
        num_low_latency_bfregs: low_latency,
        flags: 0,
        comp_mask: 0,
        max_cqe_version: CQE_VERSION,
        reserved0: 0,
        reserved1: 0,
        reserved2: 0,
        lib_caps: Mlx5LibCaps::UAR_4K.bits(),
    }
}

/// The static UAR pages of a context and the bfregs in them.
///
/// Page `i` (`0..pages`) is mapped with `mmap(page_size, offset =
/// mmap_offset(i))`, write-combining (`MLX5_IB_MMAP_REGULAR_PAGE`, the
/// kernel's best effort). It holds `uars_per_page` UARs of `uar_size`
/// bytes, each with two bfregs at `0x800` and `0x800 + bf_reg_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UarLayout {
    /// System pages to map.
    pub pages: usize,
    /// UARs per system page.
    pub uars_per_page: u32,
    /// Bytes per UAR.
    pub uar_size: usize,
    /// Static bfregs (`tot_bfregs`; two per UAR).
    pub tot_bfregs: u32,
    /// `bf_reg_size`: both halves of a BlueFlame register; 0 when the
    /// kernel found no write-combining.
    pub bf_reg_size: u32,
    /// The first bfreg index (four per UAR) of the low-latency class,
    /// which the kernel gives each to one QP alone (`alloc_high_class_bfreg`);
    /// the medium class below it is shared between QPs
    /// (`alloc_med_class_bfreg`). rdma-core's `need_uuar_lock` draws the
    /// same line: `(total - low_latency) * 2`.
    pub first_dedicated: u32,
}

/// Where a QP's doorbell/BlueFlame register is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfregLocation {
    /// Index into the [`UarLayout`]'s pages.
    pub page: usize,
    /// Byte offset of the register in that page.
    pub offset: usize,
    /// Whether BlueFlame copies may be used: only on a register the QP has
    /// to itself (the low-latency class), and with write-combining
    /// (`bf_reg_size` != 0). rdma-core also copies to shared medium-class
    /// registers, under a spinlock; rverbs takes no lock on the data path,
    /// so there it rings with the single 8-byte doorbell store only, which
    /// any number of QPs may share. Never bfreg 0 (no BlueFlame buffer).
    pub blueflame: bool,
    /// Size of each alternating half (`bf_reg_size / 2`; 0 for bfreg 0,
    /// whose doorbell offset then never toggles, as in rdma-core).
    pub bf_size: u32,
}

/// The UAR pages a GET_CONTEXT response describes, for the request it
/// answers.
///
/// Rules (rdma-core `mlx5_set_context` / `adjust_uar_info`; kernel
/// `calc_total_bfregs`, `get_uars_per_sys_page`): a response with
/// `log_uar_size` and `num_uars_per_page` both 0 is from a kernel that
/// predates 4K UARs (one UAR per page); otherwise a page holds
/// `num_uars_per_page` UARs of `1 << log_uar_size` bytes, if the request
/// claimed `MLX5_LIB_CAP_4K_UAR` (without it the kernel uses one UAR per
/// page whatever it reports). There are `tot_bfregs / (2 * uars_per_page)`
/// pages.
pub fn uar_layout(
    req: &Mlx5IbAllocUcontextReqV2,
    resp: &Mlx5IbAllocUcontextResp,
    page_size: usize,
) -> Result<UarLayout, SizeError> {
    check_page_size(page_size)?;
    if resp.tot_bfregs == 0 {
        return Err(SizeError::NoStaticBfregs);
    }
    let (uar_size, reported) = if resp.log_uar_size == 0 && resp.num_uars_per_page == 0 {
        (page_size, 1)
    } else {
        let size = 1usize
            .checked_shl(resp.log_uar_size)
            .ok_or(SizeError::BadUar {
                reason: "log_uar_size is out of range",
            })?;
        (size, resp.num_uars_per_page)
    };
    let lib_4k = req.lib_caps & Mlx5LibCaps::UAR_4K.bits() != 0;
    let uars_per_page = if lib_4k { reported } else { 1 };
    if uars_per_page == 0 {
        return Err(SizeError::BadUar {
            reason: "num_uars_per_page is 0",
        });
    }
    if uar_size < ADAPTER_PAGE {
        return Err(SizeError::BadUar {
            reason: "a UAR is smaller than 4 KiB",
        });
    }
    if (uars_per_page as u64).saturating_mul(uar_size as u64) > page_size as u64 {
        return Err(SizeError::BadUar {
            reason: "the UARs of a page do not fit in it",
        });
    }
    let bfregs_per_page = uars_per_page as u64 * NON_FP_BFREGS_PER_UAR as u64;
    if resp.tot_bfregs as u64 % bfregs_per_page != 0 {
        return Err(SizeError::BadUar {
            reason: "tot_bfregs is not a whole number of pages",
        });
    }
    let pages = resp.tot_bfregs as u64 / bfregs_per_page;
    if pages > MAX_UARS as u64 {
        return Err(SizeError::BadUar {
            reason: "more than 256 static UAR pages",
        });
    }
    // Both bfregs, each two halves of bf_reg_size / 2, lie in the UAR's
    // first 4 KiB after 0x800; halves must be whole 64-byte blocks for the
    // BlueFlame copy.
    let bf = resp.bf_reg_size as usize;
    if bf % (2 * WQEBB) != 0 || BF_OFFSET + 2 * bf > ADAPTER_PAGE {
        return Err(SizeError::BadUar {
            reason: "bf_reg_size is not a multiple of 128 that fits two registers after 0x800",
        });
    }
    Ok(UarLayout {
        pages: pages as usize,
        uars_per_page,
        uar_size,
        tot_bfregs: resp.tot_bfregs,
        bf_reg_size: resp.bf_reg_size,
        first_dedicated: first_dedicated(resp.tot_bfregs, req.num_low_latency_bfregs),
    })
}

/// The first low-latency bfreg in the four-per-UAR numbering of
/// CREATE_QP's `bfreg_index`, from the kernel's own total (`tot_bfregs`,
/// two per UAR; `first_hi_bfreg` is `total - low_latency` there) mapped
/// through `adjust_bfregn` (UAR `n / 2`, register `n % 2`).
fn first_dedicated(tot_bfregs: u32, low_latency: u32) -> u32 {
    let n = tot_bfregs.saturating_sub(low_latency);
    n / NON_FP_BFREGS_PER_UAR * BFREGS_PER_UAR + n % NON_FP_BFREGS_PER_UAR
}

impl UarLayout {
    /// Where the bfreg a CREATE_QP response names (`bfreg_index`) is.
    ///
    /// The index counts four per UAR (kernel `adjust_bfregn`): UAR
    /// `index / 4` (page `uar / uars_per_page`, UAR `uar % uars_per_page`
    /// in it) and register `index % 4` at `0x800 + k * bf_reg_size`
    /// (rdma-core `mlx5_set_context`). Only `k` 0 and 1 are ever handed to
    /// user QPs. BlueFlame: every bfreg but 0 (rdma-core gives bfreg 0
    /// `buf_size` 0 and `mlx5_post_send` tests `bf->uuarn`), and only with
    /// write-combining.
    pub fn bfreg(&self, bfreg_index: u32) -> Result<BfregLocation, SizeError> {
        let k = bfreg_index % BFREGS_PER_UAR;
        if k >= NON_FP_BFREGS_PER_UAR {
            return Err(SizeError::BadBfreg {
                index: bfreg_index,
                reason: "a fast-path register the kernel never gives a user QP",
            });
        }
        let uar = bfreg_index / BFREGS_PER_UAR;
        let page = (uar / self.uars_per_page) as usize;
        if page >= self.pages {
            return Err(SizeError::BadBfreg {
                index: bfreg_index,
                reason: "beyond the context's static UAR pages",
            });
        }
        let in_page = (uar % self.uars_per_page) as usize;
        let offset = in_page * self.uar_size + BF_OFFSET + k as usize * self.bf_reg_size as usize;
        let bf_size = if bfreg_index == 0 {
            0
        } else {
            self.bf_reg_size / 2
        };
        Ok(BfregLocation {
            page,
            offset,
            blueflame: bf_size != 0 && bfreg_index >= self.first_dedicated,
            bf_size,
        })
    }

    /// The page whose first UAR every CQ's doorbell (at `+0x20`) is in:
    /// page 0. The kernel's `create_cq_user` puts the CQ on
    /// `bfregi.sys_pages[0]` unless `MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX`
    /// names another, and rdma-core rings `uar[0]` when it has no dynamic
    /// non-cached UAR (`mlx5_set_context`: `cq_uar_reg`).
    pub fn cq_doorbell_page(&self) -> usize {
        0
    }

    /// The `mmap()` offset of page `page` (`< self.pages`): the kernel's
    /// `MLX5_IB_MMAP_REGULAR_PAGE` command maps static UAR page `index`
    /// (`uar_mmap`), write-combining when it can.
    pub fn mmap_offset(&self, page: usize, page_size: u64) -> u64 {
        debug_assert!(page < self.pages);
        mlx5_mmap_offset(Mlx5IbMmapCmd::REGULAR_PAGE, page as u16, page_size)
    }
}

// ---------------------------------------------------------------------------
// QPs
// ---------------------------------------------------------------------------

/// What a QP is created with (`ibv_qp_init_attr`'s caps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpRequest {
    /// The transport.
    pub qp_type: QpType,
    /// Send requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive requests outstanding at once (ignored with an SRQ).
    pub max_recv_wr: u32,
    /// SGEs per send request.
    pub max_send_sge: u32,
    /// SGEs per receive request (ignored with an SRQ).
    pub max_recv_sge: u32,
    /// Inline bytes per send request.
    pub max_inline_data: u32,
    /// The QP receives through an SRQ and has no RQ.
    pub srq: bool,
    /// Every send request completes with a CQE.
    pub sq_sig_all: bool,
}

/// A QP's work queue buffer: RQ first, then SQ (the kernel's
/// `create_user_qp`: `sq.offset = rq.wqe_cnt << rq.wqe_shift`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpLayout {
    /// The transport.
    pub qp_type: QpType,
    /// SQ size in 64-byte basic blocks, a power of two (CREATE_QP's
    /// `sq_wqe_count`); 0 without send requests.
    pub sq_wqe_cnt: u32,
    /// SGEs per send request granted (what was asked, as rdma-core).
    pub sq_max_sge: u32,
    /// Inline bytes per send request granted.
    pub max_inline: u32,
    /// Send requests granted (rdma-core's `sq.max_post`).
    pub max_send_wr: u32,
    /// RQ slots, a power of two; 0 with an SRQ or no receives.
    pub rq_wqe_cnt: u32,
    /// log2 of the RQ stride; 0 without an RQ.
    pub rq_wqe_shift: u32,
    /// SGEs per receive granted (the whole stride).
    pub rq_max_sge: u32,
    /// Receive requests granted.
    pub max_recv_wr: u32,
    /// Byte offset of the RQ in the buffer (always 0).
    pub rq_offset: usize,
    /// Byte offset of the SQ in the buffer (the RQ's size).
    pub sq_offset: usize,
    /// Buffer length: RQ plus SQ, rounded up to the page size. Allocate it
    /// page-aligned and zeroed.
    pub buf_len: usize,
}

impl QpLayout {
    /// Bytes of the SQ ring (`sq_wqe_cnt * 64`).
    pub fn sq_len(&self) -> usize {
        self.sq_wqe_cnt as usize * WQEBB
    }

    /// Bytes of the RQ ring.
    pub fn rq_len(&self) -> usize {
        (self.rq_wqe_cnt as usize) << self.rq_wqe_shift
    }

    /// The [`SqConfig`] for [`SendQueue::new`](crate::SendQueue::new) over
    /// this layout's SQ, ringing the bfreg at `bf`. `prefer_blueflame` is
    /// rdma-core's default (`MLX5_POST_SEND_PREFER_BF` unset: on).
    pub fn sq_config(&self, qpn: u32, bf: &BfregLocation, sig_all: bool) -> SqConfig {
        SqConfig {
            qpn,
            qp_type: self.qp_type,
            wqe_cnt: self.sq_wqe_cnt,
            max_sge: self.sq_max_sge,
            max_inline: self.max_inline,
            bf_size: bf.bf_size,
            blueflame: bf.blueflame,
            prefer_blueflame: true,
            sig_all,
        }
    }
}

/// Bytes every send WQE reserves before its payload: rdma-core's
/// `_sq_overhead` with the default operations of `sq_overhead`. RC and UC
/// include BIND_MW and LOCAL_INV, so the UMR form (control + UMR control +
/// mkey context + 64) dominates: 192 bytes. UD: control + datagram = 64.
fn sq_overhead(qp_type: QpType) -> u64 {
    match qp_type {
        QpType::Rc | QpType::Uc => {
            let rdma = CTRL_SEG + size_of::<RaddrSeg>() as u64;
            let atomic = rdma + size_of::<AtomicSeg>() as u64;
            let mw = CTRL_SEG + UMR_CTRL_SEG + MKEY_CONTEXT_SEG + UMR_KLM_ROOM;
            CTRL_SEG.max(rdma).max(atomic).max(mw)
        }
        QpType::Ud => CTRL_SEG + size_of::<DatagramSeg>() as u64,
    }
}

struct SqSize {
    wqe_cnt: u32,
    max_sge: u32,
    max_inline: u32,
    max_post: u32,
}

/// rdma-core's `mlx5_calc_send_wqe` and `mlx5_calc_sq_size`, then this
/// crate's WQE builder limit.
fn sq_size(req: &QpRequest, dev: &DeviceLimits) -> Result<SqSize, SizeError> {
    if req.max_send_wr == 0 {
        return Ok(SqSize {
            wqe_cnt: 0,
            max_sge: 0,
            max_inline: 0,
            max_post: 0,
        });
    }
    let desc = u64::from(dev.max_sq_desc_sz);
    let overhead = sq_overhead(req.qp_type);
    // The inline form: overhead, the 4-byte header and the data, padded to
    // an octoword.
    let inline = if req.max_inline_data > 0 {
        overhead + align_up(INLINE_HDR + u64::from(req.max_inline_data), OCTOWORD as u64)
    } else {
        0
    };
    let gather = overhead + u64::from(req.max_send_sge) * DATA_SEG;
    let tot = gather.max(inline);
    if tot > desc {
        return Err(SizeError::WqeTooLarge {
            queue: "send",
            bytes: tot,
            max: desc,
        });
    }
    // Every WQE is sized for the largest request: whole basic blocks.
    let wqe_size = align_up(tot, WQEBB as u64);
    if wqe_size > desc {
        return Err(SizeError::WqeTooLarge {
            queue: "send",
            bytes: wqe_size,
            max: desc,
        });
    }
    // This crate's builder writes at most MAX_DS octowords: the control
    // and transport segments, then the payload.
    let fixed = u64::from(wqe::max_ds(&Limits {
        qp_type: req.qp_type,
        max_sge: 0,
        max_inline: 0,
    }));
    let payload_ds = u64::from(MAX_DS) - fixed;
    if u64::from(req.max_send_sge) > payload_ds {
        return Err(SizeError::CrateLimit {
            what: "max_send_sge",
            given: req.max_send_sge.into(),
            max: payload_ds,
        });
    }
    let inline_cap = payload_ds * OCTOWORD as u64 - INLINE_HDR;
    if u64::from(req.max_inline_data) > inline_cap {
        return Err(SizeError::CrateLimit {
            what: "max_inline_data",
            given: req.max_inline_data.into(),
            max: inline_cap,
        });
    }
    // rdma-core grants whatever inline fits the WQE size after the header,
    // capped here to what the builder can write. With no SGE and no inline
    // an RC/UC WQE is exactly the 192-byte overhead, with no room even for
    // the header: rdma-core's unsigned subtraction then wraps to ~4 GiB;
    // here it is 0.
    let max_inline = wqe_size
        .saturating_sub(overhead + INLINE_HDR)
        .min(inline_cap);
    let wq_size = (u64::from(req.max_send_wr) * wqe_size).next_power_of_two();
    let wqe_cnt = wq_size / WQEBB as u64;
    ring_limit(
        "SQ",
        wqe_cnt,
        dev.max_send_wqebb.into(),
        "the device's max_send_wqebb",
    )?;
    ring_limit("SQ", wqe_cnt, MAX_WQ_ENTRIES, "this crate's")?;
    Ok(SqSize {
        wqe_cnt: wqe_cnt as u32,
        max_sge: req.max_send_sge,
        max_inline: max_inline as u32,
        max_post: (wq_size / wqe_size) as u32,
    })
}

struct RqSize {
    wqe_cnt: u32,
    wqe_shift: u32,
    max_sge: u32,
    max_post: u32,
}

/// rdma-core's `mlx5_calc_rcv_wqe` and `mlx5_calc_rq_size` (no WQE
/// signatures, no out-of-order RQ), which the kernel's `set_rq_size` takes
/// as given from `rq_wqe_count`/`rq_wqe_shift`.
fn rq_size(req: &QpRequest, dev: &DeviceLimits) -> Result<RqSize, SizeError> {
    if req.srq || req.max_recv_wr == 0 {
        return Ok(RqSize {
            wqe_cnt: 0,
            wqe_shift: 0,
            max_sge: 0,
            max_post: 0,
        });
    }
    exceeds("max_recv_wr", req.max_recv_wr, dev.max_recv_wr)?;
    let desc = u64::from(dev.max_rq_desc_sz);
    let size = u64::from(req.max_recv_sge.max(1)) * DATA_SEG;
    if size > desc {
        return Err(SizeError::WqeTooLarge {
            queue: "receive",
            bytes: size,
            max: desc,
        });
    }
    let wqe_size = size.next_power_of_two();
    if wqe_size > desc {
        return Err(SizeError::WqeTooLarge {
            queue: "receive",
            bytes: wqe_size,
            max: desc,
        });
    }
    if wqe_size > MAX_RECV_STRIDE {
        return Err(SizeError::CrateLimit {
            what: "receive WQE stride",
            given: wqe_size,
            max: MAX_RECV_STRIDE,
        });
    }
    // At least one basic block of receive WQEs.
    let wq_size = (u64::from(req.max_recv_wr).next_power_of_two() * wqe_size).max(WQEBB as u64);
    let wqe_cnt = wq_size / wqe_size;
    ring_limit("RQ", wqe_cnt, MAX_WQ_ENTRIES, "this crate's")?;
    Ok(RqSize {
        wqe_cnt: wqe_cnt as u32,
        wqe_shift: wqe_size.trailing_zeros(),
        // The whole stride takes scatter entries (`scat_spc / 16`).
        max_sge: (wqe_size / DATA_SEG) as u32,
        max_post: wqe_cnt as u32,
    })
}

/// Sizes a QP's buffer the way rdma-core's `mlx5_calc_wq_size` does
/// (`mlx5_calc_send_wqe`/`mlx5_calc_sq_size` for the SQ,
/// `mlx5_calc_rcv_wqe`/`mlx5_calc_rq_size` for the RQ), checking the
/// request against `dev` and this crate's queues.
///
/// Where this differs from rdma-core: the granted `max_inline` is capped
/// at what this crate's 63-octoword WQE builder writes (a request above
/// that is refused), and is 0 rather than a wrapped-around value when the
/// WQE has no room for it; rings above 2^15 entries are refused.
///
/// The generic CREATE_QP command should carry the granted `max_send_wr`,
/// `max_recv_wr` (0 when `rq_wqe_cnt` is 0, so that the kernel's
/// `qp_has_rq` agrees), SGE counts and `max_inline`.
pub fn qp_layout(
    req: &QpRequest,
    dev: &DeviceLimits,
    page_size: usize,
) -> Result<QpLayout, SizeError> {
    check_page_size(page_size)?;
    exceeds("max_send_sge", req.max_send_sge, dev.max_sge)?;
    if !req.srq {
        exceeds("max_recv_sge", req.max_recv_sge, dev.max_sge)?;
    }
    let sq = sq_size(req, dev)?;
    let rq = rq_size(req, dev)?;
    let rq_len = u64::from(rq.wqe_cnt) << rq.wqe_shift;
    let sq_len = u64::from(sq.wqe_cnt) * WQEBB as u64;
    let buf_len = page_round(rq_len + sq_len, page_size, "QP buffer")?;
    Ok(QpLayout {
        qp_type: req.qp_type,
        sq_wqe_cnt: sq.wqe_cnt,
        sq_max_sge: sq.max_sge,
        max_inline: sq.max_inline,
        max_send_wr: sq.max_post,
        rq_wqe_cnt: rq.wqe_cnt,
        rq_wqe_shift: rq.wqe_shift,
        rq_max_sge: rq.max_sge,
        max_recv_wr: rq.max_post,
        rq_offset: 0,
        sq_offset: rq_len as usize,
        buf_len,
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

/// The CREATE_QP driver udata for `l`, with the QP buffer at `buf_addr`
/// (page-aligned, `l.buf_len` bytes) and its `[RCV, SND]` doorbell record
/// at `db_addr`.
///
/// `flags` is 0: no `MLX5_QP_FLAG_SCATTER_CQE` (rdma-core's default, which
/// this crate's completion path does not handle), no signatures, and no
/// `BFREG_INDEX`/`UAR_PAGE_INDEX`, so the kernel picks a static bfreg
/// (`create_user_qp` → `alloc_bfreg`: a free low-latency one, else the
/// least-used medium one, else bfreg 0) and reports it as the response's
/// `bfreg_index`, for [`UarLayout::bfreg`]. `uidx` is used only with CQE
/// version 1; with version 0 the kernel's required `0xffffff` is sent.
pub fn create_qp_udata(
    l: &QpLayout,
    buf_addr: u64,
    db_addr: u64,
    cqe_version: u8,
    uidx: u32,
) -> Result<Mlx5IbCreateQp, SizeError> {
    Ok(Mlx5IbCreateQp {
        buf_addr,
        db_addr,
        sq_wqe_count: l.sq_wqe_cnt,
        rq_wqe_count: l.rq_wqe_cnt,
        rq_wqe_shift: l.rq_wqe_shift,
        flags: 0,
        uidx: user_index(cqe_version, uidx)?,
        bfreg_index: 0,
        sq_buf_addr: 0,
        ece_options: 0,
        dci_streams: Mlx5IbCreateQpDciStreams {
            log_num_concurent: 0,
            log_num_errored: 0,
        },
        reserved: 0,
    })
}

// ---------------------------------------------------------------------------
// CQs
// ---------------------------------------------------------------------------

/// A CQ's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqLayout {
    /// Entries in the ring, a power of two.
    pub ncqe: u32,
    /// Bytes per CQE (64).
    pub cqe_size: usize,
    /// Buffer length, rounded up to the page size; allocate it
    /// page-aligned.
    pub buf_len: usize,
    /// What `ibv_create_cq` reports: `ncqe - 1`. Also the `cqe` to put in
    /// the generic CREATE_CQ command, so that the kernel's
    /// `roundup_pow_of_two(cqe + 1)` gives back `ncqe`.
    pub granted_cqe: u32,
}

/// Sizes a CQ of at least `cqe` entries: rdma-core's `create_cq`
/// (`ncqe = roundup_pow_of_two(cqe + 1)`, at most 2^24, 64-byte CQEs
/// unless `MLX5_CQE_SIZE` says otherwise) and `mlx5_alloc_cq_buf` (whole
/// pages).
pub fn cq_layout(cqe: u32, dev: &DeviceLimits, page_size: usize) -> Result<CqLayout, SizeError> {
    check_page_size(page_size)?;
    if cqe == 0 {
        return Err(SizeError::Zero { what: "cqe" });
    }
    exceeds("cqe", cqe, dev.max_cqe)?;
    let ncqe = (u64::from(cqe) + 1).next_power_of_two();
    ring_limit("CQ", ncqe, RDMA_CORE_MAX_CQ_ENTRIES, "rdma-core's")?;
    ring_limit("CQ", ncqe, MAX_CQ_ENTRIES, "this crate's")?;
    let cqe_size = 64;
    Ok(CqLayout {
        ncqe: ncqe as u32,
        cqe_size,
        buf_len: page_round(ncqe * cqe_size as u64, page_size, "CQ buffer")?,
        granted_cqe: ncqe as u32 - 1,
    })
}

/// The CREATE_CQ driver udata: the CQE buffer at `buf_addr`
/// (page-aligned) and the `[SET_CI, ARM]` doorbell record at `db_addr`.
/// No compression and no flags: without `UAR_PAGE_INDEX` the kernel's
/// `create_cq_user` puts the CQ on the context's first UAR page
/// ([`UarLayout::cq_doorbell_page`]).
pub fn create_cq_udata(l: &CqLayout, buf_addr: u64, db_addr: u64) -> Mlx5IbCreateCq {
    Mlx5IbCreateCq {
        buf_addr,
        db_addr,
        cqe_size: l.cqe_size as u32,
        cqe_comp_en: 0,
        cqe_comp_res_format: 0,
        flags: 0,
        uar_page_index: 0,
        reserved0: 0,
        reserved1: 0,
    }
}

// ---------------------------------------------------------------------------
// SRQs
// ---------------------------------------------------------------------------

/// An SRQ's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqLayout {
    /// WQEs in the ring, a power of two (at least 2).
    pub wqe_cnt: u32,
    /// log2 of the WQE stride (at least 5).
    pub wqe_shift: u32,
    /// SGEs per receive granted (the stride less the next segment).
    pub max_sge: u32,
    /// Receives outstanding at once granted (`wqe_cnt - 1`: one WQE always
    /// stays in the free list). Also the generic CREATE_SRQ's `max_wr`,
    /// with `max_sge`, so that the kernel's `mlx5_ib_create_srq` derives
    /// the same ring.
    pub max_wr: u32,
    /// Buffer length, rounded up to the page size.
    pub buf_len: usize,
}

/// Sizes an SRQ: rdma-core's `mlx5_create_srq` checks and
/// `mlx5_alloc_srq_buf` without the ODP wait queue (which this crate does
/// not keep): stride `roundup_pow_of_two(max(32, 16 + 16 * max_sge))`,
/// `roundup_pow_of_two(max_wr + 1)` WQEs.
pub fn srq_layout(
    max_wr: u32,
    max_sge: u32,
    dev: &DeviceLimits,
    page_size: usize,
) -> Result<SrqLayout, SizeError> {
    check_page_size(page_size)?;
    if max_wr == 0 {
        return Err(SizeError::Zero { what: "SRQ max_wr" });
    }
    exceeds("max_wr", max_wr, dev.max_srq_recv_wr)?;
    exceeds("max_sge", max_sge, dev.max_sge)?;
    // rdma-core's first check ignores the next segment.
    let data = u64::from(max_sge) * DATA_SEG;
    if data > u64::from(dev.max_rq_desc_sz) {
        return Err(SizeError::WqeTooLarge {
            queue: "SRQ",
            bytes: data,
            max: dev.max_rq_desc_sz.into(),
        });
    }
    let next = size_of::<SrqNextSeg>() as u64;
    let stride = (next + data).max(32).next_power_of_two();
    // The rounded stride is what the kernel checks (its max_sge becomes
    // stride / 16 - 1, refused above max_rq_desc_sz / 16); rdma-core's
    // mlx5_alloc_srq_buf refuses it here too.
    if stride > u64::from(dev.max_rq_desc_sz) {
        return Err(SizeError::WqeTooLarge {
            queue: "SRQ",
            bytes: stride,
            max: dev.max_rq_desc_sz.into(),
        });
    }
    if stride > MAX_RECV_STRIDE {
        return Err(SizeError::CrateLimit {
            what: "SRQ WQE stride",
            given: stride,
            max: MAX_RECV_STRIDE,
        });
    }
    let wqe_cnt = (u64::from(max_wr) + 1).next_power_of_two();
    // The kernel refuses max_wr >= 1 << log_max_srq_sz, and gets
    // wqe_cnt - 1.
    ring_limit(
        "SRQ",
        wqe_cnt,
        dev.max_srq_recv_wr.into(),
        "the device's max_srq_recv_wr",
    )?;
    ring_limit("SRQ", wqe_cnt, MAX_WQ_ENTRIES, "this crate's")?;
    Ok(SrqLayout {
        wqe_cnt: wqe_cnt as u32,
        wqe_shift: stride.trailing_zeros(),
        max_sge: ((stride - next) / DATA_SEG) as u32,
        max_wr: wqe_cnt as u32 - 1,
        buf_len: page_round(wqe_cnt * stride, page_size, "SRQ buffer")?,
    })
}

/// The CREATE_SRQ driver udata: the ring at `buf_addr` (page-aligned) and
/// the one-word doorbell record at `db_addr`; no signature; the user index
/// as for [`create_qp_udata`] (kernel `create_srq_user` →
/// `get_srq_user_index`).
///
/// The udata carries no geometry: the kernel derives the ring from the
/// generic command's `max_wr` and `max_sge`, which must be `l.max_wr` and
/// `l.max_sge` (see [`SrqLayout::max_wr`]); `l` is taken so that a layout
/// is at hand when the udata is built.
pub fn create_srq_udata(
    _l: &SrqLayout,
    buf_addr: u64,
    db_addr: u64,
    cqe_version: u8,
    uidx: u32,
) -> Result<Mlx5IbCreateSrq, SizeError> {
    Ok(Mlx5IbCreateSrq {
        buf_addr,
        db_addr,
        flags: 0,
        reserved0: 0,
        uidx: user_index(cqe_version, uidx)?,
        reserved1: 0,
    })
}

#[cfg(test)]
#[allow(unsafe_code)] // queues built over test memory; each block says why it is sound
mod tests {
    use super::*;
    use crate::{CompletionQueue, CqConfig, LayoutError, RecvQueue, SendQueue, SharedRecvQueue};
    use core::ptr::NonNull;
    use proptest::prelude::*;
    use zerocopy::FromZeros;

    const PAGE: usize = 4096;

    /// Plausible ConnectX-5 values (not read from a device): 1 KiB send
    /// descriptors, 512-byte receive descriptors, 2^15-entry QPs, 2^23-entry
    /// SRQs, 30 SGEs, 2^22 - 1 CQEs.
    fn dev() -> DeviceLimits {
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

    fn rc(send_wr: u32, send_sge: u32, inline: u32, recv_wr: u32, recv_sge: u32) -> QpRequest {
        QpRequest {
            qp_type: QpType::Rc,
            max_send_wr: send_wr,
            max_recv_wr: recv_wr,
            max_send_sge: send_sge,
            max_recv_sge: recv_sge,
            max_inline_data: inline,
            srq: false,
            sq_sig_all: false,
        }
    }

    fn resp(tot_bfregs: u32, log_uar_size: u32, uars_per_page: u32) -> Mlx5IbAllocUcontextResp {
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

    #[test]
    fn segment_sizes_behind_the_overheads() {
        // _sq_overhead: RC/UC max(16, 16+16, 16+16+16, 16+48+64+64) = 192;
        // UD 16 + 48 = 64.
        assert_eq!(sq_overhead(QpType::Rc), 192);
        assert_eq!(sq_overhead(QpType::Uc), 192);
        assert_eq!(sq_overhead(QpType::Ud), 64);
        assert_eq!(INLINE_HDR, 4);
    }

    #[test]
    fn rc_send_sge_1_no_inline() {
        let l = qp_layout(&rc(128, 1, 0, 128, 1), &dev(), PAGE).unwrap();
        // WQE: 192 + 1 * 16 = 208 -> 256 bytes (4 blocks); inline granted
        // 256 - 192 - 4 = 60. SQ: 128 * 256 = 32768 bytes = 512 blocks,
        // 32768 / 256 = 128 requests.
        assert_eq!(l.sq_wqe_cnt, 512);
        assert_eq!(l.max_inline, 60);
        assert_eq!(l.max_send_wr, 128);
        assert_eq!(l.sq_max_sge, 1);
        // RQ: 1 SGE -> 16-byte stride, 128 slots = 2048 bytes.
        assert_eq!((l.rq_wqe_cnt, l.rq_wqe_shift, l.rq_max_sge), (128, 4, 1));
        assert_eq!(l.max_recv_wr, 128);
        // RQ first: SQ at 2048; 2048 + 32768 = 34816 -> 9 pages.
        assert_eq!((l.rq_offset, l.sq_offset), (0, 2048));
        assert_eq!(l.buf_len, 9 * PAGE);
    }

    #[test]
    fn rc_inline_64() {
        let l = qp_layout(&rc(128, 1, 64, 0, 0), &dev(), PAGE).unwrap();
        // Inline form: 192 + align16(4 + 64) = 192 + 80 = 272 > 208 ->
        // 320 bytes; inline granted 320 - 196 = 124. SQ: 128 * 320 = 40960
        // -> 65536 bytes = 1024 blocks, 65536 / 320 = 204 requests.
        assert_eq!(l.sq_wqe_cnt, 1024);
        assert_eq!(l.max_inline, 124);
        assert_eq!(l.max_send_wr, 204);
        // No receives: no RQ, the SQ starts the buffer.
        assert_eq!((l.rq_wqe_cnt, l.rq_wqe_shift, l.max_recv_wr), (0, 0, 0));
        assert_eq!(l.sq_offset, 0);
        assert_eq!(l.buf_len, 65536);
    }

    #[test]
    fn rc_inline_220() {
        let l = qp_layout(&rc(128, 1, 220, 64, 3), &dev(), PAGE).unwrap();
        // 192 + align16(224) = 416 -> 448 bytes; inline 448 - 196 = 252.
        // 128 * 448 = 57344 -> 65536 = 1024 blocks; 65536 / 448 = 146.
        assert_eq!(
            (l.sq_wqe_cnt, l.max_inline, l.max_send_wr),
            (1024, 252, 146)
        );
        // RQ: 3 SGEs = 48 -> 64-byte stride (4 SGEs), 64 slots = 4096.
        assert_eq!((l.rq_wqe_cnt, l.rq_wqe_shift, l.rq_max_sge), (64, 6, 4));
        assert_eq!(l.sq_offset, 4096);
        assert_eq!(l.buf_len, 4096 + 65536);
    }

    #[test]
    fn ud_and_srq() {
        let mut req = rc(128, 1, 0, 256, 1);
        req.qp_type = QpType::Ud;
        let l = qp_layout(&req, &dev(), PAGE).unwrap();
        // 64 + 16 = 80 -> 128 bytes; inline 128 - 68 = 60; 128 * 128 =
        // 16384 bytes = 256 blocks, 128 requests. RQ 256 * 16 = 4096.
        assert_eq!((l.sq_wqe_cnt, l.max_inline, l.max_send_wr), (256, 60, 128));
        assert_eq!((l.rq_wqe_cnt, l.sq_offset, l.buf_len), (256, 4096, 20480));

        let mut req = rc(64, 2, 0, 100, 4);
        req.srq = true;
        let l = qp_layout(&req, &dev(), PAGE).unwrap();
        // 192 + 32 = 224 -> 256; 64 * 256 = 16384 = 256 blocks. No RQ.
        assert_eq!((l.sq_wqe_cnt, l.max_send_wr), (256, 64));
        assert_eq!((l.rq_wqe_cnt, l.rq_max_sge, l.max_recv_wr), (0, 0, 0));
        assert_eq!((l.sq_offset, l.buf_len), (0, 16384));
    }

    #[test]
    fn rc_without_payload() {
        // 0 SGEs, no inline: 192 bytes, 3 blocks, no room for inline data
        // (rdma-core's size_t arithmetic would wrap to 2^32 - 4). 16 * 192
        // = 3072 -> 4096 bytes = 64 blocks, 4096 / 192 = 21 requests.
        let l = qp_layout(&rc(16, 0, 0, 0, 0), &dev(), PAGE).unwrap();
        assert_eq!((l.sq_wqe_cnt, l.max_send_wr, l.max_inline), (64, 21, 0));
        assert_eq!(build_qp(&l, 1), Ok(()));
    }

    #[test]
    fn small_rq_gets_one_basic_block() {
        // 1 receive of 1 SGE: 16 bytes, raised to 64 -> 4 slots.
        let l = qp_layout(&rc(1, 1, 0, 1, 1), &dev(), PAGE).unwrap();
        assert_eq!((l.rq_wqe_cnt, l.max_recv_wr), (4, 4));
        // The SQ: one 256-byte WQE, 4 blocks.
        assert_eq!((l.sq_wqe_cnt, l.max_send_wr, l.sq_offset), (4, 1, 64));
    }

    #[test]
    fn inline_trimmed_to_what_the_builder_writes() {
        let mut req = rc(16, 1, 900, 0, 0);
        req.qp_type = QpType::Ud;
        let l = qp_layout(&req, &dev(), PAGE).unwrap();
        // rdma-core: 64 + align16(904) = 976 -> 1024, inline 956; a UD WQE
        // here is 4 fixed octowords + at most 59: 59 * 16 - 4 = 940.
        assert_eq!(l.max_inline, 940);
        req.max_inline_data = 950;
        assert_eq!(
            qp_layout(&req, &dev(), PAGE),
            Err(SizeError::CrateLimit {
                what: "max_inline_data",
                given: 950,
                max: 940
            })
        );
    }

    #[test]
    fn requests_beyond_the_device() {
        let e = qp_layout(&rc(16, 40, 0, 0, 0), &dev(), PAGE).unwrap_err();
        assert_eq!(
            e,
            SizeError::ExceedsDevice {
                what: "max_send_sge",
                given: 40,
                max: 30
            }
        );
        assert_eq!(e.to_string(), "max_send_sge 40 exceeds the device's 30");
        assert_eq!(
            qp_layout(&rc(16, 1, 0, 1 << 16, 1), &dev(), PAGE),
            Err(SizeError::ExceedsDevice {
                what: "max_recv_wr",
                given: 1 << 16,
                max: 1 << 15
            })
        );
        // 30 SGEs: 192 + 480 = 672 bytes, over a 512-byte descriptor.
        let small = DeviceLimits {
            max_sq_desc_sz: 512,
            ..dev()
        };
        assert_eq!(
            qp_layout(&rc(16, 30, 0, 0, 0), &small, PAGE),
            Err(SizeError::WqeTooLarge {
                queue: "send",
                bytes: 672,
                max: 512
            })
        );
        // Inline 1000: 192 + 1008 = 1200 > 1024.
        assert!(matches!(
            qp_layout(&rc(16, 1, 1000, 0, 0), &dev(), PAGE),
            Err(SizeError::WqeTooLarge { queue: "send", .. })
        ));
        // 30 receive SGEs: 480 -> 512 fits; the kernel's 512 limit holds.
        assert!(qp_layout(&rc(1, 1, 0, 1, 30), &dev(), PAGE).is_ok());
        let small_rq = DeviceLimits {
            max_rq_desc_sz: 256,
            ..dev()
        };
        assert_eq!(
            qp_layout(&rc(1, 1, 0, 1, 17), &small_rq, PAGE),
            Err(SizeError::WqeTooLarge {
                queue: "receive",
                bytes: 272,
                max: 256
            })
        );
        // 32768 * 256 bytes = 131072 blocks > 32768.
        assert_eq!(
            qp_layout(&rc(1 << 15, 1, 0, 0, 0), &dev(), PAGE),
            Err(SizeError::RingTooLarge {
                queue: "SQ",
                entries: 1 << 17,
                max: 1 << 15,
                limit: "the device's max_send_wqebb"
            })
        );
        assert_eq!(
            qp_layout(&rc(1, 1, 0, 0, 0), &dev(), 1000),
            Err(SizeError::BadPageSize { page_size: 1000 })
        );
    }

    #[test]
    fn cq_sizes() {
        // ncqe = roundup_pow_of_two(cqe + 1).
        let l = cq_layout(100, &dev(), PAGE).unwrap();
        assert_eq!(
            l,
            CqLayout {
                ncqe: 128,
                cqe_size: 64,
                buf_len: 8192,
                granted_cqe: 127
            }
        );
        assert_eq!(cq_layout(127, &dev(), PAGE).unwrap().ncqe, 128);
        assert_eq!(cq_layout(128, &dev(), PAGE).unwrap().ncqe, 256);
        // 2 entries still take a page.
        assert_eq!(cq_layout(1, &dev(), PAGE).unwrap().buf_len, PAGE);
        assert_eq!(
            cq_layout(0, &dev(), PAGE),
            Err(SizeError::Zero { what: "cqe" })
        );
        assert_eq!(
            cq_layout(1 << 22, &dev(), PAGE),
            Err(SizeError::ExceedsDevice {
                what: "cqe",
                given: 1 << 22,
                max: (1 << 22) - 1
            })
        );
        let big = DeviceLimits {
            max_cqe: u32::MAX,
            ..dev()
        };
        assert!(matches!(
            cq_layout(1 << 22, &big, PAGE),
            Err(SizeError::RingTooLarge { queue: "CQ", .. })
        ));
    }

    #[test]
    fn srq_sizes() {
        // 1 SGE: 16 + 16 = 32 -> stride 32; 101 -> 128 WQEs.
        let l = srq_layout(100, 1, &dev(), PAGE).unwrap();
        assert_eq!(
            l,
            SrqLayout {
                wqe_cnt: 128,
                wqe_shift: 5,
                max_sge: 1,
                max_wr: 127,
                buf_len: 4096
            }
        );
        // 0 SGEs: still the 32-byte minimum, 1 SGE granted.
        assert_eq!(srq_layout(1, 0, &dev(), PAGE).unwrap().max_sge, 1);
        // 4 SGEs: 80 -> 128, room for 7.
        let l = srq_layout(1000, 4, &dev(), PAGE).unwrap();
        assert_eq!((l.wqe_shift, l.max_sge, l.wqe_cnt), (7, 7, 1024));
        assert_eq!(l.buf_len, 1024 * 128);
        assert_eq!(
            srq_layout(0, 1, &dev(), PAGE),
            Err(SizeError::Zero { what: "SRQ max_wr" })
        );
        assert!(matches!(
            srq_layout(1 << 15, 1, &dev(), PAGE),
            Err(SizeError::RingTooLarge { queue: "SRQ", .. })
        ));
        assert!(matches!(
            srq_layout(10, 31, &dev(), PAGE),
            Err(SizeError::ExceedsDevice {
                what: "max_sge",
                ..
            })
        ));
    }

    #[test]
    fn udata_encoders() {
        let l = qp_layout(&rc(128, 1, 0, 128, 1), &dev(), PAGE).unwrap();
        let q = create_qp_udata(&l, 0x10_0000, 0x20_0040, 0, 7).unwrap();
        assert_eq!((q.buf_addr, q.db_addr), (0x10_0000, 0x20_0040));
        assert_eq!(
            (q.sq_wqe_count, q.rq_wqe_count, q.rq_wqe_shift),
            (512, 128, 4)
        );
        // CQE version 0: the kernel wants exactly 0xffffff.
        assert_eq!((q.flags, q.uidx, q.bfreg_index), (0, 0xff_ffff, 0));
        assert_eq!((q.sq_buf_addr, q.ece_options), (0, 0));
        assert_eq!(create_qp_udata(&l, 0, 0, 1, 7).unwrap().uidx, 7);
        assert_eq!(
            create_qp_udata(&l, 0, 0, 1, 0xff_ffff).unwrap_err(),
            SizeError::BadUserIndex { uidx: 0xff_ffff }
        );
        assert_eq!(
            create_qp_udata(&l, 0, 0, 2, 0).unwrap_err(),
            SizeError::UnsupportedCqeVersion { version: 2 }
        );

        let c = create_cq_udata(&cq_layout(100, &dev(), PAGE).unwrap(), 0x3000, 0x4000);
        assert_eq!((c.buf_addr, c.db_addr, c.cqe_size), (0x3000, 0x4000, 64));
        assert_eq!((c.cqe_comp_en, c.flags, c.uar_page_index), (0, 0, 0));

        let sl = srq_layout(100, 1, &dev(), PAGE).unwrap();
        let s = create_srq_udata(&sl, 0x5000, 0x6000, 0, 3).unwrap();
        assert_eq!(
            (s.buf_addr, s.db_addr, s.flags, s.uidx),
            (0x5000, 0x6000, 0, 0xff_ffff)
        );
        assert_eq!(create_srq_udata(&sl, 0, 0, 1, 3).unwrap().uidx, 3);
        assert!(create_srq_udata(&sl, 0, 0, 1, 1 << 24).is_err());
    }

    #[test]
    fn ucontext_defaults() {
        let r = ucontext_request(4096);
        // get_total_uuars: max(16, 4096 / 4096 * 2) = 16; low latency
        // max(4, 16 - 12) = 4.
        assert_eq!((r.total_num_bfregs, r.num_low_latency_bfregs), (16, 4));
        assert_eq!((r.max_cqe_version, r.flags, r.comp_mask), (0, 0, 0));
        assert_eq!(r.lib_caps, Mlx5LibCaps::UAR_4K.bits());
        // 64 KiB pages: 16 UARs of 2 bfregs = 32; low latency 32 - 12 = 20.
        let r = ucontext_request(65536);
        assert_eq!((r.total_num_bfregs, r.num_low_latency_bfregs), (32, 20));
    }

    #[test]
    fn uar_pages_and_bfregs() {
        let req = ucontext_request(PAGE);
        // 4 KiB pages: 16 bfregs, one UAR (two bfregs) per page: 8 pages.
        let u = uar_layout(&req, &resp(16, 12, 1), PAGE).unwrap();
        assert_eq!((u.pages, u.uars_per_page, u.uar_size), (8, 1, 4096));
        assert_eq!(u.mmap_offset(3, 4096), 3 * 4096);
        assert_eq!(u.cq_doorbell_page(), 0);
        let at = |i| u.bfreg(i).unwrap();
        // bfreg 0: the doorbell at 0x800, no BlueFlame.
        assert_eq!(
            at(0),
            BfregLocation {
                page: 0,
                offset: 0x800,
                blueflame: false,
                bf_size: 0
            }
        );
        // bfreg 1: medium class (shared between QPs): the 8-byte doorbell
        // only, still alternating halves.
        assert_eq!(
            at(1),
            BfregLocation {
                page: 0,
                offset: 0xa00,
                blueflame: false,
                bf_size: 256
            }
        );
        // 4 = UAR 1 register 0, 29 = UAR 7 register 1. Low latency (one
        // QP each) from (16 - 4) * 2 = 24 on: BlueFlame.
        assert_eq!(u.first_dedicated, 24);
        assert_eq!(
            (at(4).page, at(4).offset, at(4).blueflame),
            (1, 0x800, false)
        );
        assert_eq!((at(21).blueflame, at(24).blueflame), (false, true));
        assert_eq!(
            (at(29).page, at(29).offset, at(29).blueflame),
            (7, 0xa00, true)
        );
        assert!(matches!(u.bfreg(2), Err(SizeError::BadBfreg { .. })));
        assert!(matches!(u.bfreg(32), Err(SizeError::BadBfreg { .. })));
        assert!(matches!(u.bfreg(u32::MAX), Err(SizeError::BadBfreg { .. })));

        // 64 KiB pages with 4 KiB UARs: 32 bfregs in one page.
        let req = ucontext_request(65536);
        let u = uar_layout(&req, &resp(32, 12, 16), 65536).unwrap();
        assert_eq!((u.pages, u.uars_per_page), (1, 16));
        // bfreg 5: UAR 1 of the page, register 1.
        assert_eq!(u.bfreg(5).unwrap().offset, 4096 + 0x800 + 512);
        // Without the 4K-UAR capability the kernel uses one UAR per page.
        let mut old = req;
        old.lib_caps = 0;
        assert_eq!(
            uar_layout(&old, &resp(32, 12, 16), 65536).unwrap().pages,
            16
        );
        // A kernel from before 4K UARs reports neither field.
        assert_eq!(uar_layout(&req, &resp(16, 0, 0), PAGE).unwrap().pages, 8);
        // No write-combining: doorbells only.
        let mut nowc = resp(16, 12, 1);
        nowc.bf_reg_size = 0;
        let u = uar_layout(&req, &nowc, PAGE).unwrap();
        assert_eq!(
            (u.bfreg(1).unwrap().blueflame, u.bfreg(1).unwrap().bf_size),
            (false, 0)
        );

        assert_eq!(
            uar_layout(&req, &resp(0, 12, 1), PAGE),
            Err(SizeError::NoStaticBfregs)
        );
        assert!(matches!(
            uar_layout(&req, &resp(16, 12, 2), PAGE),
            Err(SizeError::BadUar { .. })
        ));
        assert!(matches!(
            uar_layout(&req, &resp(15, 12, 1), PAGE),
            Err(SizeError::BadUar { .. })
        ));
        let mut huge_bf = resp(16, 12, 1);
        huge_bf.bf_reg_size = 2048;
        assert!(matches!(
            uar_layout(&req, &huge_bf, PAGE),
            Err(SizeError::BadUar { .. })
        ));
    }

    #[test]
    fn device_limits_from_context() {
        let d = DeviceLimits::from_context(&resp(16, 12, 1), 30, (1 << 22) - 1);
        assert_eq!(d, dev());
    }

    // -- Queues over plain memory ---------------------------------------

    #[repr(C, align(4096))]
    #[derive(Clone)]
    struct Page([u8; PAGE]);

    fn pages(len: usize) -> Vec<Page> {
        vec![Page([0; PAGE]); len.div_ceil(PAGE).max(1)]
    }

    fn base(p: &mut [Page], off: usize) -> NonNull<u8> {
        NonNull::new(p.as_mut_ptr().cast::<u8>().wrapping_add(off)).unwrap()
    }

    fn uar() -> UarLayout {
        uar_layout(&ucontext_request(PAGE), &resp(16, 12, 1), PAGE).unwrap()
    }

    /// Builds the queues `l` describes over fresh memory; any LayoutError
    /// is a disagreement between this module and the constructors.
    fn build_qp(l: &QpLayout, bfreg: u32) -> Result<(), LayoutError> {
        let mut buf = pages(l.buf_len);
        let mut db = pages(PAGE);
        let mut uar_page = pages(PAGE);
        let bf = uar().bfreg(bfreg).unwrap();
        assert_eq!(bf.page, 0);
        let dbrec = base(&mut db, 0).cast::<u32>();
        if l.sq_wqe_cnt > 0 {
            let cfg = l.sq_config(0x42, &bf, false);
            // The buffer and pages live until the end of this function,
            // after the queue is dropped; nothing else touches them.
            // SAFETY: buf_len >= sq_offset + sq_len (qp_layout's invariant);
            // 8 doorbell bytes; 0x800 + 2 * 512 <= 4096 UAR bytes.
            unsafe {
                SendQueue::new(
                    base(&mut buf, l.sq_offset),
                    l.sq_len(),
                    dbrec,
                    base(&mut uar_page, bf.offset),
                    cfg,
                )
            }?;
        }
        if l.rq_wqe_cnt > 0 {
            // SAFETY: as above; the RQ is the first rq_len bytes.
            unsafe {
                RecvQueue::new(
                    base(&mut buf, l.rq_offset),
                    l.rq_len(),
                    dbrec,
                    l.rq_wqe_cnt,
                    l.rq_wqe_shift,
                    l.rq_max_sge,
                )
            }?;
        }
        Ok(())
    }

    #[test]
    fn worked_examples_build() {
        for req in [
            rc(128, 1, 0, 128, 1),
            rc(128, 1, 64, 0, 0),
            rc(128, 1, 220, 64, 3),
            rc(1, 30, 0, 1, 30),
        ] {
            let l = qp_layout(&req, &dev(), PAGE).unwrap();
            assert_eq!(build_qp(&l, 1), Ok(()));
            assert_eq!(build_qp(&l, 0), Ok(()));
        }
    }

    fn qp_type() -> impl Strategy<Value = QpType> {
        prop_oneof![Just(QpType::Rc), Just(QpType::Uc), Just(QpType::Ud)]
    }

    prop_compose! {
        fn qp_request()(
            qp_type in qp_type(),
            max_send_wr in 0u32..=300,
            max_recv_wr in 0u32..=300,
            max_send_sge in 0u32..=30,
            max_recv_sge in 0u32..=30,
            max_inline_data in prop_oneof![Just(0u32), 0u32..=256, 0u32..=1100],
            srq in any::<bool>(),
            sq_sig_all in any::<bool>(),
        ) -> QpRequest {
            QpRequest {
                qp_type, max_send_wr, max_recv_wr, max_send_sge, max_recv_sge,
                max_inline_data, srq, sq_sig_all,
            }
        }
    }

    fn device() -> impl Strategy<Value = DeviceLimits> {
        (
            prop_oneof![Just(512u32), Just(960), Just(1024), Just(2048)],
            prop_oneof![Just(256u32), Just(512)],
        )
            .prop_map(|(sq, rq)| DeviceLimits {
                max_sq_desc_sz: sq,
                max_rq_desc_sz: rq,
                ..dev()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(192))]

        #[test]
        fn accepted_qp_layouts_build(req in qp_request(), d in device(), bfreg in 0u32..2) {
            let Ok(l) = qp_layout(&req, &d, PAGE) else { return Ok(()) };
            // Granted covers requested.
            if req.max_send_wr > 0 {
                prop_assert!(l.max_send_wr >= req.max_send_wr);
                prop_assert!(l.sq_max_sge >= req.max_send_sge);
                prop_assert!(l.max_inline >= req.max_inline_data);
                prop_assert!(l.sq_wqe_cnt.is_power_of_two());
            } else {
                prop_assert_eq!(l.sq_wqe_cnt, 0);
            }
            if req.srq || req.max_recv_wr == 0 {
                prop_assert_eq!((l.rq_wqe_cnt, l.max_recv_wr), (0, 0));
            } else {
                prop_assert!(l.max_recv_wr >= req.max_recv_wr);
                prop_assert!(l.rq_max_sge >= req.max_recv_sge);
                prop_assert!(l.rq_wqe_cnt.is_power_of_two());
                prop_assert!((1u32 << l.rq_wqe_shift) <= d.max_rq_desc_sz);
            }
            // RQ then SQ, inside a page-rounded buffer.
            prop_assert_eq!(l.rq_offset, 0);
            prop_assert_eq!(l.sq_offset, l.rq_len());
            prop_assert!(l.sq_offset + l.sq_len() <= l.buf_len);
            prop_assert_eq!(l.buf_len % PAGE, 0);
            prop_assert!(l.buf_len - (l.sq_offset + l.sq_len()) < PAGE);
            prop_assert!(l.sq_wqe_cnt <= d.max_send_wqebb);
            prop_assert_eq!(build_qp(&l, bfreg), Ok(()));
        }

        #[test]
        fn accepted_cq_layouts_build(cqe in 1u32..=20000) {
            let l = cq_layout(cqe, &dev(), PAGE).unwrap();
            prop_assert!(l.granted_cqe >= cqe);
            prop_assert_eq!(l.granted_cqe + 1, l.ncqe);
            prop_assert_eq!(l.buf_len % PAGE, 0);
            let mut buf = pages(l.buf_len);
            let mut db = pages(PAGE);
            let mut uar_page = pages(PAGE);
            let cfg = CqConfig { ncqe: l.ncqe, cqe_size: l.cqe_size, cqn: 9 };
            // SAFETY: buf_len bytes of live memory for the ring, a page for
            // the doorbell record and one for the UAR (doorbell at 0x20);
            // all outlive the queue, dropped at once.
            let r = unsafe {
                CompletionQueue::new(
                    base(&mut buf, 0),
                    l.buf_len,
                    base(&mut db, 0).cast(),
                    base(&mut uar_page, 0),
                    cfg,
                )
            };
            prop_assert_eq!(r.err(), None);
        }

        #[test]
        fn accepted_srq_layouts_build(max_wr in 1u32..=6000, max_sge in 0u32..=30) {
            let Ok(l) = srq_layout(max_wr, max_sge, &dev(), PAGE) else { return Ok(()) };
            prop_assert!(l.max_wr >= max_wr);
            prop_assert!(l.max_sge >= max_sge);
            prop_assert_eq!(l.buf_len % PAGE, 0);
            prop_assert!((l.wqe_cnt as usize) << l.wqe_shift <= l.buf_len);
            let mut buf = pages(l.buf_len);
            let mut db = pages(PAGE);
            // SAFETY: buf_len bytes and a doorbell page, both live until the
            // queue is dropped at the end of the statement.
            let r = unsafe {
                SharedRecvQueue::new(
                    base(&mut buf, 0),
                    l.buf_len,
                    base(&mut db, 0).cast(),
                    l.wqe_cnt,
                    l.wqe_shift,
                    l.max_sge,
                )
            };
            prop_assert_eq!(r.as_ref().map(|q| q.capacity()).ok(), Some(l.max_wr));
        }
    }
}

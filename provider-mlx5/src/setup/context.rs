//! The GET_CONTEXT request, and the UAR pages and bfregs its answer
//! describes: which pages to map, and where each QP's doorbell/BlueFlame
//! register and the CQs' doorbell lie in them.

use super::{check_page_size, SizeError, ADAPTER_PAGE, CQE_VERSION};
use crate::seg::WQEBB;
use uverbs_abi::mlx5::{
    mlx5_mmap_offset, Mlx5IbAllocUcontextReqV2, Mlx5IbAllocUcontextResp, Mlx5IbMmapCmd, Mlx5LibCaps,
};

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

/// `MLX5_DEF_TOT_UUARS`, `MLX5_MED_BFREGS_TSHOLD` and the default of
/// `MLX5_NUM_LOW_LAT_UUARS` (rdma-core `mlx5-abi.h`, `get_num_low_lat_uuars`).
const DEF_TOT_BFREGS: u32 = 8 * NON_FP_BFREGS_PER_UAR;
const MED_BFREGS_THRESHOLD: u32 = 12;
const DEF_LOW_LAT_BFREGS: u32 = 4;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::tests::{resp, PAGE};

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
}

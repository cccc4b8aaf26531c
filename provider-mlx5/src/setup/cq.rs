//! A CQ: its buffer, as rdma-core sizes it, and the CREATE_CQ driver
//! udata.

use super::{check_page_size, exceeds, page_round, ring_limit, DeviceLimits, SizeError};
use uverbs_abi::mlx5::Mlx5IbCreateCq;

/// The most entries this crate's CQs take.
const MAX_CQ_ENTRIES: u64 = 1 << 22;
/// rdma-core's own CQ limit (`create_cq`: `ncqe > 1 << 24`).
const RDMA_CORE_MAX_CQ_ENTRIES: u64 = 1 << 24;
/// Largest receive stride this crate's RQ/SRQ take (`check_ring`).
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
/// ([`UarLayout::cq_doorbell_page`](super::UarLayout::cq_doorbell_page)).
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

#[cfg(test)]
#[allow(unsafe_code)] // a queue built over test memory; the block says why it is sound
mod tests {
    use super::*;
    use crate::setup::tests::{base, dev, pages, PAGE};
    use crate::{CompletionQueue, CqConfig};
    use proptest::prelude::*;

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
    fn udata() {
        let c = create_cq_udata(&cq_layout(100, &dev(), PAGE).unwrap(), 0x3000, 0x4000);
        assert_eq!((c.buf_addr, c.db_addr, c.cqe_size), (0x3000, 0x4000, 64));
        assert_eq!((c.cqe_comp_en, c.flags, c.uar_page_index), (0, 0, 0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 192 }))]

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
    }
}

//! An SRQ: its ring, as rdma-core sizes it (without the ODP wait queue),
//! and the CREATE_SRQ driver udata.

use super::{
    check_page_size, exceeds, page_round, ring_limit, user_index, DeviceLimits, SizeError,
    DATA_SEG, MAX_RECV_STRIDE, MAX_WQ_ENTRIES,
};
use crate::seg::SrqNextSeg;
use core::mem::size_of;
use uverbs_abi::mlx5::Mlx5IbCreateSrq;

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
    // max_sge is bounded by the WQE (below), as in rdma-core's
    // `mlx5_create_srq` and mlx5_ib's `max_wqe_sz_rq / 16`, not by the
    // device's `max_sge` (30 on a ConnectX: the send side's room): an SRQ
    // of 31 SGEs fills a 512-byte WQE.
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
/// as for [`create_qp_udata`](super::create_qp_udata) (kernel
/// `create_srq_user` → `get_srq_user_index`).
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
#[allow(unsafe_code)] // a queue built over test memory; the block says why it is sound
mod tests {
    use super::*;
    use crate::setup::tests::{base, dev, pages, PAGE};
    use crate::SharedRecvQueue;
    use proptest::prelude::*;

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
        // 31 SGEs (above the device's max_sge of 30, the send side's):
        // 16 + 496 = 512, the largest receive WQE, as rdma-core grants.
        let l = srq_layout(10, 31, &dev(), PAGE).unwrap();
        assert_eq!((l.wqe_shift, l.max_sge), (9, 31));
        // 32: 528 -> 1024, past max_rq_desc_sz.
        assert!(matches!(
            srq_layout(10, 32, &dev(), PAGE),
            Err(SizeError::WqeTooLarge { queue: "SRQ", .. })
        ));
    }

    #[test]
    fn udata() {
        let sl = srq_layout(100, 1, &dev(), PAGE).unwrap();
        let s = create_srq_udata(&sl, 0x5000, 0x6000, 0, 3).unwrap();
        assert_eq!(
            (s.buf_addr, s.db_addr, s.flags, s.uidx),
            (0x5000, 0x6000, 0, 0xff_ffff)
        );
        assert_eq!(create_srq_udata(&sl, 0, 0, 1, 3).unwrap().uidx, 3);
        assert!(create_srq_udata(&sl, 0, 0, 1, 1 << 24).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 192 }))]

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

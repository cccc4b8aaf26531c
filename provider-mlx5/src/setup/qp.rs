//! A QP: its work queue buffer (RQ, then SQ), as rdma-core sizes it, and
//! the CREATE_QP driver udata.

use super::{
    align_up, check_page_size, exceeds, page_round, ring_limit, user_index, BfregLocation,
    DeviceLimits, SizeError, DATA_SEG, MAX_RECV_STRIDE, MAX_WQ_ENTRIES,
};
use crate::seg::{AtomicSeg, CtrlSeg, DatagramSeg, InlineSeg, RaddrSeg, MAX_DS, OCTOWORD, WQEBB};
use crate::sq::SqConfig;
use crate::wqe::{self, Limits};
use crate::QpType;
use core::mem::size_of;
use uverbs_abi::mlx5::{Mlx5IbCreateQp, Mlx5IbCreateQpDciStreams};

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
            max_wr: self.max_send_wr,
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
    let fixed = u64::from(wqe::max_ds(&Limits::new(req.qp_type, 0, 0)));
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
    // Checked with an SRQ too, as rdma-core (`mlx5_get_max_recv_wr` runs
    // before `mlx5_calc_rcv_wqe` sees the SRQ) and mlx5_ib's `set_rq_size`
    // do.
    exceeds("max_recv_wr", req.max_recv_wr, dev.max_recv_wr)?;
    if req.srq || req.max_recv_wr == 0 {
        return Ok(RqSize {
            wqe_cnt: 0,
            wqe_shift: 0,
            max_sge: 0,
            max_post: 0,
        });
    }
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
    // Receive SGEs are bounded by the receive WQE (`max_rq_desc_sz`: 32 on
    // a ConnectX, above the device's `max_sge` of 30, which counts the send
    // side's room): `rq_size`, as rdma-core's `mlx5_calc_rcv_wqe`.
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

/// The CREATE_QP driver udata for `l`, with the QP buffer at `buf_addr`
/// (page-aligned, `l.buf_len` bytes) and its `[RCV, SND]` doorbell record
/// at `db_addr`.
///
/// `flags` is 0: no `MLX5_QP_FLAG_SCATTER_CQE` (rdma-core's default, which
/// this crate's completion path does not handle), no signatures, and no
/// `BFREG_INDEX`/`UAR_PAGE_INDEX`, so the kernel picks a static bfreg
/// (`create_user_qp` → `alloc_bfreg`: a free low-latency one, else the
/// least-used medium one, else bfreg 0) and reports it as the response's
/// `bfreg_index`, for [`UarLayout::bfreg`](super::UarLayout::bfreg).
/// `uidx` is used only with CQE version 1; with version 0 the kernel's
/// required `0xffffff` is sent.
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

#[cfg(test)]
#[allow(unsafe_code)] // queues built over test memory; each block says why it is sound
mod tests {
    use super::*;
    use crate::setup::tests::{base, dev, pages, resp, PAGE};
    use crate::setup::{uar_layout, ucontext_request, UarLayout};
    use crate::{LayoutError, RecvQueue, SendQueue};
    use proptest::prelude::*;

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
        // 32, above the device's max_sge: 512 bytes still, as rdma-core
        // grants (the creation differential against it found the
        // difference); 33 is past the receive WQE.
        assert_eq!(
            qp_layout(&rc(1, 1, 0, 1, 32), &dev(), PAGE)
                .unwrap()
                .rq_max_sge,
            32
        );
        assert!(matches!(
            qp_layout(&rc(1, 1, 0, 1, 33), &dev(), PAGE),
            Err(SizeError::WqeTooLarge {
                queue: "receive",
                ..
            })
        ));
        // With an SRQ the receive caps size nothing, but max_recv_wr is
        // still checked (rdma-core and mlx5_ib refuse it).
        let with_srq = |recv_wr| QpRequest {
            srq: true,
            ..rc(1, 1, 0, recv_wr, 40)
        };
        assert_eq!(
            qp_layout(&with_srq(1 << 15), &dev(), PAGE)
                .unwrap()
                .rq_wqe_cnt,
            0
        );
        assert!(matches!(
            qp_layout(&with_srq((1 << 15) + 1), &dev(), PAGE),
            Err(SizeError::ExceedsDevice {
                what: "max_recv_wr",
                ..
            })
        ));
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
    fn udata() {
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
    }

    // -- Queues over plain memory ---------------------------------------

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
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 4 } else { 192 }))]

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
    }
}

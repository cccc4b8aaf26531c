//! On-demand paging: prefetching the pages of ODP MRs (`ibv_advise_mr`).
//!
//! What a program needs to know is on [`Advice`].

use crate::cmd;
use crate::error::{Errno, Error, Feature, Result};
use crate::pd::Pd;
use crate::wr::Slice;
use uverbs_abi::ioctl::{IbUverbsAdviseMrAdvice, IbUverbsAdviseMrFlag};
use uverbs_abi::verbs::IbUverbsSge;

/// `IB_UVERBS_ADVISE_MR_FLAG_FLUSH`: return only once the pages are in.
pub(crate) const FLAG_FLUSH: u32 = IbUverbsAdviseMrFlag::FLUSH.bits();

/// What to prefetch for (`enum ib_uverbs_advise_mr_advice`).
///
/// An MR registered with [`Access::ON_DEMAND`](crate::mr::Access::ON_DEMAND)
/// pins nothing: the device faults pages in when a work request or a peer
/// touches them (rxe does from Linux 6.14; [`crate::context::Context::features`]
/// says whether a device does). [`Pd::advise_mr`] asks the kernel to fault
/// a range in ahead of use, so the first access does not pay for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Fault the pages in for reading (`PREFETCH`).
    Prefetch,
    /// Fault the pages in writable (`PREFETCH_WRITE`; the MR must allow
    /// local write).
    PrefetchWrite,
    /// Map only the pages already present, faulting none in
    /// (`PREFETCH_NO_FAULT`).
    PrefetchNoFault,
}

impl Advice {
    fn raw(self) -> u32 {
        match self {
            Advice::Prefetch => IbUverbsAdviseMrAdvice::PREFETCH.0,
            Advice::PrefetchWrite => IbUverbsAdviseMrAdvice::PREFETCH_WRITE.0,
            Advice::PrefetchNoFault => IbUverbsAdviseMrAdvice::PREFETCH_NO_FAULT.0,
        }
    }
}

impl Pd {
    /// `ibv_advise_mr`: the ioctl `ADVISE_MR` with `advice` over `ranges`,
    /// each a slice of an ODP MR of this PD ([`crate::mr::Mr::slice`]). With
    /// `wait`, the call returns once the pages are in
    /// (`IB_UVERBS_ADVISE_MR_FLAG_FLUSH`); without, the kernel may do it in
    /// the background, best effort.
    ///
    /// A kernel or device without prefetch (rxe before Linux 6.14, or any
    /// device without ODP) answers [`Error::Unsupported`], naming the
    /// command and the errno it returned.
    pub fn advise_mr(&self, advice: Advice, wait: bool, ranges: &[Slice<'_>]) -> Result<()> {
        if ranges.is_empty() {
            return Err(Error::invalid("ADVISE_MR: no range given"));
        }
        let sges: Vec<IbUverbsSge> = ranges
            .iter()
            .map(|s| IbUverbsSge {
                addr: s.addr(),
                length: s.len(),
                lkey: s.lkey(),
            })
            .collect();
        let dev = &self.inner.ctx.dev;
        let flags = if wait { FLAG_FLUSH } else { 0 };
        match cmd::mr::advise(dev, self.inner.handle.raw(), advice.raw(), flags, &sges) {
            Err(e) if cmd::ioctl_unsupported(&e) => Err(Error::Unsupported {
                device: self.inner.ctx.device.name().to_string(),
                feature: Feature::AdviseMr {
                    errno: e.errno().unwrap_or(Errno::EOPNOTSUPP),
                },
            }),
            r => r,
        }
    }
}

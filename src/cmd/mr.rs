//! Memory regions: `REG_MR` / `DEREG_MR`.

use super::method::Method;
use super::{Dev, Handle, Kind};
use crate::error::Result;
use std::sync::Arc;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// An MR's kind.
pub(crate) enum MrKind {}
/// An MR's control half (it keeps the registered memory).
pub(crate) type MrHandle = Handle<MrKind>;

impl Kind for MrKind {
    fn destroy(dev: &Dev, handle: u32) -> Result<()> {
        let mut c = v::IbUverbsDeregMr::new_zeroed();
        c.mr_handle = handle;
        dev.write0::<cmds::DeregMr>(&c)
    }
}

/// A registered MR: its control half and keys.
pub(crate) struct Registered {
    pub(crate) handle: MrHandle,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// `REG_MR` of `len` bytes at `start`, which work requests and peers
/// address from `iova` on (`hca_va`; `start` itself for an ordinary MR).
pub(crate) fn reg(
    dev: &Arc<Dev>,
    pd: u32,
    start: u64,
    len: u64,
    iova: u64,
    access: u32,
) -> Result<Registered> {
    let mut c = v::IbUverbsRegMr::new_zeroed();
    c.start = start;
    c.length = len;
    c.hca_va = iova;
    c.pd_handle = pd;
    c.access_flags = access;
    let r = dev.write0::<cmds::RegMr>(&c)?;
    Ok(Registered {
        handle: Handle::new(dev, r.mr_handle),
        lkey: r.lkey,
        rkey: r.rkey,
    })
}

/// `UVERBS_METHOD_ADVISE_MR` (`ibv_advise_mr`): `advice` (an
/// `ib_uverbs_advise_mr_advice`) over `sges`, each a `struct ib_uverbs_sge`
/// naming an MR of `pd` by lkey. With `IB_UVERBS_ADVISE_MR_FLAG_FLUSH` in
/// `flags` the kernel returns only once the pages are in. The method has no
/// write() form: a kernel or driver without it answers EOPNOTSUPP or
/// EPROTONOSUPPORT, which the caller names.
pub(crate) fn advise(
    dev: &Dev,
    pd: u32,
    advice: u32,
    flags: u32,
    sges: &[v::IbUverbsSge],
) -> Result<()> {
    use uverbs_abi::ioctl as io;
    use zerocopy::IntoBytes;
    let mut storage = [0u64; io::attr_buf_words(4)];
    let mut call = dev.call(Method::AdviseMr, &mut storage);
    call.idr_in(io::UVERBS_ATTR_ADVISE_MR_PD_HANDLE, pd)
        .const_in(io::UVERBS_ATTR_ADVISE_MR_ADVICE, u64::from(advice))
        // FLAGS_IN: the kernel's uverbs_get_flags32() takes a u32 or a u64.
        .u64_in(io::UVERBS_ATTR_ADVISE_MR_FLAGS, u64::from(flags))
        .ptr_in(io::UVERBS_ATTR_ADVISE_MR_SGE_LIST, sges.as_bytes());
    dev.ioctl(&mut call)
}

/// `UVERBS_METHOD_REG_DMABUF_MR` (`ibv_reg_dmabuf_mr`): `len` bytes at
/// `offset` into the dma-buf `fd`, addressed from `iova` on. The kernel
/// takes its own reference on the dma-buf. No write() form: a kernel
/// without the method answers EPROTONOSUPPORT, a driver without dma-buf
/// support (rxe) EOPNOTSUPP; the error names the method.
pub(crate) fn reg_dmabuf(
    dev: &Arc<Dev>,
    pd: u32,
    fd: i32,
    offset: u64,
    len: u64,
    iova: u64,
    access: u32,
) -> Result<Registered> {
    use uverbs_abi::ioctl as io;
    use zerocopy::IntoBytes;
    let (mut lkey, mut rkey) = (0u32, 0u32);
    let mut storage = [0u64; io::attr_buf_words(9)];
    let mut call = dev.call(Method::RegDmabufMr, &mut storage);
    // Every attribute mandatory, as rdma-core's ibv_cmd_reg_dmabuf_mr sends
    // them: a kernel that did not know one would refuse the call
    // (EPROTONOSUPPORT) rather than register without it.
    call.idr_new(io::UVERBS_ATTR_REG_DMABUF_MR_HANDLE)
        .mandatory()
        .idr_in(io::UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, pd)
        .mandatory()
        .u64_in(io::UVERBS_ATTR_REG_DMABUF_MR_OFFSET, offset)
        .mandatory()
        .u64_in(io::UVERBS_ATTR_REG_DMABUF_MR_LENGTH, len)
        .mandatory()
        .u64_in(io::UVERBS_ATTR_REG_DMABUF_MR_IOVA, iova)
        .mandatory()
        // PTR_IN of a u32 (uverbs_std_types_mr.c), not an fd attribute: a
        // zero-length one fails the kernel's attribute check (EINVAL).
        .u32_in(io::UVERBS_ATTR_REG_DMABUF_MR_FD, fd as u32)
        .mandatory()
        // FLAGS_IN: uverbs_get_flags32() takes a u32 or a u64; a u32, as
        // rdma-core sends it.
        .u32_in(io::UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, access)
        .mandatory()
        .ptr_out(io::UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, lkey.as_mut_bytes())
        .mandatory()
        .ptr_out(io::UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, rkey.as_mut_bytes())
        .mandatory();
    dev.ioctl(&mut call)?;
    let handle = call
        .new_handle(io::UVERBS_ATTR_REG_DMABUF_MR_HANDLE)
        .ok_or_else(|| crate::error::Error::bad_answer("REG_DMABUF_MR: no MR handle came back"))?;
    Ok(Registered {
        handle: Handle::new(dev, handle),
        lkey,
        rkey,
    })
}

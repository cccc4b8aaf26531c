//! Memory regions: `ibv_reg_mr` (and its `_iova` forms),
//! `ibv_reg_dmabuf_mr`, `ibv_dereg_mr`.

use crate::abi::*;
use crate::convert::mr_access;
use crate::guard;
use crate::obj::{destroy, CObject, Held};
use crate::pd::PdBox;
use crate::{errno_of, export, lock, minus1_errno, null_errno, set_errno};
use rverbs::{DeregisterError, DmabufMr, External, Mr};
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;

#[repr(C)]
struct MrBox {
    c: IbvMr,
    /// The MR while it is registered: taken out only for `DEREG_MR`, and
    /// put back if the kernel refuses.
    mr: Mutex<Option<Region>>,
    _pd: Held<PdBox>,
}

/// What an `ibv_mr` of ours registers.
enum Region {
    /// Memory of the process (`ibv_reg_mr`).
    Memory(Mr<External>),
    /// A dma-buf (`ibv_reg_dmabuf_mr`), through a duplicate of the C
    /// caller's descriptor, which stays the caller's as in rdma-core.
    Dmabuf(Box<DmabufMr>),
}

// SAFETY: repr(C) with the ibv_mr first; handed out only by reg.
unsafe impl CObject for MrBox {
    type C = IbvMr;
}

/// `ibv_reg_mr_iova2`, and `ibv_reg_mr_iova`: the same arguments but for
/// `access`, an `int` there, passed in the same register as this
/// `unsigned int` and read as the same bits. rverbs registers memory at
/// its own address only: `iova` must be `addr`.
unsafe extern "C" fn reg_mr_iova(
    p: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { PdBox::of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        if iova != addr as u64 {
            return null_errno(libc::EOPNOTSUPP);
        }
        let Some(access) = mr_access(access) else {
            return null_errno(libc::EINVAL);
        };
        // SAFETY: the C caller of ibv_reg_mr promises what register_raw asks:
        // the range stays mapped until ibv_dereg_mr, and C code has no Rust
        // references to it.
        let mr = match unsafe { pd.pd.register_raw(addr.cast(), len, access) } {
            Ok(m) => m,
            Err(e) => return null_errno(errno_of(&e)),
        };
        let c = IbvMr {
            context: pd.c.context,
            pd: p,
            addr,
            length: len,
            handle: 0,
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        };
        MrBox {
            c,
            mr: Mutex::new(Some(Region::Memory(mr))),
            _pd: Held::new(pd),
        }
        .into_c()
    })
}
export!("ibv_reg_mr_iova2" = reg_mr_iova);
export!("ibv_reg_mr_iova" = reg_mr_iova);

/// `ibv_reg_mr`: at the buffer's own address.
unsafe extern "C" fn reg_mr(
    p: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut IbvMr {
    guard::null(|| {
        // SAFETY: forwarded C contract.
        unsafe { reg_mr_iova(p, addr, len, addr as u64, access as c_uint) }
    })
}
export!("ibv_reg_mr" = reg_mr);

/// `ibv_reg_dmabuf_mr`: `length` bytes at `offset` into the dma-buf `fd`,
/// addressed from `iova`; `addr` of the `ibv_mr` is `offset`, as
/// rdma-core sets it. rdma-core's rxe provider has no such verb and
/// answers `EOPNOTSUPP` before any check or command: so does this
/// library on rxe. Elsewhere the region is registered through a
/// duplicate of `fd` (the kernel holds the dma-buf itself; the duplicate
/// is closed at `ibv_dereg_mr`), and the kernel's errno is the answer.
unsafe extern "C" fn reg_dmabuf_mr(
    p: *mut IbvPd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut IbvMr {
    guard::null(|| {
        // SAFETY: a PD of ours (C contract).
        let Some(pd) = (unsafe { PdBox::of(p) }) else {
            return null_errno(libc::EINVAL);
        };
        // SAFETY: the PD's context is one of ours and outlives it.
        let Some(ctx) = (unsafe { crate::context::CtxBox::of(pd.c.context) }) else {
            return null_errno(libc::EINVAL);
        };
        if ctx.dev.dev.driver() == rverbs::Driver::Rxe {
            return null_errno(libc::EOPNOTSUPP);
        }
        let Some(access) = mr_access(access as c_uint) else {
            return null_errno(libc::EINVAL);
        };
        let fd = match dup_of(fd) {
            Ok(fd) => fd,
            Err(e) => return null_errno(e),
        };
        let mr = match pd.pd.reg_dmabuf_mr(fd, offset, length as u64, iova, access) {
            Ok(m) => m,
            Err(e) => return null_errno(errno_of(&e)),
        };
        let c = IbvMr {
            context: pd.c.context,
            pd: p,
            addr: offset as usize as *mut c_void,
            length,
            handle: 0,
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        };
        MrBox {
            c,
            mr: Mutex::new(Some(Region::Dmabuf(Box::new(mr)))),
            _pd: Held::new(pd),
        }
        .into_c()
    })
}
export!("ibv_reg_dmabuf_mr" = reg_dmabuf_mr);

/// A close-on-exec duplicate of the C caller's `fd`, or the errno of
/// `fcntl(F_DUPFD_CLOEXEC)` (EBADF for a number that is not open, EMFILE
/// when the process has no descriptor left).
fn dup_of(fd: c_int) -> Result<OwnedFd, c_int> {
    // SAFETY: fcntl on a plain number touches no memory; a number that is
    // not an open descriptor fails with EBADF.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if d < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EBADF));
    }
    // SAFETY: d is a descriptor fcntl just created for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(d) })
}

/// `DEREG_MR` of the MR in `slot`: `Ok` once the kernel has agreed, else
/// the errno, the MR back in `slot` to try again.
fn deregister(slot: &mut Option<Region>) -> Result<(), c_int> {
    let (region, e) = match slot.take().ok_or(libc::EINVAL)? {
        Region::Memory(mr) => match mr.deregister() {
            Ok(_) => return Ok(()),
            // Neither of the first two happens here (the C MR is this
            // library's only handle, and it binds windows by work
            // request), but each leaves the MR, as the kernel's refusal
            // does.
            Err(DeregisterError::Shared(mr)) => (Region::Memory(mr), libc::EBUSY),
            Err(DeregisterError::Windows(mr, _)) => (Region::Memory(mr), libc::EINVAL),
            Err(DeregisterError::Kernel(mr, e)) => (Region::Memory(mr), errno_of(&e)),
        },
        // The duplicate descriptor closes with the returned OwnedFd.
        Region::Dmabuf(mr) => match mr.deregister() {
            Ok(_) => return Ok(()),
            Err((e, mr)) => (Region::Dmabuf(mr), errno_of(&e)),
        },
    };
    *slot = Some(region);
    Err(e)
}

/// `ibv_dereg_mr`: 0 once the kernel has deregistered the MR; else its
/// errno, and the MR stays (rxe refuses with `EINVAL` while a window is
/// bound to it: the program must not free the memory then). A later call,
/// once the window is gone, deregisters it, as with rdma-core.
unsafe extern "C" fn dereg_mr(m: *mut IbvMr) -> c_int {
    guard::errno(|| {
        // SAFETY: an MR of ours (C contract), deregistered once it is gone.
        unsafe { destroy(m, |b: &MrBox| deregister(&mut lock(&b.mr))) }
    })
}
export!("ibv_dereg_mr" = dereg_mr);

/// `ibv_rereg_mr`: rxe has no re-registration (rdma-core's rxe provider
/// answers it with its default, `EOPNOTSUPP`), and rverbs has none yet.
/// As rdma-core answers: its own checks of the arguments first,
/// `IBV_REREG_MR_ERR_INPUT` (-1) with `EINVAL`; then the provider's
/// refusal, `IBV_REREG_MR_ERR_CMD` (-4) with `EOPNOTSUPP`. Every code it
/// documents is negative.
unsafe extern "C" fn rereg_mr(
    m: *mut IbvMr,
    flags: c_int,
    _pd: *mut c_void,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    guard::minus1(|| {
        const CHANGE_TRANSLATION: c_int = 1 << 0;
        const CHANGE_ACCESS: c_int = 1 << 2;
        const SUPPORTED: c_int = (CHANGE_ACCESS << 1) - 1;
        let bad = m.is_null()
            || flags & !SUPPORTED != 0
            || (flags & CHANGE_TRANSLATION != 0 && (length == 0 || addr.is_null()))
            || (access != 0 && flags & CHANGE_ACCESS == 0);
        if bad {
            return minus1_errno(libc::EINVAL);
        }
        const ERR_CMD: c_int = -4;
        set_errno(libc::EOPNOTSUPP);
        ERR_CMD
    })
}
export!("ibv_rereg_mr" = rereg_mr);

//! The device context: `GET_CONTEXT` (the write command with driver udata,
//! or the ioctl method plus `ASYNC_EVENT_ALLOC`), and the device queries
//! (`QUERY_DEVICE`, `QUERY_DEVICE_EX`).

use super::method::Method;
use super::{ioctl_unsupported, CommandPath, Dev};
use crate::error::{Error, Result};
use std::os::fd::{FromRawFd, OwnedFd};
use uverbs_abi::ioctl as io;
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// What `GET_CONTEXT` gives: the async event fd and the completion
/// vector count.
pub(crate) struct Opened {
    pub(crate) async_fd: OwnedFd,
    pub(crate) num_comp_vectors: u32,
}

/// `GET_CONTEXT`: the ioctl method (and `ASYNC_EVENT_ALLOC`) where `dev`
/// is on the ioctl path and the kernel has them, else the `write()`
/// command, which then carries the commands that have both
/// (`dev.path` becomes [`CommandPath::Write`]). Driver udata travels on
/// the write command only: a driver that needs it opens on the write
/// path.
pub(crate) fn get_context(dev: &mut Dev, udata_in: &[u8], udata_out: &mut [u8]) -> Result<Opened> {
    if dev.path == CommandPath::Ioctl {
        // Only the method itself falls back: once it has made the context,
        // the write command would be refused.
        match get_context_ioctl(dev) {
            Ok(num_comp_vectors) => {
                return Ok(Opened {
                    async_fd: async_event_alloc(dev)?,
                    num_comp_vectors,
                })
            }
            Err(e) if ioctl_unsupported(&e) => dev.path = CommandPath::Write,
            Err(e) => return Err(e),
        }
    }
    get_context_write(dev, udata_in, udata_out)
}

/// `GET_CONTEXT` through the `write()` command, with driver udata both
/// ways; it also creates the async event fd.
fn get_context_write(dev: &Dev, udata_in: &[u8], udata_out: &mut [u8]) -> Result<Opened> {
    let req = v::IbUverbsGetContext::new_zeroed();
    let resp = dev.write::<cmds::GetContext>(&req, udata_in, udata_out)?;
    let fd = i32::try_from(resp.async_fd)
        .ok()
        .filter(|&fd| fd >= 0)
        .ok_or_else(|| Error::bad_answer("GET_CONTEXT: no async event fd"))?;
    // SAFETY: the kernel just created this fd for us in GET_CONTEXT and
    // nothing else owns it.
    let async_fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(Opened {
        async_fd,
        num_comp_vectors: resp.num_comp_vectors,
    })
}

/// `GET_CONTEXT` through the ioctl method: the completion vector count.
/// Unlike the write command, it creates no async event fd.
fn get_context_ioctl(dev: &Dev) -> Result<u32> {
    let mut num_comp_vectors = [0u8; 4];
    let mut core_support = [0u8; 8];
    let mut storage = [0u64; io::attr_buf_words(2)];
    let mut call = dev.call(Method::GetContext, &mut storage);
    call.ptr_out(
        io::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
        &mut num_comp_vectors,
    )
    .ptr_out(io::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &mut core_support);
    dev.ioctl(&mut call)?;
    Ok(u32::from_ne_bytes(num_comp_vectors))
}

/// `ASYNC_EVENT_ALLOC`: the async event fd of a context the ioctl
/// `GET_CONTEXT` made.
fn async_event_alloc(dev: &Dev) -> Result<OwnedFd> {
    let mut storage = [0u64; io::attr_buf_words(1)];
    let mut call = dev.call(Method::AsyncEventAlloc, &mut storage);
    call.fd_new(io::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE);
    dev.ioctl(&mut call)?;
    let raw = call
        .new_fd(io::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
        .filter(|&f| f >= 0)
        .ok_or_else(|| Error::bad_answer("ASYNC_EVENT_ALLOC: no fd written back"))?;
    // SAFETY: the kernel just installed this fd for us in ASYNC_EVENT_ALLOC
    // and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `QUERY_DEVICE` (the legacy response every kernel gives).
pub(crate) fn query_device(dev: &Dev) -> Result<v::IbUverbsQueryDeviceResp> {
    dev.write0::<cmds::QueryDevice>(&v::IbUverbsQueryDevice::new_zeroed())
}

/// `QUERY_DEVICE_EX` (the extended write command).
pub(crate) fn query_device_ex(dev: &Dev) -> Result<v::IbUverbsExQueryDeviceResp> {
    dev.write_ex::<cmds::ExQueryDevice>(&v::IbUverbsExQueryDevice::new_zeroed())
}

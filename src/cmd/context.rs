//! The device context: `GET_CONTEXT` (the write command with driver udata,
//! or the ioctl method plus `ASYNC_EVENT_ALLOC`), and the device queries
//! every context needs before it creates objects.

use super::{ioctl, ioctl_unsupported, Dev};
use crate::error::{Error, Result};
use std::os::fd::{FromRawFd, OwnedFd};
use uverbs_abi::ioctl::{self as io, AttrArray};
use uverbs_abi::verbs::{self as v, cmds};
use zerocopy::FromZeros;

/// What `GET_CONTEXT` gives: the async event fd and the completion
/// vector count.
pub(crate) struct Opened {
    pub(crate) async_fd: OwnedFd,
    pub(crate) num_comp_vectors: u32,
}

/// `GET_CONTEXT` through the `write()` command, with driver udata both
/// ways; it also creates the async event fd.
pub(crate) fn get_context_write(
    dev: &Dev,
    udata_in: &[u8],
    udata_out: &mut [u8],
) -> Result<Opened> {
    let resp = dev.write::<cmds::GetContext>(
        "GET_CONTEXT",
        &v::IbUverbsGetContext::new_zeroed(),
        udata_in,
        udata_out,
    )?;
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

/// `GET_CONTEXT` through the ioctl method, then the async event fd through
/// `ASYNC_EVENT_ALLOC` (the ioctl `GET_CONTEXT`, unlike the write command,
/// does not create one). `None` when the kernel lacks the method.
pub(crate) fn get_context_ioctl(fd: &OwnedFd, driver_id: u32) -> Result<Option<Opened>> {
    let mut num_comp_vectors = [0u8; 4];
    let mut core_support = [0u8; 8];
    let mut storage = [0u64; io::attr_buf_words(2)];
    let mut attrs = AttrArray::new(
        &mut storage,
        io::UVERBS_OBJECT_DEVICE,
        io::UVERBS_METHOD_GET_CONTEXT,
        driver_id,
    );
    attrs
        .ptr_out(
            io::UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
            &mut num_comp_vectors,
        )
        .ptr_out(io::UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, &mut core_support);
    match ioctl(fd, "GET_CONTEXT (ioctl)", &mut attrs) {
        Ok(()) => {}
        Err(e) if ioctl_unsupported(&e) => return Ok(None),
        Err(e) => return Err(e),
    }

    let mut storage = [0u64; io::attr_buf_words(1)];
    let mut attrs = AttrArray::new(
        &mut storage,
        io::UVERBS_OBJECT_ASYNC_EVENT,
        io::UVERBS_METHOD_ASYNC_EVENT_ALLOC,
        driver_id,
    );
    attrs.fd_new(io::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE);
    ioctl(fd, "ASYNC_EVENT_ALLOC", &mut attrs)?;
    let raw = attrs
        .new_fd(io::UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
        .filter(|&f| f >= 0)
        .ok_or_else(|| Error::bad_answer("ASYNC_EVENT_ALLOC: no fd written back"))?;
    // SAFETY: the kernel just installed this fd for us in ASYNC_EVENT_ALLOC
    // and nothing else owns it.
    let async_fd = unsafe { OwnedFd::from_raw_fd(raw) };
    Ok(Some(Opened {
        async_fd,
        num_comp_vectors: u32::from_ne_bytes(num_comp_vectors),
    }))
}

/// `QUERY_DEVICE` (the legacy response every kernel gives).
pub(crate) fn query_device(dev: &Dev) -> Result<v::IbUverbsQueryDeviceResp> {
    dev.write0::<cmds::QueryDevice>("QUERY_DEVICE", &v::IbUverbsQueryDevice::new_zeroed())
}

/// `QUERY_DEVICE_EX` (the extended write command).
pub(crate) fn query_device_ex(dev: &Dev) -> Result<v::IbUverbsExQueryDeviceResp> {
    dev.write_ex::<cmds::ExQueryDevice>("QUERY_DEVICE_EX", &v::IbUverbsExQueryDevice::new_zeroed())
}

/// `QUERY_PORT` through the ioctl method (which adds `port_cap_flags2`
/// and `active_speed_ex`); `None` when the kernel lacks it.
pub(crate) fn query_port_ioctl(dev: &Dev, port: u8) -> Result<Option<io::IbUverbsQueryPortRespEx>> {
    use zerocopy::IntoBytes;
    let mut resp = io::IbUverbsQueryPortRespEx::new_zeroed();
    let mut storage = [0u64; io::attr_buf_words(2)];
    let mut attrs = dev.attrs(
        &mut storage,
        io::UVERBS_OBJECT_DEVICE,
        io::UVERBS_METHOD_QUERY_PORT,
    );
    attrs
        .const_in(io::UVERBS_ATTR_QUERY_PORT_PORT_NUM, u64::from(port))
        .ptr_out(io::UVERBS_ATTR_QUERY_PORT_RESP, resp.as_mut_bytes());
    match dev.ioctl("QUERY_PORT (ioctl)", &mut attrs) {
        Ok(()) => Ok(Some(resp)),
        Err(e) if ioctl_unsupported(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `QUERY_PORT` through the write command.
pub(crate) fn query_port_write(dev: &Dev, port: u8) -> Result<v::IbUverbsQueryPortResp> {
    let mut c = v::IbUverbsQueryPort::new_zeroed();
    c.port_num = port;
    dev.write0::<cmds::QueryPort>("QUERY_PORT", &c)
}

/// `QUERY_GID_ENTRY` (ioctl only).
pub(crate) fn query_gid_entry(dev: &Dev, port: u8, index: u32) -> Result<io::IbUverbsGidEntry> {
    use zerocopy::IntoBytes;
    let mut entry = io::IbUverbsGidEntry::new_zeroed();
    let mut storage = [0u64; io::attr_buf_words(4)];
    let mut attrs = dev.attrs(
        &mut storage,
        io::UVERBS_OBJECT_DEVICE,
        io::UVERBS_METHOD_QUERY_GID_ENTRY,
    );
    attrs
        .const_in(io::UVERBS_ATTR_QUERY_GID_ENTRY_PORT, u64::from(port))
        .const_in(io::UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, u64::from(index))
        .u32_in(io::UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0)
        .ptr_out(
            io::UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY,
            entry.as_mut_bytes(),
        );
    dev.ioctl("QUERY_GID_ENTRY", &mut attrs)?;
    Ok(entry)
}

/// `QUERY_GID_TABLE` (ioctl only) into a buffer of `max` entries; the
/// populated ones.
pub(crate) fn query_gid_table(dev: &Dev, max: usize) -> Result<Vec<io::IbUverbsGidEntry>> {
    use zerocopy::IntoBytes;
    let entry_size = std::mem::size_of::<io::IbUverbsGidEntry>();
    let mut entries = vec![io::IbUverbsGidEntry::new_zeroed(); max];
    let mut num = [0u8; 8];
    let mut storage = [0u64; io::attr_buf_words(4)];
    let mut attrs = dev.attrs(
        &mut storage,
        io::UVERBS_OBJECT_DEVICE,
        io::UVERBS_METHOD_QUERY_GID_TABLE,
    );
    attrs
        .const_in(
            io::UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE,
            entry_size as u64,
        )
        .u32_in(io::UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0)
        .ptr_out(
            io::UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES,
            entries.as_mut_slice().as_mut_bytes(),
        )
        .ptr_out(io::UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &mut num);
    dev.ioctl("QUERY_GID_TABLE", &mut attrs)?;
    let n = u64::from_ne_bytes(num);
    // The count is the kernel's word: never trust it past our buffer.
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= entries.len())
        .ok_or_else(|| {
            Error::bad_answer(format!(
                "QUERY_GID_TABLE: {n} entries in a {max}-entry buffer"
            ))
        })?;
    entries.truncate(n);
    Ok(entries)
}

//! [`AttrArray`]: the header and attribute array of one `RDMA_VERBS_IOCTL`
//! call, built in caller-provided storage.

use core::marker::PhantomData;

use zerocopy::{FromBytes, IntoBytes};

use super::{
    IbUverbsAttr, IbUverbsIoctlHdr, UVERBS_ATTR_CORE_IN, UVERBS_ATTR_CORE_OUT,
    UVERBS_ATTR_F_MANDATORY, UVERBS_ATTR_F_VALID_OUTPUT, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT,
    UVERBS_ATTR_WRITE_CMD, UVERBS_METHOD_INVOKE_WRITE, UVERBS_OBJECT_DEVICE,
};
use crate::verbs::{ExWriteCmd, WriteCmd, IB_USER_VERBS_CMD_FLAG_EXTENDED};

/// Bytes of the header.
const HDR_LEN: usize = core::mem::size_of::<IbUverbsIoctlHdr>();
/// Bytes of one attribute.
const ATTR_LEN: usize = core::mem::size_of::<IbUverbsAttr>();

/// The `u64` words of storage an [`AttrArray`] of `n` attributes needs:
/// `let mut buf = [0u64; attr_buf_words(4)];`.
pub const fn attr_buf_words(n: usize) -> usize {
    (HDR_LEN + n * ATTR_LEN) / 8
}

/// Why an attribute array cannot be used. The first error sticks:
/// [`AttrArray::ioctl_buf`] returns it, and later additions are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrError {
    /// More attributes than the storage holds.
    Full {
        /// How many it holds.
        capacity: usize,
    },
    /// Data longer than an attribute's `u16` length, or longer than 8
    /// bytes where the data must be inline.
    TooLong {
        /// The attribute.
        attr_id: u16,
        /// The data's length.
        len: usize,
    },
    /// The same attribute id twice (the kernel refuses it).
    Duplicate {
        /// The attribute.
        attr_id: u16,
    },
}

impl core::fmt::Display for AttrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AttrError::Full { capacity } => write!(f, "more than {capacity} ioctl attributes"),
            AttrError::TooLong { attr_id, len } => {
                write!(f, "ioctl attribute {attr_id:#x}: {len} bytes is too long")
            }
            AttrError::Duplicate { attr_id } => write!(f, "ioctl attribute {attr_id:#x} twice"),
        }
    }
}

impl std::error::Error for AttrError {}

/// The attribute array of one `RDMA_VERBS_IOCTL` call: an
/// [`IbUverbsIoctlHdr`] and up to [`capacity`](Self::capacity)
/// [`IbUverbsAttr`]s, written into caller-provided `u64` storage (so
/// 8-aligned, and no allocation).
///
/// Pointer attributes record the address and length of caller buffers as
/// `u64`s; the kernel reads and writes those buffers during the ioctl. The
/// lifetime `'a` ties them to the array: they stay borrowed, and cannot be
/// moved, freed or touched, for as long as the array is alive, so they
/// outlive the ioctl made with [`ioctl_buf`](Self::ioctl_buf). Read them
/// after dropping the array (or after [`finish`](Self::finish), which keeps
/// the written-back handles and flags without the borrows).
///
/// Adding never panics: too many attributes, an over-long buffer or a
/// repeated id set a sticky [`AttrError`] that `ioctl_buf` returns.
///
/// ```
/// use uverbs_abi::ioctl::*;
///
/// let mut storage = [0u64; attr_buf_words(2)];
/// let mut resp = [0u8; 48]; // struct ib_uverbs_query_port_resp_ex
/// let mut attrs = AttrArray::new(
///     &mut storage,
///     UVERBS_OBJECT_DEVICE,
///     UVERBS_METHOD_QUERY_PORT,
///     RdmaDriverId::RXE.0,
/// );
/// attrs
///     .const_in(UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
///     .ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
/// let buf = attrs.ioctl_buf().unwrap();
/// assert_eq!(buf.len(), 24 + 2 * 16);
/// // ioctl(fd, RDMA_VERBS_IOCTL, buf.as_mut_ptr()) happens here.
/// let done = attrs.finish();
/// assert_eq!(done.output_valid(UVERBS_ATTR_QUERY_PORT_RESP), Some(false));
/// resp[0]; // readable again once the array is finished
/// ```
///
/// A buffer cannot go away while the array still points at it:
///
/// ```compile_fail,E0597
/// use uverbs_abi::ioctl::*;
///
/// let mut storage = [0u64; attr_buf_words(1)];
/// let mut attrs = AttrArray::new(&mut storage, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_QUERY_PORT, 0);
/// {
///     let mut resp = [0u8; 48];
///     attrs.ptr_out(UVERBS_ATTR_QUERY_PORT_RESP, &mut resp);
/// } // `resp` dropped here while still borrowed
/// let _ = attrs.ioctl_buf();
/// ```
#[derive(Debug)]
pub struct AttrArray<'a> {
    buf: &'a mut [u64],
    object_id: u16,
    method_id: u16,
    driver_id: u32,
    num: usize,
    error: Option<AttrError>,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> AttrArray<'a> {
    /// An empty array for method `method_id` of object `object_id` on a
    /// device of driver `driver_id`
    /// ([`RdmaDriverId`](super::RdmaDriverId)), in `buf` (see
    /// [`attr_buf_words`]).
    pub fn new(buf: &'a mut [u64], object_id: u16, method_id: u16, driver_id: u32) -> Self {
        buf.fill(0);
        let error = (buf.len() < attr_buf_words(0)).then_some(AttrError::Full { capacity: 0 });
        AttrArray {
            buf,
            object_id,
            method_id,
            driver_id,
            num: 0,
            error,
            _borrows: PhantomData,
        }
    }

    /// How many attributes the storage holds.
    pub fn capacity(&self) -> usize {
        (self.buf.len() * 8).saturating_sub(HDR_LEN) / ATTR_LEN
    }

    /// How many attributes have been added.
    pub fn len(&self) -> usize {
        self.num
    }

    /// Whether no attribute has been added.
    pub fn is_empty(&self) -> bool {
        self.num == 0
    }

    /// The first error, if any.
    pub fn error(&self) -> Option<AttrError> {
        self.error
    }

    fn bytes(&self) -> &[u8] {
        self.buf.as_bytes()
    }

    fn slot(i: usize) -> core::ops::Range<usize> {
        HDR_LEN + i * ATTR_LEN..HDR_LEN + (i + 1) * ATTR_LEN
    }

    /// The `i`th attribute as it is now in the storage.
    fn read(&self, i: usize) -> Option<IbUverbsAttr> {
        let b = self.bytes().get(Self::slot(i))?;
        IbUverbsAttr::read_from_bytes(b).ok()
    }

    fn fail(&mut self, e: AttrError) -> &mut Self {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self
    }

    /// Appends one attribute, unless an error has been recorded.
    fn push(&mut self, attr: IbUverbsAttr) -> &mut Self {
        if self.error.is_some() {
            return self;
        }
        if self.find(attr.attr_id).is_some() {
            return self.fail(AttrError::Duplicate {
                attr_id: attr.attr_id,
            });
        }
        if self.num >= self.capacity() {
            let capacity = self.capacity();
            return self.fail(AttrError::Full { capacity });
        }
        let range = Self::slot(self.num);
        if let Some(slot) = self.buf.as_mut_bytes().get_mut(range) {
            slot.copy_from_slice(attr.as_bytes());
            self.num += 1;
        }
        self
    }

    fn find(&self, attr_id: u16) -> Option<usize> {
        (0..self.num).find(|&i| self.read(i).is_some_and(|a| a.attr_id == attr_id))
    }

    /// An attribute with no flags and no `attr_data`.
    fn attr(attr_id: u16, len: u16, data: u64) -> IbUverbsAttr {
        IbUverbsAttr {
            attr_id,
            len,
            flags: 0,
            attr_data: [0; 2],
            data,
        }
    }

    /// `data` as a PTR_IN attribute's `(len, data)`: inline (copied into
    /// `data`, native byte order, zero padded) when it is at most 8 bytes,
    /// else its address.
    fn in_data(attr_id: u16, data: &[u8]) -> Result<(u16, u64), AttrError> {
        let len = u16::try_from(data.len()).map_err(|_| AttrError::TooLong {
            attr_id,
            len: data.len(),
        })?;
        if data.len() <= 8 {
            let mut v = [0u8; 8];
            v[..data.len()].copy_from_slice(data);
            Ok((len, u64::from_ne_bytes(v)))
        } else {
            Ok((len, data.as_ptr() as u64))
        }
    }

    /// PTR_IN: `data` goes inline when it is at most 8 bytes (the kernel's
    /// rule), else by address; either way the kernel sees `data.len()`.
    pub fn ptr_in(&mut self, attr_id: u16, data: &'a [u8]) -> &mut Self {
        match Self::in_data(attr_id, data) {
            Ok((len, d)) => self.push(Self::attr(attr_id, len, d)),
            Err(e) => self.fail(e),
        }
    }

    /// PTR_IN with at most 8 bytes, copied inline (so not borrowed).
    /// Longer data is an [`AttrError::TooLong`].
    pub fn inline_in(&mut self, attr_id: u16, data: &[u8]) -> &mut Self {
        if data.len() > 8 {
            return self.fail(AttrError::TooLong {
                attr_id,
                len: data.len(),
            });
        }
        match Self::in_data(attr_id, data) {
            Ok((len, d)) => self.push(Self::attr(attr_id, len, d)),
            Err(e) => self.fail(e),
        }
    }

    /// PTR_IN of a `u32` (e.g. `UVERBS_ATTR_CREATE_CQ_CQE`), inline.
    pub fn u32_in(&mut self, attr_id: u16, value: u32) -> &mut Self {
        self.inline_in(attr_id, &value.to_ne_bytes())
    }

    /// PTR_IN of a `u64` (e.g. a user handle), inline.
    pub fn u64_in(&mut self, attr_id: u16, value: u64) -> &mut Self {
        self.inline_in(attr_id, &value.to_ne_bytes())
    }

    /// CONST_IN (`UVERBS_ATTR_CONST_IN`): the value inline as 8 bytes, as
    /// the kernel's `uverbs_get_const()` reads it.
    pub fn const_in(&mut self, attr_id: u16, value: u64) -> &mut Self {
        self.u64_in(attr_id, value)
    }

    /// ENUM_IN: element `elem_id` of an enum attribute, with its data
    /// (inline or by address, as [`ptr_in`](Self::ptr_in)).
    pub fn enum_in(&mut self, attr_id: u16, elem_id: u8, data: &'a [u8]) -> &mut Self {
        match Self::in_data(attr_id, data) {
            Ok((len, d)) => {
                let mut a = Self::attr(attr_id, len, d);
                a.attr_data = [elem_id, 0];
                self.push(a)
            }
            Err(e) => self.fail(e),
        }
    }

    /// PTR_OUT: the kernel writes up to `data.len()` bytes to `data` and
    /// sets [`UVERBS_ATTR_F_VALID_OUTPUT`] (see
    /// [`output_valid`](Self::output_valid)).
    pub fn ptr_out(&mut self, attr_id: u16, data: &'a mut [u8]) -> &mut Self {
        let Ok(len) = u16::try_from(data.len()) else {
            let len = data.len();
            return self.fail(AttrError::TooLong { attr_id, len });
        };
        self.push(Self::attr(attr_id, len, data.as_mut_ptr() as u64))
    }

    /// IDR in: an existing object's handle.
    pub fn idr_in(&mut self, attr_id: u16, handle: u32) -> &mut Self {
        self.push(Self::attr(attr_id, 0, u64::from(handle)))
    }

    /// IDR new: the kernel creates the object and writes its handle back
    /// (read it with [`new_handle`](Self::new_handle)).
    pub fn idr_new(&mut self, attr_id: u16) -> &mut Self {
        self.push(Self::attr(attr_id, 0, 0))
    }

    /// FD in: an existing file descriptor (`data_s64`).
    pub fn fd_in(&mut self, attr_id: u16, fd: i32) -> &mut Self {
        self.push(Self::attr(attr_id, 0, i64::from(fd) as u64))
    }

    /// FD new: the kernel creates a file and writes its descriptor back
    /// (read it with [`new_fd`](Self::new_fd)).
    pub fn fd_new(&mut self, attr_id: u16) -> &mut Self {
        self.push(Self::attr(attr_id, 0, 0))
    }

    /// The driver udata in ([`UVERBS_ATTR_UHW_IN`]). Nothing is added for
    /// an empty slice (the kernel then sees no driver data).
    pub fn uhw_in(&mut self, data: &'a [u8]) -> &mut Self {
        if data.is_empty() {
            return self;
        }
        self.ptr_in(UVERBS_ATTR_UHW_IN, data)
    }

    /// The driver udata out ([`UVERBS_ATTR_UHW_OUT`]). The kernel sets
    /// [`UVERBS_ATTR_F_VALID_OUTPUT`] only if the driver wrote it; when it
    /// did not, treat the buffer as unwritten. Nothing is added for an
    /// empty slice.
    pub fn uhw_out(&mut self, data: &'a mut [u8]) -> &mut Self {
        if data.is_empty() {
            return self;
        }
        self.ptr_out(UVERBS_ATTR_UHW_OUT, data)
    }

    /// Marks the attribute added last [`UVERBS_ATTR_F_MANDATORY`]: a
    /// kernel that does not know it fails the call with `EPROTONOSUPPORT`
    /// instead of ignoring it. Does nothing on an empty or failed array.
    pub fn mandatory(&mut self) -> &mut Self {
        if self.error.is_some() || self.num == 0 {
            return self;
        }
        let range = Self::slot(self.num - 1);
        if let Some(mut a) = self.read(self.num - 1) {
            a.flags |= UVERBS_ATTR_F_MANDATORY;
            if let Some(slot) = self.buf.as_mut_bytes().get_mut(range) {
                slot.copy_from_slice(a.as_bytes());
            }
        }
        self
    }

    /// The header as it will be sent: `length = 24 + 16 * num_attrs`,
    /// reserved fields 0.
    pub fn header(&self) -> IbUverbsIoctlHdr {
        IbUverbsIoctlHdr {
            length: (HDR_LEN + self.num * ATTR_LEN) as u16,
            object_id: self.object_id,
            method_id: self.method_id,
            num_attrs: self.num as u16,
            reserved1: 0,
            driver_id: self.driver_id,
            reserved2: 0,
        }
    }

    /// The bytes to pass to `ioctl(fd, RDMA_VERBS_IOCTL, ptr)`: exactly
    /// `24 + 16 * len()` bytes, the header written. The kernel writes back
    /// into them, so pass this slice's own pointer.
    pub fn ioctl_buf(&mut self) -> Result<&mut [u8], AttrError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let hdr = self.header();
        let len = usize::from(hdr.length);
        let bytes = self.buf.as_mut_bytes();
        bytes[..HDR_LEN].copy_from_slice(hdr.as_bytes());
        Ok(&mut bytes[..len])
    }

    /// The attribute with id `attr_id`, as it is now (after the call: with
    /// what the kernel wrote back).
    pub fn get(&self, attr_id: u16) -> Option<IbUverbsAttr> {
        self.find(attr_id).and_then(|i| self.read(i))
    }

    /// The handle the kernel wrote back into an [`idr_new`](Self::idr_new)
    /// attribute (`None` if there is no such attribute or it does not fit a
    /// handle).
    pub fn new_handle(&self, attr_id: u16) -> Option<u32> {
        self.get(attr_id).and_then(|a| u32::try_from(a.data).ok())
    }

    /// The file descriptor the kernel wrote back into an
    /// [`fd_new`](Self::fd_new) attribute.
    pub fn new_fd(&self, attr_id: u16) -> Option<i32> {
        self.get(attr_id)
            .and_then(|a| i32::try_from(a.data_s64()).ok())
    }

    /// Whether the kernel marked the output attribute `attr_id` written
    /// ([`UVERBS_ATTR_F_VALID_OUTPUT`]); `None` if there is no such
    /// attribute.
    pub fn output_valid(&self, attr_id: u16) -> Option<bool> {
        self.get(attr_id)
            .map(|a| a.flags & UVERBS_ATTR_F_VALID_OUTPUT != 0)
    }

    /// Ends the borrows of the caller's buffers, keeping the header and
    /// attributes as the kernel left them.
    pub fn finish(self) -> IoctlOutput {
        let attrs = (0..self.num).filter_map(|i| self.read(i)).collect();
        IoctlOutput {
            hdr: self.header(),
            attrs,
        }
    }

    /// A `UVERBS_METHOD_INVOKE_WRITE` call of write command `C`: the
    /// command number (CONST_IN), the core request (CORE_IN, `response`
    /// member included; the kernel ignores it here), the core response
    /// buffer (CORE_OUT), and the driver udata in and out (UHW_IN/OUT,
    /// omitted when empty). `buf` needs [`attr_buf_words`]`(5)` words.
    pub fn invoke_write<C: WriteCmd>(
        buf: &'a mut [u64],
        driver_id: u32,
        req: &'a C::Req,
        resp: &'a mut C::Resp,
        udata_in: &'a [u8],
        udata_out: &'a mut [u8],
    ) -> Self {
        Self::invoke(
            buf,
            driver_id,
            C::CMD,
            req.as_bytes(),
            resp.as_mut_bytes(),
            udata_in,
            udata_out,
        )
    }

    /// [`invoke_write`](Self::invoke_write) for an extended command: the
    /// command number carries [`IB_USER_VERBS_CMD_FLAG_EXTENDED`], CORE_IN
    /// is the extended request alone (no extended header).
    pub fn invoke_ex_write<C: ExWriteCmd>(
        buf: &'a mut [u64],
        driver_id: u32,
        req: &'a C::Req,
        resp: &'a mut C::Resp,
        udata_in: &'a [u8],
        udata_out: &'a mut [u8],
    ) -> Self {
        Self::invoke(
            buf,
            driver_id,
            C::CMD | IB_USER_VERBS_CMD_FLAG_EXTENDED,
            req.as_bytes(),
            resp.as_mut_bytes(),
            udata_in,
            udata_out,
        )
    }

    fn invoke(
        buf: &'a mut [u64],
        driver_id: u32,
        cmd: u32,
        core_in: &'a [u8],
        core_out: &'a mut [u8],
        udata_in: &'a [u8],
        udata_out: &'a mut [u8],
    ) -> Self {
        let mut a = AttrArray::new(
            buf,
            UVERBS_OBJECT_DEVICE,
            UVERBS_METHOD_INVOKE_WRITE,
            driver_id,
        );
        a.const_in(UVERBS_ATTR_WRITE_CMD, u64::from(cmd))
            .mandatory();
        if !core_in.is_empty() {
            a.ptr_in(UVERBS_ATTR_CORE_IN, core_in).mandatory();
        }
        if !core_out.is_empty() {
            a.ptr_out(UVERBS_ATTR_CORE_OUT, core_out).mandatory();
        }
        a.uhw_in(udata_in).uhw_out(udata_out);
        a
    }
}

/// What an ioctl left in its attribute array, without the borrows of the
/// caller's buffers (from [`AttrArray::finish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoctlOutput {
    /// The header as sent.
    pub hdr: IbUverbsIoctlHdr,
    /// The attributes, as the kernel left them.
    pub attrs: Vec<IbUverbsAttr>,
}

impl IoctlOutput {
    /// The attribute with id `attr_id`.
    pub fn get(&self, attr_id: u16) -> Option<IbUverbsAttr> {
        self.attrs.iter().copied().find(|a| a.attr_id == attr_id)
    }

    /// The handle written back into an IDR-new attribute.
    pub fn new_handle(&self, attr_id: u16) -> Option<u32> {
        self.get(attr_id).and_then(|a| u32::try_from(a.data).ok())
    }

    /// The file descriptor written back into an FD-new attribute.
    pub fn new_fd(&self, attr_id: u16) -> Option<i32> {
        self.get(attr_id)
            .and_then(|a| i32::try_from(a.data_s64()).ok())
    }

    /// Whether the kernel marked output `attr_id` written.
    pub fn output_valid(&self, attr_id: u16) -> Option<bool> {
        self.get(attr_id)
            .map(|a| a.flags & UVERBS_ATTR_F_VALID_OUTPUT != 0)
    }
}

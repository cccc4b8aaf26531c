//! The uverbs ioctl ABI: `rdma_user_ioctl_cmds.h` (the framing),
//! `ib_user_ioctl_cmds.h` (object, method and attribute ids) and
//! `ib_user_ioctl_verbs.h` (the values and structs the attributes carry).
//!
//! One call is `ioctl(fd, RDMA_VERBS_IOCTL, buf)` where `buf` is an
//! [`IbUverbsIoctlHdr`] followed by `num_attrs` [`IbUverbsAttr`]s; the
//! kernel writes new object handles and file descriptors back into the
//! attributes, and marks outputs it wrote with
//! [`UVERBS_ATTR_F_VALID_OUTPUT`]. [`AttrArray`] builds such a buffer in
//! caller-provided storage, without allocating, and reads the written-back
//! values after the call.

mod attrs;
mod ids;
mod values;

#[cfg(test)]
mod tests;

pub use attrs::*;
pub use ids::*;
pub use values::*;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::layout::{ConstValue, NewerThanHeaders, StructLayout};
use crate::verbs::macros::{abi_consts, abi_layout, Registry};

/// `_IOC(dir, type, nr, size)` of `<asm-generic/ioctl.h>`: the encoding of
/// an ioctl request number used by x86, arm64 and riscv (not by powerpc,
/// mips, sparc or alpha, whose direction bits differ).
pub const fn ioc(dir: u32, ty: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | (ty << 8) | nr
}

/// `_IOC_WRITE | _IOC_READ`: the direction of an `_IOWR` request.
pub const IOC_READ_WRITE: u32 = 3;

abi_consts! { register_framing;
    /// `RDMA_IOCTL_MAGIC`: the ioctl type of the RDMA subsystem.
    RDMA_IOCTL_MAGIC: u32 = 0x1b;
    /// `RDMA_VERBS_IOCTL`:
    /// `_IOWR(RDMA_IOCTL_MAGIC, 1, struct ib_uverbs_ioctl_hdr)`, 0xC0181B01.
    RDMA_VERBS_IOCTL: u32 = ioc(
        IOC_READ_WRITE,
        RDMA_IOCTL_MAGIC,
        1,
        core::mem::size_of::<IbUverbsIoctlHdr>() as u32,
    );
    /// `UVERBS_ATTR_F_MANDATORY` (user input): fail with
    /// `EPROTONOSUPPORT` if the kernel does not know this attribute,
    /// rather than ignore it.
    UVERBS_ATTR_F_MANDATORY: u16 = 1 << 0;
    /// `UVERBS_ATTR_F_VALID_OUTPUT` (kernel output): the kernel wrote this
    /// output attribute. Implied for mandatory outputs.
    UVERBS_ATTR_F_VALID_OUTPUT: u16 = 1 << 1;
}

/// `struct ib_uverbs_attr` of `rdma_user_ioctl_cmds.h` (16 bytes): one
/// attribute of an ioctl call.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsAttr {
    /// `attr_id`: the method's attribute id (`UVERBS_ATTR_*`).
    pub attr_id: u16,
    /// `len`: the length of the data a pointer attribute points to (or
    /// holds inline); 0 for IDR and FD attributes.
    pub len: u16,
    /// `flags`: `UVERBS_ATTR_F_*`.
    pub flags: u16,
    /// `attr_data`, a C union kept as its two bytes: byte 0 is
    /// `enum_data.elem_id` (which element of an enum attribute),
    /// byte 1 `enum_data.reserved`; as a whole it is `reserved`. Must be 0
    /// except for enum attributes.
    pub attr_data: [u8; 2],
    /// `data` (also `data_s64`): inline data (`len <= 8`), a user pointer,
    /// an object handle or a file descriptor.
    pub data: u64,
}

impl IbUverbsAttr {
    /// `attr_data.enum_data.elem_id`.
    pub fn elem_id(&self) -> u8 {
        self.attr_data[0]
    }

    /// `data_s64`: `data` as a signed value (FD attributes).
    pub fn data_s64(&self) -> i64 {
        self.data as i64
    }
}

/// `struct ib_uverbs_ioctl_hdr` of `rdma_user_ioctl_cmds.h` (24 bytes),
/// without its flexible `attrs[]`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct IbUverbsIoctlHdr {
    /// `length`: header and attributes, `24 + 16 * num_attrs`.
    pub length: u16,
    /// `object_id`: `UVERBS_OBJECT_*` (or a driver object).
    pub object_id: u16,
    /// `method_id`: `UVERBS_METHOD_*` (or a driver method).
    pub method_id: u16,
    /// `num_attrs`.
    pub num_attrs: u16,
    /// `reserved1`: must be 0.
    pub reserved1: u64,
    /// `driver_id`: the device's [`RdmaDriverId`].
    pub driver_id: u32,
    /// `reserved2`: must be 0.
    pub reserved2: u32,
}

/// Every `#[repr(C)]` type of this module, for the header comparison test.
pub fn layouts() -> Vec<StructLayout> {
    let mut v = vec![
        abi_layout!(IbUverbsAttr => "struct ib_uverbs_attr" => {
            attr_id => "attr_id",
            len => "len",
            flags => "flags",
            attr_data => "attr_data",
            attr_data => "attr_data.reserved",
            attr_data => "attr_data.enum_data.elem_id",
            attr_data + 1 => "attr_data.enum_data.reserved",
            data => "data",
            data => "data_s64",
        }),
        crate::c_layout!(IbUverbsIoctlHdr => "struct ib_uverbs_ioctl_hdr" {
            length => "length",
            object_id => "object_id",
            method_id => "method_id",
            num_attrs => "num_attrs",
            reserved1 => "reserved1",
            driver_id => "driver_id",
            reserved2 => "reserved2",
        }),
    ];
    v.extend(values::layouts());
    v
}

fn registry() -> Registry {
    let mut r = Registry::default();
    register_framing(&mut r);
    ids::register(&mut r);
    values::register(&mut r);
    r
}

/// Every constant of this module, for the header comparison test.
pub fn consts() -> Vec<ConstValue> {
    registry().consts
}

/// Constants and fields newer than the installed headers.
pub fn newer_than_headers() -> Vec<NewerThanHeaders> {
    registry().newer
}

/// `(libibverbs name, value)` pairs checked against
/// `<infiniband/verbs.h>` by the layout test.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn libibverbs_consts() -> Vec<ConstValue> {
    registry().ibv
}

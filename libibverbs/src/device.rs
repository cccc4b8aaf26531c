//! Devices: `ibv_get_device_list`, `ibv_free_device_list` and what a
//! device names of itself (name, GUID, index).

use crate::abi::*;
use crate::convert::{fill, node_type, transport};
use crate::guard;
use crate::obj::CObject;
use crate::{errno_of, export, lock, null_errno};
use rverbs::Device;
use std::ffi::{c_char, c_int};
use std::sync::Mutex;

/// A device as C sees it (`struct ibv_device`, first) and the rverbs
/// device it names. Never freed: libibverbs too keeps device structs for
/// the life of the process, so a pointer from any list stays valid.
#[repr(C)]
pub(crate) struct DevBox {
    c: IbvDevice,
    pub(crate) dev: Device,
}

// SAFETY: repr(C) with the ibv_device first; C holds only pointers from
// get_device_list, which are boxes of this type.
unsafe impl CObject for DevBox {
    type C = IbvDevice;
}

// SAFETY: the C struct is written once, before the box is published in
// DEVICES, and never written again; the rverbs Device is plain data.
unsafe impl Sync for DevBox {}
// SAFETY: as above: nothing in it is tied to a thread.
unsafe impl Send for DevBox {}

/// Every device seen so far, by name: a re-listed device keeps its
/// `struct ibv_device` address.
static DEVICES: Mutex<Vec<&'static DevBox>> = Mutex::new(Vec::new());

impl DevBox {
    /// The box of a device first seen now, leaked (see [`DevBox`]).
    fn leak(dev: Device) -> &'static DevBox {
        let mut c = IbvDevice {
            ops: IbvDeviceOps {
                dummy1: std::ptr::null(),
                dummy2: std::ptr::null(),
            },
            node_type: node_type(dev.node_type()),
            transport_type: transport(dev.node_type()),
            name: [0; SYSFS_NAME_MAX],
            dev_name: [0; SYSFS_NAME_MAX],
            dev_path: [0; SYSFS_PATH_MAX],
            ibdev_path: [0; SYSFS_PATH_MAX],
        };
        let uverbs = dev
            .dev_path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        fill(&mut c.name, dev.name());
        fill(&mut c.dev_name, &uverbs);
        let dev_path = format!("/sys/class/infiniband_verbs/{uverbs}");
        fill(&mut c.dev_path, &dev_path);
        let ibdev_path = format!("/sys/class/infiniband/{}", dev.name());
        fill(&mut c.ibdev_path, &ibdev_path);
        Box::leak(Box::new(DevBox { c, dev }))
    }

    /// The box of the device at `d`, for as long as the process lives.
    ///
    /// # Safety
    /// `d` is NULL or a device from one of our lists (C contract).
    pub(crate) unsafe fn of_static(d: *mut IbvDevice) -> Option<&'static DevBox> {
        // SAFETY: the caller's contract; DevBoxes are leaked, never freed,
        // so the borrow may be 'static.
        unsafe { DevBox::of(d) }
    }
}

/// `ibv_get_device_list`: a NULL-terminated array, freed by
/// `ibv_free_device_list`; NULL + errno if the uverbs class is missing,
/// with `*num` 0 (rdma-core clears it first).
unsafe extern "C" fn get_device_list(num: *mut c_int) -> *mut *mut IbvDevice {
    guard::null(|| {
        if !num.is_null() {
            // SAFETY: num is NULL or a writable int (C contract).
            unsafe { num.write(0) };
        }
        let devs = match Device::list() {
            Ok(d) => d,
            Err(e) => {
                // rdma-core: ENOSYS when the kernel has no uverbs at all.
                let n = errno_of(&e);
                return null_errno(if n == libc::ENOENT { libc::ENOSYS } else { n });
            }
        };
        let mut known = lock(&DEVICES);
        let mut list: Vec<*mut IbvDevice> = Vec::with_capacity(devs.len() + 1);
        for d in devs {
            let b = match known.iter().find(|b| b.dev.name() == d.name()) {
                Some(b) => *b,
                None => {
                    let b = DevBox::leak(d);
                    known.push(b);
                    b
                }
            };
            list.push(std::ptr::from_ref(&b.c).cast_mut());
        }
        if !num.is_null() {
            // SAFETY: the caller passes NULL or a writable int.
            unsafe { *num = list.len() as c_int };
        }
        list.push(std::ptr::null_mut());
        Box::into_raw(list.into_boxed_slice()).cast()
    })
}
export!("ibv_get_device_list" = get_device_list);

unsafe extern "C" fn free_device_list(list: *mut *mut IbvDevice) {
    guard::void(|| {
        if list.is_null() {
            return;
        }
        let mut n = 0;
        // SAFETY: `list` came from get_device_list: NULL-terminated, and
        // n only advances over non-NULL entries before the terminator.
        while !unsafe { *list.add(n) }.is_null() {
            n += 1;
        }
        // SAFETY: get_device_list allocated exactly n + 1 pointers as a boxed
        // slice; the devices themselves are not freed (see DevBox).
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, n + 1)) });
    })
}
export!("ibv_free_device_list" = free_device_list);

unsafe extern "C" fn get_device_name(d: *mut IbvDevice) -> *const c_char {
    guard::value(std::ptr::null(), || {
        if d.is_null() {
            return null_errno::<c_char>(libc::EINVAL);
        }
        // SAFETY: a device of ours; `name` is NUL-terminated (fill keeps one).
        unsafe { (*d).name.as_ptr() }
    })
}
export!("ibv_get_device_name" = get_device_name);

/// `ibv_get_device_guid`: the node GUID in network order (`__be64`).
unsafe extern "C" fn get_device_guid(d: *mut IbvDevice) -> u64 {
    guard::value(0, || {
        // SAFETY: a device of ours (C contract).
        match unsafe { DevBox::of(d) } {
            Some(b) => b.dev.node_guid().to_be(),
            None => 0,
        }
    })
}
export!("ibv_get_device_guid" = get_device_guid);

unsafe extern "C" fn get_device_index(d: *mut IbvDevice) -> c_int {
    guard::value(-1, || {
        // SAFETY: a device of ours (C contract).
        let Some(b) = (unsafe { DevBox::of(d) }) else {
            return -1;
        };
        std::fs::read_to_string(format!(
            "/sys/class/infiniband/{}/ibdev_index",
            b.dev.name()
        ))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(-1)
    })
}
export!("ibv_get_device_index" = get_device_index);

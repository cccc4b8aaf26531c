//! Devices and contexts: `ibv_get_device_list`, `ibv_open_device`, the
//! queries `ibv_devinfo` makes, and the sysfs helpers it calls.

use crate::abi::*;
use crate::guard;
use crate::{errno_of, export, null_errno, ret_errno, set_errno};
use rverbs::{Context, Device, Driver, NodeType};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::mem::offset_of;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// A device as C sees it (`struct ibv_device`, first) and the rverbs
/// device it names. Never freed: libibverbs too keeps device structs for
/// the life of the process, so a pointer from any list stays valid.
#[repr(C)]
pub(crate) struct DevBox {
    pub(crate) c: IbvDevice,
    pub(crate) dev: Device,
}

// SAFETY: the C struct is written once, before the box is published in
// DEVICES, and never written again; the rverbs Device is plain data.
unsafe impl Sync for DevBox {}
// SAFETY: as above: nothing in it is tied to a thread.
unsafe impl Send for DevBox {}

/// Every device seen so far, by name: a re-listed device keeps its
/// `struct ibv_device` address.
static DEVICES: Mutex<Vec<&'static DevBox>> = Mutex::new(Vec::new());

fn fill(dst: &mut [c_char], s: &str) {
    // Truncated to leave the terminating NUL, as libibverbs' strncpy does.
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

fn node_type(n: NodeType) -> c_int {
    match n {
        NodeType::Ca => 1,
        NodeType::Switch => 2,
        NodeType::Router => 3,
        NodeType::Rnic => 4,
        NodeType::Usnic => 5,
        NodeType::UsnicUdp => 6,
        NodeType::Unspecified => 7,
        NodeType::Unknown(_) => -1,
    }
}

/// `enum ibv_transport_type` for a node type, as libibverbs derives it.
fn transport(n: NodeType) -> c_int {
    match n {
        NodeType::Ca | NodeType::Switch | NodeType::Router => 0,
        NodeType::Rnic => 1,
        NodeType::Usnic => 2,
        NodeType::UsnicUdp => 3,
        NodeType::Unspecified => 4,
        NodeType::Unknown(_) => -1,
    }
}

fn dev_box(dev: Device) -> &'static DevBox {
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
    fill(
        &mut c.dev_path,
        &format!("/sys/class/infiniband_verbs/{uverbs}"),
    );
    fill(
        &mut c.ibdev_path,
        &format!("/sys/class/infiniband/{}", dev.name()),
    );
    Box::leak(Box::new(DevBox { c, dev }))
}

/// `ibv_get_device_list`: a NULL-terminated array, freed by
/// `ibv_free_device_list`; NULL + errno if the uverbs class is missing.
unsafe extern "C" fn get_device_list(num: *mut c_int) -> *mut *mut IbvDevice {
    guard::null(|| {
        let devs = match Device::list() {
            Ok(d) => d,
            Err(e) => {
                // rdma-core: ENOSYS when the kernel has no uverbs at all.
                let n = errno_of(&e);
                return null_errno(if n == libc::ENOENT { libc::ENOSYS } else { n });
            }
        };
        let mut known = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<*mut IbvDevice> = Vec::with_capacity(devs.len() + 1);
        for d in devs {
            let b = match known.iter().find(|b| b.dev.name() == d.name()) {
                Some(b) => *b,
                None => {
                    let b = dev_box(d);
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

/// The DevBox behind a `struct ibv_device *` from our lists.
unsafe fn dev_of<'a>(d: *mut IbvDevice) -> Option<&'a DevBox> {
    // SAFETY: the caller passes a device of ours (the C contract);
    // `c` is DevBox's first field, so the addresses coincide.
    unsafe { d.cast::<DevBox>().as_ref() }
}

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
        match unsafe { dev_of(d) } {
            Some(b) => b.dev.node_guid().to_be(),
            None => 0,
        }
    })
}
export!("ibv_get_device_guid" = get_device_guid);

unsafe extern "C" fn get_device_index(d: *mut IbvDevice) -> c_int {
    guard::value(-1, || {
        // SAFETY: a device of ours (C contract).
        let Some(b) = (unsafe { dev_of(d) }) else {
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

/// An open device: `struct verbs_context` (which ends with the
/// `struct ibv_context` C programs hold) first, then the rverbs context.
#[repr(C)]
pub(crate) struct CtxBox {
    pub(crate) v: VerbsContext,
    pub(crate) ctx: Context,
    pub(crate) dev: &'static DevBox,
    /// Held while an async event is read and counted, and while a destroy
    /// decides and destroys (`async_event::read_counted`).
    pub(crate) async_reading: Mutex<()>,
}

/// Offset of the `ibv_context` inside a [`CtxBox`].
const CTX_OFF: usize = offset_of!(CtxBox, v) + offset_of!(VerbsContext, context);

/// The CtxBox behind a `struct ibv_context *` of ours.
pub(crate) unsafe fn ctx_of<'a>(c: *mut IbvContext) -> Option<&'a CtxBox> {
    if c.is_null() {
        return None;
    }
    // SAFETY: contexts come only from open_device, where the ibv_context
    // is CTX_OFF bytes into a live CtxBox (the C contract: not closed).
    unsafe { c.cast::<u8>().sub(CTX_OFF).cast::<CtxBox>().as_ref() }
}

unsafe extern "C" fn open_device(d: *mut IbvDevice) -> *mut IbvContext {
    guard::null(|| {
        // SAFETY: a device of ours (C contract).
        let Some(dev) = (unsafe { dev_of(d) }) else {
            return null_errno(libc::EINVAL);
        };
        // The DevBox outlives everything (never freed): a 'static borrow.
        // SAFETY: DevBoxes are leaked in dev_box and never freed.
        let dev: &'static DevBox = unsafe { &*std::ptr::from_ref(dev) };
        let ctx = match Context::open(&dev.dev) {
            Ok(c) => c,
            Err(e) => return null_errno(errno_of(&e)),
        };
        let mut ops: IbvContextOps = IbvContextOps {
            compat_a: [std::ptr::null(); 7],
            alloc_mw: None,
            bind_mw: None,
            dealloc_mw: None,
            compat_create_cq: std::ptr::null(),
            poll_cq: None,
            req_notify_cq: None,
            compat_b: [std::ptr::null(); 7],
            post_srq_recv: None,
            compat_c: [std::ptr::null(); 4],
            post_send: None,
            post_recv: None,
            compat_d: [std::ptr::null(); 5],
        };
        crate::post::fill_ops(&mut ops);
        let b = Box::new(CtxBox {
            v: VerbsContext {
                query_port: Some(query_port_ex),
                ops_a: [std::ptr::null(); 24],
                create_cq_ex: None,
                priv_: std::ptr::null_mut(),
                query_device_ex: Some(query_device_ex),
                ops_b: [std::ptr::null(); 5],
                create_qp_ex: None,
                ops_c: [std::ptr::null(); 4],
                abi_placeholder3: 0,
                sz: std::mem::size_of::<VerbsContext>(),
                context: IbvContext {
                    device: d,
                    ops,
                    // rverbs does not hand out its command fd: C code that
                    // issues commands itself is not supported.
                    cmd_fd: -1,
                    async_fd: ctx.async_fd().as_raw_fd(),
                    num_comp_vectors: ctx.num_comp_vectors() as c_int,
                    mutex: libc::PTHREAD_MUTEX_INITIALIZER,
                    abi_compat: VERBS_ABI_IS_EXTENDED,
                },
            },
            ctx,
            dev,
            async_reading: Mutex::new(()),
        });
        let mut b = b;
        crate::qp_ex::fill_verbs_ops(&mut b.v);
        crate::cq_ex::fill_verbs_ops(&mut b.v);
        let p = Box::into_raw(b);
        // SAFETY: p is the live box just made; its context field is in it.
        unsafe { std::ptr::addr_of_mut!((*p).v.context) }
    })
}
export!("ibv_open_device" = open_device);

/// `ibv_close_device`: 0, as rdma-core answers whatever is left open (the
/// kernel objects go with the last of rverbs' references to the context).
unsafe extern "C" fn close_device(c: *mut IbvContext) -> c_int {
    guard::errno(|| {
        if c.is_null() {
            return ret_errno(libc::EINVAL);
        }
        // SAFETY: an open context of ours (C contract): CTX_OFF into a box
        // made by Box::into_raw in open_device, closed once.
        drop(unsafe { Box::from_raw(c.cast::<u8>().sub(CTX_OFF).cast::<CtxBox>()) });
        0
    })
}
export!("ibv_close_device" = close_device);

/// `fw_ver` as each provider prints it (rxe: `%d.%d.%d`, mlx5:
/// `%d.%d.%04d` of the same three 16-bit fields).
fn fw_ver(driver: Driver, raw: u64) -> String {
    let (a, b, c) = ((raw >> 32) & 0xffff, (raw >> 16) & 0xffff, raw & 0xffff);
    match driver {
        Driver::Mlx5 => format!("{a}.{b}.{c:04}"),
        _ => format!("{a}.{b}.{c}"),
    }
}

fn device_attr(driver: Driver, a: &rverbs::DeviceAttr) -> IbvDeviceAttr {
    let i = |v: u32| v.min(c_int::MAX as u32) as c_int;
    let mut r = IbvDeviceAttr {
        fw_ver: [0; 64],
        node_guid: a.node_guid.to_be(),
        sys_image_guid: a.sys_image_guid.to_be(),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: i(a.max_qp),
        max_qp_wr: i(a.max_qp_wr),
        device_cap_flags: a.device_cap_flags,
        max_sge: i(a.max_sge),
        max_sge_rd: i(a.max_sge_rd),
        max_cq: i(a.max_cq),
        max_cqe: i(a.max_cqe),
        max_mr: i(a.max_mr),
        max_pd: i(a.max_pd),
        max_qp_rd_atom: i(a.max_qp_rd_atom),
        max_ee_rd_atom: i(a.max_ee_rd_atom),
        max_res_rd_atom: i(a.max_res_rd_atom),
        max_qp_init_rd_atom: i(a.max_qp_init_rd_atom),
        max_ee_init_rd_atom: i(a.max_ee_init_rd_atom),
        atomic_cap: i(a.atomic_cap),
        max_ee: i(a.max_ee),
        max_rdd: i(a.max_rdd),
        max_mw: i(a.max_mw),
        max_raw_ipv6_qp: i(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: i(a.max_raw_ethy_qp),
        max_mcast_grp: i(a.max_mcast_grp),
        max_mcast_qp_attach: i(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: i(a.max_total_mcast_qp_attach),
        max_ah: i(a.max_ah),
        max_fmr: i(a.max_fmr),
        max_map_per_fmr: i(a.max_map_per_fmr),
        max_srq: i(a.max_srq),
        max_srq_wr: i(a.max_srq_wr),
        max_srq_sge: i(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
    };
    fill(&mut r.fw_ver, &fw_ver(driver, a.fw_ver));
    r
}

unsafe extern "C" fn query_device(c: *mut IbvContext, out: *mut IbvDeviceAttr) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return ret_errno(libc::EINVAL);
        };
        if out.is_null() {
            return ret_errno(libc::EINVAL);
        }
        match b.ctx.query_device() {
            // SAFETY: out is a writable ibv_device_attr (C contract, non-NULL).
            Ok(a) => unsafe { out.write(device_attr(b.dev.dev.driver(), &a)) },
            Err(e) => return ret_errno(errno_of(&e)),
        }
        0
    })
}
export!("ibv_query_device" = query_device);

/// `verbs_context.query_device_ex`, what `verbs.h`'s inline
/// `ibv_query_device_ex` calls (`QUERY_DEVICE_EX`): writes the first
/// `len` bytes (the caller's `sizeof`). rverbs does not report the TSO,
/// packet pacing and PCI atomic capabilities: 0, as on rxe.
unsafe extern "C" fn query_device_ex(
    c: *mut IbvContext,
    input: *const c_void,
    out: *mut IbvDeviceAttrEx,
    len: usize,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return libc::EINVAL;
        };
        // SAFETY: NULL or a readable ibv_query_device_ex_input, whose first
        // member is `comp_mask` (u32); none is defined.
        if !input.is_null() && unsafe { input.cast::<u32>().read_unaligned() } != 0 {
            return libc::EINVAL;
        }
        if out.is_null() || len < std::mem::size_of::<IbvDeviceAttr>() {
            return libc::EINVAL;
        }
        let a = match b.ctx.query_device_ex() {
            Ok(a) => a,
            Err(e) => return errno_of(&e),
        };
        let r = IbvDeviceAttrEx {
            orig_attr: device_attr(b.dev.dev.driver(), &a.orig),
            comp_mask: 0,
            odp_caps: IbvOdpCaps {
                general_caps: a.odp_general_caps,
                rc_odp_caps: a.odp_rc_caps,
                uc_odp_caps: a.odp_uc_caps,
                ud_odp_caps: a.odp_ud_caps,
            },
            completion_timestamp_mask: a.completion_timestamp_mask,
            hca_core_clock: a.hca_core_clock,
            device_cap_flags_ex: a.device_cap_flags_ex,
            tso_caps: IbvTsoCaps::default(),
            rss_caps: IbvRssCaps {
                supported_qpts: a.rss_supported_qpts,
                max_rwq_indirection_tables: a.max_rwq_indirection_tables,
                max_rwq_indirection_table_size: a.max_rwq_indirection_table_size,
                ..IbvRssCaps::default()
            },
            max_wq_type_rq: a.max_wq_type_rq,
            packet_pacing_caps: IbvPacketPacingCaps::default(),
            raw_packet_caps: a.raw_packet_caps,
            tm_caps: IbvTmCaps {
                max_rndv_hdr_size: a.tm_max_rndv_hdr_size,
                max_num_tags: a.tm_max_num_tags,
                flags: a.tm_flags,
                max_ops: a.tm_max_ops,
                max_sge: a.tm_max_sge,
            },
            cq_mod_caps: IbvCqModerationCaps {
                max_cq_count: a.max_cq_moderation_count,
                max_cq_period: a.max_cq_moderation_period,
            },
            max_dm_size: a.max_dm_size,
            pci_atomic_caps: IbvPciAtomicCaps::default(),
            xrc_odp_caps: a.odp_xrc_caps,
            phys_port_cnt_ex: u32::from(a.orig.phys_port_cnt),
        };
        let len = len.min(std::mem::size_of::<IbvDeviceAttrEx>());
        // SAFETY: out has room for len bytes (C contract; at most the struct's
        // size), and r is a distinct local.
        unsafe {
            std::ptr::copy_nonoverlapping(
                std::ptr::from_ref(&r).cast::<u8>(),
                out.cast::<u8>(),
                len,
            )
        };
        0
    })
}

fn port_attr(b: &CtxBox, port: u8) -> Result<IbvPortAttr, c_int> {
    let p = b.ctx.query_port(port).map_err(|e| errno_of(&e))?;
    Ok(IbvPortAttr {
        state: c_int::from(p.state),
        max_mtu: c_int::from(p.max_mtu),
        active_mtu: c_int::from(p.active_mtu),
        gid_tbl_len: p.gid_tbl_len.min(c_int::MAX as u32) as c_int,
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        init_type_reply: p.init_type_reply,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: p.link_layer,
        flags: p.flags,
        port_cap_flags2: p.port_cap_flags2,
    })
}

/// Copies the first `len` bytes of `a` to `out` (callers of the compat
/// symbol and of older headers pass a shorter struct).
unsafe fn write_prefix(a: &IbvPortAttr, out: *mut IbvPortAttr, len: usize) {
    let len = len.min(std::mem::size_of::<IbvPortAttr>());
    // SAFETY: out has room for len bytes (C contract; len is at most the
    // struct's size), and `a` is a distinct local.
    unsafe {
        std::ptr::copy_nonoverlapping(std::ptr::from_ref(a).cast::<u8>(), out.cast::<u8>(), len)
    };
}

/// `verbs_context.query_port`: what `verbs.h`'s inline `ibv_query_port`
/// calls, with the caller's `sizeof(struct ibv_port_attr)`.
unsafe extern "C" fn query_port_ex(
    c: *mut IbvContext,
    port: u8,
    out: *mut IbvPortAttr,
    len: usize,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return ret_errno(libc::EINVAL);
        };
        if out.is_null() {
            return ret_errno(libc::EINVAL);
        }
        match port_attr(b, port) {
            // SAFETY: out has room for len bytes (C contract).
            Ok(a) => unsafe { write_prefix(&a, out, len) },
            Err(e) => return ret_errno(e),
        }
        0
    })
}

/// The exported `ibv_query_port`: the 1.1 ABI's shorter struct.
unsafe extern "C" fn query_port_compat(
    c: *mut IbvContext,
    port: u8,
    out: *mut IbvPortAttr,
) -> c_int {
    guard::errno(|| {
        // SAFETY: the compat struct is COMPAT_PORT_ATTR_LEN bytes (C contract).
        unsafe { query_port_ex(c, port, out, COMPAT_PORT_ATTR_LEN) }
    })
}
export!("ibv_query_port" = query_port_compat);

/// `ibv_query_gid`: 0, or -1 with errno. An empty entry reads as the zero
/// GID, as rdma-core keeps for its API.
unsafe extern "C" fn query_gid(
    c: *mut IbvContext,
    port: u8,
    index: c_int,
    gid: *mut IbvGid,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        if gid.is_null() || index < 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        let raw = match b.ctx.query_gid(port, index as u32) {
            Ok(g) => g,
            Err(e) if matches!(errno_of(&e), libc::ENODATA | libc::EINVAL) => [0; 16],
            Err(e) => {
                set_errno(errno_of(&e));
                return -1;
            }
        };
        // SAFETY: gid is a writable union ibv_gid (C contract, non-NULL).
        unsafe { gid.write(IbvGid { raw }) };
        0
    })
}
export!("ibv_query_gid" = query_gid);

/// One populated GID table entry in C's form.
fn gid_entry(e: &rverbs::GidEntry) -> IbvGidEntry {
    IbvGidEntry {
        gid: IbvGid { raw: e.gid },
        gid_index: e.index,
        port_num: e.port,
        // enum ibv_gid_type: IB 0, RoCE v1 1, RoCE v2 2.
        gid_type: match e.gid_type {
            rverbs::GidType::Ib => 0,
            rverbs::GidType::RoceV1 => 1,
            rverbs::GidType::RoceV2 => 2,
            rverbs::GidType::Other(t) => t,
        },
        ndev_ifindex: e.netdev_ifindex,
    }
}

/// `_ibv_query_gid_ex` (what `verbs.h`'s `ibv_query_gid_ex` calls): one
/// populated entry, or `ENODATA` for an empty one; an errno return.
unsafe extern "C" fn query_gid_ex(
    c: *mut IbvContext,
    port: u32,
    index: u32,
    out: *mut IbvGidEntry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    guard::errno(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return libc::EINVAL;
        };
        if flags != 0 || out.is_null() || entry_size < std::mem::size_of::<IbvGidEntry>() {
            return libc::EINVAL;
        }
        let Ok(port8) = u8::try_from(port) else {
            return libc::EINVAL;
        };
        let table = match b.ctx.gid_table(port8) {
            Ok(t) => t,
            Err(e) => return errno_of(&e),
        };
        match table.iter().find(|e| e.index == index) {
            Some(e) => {
                // SAFETY: out has room for entry_size >= size_of bytes (C contract).
                unsafe { out.write_unaligned(gid_entry(e)) };
                0
            }
            None => libc::ENODATA,
        }
    })
}
export!("_ibv_query_gid_ex" = query_gid_ex);

/// `_ibv_query_gid_table` (what `ibv_query_gid_table` calls): every
/// populated entry of every port, `entry_size` apart; the count, or a
/// negative errno (`EINVAL` if they do not fit, as the kernel answers).
unsafe extern "C" fn query_gid_table(
    c: *mut IbvContext,
    out: *mut IbvGidEntry,
    max: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    guard::value(-(guard::PANICKED as isize), || {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            return -(libc::EINVAL as isize);
        };
        if flags != 0
            || entry_size < std::mem::size_of::<IbvGidEntry>()
            || (max > 0 && out.is_null())
        {
            return -(libc::EINVAL as isize);
        }
        let table = match b.ctx.query_gid_table() {
            Ok(t) => t,
            Err(e) => return -(errno_of(&e) as isize),
        };
        if table.len() > max {
            return -(libc::EINVAL as isize);
        }
        for (i, e) in table.iter().enumerate() {
            // SAFETY: out has room for max entries of entry_size bytes (C
            // contract); i < table.len() <= max.
            unsafe {
                out.cast::<u8>()
                    .add(i * entry_size)
                    .cast::<IbvGidEntry>()
                    .write_unaligned(gid_entry(e))
            };
        }
        table.len() as isize
    })
}
export!("_ibv_query_gid_table" = query_gid_table);

fn read_sysfs(path: &str) -> Result<String, c_int> {
    std::fs::read_to_string(path)
        .map(|s| s.trim_end_matches('\n').to_string())
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// `ibv_query_pkey`: from sysfs `ports/P/pkeys/I`, as rdma-core reads it;
/// written big-endian.
unsafe extern "C" fn query_pkey(
    c: *mut IbvContext,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        let path = format!(
            "/sys/class/infiniband/{}/ports/{port}/pkeys/{index}",
            b.dev.dev.name()
        );
        let v = read_sysfs(&path).and_then(|s| {
            u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).map_err(|_| libc::EINVAL)
        });
        match v {
            Ok(v) if !pkey.is_null() => {
                // SAFETY: pkey is a writable __be16 (C contract, non-NULL).
                unsafe { pkey.write(v.to_be()) };
                0
            }
            Ok(_) => {
                set_errno(libc::EINVAL);
                -1
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        }
    })
}
export!("ibv_query_pkey" = query_pkey);

/// `ibv_query_gid_type` (IBVERBS_PRIVATE_34, which `ibv_devinfo` calls):
/// `enum ibv_gid_type_sysfs` from sysfs `gid_attrs/types/I`, as rdma-core
/// reads it. An entry the kernel reports no type for (empty) is RoCE v1.
unsafe extern "C" fn query_gid_type(
    c: *mut IbvContext,
    port: u8,
    index: c_uint,
    out: *mut c_int,
) -> c_int {
    guard::minus1(|| {
        // SAFETY: an open context of ours (C contract).
        let Some(b) = (unsafe { ctx_of(c) }) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        let path = format!(
            "/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}",
            b.dev.dev.name()
        );
        let t = match read_sysfs(&path) {
            Ok(s) if s == "RoCE v2" => 1,
            Ok(s) if s == "IB/RoCE v1" => 0,
            Ok(_) => {
                set_errno(libc::EOPNOTSUPP);
                return -1;
            }
            Err(libc::EINVAL) | Err(libc::ENOENT) => 0,
            Err(e) => {
                set_errno(e);
                return -1;
            }
        };
        if out.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: out is a writable enum (C contract, non-NULL).
        unsafe { out.write(t) };
        0
    })
}
export!("ibv_query_gid_type" = query_gid_type);

/// `ibv_read_sysfs_file(dir, file, buf, size)`: the file's bytes, a
/// trailing newline replaced by NUL; the length, or -1.
unsafe extern "C" fn read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    guard::minus1(|| {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: dir and file are NUL-terminated strings (C contract).
        let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let path = format!("{}/{}", d.to_string_lossy(), f.to_string_lossy());
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                return -1;
            }
        };
        let mut len = data.len().min(size);
        // SAFETY: buf has room for size bytes (C contract); len <= size.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<c_char>(), buf, len) };
        if len > 0 && data[len - 1] == b'\n' {
            len -= 1;
            // SAFETY: len < size here.
            unsafe { *buf.add(len) = 0 };
        } else if len < size {
            // SAFETY: len < size.
            unsafe { *buf.add(len) = 0 };
        }
        len as c_int
    })
}
export!("ibv_read_sysfs_file" = read_sysfs_file);

/// `ibv_fork_init`: rverbs needs no fork preparation on the kernels it
/// supports (5.13+ copies pinned pages on fork); 0, as libibverbs returns
/// when the kernel is fork-safe.
extern "C" fn fork_init() -> c_int {
    guard::errno(|| 0)
}
export!("ibv_fork_init" = fork_init);

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED` (2).
extern "C" fn is_fork_initialized() -> c_int {
    guard::value(2, || 2)
}
export!("ibv_is_fork_initialized" = is_fork_initialized);

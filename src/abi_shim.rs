//! TEMPORARY: the `ib_user_verbs.h` structs the root crate uses, until
//! `uverbs-abi`'s verbs module lands; then this file is deleted and the
//! imports switch to `uverbs_abi::verbs`. Until then the test at the bottom
//! checks every struct's size, alignment and field offsets, and every
//! command number, against the installed C header.
#![allow(missing_docs, dead_code)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// (C struct name, size, align, [(C member, offset)])
pub(crate) type Layout = (&'static str, usize, usize, Vec<(&'static str, usize)>);

macro_rules! abi {
    ($($name:ident $c:literal $(align $a:literal)? { $($f:ident : $t:ty),* $(,)? })*) => {
        $(
            // `align 8`: the C struct ends in an `__aligned_u64 driver_data[]`
            // flexible array, which adds alignment but no size.
            #[doc = concat!("`struct ", $c, "` of `ib_user_verbs.h`.")]
            #[repr(C $(, align($a))?)]
            #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
            pub struct $name { $(pub $f: $t),* }
        )*
        /// Every struct above, for the layout test.
        pub(crate) fn layouts() -> Vec<Layout> {
            vec![$((
                $c,
                ::core::mem::size_of::<$name>(),
                ::core::mem::align_of::<$name>(),
                vec![$((stringify!($f), ::core::mem::offset_of!($name, $f))),*],
            )),*]
        }
    };
}

macro_rules! cmds {
    ($($name:ident = $v:expr,)*) => {
        $(pub const $name: u32 = $v;)*
        /// Every command number above, for the layout test.
        pub(crate) fn commands() -> Vec<(&'static str, u32)> {
            vec![$((stringify!($name), $name)),*]
        }
    };
}

/// RDMA netlink (`rdma_netlink.h`, `linux/netlink.h`) and driver ids
/// (`ib_user_ioctl_verbs.h`), checked by the same test.
macro_rules! nl_consts {
    ($($name:ident : $t:ty = $v:expr,)*) => {
        $(pub const $name: $t = $v;)*
        /// Every constant above, for the layout test.
        pub(crate) fn nl_constants() -> Vec<(&'static str, i64)> {
            vec![$((stringify!($name), $name as i64)),*]
        }
    };
}

nl_consts! {
    NETLINK_RDMA: i32 = 20,
    RDMA_NL_NLDEV: u16 = 5,
    RDMA_NLDEV_CMD_GET: u16 = 1,
    RDMA_NLDEV_CMD_NEWLINK: u16 = 3,
    RDMA_NLDEV_CMD_DELLINK: u16 = 4,
    RDMA_NLDEV_CMD_PORT_GET: u16 = 5,
    RDMA_NLDEV_CMD_GET_CHARDEV: u16 = 15,
    RDMA_NLDEV_ATTR_DEV_INDEX: u16 = 1,
    RDMA_NLDEV_ATTR_DEV_NAME: u16 = 2,
    RDMA_NLDEV_ATTR_PORT_INDEX: u16 = 3,
    RDMA_NLDEV_ATTR_FW_VERSION: u16 = 5,
    RDMA_NLDEV_ATTR_NODE_GUID: u16 = 6,
    RDMA_NLDEV_ATTR_SYS_IMAGE_GUID: u16 = 7,
    RDMA_NLDEV_ATTR_PORT_STATE: u16 = 12,
    RDMA_NLDEV_ATTR_PORT_PHYS_STATE: u16 = 13,
    RDMA_NLDEV_ATTR_DEV_NODE_TYPE: u16 = 14,
    RDMA_NLDEV_ATTR_NDEV_INDEX: u16 = 50,
    RDMA_NLDEV_ATTR_NDEV_NAME: u16 = 51,
    RDMA_NLDEV_ATTR_LINK_TYPE: u16 = 65,
    RDMA_NLDEV_ATTR_CHARDEV_TYPE: u16 = 69,
    RDMA_NLDEV_ATTR_CHARDEV_NAME: u16 = 70,
    RDMA_NLDEV_ATTR_CHARDEV_ABI: u16 = 71,
    RDMA_NLDEV_ATTR_CHARDEV: u16 = 72,
    RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID: u16 = 73,
    RDMA_DRIVER_MLX5: u32 = 1,
    RDMA_DRIVER_RXE: u32 = 14,
    NLM_F_REQUEST: u16 = 1,
    NLM_F_MULTI: u16 = 2,
    NLM_F_ACK: u16 = 4,
    NLM_F_DUMP: u16 = 0x300,
    NLMSG_ERROR: u16 = 2,
    NLMSG_DONE: u16 = 3,
}

cmds! {
    IB_USER_VERBS_CMD_GET_CONTEXT = 0,
    IB_USER_VERBS_CMD_QUERY_DEVICE = 1,
    IB_USER_VERBS_CMD_QUERY_PORT = 2,
    IB_USER_VERBS_CMD_ALLOC_PD = 3,
    IB_USER_VERBS_CMD_DEALLOC_PD = 4,
    IB_USER_VERBS_CMD_CREATE_AH = 5,
    IB_USER_VERBS_CMD_DESTROY_AH = 8,
    IB_USER_VERBS_CMD_REG_MR = 9,
    IB_USER_VERBS_CMD_DEREG_MR = 13,
    IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL = 17,
    IB_USER_VERBS_CMD_CREATE_CQ = 18,
    IB_USER_VERBS_CMD_RESIZE_CQ = 19,
    IB_USER_VERBS_CMD_DESTROY_CQ = 20,
    IB_USER_VERBS_CMD_REQ_NOTIFY_CQ = 23,
    IB_USER_VERBS_CMD_CREATE_QP = 24,
    IB_USER_VERBS_CMD_QUERY_QP = 25,
    IB_USER_VERBS_CMD_MODIFY_QP = 26,
    IB_USER_VERBS_CMD_DESTROY_QP = 27,
    IB_USER_VERBS_CMD_POST_SEND = 28,
    IB_USER_VERBS_CMD_CREATE_SRQ = 32,
    IB_USER_VERBS_CMD_MODIFY_SRQ = 33,
    IB_USER_VERBS_CMD_QUERY_SRQ = 34,
    IB_USER_VERBS_CMD_DESTROY_SRQ = 35,
}

abi! {
    IbUverbsCmdHdr "ib_uverbs_cmd_hdr" { command: u32, in_words: u16, out_words: u16 }
    IbUverbsGetContext "ib_uverbs_get_context" { response: u64 }
    IbUverbsGetContextResp "ib_uverbs_get_context_resp" align 8 { async_fd: u32, num_comp_vectors: u32 }
    IbUverbsQueryDevice "ib_uverbs_query_device" { response: u64 }
    IbUverbsQueryDeviceResp "ib_uverbs_query_device_resp" {
        fw_ver: u64, node_guid: u64, sys_image_guid: u64, max_mr_size: u64, page_size_cap: u64,
        vendor_id: u32, vendor_part_id: u32, hw_ver: u32, max_qp: u32, max_qp_wr: u32,
        device_cap_flags: u32, max_sge: u32, max_sge_rd: u32, max_cq: u32, max_cqe: u32,
        max_mr: u32, max_pd: u32, max_qp_rd_atom: u32, max_ee_rd_atom: u32, max_res_rd_atom: u32,
        max_qp_init_rd_atom: u32, max_ee_init_rd_atom: u32, atomic_cap: u32, max_ee: u32,
        max_rdd: u32, max_mw: u32, max_raw_ipv6_qp: u32, max_raw_ethy_qp: u32, max_mcast_grp: u32,
        max_mcast_qp_attach: u32, max_total_mcast_qp_attach: u32, max_ah: u32, max_fmr: u32,
        max_map_per_fmr: u32, max_srq: u32, max_srq_wr: u32, max_srq_sge: u32, max_pkeys: u16,
        local_ca_ack_delay: u8, phys_port_cnt: u8, reserved: [u8; 4],
    }
    IbUverbsQueryPort "ib_uverbs_query_port" { response: u64, port_num: u8, reserved: [u8; 7] }
    IbUverbsQueryPortResp "ib_uverbs_query_port_resp" {
        port_cap_flags: u32, max_msg_sz: u32, bad_pkey_cntr: u32, qkey_viol_cntr: u32,
        gid_tbl_len: u32, pkey_tbl_len: u16, lid: u16, sm_lid: u16, state: u8, max_mtu: u8,
        active_mtu: u8, lmc: u8, max_vl_num: u8, sm_sl: u8, subnet_timeout: u8,
        init_type_reply: u8, active_width: u8, active_speed: u8, phys_state: u8,
        link_layer: u8, flags: u8, reserved: u8,
    }
    IbUverbsAllocPd "ib_uverbs_alloc_pd" { response: u64 }
    IbUverbsAllocPdResp "ib_uverbs_alloc_pd_resp" { pd_handle: u32 }
    IbUverbsDeallocPd "ib_uverbs_dealloc_pd" { pd_handle: u32 }
    IbUverbsRegMr "ib_uverbs_reg_mr" { response: u64, start: u64, length: u64, hca_va: u64, pd_handle: u32, access_flags: u32 }
    IbUverbsRegMrResp "ib_uverbs_reg_mr_resp" { mr_handle: u32, lkey: u32, rkey: u32 }
    IbUverbsDeregMr "ib_uverbs_dereg_mr" { mr_handle: u32 }
    IbUverbsCreateCompChannel "ib_uverbs_create_comp_channel" { response: u64 }
    IbUverbsCreateCompChannelResp "ib_uverbs_create_comp_channel_resp" { fd: u32 }
    IbUverbsCreateCq "ib_uverbs_create_cq" { response: u64, user_handle: u64, cqe: u32, comp_vector: u32, comp_channel: i32, reserved: u32 }
    IbUverbsCreateCqResp "ib_uverbs_create_cq_resp" align 8 { cq_handle: u32, cqe: u32 }
    IbUverbsReqNotifyCq "ib_uverbs_req_notify_cq" { cq_handle: u32, solicited_only: u32 }
    IbUverbsDestroyCq "ib_uverbs_destroy_cq" { response: u64, cq_handle: u32, reserved: u32 }
    IbUverbsDestroyCqResp "ib_uverbs_destroy_cq_resp" { comp_events_reported: u32, async_events_reported: u32 }
    IbUverbsCreateQp "ib_uverbs_create_qp" {
        response: u64, user_handle: u64, pd_handle: u32, send_cq_handle: u32, recv_cq_handle: u32,
        srq_handle: u32, max_send_wr: u32, max_recv_wr: u32, max_send_sge: u32, max_recv_sge: u32,
        max_inline_data: u32, sq_sig_all: u8, qp_type: u8, is_srq: u8, reserved: u8,
    }
    IbUverbsCreateQpResp "ib_uverbs_create_qp_resp" {
        qp_handle: u32, qpn: u32, max_send_wr: u32, max_recv_wr: u32, max_send_sge: u32,
        max_recv_sge: u32, max_inline_data: u32, reserved: u32,
    }
    IbUverbsQpDest "ib_uverbs_qp_dest" {
        dgid: [u8; 16], flow_label: u32, dlid: u16, reserved: u16, sgid_index: u8, hop_limit: u8,
        traffic_class: u8, sl: u8, src_path_bits: u8, static_rate: u8, is_global: u8, port_num: u8,
    }
    IbUverbsQueryQp "ib_uverbs_query_qp" { response: u64, qp_handle: u32, attr_mask: u32 }
    IbUverbsQueryQpResp "ib_uverbs_query_qp_resp" align 8 {
        dest: IbUverbsQpDest, alt_dest: IbUverbsQpDest, max_send_wr: u32, max_recv_wr: u32,
        max_send_sge: u32, max_recv_sge: u32, max_inline_data: u32, qkey: u32, rq_psn: u32,
        sq_psn: u32, dest_qp_num: u32, qp_access_flags: u32, pkey_index: u16, alt_pkey_index: u16,
        qp_state: u8, cur_qp_state: u8, path_mtu: u8, path_mig_state: u8, sq_draining: u8,
        max_rd_atomic: u8, max_dest_rd_atomic: u8, min_rnr_timer: u8, port_num: u8, timeout: u8,
        retry_cnt: u8, rnr_retry: u8, alt_port_num: u8, alt_timeout: u8, sq_sig_all: u8,
        reserved: [u8; 5],
    }
    IbUverbsModifyQp "ib_uverbs_modify_qp" align 8 {
        dest: IbUverbsQpDest, alt_dest: IbUverbsQpDest, qp_handle: u32, attr_mask: u32, qkey: u32,
        rq_psn: u32, sq_psn: u32, dest_qp_num: u32, qp_access_flags: u32, pkey_index: u16,
        alt_pkey_index: u16, qp_state: u8, cur_qp_state: u8, path_mtu: u8, path_mig_state: u8,
        en_sqd_async_notify: u8, max_rd_atomic: u8, max_dest_rd_atomic: u8, min_rnr_timer: u8,
        port_num: u8, timeout: u8, retry_cnt: u8, rnr_retry: u8, alt_port_num: u8, alt_timeout: u8,
        reserved: [u8; 2],
    }
    IbUverbsDestroyQp "ib_uverbs_destroy_qp" { response: u64, qp_handle: u32, reserved: u32 }
    IbUverbsDestroyQpResp "ib_uverbs_destroy_qp_resp" { events_reported: u32 }
    IbUverbsPostSend "ib_uverbs_post_send" { response: u64, qp_handle: u32, wr_count: u32, sge_count: u32, wqe_size: u32 }
    IbUverbsSendWr "ib_uverbs_send_wr" { wr_id: u64, num_sge: u32, opcode: u32, send_flags: u32, ex: u32, wr: [u64; 4] }
    IbUverbsGlobalRoute "ib_uverbs_global_route" { dgid: [u8; 16], flow_label: u32, sgid_index: u8, hop_limit: u8, traffic_class: u8, reserved: u8 }
    IbUverbsAhAttr "ib_uverbs_ah_attr" {
        grh: IbUverbsGlobalRoute, dlid: u16, sl: u8, src_path_bits: u8, static_rate: u8,
        is_global: u8, port_num: u8, reserved: u8,
    }
    IbUverbsCreateAh "ib_uverbs_create_ah" { response: u64, user_handle: u64, pd_handle: u32, reserved: u32, attr: IbUverbsAhAttr }
    IbUverbsCreateAhResp "ib_uverbs_create_ah_resp" { ah_handle: u32 }
    IbUverbsDestroyAh "ib_uverbs_destroy_ah" { ah_handle: u32 }
    IbUverbsCreateSrq "ib_uverbs_create_srq" { response: u64, user_handle: u64, pd_handle: u32, max_wr: u32, max_sge: u32, srq_limit: u32 }
    IbUverbsCreateSrqResp "ib_uverbs_create_srq_resp" { srq_handle: u32, max_wr: u32, max_sge: u32, srqn: u32 }
    IbUverbsModifySrq "ib_uverbs_modify_srq" align 8 { srq_handle: u32, attr_mask: u32, max_wr: u32, srq_limit: u32 }
    IbUverbsQuerySrq "ib_uverbs_query_srq" { response: u64, srq_handle: u32, reserved: u32 }
    IbUverbsQuerySrqResp "ib_uverbs_query_srq_resp" { max_wr: u32, max_sge: u32, srq_limit: u32, reserved: u32 }
    IbUverbsDestroySrq "ib_uverbs_destroy_srq" { response: u64, srq_handle: u32, reserved: u32 }
    IbUverbsDestroySrqResp "ib_uverbs_destroy_srq_resp" { events_reported: u32 }
    IbUverbsAsyncEventDesc "ib_uverbs_async_event_desc" { element: u64, event_type: u32, reserved: u32 }
    IbUverbsResizeCq "ib_uverbs_resize_cq" { response: u64, cq_handle: u32, cqe: u32 }
    IbUverbsResizeCqResp "ib_uverbs_resize_cq_resp" align 8 { cqe: u32, reserved: u32 }
}

#[cfg(test)]
mod tests {
    //! The layouts above against `/usr/include/rdma/ib_user_verbs.h`, by a
    //! C program compiled at test time (a test-only use of C).
    use super::*;
    use std::fmt::Write as _;
    use std::process::Command;

    #[test]
    fn layouts_match_the_c_header() {
        let mut c = String::from(
            "#include <stdio.h>\n#include <stddef.h>\n#include <linux/netlink.h>\n#include <rdma/ib_user_verbs.h>\n\
             #include <rdma/ib_user_ioctl_verbs.h>\n#include <rdma/rdma_netlink.h>\nint main(void) {\n",
        );
        let mut want = Vec::new();
        for (name, size, align, fields) in layouts() {
            let _ = writeln!(
                c,
                "printf(\"%zu %zu\\n\", sizeof(struct {name}), _Alignof(struct {name}));"
            );
            want.push(format!("{size} {align}"));
            for (f, off) in fields {
                let _ = writeln!(c, "printf(\"%zu\\n\", offsetof(struct {name}, {f}));");
                want.push(off.to_string());
            }
        }
        for (name, v) in commands() {
            let _ = writeln!(c, "printf(\"%d\\n\", (int){name});");
            want.push(v.to_string());
        }
        for (name, v) in nl_constants() {
            let _ = writeln!(c, "printf(\"%lld\\n\", (long long){name});");
            want.push(v.to_string());
        }
        c.push_str("return 0; }\n");
        let dir = std::env::temp_dir().join(format!("rverbs-abi-shim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("t.c"), &c).unwrap();
        let cc = Command::new("cc")
            .arg(dir.join("t.c"))
            .arg("-o")
            .arg(dir.join("t"))
            .output()
            .expect(
                "the layout test needs a C compiler (cc) and linux-libc-dev's /usr/include/rdma",
            );
        assert!(
            cc.status.success(),
            "cc failed:\n{}",
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = Command::new(dir.join("t")).output().unwrap();
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        // Name each mismatch, all at once.
        let mut labels = Vec::new();
        for (name, _, _, fields) in layouts() {
            labels.push(format!("struct {name}: size align"));
            for (f, _) in fields {
                labels.push(format!("struct {name}.{f}: offset"));
            }
        }
        for (name, _) in commands() {
            labels.push(name.to_string());
        }
        for (name, _) in nl_constants() {
            labels.push(name.to_string());
        }
        let bad: Vec<String> = labels
            .iter()
            .zip(want.iter().zip(&got))
            .filter(|(_, (w, g))| w != g)
            .map(|(l, (w, g))| format!("{l}: rust {w}, C {g}"))
            .collect();
        assert_eq!(
            got.len(),
            want.len(),
            "C printed {} values, expected {}",
            got.len(),
            want.len()
        );
        assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    }
}

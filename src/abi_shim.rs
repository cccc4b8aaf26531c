//! TEMPORARY: the few `ib_user_verbs.h` structs the root crate uses, until
//! `uverbs-abi`'s verbs module (checked against the C headers) lands; then
//! this file is deleted and the imports switch to `uverbs_abi::verbs`.
#![allow(missing_docs, dead_code)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

macro_rules! abi {
    ($($name:ident { $($f:ident : $t:ty),* $(,)? })*) => {
        $(
            #[repr(C)]
            #[derive(Debug, Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
            pub struct $name { $(pub $f: $t),* }
        )*
    };
}

pub const IB_USER_VERBS_CMD_GET_CONTEXT: u32 = 0;
pub const IB_USER_VERBS_CMD_QUERY_DEVICE: u32 = 1;
pub const IB_USER_VERBS_CMD_QUERY_PORT: u32 = 2;
pub const IB_USER_VERBS_CMD_ALLOC_PD: u32 = 3;
pub const IB_USER_VERBS_CMD_DEALLOC_PD: u32 = 4;
pub const IB_USER_VERBS_CMD_REG_MR: u32 = 9;
pub const IB_USER_VERBS_CMD_DEREG_MR: u32 = 13;
pub const IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: u32 = 17;
pub const IB_USER_VERBS_CMD_CREATE_CQ: u32 = 18;
pub const IB_USER_VERBS_CMD_DESTROY_CQ: u32 = 20;
pub const IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: u32 = 23;
pub const IB_USER_VERBS_CMD_CREATE_QP: u32 = 24;
pub const IB_USER_VERBS_CMD_QUERY_QP: u32 = 25;
pub const IB_USER_VERBS_CMD_MODIFY_QP: u32 = 26;
pub const IB_USER_VERBS_CMD_DESTROY_QP: u32 = 27;
pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;

abi! {
    IbUverbsCmdHdr { command: u32, in_words: u16, out_words: u16 }
    IbUverbsGetContext { response: u64 }
    IbUverbsGetContextResp { async_fd: u32, num_comp_vectors: u32 }
    IbUverbsQueryDevice { response: u64 }
    IbUverbsQueryDeviceResp {
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
    IbUverbsQueryPort { response: u64, port_num: u8, reserved: [u8; 7] }
    IbUverbsQueryPortResp {
        port_cap_flags: u32, max_msg_sz: u32, bad_pkey_cntr: u32, qkey_viol_cntr: u32,
        gid_tbl_len: u32, pkey_tbl_len: u16, lid: u16, sm_lid: u16, state: u8, max_mtu: u8,
        active_mtu: u8, lmc: u8, max_vl_num: u8, sm_sl: u8, subnet_timeout: u8,
        init_type_reply: u8, active_width: u8, active_speed: u8, phys_state: u8,
        link_layer: u8, flags: u8, reserved: u8,
    }
    IbUverbsAllocPd { response: u64 }
    IbUverbsAllocPdResp { pd_handle: u32 }
    IbUverbsDeallocPd { pd_handle: u32 }
    IbUverbsRegMr { response: u64, start: u64, length: u64, hca_va: u64, pd_handle: u32, access_flags: u32 }
    IbUverbsRegMrResp { mr_handle: u32, lkey: u32, rkey: u32 }
    IbUverbsDeregMr { mr_handle: u32 }
    IbUverbsCreateCompChannel { response: u64 }
    IbUverbsCreateCompChannelResp { fd: u32 }
    IbUverbsCreateCq { response: u64, user_handle: u64, cqe: u32, comp_vector: u32, comp_channel: i32, reserved: u32 }
    IbUverbsCreateCqResp { cq_handle: u32, cqe: u32 }
    IbUverbsReqNotifyCq { cq_handle: u32, solicited_only: u32 }
    IbUverbsDestroyCq { response: u64, cq_handle: u32, reserved: u32 }
    IbUverbsDestroyCqResp { comp_events_reported: u32, async_events_reported: u32 }
    IbUverbsCreateQp {
        response: u64, user_handle: u64, pd_handle: u32, send_cq_handle: u32, recv_cq_handle: u32,
        srq_handle: u32, max_send_wr: u32, max_recv_wr: u32, max_send_sge: u32, max_recv_sge: u32,
        max_inline_data: u32, sq_sig_all: u8, qp_type: u8, is_srq: u8, reserved: u8,
    }
    IbUverbsCreateQpResp {
        qp_handle: u32, qpn: u32, max_send_wr: u32, max_recv_wr: u32, max_send_sge: u32,
        max_recv_sge: u32, max_inline_data: u32, reserved: u32,
    }
    IbUverbsQpDest {
        dgid: [u8; 16], flow_label: u32, dlid: u16, reserved: u16, sgid_index: u8, hop_limit: u8,
        traffic_class: u8, sl: u8, src_path_bits: u8, static_rate: u8, is_global: u8, port_num: u8,
    }
    IbUverbsQueryQp { response: u64, qp_handle: u32, attr_mask: u32 }
    IbUverbsQueryQpResp {
        dest: IbUverbsQpDest, alt_dest: IbUverbsQpDest, max_send_wr: u32, max_recv_wr: u32,
        max_send_sge: u32, max_recv_sge: u32, max_inline_data: u32, qkey: u32, rq_psn: u32,
        sq_psn: u32, dest_qp_num: u32, qp_access_flags: u32, pkey_index: u16, alt_pkey_index: u16,
        qp_state: u8, cur_qp_state: u8, path_mtu: u8, path_mig_state: u8, sq_draining: u8,
        max_rd_atomic: u8, max_dest_rd_atomic: u8, min_rnr_timer: u8, port_num: u8, timeout: u8,
        retry_cnt: u8, rnr_retry: u8, alt_port_num: u8, alt_timeout: u8, sq_sig_all: u8,
        reserved: [u8; 5],
    }
    IbUverbsModifyQp {
        dest: IbUverbsQpDest, alt_dest: IbUverbsQpDest, qp_handle: u32, attr_mask: u32, qkey: u32,
        rq_psn: u32, sq_psn: u32, dest_qp_num: u32, qp_access_flags: u32, pkey_index: u16,
        alt_pkey_index: u16, qp_state: u8, cur_qp_state: u8, path_mtu: u8, path_mig_state: u8,
        en_sqd_async_notify: u8, max_rd_atomic: u8, max_dest_rd_atomic: u8, min_rnr_timer: u8,
        port_num: u8, timeout: u8, retry_cnt: u8, rnr_retry: u8, alt_port_num: u8, alt_timeout: u8,
        reserved: [u8; 2],
    }
    IbUverbsDestroyQp { response: u64, qp_handle: u32, reserved: u32 }
    IbUverbsDestroyQpResp { events_reported: u32 }
    IbUverbsPostSend { response: u64, qp_handle: u32, wr_count: u32, sge_count: u32, wqe_size: u32 }
    IbUverbsSendWr { wr_id: u64, num_sge: u32, opcode: u32, send_flags: u32, ex: u32, wr: [u64; 4] }
}

pub const IB_USER_VERBS_CMD_CREATE_AH: u32 = 5;
pub const IB_USER_VERBS_CMD_DESTROY_AH: u32 = 8;
pub const IB_USER_VERBS_CMD_CREATE_SRQ: u32 = 32;
pub const IB_USER_VERBS_CMD_MODIFY_SRQ: u32 = 33;
pub const IB_USER_VERBS_CMD_QUERY_SRQ: u32 = 34;
pub const IB_USER_VERBS_CMD_DESTROY_SRQ: u32 = 35;

abi! {
    IbUverbsGlobalRoute { dgid: [u8; 16], flow_label: u32, sgid_index: u8, hop_limit: u8, traffic_class: u8, reserved: u8 }
    IbUverbsAhAttr {
        grh: IbUverbsGlobalRoute, dlid: u16, sl: u8, src_path_bits: u8, static_rate: u8,
        is_global: u8, port_num: u8, reserved: u8,
    }
    IbUverbsCreateAh { response: u64, user_handle: u64, pd_handle: u32, reserved: u32, attr: IbUverbsAhAttr }
    IbUverbsCreateAhResp { ah_handle: u32 }
    IbUverbsDestroyAh { ah_handle: u32 }
    IbUverbsCreateSrq { response: u64, user_handle: u64, pd_handle: u32, max_wr: u32, max_sge: u32, srq_limit: u32 }
    IbUverbsCreateSrqResp { srq_handle: u32, max_wr: u32, max_sge: u32, srqn: u32 }
    IbUverbsModifySrq { srq_handle: u32, attr_mask: u32, max_wr: u32, srq_limit: u32 }
    IbUverbsQuerySrq { response: u64, srq_handle: u32, reserved: u32 }
    IbUverbsQuerySrqResp { max_wr: u32, max_sge: u32, srq_limit: u32, reserved: u32 }
    IbUverbsDestroySrq { response: u64, srq_handle: u32, reserved: u32 }
    IbUverbsDestroySrqResp { events_reported: u32 }
    IbUverbsAsyncEventDesc { element: u64, event_type: u32, reserved: u32 }
}

pub const IB_USER_VERBS_CMD_RESIZE_CQ: u32 = 19;

abi! {
    IbUverbsResizeCq { response: u64, cq_handle: u32, cqe: u32 }
    IbUverbsResizeCqResp { cqe: u32, reserved: u32 }
}

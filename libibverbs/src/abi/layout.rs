//! Every struct of `abi/` against the installed `<infiniband/verbs.h>`
//! and `<infiniband/sa.h>`, by a C program compiled with the system `cc`
//! at test time (a test-time use of C only, as in `uverbs-abi`): sizes,
//! alignments and the offset of every field. Fails, never skips, without
//! `cc` or the headers.

use super::*;
use std::mem::{align_of, offset_of, size_of};

/// One Rust struct and the C type it stands for.
struct L {
    rust: &'static str,
    c: &'static str,
    /// The C member the offsets count from: empty for a whole struct, the
    /// first member of a tail (`comp_mask` of `struct ibv_qp_ex`, whose
    /// members before it are a `struct ibv_qp`).
    from: &'static str,
    size: usize,
    align: usize,
    fields: Vec<(&'static str, usize)>,
}

/// `l!(Rust => "C type" [from "member"] { field, field => "c.member", … })`:
/// a field alone is the C member of its name.
macro_rules! l {
    ($ty:ident => $c:literal $(from $from:literal)? { $($fields:tt)* }) => {
        L {
            rust: stringify!($ty),
            c: $c,
            from: { let _from = ""; $(let _from = $from;)? _from },
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: fields!($ty; ; $($fields)*),
        }
    };
}

/// The `(C member, Rust offset)` list of `l!`, one field at a time.
macro_rules! fields {
    ($ty:ident; $($acc:expr),*; ) => { vec![$($acc),*] };
    ($ty:ident; $($acc:expr),*; $f:ident $(. $g:ident)* => $cf:literal $(, $($rest:tt)*)?) => {
        fields!($ty; $($acc,)* ($cf, offset_of!($ty, $f $(. $g)*)); $($($rest)*)?)
    };
    ($ty:ident; $($acc:expr),*; $f:ident $(, $($rest:tt)*)?) => {
        fields!($ty; $($acc,)* (stringify!($f), offset_of!($ty, $f)); $($($rest)*)?)
    };
}

/// The structs of `<infiniband/verbs.h>`.
fn layouts() -> Vec<L> {
    vec![
        l!(IbvDeviceOps => "struct _ibv_device_ops" { dummy1 => "_dummy1", dummy2 => "_dummy2" }),
        l!(IbvDevice => "struct ibv_device" { ops => "_ops", node_type, transport_type, name,
            dev_name, dev_path, ibdev_path }),
        l!(IbvContextOps => "struct ibv_context_ops" { compat_a => "_compat_query_device",
            alloc_mw, bind_mw, dealloc_mw, compat_create_cq => "_compat_create_cq", poll_cq,
            req_notify_cq, compat_b => "_compat_cq_event", post_srq_recv,
            compat_c => "_compat_create_qp", post_send, post_recv,
            compat_d => "_compat_create_ah" }),
        l!(IbvContext => "struct ibv_context" { device, ops, cmd_fd, async_fd, num_comp_vectors,
            mutex, abi_compat }),
        l!(VerbsContext => "struct verbs_context" { query_port, ops_a => "advise_mr", create_cq_ex,
            priv_ => "priv", query_device_ex, ops_b => "ibv_destroy_flow", create_qp_ex,
            ops_c => "get_srq_num", abi_placeholder3 => "_ABI_placeholder3", sz, context }),
        l!(IbvDeviceAttr => "struct ibv_device_attr" { fw_ver, node_guid, sys_image_guid,
            max_mr_size, page_size_cap, vendor_id, vendor_part_id, hw_ver, max_qp, max_qp_wr,
            device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom,
            max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom, atomic_cap,
            max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp,
            max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr,
            max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt }),
        l!(IbvOdpCaps => "struct ibv_odp_caps" { general_caps,
            rc_odp_caps => "per_transport_caps.rc_odp_caps",
            uc_odp_caps => "per_transport_caps.uc_odp_caps",
            ud_odp_caps => "per_transport_caps.ud_odp_caps" }),
        l!(IbvTsoCaps => "struct ibv_tso_caps" { max_tso, supported_qpts }),
        l!(IbvRssCaps => "struct ibv_rss_caps" { supported_qpts, max_rwq_indirection_tables,
            max_rwq_indirection_table_size, rx_hash_fields_mask, rx_hash_function }),
        l!(IbvPacketPacingCaps => "struct ibv_packet_pacing_caps" { qp_rate_limit_min,
            qp_rate_limit_max, supported_qpts }),
        l!(IbvTmCaps => "struct ibv_tm_caps" { max_rndv_hdr_size, max_num_tags, flags, max_ops,
            max_sge }),
        l!(IbvCqModerationCaps => "struct ibv_cq_moderation_caps" { max_cq_count, max_cq_period }),
        l!(IbvPciAtomicCaps => "struct ibv_pci_atomic_caps" { fetch_add, swap, compare_swap }),
        l!(IbvDeviceAttrEx => "struct ibv_device_attr_ex" { orig_attr, comp_mask, odp_caps,
            completion_timestamp_mask, hca_core_clock, device_cap_flags_ex, tso_caps, rss_caps,
            max_wq_type_rq, packet_pacing_caps, raw_packet_caps, tm_caps, cq_mod_caps, max_dm_size,
            pci_atomic_caps, xrc_odp_caps, phys_port_cnt_ex }),
        l!(IbvPortAttr => "struct ibv_port_attr" { state, max_mtu, active_mtu, gid_tbl_len,
            port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr, pkey_tbl_len, lid, sm_lid,
            lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width, active_speed,
            phys_state, link_layer, flags, port_cap_flags2 }),
        l!(IbvPd => "struct ibv_pd" { context, handle }),
        l!(IbvMr => "struct ibv_mr" { context, pd, addr, length, handle, lkey, rkey }),
        l!(IbvCompChannel => "struct ibv_comp_channel" { context, fd, refcnt }),
        l!(IbvCq => "struct ibv_cq" { context, channel, cq_context, handle, cqe, mutex, cond,
            comp_events_completed, async_events_completed }),
        l!(IbvQpCap => "struct ibv_qp_cap" { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge,
            max_inline_data }),
        l!(IbvQp => "struct ibv_qp" { context, qp_context, pd, send_cq, recv_cq, srq, handle,
            qp_num, state, qp_type, mutex, cond, events_completed }),
        l!(IbvQpInitAttr => "struct ibv_qp_init_attr" { qp_context, send_cq, recv_cq, srq, cap,
            qp_type, sq_sig_all }),
        l!(IbvGid => "union ibv_gid" { raw }),
        l!(IbvGidEntry => "struct ibv_gid_entry" { gid, gid_index, port_num, gid_type,
            ndev_ifindex }),
        l!(IbvGlobalRoute => "struct ibv_global_route" { dgid, flow_label, sgid_index, hop_limit,
            traffic_class }),
        l!(IbvAhAttr => "struct ibv_ah_attr" { grh, dlid, sl, src_path_bits, static_rate,
            is_global, port_num }),
        l!(IbvQpAttr => "struct ibv_qp_attr" { qp_state, cur_qp_state, path_mtu, path_mig_state,
            qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr,
            pkey_index, alt_pkey_index, en_sqd_async_notify, sq_draining, max_rd_atomic,
            max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
            alt_port_num, alt_timeout, rate_limit }),
        l!(IbvWc => "struct ibv_wc" { wr_id, status, opcode, vendor_err, byte_len, imm_data,
            imm_data => "invalidated_rkey", qp_num, src_qp, wc_flags, pkey_index, slid, sl,
            dlid_path_bits }),
        l!(IbvSge => "struct ibv_sge" { addr, length, lkey }),
        l!(IbvSendWrRdma => "struct { uint64_t remote_addr; uint32_t rkey; }"
            { remote_addr, rkey }),
        l!(IbvSendWr => "struct ibv_send_wr" { wr_id, next, sg_list, num_sge, opcode, send_flags,
            imm_data, imm_data => "invalidate_rkey", wr.rdma.remote_addr => "wr.rdma.remote_addr",
            wr.rdma.rkey => "wr.rdma.rkey", wr.atomic.remote_addr => "wr.atomic.remote_addr",
            wr.atomic.compare_add => "wr.atomic.compare_add", wr.atomic.swap => "wr.atomic.swap",
            wr.atomic.rkey => "wr.atomic.rkey", wr.ud.ah => "wr.ud.ah",
            wr.ud.remote_qpn => "wr.ud.remote_qpn", wr.ud.remote_qkey => "wr.ud.remote_qkey",
            xrc_remote_srqn => "qp_type.xrc.remote_srqn", bind_mw_or_tso => "bind_mw.mw",
            bind_mw_or_tso.bind_mw.rkey => "bind_mw.rkey",
            bind_mw_or_tso.bind_mw.bind_info => "bind_mw.bind_info",
            bind_mw_or_tso.bind_mw.bind_info.length => "bind_mw.bind_info.length" }),
        l!(IbvRecvWr => "struct ibv_recv_wr" { wr_id, next, sg_list, num_sge }),
        l!(IbvMwBindInfo => "struct ibv_mw_bind_info" { mr, addr, length, mw_access_flags }),
        l!(IbvMw => "struct ibv_mw" { context, pd, rkey, handle, mw_type => "type" }),
        l!(IbvMwBind => "struct ibv_mw_bind" { wr_id, send_flags, bind_info }),
        l!(IbvAh => "struct ibv_ah" { context, pd, handle }),
        l!(IbvSrq => "struct ibv_srq" { context, srq_context, pd, handle, mutex, cond,
            events_completed }),
        l!(IbvSrqAttr => "struct ibv_srq_attr" { max_wr, max_sge, srq_limit }),
        l!(IbvSrqInitAttr => "struct ibv_srq_init_attr" { srq_context, attr }),
        l!(IbvCqInitAttrEx => "struct ibv_cq_init_attr_ex" { cqe, cq_context, channel, comp_vector,
            wc_flags, comp_mask, flags, parent_domain }),
        l!(IbvCqExTail => "struct ibv_cq_ex" from "comp_mask" { comp_mask, status, wr_id,
            ops.start_poll => "start_poll", ops.next_poll => "next_poll", ops.end_poll => "end_poll", ops.read_opcode => "read_opcode", ops.read_vendor_err => "read_vendor_err",
            ops.read_byte_len => "read_byte_len", ops.read_imm_data => "read_imm_data", ops.read_qp_num => "read_qp_num", ops.read_src_qp => "read_src_qp",
            ops.read_wc_flags => "read_wc_flags", ops.read_slid => "read_slid", ops.read_sl => "read_sl", ops.read_dlid_path_bits => "read_dlid_path_bits",
            ops.read_completion_ts => "read_completion_ts", ops.read_cvlan => "read_cvlan", ops.read_flow_tag => "read_flow_tag", ops.read_tm_info => "read_tm_info",
            ops.read_completion_wallclock_ns => "read_completion_wallclock_ns" }),
        l!(IbvRxHashConf => "struct ibv_rx_hash_conf" { rx_hash_function, rx_hash_key_len,
            rx_hash_key, rx_hash_fields_mask }),
        l!(IbvQpInitAttrEx => "struct ibv_qp_init_attr_ex" { qp_context, send_cq, recv_cq, srq,
            cap, qp_type, sq_sig_all, comp_mask, pd, xrcd, create_flags, max_tso_header,
            rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags }),
        l!(IbvQpExTail => "struct ibv_qp_ex" from "comp_mask" { comp_mask, wr_id, wr_flags,
            ops.wr_atomic_cmp_swp => "wr_atomic_cmp_swp", ops.wr_atomic_fetch_add => "wr_atomic_fetch_add", ops.wr_bind_mw => "wr_bind_mw", ops.wr_local_inv => "wr_local_inv",
            ops.wr_rdma_read => "wr_rdma_read", ops.wr_rdma_write => "wr_rdma_write", ops.wr_rdma_write_imm => "wr_rdma_write_imm", ops.wr_send => "wr_send",
            ops.wr_send_imm => "wr_send_imm", ops.wr_send_inv => "wr_send_inv", ops.wr_send_tso => "wr_send_tso", ops.wr_set_ud_addr => "wr_set_ud_addr",
            ops.wr_set_xrc_srqn => "wr_set_xrc_srqn", ops.wr_set_inline_data => "wr_set_inline_data", ops.wr_set_inline_data_list => "wr_set_inline_data_list",
            ops.wr_set_sge => "wr_set_sge", ops.wr_set_sge_list => "wr_set_sge_list", ops.wr_start => "wr_start", ops.wr_complete => "wr_complete", ops.wr_abort => "wr_abort",
            ops.wr_atomic_write => "wr_atomic_write" }),
        l!(IbvDataBuf => "struct ibv_data_buf" { addr, length }),
    ]
}

/// What `<infiniband/sa.h>` defines (the path record librdmacm resolves),
/// and `struct ibv_async_event`.
fn sa_layouts() -> Vec<L> {
    vec![
        l!(IbvSaPathRec => "struct ibv_sa_path_rec" { dgid, sgid, dlid, slid, raw_traffic,
            flow_label, hop_limit, traffic_class, reversible, numb_path, pkey, sl, mtu_selector,
            mtu, rate_selector, rate, packet_life_time_selector, packet_life_time, preference }),
        l!(IbvAsyncEvent => "struct ibv_async_event" { element => "element.qp",
            element => "element.port_num", event_type }),
    ]
}

/// The C member a field is checked at (`raw` of the GID union: its first
/// byte).
fn c_member(l: &L, f: &'static str) -> &'static str {
    if f == "raw" && l.rust == "IbvGid" {
        "raw[0]"
    } else {
        f
    }
}

/// The C program: for every layout, `NAME size align` and then one
/// `NAME.member offset` line per field, from the headers.
fn c_program(headers: &[&str], ls: &[L]) -> String {
    let mut s = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    for h in headers {
        s += &format!("#include <{h}>\n");
    }
    s += "typedef struct { uint64_t remote_addr; uint32_t rkey; } rdma_t;\n\
          int main(void) {\n";
    for l in ls {
        // The anonymous `wr.rdma` struct: checked through a typedef of
        // the same shape (and its offsets inside ibv_send_wr).
        let c = if l.c.starts_with("struct {") {
            "rdma_t"
        } else {
            l.c
        };
        let base = match l.from {
            "" => "0".to_string(),
            m => format!("offsetof({c}, {m})"),
        };
        s += &format!(
            "printf(\"{} %zu %zu\\n\", sizeof({c}) - {base}, _Alignof({c}));\n",
            l.rust
        );
        for (f, _) in &l.fields {
            let f = c_member(l, f);
            s += &format!(
                "printf(\"{}.{f} %zu\\n\", offsetof({c}, {f}) - {base});\n",
                l.rust
            );
        }
    }
    s += "return 0; }\n";
    s
}

/// Compiles and runs the program for `ls` and holds every line against
/// the Rust side; the structs and members checked.
fn check(tag: &str, headers: &[&str], ls: &[L]) -> (usize, usize) {
    let text = crate::ctest::run_c(tag, &c_program(headers, ls), false);
    let mut lines = text.lines();
    let (mut structs, mut fields) = (0, 0);
    for l in ls {
        let want = format!("{} {} {}", l.rust, l.size, l.align);
        assert_eq!(
            lines.next(),
            Some(want.as_str()),
            "size/align of {} ({})",
            l.rust,
            l.c
        );
        structs += 1;
        for (f, off) in &l.fields {
            let want = format!("{}.{} {off}", l.rust, c_member(l, f));
            assert_eq!(lines.next(), Some(want.as_str()), "offset in {}", l.c);
            fields += 1;
        }
    }
    assert_eq!(lines.next(), None, "one line per struct and member");
    (structs, fields)
}

#[test]
// Miri cannot run the C compiler.
#[cfg_attr(miri, ignore)]
fn structs_match_verbs_h() {
    let (structs, fields) = check("libibverbs-layout", &["infiniband/verbs.h"], &layouts());
    // The prefix the exported (compat) ibv_query_port writes.
    assert_eq!(COMPAT_PORT_ATTR_LEN, 48);
    // The members `struct ibv_cq_ex` shares with `struct ibv_cq` sit where
    // ibv_cq has them (a CQ box's `ibv_cq` is also its `ibv_cq_ex`), and
    // the tails start right after the structs they extend.
    let mut same: Vec<(String, usize)> = [
        "context",
        "channel",
        "cq_context",
        "handle",
        "cqe",
        "mutex",
        "cond",
        "comp_events_completed",
        "async_events_completed",
    ]
    .iter()
    .map(|f| {
        let c = format!("offsetof(struct ibv_cq_ex, {f}) - offsetof(struct ibv_cq, {f})");
        (c, 0)
    })
    .collect();
    same.push((
        "offsetof(struct ibv_cq_ex, comp_mask)".into(),
        size_of::<IbvCq>(),
    ));
    same.push((
        "offsetof(struct ibv_qp_ex, comp_mask)".into(),
        size_of::<IbvQp>(),
    ));
    crate::ctest::assert_c_values("libibverbs-ex", &["infiniband/verbs.h"], &same);
    eprintln!("libibverbs layout: {structs} structs, {fields} members checked against verbs.h");
}

#[test]
// Miri cannot run the C compiler.
#[cfg_attr(miri, ignore)]
fn structs_match_sa_h_and_verbs_h() {
    let headers = ["infiniband/verbs.h", "infiniband/sa.h"];
    check("libibverbs-sa", &headers, &sa_layouts());
}

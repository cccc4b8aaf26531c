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

macro_rules! l {
    ($ty:ident => $c:literal $(from $from:literal)?
        { $($f:ident $(. $g:ident)* => $cf:literal),* $(,)? }) => {
        L {
            rust: stringify!($ty),
            c: $c,
            from: { let _from = ""; $(let _from = $from;)? _from },
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: vec![$(($cf, offset_of!($ty, $f $(. $g)*))),*],
        }
    };
}

/// The structs of `<infiniband/verbs.h>`.
fn layouts() -> Vec<L> {
    vec![
        l!(IbvDeviceOps => "struct _ibv_device_ops" { dummy1 => "_dummy1", dummy2 => "_dummy2" }),
        l!(IbvDevice => "struct ibv_device" { ops => "_ops", node_type => "node_type",
            transport_type => "transport_type", name => "name", dev_name => "dev_name",
            dev_path => "dev_path", ibdev_path => "ibdev_path" }),
        l!(IbvContextOps => "struct ibv_context_ops" { compat_a => "_compat_query_device",
            alloc_mw => "alloc_mw", bind_mw => "bind_mw", dealloc_mw => "dealloc_mw",
            compat_create_cq => "_compat_create_cq", poll_cq => "poll_cq",
            req_notify_cq => "req_notify_cq", compat_b => "_compat_cq_event",
            post_srq_recv => "post_srq_recv", compat_c => "_compat_create_qp",
            post_send => "post_send", post_recv => "post_recv",
            compat_d => "_compat_create_ah" }),
        l!(IbvContext => "struct ibv_context" { device => "device", ops => "ops",
            cmd_fd => "cmd_fd", async_fd => "async_fd", num_comp_vectors => "num_comp_vectors",
            mutex => "mutex", abi_compat => "abi_compat" }),
        l!(VerbsContext => "struct verbs_context" { query_port => "query_port",
            ops_a => "advise_mr", create_cq_ex => "create_cq_ex", priv_ => "priv",
            query_device_ex => "query_device_ex", ops_b => "ibv_destroy_flow",
            create_qp_ex => "create_qp_ex", ops_c => "get_srq_num",
            abi_placeholder3 => "_ABI_placeholder3", sz => "sz", context => "context" }),
        l!(IbvDeviceAttr => "struct ibv_device_attr" { fw_ver => "fw_ver",
            node_guid => "node_guid", sys_image_guid => "sys_image_guid",
            max_mr_size => "max_mr_size", page_size_cap => "page_size_cap",
            vendor_id => "vendor_id", vendor_part_id => "vendor_part_id", hw_ver => "hw_ver",
            max_qp => "max_qp", max_qp_wr => "max_qp_wr",
            device_cap_flags => "device_cap_flags", max_sge => "max_sge",
            max_sge_rd => "max_sge_rd", max_cq => "max_cq", max_cqe => "max_cqe",
            max_mr => "max_mr", max_pd => "max_pd", max_qp_rd_atom => "max_qp_rd_atom",
            max_ee_rd_atom => "max_ee_rd_atom", max_res_rd_atom => "max_res_rd_atom",
            max_qp_init_rd_atom => "max_qp_init_rd_atom",
            max_ee_init_rd_atom => "max_ee_init_rd_atom", atomic_cap => "atomic_cap",
            max_ee => "max_ee", max_rdd => "max_rdd", max_mw => "max_mw",
            max_raw_ipv6_qp => "max_raw_ipv6_qp", max_raw_ethy_qp => "max_raw_ethy_qp",
            max_mcast_grp => "max_mcast_grp", max_mcast_qp_attach => "max_mcast_qp_attach",
            max_total_mcast_qp_attach => "max_total_mcast_qp_attach", max_ah => "max_ah",
            max_fmr => "max_fmr", max_map_per_fmr => "max_map_per_fmr",
            max_srq => "max_srq", max_srq_wr => "max_srq_wr", max_srq_sge => "max_srq_sge",
            max_pkeys => "max_pkeys", local_ca_ack_delay => "local_ca_ack_delay",
            phys_port_cnt => "phys_port_cnt" }),
        l!(IbvOdpCaps => "struct ibv_odp_caps" { general_caps => "general_caps",
            rc_odp_caps => "per_transport_caps.rc_odp_caps",
            uc_odp_caps => "per_transport_caps.uc_odp_caps",
            ud_odp_caps => "per_transport_caps.ud_odp_caps" }),
        l!(IbvTsoCaps => "struct ibv_tso_caps" { max_tso => "max_tso",
            supported_qpts => "supported_qpts" }),
        l!(IbvRssCaps => "struct ibv_rss_caps" { supported_qpts => "supported_qpts",
            max_rwq_indirection_tables => "max_rwq_indirection_tables",
            max_rwq_indirection_table_size => "max_rwq_indirection_table_size",
            rx_hash_fields_mask => "rx_hash_fields_mask",
            rx_hash_function => "rx_hash_function" }),
        l!(IbvPacketPacingCaps => "struct ibv_packet_pacing_caps" {
            qp_rate_limit_min => "qp_rate_limit_min", qp_rate_limit_max => "qp_rate_limit_max",
            supported_qpts => "supported_qpts" }),
        l!(IbvTmCaps => "struct ibv_tm_caps" { max_rndv_hdr_size => "max_rndv_hdr_size",
            max_num_tags => "max_num_tags", flags => "flags", max_ops => "max_ops",
            max_sge => "max_sge" }),
        l!(IbvCqModerationCaps => "struct ibv_cq_moderation_caps" {
            max_cq_count => "max_cq_count", max_cq_period => "max_cq_period" }),
        l!(IbvPciAtomicCaps => "struct ibv_pci_atomic_caps" { fetch_add => "fetch_add",
            swap => "swap", compare_swap => "compare_swap" }),
        l!(IbvDeviceAttrEx => "struct ibv_device_attr_ex" { orig_attr => "orig_attr",
            comp_mask => "comp_mask", odp_caps => "odp_caps",
            completion_timestamp_mask => "completion_timestamp_mask",
            hca_core_clock => "hca_core_clock", device_cap_flags_ex => "device_cap_flags_ex",
            tso_caps => "tso_caps", rss_caps => "rss_caps", max_wq_type_rq => "max_wq_type_rq",
            packet_pacing_caps => "packet_pacing_caps", raw_packet_caps => "raw_packet_caps",
            tm_caps => "tm_caps", cq_mod_caps => "cq_mod_caps", max_dm_size => "max_dm_size",
            pci_atomic_caps => "pci_atomic_caps", xrc_odp_caps => "xrc_odp_caps",
            phys_port_cnt_ex => "phys_port_cnt_ex" }),
        l!(IbvPortAttr => "struct ibv_port_attr" { state => "state", max_mtu => "max_mtu",
            active_mtu => "active_mtu", gid_tbl_len => "gid_tbl_len",
            port_cap_flags => "port_cap_flags", max_msg_sz => "max_msg_sz",
            bad_pkey_cntr => "bad_pkey_cntr", qkey_viol_cntr => "qkey_viol_cntr",
            pkey_tbl_len => "pkey_tbl_len", lid => "lid", sm_lid => "sm_lid", lmc => "lmc",
            max_vl_num => "max_vl_num", sm_sl => "sm_sl", subnet_timeout => "subnet_timeout",
            init_type_reply => "init_type_reply", active_width => "active_width",
            active_speed => "active_speed", phys_state => "phys_state",
            link_layer => "link_layer", flags => "flags",
            port_cap_flags2 => "port_cap_flags2" }),
        l!(IbvPd => "struct ibv_pd" { context => "context", handle => "handle" }),
        l!(IbvMr => "struct ibv_mr" { context => "context", pd => "pd", addr => "addr",
            length => "length", handle => "handle", lkey => "lkey", rkey => "rkey" }),
        l!(IbvCompChannel => "struct ibv_comp_channel" { context => "context", fd => "fd",
            refcnt => "refcnt" }),
        l!(IbvCq => "struct ibv_cq" { context => "context", channel => "channel",
            cq_context => "cq_context", handle => "handle", cqe => "cqe", mutex => "mutex",
            cond => "cond", comp_events_completed => "comp_events_completed",
            async_events_completed => "async_events_completed" }),
        l!(IbvQpCap => "struct ibv_qp_cap" { max_send_wr => "max_send_wr",
            max_recv_wr => "max_recv_wr", max_send_sge => "max_send_sge",
            max_recv_sge => "max_recv_sge", max_inline_data => "max_inline_data" }),
        l!(IbvQp => "struct ibv_qp" { context => "context", qp_context => "qp_context",
            pd => "pd", send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq",
            handle => "handle", qp_num => "qp_num", state => "state", qp_type => "qp_type",
            mutex => "mutex", cond => "cond", events_completed => "events_completed" }),
        l!(IbvQpInitAttr => "struct ibv_qp_init_attr" { qp_context => "qp_context",
            send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap",
            qp_type => "qp_type", sq_sig_all => "sq_sig_all" }),
        l!(IbvGid => "union ibv_gid" { raw => "raw" }),
        l!(IbvGidEntry => "struct ibv_gid_entry" { gid => "gid", gid_index => "gid_index",
            port_num => "port_num", gid_type => "gid_type", ndev_ifindex => "ndev_ifindex" }),
        l!(IbvGlobalRoute => "struct ibv_global_route" { dgid => "dgid",
            flow_label => "flow_label", sgid_index => "sgid_index", hop_limit => "hop_limit",
            traffic_class => "traffic_class" }),
        l!(IbvAhAttr => "struct ibv_ah_attr" { grh => "grh", dlid => "dlid", sl => "sl",
            src_path_bits => "src_path_bits", static_rate => "static_rate",
            is_global => "is_global", port_num => "port_num" }),
        l!(IbvQpAttr => "struct ibv_qp_attr" { qp_state => "qp_state",
            cur_qp_state => "cur_qp_state", path_mtu => "path_mtu",
            path_mig_state => "path_mig_state", qkey => "qkey", rq_psn => "rq_psn",
            sq_psn => "sq_psn", dest_qp_num => "dest_qp_num",
            qp_access_flags => "qp_access_flags", cap => "cap", ah_attr => "ah_attr",
            alt_ah_attr => "alt_ah_attr", pkey_index => "pkey_index",
            alt_pkey_index => "alt_pkey_index", en_sqd_async_notify => "en_sqd_async_notify",
            sq_draining => "sq_draining", max_rd_atomic => "max_rd_atomic",
            max_dest_rd_atomic => "max_dest_rd_atomic", min_rnr_timer => "min_rnr_timer",
            port_num => "port_num", timeout => "timeout", retry_cnt => "retry_cnt",
            rnr_retry => "rnr_retry", alt_port_num => "alt_port_num",
            alt_timeout => "alt_timeout", rate_limit => "rate_limit" }),
        l!(IbvWc => "struct ibv_wc" { wr_id => "wr_id", status => "status",
            opcode => "opcode", vendor_err => "vendor_err", byte_len => "byte_len",
            imm_data => "imm_data", imm_data => "invalidated_rkey", qp_num => "qp_num",
            src_qp => "src_qp", wc_flags => "wc_flags", pkey_index => "pkey_index",
            slid => "slid", sl => "sl", dlid_path_bits => "dlid_path_bits" }),
        l!(IbvSge => "struct ibv_sge" { addr => "addr", length => "length", lkey => "lkey" }),
        l!(IbvSendWrRdma => "struct { uint64_t remote_addr; uint32_t rkey; }"
            { remote_addr => "remote_addr", rkey => "rkey" }),
        l!(IbvSendWr => "struct ibv_send_wr" { wr_id => "wr_id", next => "next",
            sg_list => "sg_list", num_sge => "num_sge", opcode => "opcode",
            send_flags => "send_flags", imm_data => "imm_data",
            imm_data => "invalidate_rkey",
            wr.rdma.remote_addr => "wr.rdma.remote_addr", wr.rdma.rkey => "wr.rdma.rkey",
            wr.atomic.remote_addr => "wr.atomic.remote_addr",
            wr.atomic.compare_add => "wr.atomic.compare_add",
            wr.atomic.swap => "wr.atomic.swap", wr.atomic.rkey => "wr.atomic.rkey",
            wr.ud.ah => "wr.ud.ah", wr.ud.remote_qpn => "wr.ud.remote_qpn",
            wr.ud.remote_qkey => "wr.ud.remote_qkey",
            xrc_remote_srqn => "qp_type.xrc.remote_srqn",
            bind_mw_or_tso => "bind_mw.mw",
            bind_mw_or_tso.bind_mw.rkey => "bind_mw.rkey",
            bind_mw_or_tso.bind_mw.bind_info => "bind_mw.bind_info",
            bind_mw_or_tso.bind_mw.bind_info.length => "bind_mw.bind_info.length" }),
        l!(IbvRecvWr => "struct ibv_recv_wr" { wr_id => "wr_id", next => "next",
            sg_list => "sg_list", num_sge => "num_sge" }),
        l!(IbvMwBindInfo => "struct ibv_mw_bind_info" { mr => "mr", addr => "addr",
            length => "length", mw_access_flags => "mw_access_flags" }),
        l!(IbvMw => "struct ibv_mw" { context => "context", pd => "pd", rkey => "rkey",
            handle => "handle", mw_type => "type" }),
        l!(IbvMwBind => "struct ibv_mw_bind" { wr_id => "wr_id", send_flags => "send_flags",
            bind_info => "bind_info" }),
        l!(IbvAh => "struct ibv_ah" { context => "context", pd => "pd", handle => "handle" }),
        l!(IbvSrq => "struct ibv_srq" { context => "context", srq_context => "srq_context",
            pd => "pd", handle => "handle", mutex => "mutex", cond => "cond",
            events_completed => "events_completed" }),
        l!(IbvSrqAttr => "struct ibv_srq_attr" { max_wr => "max_wr", max_sge => "max_sge",
            srq_limit => "srq_limit" }),
        l!(IbvSrqInitAttr => "struct ibv_srq_init_attr" { srq_context => "srq_context",
            attr => "attr" }),
        l!(IbvCqInitAttrEx => "struct ibv_cq_init_attr_ex" { cqe => "cqe",
            cq_context => "cq_context", channel => "channel", comp_vector => "comp_vector",
            wc_flags => "wc_flags", comp_mask => "comp_mask", flags => "flags",
            parent_domain => "parent_domain" }),
        l!(IbvCqExTail => "struct ibv_cq_ex" from "comp_mask" { comp_mask => "comp_mask",
            status => "status", wr_id => "wr_id", ops.start_poll => "start_poll",
            ops.next_poll => "next_poll", ops.end_poll => "end_poll",
            ops.read_opcode => "read_opcode", ops.read_vendor_err => "read_vendor_err",
            ops.read_byte_len => "read_byte_len", ops.read_imm_data => "read_imm_data",
            ops.read_qp_num => "read_qp_num", ops.read_src_qp => "read_src_qp",
            ops.read_wc_flags => "read_wc_flags", ops.read_slid => "read_slid",
            ops.read_sl => "read_sl", ops.read_dlid_path_bits => "read_dlid_path_bits",
            ops.read_completion_ts => "read_completion_ts", ops.read_cvlan => "read_cvlan",
            ops.read_flow_tag => "read_flow_tag", ops.read_tm_info => "read_tm_info",
            ops.read_completion_wallclock_ns => "read_completion_wallclock_ns" }),
        l!(IbvRxHashConf => "struct ibv_rx_hash_conf" { rx_hash_function => "rx_hash_function",
            rx_hash_key_len => "rx_hash_key_len", rx_hash_key => "rx_hash_key",
            rx_hash_fields_mask => "rx_hash_fields_mask" }),
        l!(IbvQpInitAttrEx => "struct ibv_qp_init_attr_ex" { qp_context => "qp_context",
            send_cq => "send_cq", recv_cq => "recv_cq", srq => "srq", cap => "cap",
            qp_type => "qp_type", sq_sig_all => "sq_sig_all", comp_mask => "comp_mask",
            pd => "pd", xrcd => "xrcd", create_flags => "create_flags",
            max_tso_header => "max_tso_header", rwq_ind_tbl => "rwq_ind_tbl",
            rx_hash_conf => "rx_hash_conf", source_qpn => "source_qpn",
            send_ops_flags => "send_ops_flags" }),
        l!(IbvQpExTail => "struct ibv_qp_ex" from "comp_mask" { comp_mask => "comp_mask",
            wr_id => "wr_id", wr_flags => "wr_flags",
            ops.wr_atomic_cmp_swp => "wr_atomic_cmp_swp",
            ops.wr_atomic_fetch_add => "wr_atomic_fetch_add", ops.wr_bind_mw => "wr_bind_mw",
            ops.wr_local_inv => "wr_local_inv", ops.wr_rdma_read => "wr_rdma_read",
            ops.wr_rdma_write => "wr_rdma_write", ops.wr_rdma_write_imm => "wr_rdma_write_imm",
            ops.wr_send => "wr_send", ops.wr_send_imm => "wr_send_imm",
            ops.wr_send_inv => "wr_send_inv", ops.wr_send_tso => "wr_send_tso",
            ops.wr_set_ud_addr => "wr_set_ud_addr", ops.wr_set_xrc_srqn => "wr_set_xrc_srqn",
            ops.wr_set_inline_data => "wr_set_inline_data",
            ops.wr_set_inline_data_list => "wr_set_inline_data_list",
            ops.wr_set_sge => "wr_set_sge", ops.wr_set_sge_list => "wr_set_sge_list",
            ops.wr_start => "wr_start", ops.wr_complete => "wr_complete",
            ops.wr_abort => "wr_abort", ops.wr_atomic_write => "wr_atomic_write" }),
        l!(IbvDataBuf => "struct ibv_data_buf" { addr => "addr", length => "length" }),
    ]
}

/// What `<infiniband/sa.h>` defines (the path record librdmacm resolves),
/// and `struct ibv_async_event`.
fn sa_layouts() -> Vec<L> {
    vec![
        l!(IbvSaPathRec => "struct ibv_sa_path_rec" { dgid => "dgid", sgid => "sgid",
            dlid => "dlid", slid => "slid", raw_traffic => "raw_traffic",
            flow_label => "flow_label", hop_limit => "hop_limit",
            traffic_class => "traffic_class", reversible => "reversible",
            numb_path => "numb_path", pkey => "pkey", sl => "sl",
            mtu_selector => "mtu_selector", mtu => "mtu", rate_selector => "rate_selector",
            rate => "rate", packet_life_time_selector => "packet_life_time_selector",
            packet_life_time => "packet_life_time", preference => "preference" }),
        l!(IbvAsyncEvent => "struct ibv_async_event" { element => "element.qp",
            element => "element.port_num", event_type => "event_type" }),
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

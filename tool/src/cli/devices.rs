//! `rverbs devices` and `rverbs devinfo`: the device list and attributes,
//! laid out as rdma-core's `ibv_devices` and `ibv_devinfo` print them so
//! that scripts that parse those keep working.

use clap::Args;
use rverbs::{Context, Device, DeviceAttrEx, GidType, PortAttr, Result};
use std::process::ExitCode;
use uverbs_abi::verbs as v;

/// Prints the device list as `ibv_devices` does.
pub fn devices() -> Result<ExitCode> {
    println!("    {:<16}\t   node GUID", "device");
    println!("    {:<16}\t----------------", "------");
    for d in Device::list()? {
        println!("    {:<16}\t{:016x}", d.name(), d.node_guid());
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct DevinfoArgs {
    /// Use this device (default: all).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Query only this port.
    #[arg(short = 'i', long = "ib-port")]
    port: Option<u8>,
    /// Print all attributes.
    #[arg(short = 'v', long)]
    verbose: bool,
}

/// `xxxx:xxxx:xxxx:xxxx`, as ibv_devinfo prints GUIDs.
fn guid(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

fn port_state(s: u8) -> &'static str {
    match s {
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        _ => "invalid state",
    }
}

fn mtu(m: u8) -> String {
    match m {
        1..=5 => format!("{} ({m})", 128u32 << m),
        _ => format!("invalid MTU ({m})"),
    }
}

fn link_layer(l: u8) -> &'static str {
    match l {
        0 | 1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unknown",
    }
}

pub fn devinfo(a: &DevinfoArgs) -> Result<ExitCode> {
    let devs: Vec<Device> = match &a.dev {
        Some(n) => vec![Device::find(Some(n))?],
        None => Device::list()?,
    };
    if devs.is_empty() {
        println!("No IB devices found");
        return Ok(ExitCode::FAILURE);
    }
    for d in devs {
        let ctx = Context::open(&d)?;
        // ibv_devinfo queries the extended attributes (ibv_query_device_ex).
        let attr = ctx.query_device_ex()?;
        print_device(&ctx, &d, &attr, a)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_device(ctx: &Context, d: &Device, ex: &DeviceAttrEx, a: &DevinfoArgs) -> Result<()> {
    let attr = &ex.orig;
    println!("hca_id:\t{}", d.name());
    let nt = d.node_type();
    println!(
        "\ttransport:\t\t\t{} ({})",
        nt.transport(),
        if nt.transport() == "InfiniBand" { 0 } else { 1 }
    );
    println!("\tfw_ver:\t\t\t\t{}", d.driver().format_fw_ver(attr.fw_ver));
    println!("\tnode_guid:\t\t\t{}", guid(attr.node_guid));
    println!("\tsys_image_guid:\t\t\t{}", guid(attr.sys_image_guid));
    println!("\tvendor_id:\t\t\t{:#06x}", attr.vendor_id);
    println!("\tvendor_part_id:\t\t\t{}", attr.vendor_part_id);
    println!("\thw_ver:\t\t\t\t0x{:X}", attr.hw_ver);
    println!("\tphys_port_cnt:\t\t\t{}", attr.phys_port_cnt);
    if a.verbose {
        print_verbose(ctx, ex);
    }
    for port in 1..=attr.phys_port_cnt {
        if a.port.is_some_and(|p| p != port) {
            continue;
        }
        let p = ctx.query_port(port)?;
        print_port(ctx, port, &p, a.verbose, nt.transport() == "InfiniBand")?;
    }
    println!();
    Ok(())
}

/// Prints the names of the set bits of `flags` that `names` knows, one per
/// line, then the rest as `Unknown flags`, as ibv_devinfo does.
fn print_flag_names(flags: u64, names: &[(&str, u64)]) {
    let mut known = 0;
    for &(name, bit) in names {
        known |= bit;
        if flags & bit != 0 {
            println!("\t\t\t\t\t{name}");
        }
    }
    if flags & !known != 0 {
        println!("\t\t\t\t\tUnknown flags: 0x{:X}", flags & !known);
    }
}

/// `ibv_device_cap_flags` as rdma-core 44's ibv_devinfo names them.
fn device_cap_names() -> [(&'static str, u64); 24] {
    use v::IbUverbsDeviceCapFlags as F;
    [
        ("RESIZE_MAX_WR", F::RESIZE_MAX_WR.bits()),
        ("BAD_PKEY_CNTR", F::BAD_PKEY_CNTR.bits()),
        ("BAD_QKEY_CNTR", F::BAD_QKEY_CNTR.bits()),
        ("RAW_MULTI", F::RAW_MULTI.bits()),
        ("AUTO_PATH_MIG", F::AUTO_PATH_MIG.bits()),
        ("CHANGE_PHY_PORT", F::CHANGE_PHY_PORT.bits()),
        ("UD_AV_PORT_ENFORCE", F::UD_AV_PORT_ENFORCE.bits()),
        ("CURR_QP_STATE_MOD", F::CURR_QP_STATE_MOD.bits()),
        ("SHUTDOWN_PORT", F::SHUTDOWN_PORT.bits()),
        // IBV_DEVICE_INIT_TYPE: libibverbs still names bit 9, which the
        // kernel's UAPI enum no longer has.
        ("INIT_TYPE", 1 << 9),
        ("PORT_ACTIVE_EVENT", F::PORT_ACTIVE_EVENT.bits()),
        ("SYS_IMAGE_GUID", F::SYS_IMAGE_GUID.bits()),
        ("RC_RNR_NAK_GEN", F::RC_RNR_NAK_GEN.bits()),
        ("SRQ_RESIZE", F::SRQ_RESIZE.bits()),
        ("N_NOTIFY_CQ", F::N_NOTIFY_CQ.bits()),
        ("MEM_WINDOW", F::MEM_WINDOW.bits()),
        ("UD_IP_CSUM", F::UD_IP_CSUM.bits()),
        ("XRC", F::XRC.bits()),
        ("MEM_MGT_EXTENSIONS", F::MEM_MGT_EXTENSIONS.bits()),
        ("MEM_WINDOW_TYPE_2A", F::MEM_WINDOW_TYPE_2A.bits()),
        ("MEM_WINDOW_TYPE_2B", F::MEM_WINDOW_TYPE_2B.bits()),
        ("RC_IP_CSUM", F::RC_IP_CSUM.bits()),
        ("RAW_IP_CSUM", F::RAW_IP_CSUM.bits()),
        ("MANAGED_FLOW_STEERING", F::MANAGED_FLOW_STEERING.bits()),
    ]
}

fn print_odp_transport(caps: u32) {
    use v::IbOdpTransportCaps as T;
    if caps == 0 {
        println!("\t\t\t\t\tNO SUPPORT");
        return;
    }
    print_flag_names(
        u64::from(caps),
        &[
            ("SUPPORT_SEND", u64::from(T::SEND.bits())),
            ("SUPPORT_RECV", u64::from(T::RECV.bits())),
            ("SUPPORT_WRITE", u64::from(T::WRITE.bits())),
            ("SUPPORT_READ", u64::from(T::READ.bits())),
            ("SUPPORT_ATOMIC", u64::from(T::ATOMIC.bits())),
            ("SUPPORT_SRQ", u64::from(T::SRQ_RECV.bits())),
        ],
    );
}

/// Prints the QP types of a `supported_qpts` bit mask (bit = QP type).
fn print_supported_qpts(qpts: u32) {
    // IBV_QPT_RAW_PACKET = 8, IBV_QPT_UD = 4.
    println!("\t\tsupported_qp:");
    print_flag_names(
        u64::from(qpts),
        &[("SUPPORT_RAW_PACKET", 1 << 8), ("SUPPORT_UD", 1 << 4)],
    );
}

fn print_verbose(ctx: &Context, ex: &DeviceAttrEx) {
    let attr = &ex.orig;
    println!("\tmax_mr_size:\t\t\t{:#x}", attr.max_mr_size);
    println!("\tpage_size_cap:\t\t\t{:#x}", attr.page_size_cap);
    println!("\tmax_qp:\t\t\t\t{}", attr.max_qp);
    println!("\tmax_qp_wr:\t\t\t{}", attr.max_qp_wr);
    println!("\tdevice_cap_flags:\t\t{:#010x}", attr.device_cap_flags);
    print_flag_names(u64::from(attr.device_cap_flags), &device_cap_names());
    println!("\tmax_sge:\t\t\t{}", attr.max_sge);
    println!("\tmax_sge_rd:\t\t\t{}", attr.max_sge_rd);
    println!("\tmax_cq:\t\t\t\t{}", attr.max_cq);
    println!("\tmax_cqe:\t\t\t{}", attr.max_cqe);
    println!("\tmax_mr:\t\t\t\t{}", attr.max_mr);
    println!("\tmax_pd:\t\t\t\t{}", attr.max_pd);
    println!("\tmax_qp_rd_atom:\t\t\t{}", attr.max_qp_rd_atom);
    println!("\tmax_ee_rd_atom:\t\t\t{}", attr.max_ee_rd_atom);
    println!("\tmax_res_rd_atom:\t\t{}", attr.max_res_rd_atom);
    println!("\tmax_qp_init_rd_atom:\t\t{}", attr.max_qp_init_rd_atom);
    println!("\tmax_ee_init_rd_atom:\t\t{}", attr.max_ee_init_rd_atom);
    let atomic = match attr.atomic_cap {
        0 => "ATOMIC_NONE",
        1 => "ATOMIC_HCA",
        2 => "ATOMIC_GLOB",
        _ => "invalid atomic capability",
    };
    println!("\tatomic_cap:\t\t\t{atomic} ({})", attr.atomic_cap);
    println!("\tmax_ee:\t\t\t\t{}", attr.max_ee);
    println!("\tmax_rdd:\t\t\t{}", attr.max_rdd);
    println!("\tmax_mw:\t\t\t\t{}", attr.max_mw);
    println!("\tmax_raw_ipv6_qp:\t\t{}", attr.max_raw_ipv6_qp);
    println!("\tmax_raw_ethy_qp:\t\t{}", attr.max_raw_ethy_qp);
    println!("\tmax_mcast_grp:\t\t\t{}", attr.max_mcast_grp);
    println!("\tmax_mcast_qp_attach:\t\t{}", attr.max_mcast_qp_attach);
    println!(
        "\tmax_total_mcast_qp_attach:\t{}",
        attr.max_total_mcast_qp_attach
    );
    println!("\tmax_ah:\t\t\t\t{}", attr.max_ah);
    println!("\tmax_fmr:\t\t\t{}", attr.max_fmr);
    if attr.max_fmr != 0 {
        println!("\tmax_map_per_fmr:\t\t{}", attr.max_map_per_fmr);
    }
    println!("\tmax_srq:\t\t\t{}", attr.max_srq);
    if attr.max_srq != 0 {
        println!("\tmax_srq_wr:\t\t\t{}", attr.max_srq_wr);
        println!("\tmax_srq_sge:\t\t\t{}", attr.max_srq_sge);
    }
    println!("\tmax_pkeys:\t\t\t{}", attr.max_pkeys);
    println!("\tlocal_ca_ack_delay:\t\t{}", attr.local_ca_ack_delay);

    println!("\tgeneral_odp_caps:");
    {
        use v::IbOdpGeneralCaps as G;
        print_flag_names(
            ex.odp_general_caps,
            &[
                ("ODP_SUPPORT", G::SUPPORT.bits()),
                ("ODP_SUPPORT_IMPLICIT", G::SUPPORT_IMPLICIT.bits()),
            ],
        );
    }
    println!("\trc_odp_caps:");
    print_odp_transport(ex.odp_rc_caps);
    println!("\tuc_odp_caps:");
    print_odp_transport(ex.odp_uc_caps);
    println!("\tud_odp_caps:");
    print_odp_transport(ex.odp_ud_caps);
    println!("\txrc_odp_caps:");
    print_odp_transport(ex.odp_xrc_caps);
    if ex.completion_timestamp_mask != 0 {
        println!(
            "\tcompletion timestamp_mask:\t\t\t0x{:016x}",
            ex.completion_timestamp_mask
        );
    } else {
        println!("\tcompletion_timestamp_mask not supported");
    }
    if ex.hca_core_clock != 0 {
        println!("\thca_core_clock:\t\t\t{}kHZ", ex.hca_core_clock);
    } else {
        println!("\tcore clock not supported");
    }
    if ex.raw_packet_caps != 0 {
        println!("\traw packet caps:");
        for (bit, name) in [
            (1, "C-VLAN stripping offload"),
            (2, "Scatter FCS offload"),
            (4, "IP csum offload"),
            (8, "Delay drop"),
        ] {
            if ex.raw_packet_caps & bit != 0 {
                println!("\t\t\t\t\t{name}");
            }
        }
    }
    println!("\tdevice_cap_flags_ex:\t\t0x{:X}", ex.device_cap_flags_ex);
    {
        use v::IbUverbsDeviceCapFlags as F;
        print_flag_names(
            ex.device_cap_flags_ex & 0xffff_ffff_0000_0000,
            &[
                ("RAW_SCATTER_FCS", F::RAW_SCATTER_FCS.bits()),
                ("PCI_WRITE_END_PADDING", F::PCI_WRITE_END_PADDING.bits()),
            ],
        );
    }
    // TSO and packet pacing come only from drivers' own udata (mlx5), not
    // from the core response: rdma-core prints them as 0 for rxe too.
    println!("\ttso_caps:");
    println!("\t\tmax_tso:\t\t\t0");
    println!("\trss_caps:");
    println!(
        "\t\tmax_rwq_indirection_tables:\t\t\t{}",
        ex.max_rwq_indirection_tables
    );
    println!(
        "\t\tmax_rwq_indirection_table_size:\t\t\t{}",
        ex.max_rwq_indirection_table_size
    );
    println!("\t\trx_hash_function:\t\t\t\t0x0");
    println!("\t\trx_hash_fields_mask:\t\t\t\t0x0");
    if ex.rss_supported_qpts != 0 {
        print_supported_qpts(ex.rss_supported_qpts);
    }
    println!("\tmax_wq_type_rq:\t\t\t{}", ex.max_wq_type_rq);
    println!("\tpacket_pacing_caps:");
    println!("\t\tqp_rate_limit_min:\t0kbps");
    println!("\t\tqp_rate_limit_max:\t0kbps");
    if ex.tm_max_num_tags != 0 {
        println!("\tmax_rndv_hdr_size:\t\t{}", ex.tm_max_rndv_hdr_size);
        println!("\tmax_num_tags:\t\t\t{}", ex.tm_max_num_tags);
        println!("\tmax_ops:\t\t\t{}", ex.tm_max_ops);
        println!("\tmax_sge:\t\t\t{}", ex.tm_max_sge);
        println!("\tflags:");
        if ex.tm_flags & 1 != 0 {
            println!("\t\t\t\t\tIBV_TM_CAP_RC");
        }
    } else {
        println!("\ttag matching not supported");
    }
    if ex.max_cq_moderation_count != 0 && ex.max_cq_moderation_period != 0 {
        println!("\n\tcq moderation caps:");
        println!("\t\tmax_cq_count:\t{}", ex.max_cq_moderation_count);
        println!("\t\tmax_cq_period:\t{} us\n", ex.max_cq_moderation_period);
    }
    if ex.max_dm_size != 0 {
        println!(
            "\tmaximum available device memory:\t{}Bytes\n",
            ex.max_dm_size
        );
    }
    println!("\tnum_comp_vectors:\t\t{}", ctx.num_comp_vectors());
}

fn width(w: u8) -> &'static str {
    match w {
        1 => "1",
        2 => "4",
        4 => "8",
        8 => "12",
        16 => "2",
        _ => "invalid width",
    }
}

fn speed(s: u8) -> &'static str {
    match s {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 | 8 => "10.0 Gbps",
        16 => "14.0 Gbps",
        32 => "25.0 Gbps",
        64 => "50.0 Gbps",
        128 => "100.0 Gbps",
        _ => "invalid speed",
    }
}

/// A GID as ibv_devinfo prints it: IB/RoCE v1 in `xxxx:` groups, RoCE v2 as
/// an IPv6 address; the type after a comma on Ethernet ports; entries of
/// an unknown type not at all.
fn gid_line(g: &rverbs::GidEntry, ethernet: bool) -> Option<String> {
    let (text, kind) = match g.gid_type {
        GidType::Ib | GidType::RoceV1 => {
            let hex: Vec<String> = g
                .gid
                .chunks(2)
                .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
                .collect();
            (hex.join(":"), "RoCE v1")
        }
        GidType::RoceV2 => (std::net::Ipv6Addr::from(g.gid).to_string(), "RoCE v2"),
        GidType::Other(_) => return None,
    };
    let suffix = if ethernet {
        format!(", {kind}")
    } else {
        String::new()
    };
    Some(format!("\t\t\tGID[{:>3}]:\t\t{text}{suffix}", g.index))
}

fn print_port(
    ctx: &Context,
    port: u8,
    p: &PortAttr,
    verbose: bool,
    ib_transport: bool,
) -> Result<()> {
    println!("\t\tport:\t{port}");
    println!("\t\t\tstate:\t\t\t{} ({})", port_state(p.state), p.state);
    println!("\t\t\tmax_mtu:\t\t{}", mtu(p.max_mtu));
    println!("\t\t\tactive_mtu:\t\t{}", mtu(p.active_mtu));
    println!("\t\t\tsm_lid:\t\t\t{}", p.sm_lid);
    println!("\t\t\tport_lid:\t\t{}", p.lid);
    println!("\t\t\tport_lmc:\t\t{:#04x}", p.lmc);
    println!("\t\t\tlink_layer:\t\t{}", link_layer(p.link_layer));
    if verbose {
        println!("\t\t\tmax_msg_sz:\t\t{:#x}", p.max_msg_sz);
        println!("\t\t\tport_cap_flags:\t\t{:#010x}", p.port_cap_flags);
        println!("\t\t\tport_cap_flags2:\t{:#06x}", p.port_cap_flags2);
        println!(
            "\t\t\tmax_vl_num:\t\t{} ({})",
            vl(p.max_vl_num),
            p.max_vl_num
        );
        println!("\t\t\tbad_pkey_cntr:\t\t{:#x}", p.bad_pkey_cntr);
        println!("\t\t\tqkey_viol_cntr:\t\t{:#x}", p.qkey_viol_cntr);
        println!("\t\t\tsm_sl:\t\t\t{}", p.sm_sl);
        println!("\t\t\tpkey_tbl_len:\t\t{}", p.pkey_tbl_len);
        println!("\t\t\tgid_tbl_len:\t\t{}", p.gid_tbl_len);
        println!("\t\t\tsubnet_timeout:\t\t{}", p.subnet_timeout);
        println!("\t\t\tinit_type_reply:\t{}", p.init_type_reply);
        println!(
            "\t\t\tactive_width:\t\t{}X ({})",
            width(p.active_width),
            p.active_width
        );
        println!(
            "\t\t\tactive_speed:\t\t{} ({})",
            speed(p.active_speed),
            p.active_speed
        );
        if ib_transport {
            println!(
                "\t\t\tphys_state:\t\t{} ({})",
                phys_state(p.phys_state),
                p.phys_state
            );
        }
        let ethernet = p.link_layer == 2;
        for g in ctx.gid_table(port)? {
            // ibv_devinfo skips entries whose interface id is zero.
            if g.gid[8..] == [0; 8] {
                continue;
            }
            if let Some(line) = gid_line(&g, ethernet) {
                println!("{line}");
            }
        }
    }
    Ok(())
}

fn vl(v: u8) -> &'static str {
    match v {
        1 => "1",
        2 => "2",
        3 => "4",
        4 => "8",
        5 => "15",
        _ => "invalid value",
    }
}
fn phys_state(s: u8) -> &'static str {
    match s {
        1 => "SLEEP",
        2 => "POLLING",
        3 => "DISABLED",
        4 => "PORT_CONFIGURATION TRAINNING",
        5 => "LINK_UP",
        6 => "LINK_ERROR_RECOVERY",
        7 => "PHY TEST",
        _ => "invalid physical state",
    }
}

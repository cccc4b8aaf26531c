//! `rverbs devices` and `rverbs devinfo`: the device list and attributes,
//! laid out as rdma-core's `ibv_devices` and `ibv_devinfo` print them so
//! that scripts that parse those keep working.

use clap::Args;
use rverbs::{Context, Device, DeviceAttr, PortAttr, Result};
use std::process::ExitCode;

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
        0 => "PORT_NOP",
        1 => "PORT_DOWN",
        2 => "PORT_INIT",
        3 => "PORT_ARMED",
        4 => "PORT_ACTIVE",
        5 => "PORT_ACTIVE_DEFER",
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

fn fw_ver(raw: u64) -> String {
    // rxe encodes major.minor.sub_minor in the low 48 bits.
    format!(
        "{}.{}.{}",
        (raw >> 32) & 0xffff,
        (raw >> 16) & 0xffff,
        raw & 0xffff
    )
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
        let attr = ctx.query_device()?;
        print_device(&ctx, &d, &attr, a)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_device(ctx: &Context, d: &Device, attr: &DeviceAttr, a: &DevinfoArgs) -> Result<()> {
    println!("hca_id:\t{}", d.name());
    let nt = d.node_type();
    println!(
        "\ttransport:\t\t\t{} ({})",
        nt.transport(),
        if nt.transport() == "InfiniBand" { 0 } else { 1 }
    );
    println!("\tfw_ver:\t\t\t\t{}", fw_ver(attr.fw_ver));
    println!("\tnode_guid:\t\t\t{}", guid(attr.node_guid));
    println!("\tsys_image_guid:\t\t\t{}", guid(attr.sys_image_guid));
    println!("\tvendor_id:\t\t\t{:#06x}", attr.vendor_id);
    println!("\tvendor_part_id:\t\t\t{}", attr.vendor_part_id);
    println!("\thw_ver:\t\t\t\t{:#x}", attr.hw_ver);
    println!("\tphys_port_cnt:\t\t\t{}", attr.phys_port_cnt);
    if a.verbose {
        print_verbose(ctx, attr);
    }
    for port in 1..=attr.phys_port_cnt {
        if a.port.is_some_and(|p| p != port) {
            continue;
        }
        let p = ctx.query_port(port)?;
        print_port(ctx, port, &p, a.verbose)?;
    }
    println!();
    Ok(())
}

fn print_verbose(ctx: &Context, attr: &DeviceAttr) {
    println!("\tmax_mr_size:\t\t\t{:#x}", attr.max_mr_size);
    println!("\tpage_size_cap:\t\t\t{:#x}", attr.page_size_cap);
    println!("\tmax_qp:\t\t\t\t{}", attr.max_qp);
    println!("\tmax_qp_wr:\t\t\t{}", attr.max_qp_wr);
    println!("\tdevice_cap_flags:\t\t{:#010x}", attr.device_cap_flags);
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
    println!("\tmax_srq:\t\t\t{}", attr.max_srq);
    println!("\tmax_srq_wr:\t\t\t{}", attr.max_srq_wr);
    println!("\tmax_srq_sge:\t\t\t{}", attr.max_srq_sge);
    println!("\tmax_pkeys:\t\t\t{}", attr.max_pkeys);
    println!("\tlocal_ca_ack_delay:\t\t{}", attr.local_ca_ack_delay);
    println!("\tnum_comp_vectors:\t\t{}", ctx.num_comp_vectors());
}

fn print_port(ctx: &Context, port: u8, p: &PortAttr, verbose: bool) -> Result<()> {
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
            "\t\t\tphys_state:\t\t{} ({})",
            phys_state(p.phys_state),
            p.phys_state
        );
        for g in ctx.gid_table(port)? {
            let kind = match g.gid_type {
                rverbs::GidType::RoceV2 => "RoCE v2",
                rverbs::GidType::IbRoceV1 => "RoCE v1",
                rverbs::GidType::Other => "unknown",
            };
            println!(
                "\t\t\tGID[{:>3}]:\t\t{}, {kind}",
                g.index,
                std::net::Ipv6Addr::from(g.gid)
            );
        }
    }
    Ok(())
}

fn vl(v: u8) -> u32 {
    match v {
        1 => 1,
        2 => 2,
        3 => 4,
        4 => 8,
        5 => 15,
        _ => 0,
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

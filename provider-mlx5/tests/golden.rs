//! Golden bytes: the segment builders, CQE accessors, layouts, constants and
//! whole WQEs against `mlx5dv.h` (libibverbs-dev), by a C program generated
//! and compiled at test time (a test-only use of C; nothing is linked but
//! libc, as every helper used is `static inline`).
//!
//! Inputs are drawn with proptest in one batch per run, emitted into one C
//! program, and every output compared byte for byte. A missing `cc` or
//! header fails the test.

mod golden_support;

use golden_support::{hex, inputs, Golden, WrInput};
use provider_mlx5::cq;
use provider_mlx5::cqe::{cqe_opcode, Cqe64};
use provider_mlx5::seg::{
    fm_ce_se, opcode, AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineSeg, RaddrSeg, SrqNextSeg,
    EXTENDED_UD_AV, INLINE_SEG, INVALID_LKEY, WQEBB,
};
use std::mem::{offset_of, size_of};
use zerocopy::IntoBytes;

/// Sizes and field offsets of every struct this crate mirrors.
fn layouts(g: &mut Golden) {
    macro_rules! layout {
        ($c:literal, $t:ty, [$($cf:literal => $rf:ident),* $(,)?]) => {{
            g.expr(&format!("sizeof {}", $c), &format!("sizeof(struct {})", $c), size_of::<$t>());
            $(g.expr(
                &format!("offsetof {}.{}", $c, $cf),
                &format!("offsetof(struct {}, {})", $c, $cf),
                offset_of!($t, $rf),
            );)*
        }};
    }
    layout!("mlx5_wqe_ctrl_seg", CtrlSeg, ["opmod_idx_opcode" => opmod_idx_opcode,
        "qpn_ds" => qpn_ds, "signature" => signature,
        "dci_stream_channel_id" => dci_stream_channel_id, "fm_ce_se" => fm_ce_se, "imm" => imm]);
    layout!("mlx5_wqe_raddr_seg", RaddrSeg, ["raddr" => raddr, "rkey" => rkey,
        "reserved" => reserved]);
    layout!("mlx5_wqe_atomic_seg", AtomicSeg, ["swap_add" => swap_add, "compare" => compare]);
    layout!("mlx5_wqe_data_seg", DataSeg, ["byte_count" => byte_count, "lkey" => lkey,
        "addr" => addr]);
    layout!("mlx5_wqe_inl_data_seg", InlineSeg, ["byte_count" => byte_count]);
    layout!("mlx5_wqe_av", DatagramSeg, ["key" => key, "dqp_dct" => dqp_dct,
        "stat_rate_sl" => stat_rate_sl, "fl_mlid" => fl_mlid, "rlid" => rlid,
        "reserved0" => reserved0, "rmac" => rmac, "tclass" => tclass,
        "hop_limit" => hop_limit, "grh_gid_fl" => grh_gid_fl, "rgid" => rgid]);
    g.expr(
        "sizeof datagram",
        "sizeof(struct mlx5_wqe_datagram_seg)",
        size_of::<DatagramSeg>(),
    );
    layout!("mlx5_wqe_srq_next_seg", SrqNextSeg, ["next_wqe_index" => next_wqe_index,
        "signature" => signature]);
    layout!("mlx5_cqe64", Cqe64, ["wqe_id" => wqe_id, "ml_path" => ml_path, "slid" => slid,
        "flags_rqpn" => flags_rqpn, "hds_ip_ext" => hds_ip_ext,
        "l4_hdr_type_etc" => l4_hdr_type_etc, "vlan_info" => vlan_info,
        "srqn_uidx" => srqn_uidx, "imm_inval_pkey" => imm_inval_pkey, "app" => app,
        "app_op" => app_op, "app_info" => app_info, "byte_cnt" => byte_cnt,
        "timestamp" => timestamp, "sop_drop_qpn" => sop_drop_qpn,
        "wqe_counter" => wqe_counter, "signature" => signature, "op_own" => op_own]);
    g.expr(
        "err syndrome",
        "offsetof(struct mlx5_err_cqe, syndrome)",
        55,
    );
    g.expr(
        "err vendor",
        "offsetof(struct mlx5_err_cqe, vendor_err_synd)",
        54,
    );
    g.expr(
        "err wqe_counter",
        "offsetof(struct mlx5_err_cqe, wqe_counter)",
        60,
    );
    g.expr("err srqn", "offsetof(struct mlx5_err_cqe, srqn)", 32);
    g.expr("sizeof err", "sizeof(struct mlx5_err_cqe)", 64);
}

/// Every constant this crate names.
fn constants(g: &mut Golden) {
    let c: &[(&str, u64)] = &[
        ("MLX5_OPCODE_NOP", opcode::NOP as u64),
        ("MLX5_OPCODE_SEND_INVAL", opcode::SEND_INVAL as u64),
        ("MLX5_OPCODE_RDMA_WRITE", opcode::RDMA_WRITE as u64),
        ("MLX5_OPCODE_RDMA_WRITE_IMM", opcode::RDMA_WRITE_IMM as u64),
        ("MLX5_OPCODE_SEND", opcode::SEND as u64),
        ("MLX5_OPCODE_SEND_IMM", opcode::SEND_IMM as u64),
        ("MLX5_OPCODE_RDMA_READ", opcode::RDMA_READ as u64),
        ("MLX5_OPCODE_ATOMIC_CS", opcode::ATOMIC_CS as u64),
        ("MLX5_OPCODE_ATOMIC_FA", opcode::ATOMIC_FA as u64),
        ("MLX5_WQE_CTRL_CQ_UPDATE", fm_ce_se::CQ_UPDATE as u64),
        ("MLX5_WQE_CTRL_SOLICITED", fm_ce_se::SOLICITED as u64),
        ("MLX5_WQE_CTRL_FENCE", fm_ce_se::FENCE as u64),
        (
            "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE",
            fm_ce_se::INITIATOR_SMALL_FENCE as u64,
        ),
        ("MLX5_SEND_WQE_BB", WQEBB as u64),
        ("MLX5_INVALID_LKEY", INVALID_LKEY as u64),
        ("MLX5_INLINE_SEG", INLINE_SEG as u64),
        ("MLX5_EXTENDED_UD_AV", EXTENDED_UD_AV as u64),
        ("MLX5_CQE_REQ", cqe_opcode::REQ as u64),
        ("MLX5_CQE_RESP_WR_IMM", cqe_opcode::RESP_WR_IMM as u64),
        ("MLX5_CQE_RESP_SEND", cqe_opcode::RESP_SEND as u64),
        ("MLX5_CQE_RESP_SEND_IMM", cqe_opcode::RESP_SEND_IMM as u64),
        ("MLX5_CQE_RESP_SEND_INV", cqe_opcode::RESP_SEND_INV as u64),
        ("MLX5_CQE_RESIZE_CQ", cqe_opcode::RESIZE_CQ as u64),
        ("MLX5_CQE_NO_PACKET", cqe_opcode::NO_PACKET as u64),
        ("MLX5_CQE_SIG_ERR", cqe_opcode::SIG_ERR as u64),
        ("MLX5_CQE_REQ_ERR", cqe_opcode::REQ_ERR as u64),
        ("MLX5_CQE_RESP_ERR", cqe_opcode::RESP_ERR as u64),
        ("MLX5_CQE_INVALID", cqe_opcode::INVALID as u64),
        (
            "MLX5_CQE_OWNER_MASK",
            provider_mlx5::cqe::op_own::OWNER as u64,
        ),
        (
            "MLX5_INLINE_SCATTER_32",
            provider_mlx5::cqe::op_own::INLINE_SCATTER_32 as u64,
        ),
        (
            "MLX5_INLINE_SCATTER_64",
            provider_mlx5::cqe::op_own::INLINE_SCATTER_64 as u64,
        ),
        ("MLX5_CQ_DOORBELL", cq::CQ_DOORBELL as u64),
        ("MLX5_CQ_DB_REQ_NOT_SOL", cq::ARM_SOLICITED as u64),
        ("MLX5_CQ_DB_REQ_NOT", cq::ARM_NEXT as u64),
    ];
    for (name, v) in c {
        g.expr(name, &format!("(unsigned long long){name}"), *v as usize);
    }
    use provider_mlx5::Status as S;
    for (name, s) in [
        ("LOCAL_LENGTH_ERR", S::LocalLength),
        ("LOCAL_QP_OP_ERR", S::LocalQpOp),
        ("LOCAL_PROT_ERR", S::LocalProt),
        ("WR_FLUSH_ERR", S::WrFlush),
        ("MW_BIND_ERR", S::MwBind),
        ("BAD_RESP_ERR", S::BadResp),
        ("LOCAL_ACCESS_ERR", S::LocalAccess),
        ("REMOTE_INVAL_REQ_ERR", S::RemoteInvalReq),
        ("REMOTE_ACCESS_ERR", S::RemoteAccess),
        ("REMOTE_OP_ERR", S::RemoteOp),
        ("TRANSPORT_RETRY_EXC_ERR", S::RetryExceeded),
        ("RNR_RETRY_EXC_ERR", S::RnrRetryExceeded),
        ("REMOTE_ABORTED_ERR", S::RemoteAborted),
    ] {
        let c = format!("MLX5_CQE_SYNDROME_{name}");
        g.expr(
            &c,
            &format!("(unsigned long long){c}"),
            s.syndrome() as usize,
        );
        assert_eq!(S::from_syndrome(s.syndrome()), s);
    }
}

/// The static-inline setters of `mlx5dv.h`, and the C structs filled
/// field by field where the header has no setter.
fn segments(g: &mut Golden, inp: &golden_support::Inputs) {
    for &(pi, op, opmod, qpn, fmce, ds, sig, imm) in &inp.ctrl {
        let ours = CtrlSeg::new(pi, op, opmod, qpn, fmce, ds, sig, imm);
        let args = format!("{pi}, {op}, {opmod}, {qpn}u, {fmce}, {ds}, {sig}, htobe32({imm}u)");
        let label = format!("ctrl {args}");
        g.bytes(
            &label,
            &seg_call("mlx5_wqe_ctrl_seg", "mlx5dv_set_ctrl_seg", &args),
            ours.as_bytes(),
        );
        g.bytes_x86(
            &label,
            &seg_call("mlx5_wqe_ctrl_seg", "mlx5dv_x86_set_ctrl_seg", &args),
            ours.as_bytes(),
        );
    }
    for &(len, lkey, addr) in &inp.data {
        let ours = DataSeg::new(len, lkey, addr);
        let args = format!("{len}u, {lkey}u, {addr}ull");
        let label = format!("data {args}");
        g.bytes(
            &label,
            &seg_call("mlx5_wqe_data_seg", "mlx5dv_set_data_seg", &args),
            ours.as_bytes(),
        );
        g.bytes_x86(
            &label,
            &seg_call("mlx5_wqe_data_seg", "mlx5dv_x86_set_data_seg", &args),
            ours.as_bytes(),
        );
    }
    for d in &inp.dgram {
        let ours = DatagramSeg::new(
            d.key, d.dqp, d.ext, d.sl, d.fl, d.rlid, d.rmac, d.tclass, d.hop, d.grh, d.rgid,
        );
        let c = format!(
            "{{ struct mlx5_wqe_datagram_seg s; memset(&s, 0, sizeof s); uint8_t m[6] = {}; \
             uint8_t r[16] = {}; mlx5dv_set_dgram_seg(&s, {}ull, {}u, {}, {}, {}, {}, m, {}, {}, {}u, r); \
             dump(&s, sizeof s); }}",
            c_array(&d.rmac), c_array(&d.rgid), d.key, d.dqp, d.ext as u8, d.sl, d.fl, d.rlid,
            d.tclass, d.hop, d.grh
        );
        g.bytes(&format!("dgram {d:?}"), &c, ours.as_bytes());
        // rdma-core's set_datagram_seg: the AH's vector, then QPN and Q_Key.
        let ud = ours.for_ud(d.dqp & 0xff_ffff, d.qkey);
        let c = format!(
            "{{ struct mlx5_wqe_datagram_seg s; memset(&s, 0, sizeof s); uint8_t m[6] = {}; \
             uint8_t r[16] = {}; mlx5dv_set_dgram_seg(&s, {}ull, {}u, {}, {}, {}, {}, m, {}, {}, {}u, r); \
             s.av.dqp_dct = htobe32({}u | MLX5_EXTENDED_UD_AV); s.av.key.qkey.qkey = htobe32({}u); \
             s.av.key.qkey.reserved = 0; dump(&s, sizeof s); }}",
            c_array(&d.rmac), c_array(&d.rgid), d.key, d.dqp, d.ext as u8, d.sl, d.fl, d.rlid,
            d.tclass, d.hop, d.grh, d.dqp & 0xff_ffff, d.qkey
        );
        g.bytes(&format!("ud av {d:?}"), &c, ud.as_bytes());
    }
    for &(raddr, rkey, a, b) in &inp.remote {
        let c = format!("{{ struct mlx5_wqe_raddr_seg s; memset(&s, 0xaa, sizeof s); s.raddr = htobe64({raddr}ull); s.rkey = htobe32({rkey}u); s.reserved = 0; dump(&s, sizeof s); }}");
        g.bytes(
            &format!("raddr {raddr:#x} {rkey:#x}"),
            &c,
            RaddrSeg::new(raddr, rkey).as_bytes(),
        );
        let c = format!("{{ struct mlx5_wqe_atomic_seg s; s.swap_add = htobe64({b}ull); s.compare = htobe64({a}ull); dump(&s, sizeof s); }}");
        g.bytes(
            &format!("cas {a:#x} {b:#x}"),
            &c,
            AtomicSeg::compare_swap(a, b).as_bytes(),
        );
        let c = format!("{{ struct mlx5_wqe_atomic_seg s; s.swap_add = htobe64({a}ull); s.compare = 0; dump(&s, sizeof s); }}");
        g.bytes(
            &format!("faa {a:#x}"),
            &c,
            AtomicSeg::fetch_add(a).as_bytes(),
        );
        let (len, next) = (rkey >> 1, raddr as u16);
        let c = format!("{{ struct mlx5_wqe_inl_data_seg s; s.byte_count = htobe32({len}u | MLX5_INLINE_SEG); dump(&s, sizeof s); }}");
        g.bytes(
            &format!("inline hdr {len}"),
            &c,
            InlineSeg::new(len).as_bytes(),
        );
        let c = format!("{{ struct mlx5_wqe_srq_next_seg s; memset(&s, 0, sizeof s); s.next_wqe_index = htobe16({next}); dump(&s, sizeof s); }}");
        g.bytes(
            &format!("srq next {next}"),
            &c,
            SrqNextSeg::new(next).as_bytes(),
        );
    }
    let c = "{ struct mlx5_wqe_data_seg s; s.byte_count = 0; s.lkey = htobe32(MLX5_INVALID_LKEY); s.addr = 0; dump(&s, sizeof s); }";
    g.bytes("data end", c, DataSeg::END.as_bytes());
}

/// The CQE accessors against the header's getters and struct fields.
fn cqes(g: &mut Golden, inp: &golden_support::Inputs) {
    for raw in &inp.cqes {
        let cqe: Cqe64 = zerocopy::FromBytes::read_from_bytes(&raw[..]).unwrap();
        let ours = format!(
            "{:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x} {:x}",
            cqe.owner(),
            cqe.se(),
            cqe.format(),
            cqe.opcode(),
            cqe.wqe_counter.get(),
            cqe.byte_cnt.get(),
            cqe.qpn(),
            cqe.send_opcode(),
            cqe.srqn_uidx(),
            cqe.imm_inval_pkey.get(),
            cqe.flags_rqpn.get(),
            cqe.slid.get(),
            cqe.syndrome(),
            cqe.vendor_err_synd(),
        );
        let c = format!(
            "{{ uint8_t b[64] = {}; struct mlx5_cqe64 *c = (void *)b; struct mlx5_err_cqe *e = (void *)b; \
             printf(\"%x %x %x %x %x %x %x %x %x %x %x %x %x %x\\n\", mlx5dv_get_cqe_owner(c), \
             mlx5dv_get_cqe_se(c), mlx5dv_get_cqe_format(c), mlx5dv_get_cqe_opcode(c), \
             be16toh(c->wqe_counter), be32toh(c->byte_cnt), be32toh(c->sop_drop_qpn) & 0xffffff, \
             be32toh(c->sop_drop_qpn) >> 24, be32toh(c->srqn_uidx) & 0xffffff, \
             be32toh(c->imm_inval_pkey), be32toh(c->flags_rqpn), be16toh(c->slid), e->syndrome, \
             e->vendor_err_synd); }}",
            c_array(raw)
        );
        g.line(&format!("cqe {}", hex(raw)), &c, ours);
    }
}

/// Whole WQEs: what `SendQueue::post` leaves in the ring against the same
/// WQE assembled in C from the header's setters (ds computed by the C side
/// from the segments it wrote).
fn wqes(g: &mut Golden, inp: &golden_support::Inputs) {
    for wr in &inp.wrs {
        let ours = golden_support::post_one(wr);
        g.bytes(&format!("wqe {wr:?}"), &c_wqe(wr), &ours);
    }
}

fn c_wqe(wr: &WrInput) -> String {
    let mut c = String::from("{ uint8_t w[1024]; uint8_t *p = w + 16; memset(w, 0, sizeof w); ");
    if let Some(d) = &wr.ud {
        c += &format!(
            "{{ uint8_t m[6] = {}; uint8_t r[16] = {}; struct mlx5_wqe_datagram_seg *s = (void *)p; \
             mlx5dv_set_dgram_seg(s, 0, 0, 0, {}, {}, {}, m, {}, {}, {}u, r); \
             s->av.dqp_dct = htobe32({}u | MLX5_EXTENDED_UD_AV); s->av.key.qkey.qkey = htobe32({}u); p += 48; }} ",
            c_array(&d.rmac), c_array(&d.rgid), d.sl, d.fl, d.rlid, d.tclass, d.hop, d.grh,
            d.dqp & 0xff_ffff, d.qkey
        );
    }
    if let Some((raddr, rkey)) = wr.remote {
        c += &format!("{{ struct mlx5_wqe_raddr_seg *r = (void *)p; r->raddr = htobe64({raddr}ull); r->rkey = htobe32({rkey}u); r->reserved = 0; p += 16; }} ");
    }
    if let Some((swap_add, compare)) = wr.atomic {
        c += &format!("{{ struct mlx5_wqe_atomic_seg *a = (void *)p; a->swap_add = htobe64({swap_add}ull); a->compare = htobe64({compare}ull); p += 16; }} ");
    }
    for &(addr, len, lkey) in &wr.sges {
        if len != 0 {
            c += &format!("mlx5dv_set_data_seg((void *)p, {len}u, {lkey}u, {addr}ull); p += 16; ");
        }
    }
    if let Some(data) = &wr.inline {
        if !data.is_empty() {
            c += &format!(
                "{{ uint8_t d[] = {}; struct mlx5_wqe_inl_data_seg *h = (void *)p; \
                 h->byte_count = htobe32({}u | MLX5_INLINE_SEG); memcpy(p + 4, d, sizeof d); \
                 p += (4 + sizeof d + 15) & ~15u; }} ",
                c_array(data),
                data.len()
            );
        }
    }
    c += &format!(
        "mlx5dv_set_ctrl_seg((void *)w, {}, {}, 0, {}u, {}, (uint8_t)((p - w) / 16), 0, htobe32({}u)); \
         dump(w, p - w); }}",
        wr.pi, wr.opcode, wr.qpn, wr.fm_ce_se, wr.imm
    );
    c
}

fn seg_call(ty: &str, f: &str, args: &str) -> String {
    format!("{{ struct {ty} s; memset(&s, 0, sizeof s); {f}(&s, {args}); dump(&s, sizeof s); }}")
}

fn c_array(b: &[u8]) -> String {
    let items: Vec<String> = b.iter().map(|x| format!("{x:#04x}")).collect();
    format!("{{{}}}", items.join(","))
}

#[test]
fn builders_match_mlx5dv_h() {
    let inp = inputs(200);
    let mut g = Golden::new();
    layouts(&mut g);
    constants(&mut g);
    segments(&mut g, &inp);
    cqes(&mut g, &inp);
    wqes(&mut g, &inp);
    let n = g.run();
    eprintln!(
        "golden: {n} comparisons ({} ctrl, {} data, {} dgram, {} raddr/atomic/inline/srq, {} cqe, {} wqe inputs)",
        inp.ctrl.len(),
        inp.data.len(),
        inp.dgram.len(),
        inp.remote.len(),
        inp.cqes.len(),
        inp.wrs.len()
    );
}

//! The Rust side of the creation differential against the fake uverbs
//! device (issue 29; `xtask/src/test/fake_mlx5.rs` runs it,
//! `fake/cases.c` is rdma-core's side, and this program prints what that
//! one prints): opens mlx5_0 with rverbs, allocates a PD and registers
//! an MR, then for every case of the file named by its argument registers
//! a dma-buf MR over a memfd and drops it, creates a CQ, an SRQ if the
//! case has one, and a QP on them, and drops them again. One line a case:
//! the errno of each step (0: created) and what was granted; each error's
//! text on stderr. Before each case, `case N` goes into the fake's log.
//!
//! Built with `--cfg rverbs_libc_syscalls`, so that rverbs' uverbs
//! `write()` goes through libc, where the fake answers it.

use rverbs::{Access, Context, Error, QpCaps, QpInit, QpType};
use std::fmt::Write as _;
use std::io::Write as _;

/// What the C side prints for a failed step: the errno (an argument
/// rverbs refuses itself is EINVAL, as libibverbs reports one).
fn errno(e: &Error) -> String {
    match (e.errno(), e) {
        (Some(n), _) => n.0.to_string(),
        (None, Error::InvalidArgument { .. }) => libc::EINVAL.to_string(),
        (None, e) => format!("({e})"),
    }
}

/// A memfd of 16 MiB.
fn memfd() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a NUL-terminated name and flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"dmabuf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened and owned by nothing else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(fd.try_clone()?).set_len(16 << 20)?;
    Ok(fd)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: fake_cases FILE")?;
    let cases = std::fs::read_to_string(path)?;
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(std::env::var("FAKE_UVERBS_LOG")?)?;
    let ctx = Context::open_by_name(Some("mlx5_0"))?;
    let pd = ctx.alloc_pd()?;
    let _mr = pd.alloc_mr(8192, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    // The "dma-buf": a memfd of 16 MiB (the fake takes any file).
    let dmabuf = memfd()?;
    let mut out = String::new();
    for (k, line) in cases.lines().enumerate() {
        let v: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()?;
        let [cqe, srq_wr, srq_sge, ty, sw, rw, ss, rs, inl, sig, off, len, iova, acc] = v[..]
        else {
            return Err(format!("case {k}: {line:?}").into());
        };
        let n = |v: u64| u32::try_from(v).map_err(|_| format!("case {k}: {v} is not a u32"));
        let [cqe, srq_wr, srq_sge, ty, sw, rw, ss, rs, inl, sig, acc] =
            [cqe, srq_wr, srq_sge, ty, sw, rw, ss, rs, inl, sig, acc].map(n);
        let (cqe, srq_wr, srq_sge, ty, sw, rw, ss, rs, inl, sig, acc) = (
            cqe?, srq_wr?, srq_sge?, ty?, sw?, rw?, ss?, rs?, inl?, sig?, acc?,
        );
        writeln!(log, "case {k}")?;
        write!(out, "case {k}")?;
        // Unknown bits kept: the kernel is the one to refuse them.
        let access = Access::from_bits_retain(acc);
        match pd.reg_dmabuf_mr(dmabuf.try_clone()?, off, len, iova, access) {
            Ok(_) => write!(out, " dmabuf=0")?,
            Err(e) => {
                write!(out, " dmabuf={}", errno(&e))?;
                eprintln!("case {k}: {e}");
            }
        }
        let cq = match ctx.create_cq(cqe, None, 0) {
            Ok(cq) => cq,
            Err(e) => {
                writeln!(out, " cq={}", errno(&e))?;
                eprintln!("case {k}: {e}");
                continue;
            }
        };
        write!(out, " cq=0/{}", cq.cqe())?;
        let srq = if srq_wr > 0 {
            match pd.create_srq(srq_wr, srq_sge, 0) {
                Ok(s) => {
                    write!(out, " srq=0/{}", s.max_wr())?;
                    Some(s)
                }
                Err(e) => {
                    writeln!(out, " srq={}", errno(&e))?;
                    eprintln!("case {k}: {e}");
                    continue;
                }
            }
        } else {
            None
        };
        let qp_type = match ty {
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            _ => return Err(format!("case {k}: QP type {ty}").into()),
        };
        let init = QpInit {
            caps: QpCaps {
                max_send_wr: sw,
                max_recv_wr: rw,
                max_send_sge: ss,
                max_recv_sge: rs,
                max_inline_data: inl,
            },
            sq_sig_all: sig != 0,
            srq: srq.as_ref(),
            ..QpInit::new(qp_type, &cq)
        };
        // The variant without the safe API's overrun rule (a CQ must hold
        // every completion the QP could have outstanding), which
        // rdma-core does not have: the cases compare sizing, not policy.
        match pd.create_qp_accepting_cq_overrun(&init) {
            Ok(qp) => {
                let c = qp.caps();
                writeln!(
                    out,
                    " qp=0/{}/{}/{}/{}/{}",
                    c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data
                )?;
            }
            Err(e) => {
                writeln!(out, " qp={}", errno(&e))?;
                eprintln!("case {k}: {e}");
            }
        }
    }
    std::io::stdout().write_all(out.as_bytes())?;
    Ok(())
}

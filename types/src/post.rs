//! Why a work request is not posted, and the checks every provider makes
//! the same way. A provider runs these before it writes anything to its
//! ring, then its own (what its WQE format or its kernel takes); either
//! way a refusal is one [`PostError`], whatever the provider.

use crate::qp::QpType;
use crate::wr::{SendOp, SendWr};

/// Why a work request was not posted. Nothing of it reached the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// The queue has no room for it.
    QueueFull,
    /// The QP is not in a state that takes sends (RESET, INIT or RTR: the
    /// kernel would refuse the doorbell only after the request was in the
    /// ring, and run it once the QP reached RTS).
    NotReady {
        /// The QP's state (`enum ib_qp_state`).
        state: u32,
    },
    /// More SGEs than the queue was created for.
    TooManySges {
        /// SGEs in the request.
        given: usize,
        /// The queue's limit.
        max: u32,
    },
    /// More inline bytes than the QP's `max_inline_data`.
    InlineTooLong {
        /// Bytes in the request.
        given: usize,
        /// The QP's limit.
        max: u32,
    },
    /// The operation carries no payload of its own that could be inline.
    InlineNotAllowed {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
    },
    /// Both inline data and SGEs were given.
    InlineAndSges,
    /// The QP's transport does not take the operation (a UD QP only
    /// sends; a UC QP neither reads nor does atomics).
    NotOnTransport {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
        /// The QP's transport.
        qp_type: QpType,
    },
    /// A UD destination on a connected QP, or none on a UD QP.
    UdMismatch {
        /// Whether the QP is UD.
        qp_is_ud: bool,
    },
    /// The UD destination's address handle was made by another provider
    /// (it does not carry the form of address this one needs).
    ForeignAddressHandle,
    /// The total length is more than the device moves in one request.
    TooLong {
        /// The total.
        length: u64,
        /// The device's limit.
        max: u64,
    },
    /// Atomics need one 8-byte local buffer and an 8-aligned remote
    /// address.
    BadAtomic,
    /// The operation takes no SGEs or inline data (local invalidate,
    /// window bind, FLUSH, and ATOMIC WRITE, whose bytes are in the
    /// operation).
    NoPayload {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
    },
    /// The kernel's driver does not offer the operation (ATOMIC WRITE and
    /// FLUSH came to rxe in Linux 6.2).
    NotOffered {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
    },
    /// The provider does not build this operation (yet).
    NotImplemented {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
    },
    /// The request's WQE would be larger than the queue's slots or the
    /// device's limit.
    WqeTooLarge {
        /// Its size in bytes.
        bytes: usize,
        /// The largest the queue takes.
        max: usize,
    },
    /// A prepared send's shape is one of SEND, SEND with immediate, RDMA
    /// WRITE, WRITE with immediate and RDMA READ, with exactly one SGE and
    /// no inline data (the other operations' payloads or keys change from
    /// post to post, or carry none).
    NotPreparable {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
    },
    /// A remote address given to a prepared post whose operation names no
    /// remote memory (a SEND).
    NoRemoteAddress {
        /// The operation (`enum ib_uverbs_wr_opcode`).
        opcode: u32,
    },
    /// A payload or destination given to a send being built piece by
    /// piece before any request was started in it.
    NoRequest,
}

impl PostError {
    /// Whether the request was refused for want of room (retry after
    /// polling) rather than for what it asked.
    pub fn is_full(&self) -> bool {
        matches!(self, PostError::QueueFull)
    }

    /// Whether the request is valid but the provider or kernel lacks the
    /// operation.
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            PostError::NotOffered { .. } | PostError::NotImplemented { .. }
        )
    }
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PostError::QueueFull => write!(f, "queue full"),
            PostError::NotReady { state } => {
                let name = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
                    .get(*state as usize)
                    .unwrap_or(&"an unknown state");
                write!(
                    f,
                    "the QP is in {name}: sends are posted from RTS on (nothing was posted)"
                )
            }
            PostError::TooManySges { given, max } => {
                write!(f, "{given} SGEs, the queue takes at most {max}")
            }
            PostError::InlineTooLong { given, max } => {
                write!(f, "{given} inline bytes, the QP takes at most {max}")
            }
            PostError::InlineNotAllowed { opcode } => {
                write!(f, "opcode {opcode} cannot carry inline data")
            }
            PostError::InlineAndSges => write!(f, "both inline data and SGEs given"),
            PostError::NotOnTransport { opcode, qp_type } => {
                write!(f, "opcode {opcode} is not available on a {qp_type:?} QP")
            }
            PostError::UdMismatch { qp_is_ud: true } => {
                write!(f, "a UD QP needs a destination (address handle)")
            }
            PostError::UdMismatch { qp_is_ud: false } => {
                write!(f, "a connected QP takes no UD destination")
            }
            PostError::ForeignAddressHandle => {
                write!(
                    f,
                    "the address handle was made on a device of another driver"
                )
            }
            PostError::TooLong { length, max } => {
                write!(f, "total length {length} exceeds the device's {max}")
            }
            PostError::BadAtomic => write!(
                f,
                "atomics need an 8-byte local buffer and an 8-byte aligned remote address"
            ),
            PostError::NoPayload { opcode } => {
                write!(f, "opcode {opcode} takes no SGEs or inline data")
            }
            PostError::NotOffered { opcode } => write!(
                f,
                "opcode {opcode} is not offered by the kernel's driver (rxe has ATOMIC WRITE \
                 and FLUSH from Linux 6.2)"
            ),
            PostError::NotImplemented { opcode } => {
                write!(f, "opcode {opcode} is not implemented by this provider")
            }
            PostError::WqeTooLarge { bytes, max } => {
                write!(f, "a WQE of {bytes} bytes, the queue takes at most {max}")
            }
            PostError::NotPreparable { opcode } => write!(
                f,
                "opcode {opcode} cannot be prepared: a prepared send is a SEND, SEND with \
                 immediate, RDMA WRITE, WRITE with immediate or RDMA READ with exactly one SGE \
                 and no inline data"
            ),
            PostError::NoRemoteAddress { opcode } => write!(
                f,
                "opcode {opcode} names no remote memory: a prepared post of it takes no remote \
                 address"
            ),
            PostError::NoRequest => write!(
                f,
                "no request was started: a payload or destination belongs to the request \
                 started last"
            ),
        }
    }
}

impl std::error::Error for PostError {}

/// What every send queue checks a request against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendLimits {
    /// The QP's transport.
    pub qp_type: QpType,
    /// `max_send_sge`.
    pub max_sge: u32,
    /// `max_inline_data`.
    pub max_inline: u32,
    /// `qp_type` is UD, kept apart so that the data path tests a flag.
    ud: bool,
}

impl SendLimits {
    /// The limits of a QP of `qp_type` granted `max_sge` and `max_inline`.
    pub const fn new(qp_type: QpType, max_sge: u32, max_inline: u32) -> SendLimits {
        SendLimits {
            qp_type,
            max_sge,
            max_inline,
            ud: matches!(qp_type, QpType::Ud),
        }
    }
}

/// The checks every provider makes of a send request, before its own:
/// the transport takes the operation, a UD destination iff the QP is UD,
/// and an SGE list or inline payload within the QP's limits (which
/// operations may carry inline data is the provider's to say).
#[inline(always)]
pub fn check_send<S, A>(l: &SendLimits, wr: &SendWr<'_, S, A>) -> Result<(), PostError> {
    // One match on the transport and the destination: RC without a UD
    // destination, the common case, pays two comparisons (RC takes every
    // operation); UD one more for the operation.
    match (l.qp_type, wr.ud.is_some()) {
        (QpType::Rc, false) => {}
        (QpType::Ud, true) | (QpType::Uc, false) => check_transport(l.qp_type, &wr.op)?,
        _ => return Err(PostError::UdMismatch { qp_is_ud: l.ud }),
    }
    check_payload(l.max_sge, l.max_inline, wr.sges.len(), wr.inline)
}

/// What a prepared send's shape must be, checked once when it is
/// prepared (then [`check_send`] too): one of the five operations whose
/// per-post variables are the work request id, one SGE and, for the
/// operations that name remote memory, the remote address; exactly one
/// SGE; no inline data. Returns whether the operation names remote memory
/// (a post may then move the remote address).
pub fn check_preparable<S, A>(wr: &SendWr<'_, S, A>) -> Result<bool, PostError> {
    let remote = match wr.op {
        SendOp::Send | SendOp::SendWithImm(_) => false,
        SendOp::Write(_) | SendOp::WriteWithImm(..) | SendOp::Read(_) => true,
        _ => return Err(not_preparable(&wr.op)),
    };
    if wr.sges.len() != 1 || wr.inline.is_some() {
        return Err(not_preparable(&wr.op));
    }
    Ok(remote)
}

fn not_preparable(op: &SendOp) -> PostError {
    PostError::NotPreparable {
        opcode: op.opcode(),
    }
}

/// Whether a UC or UD QP takes `op`: a UD QP only sends; a UC QP neither
/// reads nor does atomics.
/// Inline, with the refusal out of line: every UD send pays this check
/// (callgrind: an out-of-line call here cost a UD post 11 instructions).
#[inline(always)]
fn check_transport(qp_type: QpType, op: &SendOp) -> Result<(), PostError> {
    let ok = match qp_type {
        QpType::Ud => matches!(op, SendOp::Send | SendOp::SendWithImm(_)),
        QpType::Uc => !op.reads_remote(),
        QpType::Rc => true,
    };
    if ok {
        Ok(())
    } else {
        Err(not_on_transport(qp_type, op))
    }
}

#[cold]
#[inline(never)]
fn not_on_transport(qp_type: QpType, op: &SendOp) -> PostError {
    PostError::NotOnTransport {
        opcode: op.opcode(),
        qp_type,
    }
}

/// SGEs within `max_sge`, or inline data within `max_inline` and no SGEs.
#[inline(always)]
pub fn check_payload(
    max_sge: u32,
    max_inline: u32,
    sges: usize,
    inline: Option<&[u8]>,
) -> Result<(), PostError> {
    match inline {
        None if sges > max_sge as usize => Err(PostError::TooManySges {
            given: sges,
            max: max_sge,
        }),
        None => Ok(()),
        Some(_) if sges > 0 => Err(PostError::InlineAndSges),
        Some(d) if d.len() > max_inline as usize => Err(PostError::InlineTooLong {
            given: d.len(),
            max: max_inline,
        }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wr::{AhAddr, Remote, Sge};

    type Wr<'a> = SendWr<'a, Sge, AhAddr>;

    const RC: SendLimits = SendLimits::new(QpType::Rc, 2, 16);

    #[test]
    fn preparable_shapes() {
        let r = Remote { addr: 8, rkey: 1 };
        let sge = [Sge::default()];
        let two = [Sge::default(); 2];
        for (op, remote) in [
            (SendOp::Send, false),
            (SendOp::SendWithImm(3), false),
            (SendOp::Write(r), true),
            (SendOp::WriteWithImm(r, 3), true),
            (SendOp::Read(r), true),
        ] {
            assert_eq!(check_preparable(&Wr::new(1, op, &sge)), Ok(remote));
            let refused = Err(PostError::NotPreparable {
                opcode: op.opcode(),
            });
            assert_eq!(check_preparable(&Wr::new(1, op, &[])), refused);
            assert_eq!(check_preparable(&Wr::new(1, op, &two)), refused);
            assert_eq!(check_preparable(&Wr::inline(1, op, b"x")), refused);
        }
        let cas = SendOp::CompareSwap {
            remote: r,
            compare: 0,
            swap: 1,
        };
        assert_eq!(
            check_preparable(&Wr::new(1, cas, &sge)),
            Err(PostError::NotPreparable {
                opcode: cas.opcode()
            })
        );
    }

    #[test]
    fn transports_take_their_operations_only() {
        let r = Remote { addr: 0, rkey: 1 };
        let read = Wr::new(1, SendOp::Read(r), &[]);
        let uc = SendLimits::new(QpType::Uc, 2, 16);
        assert_eq!(check_send(&RC, &read), Ok(()));
        assert_eq!(
            check_send(&uc, &read),
            Err(PostError::NotOnTransport {
                opcode: SendOp::Read(r).opcode(),
                qp_type: QpType::Uc
            })
        );
        let ud = SendLimits::new(QpType::Ud, 2, 16);
        let send = Wr::new(2, SendOp::Send, &[]);
        assert_eq!(
            check_send(&ud, &send),
            Err(PostError::UdMismatch { qp_is_ud: true })
        );
    }

    #[test]
    fn payload_limits() {
        assert_eq!(check_payload(2, 16, 2, None), Ok(()));
        assert_eq!(
            check_payload(2, 16, 3, None),
            Err(PostError::TooManySges { given: 3, max: 2 })
        );
        assert_eq!(
            check_payload(2, 16, 1, Some(b"x")),
            Err(PostError::InlineAndSges)
        );
        assert_eq!(
            check_payload(2, 16, 0, Some(&[0; 17])),
            Err(PostError::InlineTooLong { given: 17, max: 16 })
        );
        assert_eq!(check_payload(2, 16, 0, Some(&[0; 16])), Ok(()));
    }
}

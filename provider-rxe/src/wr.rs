//! Work requests as this provider takes them: the verbs vocabulary of
//! `rverbs-types`, over any SGE-shaped elements and any address handle
//! that resolves to an AH number. The safe API posts its own requests
//! here unchanged.

pub use rverbs_types::{
    as_sges, AddressHandle, AhAddr, AsSge, FlushLevel, FlushType, MwBind, RecvWr, Remote, SendOp,
    SendWr, Sge, Ud,
};

//! Multicast over rdma_cm (`rdma_join_multicast`, `rdma_join_multicast_ex`,
//! `rdma_leave_multicast`), with librdmacm's policy: when the kernel
//! reports the join, the id's QP (if any, and unless the join is
//! send-only) is attached to the group the event names (`ATTACH_MCAST`);
//! a leave detaches it before `LEAVE_MCAST`.

use super::{lock, CmEvent, CmId, IdShared};
use crate::error::{Error, Result};
use rverbs_cm::{EventType, JoinFlags};
use std::net::SocketAddr;

/// One group an id joined.
pub(super) struct Membership {
    /// The group's address, as the user named it.
    addr: SocketAddr,
    /// The uid the membership's events carry (registered on the channel
    /// for this id).
    pub(super) uid: u64,
    /// The kernel's handle of the membership.
    handle: u32,
    flags: JoinFlags,
    /// The GID and LID the QP was attached to, once it was.
    attached: Option<([u8; 16], u16)>,
}

impl CmId {
    /// Joins the multicast group `addr` as a full member
    /// (`rdma_join_multicast`); `MULTICAST_JOIN` follows, with the group's
    /// address vector, QPN (`0xffffff`) and Q_Key in [`CmEvent::ud`], or
    /// `MULTICAST_ERROR`. The id must be bound to a device (bind to a
    /// local RDMA address, or resolve the group's address).
    pub fn join_multicast(&self, addr: &SocketAddr) -> Result<()> {
        self.join_multicast_ex(addr, JoinFlags::FullMember)
    }

    /// [`join_multicast`](Self::join_multicast) with join flags
    /// (`rdma_join_multicast_ex`): a send-only member may send to the group
    /// but receives nothing from it (its QP is not attached).
    pub fn join_multicast_ex(&self, addr: &SocketAddr, flags: JoinFlags) -> Result<()> {
        // The state stays locked across the command: the join event, which
        // another thread may read at once, finds the membership recorded.
        let mut st = lock(&self.shared.st);
        if st.mcs.iter().any(|m| m.addr == *addr) {
            return Err(Error::invalid(format!(
                "JOIN_MCAST: the rdma_cm id already joined {addr}"
            )));
        }
        let uid = super::next_uid();
        lock(&self.chan.ids).insert(uid, self.shared.clone());
        match self.raw().join_mcast(addr, uid, flags) {
            Ok(handle) => {
                st.mcs.push(Membership {
                    addr: *addr,
                    uid,
                    handle,
                    flags,
                    attached: None,
                });
                Ok(())
            }
            Err(e) => {
                lock(&self.chan.ids).remove(&uid);
                Err(e.into())
            }
        }
    }

    /// Leaves the group `addr` (`rdma_leave_multicast`): detaches the QP,
    /// then `LEAVE_MCAST`. Leaving a group the id did not join is an error.
    pub fn leave_multicast(&self, addr: &SocketAddr) -> Result<()> {
        let (m, qp) = {
            let mut st = lock(&self.shared.st);
            let i = st.mcs.iter().position(|m| m.addr == *addr).ok_or_else(|| {
                Error::invalid(format!("LEAVE_MCAST: the rdma_cm id has not joined {addr}"))
            })?;
            (st.mcs.remove(i), st.qp.clone())
        };
        if let (Some((gid, lid)), Some(qp)) = (m.attached, qp) {
            // As librdmacm: the leave goes ahead even if the detach fails
            // (the QP may already be gone from the group).
            let _ = qp.detach_mcast(&gid, lid);
        }
        let r = self.raw().leave_mcast(m.handle);
        lock(&self.chan.ids).remove(&m.uid);
        r.map(drop).map_err(Into::into)
    }
}

impl IdShared {
    /// `MULTICAST_JOIN` / `MULTICAST_ERROR` of membership `uid`: names the
    /// group and the id in the event and, on a join, attaches the QP. A
    /// failed attach is reported as `MULTICAST_ERROR` with its errno.
    pub(super) fn mcast_event(&self, uid: u64, out: &mut CmEvent) {
        out.uid = lock(&self.raw).uid();
        let mut st = lock(&self.st);
        let qp = st.qp.clone();
        let Some(m) = st.mcs.iter_mut().find(|m| m.uid == uid) else {
            return;
        };
        out.mcast = Some(m.addr);
        if out.kind != EventType::MULTICAST_JOIN || m.flags == JoinFlags::SendOnlyFullMember {
            return;
        }
        let av = super::ud_ah_attr(&out.ud);
        let gid = av.grh.map(|g| g.dgid).unwrap_or_default();
        if let Some(qp) = qp {
            match qp.attach_mcast(&gid, av.dlid) {
                Ok(()) => m.attached = Some((gid, av.dlid)),
                Err(e) => {
                    out.kind = EventType::MULTICAST_ERROR;
                    out.status = -e.errno().map_or(libc::EIO, |e| e.0);
                }
            }
        }
    }

    /// When the id goes: its memberships' uids leave the channel, and the
    /// QP leaves the groups it was attached to (the kernel's memberships
    /// go with the kernel id).
    pub(super) fn drop_memberships(&self, chan: &super::CmChannel) {
        let (mcs, qp) = {
            let mut st = lock(&self.st);
            (std::mem::take(&mut st.mcs), st.qp.clone())
        };
        let mut ids = lock(&chan.ids);
        for m in mcs {
            ids.remove(&m.uid);
            if let (Some((gid, lid)), Some(qp)) = (m.attached, &qp) {
                let _ = qp.detach_mcast(&gid, lid);
            }
        }
    }
}

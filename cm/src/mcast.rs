//! Multicast membership of a UD id: `JOIN_MCAST` and `LEAVE_MCAST`.

use crate::error::Result;
use crate::id::{storage, Id};
use std::net::SocketAddr;
use uverbs_abi::cm as c;
use zerocopy::{FromZeros, IntoBytes};

/// How to join a group (`RDMA_MC_JOIN_FLAG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JoinFlags {
    /// Send and receive (`RDMA_MC_JOIN_FLAG_FULLMEMBER`, what
    /// `rdma_join_multicast` does).
    #[default]
    FullMember,
    /// Send only (`RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER`): the group's
    /// traffic is not delivered here, so no QP is attached.
    SendOnlyFullMember,
}

impl JoinFlags {
    fn raw(self) -> u16 {
        match self {
            JoinFlags::FullMember => c::RDMA_MC_JOIN_FLAG_FULLMEMBER,
            JoinFlags::SendOnlyFullMember => c::RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER,
        }
    }
}

impl Id {
    /// Joins the multicast group `addr` (`JOIN_MCAST`); `MULTICAST_JOIN`
    /// (with the group's address vector and Q_Key in its UD parameters) or
    /// `MULTICAST_ERROR` follows, carrying `uid`. Returns the kernel's
    /// handle of the membership, for [`leave_mcast`](Self::leave_mcast).
    pub fn join_mcast(&self, addr: &SocketAddr, uid: u64, flags: JoinFlags) -> Result<u32> {
        let (addr, addr_size) = storage(addr);
        let mut resp = c::RdmaUcmCreateIdResp::new_zeroed();
        let cmd = c::RdmaUcmJoinMcast {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            uid,
            id: self.handle(),
            addr_size,
            join_flags: flags.raw(),
            addr,
        };
        self.cmd(
            "JOIN_MCAST",
            c::RDMA_USER_CM_CMD_JOIN_MCAST,
            &cmd,
            size_of_val(&resp),
        )?;
        Ok(resp.id)
    }

    /// Leaves a group joined with [`join_mcast`](Self::join_mcast)
    /// (`LEAVE_MCAST`, naming the membership's handle); returns how many
    /// events the kernel reported for the membership.
    pub fn leave_mcast(&self, membership: u32) -> Result<u32> {
        let mut resp = c::RdmaUcmDestroyIdResp::new_zeroed();
        let cmd = c::RdmaUcmDestroyId {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: membership,
            reserved: 0,
        };
        self.cmd(
            "LEAVE_MCAST",
            c::RDMA_USER_CM_CMD_LEAVE_MCAST,
            &cmd,
            size_of_val(&resp),
        )?;
        Ok(resp.events_reported)
    }
}

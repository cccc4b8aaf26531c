//! [`Id`]: a kernel `rdma_cm_id` and the commands that act on it.

use crate::channel::EventChannel;
use crate::error::{Error, Result};
use crate::event::{ConnParam, Event};
use crate::{EventType, PortSpace};
use std::net::SocketAddr;
use std::sync::Arc;
use uverbs_abi::cm as c;
use uverbs_abi::verbs::IbUverbsQpAttr;
use zerocopy::{FromZeros, IntoBytes};

/// Where an id is bound and what it is connected to (`QUERY`, option
/// `ADDR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrInfo {
    /// The local address (port 0 before bind / resolve).
    pub src: Option<SocketAddr>,
    /// The peer address, once resolved or connected.
    pub dst: Option<SocketAddr>,
    /// The node GUID of the RDMA device the id is bound to (host order), 0
    /// if none yet.
    pub node_guid: u64,
    /// The device port.
    pub port_num: u8,
    /// The P_Key.
    pub pkey: u16,
    /// The kernel's index of the device (`ibdev_index`).
    pub ibdev_index: u32,
}

/// A kernel `rdma_cm_id` on an [`EventChannel`]. Its events are read from
/// the channel; they carry its [`uid`](Self::uid). Dropping it destroys
/// the kernel id (`DESTROY_ID`): a connection it holds is torn down and
/// its queued events are discarded by the kernel.
#[derive(Debug)]
pub struct Id {
    chan: Arc<EventChannel>,
    handle: u32,
    uid: u64,
    ps: PortSpace,
    live: bool,
}

/// The kernel wants a byte length of addresses it can check.
pub(crate) fn storage(a: &SocketAddr) -> (c::KernelSockaddrStorage, u16) {
    let len = match a {
        SocketAddr::V4(_) => size_of::<c::SockaddrIn>(),
        SocketAddr::V6(_) => size_of::<c::SockaddrIn6>(),
    };
    (c::KernelSockaddrStorage::from_socket_addr(a), len as u16)
}

impl Id {
    /// Creates an id (`CREATE_ID`) in port space `ps` (`TCP` for RC, `UDP`
    /// for UD). `uid` comes back in its events.
    pub fn create(chan: &Arc<EventChannel>, uid: u64, ps: PortSpace) -> Result<Id> {
        let qp_type = match ps {
            PortSpace::UDP | PortSpace::IPOIB => 4, // IB_QPT_UD
            _ => 2,                                 // IB_QPT_RC
        };
        let mut resp = c::RdmaUcmCreateIdResp::new_zeroed();
        let cmd = c::RdmaUcmCreateId {
            uid,
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            ps: ps.0,
            qp_type,
            reserved: [0; 5],
        };
        chan.command(
            "CREATE_ID",
            None,
            c::RDMA_USER_CM_CMD_CREATE_ID,
            &cmd,
            size_of_val(&resp),
        )?;
        Ok(Id {
            chan: chan.clone(),
            handle: resp.id,
            uid,
            ps,
            live: true,
        })
    }

    /// Takes ownership of the id a `CONNECT_REQUEST` event announced
    /// (`event.id`), on the listener's channel. `uid` is what its later
    /// events will carry once [`accept`](Self::accept) has told the
    /// kernel; until then they carry the listener's.
    pub fn adopt(chan: &Arc<EventChannel>, event: &Event, uid: u64, ps: PortSpace) -> Result<Id> {
        if event.kind != EventType::CONNECT_REQUEST {
            return Err(Error::InvalidArgument(format!(
                "only a CONNECT_REQUEST announces a new id, not {}",
                event.name()
            )));
        }
        Ok(Id {
            chan: chan.clone(),
            handle: event.id,
            uid,
            ps,
            live: true,
        })
    }

    /// The kernel's handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// The user value events of this id carry.
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// The port space.
    pub fn port_space(&self) -> PortSpace {
        self.ps
    }

    /// The channel its events arrive on.
    pub fn channel(&self) -> &Arc<EventChannel> {
        &self.chan
    }

    pub(crate) fn cmd<T: IntoBytes + zerocopy::Immutable>(
        &self,
        op: &'static str,
        cmd: u32,
        payload: &T,
        out_len: usize,
    ) -> Result<()> {
        self.chan
            .command(op, Some(self.handle), cmd, payload, out_len)
    }

    /// Binds to a local address (`BIND`); port 0 picks a free port, an
    /// unspecified address binds to every device.
    pub fn bind(&self, addr: &SocketAddr) -> Result<()> {
        let (addr, addr_size) = storage(addr);
        let cmd = c::RdmaUcmBind {
            id: self.handle,
            addr_size,
            reserved: 0,
            addr,
        };
        self.cmd("BIND", c::RDMA_USER_CM_CMD_BIND, &cmd, 0)
    }

    /// Starts resolving `dst` to a device and path (`RESOLVE_ADDR`):
    /// `ADDR_RESOLVED` or `ADDR_ERROR` follows.
    pub fn resolve_addr(
        &self,
        src: Option<&SocketAddr>,
        dst: &SocketAddr,
        timeout_ms: u32,
    ) -> Result<()> {
        let (dst_addr, dst_size) = storage(dst);
        let (src_addr, src_size) = match src {
            Some(s) => storage(s),
            None => (c::KernelSockaddrStorage::new_zeroed(), 0),
        };
        let cmd = c::RdmaUcmResolveAddr {
            id: self.handle,
            timeout_ms,
            src_size,
            dst_size,
            reserved: 0,
            src_addr,
            dst_addr,
        };
        self.cmd("RESOLVE_ADDR", c::RDMA_USER_CM_CMD_RESOLVE_ADDR, &cmd, 0)
    }

    /// Starts resolving the route (`RESOLVE_ROUTE`): `ROUTE_RESOLVED` or
    /// `ROUTE_ERROR` follows.
    pub fn resolve_route(&self, timeout_ms: u32) -> Result<()> {
        let cmd = c::RdmaUcmResolveRoute {
            id: self.handle,
            timeout_ms,
        };
        self.cmd("RESOLVE_ROUTE", c::RDMA_USER_CM_CMD_RESOLVE_ROUTE, &cmd, 0)
    }

    /// Listens for connection requests (`LISTEN`); each arrives as a
    /// `CONNECT_REQUEST` event with a new id.
    pub fn listen(&self, backlog: u32) -> Result<()> {
        let cmd = c::RdmaUcmListen {
            id: self.handle,
            backlog,
        };
        self.cmd("LISTEN", c::RDMA_USER_CM_CMD_LISTEN, &cmd, 0)
    }

    fn kernel_param(p: &ConnParam) -> Result<c::RdmaUcmConnParam> {
        let mut k = c::RdmaUcmConnParam::zeroed();
        k.set_private_data(&p.private_data)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        k.qp_num = p.qp_num;
        k.srq = u8::from(p.srq);
        k.responder_resources = p.responder_resources;
        k.initiator_depth = p.initiator_depth;
        k.flow_control = p.flow_control;
        k.retry_count = p.retry_count;
        k.rnr_retry_count = p.rnr_retry_count;
        k.valid = 1;
        Ok(k)
    }

    /// Sends a connection request (`CONNECT`); `CONNECT_RESPONSE` (then the
    /// caller's RTU, [`establish`](Self::establish)), `REJECTED`,
    /// `UNREACHABLE` or `CONNECT_ERROR` follows. `p.qp_num` names the
    /// local QP.
    pub fn connect(&self, p: &ConnParam) -> Result<()> {
        let cmd = c::RdmaUcmConnect {
            conn_param: Self::kernel_param(p)?,
            id: self.handle,
            reserved: 0,
            ece: c::RdmaUcmEce::default(),
        };
        self.cmd("CONNECT", c::RDMA_USER_CM_CMD_CONNECT, &cmd, 0)
    }

    /// Accepts a connection request (`ACCEPT`) with the id's uid;
    /// `ESTABLISHED` follows.
    pub fn accept(&self, p: &ConnParam) -> Result<()> {
        let cmd = c::RdmaUcmAccept {
            uid: self.uid,
            conn_param: Self::kernel_param(p)?,
            id: self.handle,
            reserved: 0,
            ece: c::RdmaUcmEce::default(),
        };
        self.cmd("ACCEPT", c::RDMA_USER_CM_CMD_ACCEPT, &cmd, 0)
    }

    /// The active side's ready-to-use after a `CONNECT_RESPONSE` (an
    /// `ACCEPT` with no parameters, as librdmacm sends it): the kernel sends
    /// the RTU and the connection is established.
    pub fn establish(&self) -> Result<()> {
        let mut cmd = c::RdmaUcmAccept::new_zeroed();
        cmd.id = self.handle;
        self.cmd("ACCEPT (RTU)", c::RDMA_USER_CM_CMD_ACCEPT, &cmd, 0)
    }

    /// Rejects a connection request (`REJECT`) with private data; the peer
    /// sees `REJECTED` with status 28 (consumer reject) and the data.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        let mut cmd = c::RdmaUcmReject::new_zeroed();
        cmd.id = self.handle;
        cmd.set_private_data(private_data)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        self.cmd("REJECT", c::RDMA_USER_CM_CMD_REJECT, &cmd, 0)
    }

    /// Disconnects (`DISCONNECT`): both sides get `DISCONNECTED`.
    pub fn disconnect(&self) -> Result<()> {
        let cmd = c::RdmaUcmDisconnect { id: self.handle };
        self.cmd("DISCONNECT", c::RDMA_USER_CM_CMD_DISCONNECT, &cmd, 0)
    }

    /// The QP attributes and mask the kernel wants for a move to `state`
    /// (`INIT_QP_ATTR`; `IB_QPS_*`): what the connection negotiated.
    pub fn init_qp_attr(&self, state: u32) -> Result<IbUverbsQpAttr> {
        let mut resp = IbUverbsQpAttr::new_zeroed();
        let cmd = c::RdmaUcmInitQpAttr {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            qp_state: state,
        };
        self.cmd(
            "INIT_QP_ATTR",
            c::RDMA_USER_CM_CMD_INIT_QP_ATTR,
            &cmd,
            size_of_val(&resp),
        )?;
        Ok(resp)
    }

    /// Where the id is bound and connected (`QUERY`, option `ADDR`).
    pub fn query_addr(&self) -> Result<AddrInfo> {
        let mut resp = c::RdmaUcmQueryAddrResp::new_zeroed();
        let cmd = c::RdmaUcmQuery {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            option: c::RDMA_USER_CM_QUERY_ADDR,
        };
        self.cmd(
            "QUERY (ADDR)",
            c::RDMA_USER_CM_CMD_QUERY,
            &cmd,
            size_of_val(&resp),
        )?;
        // An unset address has family 0: not an error, just nothing yet.
        let addr = |s: &c::KernelSockaddrStorage| {
            s.to_socket_addr()
                .ok()
                .filter(|a| !(a.ip().is_unspecified() && a.port() == 0))
        };
        Ok(AddrInfo {
            src: addr(&resp.src_addr),
            dst: addr(&resp.dst_addr),
            // __be64 on the wire.
            node_guid: u64::from_be(resp.node_guid),
            port_num: resp.port_num,
            pkey: resp.pkey,
            ibdev_index: resp.ibdev_index,
        })
    }

    /// The number of path records the route holds (`QUERY`, option
    /// `PATH`); 1 once a route to a RoCE peer is resolved.
    pub fn query_num_paths(&self) -> Result<u32> {
        // Room for the header and a few paths (each 72 bytes).
        let mut resp = [0u32; 80];
        let cmd = c::RdmaUcmQuery {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            option: c::RDMA_USER_CM_QUERY_PATH,
        };
        self.cmd(
            "QUERY (PATH)",
            c::RDMA_USER_CM_CMD_QUERY,
            &cmd,
            size_of_val(&resp),
        )?;
        Ok(resp[0])
    }

    /// Moves the id to another channel (`MIGRATE_ID`): its later events are
    /// read there. Returns how many events the kernel had reported for it.
    pub fn migrate(&mut self, to: &Arc<EventChannel>) -> Result<u32> {
        use std::os::fd::{AsFd, AsRawFd};
        let mut resp = c::RdmaUcmMigrateResp::new_zeroed();
        // Written on the *new* channel, naming the id's current one.
        let cmd = c::RdmaUcmMigrateId {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            fd: self.chan.as_fd().as_raw_fd() as u32,
        };
        to.command(
            "MIGRATE_ID",
            Some(self.handle),
            c::RDMA_USER_CM_CMD_MIGRATE_ID,
            &cmd,
            size_of_val(&resp),
        )?;
        self.chan = to.clone();
        Ok(resp.events_reported)
    }

    /// Destroys the kernel id now (`DESTROY_ID`) and returns how many
    /// events the kernel reported for it.
    pub fn destroy(mut self) -> Result<u32> {
        self.live = false;
        self.destroy_inner()
    }

    fn destroy_inner(&self) -> Result<u32> {
        let mut resp = c::RdmaUcmDestroyIdResp::new_zeroed();
        let cmd = c::RdmaUcmDestroyId {
            response: resp.as_mut_bytes().as_mut_ptr() as u64,
            id: self.handle,
            reserved: 0,
        };
        self.cmd(
            "DESTROY_ID",
            c::RDMA_USER_CM_CMD_DESTROY_ID,
            &cmd,
            size_of_val(&resp),
        )?;
        Ok(resp.events_reported)
    }
}

impl Drop for Id {
    fn drop(&mut self) {
        if self.live {
            // Nothing to report to: the id is gone either way once its
            // file is closed.
            let _ = self.destroy_inner();
        }
    }
}

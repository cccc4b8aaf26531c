//! One zero-sized descriptor per write() command: its number, its core
//! request and its core response, for [`encode_write`]
//! / [`encode_ex_write`] and the generic execute
//! path built on them.

use super::*;

macro_rules! write_cmds {
    ($($(#[$doc:meta])* $name:ident = $cmd:ident: $req:ty => $resp:ty;)*) => {
        $(
            $(#[$doc])*
            #[doc = concat!("\n\n`", stringify!($cmd), "`: [`", stringify!($req),
                "`] answered by `", stringify!($resp), "`.")]
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub struct $name;

            impl WriteCmd for $name {
                const CMD: u32 = $cmd;
                const NAME: &'static str =
                    strip_prefix(stringify!($cmd), "IB_USER_VERBS_CMD_");
                type Req = $req;
                type Resp = $resp;
            }
        )*

        /// Calls `v` once per non-extended command.
        #[cfg(test)]
        pub(crate) fn visit_write(v: &mut impl WriteVisitor) {
            $(v.visit::<$name>(stringify!($name));)*
        }
    };
}

macro_rules! ex_write_cmds {
    ($($(#[$doc:meta])* $name:ident = $cmd:ident: $req:ty => $resp:ty;)*) => {
        $(
            $(#[$doc])*
            #[doc = concat!("\n\n`", stringify!($cmd), "` (extended): [`", stringify!($req),
                "`] answered by `", stringify!($resp), "`.")]
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub struct $name;

            impl ExWriteCmd for $name {
                const CMD: u32 = $cmd;
                const NAME: &'static str =
                    strip_prefix(concat!(stringify!($cmd), "_EX"), "IB_USER_VERBS_EX_CMD_");
                type Req = $req;
                type Resp = $resp;
            }
        )*

        /// Calls `v` once per extended command.
        #[cfg(test)]
        pub(crate) fn visit_ex_write(v: &mut impl ExWriteVisitor) {
            $(v.visit::<$name>(stringify!($name));)*
        }
    };
}

/// `name` without `prefix`, at compile time: a command constant that does
/// not start with its family's prefix fails the build.
const fn strip_prefix(name: &'static str, prefix: &'static str) -> &'static str {
    let (n, p) = (name.as_bytes(), prefix.as_bytes());
    assert!(
        n.len() > p.len(),
        "a command name is longer than its prefix"
    );
    let mut i = 0;
    while i < p.len() {
        assert!(n[i] == p[i], "a command name starts with its prefix");
        i += 1;
    }
    match core::str::from_utf8(n.split_at(p.len()).1) {
        Ok(s) => s,
        Err(_) => panic!("a command name is ASCII"),
    }
}

/// Something done for every non-extended command type (tests).
#[cfg(test)]
pub(crate) trait WriteVisitor {
    fn visit<C: WriteCmd>(&mut self, name: &'static str);
}

/// Something done for every extended command type (tests).
#[cfg(test)]
pub(crate) trait ExWriteVisitor {
    fn visit<C: ExWriteCmd>(&mut self, name: &'static str);
}

write_cmds! {
    /// Open a device context (and its async event fd).
    GetContext = IB_USER_VERBS_CMD_GET_CONTEXT: IbUverbsGetContext => IbUverbsGetContextResp;
    /// Query the device's attributes (legacy 176-byte response).
    QueryDevice = IB_USER_VERBS_CMD_QUERY_DEVICE: IbUverbsQueryDevice => IbUverbsQueryDeviceResp;
    /// Query a port.
    QueryPort = IB_USER_VERBS_CMD_QUERY_PORT: IbUverbsQueryPort => IbUverbsQueryPortResp;
    /// Allocate a PD.
    AllocPd = IB_USER_VERBS_CMD_ALLOC_PD: IbUverbsAllocPd => IbUverbsAllocPdResp;
    /// Free a PD.
    DeallocPd = IB_USER_VERBS_CMD_DEALLOC_PD: IbUverbsDeallocPd => ();
    /// Create an AH.
    CreateAh = IB_USER_VERBS_CMD_CREATE_AH: IbUverbsCreateAh => IbUverbsCreateAhResp;
    /// Destroy an AH.
    DestroyAh = IB_USER_VERBS_CMD_DESTROY_AH: IbUverbsDestroyAh => ();
    /// Register an MR.
    RegMr = IB_USER_VERBS_CMD_REG_MR: IbUverbsRegMr => IbUverbsRegMrResp;
    /// Change an MR.
    ReregMr = IB_USER_VERBS_CMD_REREG_MR: IbUverbsReregMr => IbUverbsReregMrResp;
    /// Deregister an MR.
    DeregMr = IB_USER_VERBS_CMD_DEREG_MR: IbUverbsDeregMr => ();
    /// Allocate an MW.
    AllocMw = IB_USER_VERBS_CMD_ALLOC_MW: IbUverbsAllocMw => IbUverbsAllocMwResp;
    /// Free an MW.
    DeallocMw = IB_USER_VERBS_CMD_DEALLOC_MW: IbUverbsDeallocMw => ();
    /// Create a completion channel.
    CreateCompChannel = IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL:
        IbUverbsCreateCompChannel => IbUverbsCreateCompChannelResp;
    /// Create a CQ.
    CreateCq = IB_USER_VERBS_CMD_CREATE_CQ: IbUverbsCreateCq => IbUverbsCreateCqResp;
    /// Resize a CQ.
    ResizeCq = IB_USER_VERBS_CMD_RESIZE_CQ: IbUverbsResizeCq => IbUverbsResizeCqResp;
    /// Destroy a CQ.
    DestroyCq = IB_USER_VERBS_CMD_DESTROY_CQ: IbUverbsDestroyCq => IbUverbsDestroyCqResp;
    /// Poll a CQ through the kernel (the [`IbUverbsWc`]s follow the
    /// response: pass their length as udata out).
    PollCq = IB_USER_VERBS_CMD_POLL_CQ: IbUverbsPollCq => IbUverbsPollCqResp;
    /// Arm a CQ.
    ReqNotifyCq = IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: IbUverbsReqNotifyCq => ();
    /// Create a QP.
    CreateQp = IB_USER_VERBS_CMD_CREATE_QP: IbUverbsCreateQp => IbUverbsCreateQpResp;
    /// Query a QP.
    QueryQp = IB_USER_VERBS_CMD_QUERY_QP: IbUverbsQueryQp => IbUverbsQueryQpResp;
    /// Modify a QP.
    ModifyQp = IB_USER_VERBS_CMD_MODIFY_QP: IbUverbsModifyQp => ();
    /// Destroy a QP.
    DestroyQp = IB_USER_VERBS_CMD_DESTROY_QP: IbUverbsDestroyQp => IbUverbsDestroyQpResp;
    /// Post sends through the kernel (WRs and SGEs follow as udata in).
    PostSend = IB_USER_VERBS_CMD_POST_SEND: IbUverbsPostSend => IbUverbsPostSendResp;
    /// Post receives through the kernel.
    PostRecv = IB_USER_VERBS_CMD_POST_RECV: IbUverbsPostRecv => IbUverbsPostRecvResp;
    /// Attach a QP to a multicast group.
    AttachMcast = IB_USER_VERBS_CMD_ATTACH_MCAST: IbUverbsAttachMcast => ();
    /// Detach a QP from a multicast group.
    DetachMcast = IB_USER_VERBS_CMD_DETACH_MCAST: IbUverbsDetachMcast => ();
    /// Create an SRQ.
    CreateSrq = IB_USER_VERBS_CMD_CREATE_SRQ: IbUverbsCreateSrq => IbUverbsCreateSrqResp;
    /// Modify an SRQ.
    ModifySrq = IB_USER_VERBS_CMD_MODIFY_SRQ: IbUverbsModifySrq => ();
    /// Query an SRQ.
    QuerySrq = IB_USER_VERBS_CMD_QUERY_SRQ: IbUverbsQuerySrq => IbUverbsQuerySrqResp;
    /// Destroy an SRQ.
    DestroySrq = IB_USER_VERBS_CMD_DESTROY_SRQ: IbUverbsDestroySrq => IbUverbsDestroySrqResp;
    /// Post receives to an SRQ through the kernel.
    PostSrqRecv = IB_USER_VERBS_CMD_POST_SRQ_RECV: IbUverbsPostSrqRecv => IbUverbsPostSrqRecvResp;
    /// Open an XRC domain.
    OpenXrcd = IB_USER_VERBS_CMD_OPEN_XRCD: IbUverbsOpenXrcd => IbUverbsOpenXrcdResp;
    /// Close an XRC domain.
    CloseXrcd = IB_USER_VERBS_CMD_CLOSE_XRCD: IbUverbsCloseXrcd => ();
    /// Create an SRQ of any type.
    CreateXsrq = IB_USER_VERBS_CMD_CREATE_XSRQ: IbUverbsCreateXsrq => IbUverbsCreateSrqResp;
    /// Open a shareable XRC target QP.
    OpenQp = IB_USER_VERBS_CMD_OPEN_QP: IbUverbsOpenQp => IbUverbsCreateQpResp;
}

ex_write_cmds! {
    /// Query the device's attributes (up to 304 bytes).
    ExQueryDevice = IB_USER_VERBS_EX_CMD_QUERY_DEVICE:
        IbUverbsExQueryDevice => IbUverbsExQueryDeviceResp;
    /// Create a CQ with flags.
    ExCreateCq = IB_USER_VERBS_EX_CMD_CREATE_CQ: IbUverbsExCreateCq => IbUverbsExCreateCqResp;
    /// Create a QP with create flags.
    ExCreateQp = IB_USER_VERBS_EX_CMD_CREATE_QP: IbUverbsExCreateQp => IbUverbsExCreateQpResp;
    /// Modify a QP, rate limit included.
    ExModifyQp = IB_USER_VERBS_EX_CMD_MODIFY_QP: IbUverbsExModifyQp => IbUverbsExModifyQpResp;
    /// Set a CQ's moderation.
    ExModifyCq = IB_USER_VERBS_EX_CMD_MODIFY_CQ: IbUverbsExModifyCq => ();
}

//! Address handles (`CREATE_AH` / `DESTROY_AH`) for UD sends.

use crate::context::ContextInner;
use crate::error::Result;
use crate::pd::{Pd, PdInner};
use crate::qp::AhAttr;
use std::sync::Arc;
use uverbs_abi::verbs as v;
use zerocopy::FromZeros;

/// An address handle: where a UD send goes.
#[derive(Clone)]
pub struct Ah {
    pub(crate) inner: Arc<AhInner>,
}

pub(crate) struct AhInner {
    pub(crate) ctx: Arc<ContextInner>,
    pub(crate) _pd: Arc<PdInner>,
    pub(crate) handle: u32,
    /// rxe's number for the AH, which UD WQEs carry.
    pub(crate) ah_num: u32,
    /// mlx5: the address vector each UD WQE carries.
    pub(crate) mlx5_av: Option<provider_mlx5::seg::DatagramSeg>,
}

impl std::fmt::Debug for Ah {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ah")
            .field("handle", &self.inner.handle)
            .finish()
    }
}

impl Pd {
    /// Creates an address handle (`CREATE_AH`). On RoCE the kernel resolves
    /// the destination MAC from the GRH's GID.
    pub fn create_ah(&self, attr: &AhAttr) -> Result<Ah> {
        let pd = &self.inner;
        if pd.ctx.mlx5.is_some() {
            return crate::mlx5::create_ah(self, attr);
        }
        let mut udata = [0u8; 8]; // struct rxe_create_ah_resp { ah_num; reserved; }
        let handle = create_ah_cmd(pd, attr, &mut udata)?;
        let ah_num = u32::from_ne_bytes([udata[0], udata[1], udata[2], udata[3]]);
        if ah_num == 0 {
            // Kernels before 5.10 gave no AH number and expected the AV in
            // every WQE; rverbs supports only the numbered form.
            let mut c = v::IbUverbsDestroyAh::new_zeroed();
            c.ah_handle = handle;
            let _ = pd
                .ctx
                .cmd_no_resp("DESTROY_AH", v::IB_USER_VERBS_CMD_DESTROY_AH, &c);
            return Err(crate::Error::BadKernelAnswer {
                what: "CREATE_AH: rxe returned no AH number (kernel older than 5.10?)".into(),
            });
        }
        Ok(Ah {
            inner: Arc::new(AhInner {
                ctx: pd.ctx.clone(),
                _pd: pd.clone(),
                handle,
                ah_num,
                mlx5_av: None,
            }),
        })
    }
}

impl Drop for AhInner {
    fn drop(&mut self) {
        let mut c = v::IbUverbsDestroyAh::new_zeroed();
        c.ah_handle = self.handle;
        let _ = self
            .ctx
            .cmd_no_resp("DESTROY_AH", v::IB_USER_VERBS_CMD_DESTROY_AH, &c);
    }
}

/// `CREATE_AH` with `attr`; the driver's answer goes to `udata_out`.
/// Returns the AH's handle.
pub(crate) fn create_ah_cmd(pd: &PdInner, attr: &AhAttr, udata_out: &mut [u8]) -> Result<u32> {
    let resp: v::IbUverbsCreateAhResp = pd.ctx.cmd(
        "CREATE_AH",
        v::IB_USER_VERBS_CMD_CREATE_AH,
        |response| {
            let mut c = v::IbUverbsCreateAh::new_zeroed();
            c.response = response;
            c.pd_handle = pd.handle;
            c.attr.dlid = attr.dlid;
            c.attr.sl = attr.sl;
            c.attr.src_path_bits = attr.src_path_bits;
            c.attr.static_rate = attr.static_rate;
            c.attr.port_num = attr.port_num;
            if let Some(g) = attr.grh {
                c.attr.is_global = 1;
                c.attr.grh.dgid = g.dgid;
                c.attr.grh.flow_label = g.flow_label;
                c.attr.grh.sgid_index = g.sgid_index;
                c.attr.grh.hop_limit = g.hop_limit;
                c.attr.grh.traffic_class = g.traffic_class;
            }
            c
        },
        &[],
        udata_out,
    )?;
    Ok(resp.ah_handle)
}

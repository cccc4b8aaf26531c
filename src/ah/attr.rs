//! Address vectors: where a peer is, for an address handle (CREATE_AH)
//! or a connected QP's path (MODIFY_QP to RTR).

use uverbs_abi::verbs as v;
use zerocopy::FromZeros;

/// The global route header of an address vector (RoCE needs one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grh {
    /// Destination GID.
    pub dgid: [u8; 16],
    /// Flow label.
    pub flow_label: u32,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// An address vector: where a connected QP's peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AhAttr {
    /// Destination LID (0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Local port.
    pub port_num: u8,
    /// The GRH, if the path is global (always on RoCE).
    pub grh: Option<Grh>,
}

impl AhAttr {
    /// The kernel's `struct ib_uverbs_ah_attr` (CREATE_AH).
    pub(crate) fn kernel(&self) -> v::IbUverbsAhAttr {
        let mut c = v::IbUverbsAhAttr::new_zeroed();
        c.dlid = self.dlid;
        c.sl = self.sl;
        c.src_path_bits = self.src_path_bits;
        c.static_rate = self.static_rate;
        c.port_num = self.port_num;
        if let Some(g) = self.grh {
            c.is_global = 1;
            c.grh.dgid = g.dgid;
            c.grh.flow_label = g.flow_label;
            c.grh.sgid_index = g.sgid_index;
            c.grh.hop_limit = g.hop_limit;
            c.grh.traffic_class = g.traffic_class;
        }
        c
    }
}

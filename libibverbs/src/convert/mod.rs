//! Every translation between a C struct of `verbs.h` and its rverbs
//! counterpart, in one place: the verbs read what C handed over through
//! these and write back what rverbs answered through these, and hold no
//! field-by-field copies of their own. (The kernel ↔ C copies librdmacm
//! asks for are its own verbs: `marshall.rs`.)

mod attr;
mod device;
mod wr;

pub(crate) use attr::*;
pub(crate) use device::*;
pub(crate) use wr::*;

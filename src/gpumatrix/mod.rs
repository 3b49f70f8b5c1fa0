//! `collbench gpu-matrix`: device-to-device copy bandwidth between every ordered GPU pair on this node,
//! against what each pair's link should give, flagging pairs far below it (the scheduling failure that
//! splits NVLink-connected GPUs shows as NVLink peers copying at PCIe speed).

pub mod judge;
#[cfg(feature = "cuda")]
pub mod measure;
pub mod options;

pub use options::check_args;

//! Element types, reduction ops, the CPU reduction kernels and the data-check patterns.

pub mod dtype;
pub mod op;

pub use dtype::Dtype;
pub use op::Op;

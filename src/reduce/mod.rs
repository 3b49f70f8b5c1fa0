//! Element types, reduction ops, the CPU reduction kernels and the data-check patterns.

pub mod cuda_kernels;
pub mod dtype;
pub mod kernel;
pub mod op;
pub mod pattern;

pub use dtype::Dtype;
pub use op::Op;

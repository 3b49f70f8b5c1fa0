//! Element types, reduction ops, the CPU reduction kernels and the data-check patterns.

pub mod dtype;
pub mod kernel;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod cuda_kernels;
pub mod op;
pub mod pattern;

pub use dtype::Dtype;
pub use op::Op;

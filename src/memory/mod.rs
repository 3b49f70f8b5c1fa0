//! Buffers the collectives run on: page-aligned host memory, and CUDA device memory (feature `cuda`).

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod cuda_probe;
pub mod host;
pub mod kind;

pub use host::HostBuf;
pub use kind::MemoryKind;

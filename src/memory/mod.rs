//! Buffers the collectives run on: page-aligned host memory, and CUDA device memory (feature `cuda`),
//! reached through the [`device::Device`] trait (emulated on the host for tests); and [`gpudirect`], whether a host
//! could carry GPUDirect RDMA (reported, not used); [`copy_rates`], a GPU's copy bandwidths for preflight.

pub mod available;
pub mod copy_rates;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_device;
#[cfg(feature = "cuda")]
pub mod cuda_launch;
pub mod cuda_probe;
pub mod device;
pub mod emulated;
pub mod error;
pub mod gpudirect;
pub mod host;
pub mod kind;

pub use error::MemoryError;
pub use host::HostBuf;
pub use kind::MemoryKind;

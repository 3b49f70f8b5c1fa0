//! Buffers the collectives run on: page-aligned host memory now, device memory later.

pub mod host;

pub use host::HostBuf;

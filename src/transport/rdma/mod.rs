//! collbench's own ibverbs transport (`rdma@DEVICE[:PORT]`): reliable-connected queue pairs (`--rdma-qps`
//! per peer), RDMA WRITE WITH IMMEDIATE into each peer's registered receive window, credit-based flow
//! control, completion by polling, and an abort immediate that tells peers a rank gave up.
//!
//! Everything that needs no hardware is plain Rust and tested in every build: the receive window and
//! immediate encoding ([`window`]), credits ([`credit`]), endpoint records ([`endpoint`]), queue-pair states
//! ([`qp`]), the device tree in sysfs and GID choice ([`sysfs`]), the registration cache ([`mr_cache`]),
//! error advice ([`advice`]), typed errors ([`error`]) and the protocol engine itself ([`proto`], over any [`proto::Fabric`]).
//! The verbs calls (`verbs`) and connection set-up (`connect`) need the `rdma` feature.
//!
//! Data moves with one copy on the receiving side (window slot to the posted buffer); sends are zero-copy
//! from registered memory, or inline when tiny.

pub mod advice;
#[cfg(feature = "rdma")]
pub mod connect;
pub mod credit;
pub mod endpoint;
pub mod error;
#[cfg(test)]
pub(crate) mod mem;
pub mod mr_cache;
pub mod options;
pub mod proto;
pub mod qp;
pub mod sysfs;
#[cfg(feature = "rdma")]
pub mod verbs;
pub mod window;

#[cfg(test)]
mod tests;

pub use error::RdmaError;
pub use proto::{RdmaConfig, RdmaTransport};

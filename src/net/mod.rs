//! What the machine's network looks like: interfaces and their addresses, which one a path uses, RDMA
//! devices and GPUs.

pub mod advice;
pub mod choose;
pub mod classify;
pub mod gpu;
pub mod gpu_topo;
pub mod iface;
pub mod inventory;
pub mod nvml;
pub mod rdma;
pub mod spec;
pub mod sysfs;

//! What the machine's network looks like: interfaces and their addresses, which one a path uses, how often
//! a link lost its carrier, RDMA devices and GPUs.

pub mod advice;
pub mod carrier;
pub mod choose;
pub mod classify;
pub mod gpu;
pub mod gpu_health;
pub mod gpu_topo;
pub mod iface;
pub mod inventory;
pub mod nvml;
#[cfg(feature = "cuda")]
pub mod nvml_health;
pub mod pmtu;
pub mod rdma;
pub mod spec;
pub mod sysfs;

/// This machine's host name, or "unknown-host".
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length; gethostname NUL-terminates within it on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

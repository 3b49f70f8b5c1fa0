//! Which GPUs a finding of a test on device buffers (`--memory cuda`) is about: the host, the device ordinal
//! and PCI bus id of each participant it names, and what a slow GPU-to-GPU path over NCCL comes from.

use super::{Finding, PairwiseReport, Participant};

/// The GPU of the participant named `name`, as a finding names it, as preflight's GPU checks do:
/// `h2 GPU 1 [0000:19:00.0] (NVIDIA H200)`.
fn gpu_of(rep: &PairwiseReport, name: &str) -> Option<String> {
    let p: &Participant = rep.hosts.iter().find(|h| h.name == name)?;
    let g = p.gpu.as_ref()?;
    Some(format!("{} {}", p.host, g.label()))
}

/// What to add to `f`'s line where the pairs are GPUs: the GPUs it names and the likely cause; `None` for a
/// test on host memory.
pub fn suffix(rep: &PairwiseReport, f: &Finding) -> Option<String> {
    match f {
        Finding::SlowHost { host, .. } => Some(format!(
            "; {}: its NCCL point-to-point is slow with every partner (its PCIe link trained down or \
             throttled, its NVLink, or the NIC and GPUDirect path NCCL takes from it)",
            gpu_of(rep, host)?
        )),
        Finding::SlowLink { a, b, .. } => Some(format!(
            "; {} and {}: the path NCCL takes between them (a PCIe switch or NVLink between the two, or \
             the network route between their NICs)",
            gpu_of(rep, a)?,
            gpu_of(rep, b)?
        )),
    }
}

//! One GPU's copy bandwidths for preflight: a copy within device memory (the measurement of `selftest --gpu`,
//! bytes read + written), and copies from and to pinned host memory (over the GPU's PCIe link), each timed by
//! the device's own marks around a few copies after a warm-up. Written against [`Device`], so the emulated
//! device tests it; [`measure_host`] runs it on every GPU of this host (feature `cuda`).

use super::device::Device;
use super::MemoryError;
use crate::net::gpu_health::CopyRates;

/// Bytes each copy moves: large enough that a copy's start-up is a small share of its time on a GPU (about 20
/// us within an H100's memory, 0.6 ms over PCIe gen5 x16), small enough to cost little host memory.
pub const BYTES: usize = 32 << 20;
/// Copies timed per direction, after one warm-up.
pub const ITERS: usize = 4;

/// GB/s of `moved` bytes per copy over `iters` copies that took `s` seconds together.
fn gbps(moved: usize, iters: usize, s: f64) -> f64 {
    moved as f64 * iters as f64 / s.max(1e-12) / 1e9
}

/// The copy bandwidths of `d`, `bytes` per copy, `iters` timed per direction.
pub fn measure<D: Device>(d: &D, bytes: usize, iters: usize) -> Result<CopyRates, MemoryError> {
    let (src, mut dst) = (d.alloc(bytes)?, d.alloc(bytes)?);
    let mut host = d.alloc_pinned(bytes)?;
    let time = |copy: &mut dyn FnMut() -> Result<(), MemoryError>| -> Result<f64, MemoryError> {
        copy()?;
        d.sync()?;
        let start = d.mark()?;
        for _ in 0..iters {
            copy()?;
        }
        let end = d.mark()?;
        d.sync()?;
        d.elapsed(&start, &end)
    };
    let device_s = time(&mut || d.copy(&src, 0, &mut dst, 0, bytes))?;
    let h2d_s = time(&mut || d.to_device(&host, 0, &mut dst, 0, bytes))?;
    let d2h_s = time(&mut || d.to_host(&src, 0, &mut host, 0, bytes))?;
    Ok(CopyRates {
        device_gbps: gbps(2 * bytes, iters, device_s),
        h2d_gbps: gbps(bytes, iters, h2d_s),
        d2h_gbps: gbps(bytes, iters, d2h_s),
    })
}

/// Every GPU of this host by bus id (`0000:19:00.0`, as NVML's), one after another so that none shares its
/// link or memory with another's copies; or why they could not be measured.
#[cfg(feature = "cuda")]
pub fn measure_host() -> Result<Vec<(String, CopyRates)>, String> {
    use super::cuda::pci_bus_id;
    use super::cuda_device::CudaDevice;
    let count = super::cuda::Gpu::check_driver().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let d = CudaDevice::open(Some(&i.to_string())).map_err(|e| e.to_string())?;
        let bus = pci_bus_id(d.gpu().context().cu_device()).map_err(|e| e.to_string())?;
        let rates = measure(&d, BYTES, ITERS).map_err(|e| format!("device {i} [{bus}]: {e}"))?;
        out.push((bus, rates));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::emulated::Emulated;

    #[test]
    fn every_direction_is_timed_and_moves_its_bytes() {
        let d = Emulated::default();
        let r = measure(&d, 4096, 2).unwrap();
        for v in [r.device_gbps, r.h2d_gbps, r.d2h_gbps] {
            assert!(v.is_finite() && v > 0.0, "{r:?}");
        }
    }
}

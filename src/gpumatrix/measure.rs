//! The copies `collbench gpu-matrix` times (feature `cuda`): on every device a source and a destination
//! buffer; each ordered pair copies source to the peer's destination with cuMemcpyPeerAsync on the source
//! device's stream (peer access enabled where the driver allows it), timed by CUDA events; one GPU copies
//! within its own memory.

use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{result, CudaSlice, DevicePtr};

use super::judge::Copy;
use crate::memory::cuda::{driver_err, pci_bus_id, Gpu};

struct Dev {
    gpu: Gpu,
    src: CudaSlice<u8>,
    dst: CudaSlice<u8>,
    bus: String,
}

/// Lets `from` reach `to`'s memory directly, where the hardware allows; returns whether it can.
fn enable_peer(from: &Gpu, to: &Gpu) -> Result<bool, String> {
    let mut can: std::ffi::c_int = 0;
    // SAFETY: two valid device handles; writes one int.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, from.context().cu_device(), to.context().cu_device()) }
        .result()
        .map_err(driver_err("asking about peer access"))?;
    if can == 0 {
        return Ok(false);
    }
    from.context()
        .bind_to_thread()
        .map_err(driver_err("binding the context"))?;
    // SAFETY: the current context is `from`'s; `to`'s context lives as long as this measurement.
    match unsafe { sys::cuCtxEnablePeerAccess(to.context().cu_ctx(), 0) } {
        CUresult::CUDA_SUCCESS | CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(true),
        e => Err(format!(
            "CUDA: enabling peer access from device {} to {} failed: {e:?}",
            from.ordinal, to.ordinal
        )),
    }
}

/// Times `iters` copies of `bytes` from `src` on `a` to `dst` (on `a` or `b`) after one warm-up; GB/s.
fn time_copy(a: &Dev, b: &Dev, bytes: usize, iters: usize, same: bool) -> Result<f64, String> {
    a.gpu
        .context()
        .bind_to_thread()
        .map_err(driver_err("binding the context"))?;
    let stream = a.gpu.stream();
    let (src, _g1) = a.src.device_ptr(stream);
    let dst_buf = if same { &a.dst } else { &b.dst };
    let (dst, _g2) = dst_buf.device_ptr(stream);
    let copy = || {
        // SAFETY: both buffers hold `bytes` and live until the stream is synchronised below.
        unsafe {
            if same {
                result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream())
            } else {
                result::memcpy_peer_async(
                    b.gpu.context().cu_ctx(),
                    dst,
                    a.gpu.context().cu_ctx(),
                    src,
                    bytes,
                    stream.cu_stream(),
                )
            }
        }
        .map_err(driver_err("queueing a copy"))
    };
    copy()?;
    let start = a.gpu.mark()?;
    for _ in 0..iters {
        copy()?;
    }
    let end = a.gpu.mark()?;
    a.gpu.sync()?;
    let s = Gpu::elapsed(&start, &end)?;
    Ok(bytes as f64 * iters as f64 / s.max(1e-12) / 1e9)
}

/// Every device's own copy and every ordered pair's peer copy, `bytes` each, `iters` timed.
pub fn measure(bytes: usize, iters: usize) -> Result<Vec<Copy>, String> {
    let count = Gpu::check_driver()?;
    if count == 0 {
        return Err(
            "the NVIDIA driver loaded but reports no device; check `nvidia-smi` and CUDA_VISIBLE_DEVICES".into(),
        );
    }
    let mut devs = Vec::with_capacity(count);
    for i in 0..count {
        let gpu = Gpu::open(Some(&i.to_string()))?;
        let bus = pci_bus_id(gpu.context().cu_device())?;
        let src = gpu.alloc(bytes)?;
        let dst = gpu.alloc(bytes)?;
        devs.push(Dev { gpu, src, dst, bus });
    }
    let mut out = Vec::new();
    for (i, a) in devs.iter().enumerate() {
        // Each device's own copy: the ceiling, and the only measurement with one GPU.
        out.push(Copy {
            src: i,
            dst: i,
            src_bus: a.bus.clone(),
            dst_bus: a.bus.clone(),
            gbs: time_copy(a, a, bytes, iters, true)?,
            peer_access: true,
        });
        for (j, b) in devs.iter().enumerate().filter(|(j, _)| *j != i) {
            let peer_access = enable_peer(&a.gpu, &b.gpu)?;
            out.push(Copy {
                src: i,
                dst: j,
                src_bus: a.bus.clone(),
                dst_bus: b.bus.clone(),
                gbs: time_copy(a, b, bytes, iters, false)?,
                peer_access,
            });
        }
    }
    Ok(out)
}

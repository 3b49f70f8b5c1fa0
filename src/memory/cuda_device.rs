//! The CUDA [`Device`]: buffers from the driver, pinned staging, asynchronous copies on the [`Gpu`]'s one
//! stream, and CUDA events for timing. Only the thin driver calls live here; the staging logic around them
//! is the engine's and is tested with [`super::emulated::Emulated`].

use std::cell::OnceCell;

use cudarc::driver::PinnedHostSlice;
use cudarc::driver::{result, CudaEvent, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};

use super::cuda::{driver_err, Gpu};
use super::device::{check_finalize, check_range, check_reduce, Device};
use super::MemoryError;
use crate::memory::cuda_launch::Kernels;
use crate::reduce::cuda_kernels::{finalize_name, geometry, reduce_name};
use crate::reduce::{Dtype, Op};

/// A CUDA device opened for this rank.
pub struct CudaDevice {
    gpu: Gpu,
    /// The reduction kernels, compiled with NVRTC the first time a reduction is queued.
    kernels: OnceCell<Kernels>,
}

/// Page-locked host memory, readable and writable by the host (not write-combined: the host algorithm reads
/// the staged data, and write-combined memory is very slow to read).
pub struct Pinned {
    // Owns the allocation; `ptr` points into it.
    _mem: Option<PinnedHostSlice<u8>>,
    ptr: *mut u8,
    len: usize,
}

impl std::ops::Deref for Pinned {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr is valid for len bytes while _mem lives; the staged engine syncs before reading.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for Pinned {
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: as in deref, with &mut self for exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl CudaDevice {
    /// Opens the device `device` names (an ordinal), else `COLLBENCH_CUDA_DEVICE`, else the local rank's.
    pub fn open(device: Option<&str>) -> Result<CudaDevice, MemoryError> {
        Ok(CudaDevice {
            gpu: Gpu::open(device)?,
            kernels: OnceCell::new(),
        })
    }

    /// The device opened.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn kernels(&self) -> Result<&Kernels, MemoryError> {
        if let Some(k) = self.kernels.get() {
            return Ok(k);
        }
        let k = Kernels::load(&self.gpu)?;
        Ok(self.kernels.get_or_init(|| k))
    }

    /// Launches `name` over `len` bytes of `dtype` with `args`: every argument of these kernels is 64 bits
    /// wide, device pointers (as their values) and counts alike.
    fn launch(&self, name: &str, dtype: Dtype, len: usize, args: &[u64]) -> Result<(), MemoryError> {
        self.bind()?;
        let f = self.kernels()?.function(name)?;
        let (grid, block) = geometry(len / dtype.size(), dtype.size(), self.gpu.sms);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = self.gpu.stream().launch_builder(&f);
        for a in args {
            launch.arg(a);
        }
        // SAFETY: the callers pass the arguments the kernel named takes, with ranges they checked.
        unsafe { launch.launch(cfg) }.map_err(driver_err("launching a kernel"))?;
        Ok(())
    }

    fn bind(&self) -> Result<(), MemoryError> {
        self.gpu
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))
    }
}

impl Device for CudaDevice {
    type Mem = CudaSlice<u8>;
    type Pinned = Pinned;
    type Mark = CudaEvent;

    fn describe(&self) -> String {
        format!("cuda:{} {}", self.gpu.ordinal, self.gpu.name)
    }

    fn address(&self, mem: &CudaSlice<u8>) -> u64 {
        // Event tracking is off (see Gpu::open), so the guard records nothing.
        let (ptr, _record) = mem.device_ptr(self.gpu.stream());
        ptr
    }

    fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>, MemoryError> {
        // A zero-byte allocation is an error to the driver; one byte stands in.
        self.gpu.alloc(bytes.max(1))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<Pinned, MemoryError> {
        if bytes == 0 {
            return Ok(Pinned {
                _mem: None,
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: the memory is zeroed below before anything reads it.
        let mut mem = unsafe { self.gpu.context().alloc_pinned_with_flags::<u8>(bytes, 0) }
            .map_err(|e| MemoryError::AllocPinned { bytes, cuda: e.into() })?;
        let ptr = mem.as_mut_ptr().map_err(driver_err("mapping pinned memory"))?;
        let mut p = Pinned {
            _mem: Some(mem),
            ptr,
            len: bytes,
        };
        p.fill(0);
        Ok(p)
    }

    fn upload(&self, src: &[u8], dst: &mut CudaSlice<u8>, at: usize) -> Result<(), MemoryError> {
        check_range("upload", at, src.len(), dst.len())?;
        let mut view = dst.slice_mut(at..at + src.len());
        self.gpu
            .stream()
            .memcpy_htod(src, &mut view)
            .map_err(driver_err("copying to the device"))?;
        self.gpu.sync()
    }

    fn download(&self, src: &CudaSlice<u8>, at: usize, dst: &mut [u8]) -> Result<(), MemoryError> {
        check_range("download", at, dst.len(), src.len())?;
        let view = src.slice(at..at + dst.len());
        self.gpu
            .stream()
            .memcpy_dtoh(&view, dst)
            .map_err(driver_err("copying from the device"))?;
        self.gpu.sync()
    }

    fn to_host(
        &self,
        src: &CudaSlice<u8>,
        src_at: usize,
        dst: &mut Pinned,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        check_range("copy to the host (source)", src_at, len, src.len())?;
        check_range("copy to the host (destination)", dst_at, len, dst.len())?;
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        let stream = self.gpu.stream();
        let (base, _record) = src.device_ptr(stream);
        // SAFETY: both ranges were checked; dst is pinned and owned by the caller, who syncs before reading it.
        unsafe { result::memcpy_dtoh_async(&mut dst[dst_at..dst_at + len], base + src_at as u64, stream.cu_stream()) }
            .map_err(driver_err("queueing a copy to the host"))
    }

    fn to_device(
        &self,
        src: &Pinned,
        src_at: usize,
        dst: &mut CudaSlice<u8>,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        check_range("copy to the device (source)", src_at, len, src.len())?;
        check_range("copy to the device (destination)", dst_at, len, dst.len())?;
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        let stream = self.gpu.stream();
        let (base, _record) = dst.device_ptr(stream);
        // SAFETY: both ranges were checked; src is pinned and not written before the caller syncs.
        unsafe { result::memcpy_htod_async(base + dst_at as u64, &src[src_at..src_at + len], stream.cu_stream()) }
            .map_err(driver_err("queueing a copy to the device"))
    }

    fn copy(
        &self,
        src: &CudaSlice<u8>,
        src_at: usize,
        dst: &mut CudaSlice<u8>,
        dst_at: usize,
        len: usize,
    ) -> Result<(), MemoryError> {
        check_range("device copy (source)", src_at, len, src.len())?;
        check_range("device copy (destination)", dst_at, len, dst.len())?;
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        let stream = self.gpu.stream();
        let (s, _r1) = src.device_ptr(stream);
        let (d, _r2) = dst.device_ptr(stream);
        // SAFETY: both ranges were checked; device memory stays allocated while the stream uses it.
        unsafe { result::memcpy_dtod_async(d + dst_at as u64, s + src_at as u64, len, stream.cu_stream()) }
            .map_err(driver_err("queueing a device-to-device copy"))
    }

    fn prepare_reductions(&self) -> Result<(), MemoryError> {
        self.kernels().map(|_| ())
    }

    fn reduce(
        &self,
        mem: &mut CudaSlice<u8>,
        (dtype, op): (Dtype, Op),
        dst_at: usize,
        (a_at, b_at): (usize, usize),
        len: usize,
    ) -> Result<(), MemoryError> {
        check_reduce(dtype, mem.len(), dst_at, (a_at, b_at), len)?;
        if len == 0 {
            return Ok(());
        }
        let (base, _record) = mem.device_ptr(self.gpu.stream());
        let (dst, a, b) = (base + dst_at as u64, base + a_at as u64, base + b_at as u64);
        let n = (len / dtype.size()) as u64;
        // The kernel takes (T* dst, const T* a, const T* b, u64 n); device pointers are passed as their
        // 64-bit values.
        self.launch(&reduce_name(dtype, op), dtype, len, &[dst, a, b, n])
    }

    fn finalize(
        &self,
        mem: &mut CudaSlice<u8>,
        (dtype, op): (Dtype, Op),
        at: usize,
        len: usize,
        nranks: usize,
    ) -> Result<(), MemoryError> {
        check_finalize(at, len, mem.len(), nranks)?;
        if len == 0 || op != Op::Avg {
            return Ok(());
        }
        let (base, _record) = mem.device_ptr(self.gpu.stream());
        let buf = base + at as u64;
        let (n, ranks) = ((len / dtype.size()) as u64, nranks as u64);
        // The kernel takes (T* buf, u64 n, u64 nranks).
        self.launch(&finalize_name(dtype), dtype, len, &[buf, n, ranks])
    }

    fn mark(&self) -> Result<CudaEvent, MemoryError> {
        self.gpu.mark()
    }

    fn remark(&self, mark: &mut CudaEvent) -> Result<(), MemoryError> {
        mark.record(self.gpu.stream()).map_err(driver_err("recording an event"))
    }

    fn wait(&self, mark: &CudaEvent) -> Result<(), MemoryError> {
        mark.synchronize().map_err(driver_err("waiting for an event"))
    }

    fn sync(&self) -> Result<(), MemoryError> {
        self.gpu.sync()
    }

    fn elapsed(&self, from: &CudaEvent, to: &CudaEvent) -> Result<f64, MemoryError> {
        Gpu::elapsed(from, to)
    }
}

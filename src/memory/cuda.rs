//! One CUDA device for this process: the driver loaded at run time, a context and a stream on the chosen
//! device, device buffers, copies and event timing. Every failure is a [`MemoryError`], never a panic: cudarc
//! panics when libcuda is absent, so presence is checked before its first call.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute, CUevent_flags};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaSlice, CudaStream, DriverError};

use super::cuda_probe::{local_rank_from, pick_device, DEVICE_ENV};
use super::MemoryError;

/// A CUDA device opened for this process, with the stream every operation is queued on.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Device ordinal as the driver numbers it.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sms: u32,
}

/// The PCI bus id of device `dev`, sysfs form (`0000:19:00.0`, as NVML's are matched); needs no context.
pub fn pci_bus_id(dev: sys::CUdevice) -> Result<String, MemoryError> {
    let attr = |a| {
        // SAFETY: an attribute query on a device handle the driver returned.
        unsafe { result::device::get_attribute(dev, a) }.map_err(driver_err("reading the PCI location"))
    };
    let dom = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?;
    let bus = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?;
    let slot = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?;
    Ok(format!("{dom:04x}:{bus:02x}:{slot:02x}.0"))
}

/// A driver error with what was being done.
pub fn driver_err(call: &'static str) -> impl FnOnce(DriverError) -> MemoryError {
    move |e| MemoryError::Driver { call, cuda: e.into() }
}

impl Gpu {
    /// Loads the driver and returns the number of devices, or what is missing.
    pub fn check_driver() -> Result<usize, MemoryError> {
        // SAFETY: only tries to dlopen the library (and closes it again).
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(MemoryError::NoDriver);
        }
        let count = CudaContext::device_count().map_err(|e| MemoryError::DriverInit { cuda: e.into() })?;
        Ok(count.max(0) as usize)
    }

    /// The ordinal [`Gpu::open`] opens for `device`: it, else [`DEVICE_ENV`], else the local rank's.
    fn choose(device: Option<&str>) -> Result<usize, MemoryError> {
        let count = Gpu::check_driver()?;
        let env_choice = std::env::var(DEVICE_ENV).ok();
        let local = local_rank_from(|k| std::env::var(k).ok());
        pick_device(device.or(env_choice.as_deref()), local.as_deref(), count)
    }

    /// The device [`Gpu::open`] would open, without creating a context, as the rank list shows it:
    /// `cuda:0 [0000:19:00.0] NVIDIA H200`; or `cuda:? (why)` where the driver cannot say.
    pub fn label(device: Option<&str>) -> String {
        let probe = || -> Result<String, MemoryError> {
            let ordinal = Gpu::choose(device)?;
            let dev = result::device::get(ordinal as i32).map_err(driver_err("cuDeviceGet"))?;
            let mut name = [0 as std::ffi::c_char; 128];
            // SAFETY: a buffer of the length passed, for a device the driver returned.
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev) }
                .result()
                .map_err(driver_err("cuDeviceGetName"))?;
            // SAFETY: the name is NUL-terminated within the buffer (the driver truncates).
            let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            Ok(format!("cuda:{ordinal} [{}] {name}", pci_bus_id(dev)?))
        };
        probe().unwrap_or_else(|m| format!("cuda:? ({m})"))
    }

    /// Opens the device `device` names (an ordinal), else [`DEVICE_ENV`], else the local rank's.
    pub fn open(device: Option<&str>) -> Result<Gpu, MemoryError> {
        let ordinal = Gpu::choose(device)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| MemoryError::Context {
            ordinal,
            cuda: e.into(),
        })?;
        // One stream carries every operation in order, so cudarc's per-buffer event tracking (for
        // buffers shared across streams) is not needed; it would add an event per launch to the timings.
        // SAFETY: no buffer exists yet, and all later work is queued on the one stream below.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_err("creating a stream"))?;
        let name = ctx.name().map_err(driver_err("reading the device name"))?;
        let capability = ctx
            .compute_capability()
            .map_err(driver_err("reading the compute capability"))?;
        let sms = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_err("reading the multiprocessor count"))?;
        Ok(Gpu {
            ctx,
            stream,
            ordinal,
            name,
            capability,
            sms: sms.max(1) as u32,
        })
    }

    /// The context (for loading modules).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every operation is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// `bytes` of device memory, zeroed.
    pub fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>, MemoryError> {
        self.stream.alloc_zeros::<u8>(bytes).map_err(|e| MemoryError::Alloc {
            bytes,
            ordinal: self.ordinal,
            cuda: e.into(),
        })
    }

    /// Copies `src` from the host into `dst` (same length).
    pub fn upload(&self, src: &[u8], dst: &mut CudaSlice<u8>) -> Result<(), MemoryError> {
        self.stream
            .memcpy_htod(src, dst)
            .map_err(driver_err("copying to the device"))
    }

    /// Copies `src` from the device into `dst` (same length) and waits for it.
    pub fn download(&self, src: &CudaSlice<u8>, dst: &mut [u8]) -> Result<(), MemoryError> {
        self.stream
            .memcpy_dtoh(src, dst)
            .map_err(driver_err("copying from the device"))?;
        self.sync()
    }

    /// Device-to-device copy of `src` into `dst` (cuMemcpyDtoD on the stream).
    pub fn copy(&self, src: &CudaSlice<u8>, dst: &mut CudaSlice<u8>) -> Result<(), MemoryError> {
        self.stream
            .memcpy_dtod(src, dst)
            .map_err(driver_err("device-to-device copy"))
    }

    /// Waits for everything queued so far.
    pub fn sync(&self) -> Result<(), MemoryError> {
        self.stream
            .synchronize()
            .map_err(driver_err("synchronising the stream"))
    }

    /// An event with timing enabled, recorded on the stream now.
    pub fn mark(&self) -> Result<CudaEvent, MemoryError> {
        self.stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("recording an event"))
    }

    /// Seconds between two recorded events, once the second has completed.
    pub fn elapsed(start: &CudaEvent, end: &CudaEvent) -> Result<f64, MemoryError> {
        end.synchronize().map_err(driver_err("waiting for an event"))?;
        let ms = start.elapsed_ms(end).map_err(driver_err("reading an event time"))?;
        Ok(ms as f64 / 1e3)
    }
}

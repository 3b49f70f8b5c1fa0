//! The GPU launcher: compiles kernels/reduce.cu with NVRTC for the device present, loads it once per
//! process ([`Kernels`]), and launches the reduction, finalize (Avg) and verification kernels.

use std::sync::Arc;

use cudarc::driver::{CudaModule, CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};

use super::cuda::{driver_err, Gpu};
use super::MemoryError;
use crate::reduce::cuda_kernels::{
    arch_option, finalize_name, geometry, reduce_name, verify_name, COMPILE_OPTIONS, SOURCE, SOURCE_NAME, VERIFY_PERIOD,
};
use crate::reduce::{Dtype, Op};

/// Compiles the kernel source to PTX for the virtual architecture `arch` (an [`arch_option`]). Needs
/// libnvrtc, not a GPU.
pub fn compile(arch: &str) -> Result<Ptx, MemoryError> {
    // SAFETY: only tries to dlopen the library; cudarc panics on first use when it is missing.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(MemoryError::NoNvrtc);
    }
    let mut options: Vec<String> = COMPILE_OPTIONS.iter().map(|s| s.to_string()).collect();
    options.push(arch.to_string());
    let opts = CompileOptions {
        options,
        name: Some(SOURCE_NAME.to_string()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(SOURCE, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, options, .. } => MemoryError::Compile {
            file: SOURCE_NAME,
            options: options.join(" "),
            log: log.to_string_lossy().into_owned(),
        },
        other => MemoryError::Nvrtc {
            file: SOURCE_NAME,
            error: other.to_string(),
        },
    })
}

/// The kernels compiled for one device and loaded into its context.
pub struct Kernels {
    module: Arc<CudaModule>,
}

impl Kernels {
    /// Compiles for `gpu`'s compute capability and loads the module.
    pub fn load(gpu: &Gpu) -> Result<Kernels, MemoryError> {
        let (major, minor) = gpu.capability;
        let arch = arch_option(major, minor).map_err(|_| MemoryError::Capability { major, minor })?;
        let ptx = compile(&arch)?;
        let module = gpu.context().load_module(ptx).map_err(|e| MemoryError::LoadModule {
            major,
            minor,
            cuda: e.into(),
        })?;
        Ok(Kernels { module })
    }

    /// The kernel named `name` (one of [`crate::reduce::cuda_kernels`]' names).
    pub fn function(&self, name: &str) -> Result<cudarc::driver::CudaFunction, MemoryError> {
        self.module.load_function(name).map_err(|e| MemoryError::NoKernel {
            name: name.to_string(),
            cuda: e.into(),
        })
    }

    /// Launch configuration for `len` bytes of `dtype`.
    fn config(gpu: &Gpu, dtype: Dtype, len: usize) -> LaunchConfig {
        let (grid, block) = geometry(len / dtype.size(), dtype.size(), gpu.sms);
        LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Queues `dst[i] = a[i] op b[i]` over whole elements of `dtype` (Avg sums; see [`Kernels::finalize`]).
    pub fn reduce(
        &self,
        gpu: &Gpu,
        dtype: Dtype,
        op: Op,
        dst: &mut CudaSlice<u8>,
        a: &CudaSlice<u8>,
        b: &CudaSlice<u8>,
    ) -> Result<(), MemoryError> {
        check_lengths(dtype, &[dst.len(), a.len(), b.len()])?;
        let n = (dst.len() / dtype.size()) as u64;
        let f = self
            .module
            .load_function(&reduce_name(dtype, op))
            .map_err(driver_err("finding a reduce kernel"))?;
        let cfg = Self::config(gpu, dtype, dst.len());
        let mut launch = gpu.stream().launch_builder(&f);
        launch.arg(dst).arg(a).arg(b).arg(&n);
        // SAFETY: the kernel takes (T*, const T*, const T*, u64 n) and touches n elements of each buffer,
        // which check_lengths proved are there.
        unsafe { launch.launch(cfg) }.map_err(driver_err("launching a reduce kernel"))?;
        Ok(())
    }

    /// Queues `buf[i] /= nranks` (the end of Avg, as the CPU's `finalize`).
    pub fn finalize(&self, gpu: &Gpu, dtype: Dtype, buf: &mut CudaSlice<u8>, nranks: u64) -> Result<(), MemoryError> {
        check_lengths(dtype, &[buf.len()])?;
        if nranks == 0 {
            return Err(MemoryError::NoRanks);
        }
        let n = (buf.len() / dtype.size()) as u64;
        let f = self
            .module
            .load_function(&finalize_name(dtype))
            .map_err(driver_err("finding a finalize kernel"))?;
        let cfg = Self::config(gpu, dtype, buf.len());
        let mut launch = gpu.stream().launch_builder(&f);
        launch.arg(buf).arg(&n).arg(&nranks);
        // SAFETY: the kernel takes (T*, u64 n, u64 nranks) and touches n elements.
        unsafe { launch.launch(cfg) }.map_err(driver_err("launching a finalize kernel"))?;
        Ok(())
    }

    /// How many elements of `got` differ from `want[(first + i) % 8]`, counted on the device. `want`
    /// holds [`VERIFY_PERIOD`] elements of `dtype` (what `Pattern::fill(Source::Reduced, 0, ..)` writes).
    pub fn verify(
        &self,
        gpu: &Gpu,
        dtype: Dtype,
        got: &CudaSlice<u8>,
        first: u64,
        want: &[u8],
    ) -> Result<u64, MemoryError> {
        check_lengths(dtype, &[got.len()])?;
        if want.len() != VERIFY_PERIOD * dtype.size() {
            return Err(MemoryError::VerifyTable {
                bytes: want.len(),
                period: VERIFY_PERIOD,
                dtype,
            });
        }
        let n = (got.len() / dtype.size()) as u64;
        let mut table = gpu.alloc(want.len())?;
        gpu.upload(want, &mut table)?;
        let mut wrong = gpu
            .stream()
            .alloc_zeros::<u64>(1)
            .map_err(driver_err("allocating the mismatch counter"))?;
        let f = self
            .module
            .load_function(&verify_name(dtype))
            .map_err(driver_err("finding a verify kernel"))?;
        let cfg = Self::config(gpu, dtype, got.len());
        let mut launch = gpu.stream().launch_builder(&f);
        launch.arg(got).arg(&n).arg(&first).arg(&table).arg(&mut wrong);
        // SAFETY: the kernel takes (const T*, u64 n, u64 first, const T* want[8], u64* wrong) and reads n
        // elements of got, 8 of the table, and adds to the one counter.
        unsafe { launch.launch(cfg) }.map_err(driver_err("launching a verify kernel"))?;
        let mut count = [0u64; 1];
        gpu.stream()
            .memcpy_dtoh(&wrong, &mut count)
            .map_err(driver_err("reading the mismatch count"))?;
        gpu.sync()?;
        Ok(count[0])
    }
}

/// Every buffer the same length, a whole number of elements (no launch may read past a buffer).
fn check_lengths(dtype: Dtype, lens: &[usize]) -> Result<(), MemoryError> {
    let first = lens[0];
    if lens.iter().any(|&l| l != first) || first % dtype.size() != 0 {
        return Err(MemoryError::KernelLengths {
            dtype,
            lens: lens.to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::cuda_kernels::all_names;

    #[test]
    fn buffer_lengths_are_checked_before_a_launch() {
        assert!(check_lengths(Dtype::Float, &[16, 16, 16]).is_ok());
        let e = check_lengths(Dtype::Float, &[16, 12, 16]).unwrap_err();
        assert_eq!(
            e,
            MemoryError::KernelLengths {
                dtype: Dtype::Float,
                lens: vec![16, 12, 16]
            }
        );
        let m = e.to_string();
        assert!(m.contains("float") && m.contains("[16, 12, 16]"), "{m}");
        assert!(check_lengths(Dtype::Double, &[12]).is_err());
    }

    /// The embedded source compiles with NVRTC through the binary's own path, for an explicit
    /// architecture (no GPU needed). Runs where libnvrtc loads; kernels/check.sh provides one and sets
    /// COLLBENCH_REQUIRE_NVRTC=1, which turns a missing library into a failure.
    #[test]
    fn the_kernels_compile_with_nvrtc() {
        let required = std::env::var_os("COLLBENCH_REQUIRE_NVRTC").is_some_and(|v| v == "1");
        for arch in ["--gpu-architecture=compute_80", "--gpu-architecture=compute_90"] {
            match compile(arch) {
                Ok(ptx) => {
                    let text = ptx.to_src();
                    for name in all_names() {
                        assert!(
                            text.contains(&format!(".entry {name}(")),
                            "{name} missing from the PTX for {arch}"
                        );
                    }
                }
                Err(e @ MemoryError::NoNvrtc) if !required => {
                    eprintln!("skipped: {e}");
                    return;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}

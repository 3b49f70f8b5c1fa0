//! NCCL as a baseline (`--transport nccl`, feature `cuda`): libnccl loaded at run time ([`lib`]), each
//! collective turned into NCCL calls on device addresses ([`plan`]), and the engine that runs them on the
//! sweep's device buffers (`engine`, feature `cuda`). NCCL_* environment variables reach NCCL unchanged.
//!
//! Layout differences are none: NCCL's in-place conventions are nccl-tests' (collbench's check). avg is
//! NCCL's ncclAvg (floats pre-multiplied by 1/n, so the last bit may differ from sum-then-divide at more
//! than one rank; the check counts any such element as wrong).

#[cfg(feature = "cuda")]
pub mod engine;
pub mod lib;
#[cfg(feature = "cuda")]
pub mod pair;
pub mod plan;

/// Checks, before any rank starts, that `--transport nccl` can run: a build with the `cuda` feature,
/// `--memory cuda`, and a loadable libnccl. Returns the library's version.
pub fn check_run(memory: crate::memory::MemoryKind) -> crate::error::Result<String> {
    use crate::error::Error;
    if !cfg!(feature = "cuda") {
        return Err(Error::usage("--transport", not_built_message()));
    }
    if memory != crate::memory::MemoryKind::Cuda {
        return Err(Error::usage(
            "--transport",
            "nccl runs on device buffers: add --memory cuda (NCCL's collectives take GPU memory only)",
        ));
    }
    lib::Nccl::load()
        .map(|n| n.version())
        .map_err(|m| Error::usage("--transport", m))
}

/// Why `nccl` is refused in a build without the `cuda` feature (said where `--transport` is parsed).
pub use crate::transport::path::nccl_not_built_message as not_built_message;

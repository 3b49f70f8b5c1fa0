//! Where a run's buffers live (`--memory host|cuda`), and the check made before any rank starts.

use std::str::FromStr;

use super::MemoryError;
use crate::error::{Error, Result};

/// The memory a run's buffers are allocated in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    /// Page-aligned host memory (the default).
    Host,
    /// CUDA device memory.
    Cuda,
}

impl FromStr for MemoryKind {
    type Err = MemoryError;

    fn from_str(s: &str) -> std::result::Result<Self, MemoryError> {
        match s.to_ascii_lowercase().as_str() {
            "host" => Ok(MemoryKind::Host),
            "cuda" => Ok(MemoryKind::Cuda),
            other => Err(MemoryError::UnknownKind(other.to_string())),
        }
    }
}

/// Checks `--memory` before any rank starts. Host memory is always fine. CUDA memory needs a build with
/// the `cuda` feature and a loadable driver with at least one device.
pub fn check_run_memory(value: &str) -> Result<MemoryKind> {
    let kind: MemoryKind = value.parse().map_err(|m| Error::usage("--memory", m))?;
    if kind == MemoryKind::Host {
        return Ok(kind);
    }
    #[cfg(not(feature = "cuda"))]
    return Err(Error::usage("--memory", super::cuda_probe::not_built_message()));
    #[cfg(feature = "cuda")]
    {
        let count = super::cuda::Gpu::check_driver().map_err(|m| Error::usage("--memory", m))?;
        if count == 0 {
            return Err(Error::usage(
                "--memory",
                "cuda: the NVIDIA driver loaded but reports no device; check `nvidia-smi` and \
                 CUDA_VISIBLE_DEVICES, or use --memory host",
            ));
        }
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_accepted_and_unknown_names_are_usage_errors() {
        assert_eq!(check_run_memory("host").unwrap(), MemoryKind::Host);
        assert_eq!("CUDA".parse::<MemoryKind>(), Ok(MemoryKind::Cuda));
        let e = check_run_memory("gpu").unwrap_err().to_string();
        assert!(e.starts_with("--memory:") && e.contains("host or cuda"), "{e}");
    }

    #[test]
    fn cuda_is_refused_with_a_reason_without_a_driver() {
        let Err(e) = check_run_memory("cuda") else {
            eprintln!("skipped: this machine has a usable NVIDIA driver");
            return;
        };
        let e = e.to_string();
        assert!(e.starts_with("--memory:"), "{e}");
        assert!(e.contains("--features cuda") || e.contains("libcuda.so"), "{e}");
    }
}

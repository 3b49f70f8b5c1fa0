//! What goes wrong with a run's buffers, typed: a CUDA call that failed with its result code, a device or
//! library that is not there, a kernel that would not compile or load, and a range a staging step got wrong.
//! Each renders as the message users read; callers add the rank, host and flag ([`crate::error::Error`]).

use super::cuda_probe::{no_driver_message, no_nvrtc_message, not_built_message};
use crate::reduce::Dtype;

/// What the CUDA driver returned for a failed call: its `CUresult` code, the code's name, and the text
/// messages show (cudarc's rendering of the error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaFailure {
    /// The `CUresult` value (`2` for out of memory).
    pub code: u32,
    /// The `CUresult` name (`CUDA_ERROR_OUT_OF_MEMORY`).
    pub name: String,
    /// The error as messages show it.
    pub text: String,
}

impl std::fmt::Display for CudaFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(feature = "cuda")]
impl From<cudarc::driver::DriverError> for CudaFailure {
    fn from(e: cudarc::driver::DriverError) -> Self {
        CudaFailure {
            code: e.0 as u32,
            name: format!("{:?}", e.0),
            text: e.to_string(),
        }
    }
}

/// A failure of a run's memory: the device, the driver, the kernels, or a staging range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// `--memory` named no kind of memory.
    #[error("unknown memory '{0}' (expected host or cuda)")]
    UnknownKind(String),
    /// This build has no CUDA support.
    #[error("{}", not_built_message())]
    NotBuilt,
    /// libcuda could not be loaded.
    #[error("{}", no_driver_message())]
    NoDriver,
    /// libnvrtc could not be loaded.
    #[error("{}", no_nvrtc_message())]
    NoNvrtc,
    /// libcuda loaded but `cuInit` failed.
    #[error(
        "the NVIDIA driver library loaded but cuInit failed ({cuda}); check `nvidia-smi` and that the driver \
         matches the kernel module"
    )]
    DriverInit {
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// The driver reports no device.
    #[error("the NVIDIA driver is loaded but reports no CUDA device; check `nvidia-smi` and CUDA_VISIBLE_DEVICES")]
    NoDevices,
    /// A device was asked for by something that is not an ordinal.
    #[error("device '{given}' is not a device ordinal (0 to {})", .count - 1)]
    NotAnOrdinal {
        /// What was given.
        given: String,
        /// Devices there are (at least 1).
        count: usize,
    },
    /// The device asked for is not there.
    #[error(
        "device {ordinal} does not exist: this machine shows {count} CUDA device(s), ordinals 0 to {} \
         (CUDA_VISIBLE_DEVICES narrows and renumbers them)",
        .count - 1
    )]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices there are (at least 1).
        count: usize,
    },
    /// A driver call failed; `call` says what was being done (`creating a stream`, `cuDeviceGetName`).
    #[error("CUDA: {call} failed: {cuda}")]
    Driver {
        /// What was being done.
        call: &'static str,
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// Creating a context on device `ordinal` failed.
    #[error("CUDA: creating a context on device {ordinal} failed: {cuda}")]
    Context {
        /// The device.
        ordinal: usize,
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// Allocating `bytes` of device memory on device `ordinal` failed.
    #[error("CUDA: allocating {bytes} bytes on device {ordinal} failed: {cuda}")]
    Alloc {
        /// Bytes asked for.
        bytes: usize,
        /// The device.
        ordinal: usize,
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// Allocating `bytes` of pinned (page-locked) host memory failed.
    #[error("CUDA: allocating {bytes} bytes of pinned host memory failed: {cuda}")]
    AllocPinned {
        /// Bytes asked for.
        bytes: usize,
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// The device's compute capability is outside what the kernels are compiled for.
    #[error("compute capability {major}.{minor} is not one collbench can compile for (expected 3.0 to 20.9)")]
    Capability {
        /// Major version.
        major: i32,
        /// Minor version.
        minor: i32,
    },
    /// NVRTC refused the kernel source `file` with `options`; `log` is its compile log.
    #[error("NVRTC could not compile {file} with {options}: {log}")]
    Compile {
        /// The source file's name.
        file: &'static str,
        /// The options, space-separated.
        options: String,
        /// NVRTC's log.
        log: String,
    },
    /// NVRTC failed on `file` other than by refusing it.
    #[error("NVRTC failed on {file}: {error}")]
    Nvrtc {
        /// The source file's name.
        file: &'static str,
        /// What NVRTC said.
        error: String,
    },
    /// The driver would not load the PTX compiled for `compute_{major}{minor}`.
    #[error(
        "CUDA: loading the kernels compiled by NVRTC for compute_{major}{minor} failed: {cuda} (a libnvrtc newer \
         than the driver emits PTX the driver cannot load: use the libnvrtc of the driver's CUDA version)"
    )]
    LoadModule {
        /// Major compute capability.
        major: i32,
        /// Minor compute capability.
        minor: i32,
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// The loaded module has no kernel `name`.
    #[error("CUDA: finding the kernel {name} failed: {cuda}")]
    NoKernel {
        /// The kernel's name.
        name: String,
        /// What the driver returned.
        cuda: CudaFailure,
    },
    /// `at..at + len` is not within a buffer of `size` bytes (a staging bug, not bad input).
    #[error("{what}: bytes {at}..{} outside a buffer of {size} bytes", .at.saturating_add(*.len))]
    OutOfRange {
        /// The operation (`upload`, `reduce (a)`).
        what: &'static str,
        /// First byte.
        at: usize,
        /// Bytes.
        len: usize,
        /// The buffer's size.
        size: usize,
    },
    /// A reduction over `len` bytes that are not whole elements of `dtype`.
    #[error("reduce: {len} bytes is not a whole number of {dtype} elements")]
    PartElements {
        /// Bytes.
        len: usize,
        /// The element type.
        dtype: Dtype,
    },
    /// A reduction whose destination and sources overlap.
    #[error("reduce: overlapping ranges of {len} bytes at {dst_at} (destination), {a_at} and {b_at}")]
    Overlap {
        /// Bytes of each range.
        len: usize,
        /// Destination offset.
        dst_at: usize,
        /// First source's offset.
        a_at: usize,
        /// Second source's offset.
        b_at: usize,
    },
    /// A finalize (Avg) over zero ranks.
    #[error("finalize: the rank count must be at least 1")]
    NoRanks,
    /// A kernel's buffers differ in length or are not whole elements of `dtype`.
    #[error(
        "GPU kernel on {dtype}: buffers of {lens:?} bytes; they must be equal and a multiple of {} bytes",
        .dtype.size()
    )]
    KernelLengths {
        /// The element type.
        dtype: Dtype,
        /// The buffers' lengths in bytes.
        lens: Vec<usize>,
    },
    /// The verify kernel's table of expected values has the wrong size.
    #[error("verify: the expected table has {bytes} bytes, not {period} {dtype} elements")]
    VerifyTable {
        /// Bytes given.
        bytes: usize,
        /// Elements it must hold.
        period: usize,
        /// The element type.
        dtype: Dtype,
    },
    /// A wait for a mark queued on another device.
    #[error("waiting for a mark this device never queued")]
    ForeignMark,
    /// A mark's time read before the stream passed it.
    #[error("reading the time of a mark the stream has not passed (wait or sync first)")]
    MarkNotPassed,
}

impl MemoryError {
    /// The CUDA driver's answer, where a driver call failed.
    pub fn cuda(&self) -> Option<&CudaFailure> {
        match self {
            MemoryError::DriverInit { cuda }
            | MemoryError::Driver { cuda, .. }
            | MemoryError::Context { cuda, .. }
            | MemoryError::Alloc { cuda, .. }
            | MemoryError::AllocPinned { cuda, .. }
            | MemoryError::LoadModule { cuda, .. }
            | MemoryError::NoKernel { cuda, .. } => Some(cuda),
            _ => None,
        }
    }
}

/// Callers that still pass messages (reports, labels) take the rendered text.
impl From<MemoryError> for String {
    fn from(e: MemoryError) -> String {
        e.to_string()
    }
}

/// A device failure during a run is the run's failure (exit 3); setup failures (no driver, no such device)
/// are mapped by their callers to the flag that asked for them.
impl From<MemoryError> for crate::error::Error {
    fn from(e: MemoryError) -> Self {
        crate::error::Error::peer(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure() -> CudaFailure {
        CudaFailure {
            code: 2,
            name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
            text: "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")".into(),
        }
    }

    #[test]
    fn driver_failures_carry_the_call_the_code_and_the_device() {
        let e = MemoryError::Driver {
            call: "creating a stream",
            cuda: failure(),
        };
        assert_eq!(
            e.to_string(),
            "CUDA: creating a stream failed: DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")"
        );
        assert_eq!(
            e.cuda().map(|c| (c.code, c.name.as_str())),
            Some((2, "CUDA_ERROR_OUT_OF_MEMORY"))
        );
        let e = MemoryError::Alloc {
            bytes: 4096,
            ordinal: 3,
            cuda: failure(),
        };
        assert!(matches!(
            e,
            MemoryError::Alloc {
                bytes: 4096,
                ordinal: 3,
                ..
            }
        ));
        let m = e.to_string();
        assert!(
            m.starts_with("CUDA: allocating 4096 bytes on device 3 failed: ") && m.contains("OUT_OF_MEMORY"),
            "{m}"
        );
        let m = MemoryError::Context {
            ordinal: 5,
            cuda: failure(),
        }
        .to_string();
        assert!(m.starts_with("CUDA: creating a context on device 5 failed:"), "{m}");
        let m = MemoryError::AllocPinned {
            bytes: 64,
            cuda: failure(),
        }
        .to_string();
        assert!(m.contains("64 bytes of pinned host memory"), "{m}");
        let m = MemoryError::DriverInit { cuda: failure() }.to_string();
        assert!(m.contains("cuInit failed (DriverError(CUDA_ERROR_OUT_OF_MEMORY"), "{m}");
        let m = MemoryError::NoKernel {
            name: "reduce_float_sum".into(),
            cuda: failure(),
        }
        .to_string();
        assert!(m.contains("finding the kernel reduce_float_sum failed"), "{m}");
        let m = MemoryError::LoadModule {
            major: 9,
            minor: 0,
            cuda: failure(),
        }
        .to_string();
        assert!(
            m.contains("for compute_90 failed: DriverError(") && m.contains("libnvrtc newer"),
            "{m}"
        );
        assert_eq!(MemoryError::NoRanks.cuda(), None);
    }

    #[test]
    fn missing_pieces_render_the_messages_that_say_what_to_do() {
        assert_eq!(MemoryError::NoDriver.to_string(), no_driver_message());
        assert_eq!(MemoryError::NoNvrtc.to_string(), no_nvrtc_message());
        assert_eq!(MemoryError::NotBuilt.to_string(), not_built_message());
        let e = MemoryError::NoSuchDevice { ordinal: 8, count: 8 };
        let m = e.to_string();
        assert!(
            m.starts_with("device 8 does not exist") && m.contains("8 CUDA device(s), ordinals 0 to 7"),
            "{m}"
        );
        let m = MemoryError::NotAnOrdinal {
            given: "gpu0".into(),
            count: 2,
        }
        .to_string();
        assert_eq!(m, "device 'gpu0' is not a device ordinal (0 to 1)");
        assert!(MemoryError::NoDevices.to_string().contains("reports no CUDA device"));
        assert_eq!(
            MemoryError::UnknownKind("gpu".into()).to_string(),
            "unknown memory 'gpu' (expected host or cuda)"
        );
    }

    #[test]
    fn kernel_failures_carry_their_log_and_shape() {
        let m = MemoryError::Compile {
            file: "kernels/reduce.cu",
            options: "--fmad=false --gpu-architecture=compute_90".into(),
            log: "error: expected ';'".into(),
        }
        .to_string();
        assert_eq!(
            m,
            "NVRTC could not compile kernels/reduce.cu with --fmad=false --gpu-architecture=compute_90: error: \
             expected ';'"
        );
        let m = MemoryError::Nvrtc {
            file: "kernels/reduce.cu",
            error: "out of memory".into(),
        }
        .to_string();
        assert_eq!(m, "NVRTC failed on kernels/reduce.cu: out of memory");
        assert_eq!(
            MemoryError::Capability { major: 2, minor: 1 }.to_string(),
            crate::reduce::cuda_kernels::arch_option(2, 1).unwrap_err()
        );
        let m = MemoryError::KernelLengths {
            dtype: Dtype::Float,
            lens: vec![16, 12],
        }
        .to_string();
        assert_eq!(
            m,
            "GPU kernel on float: buffers of [16, 12] bytes; they must be equal and a multiple of 4 bytes"
        );
        let m = MemoryError::VerifyTable {
            bytes: 3,
            period: 8,
            dtype: Dtype::Double,
        }
        .to_string();
        assert_eq!(m, "verify: the expected table has 3 bytes, not 8 double elements");
    }

    #[test]
    fn range_errors_name_the_operation_and_the_bytes() {
        let e = MemoryError::OutOfRange {
            what: "upload",
            at: 6,
            len: 4,
            size: 8,
        };
        assert_eq!(e.to_string(), "upload: bytes 6..10 outside a buffer of 8 bytes");
        let e = MemoryError::OutOfRange {
            what: "download",
            at: usize::MAX,
            len: 4,
            size: 8,
        };
        assert!(e.to_string().contains(&format!("{}..{}", usize::MAX, usize::MAX)));
        assert_eq!(
            MemoryError::Overlap {
                len: 8,
                dst_at: 4,
                a_at: 0,
                b_at: 8
            }
            .to_string(),
            "reduce: overlapping ranges of 8 bytes at 4 (destination), 0 and 8"
        );
        assert_eq!(
            MemoryError::PartElements {
                len: 6,
                dtype: Dtype::Int32
            }
            .to_string(),
            "reduce: 6 bytes is not a whole number of int32 elements"
        );
        // A run's device failure exits as a failed run, not as bad input.
        let e: crate::error::Error = MemoryError::MarkNotPassed.into();
        assert_eq!(e.exit_code(), crate::error::EXIT_PEER);
        assert!(e.to_string().contains("wait or sync first"), "{e}");
    }
}

//! Where the buffers live and how the engine stages them (`--memory`, `--device`, `--staging-pieces`,
//! `--reduce-on`, `--emulate-device`). Validated here against the paths, naming the flag in every error.

use serde::Serialize;

use crate::cli::RunArgs;
use crate::defaults;
use crate::error::{Error, Result};
use crate::memory::MemoryKind;
use crate::transport::path::{PathKind, PathOptions};

/// Most pieces a staged call is split into (`--staging-pieces`): each adds a collective's latency.
pub const MAX_STAGING_PIECES: usize = 64;

/// The buffers' memory and how device buffers are staged. Every rank must agree on all of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BufferOptions {
    /// Where the collectives' buffers live (`--memory`); device memory is staged through pinned host memory.
    pub memory: MemoryKind,
    /// CUDA device ordinal for every rank (`--device`); `None`: `COLLBENCH_CUDA_DEVICE`, else the local rank's.
    pub device: Option<String>,
    /// Device memory on collbench's paths: at most this many pieces per call, whose staging copies overlap
    /// the network (`--staging-pieces`; 1: none). Every rank must split alike, so ranks agree on it.
    pub staging_pieces: usize,
    /// Testing aid (`--emulate-device`, hidden): `--memory cuda` on host memory posing as a device.
    pub emulate_device: bool,
    /// Device memory on collbench's paths: all_reduce and reduce_scatter reduce with the GPU kernels, the host
    /// only moving bytes (`--reduce-on device`); otherwise the host reduces the staged data.
    pub reduce_on_device: bool,
}

impl Default for BufferOptions {
    fn default() -> Self {
        BufferOptions {
            memory: MemoryKind::Host,
            device: None,
            staging_pieces: defaults::STAGING_PIECES,
            emulate_device: false,
            reduce_on_device: false,
        }
    }
}

impl BufferOptions {
    /// Validates the buffer flags of `collbench run` against the paths they run on.
    pub fn from_cli(args: &RunArgs, paths: &PathOptions) -> Result<BufferOptions> {
        let staging_pieces = args.staging_pieces;
        if !(1..=MAX_STAGING_PIECES).contains(&staging_pieces) {
            return Err(Error::usage(
                "--staging-pieces",
                format!(
                    "must be between 1 (no overlap) and {MAX_STAGING_PIECES} pieces per call (got {staging_pieces})"
                ),
            ));
        }
        let memory = memory_kind(&args.memory, &paths.transports)?;
        // The emulated device stands in for staging only: a path that takes device buffers directly needs a GPU.
        let direct = paths
            .transports
            .iter()
            .any(|p| !p.traits().own_transport && p.traits().device_memory);
        if args.emulate_device && (memory != MemoryKind::Cuda || direct) {
            return Err(Error::usage(
                "--emulate-device",
                "a testing aid for the staged path: it needs --memory cuda and tcp or rdma paths only (nccl needs \
                 a real GPU)",
            ));
        }
        let reduce_on_device = match args.reduce_on.to_ascii_lowercase().as_str() {
            "host" => false,
            "device" if memory == MemoryKind::Cuda => true,
            "device" => {
                return Err(Error::usage(
                    "--reduce-on",
                    "device needs device buffers: add --memory cuda (host buffers are reduced by the host)",
                ))
            }
            other => {
                return Err(Error::usage(
                    "--reduce-on",
                    format!("unknown place '{other}' (expected host or device)"),
                ))
            }
        };
        Ok(BufferOptions {
            memory,
            device: args.device.clone(),
            staging_pieces,
            emulate_device: args.emulate_device,
            reduce_on_device,
        })
    }

    /// `preflight`'s buffers: `memory` (`--memory`) on `device` (`--device`) with the default staging, refused
    /// as `run` refuses them where a path cannot carry them.
    pub fn preflight(memory: &str, device: Option<String>, paths: &PathOptions) -> Result<BufferOptions> {
        Ok(BufferOptions {
            memory: memory_kind(memory, &paths.transports)?,
            device,
            ..BufferOptions::default()
        })
    }
}

/// `--memory`, refused with device memory on paths that cannot carry it: tcp and rdma paths stage device buffers
/// through host memory, nccl takes them directly, mpi hands host pointers to the MPI library.
pub(crate) fn memory_kind(value: &str, transports: &[PathKind]) -> Result<MemoryKind> {
    let kind: MemoryKind = value.parse().map_err(|m| Error::usage("--memory", m))?;
    if let (MemoryKind::Host, Some(p)) = (kind, transports.iter().find(|p| !p.traits().host_memory)) {
        return Err(Error::usage(
            "--transport",
            format!("{p} runs on device buffers: add --memory cuda (NCCL's collectives take GPU memory only)"),
        ));
    }
    if kind == MemoryKind::Cuda && transports.iter().any(|p| !p.traits().device_memory) {
        // Staging around MPI_Allreduce would measure the same copies as the tcp path plus MPI's host
        // collectives; not built, so refused rather than silently run on host memory.
        return Err(Error::usage(
            "--memory",
            "cuda runs on tcp and rdma paths (device buffers staged through host memory around collbench's own \
             algorithms) and on nccl, not on mpi (MPI's collectives get host buffers only); drop mpi from \
             --transport, or use --memory host",
        ));
    }
    Ok(kind)
}

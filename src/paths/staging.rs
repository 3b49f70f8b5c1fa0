//! The device that staged paths (tcp, rdma with `--memory cuda`) copy through, opened once per run, and the
//! buffer allocator each of their sweeps gets from it.

use crate::bench::{self, Outcome, Sweep};
use crate::engine::call::{HostAlloc, WithRuntime};
use crate::engine::pieces::Plan;
use crate::engine::staged::StagedAlloc;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::device::Device;
use crate::memory::emulated::Emulated;
use crate::options::Options;

/// The device staged paths share.
pub(super) enum Staging {
    /// Host memory: nothing to stage.
    None,
    /// `--emulate-device`: host memory posing as a GPU (a testing aid).
    Emulated(Emulated),
    /// This rank's GPU, and the host memory (bytes) opening its context took.
    #[cfg(feature = "cuda")]
    Cuda(crate::memory::cuda_device::CudaDevice, u64),
}

impl Staging {
    /// The staging device `--memory` asks for, opened for `rank`, where a path stages.
    pub(super) fn open(opts: &Options, rank: usize) -> Result<Staging> {
        let stages = opts.paths.transports.iter().any(|p| p.traits().own_transport);
        if opts.buffers.memory != crate::memory::MemoryKind::Cuda || !stages {
            return Ok(Staging::None);
        }
        if opts.buffers.emulate_device {
            return Ok(Staging::Emulated(Emulated::default()));
        }
        let before = bench::memory::rss();
        open_gpu(opts, rank).map(|dev| staging_gpu(dev, bench::memory::grown_since(before)))
    }

    /// [`bench::sweep`] on host memory, or on device buffers staged through pinned host memory.
    pub(super) fn sweep<E: Engine>(&self, engine: &mut E, s: Sweep<'_>) -> Result<Outcome> {
        match self {
            Staging::None => bench::sweep(engine, s, HostAlloc),
            Staging::Emulated(dev) => sweep_on_device(engine, dev, 0, s),
            #[cfg(feature = "cuda")]
            Staging::Cuda(dev, runtime_bytes) => sweep_on_device(engine, dev, *runtime_bytes, s),
        }
    }
}

/// [`bench::sweep`] on buffers of `dev` (whose runtime took `runtime_bytes` of host memory to open), calls
/// split by `--staging-pieces`.
fn sweep_on_device<E: Engine, D: Device>(engine: &mut E, dev: &D, runtime_bytes: u64, s: Sweep<'_>) -> Result<Outcome> {
    let alloc = StagedAlloc {
        dev,
        rank: engine.rank(),
        plan: Plan {
            pieces: s.opts.buffers.staging_pieces,
            ..Default::default()
        },
        reduce_on_device: s.opts.buffers.reduce_on_device.then_some(engine.size()),
    };
    bench::sweep(engine, s, WithRuntime { alloc, runtime_bytes })
}

#[cfg(feature = "cuda")]
fn staging_gpu(dev: crate::memory::cuda_device::CudaDevice, runtime_bytes: u64) -> Staging {
    Staging::Cuda(dev, runtime_bytes)
}

/// Without the `cuda` feature `--memory cuda` is refused before any rank starts; [`open_gpu`] says so again.
#[cfg(not(feature = "cuda"))]
fn staging_gpu(never: std::convert::Infallible, _runtime_bytes: u64) -> Staging {
    match never {}
}

/// This rank's GPU (`--device`, else by local rank); a failure names the rank and says what to check.
#[cfg(feature = "cuda")]
pub(super) fn open_gpu(opts: &Options, rank: usize) -> Result<crate::memory::cuda_device::CudaDevice> {
    crate::memory::cuda_device::CudaDevice::open(opts.buffers.device.as_deref())
        .map_err(|m| Error::usage("--memory", format!("cuda: rank {rank}: {m}")))
}

#[cfg(not(feature = "cuda"))]
fn open_gpu(_opts: &Options, _rank: usize) -> Result<std::convert::Infallible> {
    Err(Error::usage("--memory", crate::memory::cuda_probe::not_built_message()))
}

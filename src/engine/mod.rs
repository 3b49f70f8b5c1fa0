//! Engines: what runs one collective on one path. Today collbench's own algorithms over its own transport
//! ([`Native`]); library baselines (MPI, NCCL) implement the same trait.

use crate::algorithm::options::AlgoOptions;
use crate::algorithm::{self, control, Algo, Args, Tuning, Workspace};
use crate::collective::Collective;
use crate::engine::call::Call;
use crate::error::{Error, Result};
use crate::reduce::{Dtype, Op};
use crate::transport::Transport;

pub mod call;
pub mod direct;
#[cfg(test)]
mod one_rank;
pub mod options;
pub mod pieces;
#[cfg(test)]
mod rdma_transport_tests;
pub mod staged;
pub mod watchdog;

/// Runs collectives on one path, plus the small control exchanges the runner needs.
pub trait Engine {
    /// The path measured, e.g. `tcp@lo`.
    fn path(&self) -> String;
    /// This rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// The algorithm that will run `coll` at `size_bytes`.
    fn algo(&self, coll: Collective, size_bytes: u64) -> Algo;
    /// Why this engine cannot run `dtype`/`op` (points it cannot run are skipped with that reason).
    fn unsupported(&self, _dtype: Dtype, _op: Option<Op>) -> Option<String> {
        None
    }
    /// Runs one collective.
    fn run(&mut self, algo: Algo, args: Args<'_>) -> Result<()>;
    /// Runs one call on device buffers at the device addresses `send` and `recv`, and returns once it is
    /// complete: for engines that take device memory directly (NCCL); the others are staged
    /// ([`staged::Staged`]).
    fn run_device(&mut self, _call: &Call, _send: u64, _recv: u64) -> Result<()> {
        Err(Error::usage(
            "--transport",
            format!(
                "{} cannot run on device buffers directly; its device buffers are staged",
                self.path()
            ),
        ))
    }
    /// Queues `group` calls of `call` on device buffers, as one group where the library has them (nccl-tests'
    /// `-m`), without waiting for them to complete: they complete by [`Engine::wait_device`]. Engines that
    /// cannot queue run them ([`Engine::run_device`]).
    fn queue_device(&mut self, call: &Call, send: u64, recv: u64, group: u32) -> Result<()> {
        for _ in 0..group {
            self.run_device(call, send, recv)?;
        }
        Ok(())
    }
    /// Returns once every call [`Engine::queue_device`] queued is complete.
    fn wait_device(&mut self) -> Result<()> {
        Ok(())
    }
    /// Whether [`Engine::queue_device`] returns before its calls complete, so that one wait can end many.
    fn queues_device(&self) -> bool {
        false
    }
    /// No rank returns before every rank has entered.
    fn barrier(&mut self) -> Result<()>;
    /// Every rank's bytes on rank 0.
    fn gather(&mut self, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>>;
    /// Rank 0's bytes on every rank.
    fn broadcast(&mut self, data: &[u8]) -> Result<Vec<u8>>;

    /// The sweep's buffers are about to be freed: forget anything cached about them.
    fn forget_memory(&mut self) {}
}

/// collbench's own algorithms over a [`Transport`].
pub struct Native<T: Transport> {
    pub transport: T,
    workspace: Workspace,
    tune: Tuning,
    algo: AlgoOptions,
    /// The transport's path, whose kind picks the table of `--algo-model`.
    path: String,
}

impl<T: Transport> Native<T> {
    /// An engine with the algorithm choice and tuning of `algo` (`--algo`, `--algo-threshold`, `--algo-model`,
    /// `--chunk`).
    pub fn new(transport: T, algo: &AlgoOptions) -> Self {
        Native {
            workspace: Workspace::default(),
            tune: Tuning {
                chunk_bytes: algo.chunk_bytes,
                ring_cost: algo
                    .algo_model
                    .as_ref()
                    .and_then(|m| m.table(&transport.path()))
                    .and_then(|t| t.ring_cost()),
                ..Tuning::default()
            },
            path: transport.path(),
            algo: algo.clone(),
            transport,
        }
    }
}

impl<T: Transport> Engine for Native<T> {
    fn forget_memory(&mut self) {
        self.transport.forget_memory();
    }

    fn path(&self) -> String {
        self.transport.path()
    }

    fn rank(&self) -> usize {
        self.transport.rank()
    }

    fn size(&self) -> usize {
        self.transport.size()
    }

    fn algo(&self, coll: Collective, size_bytes: u64) -> Algo {
        Algo::choose(coll, &self.algo, &self.path, size_bytes, self.transport.size())
    }

    fn run(&mut self, algo: Algo, args: Args<'_>) -> Result<()> {
        algorithm::run(&mut self.transport, algo, args, &mut self.workspace, &self.tune)
    }

    fn barrier(&mut self) -> Result<()> {
        control::barrier(&mut self.transport)
    }

    fn gather(&mut self, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        control::gather(&mut self.transport, data)
    }

    fn broadcast(&mut self, data: &[u8]) -> Result<Vec<u8>> {
        control::broadcast(&mut self.transport, data)
    }
}

//! Validated, typed options: what the rest of the program reads. `cli.rs` parses; each part is validated by
//! the module that uses it, naming the flag in every error, and [`Options`] is their aggregate:
//!
//! | part | owner | flags |
//! |---|---|---|
//! | [`Options::sweep`] | [`crate::bench::options`] | sizes, collectives, iterations, `-a` |
//! | [`Options::algorithm`] | [`crate::algorithm::options`] | `--algo`, `--algo-threshold`, `--chunk` |
//! | [`Options::paths`] | [`crate::transport::path`] | `--transport`, `--reference`, `--line-rate` |
//! | [`Options::rdma`] | [`crate::transport::rdma::options`] | `--gid-index`, `--rdma-qps` |
//! | [`Options::tcp`] | [`crate::transport::tcp::options`] | `--iface`, `--streams`, `--spin`, `--sndbuf`, `--tcp-congestion` |
//! | [`Options::deadlines`] | [`crate::world::options`] | `-T`, `--bootstrap-timeout`, `--connect-timeout` |
//! | [`Options::buffers`] | [`crate::engine::options`] | `--memory`, `--device`, `--staging-pieces`, `--reduce-on` |
//! | [`Options::outputs`] | [`crate::report::options`] | `-J`, `--csv`, `--markdown`, `--plot`, `--target-ranks`, ... |
//! | [`Options::aids`] | `crate::fault` | the hidden testing aids |
//!
//! What ranks must agree on is [`Agreement`], built from the parts. Validation makes no system calls: what
//! depends on the host is checked where the options are applied.

mod agreement;
pub mod own_path;
mod params;

use serde::Serialize;

pub use self::agreement::Agreement;
pub use crate::algorithm::options::{AlgoChoice, AlgoOptions};
pub use crate::bench::options::{Interleave, RankStat, SizeRange, Step, SweepOptions};
pub use crate::engine::options::BufferOptions;
pub use crate::fault::TestAids;
pub use crate::report::nccl_table::NcclTestsStyle;
pub use crate::report::options::{Outputs, Progress};
pub use crate::transport::path::{PathKind, PathOptions};
pub use crate::transport::rdma::options::RdmaOptions;
pub use crate::transport::tcp::options::TcpOptions;
pub use crate::world::options::Deadlines;

use crate::cgroup::limits::Room;
use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::memory::available::Available;
use crate::sizes::format_size;

impl Options {
    /// The parts a sweep reads.
    pub fn settings(&self) -> crate::bench::Settings<'_> {
        crate::bench::Settings {
            sweep: &self.sweep,
            algorithm: &self.algorithm,
            paths: &self.paths,
            aids: &self.aids,
            buffers: &self.buffers,
        }
    }
}

/// Most local ranks `--np` spawns; beyond this a launcher (mpirun, srun) is the right tool.
pub const MAX_NP: usize = 512;

/// Everything one run needs to know, validated: the parts, each owned by the module that uses it. Serialised
/// flat (one key per field of every part), as the results file's `options` object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Local ranks to spawn when no launcher is present (`--np`).
    pub np: usize,
    #[serde(flatten)]
    pub sweep: SweepOptions,
    #[serde(flatten)]
    pub algorithm: AlgoOptions,
    #[serde(flatten)]
    pub paths: PathOptions,
    #[serde(flatten)]
    pub rdma: RdmaOptions,
    #[serde(flatten)]
    pub deadlines: Deadlines,
    #[serde(flatten)]
    pub tcp: TcpOptions,
    #[serde(flatten)]
    pub buffers: BufferOptions,
    #[serde(flatten)]
    pub outputs: Outputs,
    #[serde(flatten)]
    pub aids: TestAids,
    /// Under nccl-tests' names: its stdout layout, minimum bandwidth and exit status; `None` for `run`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_tests: Option<NcclTestsStyle>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            np: crate::defaults::NP,
            sweep: SweepOptions::default(),
            algorithm: AlgoOptions::default(),
            paths: PathOptions::default(),
            rdma: RdmaOptions::default(),
            deadlines: Deadlines::default(),
            tcp: TcpOptions::default(),
            buffers: BufferOptions::default(),
            outputs: Outputs::default(),
            aids: TestAids::default(),
            nccl_tests: None,
        }
    }
}

impl Options {
    /// Validates `collbench run`'s flags, part by part; every error names the flag and says what to do instead.
    pub fn from_cli(args: &RunArgs) -> Result<Options> {
        let sweep = SweepOptions::from_cli(args)?;
        let np = np(args.np)?;
        let paths = PathOptions::from_cli(&args.link, args.reference.clone())?;
        let buffers = BufferOptions::from_cli(args, &paths)?;
        if sweep.iteration.unalign > 0 && buffers.memory != crate::memory::MemoryKind::Host {
            return Err(Error::usage(
                "-u/--unalign",
                "applies to host memory only here; drop -u, or run on host memory (--memory host)",
            ));
        }
        Ok(Options {
            np,
            sweep,
            algorithm: AlgoOptions::from_cli(&args.link, &args.algo_threshold)?
                .with_model(args.algo_model.as_deref())?,
            rdma: RdmaOptions::from_cli(&args.link)?,
            tcp: TcpOptions::from_cli(&args.link)?,
            buffers,
            nccl_tests: NcclTestsStyle::from_cli(args)?,
            deadlines: Deadlines::from_cli(&args.deadlines)?,
            aids: TestAids::from_cli(args.corrupt_rank, args.fault.as_deref())?,
            outputs: Outputs::from_cli(args)?,
            paths,
        })
    }

    /// What every rank must agree on.
    pub fn agreement(&self) -> Agreement {
        Agreement::of(self)
    }

    /// Bytes one rank needs for its buffers at the largest size: send + receive + 2 pipeline chunks of
    /// scratch, the most over the selected collectives and dtypes (their rounding differs slightly).
    pub fn memory_needed(&self) -> u64 {
        let max = usize::try_from(self.sweep.sizes.max).unwrap_or(usize::MAX);
        let scratch = 2 * self.algorithm.chunk_bytes as u64;
        let mut most = 0u64;
        for &c in &self.sweep.collectives {
            for &d in &self.sweep.dtypes {
                let l = c.layout(max, d.size(), self.np);
                let mut bytes = (l.send_count as u64 + l.recv_count as u64) * l.elem_size as u64;
                // Device memory keeps host copies twice: the pinned staging, and the buffers the check reads.
                if self.buffers.memory == crate::memory::MemoryKind::Cuda {
                    bytes = bytes.saturating_mul(2);
                }
                // Reductions on the device stage through three more host buffers of about the larger size.
                if self.buffers.reduce_on_device && c.reduces() {
                    let larger = l.send_count.max(l.recv_count) as u64 * l.elem_size as u64;
                    bytes = bytes.saturating_add(larger.saturating_mul(3));
                }
                most = most.max(bytes.saturating_add(scratch));
            }
        }
        most
    }

    /// Fails with a usage error naming `-e` when `nranks_on_this_host` ranks would not fit in `available`,
    /// saying what bounds it (the machine, or the memory cgroup with its limit) and what to do.
    pub fn check_memory(&self, nranks_on_this_host: usize, available: &Available) -> Result<()> {
        let per_rank = self.memory_needed();
        let total = per_rank.saturating_mul(nranks_on_this_host as u64);
        if total <= available.bytes {
            return Ok(());
        }
        Err(Error::usage(
            "-e/--maxbytes",
            format!(
                "a sweep up to {} needs {} per rank x {} local ranks = {} \
                 but {}; lower -e or --np{}",
                format_size(self.sweep.sizes.max),
                format_size(per_rank),
                nranks_on_this_host,
                format_size(total),
                available.describe(),
                available.remedy()
            ),
        ))
    }

    /// Processes and threads `nranks_on_this_host` ranks start on this host (with collbench's own launcher
    /// when `launcher`): each rank's main thread and its rendezvous or signal thread, the threads MPI and NCCL
    /// start for their progress and proxies where a path uses a library (with collbench's watchdog beside
    /// them), and the launcher's main, signal and rendezvous threads. An estimate from above: a run that
    /// fits it is not cut short by a task limit.
    pub fn tasks_needed(&self, nranks_on_this_host: usize, launcher: bool) -> u64 {
        let library = self.paths.transports.iter().any(|p| !p.traits().own_transport);
        let per_rank = if library { 2 + LIBRARY_TASKS } else { 2 };
        let launcher = if launcher { 3 } else { 0 };
        (nranks_on_this_host as u64).saturating_mul(per_rank) + launcher
    }

    /// Fails with a usage error naming `--np` when the pids cgroup leaves room for fewer tasks than
    /// [`Options::tasks_needed`], naming the cgroup, its `pids.max` and what to do.
    pub fn check_tasks(&self, nranks_on_this_host: usize, launcher: bool, room: &Room) -> Result<()> {
        let need = self.tasks_needed(nranks_on_this_host, launcher);
        if need <= room.free() {
            return Ok(());
        }
        Err(Error::usage(
            "--np",
            format!(
                "{nranks_on_this_host} local ranks start up to {need} processes and threads but the pids cgroup {} \
                 leaves room for {} ({} {}, {} in use); lower --np, or raise {} of cgroup {}",
                room.cgroup,
                room.free(),
                room.file,
                room.limit,
                room.used,
                room.file,
                room.cgroup
            ),
        ))
    }
}

/// Threads an MPI or NCCL library may start per rank (progress, proxy and service threads) plus collbench's
/// watchdog's two.
const LIBRARY_TASKS: u64 = 10;

/// `--np`: 1 to [`MAX_NP`] local ranks.
pub fn np(n: usize) -> Result<usize> {
    if n == 0 || n > MAX_NP {
        return Err(Error::usage(
            "--np",
            format!(
                "must be between 1 and {MAX_NP} local ranks (got {n}); \
                 for more ranks use a launcher such as mpirun or srun"
            ),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests;

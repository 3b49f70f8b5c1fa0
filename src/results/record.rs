//! The one record schema every reporter writes: run metadata, one record per table row, a summary.

use serde::{Deserialize, Serialize};

use super::run_params::RunParams;
use crate::collective::Collective;
use crate::reduce::{Dtype, Op};
pub use crate::world::rank_info::{Endpoint, RankInfo};

/// Version of the JSON schema collbench writes; bump on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Metadata of one run, known before the first point. Fields a file lacks read as empty.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunInfo {
    /// collbench version.
    pub version: String,
    /// The command line as given.
    pub args: Vec<String>,
    /// Start time, RFC 3339 UTC.
    pub start_time: String,
    pub nranks: usize,
    /// How ranks were started and found each other ("local", later "mpirun", "slurm", ...).
    pub launcher: String,
    /// Seconds from start to every rank knowing every peer's endpoint.
    pub bootstrap_s: f64,
    /// Seconds to open and authenticate every data connection.
    pub connect_s: f64,
    /// Where the job token came from (and whether it authenticates anything).
    pub auth: String,
    /// The data connections opened; `None` where unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<Connections>,
    pub ranks: Vec<RankInfo>,
    /// The run's parameters, as the run used them.
    pub params: RunParams,
    /// Files written before [`RunParams`] carry the serialised options instead; read only, to fill
    /// `params` ([`RunInfo::upgrade`]).
    #[serde(skip_serializing, rename = "options")]
    pub legacy_options: Option<serde_json::Value>,
    /// rdma paths on device memory only: how they move device buffers, and whether rank 0's host has a
    /// GPUDirect RDMA route ([`crate::memory::gpudirect`]). Written once, in the JSON's `collbench.memory`.
    #[serde(skip)]
    pub rdma_route: Option<String>,
    /// NCCL_TESTS_MIN_BW under the nccl-tests names: the average busbw (GB/s) below 90% of which the run
    /// fails; written as `average_bus_bandwidth.okay`.
    #[serde(skip)]
    pub min_bw: Option<f64>,
}

impl RunInfo {
    /// Fills `params` from the old `options` object of a file written before the params record.
    pub fn upgrade(&mut self) {
        if self.params.version == 0 {
            if let Some(o) = &self.legacy_options {
                self.params = RunParams::from_legacy(o);
            }
        }
    }
}

/// The data connections of a run: the rank pairs every TCP path connected, and why.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Connections {
    /// Rank pairs connected on each TCP path.
    pub pairs: usize,
    /// The pairs of a full mesh, n(n-1)/2, for comparison.
    pub all_pairs: usize,
    /// The most peers any one rank is connected to.
    pub max_peers: usize,
    /// TCP connections per pair (`--streams`).
    pub streams: usize,
    /// TCP paths, each connecting the same pairs.
    pub paths: usize,
    /// TCP connections in the whole job: pairs x streams x paths.
    pub sockets: usize,
    /// What the pairs serve, e.g. `control tree, ring`.
    pub why: String,
    /// TCP congestion control of rank 0's data sockets, read back from the kernel (`--tcp-congestion`, else
    /// the host's default); `None` where unknown (no TCP path, or a record from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
}

impl Connections {
    /// The connections of `paths` TCP paths over `links`, `streams` each.
    pub fn of(links: &crate::algorithm::peers::Links, streams: usize, paths: usize) -> Self {
        let n = links.size();
        Connections {
            pairs: links.pairs(),
            all_pairs: n * n.saturating_sub(1) / 2,
            max_peers: links.max_peers(),
            streams,
            paths,
            sockets: links.pairs() * streams * paths,
            why: links.why.clone(),
            congestion: None,
        }
    }
}

/// Peak resident memory (VmHWM) of the ranks, gathered to rank 0 at the end of each sweep.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeakMemory {
    /// The largest peak over ranks, bytes.
    pub max_bytes: u64,
    /// The rank with that peak, and its host.
    pub rank: usize,
    pub host: String,
    /// Every rank's peak in rank order, bytes; `None` where the rank could not read it.
    pub per_rank: Vec<Option<u64>>,
    /// The largest message of the sweep (the size column), bytes, and the bound the peak is held to:
    /// 3 x that + 64 MiB (send, receive and scratch buffers, plus the program itself).
    pub largest_message: u64,
    pub bound_bytes: u64,
    /// Host memory the device runtime (CUDA context, NCCL's communicator) took at start-up, measured when
    /// the paths opened, bytes: counted in `bound_bytes`. 0 (and not written) on host memory.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub runtime_bytes: u64,
}

fn is_zero(b: &u64) -> bool {
    *b == 0
}

impl PeakMemory {
    /// Headroom over three message buffers for the program, its stacks and the kernel's socket bookkeeping.
    pub const FIXED_ALLOWANCE: u64 = 64 << 20;

    /// The peak of `per_rank` (rank order, hosts alongside) for a sweep whose largest message is `largest`;
    /// `None` when no rank could read its peak.
    pub fn of(per_rank: Vec<Option<u64>>, hosts: &[&str], largest: u64) -> Option<Self> {
        let (rank, max_bytes) = per_rank
            .iter()
            .enumerate()
            .filter_map(|(r, b)| Some((r, (*b)?)))
            .max_by_key(|&(_, b)| b)?;
        Some(PeakMemory {
            max_bytes,
            rank,
            host: hosts.get(rank).map_or_else(String::new, |h| h.to_string()),
            per_rank,
            largest_message: largest,
            bound_bytes: largest.saturating_mul(3).saturating_add(Self::FIXED_ALLOWANCE),
            runtime_bytes: 0,
        })
    }

    /// The same peak, its bound counting `bytes` of host memory the device runtime took at start-up.
    pub fn with_runtime(mut self, bytes: u64) -> Self {
        self.bound_bytes = self
            .bound_bytes
            .saturating_sub(self.runtime_bytes)
            .saturating_add(bytes);
        self.runtime_bytes = bytes;
        self
    }

    /// Whether the peak stays within [`PeakMemory::bound_bytes`].
    pub fn within_bound(&self) -> bool {
        self.max_bytes <= self.bound_bytes
    }
}

/// Timing and check results of one placement (out-of-place or in-place) of one point.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Timing {
    /// The time the table reports, chosen by `-a` (default: the slowest rank's average), microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s (1e9 bytes/s), from `time_us`.
    pub algbw: f64,
    /// Bus bandwidth, GB/s, algbw x the collective's factor.
    pub busbw: f64,
    /// Wrong elements summed over ranks; `None` when the data check was off.
    pub wrong: Option<u64>,
    /// Per-rank average iteration time: rank 0's, the mean, fastest and slowest over ranks (us).
    pub rank0_us: f64,
    pub avg_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// Median and 99th percentile of per-iteration times, the largest over ranks (us).
    pub p50_us: f64,
    pub p99_us: f64,
    /// Half-width of the 95% confidence interval of `time_us` (us), from the per-iteration samples of the
    /// rank whose time is reported.
    pub ci95_us: f64,
    /// Timed iterations behind these figures.
    pub iters: u32,
    /// Device memory only: staging copies per call (us, from CUDA events), the most over ranks; the times
    /// above include the part of it the network did not hide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staging_us: Option<f64>,
    /// Device memory only: time per call the host waited for staging copies (us), the most over ranks: the
    /// staging the network did not hide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staging_wait_us: Option<f64>,
    /// With per-iteration timing (`-I 1`): every rank's iteration times and their summary, nccl-tests' way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_iter: Option<super::per_iter::PerIter>,
}

/// The first wrong element seen at one point, with where it was.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct WrongElement {
    pub rank: usize,
    pub host: String,
    pub in_place: bool,
    /// Element index in the rank's receive buffer.
    pub offset: u64,
    pub expected: String,
    pub got: String,
}

/// One row of a table: one size of one collective/dtype/op on one path, both placements.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Record {
    /// The path measured, e.g. `tcp@lo`.
    pub path: String,
    pub collective: Collective,
    /// The algorithm that ran, e.g. `ring`, `rec_doubling`, `bruck`, `tree`, `pairwise`.
    pub algo: String,
    /// The size column: bytes of the larger of send and receive buffer.
    pub size: u64,
    /// The count column: per-rank element count.
    pub count: u64,
    pub dtype: Dtype,
    /// The reduction op; `None` for collectives that do not reduce (shown as `none`).
    pub op: Option<Op>,
    /// The root rank; `None` for collectives without a root (shown as `-1`).
    pub root: Option<usize>,
    pub nranks: usize,
    pub out_of_place: Timing,
    pub in_place: Timing,
    pub first_wrong: Option<WrongElement>,
    /// Which whole sweep of the path this is (`--repeat`), from 0.
    pub repeat: u32,
    /// How the timed calls were waited for, on paths whose calls return before they complete (nccl);
    /// `None` where each call returns complete and every iteration is timed by the host clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<super::timing::TimingMode>,
}

/// One path's figures at one point of a comparison between paths.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathFigure {
    pub path: String,
    /// Reported time and the half-width of its 95% confidence interval (us), out-of-place.
    pub time_us: f64,
    pub ci95_us: f64,
    pub busbw: f64,
    /// busbw / the best path's busbw at this point (1 for the best).
    pub vs_best: f64,
    /// busbw / the reference path's busbw, when a reference was given and measured.
    pub vs_reference: Option<f64>,
    /// Whether this path's time interval is clear of the best path's (a real difference, not noise).
    pub significant: bool,
    /// busbw as a percentage of the path's line rate, where known (link speed, or `--line-rate`).
    pub line_rate_pct: Option<f64>,
    /// Whole sweeps combined into these figures (`--repeat`).
    pub repeats: u32,
}

/// Every path's figures at one collective/dtype/op/size, best path first.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Comparison {
    pub collective: Collective,
    pub dtype: Dtype,
    pub op: Option<Op>,
    pub size: u64,
    pub paths: Vec<PathFigure>,
}

/// What one path cost over its sweeps: start-up, CPU per byte moved, and whether the CPUs rather than the
/// network set the pace.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathCost {
    pub path: String,
    /// The path's line rate in GB/s (1e9 B/s), where known (link speed, or `--line-rate`).
    pub line_rate_gbs: Option<f64>,
    /// Seconds to open and authenticate the path's connections; `None` where a library does it (MPI).
    pub connect_s: Option<f64>,
    /// The path's first collective, the slowest rank's time (us): what a first call pays for lazy set-up.
    pub first_collective_us: f64,
    /// Wall-clock seconds of the path's sweeps.
    pub sweep_s: f64,
    /// CPU seconds (user + system) of every rank during the sweeps.
    pub cpu_s: f64,
    /// GB (1e9 B) moved by every rank, counted as the bus bandwidth counts bytes.
    pub gb_moved: f64,
    /// `cpu_s / gb_moved`; `None` when nothing was moved.
    pub cpu_s_per_gb: Option<f64>,
    /// The host whose CPUs were busiest, and how busy: its ranks' CPU time over wall time x its CPUs (%).
    pub busiest_host: String,
    pub host_cpu_pct: f64,
    /// Seconds and periods a cgroup CPU quota held the most-throttled host's ranks back; `None` when the
    /// counters could not be read.
    pub throttled_s: Option<f64>,
    pub throttled_periods: Option<u64>,
    /// How busy the busiest host's CPUs were during the sweeps, by every process, not only collbench's
    /// (`/proc/stat`, %); `None` when unreadable.
    pub host_busy_pct: Option<f64>,
    /// The CPUs, not the network, probably set the pace: a host's CPUs at least
    /// [`CPU_LIMITED_PCT`] busy (by collbench's ranks or by anything), or throttled for more than [`THROTTLED_SHARE`] of the sweep.
    pub cpu_limited: bool,
}

/// A host whose CPUs are this busy (%) during a sweep was computing, not waiting for the network.
pub const CPU_LIMITED_PCT: f64 = 85.0;
/// Throttled for more than this share of the sweep's wall time: the quota, not the network, set the pace.
pub const THROTTLED_SHARE: f64 = 0.05;

/// Totals over the whole run, for the footer.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    /// Points (rows x placements) with at least one wrong element (nccl-tests' "Out of bounds values").
    pub out_of_bounds: u64,
    /// Wrong elements over all points.
    pub wrong: u64,
    /// Average busbw per table over the sizes that matter, with which sizes those were.
    pub avg_busbw: Vec<AvgBusBw>,
    /// End time, RFC 3339 UTC.
    pub end_time: String,
    /// Paths side by side, when the run measured more than one.
    pub comparison: Vec<Comparison>,
    /// What each path cost, in `--transport` order.
    pub paths: Vec<PathCost>,
    /// Peak resident memory per rank; `None` where not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory: Option<PeakMemory>,
    /// The model fitted to this run and its predictions at `--target-ranks` (the `collbench model`
    /// document); `None` when not asked for or when the fit failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<serde_json::Value>,
    /// The same model as Markdown, for the Markdown report (the JSON has the data already).
    #[serde(skip)]
    pub model_markdown: Option<String>,
}

/// The average bus bandwidth of one table.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AvgBusBw {
    pub path: String,
    pub collective: Collective,
    pub dtype: Dtype,
    pub op: Option<Op>,
    /// GB/s, mean of out-of-place and in-place busbw over the included sizes.
    pub busbw: f64,
    /// Smallest size included (bytes); sizes below are latency-bound and left out.
    pub from_size: u64,
    /// Number of sizes included.
    pub points: usize,
}

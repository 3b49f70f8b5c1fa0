//! Validated, typed options: what the rest of the program reads. `cli.rs` parses; [`Options::from_cli`]
//! checks every value and turns it into this, naming the flag in every error.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use crate::cli::RunArgs;
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::net::spec::IfaceSpec;
use crate::reduce::{Dtype, Op};
use crate::sizes::{format_size, parse_size};

/// Most local ranks `--np` spawns; beyond this a launcher (mpirun, srun) is the right tool.
pub const MAX_NP: usize = 512;
/// Most TCP streams per peer (`--streams`).
pub const MAX_STREAMS: usize = 16;
/// Most pieces a staged call is split into (`--staging-pieces`): each adds a collective's latency.
pub const MAX_STAGING_PIECES: usize = 64;
/// Most RDMA queue pairs per peer (`--rdma-qps`).
pub const MAX_RDMA_QPS: usize = crate::transport::rdma::endpoint::MAX_QPS;
/// Longest polling phase of a TCP wait (`--spin`, microseconds).
pub const MAX_SPIN_US: u64 = 100_000;
/// Smallest and largest TCP send buffer (`--sndbuf`).
pub const MIN_SNDBUF: u64 = 4 << 10;
/// See [`MIN_SNDBUF`].
pub const MAX_SNDBUF: u64 = 256 << 20;
/// Most whole-sweep repeats (`--repeat`).
pub const MAX_REPEAT: u32 = 100;
/// Smallest pipeline chunk (`--chunk`): below this, per-chunk overhead dominates.
pub const MIN_CHUNK: u64 = 4 << 10;
/// Largest pipeline chunk (`--chunk`): above this there is no pipelining left to speak of.
pub const MAX_CHUNK: u64 = 64 << 20;
/// Longest `-T`: one week. Deadlines are `Instant + timeout`, which must not overflow.
pub const MAX_TIMEOUT_SECS: f64 = 7.0 * 24.0 * 3600.0;
/// Most points one sweep may have; more is almost surely a typo in `-i`, and would take days.
pub const MAX_POINTS: u64 = 10_000;

/// How the sweep steps from the minimum to the maximum size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Multiply by this factor (`-f`, >= 2).
    Factor(u64),
    /// Add this many bytes (`-i`, > 0).
    Bytes(u64),
}

/// The message sizes of a sweep, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SizeRange {
    pub min: u64,
    pub max: u64,
    pub step: Step,
}

impl SizeRange {
    /// Every size of the sweep, from `min` up to and including `max`.
    pub fn sizes(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut s = self.min;
        loop {
            out.push(s);
            let next = match self.step {
                Step::Factor(f) => s.saturating_mul(f),
                Step::Bytes(b) => s.saturating_add(b),
            };
            // A zero start with a factor would never grow; nccl-tests stops there too.
            if next <= s || next > self.max {
                break;
            }
            s = next;
        }
        out
    }
}

/// Which algorithm to run for the collectives that have a choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgoChoice {
    /// The latency algorithm below the threshold, the ring at and above it.
    Auto,
    /// Pipelined ring (chain for broadcast and reduce).
    Ring,
    /// Recursive doubling (all_reduce, reduce_scatter) or Bruck (all_gather).
    RecDoubling,
    /// Binomial tree (broadcast, reduce; all_reduce as reduce + broadcast).
    Tree,
    /// Rabenseifner's recursive halving + doubling (all_reduce).
    HalvingDoubling,
    /// Bruck's all_gather, on any rank count (auto runs it below 256 KiB).
    Bruck,
}

/// A path to measure (`--transport`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathKind {
    /// collbench's own TCP transport, on the interface a SPEC picks (`tcp@eth0`, `tcp@en*`, `tcp@ib0|eth0`;
    /// see [`IfaceSpec`]) or, without one, on `--iface` or the default choice ([`crate::net::choose`]).
    Tcp(Option<String>),
    /// The MPI library's own collectives (feature `mpi`).
    Mpi,
    /// collbench's own ibverbs transport on one device and port (feature `rdma`): `rdma@mlx5_0:1`.
    Rdma { device: String, port: u8 },
    /// NCCL's own collectives on device buffers (feature `cuda`, with `--memory cuda`).
    Nccl,
}

impl PathKind {
    /// Every kind of path, as `--transport all` expands (this build's).
    pub fn all() -> Vec<PathKind> {
        let mut v = vec![PathKind::Tcp(None)];
        if cfg!(feature = "mpi") {
            v.push(PathKind::Mpi);
        }
        v
    }

    /// Whether this is a TCP path.
    pub fn is_tcp(&self) -> bool {
        matches!(self, PathKind::Tcp(_))
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathKind::Tcp(None) => f.write_str("tcp"),
            PathKind::Tcp(Some(i)) => write!(f, "tcp@{i}"),
            PathKind::Mpi => f.write_str("mpi"),
            PathKind::Rdma { device, port } => write!(f, "rdma@{device}:{port}"),
            PathKind::Nccl => f.write_str("nccl"),
        }
    }
}

impl Serialize for PathKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for PathKind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let s = s.trim();
        match s.split_once('@') {
            Some(("tcp", "")) => Err(format!(
                "'{s}' names no interface; give tcp@IFACE with a name (tcp@eth0), a glob (tcp@en*) or a list tried \
                 in order (tcp@ib0|eth0)"
            )),
            // The SPEC, normalised, is the path's label on every host: ranks compare it.
            Some(("tcp", spec)) => IfaceSpec::parse(spec)
                .map(|p| PathKind::Tcp(Some(p.to_string())))
                .map_err(|e| format!("'{s}': {e}")),
            Some(("rdma", target)) => parse_rdma(target),
            Some((kind, _)) => Err(format!(
                "'{s}': only tcp (tcp@IFACE) and rdma (rdma@DEVICE[:PORT]) take a target; '{kind}@' is not a path \
                 this collbench knows"
            )),
            None => match s.to_ascii_lowercase().as_str() {
                "tcp" => Ok(PathKind::Tcp(None)),
                "mpi" if cfg!(feature = "mpi") => Ok(PathKind::Mpi),
                "mpi" => Err(
                    "this collbench was built without MPI; rebuild with `cargo build --release --features \
                              mpi` (needs an MPI library such as libopenmpi-dev)"
                        .into(),
                ),
                "nccl" if cfg!(feature = "cuda") => Ok(PathKind::Nccl),
                "nccl" => Err(crate::nccl::not_built_message()),
                "rdma" => Err(
                    "rdma needs a device: rdma@DEVICE[:PORT], e.g. rdma@mlx5_0:1 (list devices with \
                               `ibv_devices`)"
                        .into(),
                ),
                other => Err(format!(
                    "unknown transport '{other}' (expected tcp, tcp@IFACE, rdma@DEVICE[:PORT], mpi or nccl)"
                )),
            },
        }
    }
}

/// `DEVICE[:PORT]` of `rdma@DEVICE[:PORT]` (port 1 when not given); refused in a build without RDMA.
fn parse_rdma(target: &str) -> std::result::Result<PathKind, String> {
    let (device, port) = match target.split_once(':') {
        Some((d, p)) => (
            d,
            p.parse::<u8>()
                .ok()
                .filter(|&p| p >= 1)
                .ok_or_else(|| format!("'rdma@{target}': port '{p}' is not a port number (1 to 255)"))?,
        ),
        None => (target, 1),
    };
    if device.is_empty() || device.contains(|c: char| c.is_whitespace() || c == '/') {
        return Err(format!(
            "'rdma@{target}': expected rdma@DEVICE[:PORT] with a device name such as mlx5_0 (see `ibv_devices`)"
        ));
    }
    if !cfg!(feature = "rdma") {
        return Err(
            "this collbench was built without RDMA; rebuild with `cargo build --release --features rdma` \
                    (needs libibverbs-dev, librdmacm-dev, pkg-config and libclang-dev)"
                .into(),
        );
    }
    Ok(PathKind::Rdma {
        device: device.to_string(),
        port,
    })
}

/// Which rank's time the table reports (nccl-tests' `-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankStat {
    Rank0,
    Avg,
    Min,
    /// The slowest rank: a collective ends when its last rank ends. The default.
    Max,
}

impl AlgoChoice {
    /// The name `--algo` takes and messages print.
    pub const fn name(self) -> &'static str {
        match self {
            AlgoChoice::Auto => "auto",
            AlgoChoice::Ring => "ring",
            AlgoChoice::RecDoubling => "rd",
            AlgoChoice::Tree => "tree",
            AlgoChoice::HalvingDoubling => "rhd",
            AlgoChoice::Bruck => "bruck",
        }
    }
}

impl fmt::Display for AlgoChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AlgoChoice {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "auto" => AlgoChoice::Auto,
            "ring" => AlgoChoice::Ring,
            "rd" | "rec_doubling" | "recursive_doubling" => AlgoChoice::RecDoubling,
            "tree" => AlgoChoice::Tree,
            "rhd" | "halving_doubling" | "rabenseifner" => AlgoChoice::HalvingDoubling,
            "bruck" => AlgoChoice::Bruck,
            _ => {
                return Err(format!(
                    "unknown algorithm '{s}' (expected auto, ring, rd, rhd, bruck or tree)"
                ))
            }
        })
    }
}

impl RankStat {
    /// The name `-a` takes and messages print.
    pub const fn name(self) -> &'static str {
        match self {
            RankStat::Rank0 => "rank0",
            RankStat::Avg => "avg",
            RankStat::Min => "min",
            RankStat::Max => "max",
        }
    }
}

impl fmt::Display for RankStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RankStat {
    type Err = String;

    /// nccl-tests' numbers (0 = rank 0, 1 = avg, 2 = min, 3 = max) or their names.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "0" | "rank0" => RankStat::Rank0,
            "1" | "avg" => RankStat::Avg,
            "2" | "min" => RankStat::Min,
            "3" | "max" => RankStat::Max,
            _ => {
                return Err(format!(
                    "unknown statistic '{s}' (expected 0/rank0, 1/avg, 2/min or 3/max)"
                ))
            }
        })
    }
}

/// How the paths (and `--repeat` sweeps) take turns (`--interleave`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interleave {
    /// Each path sweeps every point, then the next path does.
    Sweep,
    /// Every path measures a point before any path moves on to the next point.
    Point,
}

impl std::str::FromStr for Interleave {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "sweep" => Ok(Interleave::Sweep),
            "point" => Ok(Interleave::Point),
            _ => Err(format!("unknown interleaving '{s}' (expected sweep or point)")),
        }
    }
}

/// Whether to draw a progress bar on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    /// Only when stderr is a terminal.
    Auto,
    Never,
}

/// Everything one run needs to know, validated.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// Local ranks to spawn when no launcher is present (`--np`).
    pub np: usize,
    pub sizes: SizeRange,
    /// Timed iterations per point (`-n`).
    pub iters: u32,
    /// Warm-up iterations per point (`-w`).
    pub warmup: u32,
    /// Whole sweeps of every path (`--repeat`), interleaved path by path, so the comparison's intervals
    /// also cover drift between sweeps, not only the noise within one point.
    pub repeat: u32,
    /// How the paths take turns within each `--repeat` sweep.
    pub interleave: Interleave,
    /// Data-check iterations per point (`-c`); 0 turns the check off.
    pub check_iters: u32,
    pub collectives: Vec<Collective>,
    pub dtypes: Vec<Dtype>,
    pub ops: Vec<Op>,
    /// Root rank of broadcast and reduce (`-r`).
    pub root: usize,
    pub algo: AlgoChoice,
    /// Paths to sweep in turn (`--transport`).
    pub transports: Vec<PathKind>,
    /// The path others are compared with (`--reference`, e.g. `tcp@eth0`).
    pub reference: Option<String>,
    /// GID table index of RDMA paths (`--gid-index`); `None`: chosen per link layer.
    pub gid_index: Option<u8>,
    /// Queue pairs per peer of RDMA paths (`--rdma-qps`); a message's fragments go round-robin over them.
    pub rdma_qps: usize,
    /// Line rate of every path in Gbit/s (`--line-rate`), for links whose speed the kernel does not know
    /// (virtual devices, shaped links).
    pub line_rate_gbit: Option<f64>,
    /// Message size in bytes at which `--algo auto` switches from the latency algorithm to the ring; `None`:
    /// each collective's own ([`crate::algorithm::Algo::default_threshold`]).
    pub algo_threshold: Option<u64>,
    pub rank_stat: RankStat,
    /// Show p50/p99 columns in the table (`--percentiles`).
    pub percentiles: bool,
    /// Deadline for any single wait in a collective (`-T`, seconds).
    pub timeout: Duration,
    /// Deadline of the bootstrap: reaching the rendezvous and every rank joining (`--bootstrap-timeout`).
    pub bootstrap_timeout: Duration,
    /// Deadline of opening and authenticating the data connections (`--connect-timeout`).
    pub connect_timeout: Duration,
    /// JSON output file (`-J`), nccl-tests layout plus collbench's fields.
    pub json: Option<PathBuf>,
    /// CSV output file (`--csv`).
    pub csv: Option<PathBuf>,
    /// Markdown output file (`--markdown`).
    pub markdown: Option<PathBuf>,
    /// Directory for charts drawn at the end of the run (`--plot`).
    pub plot: Option<PathBuf>,
    /// Ranks to predict at from the run's measurements (`--target-ranks`); `None`: no prediction.
    pub target_ranks: Option<usize>,
    /// Ranks per node of the two-level prediction (`--ranks-per-node`).
    pub ranks_per_node: Option<usize>,
    /// Overwrite existing output files (`--force`).
    pub force: bool,
    /// Interface SPEC the plain TCP path binds to (`--iface`, as in `tcp@SPEC`); `None`: the default choice
    /// ([`crate::net::choose`]). Interface names may differ between hosts, so ranks need not agree on it.
    pub iface: Option<String>,
    /// TCP streams per peer (`--streams`).
    pub streams: usize,
    /// How long a TCP wait polls before it sleeps (`--spin`).
    pub spin: Duration,
    /// Pipeline chunk size in bytes (`--chunk`).
    pub chunk_bytes: usize,
    /// SO_SNDBUF of every TCP data socket (`--sndbuf`); `None` leaves the kernel's send buffer autotuning.
    pub sndbuf: Option<usize>,
    /// Congestion control of every TCP data socket (`--tcp-congestion`); `None` keeps the host's default.
    pub tcp_congestion: Option<String>,
    pub progress: Progress,
    /// Testing aid (`--corrupt-rank`, hidden): this rank corrupts one output element in every data check.
    pub corrupt_rank: Option<usize>,
    /// Testing aid (`--fault`, hidden): one rank kills or stops itself at a named phase.
    pub fault: Option<crate::fault::Fault>,
    /// Where the collectives' buffers live (`--memory`); device memory is staged through pinned host memory.
    pub memory: crate::memory::MemoryKind,
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

impl Default for Options {
    fn default() -> Self {
        Options {
            np: 4,
            sizes: SizeRange {
                min: 8,
                max: 64 << 20,
                step: Step::Factor(2),
            },
            iters: 20,
            warmup: 5,
            repeat: 1,
            interleave: Interleave::Sweep,
            check_iters: 1,
            collectives: vec![Collective::AllReduce, Collective::AllGather],
            dtypes: vec![Dtype::Float],
            ops: vec![Op::Sum],
            root: 0,
            algo: AlgoChoice::Auto,
            transports: vec![PathKind::Tcp(None)],
            reference: None,
            gid_index: None,
            rdma_qps: 1,
            line_rate_gbit: None,
            algo_threshold: None,
            rank_stat: RankStat::Max,
            percentiles: false,
            timeout: Duration::from_secs(60),
            bootstrap_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(60),
            json: None,
            csv: None,
            markdown: None,
            plot: None,
            target_ranks: None,
            ranks_per_node: None,
            force: false,
            iface: None,
            streams: 1,
            // Measured (4 ranks, 2 cores, loopback): 20-100 us halve the 8 B all_reduce time against sleeping
            // at once; longer only burns CPU that ranks sharing the cores could use.
            spin: Duration::from_micros(50),
            chunk_bytes: 512 << 10,
            // Measured (4 ranks, 2 cores, loopback, 200 iterations a point): 512 KiB (the kernel doubles it)
            // cut all_gather 4-8 MiB times by 30-50% and all_reduce by 25-35% against autotuning, which lets
            // megabytes queue per socket and copies run out of cache; 128 KiB and 1 MiB were slower.
            sndbuf: Some(512 << 10),
            tcp_congestion: None,
            progress: Progress::Auto,
            corrupt_rank: None,
            fault: None,
            memory: crate::memory::MemoryKind::Host,
            device: None,
            staging_pieces: crate::engine::pieces::Plan::default().pieces,
            emulate_device: false,
            reduce_on_device: false,
        }
    }
}

/// `--memory`, refused with device memory on paths that cannot carry it: tcp and rdma paths stage device buffers
/// through host memory, nccl takes them directly, mpi hands host pointers to the MPI library.
fn memory_kind(value: &str, transports: &[PathKind]) -> Result<crate::memory::MemoryKind> {
    let kind: crate::memory::MemoryKind = value.parse().map_err(|m| Error::usage("--memory", m))?;
    if kind == crate::memory::MemoryKind::Host && transports.contains(&PathKind::Nccl) {
        return Err(Error::usage(
            "--transport",
            "nccl runs on device buffers: add --memory cuda (NCCL's collectives take GPU memory only)",
        ));
    }
    if kind == crate::memory::MemoryKind::Cuda && transports.contains(&PathKind::Mpi) {
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

/// Fields of [`Options`] that may differ between ranks: where output goes and how it looks, and `np`,
/// which a launcher overrides. Everything else must match on every rank (see [`Options::consensus_fields`]).
pub const LOCAL_ONLY_FIELDS: [&str; 10] = [
    "np",
    "json",
    "csv",
    "markdown",
    "plot",
    "target_ranks",
    "ranks_per_node",
    "force",
    "progress",
    "iface",
];

impl Options {
    /// Validates `collbench run`'s flags; every error names the flag and says what to do instead.
    pub fn from_cli(args: &RunArgs) -> Result<Options> {
        let sizes = size_range(args)?;
        if args.np == 0 || args.np > MAX_NP {
            return Err(Error::usage(
                "--np",
                format!(
                    "must be between 1 and {MAX_NP} local ranks (got {}); \
                     for more ranks use a launcher such as mpirun or srun",
                    args.np
                ),
            ));
        }
        if args.iters == 0 {
            return Err(Error::usage(
                "-n/--iters",
                "must be at least 1 (the timed iterations per point)",
            ));
        }
        if !(1..=MAX_REPEAT).contains(&args.repeat) {
            return Err(Error::usage(
                "--repeat",
                format!(
                    "must be between 1 and {MAX_REPEAT} whole sweeps (got {}); for more samples per point raise -n/--iters",
                    args.repeat
                ),
            ));
        }
        let collectives = parse_list("--collective", &args.collective, &Collective::ALL)?;
        let dtypes = parse_list("-d/--datatype", &args.datatype, &Dtype::ALL)?;
        let ops = parse_list("-o/--op", &args.op, &Op::ALL)?;
        let rank_stat = args.average.parse().map_err(|e| Error::usage("-a/--average", e))?;
        let algo = args.link.algo.parse().map_err(|e| Error::usage("--algo", e))?;
        // `all` means every kind of path this build has.
        let transports = parse_list("--transport", &args.link.transport, &PathKind::all())?;
        let algo_threshold = match args.algo_threshold.trim() {
            "auto" => None,
            t => Some(size_flag("--algo-threshold", t)?),
        };
        let staging_pieces = args.staging_pieces;
        if !(1..=MAX_STAGING_PIECES).contains(&staging_pieces) {
            return Err(Error::usage(
                "--staging-pieces",
                format!(
                    "must be between 1 (no overlap) and {MAX_STAGING_PIECES} pieces per call (got {staging_pieces})"
                ),
            ));
        }
        if !(1..=MAX_STREAMS).contains(&args.link.streams) {
            return Err(Error::usage(
                "--streams",
                format!(
                    "must be between 1 and {MAX_STREAMS} TCP streams per peer (got {})",
                    args.link.streams
                ),
            ));
        }
        if args.link.spin > MAX_SPIN_US {
            return Err(Error::usage(
                "--spin",
                format!(
                    "must be between 0 and {MAX_SPIN_US} microseconds (got {}); 0 sleeps at once",
                    args.link.spin
                ),
            ));
        }
        if !(1..=MAX_RDMA_QPS).contains(&args.link.rdma_qps) {
            return Err(Error::usage(
                "--rdma-qps",
                format!(
                    "must be between 1 and {MAX_RDMA_QPS} queue pairs per peer (got {})",
                    args.link.rdma_qps
                ),
            ));
        }
        let chunk = size_flag("--chunk", &args.link.chunk)?;
        if !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk) || chunk % 16 != 0 {
            return Err(Error::usage(
                "--chunk",
                format!(
                    "must be between {} and {} and a multiple of 16 bytes, \
                     so chunks hold whole elements of every dtype (got {})",
                    format_size(MIN_CHUNK),
                    format_size(MAX_CHUNK),
                    format_size(chunk)
                ),
            ));
        }
        let sndbuf = sndbuf_flag(&args.link.sndbuf)?;
        let tcp_congestion = match &args.link.tcp_congestion {
            Some(name) => {
                crate::transport::tcp::congestion::probe(name).map_err(|why| Error::usage("--tcp-congestion", why))?;
                Some(name.clone())
            }
            None => None,
        };
        let target_ranks = target_ranks(args)?;
        let memory = memory_kind(&args.memory, &transports)?;
        if args.emulate_device && (memory != crate::memory::MemoryKind::Cuda || transports.contains(&PathKind::Nccl)) {
            return Err(Error::usage(
                "--emulate-device",
                "a testing aid for the staged path: it needs --memory cuda and tcp or rdma paths only (nccl needs \
                 a real GPU)",
            ));
        }
        let reduce_on_device = match args.reduce_on.to_ascii_lowercase().as_str() {
            "host" => false,
            "device" if memory == crate::memory::MemoryKind::Cuda => true,
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
        Ok(Options {
            np: args.np,
            sizes,
            iters: args.iters,
            warmup: args.warmup_iters,
            repeat: args.repeat,
            interleave: args.interleave.parse().map_err(|e| Error::usage("--interleave", e))?,
            check_iters: args.check,
            collectives,
            dtypes,
            ops,
            root: args.root,
            algo,
            transports,
            reference: args.reference.clone(),
            gid_index: args.link.gid_index,
            rdma_qps: args.link.rdma_qps,
            line_rate_gbit: match args.link.line_rate {
                Some(r) if !(r.is_finite() && r > 0.0) => {
                    return Err(Error::usage(
                        "--line-rate",
                        format!("must be a positive rate in Gbit/s (got {r})"),
                    ))
                }
                r => r,
            },
            algo_threshold,
            rank_stat,
            percentiles: args.percentiles,
            timeout: timeout("-T/--timeout", args.deadlines.timeout)?,
            bootstrap_timeout: timeout("--bootstrap-timeout", args.deadlines.bootstrap_timeout)?,
            connect_timeout: timeout("--connect-timeout", args.deadlines.connect_timeout)?,
            json: args.output_file.clone(),
            csv: args.csv.clone(),
            markdown: args.markdown.clone(),
            plot: args.plot.clone(),
            target_ranks,
            ranks_per_node: args.ranks_per_node,
            force: args.force,
            iface: iface_spec(args.link.iface.as_deref())?,
            streams: args.link.streams,
            spin: Duration::from_micros(args.link.spin),
            // Bounded by MAX_CHUNK above, so it fits any usize.
            chunk_bytes: chunk as usize,
            sndbuf,
            tcp_congestion,
            progress: if args.no_progress {
                Progress::Never
            } else {
                Progress::Auto
            },
            corrupt_rank: args.corrupt_rank,
            fault: args
                .fault
                .as_deref()
                .map(|f| f.parse().map_err(|e| Error::usage("--fault", e)))
                .transpose()?,
            memory,
            device: args.device.clone(),
            staging_pieces,
            emulate_device: args.emulate_device,
            reduce_on_device,
        })
        .and_then(|o| o.check_outputs())
    }

    /// Bytes one rank needs for its buffers at the largest size: send + receive + 2 pipeline chunks of
    /// scratch, the most over the selected collectives and dtypes (their rounding differs slightly).
    pub fn memory_needed(&self) -> u64 {
        let max = usize::try_from(self.sizes.max).unwrap_or(usize::MAX);
        let scratch = 2 * self.chunk_bytes as u64;
        let mut most = 0u64;
        for &c in &self.collectives {
            for &d in &self.dtypes {
                let l = c.layout(max, d.size(), self.np);
                let mut bytes = (l.send_count as u64 + l.recv_count as u64) * l.elem_size as u64;
                // Device memory keeps host copies twice: the pinned staging, and the buffers the check reads.
                if self.memory == crate::memory::MemoryKind::Cuda {
                    bytes = bytes.saturating_mul(2);
                }
                // Reductions on the device stage through three more host buffers of about the larger size.
                if self.reduce_on_device && c.reduces() {
                    let larger = l.send_count.max(l.recv_count) as u64 * l.elem_size as u64;
                    bytes = bytes.saturating_add(larger.saturating_mul(3));
                }
                most = most.max(bytes.saturating_add(scratch));
            }
        }
        most
    }

    /// Fails with a usage error naming `-e` when `nranks_on_this_host` ranks would not fit in `available`.
    pub fn check_memory(&self, nranks_on_this_host: usize, available: u64) -> Result<()> {
        let per_rank = self.memory_needed();
        let total = per_rank.saturating_mul(nranks_on_this_host as u64);
        if total <= available {
            return Ok(());
        }
        Err(Error::usage(
            "-e/--maxbytes",
            format!(
                "a sweep up to {} needs {} per rank x {} local ranks = {} \
                 but the machine has {} available; lower -e or --np",
                format_size(self.sizes.max),
                format_size(per_rank),
                nranks_on_this_host,
                format_size(total),
                format_size(available)
            ),
        ))
    }

    /// Memory the kernel says can be allocated without swapping (`MemAvailable` in /proc/meminfo).
    pub fn mem_available() -> Option<u64> {
        parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }

    /// The options every rank must agree on, as a JSON object: all fields but [`LOCAL_ONLY_FIELDS`].
    pub fn consensus_fields(&self) -> serde_json::Value {
        // Serialise everything and drop the local fields, so a field added later is compared by default;
        // the paths are cleared first because a non-UTF-8 path would not serialise.
        let mut o = self.clone();
        o.json = None;
        o.csv = None;
        let mut v = serde_json::to_value(&o).expect("Options serialises to JSON: no maps, no non-UTF-8 paths");
        if let Some(map) = v.as_object_mut() {
            for f in LOCAL_ONLY_FIELDS {
                map.remove(f);
            }
        }
        v
    }

    /// Rejects one file named for two outputs: the second writer would destroy the first's results.
    fn check_outputs(self) -> Result<Options> {
        if let (Some(j), Some(c)) = (&self.json, &self.csv) {
            if j == c {
                return Err(Error::usage(
                    "--csv",
                    format!(
                        "'{}' is also the JSON output (-J); give the two outputs different files",
                        c.display()
                    ),
                ));
            }
        }
        if let Some(m) = &self.markdown {
            if self.json.as_ref() == Some(m) || self.csv.as_ref() == Some(m) {
                return Err(Error::usage(
                    "--markdown",
                    format!(
                        "'{}' is also another output (-J or --csv); give each output its own file",
                        m.display()
                    ),
                ));
            }
        }
        Ok(self)
    }
}

/// Parses one size flag, naming it in the error.
fn size_flag(flag: &str, value: &str) -> Result<u64> {
    parse_size(value).map_err(|e| Error::usage(flag, e))
}

/// `--sndbuf`: `auto` (the kernel's autotuning) or a size within [`MIN_SNDBUF`]..=[`MAX_SNDBUF`].
fn sndbuf_flag(value: &str) -> Result<Option<usize>> {
    if value.trim() == "auto" {
        return Ok(None);
    }
    let b = size_flag("--sndbuf", value)?;
    if !(MIN_SNDBUF..=MAX_SNDBUF).contains(&b) {
        return Err(Error::usage(
            "--sndbuf",
            format!(
                "must be auto or between {} and {} (got {})",
                format_size(MIN_SNDBUF),
                format_size(MAX_SNDBUF),
                format_size(b)
            ),
        ));
    }
    // Bounded by MAX_SNDBUF, so it fits any usize.
    Ok(Some(b as usize))
}

/// `-b`, `-e`, `-f` and `-i` as one sweep.
fn size_range(args: &RunArgs) -> Result<SizeRange> {
    let min = size_flag("-b/--minbytes", &args.minbytes)?;
    let max = size_flag("-e/--maxbytes", &args.maxbytes)?;
    if min > max {
        return Err(Error::usage(
            "-b/--minbytes",
            format!(
                "the smallest size ({}) is larger than the largest (-e {}); lower -b or raise -e",
                format_size(min),
                format_size(max)
            ),
        ));
    }
    let step = match (args.stepfactor, &args.stepbytes) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "-f/--stepfactor",
                "cannot be used with -i/--stepbytes; multiply the size (-f) or add to it (-i), not both",
            ))
        }
        (_, Some(bytes)) => Step::Bytes(size_flag("-i/--stepbytes", bytes)?),
        (Some(f), None) => Step::Factor(f),
        (None, None) => Options::default().sizes.step,
    };
    match step {
        Step::Factor(f) if f < 2 => {
            return Err(Error::usage(
                "-f/--stepfactor",
                format!("must be at least 2 (got {f}); to step by a fixed number of bytes use -i"),
            ))
        }
        // nccl-tests loops forever here; a sweep from 0 only grows by adding.
        Step::Factor(_) if min == 0 && max > 0 => {
            return Err(Error::usage(
                "-b/--minbytes",
                "0 never grows when multiplied by -f; start at 1 or more, or step by bytes with -i",
            ))
        }
        Step::Bytes(0) => {
            return Err(Error::usage(
                "-i/--stepbytes",
                "must be more than 0 bytes; or multiply with -f instead",
            ))
        }
        Step::Bytes(b) if (max - min) / b >= MAX_POINTS => {
            return Err(Error::usage(
                "-i/--stepbytes",
                format!(
                "stepping from {} to {} by {} gives more than {MAX_POINTS} sizes; raise -i, narrow -b/-e, or use -f",
                format_size(min),
                format_size(max),
                format_size(b)
            ),
            ))
        }
        _ => {}
    }
    Ok(SizeRange { min, max, step })
}

/// A comma list of names (already split by clap) or `all`, duplicates dropped, order kept.
fn parse_list<T>(flag: &str, items: &[String], all: &[T]) -> Result<Vec<T>>
where
    T: FromStr<Err = String> + Clone + PartialEq,
{
    if items.is_empty() {
        return Err(Error::usage(flag, "give at least one name, or all"));
    }
    let mut out = Vec::new();
    for item in items.iter().map(|i| i.trim()) {
        if item.is_empty() {
            return Err(Error::usage(
                flag,
                "has an empty name in its list; separate names with single commas",
            ));
        }
        let parsed = if item.eq_ignore_ascii_case("all") {
            all.to_vec()
        } else {
            vec![item.parse().map_err(|e| Error::usage(flag, e))?]
        };
        for t in parsed {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// `--target-ranks` and `--ranks-per-node`: a rank count that moves data, and a node size that divides it.
fn target_ranks(args: &RunArgs) -> Result<Option<usize>> {
    match (args.target_ranks, args.ranks_per_node) {
        (Some(n), _) if n < 2 => Err(Error::usage(
            "--target-ranks",
            format!("{n} ranks move nothing between ranks; give 2 or more"),
        )),
        (None, Some(_)) => Err(Error::usage(
            "--ranks-per-node",
            "only shapes a prediction; give --target-ranks N with it",
        )),
        (Some(n), Some(g)) if g == 0 || n % g != 0 => Err(Error::usage(
            "--ranks-per-node",
            format!("{g} does not divide --target-ranks {n} into whole nodes; give a divisor of it"),
        )),
        (n, _) => Ok(n),
    }
}

/// The `--iface` SPEC in its canonical form, or the error naming the flag.
pub(crate) fn iface_spec(spec: Option<&str>) -> Result<Option<String>> {
    spec.map(|i| {
        IfaceSpec::parse(i)
            .map(|p| p.to_string())
            .map_err(|e| Error::usage("--iface", e))
    })
    .transpose()
}

/// A timeout flag as a deadline: positive, finite and at most [`MAX_TIMEOUT_SECS`].
pub(crate) fn timeout(flag: &str, secs: f64) -> Result<Duration> {
    if !(secs > 0.0 && secs <= MAX_TIMEOUT_SECS) {
        return Err(Error::usage(
            flag,
            format!(
                "must be more than 0 and at most {MAX_TIMEOUT_SECS} seconds (got {secs}); \
                 every wait has a deadline, so pick a generous one rather than none"
            ),
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `MemAvailable` from the text of /proc/meminfo, in bytes.
fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    // The kernel always prints kB (meaning KiB); anything else is not a meminfo we understand.
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(argv: &[&str]) -> RunArgs {
        let full = ["collbench", "run"].iter().chain(argv);
        match Cli::try_parse_from(full)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
            .command
        {
            Command::Run(r) => *r,
            other => panic!("{argv:?} parsed as {other:?}"),
        }
    }

    fn opts(argv: &[&str]) -> Options {
        Options::from_cli(&args(argv)).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
    }

    /// Asserts a usage error naming `flag`, whose message contains `text`; returns the message.
    fn usage(argv: &[&str], flag: &str, text: &str) -> String {
        let err = Options::from_cli(&args(argv)).expect_err(&format!("{argv:?} should fail"));
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE, "{argv:?}: {err}");
        let shown = err.to_string();
        match &err {
            Error::Usage { flag: f, message } => {
                assert_eq!(f, flag, "{argv:?}: {shown}");
                assert!(message.contains(text), "{argv:?}: {shown}");
            }
            other => panic!("{argv:?}: not a usage error: {other}"),
        }
        assert!(shown.contains(flag), "{shown}");
        shown
    }

    fn json(o: &Options) -> serde_json::Value {
        serde_json::to_value(o).unwrap()
    }

    #[test]
    fn interface_specs_are_checked_and_normalised() {
        assert_eq!(opts(&["--iface", "ib0 |en*"]).iface.as_deref(), Some("ib0|en*"));
        usage(&["--iface", "ib0|"], "--iface", "empty alternative");
        usage(&["--transport", "tcp,tcp@a||b"], "--transport", "empty alternative");
        assert_eq!(
            opts(&["--transport", "tcp@ib?|eth0"]).transports,
            [PathKind::Tcp(Some("ib?|eth0".into()))]
        );
    }

    #[test]
    fn prediction_flags_are_checked() {
        let o = opts(&["--target-ranks", "64", "--ranks-per-node", "8"]);
        assert_eq!((o.target_ranks, o.ranks_per_node), (Some(64), Some(8)));
        usage(&["--target-ranks", "1"], "--target-ranks", "2 or more");
        usage(&["--ranks-per-node", "8"], "--ranks-per-node", "--target-ranks");
        usage(
            &["--target-ranks", "10", "--ranks-per-node", "4"],
            "--ranks-per-node",
            "divisor",
        );
        usage(
            &["--target-ranks", "10", "--ranks-per-node", "0"],
            "--ranks-per-node",
            "divide",
        );
    }

    #[test]
    fn no_flags_give_the_defaults() {
        assert_eq!(json(&opts(&[])), json(&Options::default()));
    }

    #[test]
    fn every_flag_reaches_its_field() {
        let o = opts(&[
            "-b",
            "1K",
            "-e",
            "1M",
            "-f",
            "4",
            "-n",
            "7",
            "-w",
            "0",
            "-c",
            "0",
            "-o",
            "max,min",
            "-d",
            "half",
            "-r",
            "3",
            "-a",
            "rank0",
            "-T",
            "0.5",
            "-J",
            "a.json",
            "--csv",
            "a.csv",
            "--force",
            "--collective",
            "broadcast",
            "--np",
            "8",
            "--algo",
            "rd",
            "--algo-threshold",
            "1M",
            "--spin",
            "0",
            "--streams",
            "4",
            "--rdma-qps",
            "4",
            "--chunk",
            "1M",
            "--percentiles",
            "--no-progress",
        ]);
        assert_eq!(
            o.sizes,
            SizeRange {
                min: 1024,
                max: 1 << 20,
                step: Step::Factor(4)
            }
        );
        assert_eq!((o.iters, o.warmup, o.check_iters, o.root, o.np), (7, 0, 0, 3, 8));
        assert_eq!(
            (o.ops.clone(), o.dtypes.clone()),
            (vec![Op::Max, Op::Min], vec![Dtype::Half])
        );
        assert_eq!(
            (o.rank_stat, o.algo, o.algo_threshold),
            (RankStat::Rank0, AlgoChoice::RecDoubling, Some(1 << 20))
        );
        assert_eq!(o.timeout, Duration::from_millis(500));
        assert_eq!(
            (o.json.unwrap(), o.csv.unwrap()),
            (PathBuf::from("a.json"), PathBuf::from("a.csv"))
        );
        assert_eq!(o.collectives, [Collective::Broadcast]);
        assert!(o.force && o.percentiles);
        assert_eq!((o.streams, o.chunk_bytes, o.progress), (4, 1 << 20, Progress::Never));
        assert_eq!(o.rdma_qps, 4);
        assert_eq!(o.spin, Duration::ZERO);
    }

    #[test]
    fn sndbuf_is_a_size_or_auto_and_defaults_to_the_measured_512k() {
        assert_eq!(opts(&[]).sndbuf, Some(512 << 10));
        assert_eq!(opts(&["--sndbuf", "auto"]).sndbuf, None);
        assert_eq!(opts(&["--sndbuf", "2M"]).sndbuf, Some(2 << 20));
        usage(
            &["--sndbuf", "1K"],
            "--sndbuf",
            "must be auto or between 4 KiB and 256 MiB",
        );
        usage(&["--sndbuf", "1G"], "--sndbuf", "got 1 GiB");
        usage(&["--sndbuf", "lots"], "--sndbuf", "");
    }

    #[test]
    fn tcp_congestion_is_tried_on_this_host_before_anything_connects() {
        assert_eq!(opts(&[]).tcp_congestion, None, "the host's default unless asked");
        assert_eq!(
            opts(&["--tcp-congestion", "reno"]).tcp_congestion.as_deref(),
            Some("reno")
        );
        usage(
            &["--tcp-congestion", "nosuchcc"],
            "--tcp-congestion",
            "this host has no congestion control",
        );
        usage(
            &["--tcp-congestion", "Re No"],
            "--tcp-congestion",
            "not a congestion control name",
        );
        // Every rank must use the same: it is one of the options the ranks compare.
        assert_eq!(
            opts(&["--tcp-congestion", "reno"]).consensus_fields()["tcp_congestion"],
            serde_json::json!("reno")
        );
    }

    #[test]
    fn all_expands_and_lists_keep_order_without_duplicates() {
        assert_eq!(opts(&["-d", "all"]).dtypes, Dtype::ALL);
        assert_eq!(opts(&["-o", "all"]).ops, Op::ALL);
        assert_eq!(opts(&["--collective", "all"]).collectives, Collective::ALL);
        assert_eq!(opts(&["-d", "ALL"]).dtypes.len(), 10);
        assert_eq!(opts(&["-o", "max,sum,max", "-o", "SUM"]).ops, [Op::Max, Op::Sum]);
        assert_eq!(opts(&["-d", "bf16, fp32"]).dtypes, [Dtype::Bfloat16, Dtype::Float]);
    }

    #[test]
    fn factor_and_byte_steps_give_the_expected_sizes() {
        let k = 1024;
        assert_eq!(
            opts(&["-b", "1K", "-e", "1M", "-f", "4"]).sizes.sizes(),
            [k, 4 * k, 16 * k, 64 * k, 256 * k, k * k]
        );
        assert_eq!(
            opts(&["-b", "1K", "-e", "4K", "-i", "1K"]).sizes.sizes(),
            [k, 2 * k, 3 * k, 4 * k]
        );
        assert_eq!(
            opts(&["-b", "0", "-e", "1K", "-i", "512"]).sizes.sizes(),
            [0, 512, 1024]
        );
        // The maximum is an upper bound, not a point that must be hit.
        assert_eq!(
            opts(&["-b", "1K", "-e", "3.5K", "-i", "1K"]).sizes.sizes(),
            [k, 2 * k, 3 * k]
        );
        assert_eq!(opts(&["-b", "8", "-e", "8"]).sizes.sizes(), [8]);
        assert_eq!(opts(&["-b", "0", "-e", "0"]).sizes.sizes(), [0]);
        assert_eq!(opts(&[]).sizes.sizes().len(), 24);
    }

    #[test]
    fn bad_sizes_and_steps_name_their_flag() {
        usage(&["-b", "1Q"], "-b/--minbytes", "unknown unit 'Q'");
        usage(&["--minbytes=-1"], "-b/--minbytes", "negative");
        usage(&["-b", "-1"], "-b/--minbytes", "negative");
        usage(&["-e", ""], "-e/--maxbytes", "empty");
        usage(&["-e", "1.3K"], "-e/--maxbytes", "whole number of bytes");
        usage(&["-e", "16777216T"], "-e/--maxbytes", "too large");
        usage(&["-b", "1M", "-e", "1K"], "-b/--minbytes", "lower -b or raise -e");
        usage(&["-f", "1"], "-f/--stepfactor", "at least 2");
        usage(&["-f", "0"], "-f/--stepfactor", "at least 2");
        usage(&["-b", "0"], "-b/--minbytes", "-i");
        usage(&["-i", "0"], "-i/--stepbytes", "more than 0");
        usage(&["-i", "1X"], "-i/--stepbytes", "unknown unit");
        usage(&["-f", "2", "-i", "1K"], "-f/--stepfactor", "-i/--stepbytes");
        usage(&["-b", "1", "-e", "1G", "-i", "1"], "-i/--stepbytes", "10000");
        usage(&["--algo-threshold", "lots"], "--algo-threshold", "not a size");
    }

    #[test]
    fn interleave_defaults_to_whole_sweeps_and_takes_point() {
        assert_eq!(opts(&[]).interleave, Interleave::Sweep);
        assert_eq!(opts(&["--interleave", "point"]).interleave, Interleave::Point);
        assert_eq!(opts(&["--interleave", "sweep"]).interleave, Interleave::Sweep);
        // Every rank must take the same turns: the choice is part of what ranks agree on.
        let c = opts(&["--interleave", "point"]).consensus_fields();
        assert_eq!(c["interleave"], "point");
    }

    #[test]
    fn bad_counts_and_names_name_their_flag() {
        usage(&["--np", "0"], "--np", "between 1 and 512");
        usage(&["--np", "513"], "--np", "launcher");
        usage(&["-n", "0"], "-n/--iters", "at least 1");
        usage(&["-d", "float8"], "-d/--datatype", "bfloat16");
        usage(&["-d", "float,,half"], "-d/--datatype", "empty");
        usage(&["-o", "xor"], "-o/--op", "sum, prod, max, min, avg");
        usage(&["--collective", "allfoo"], "--collective", "all_reduce, all_gather");
        usage(&["-a", "4"], "-a/--average", "3/max");
        usage(&["-a", "median"], "-a/--average", "rank0");
        usage(&["--algo", "fast"], "--algo", "auto, ring, rd, rhd, bruck or tree");
        usage(&["--streams", "0"], "--streams", "between 1 and 16");
        usage(&["--streams", "17"], "--streams", "between 1 and 16");
        usage(&["--spin", "100001"], "--spin", "between 0 and 100000 microseconds");
        usage(&["--rdma-qps", "0"], "--rdma-qps", "between 1 and 16 queue pairs");
        usage(&["--rdma-qps", "17"], "--rdma-qps", "between 1 and 16 queue pairs");
        usage(&["--chunk", "1K"], "--chunk", "between 4 KiB and 64 MiB");
        usage(&["--chunk", "128M"], "--chunk", "between 4 KiB and 64 MiB");
        usage(&["--chunk", "4100"], "--chunk", "multiple of 16");
        usage(&["--chunk", "1Q"], "--chunk", "unknown unit");
        usage(&["-T", "0"], "-T/--timeout", "more than 0");
        usage(&["-T", "-1"], "-T/--timeout", "more than 0");
        usage(&["-T", "inf"], "-T/--timeout", "at most");
        usage(&["-T", "NaN"], "-T/--timeout", "more than 0");
        usage(&["-T", "1e9"], "-T/--timeout", "at most");
        usage(&["--bootstrap-timeout", "0"], "--bootstrap-timeout", "more than 0");
        usage(&["--connect-timeout", "inf"], "--connect-timeout", "at most");
        usage(&["--fault", "1:lunch:kill"], "--fault", "phase");
        usage(&["--interleave", "zigzag"], "--interleave", "sweep or point");
        usage(&["-J", "x", "--csv", "x"], "--csv", "-J");
    }

    #[test]
    fn accepted_edges() {
        // The root is checked against the world size later; here it only has to parse.
        assert_eq!(opts(&["-r", "1000"]).root, 1000);
        assert_eq!(opts(&["--np", "512", "--streams", "16", "--chunk", "64M"]).np, 512);
        assert_eq!(opts(&["--chunk", "4K"]).chunk_bytes, 4096);
        // Sizes need not be a multiple of 16: each collective rounds them itself.
        assert_eq!(opts(&["-b", "7", "-e", "1001"]).sizes.max, 1001);
        for (a, s) in [
            ("0", RankStat::Rank0),
            ("1", RankStat::Avg),
            ("2", RankStat::Min),
            ("3", RankStat::Max),
        ] {
            assert_eq!(opts(&["-a", a]).rank_stat, s);
            assert_eq!(opts(&["-a", s.name()]).rank_stat, s);
        }
        for a in [
            AlgoChoice::Auto,
            AlgoChoice::Ring,
            AlgoChoice::RecDoubling,
            AlgoChoice::Tree,
            AlgoChoice::HalvingDoubling,
            AlgoChoice::Bruck,
        ] {
            assert_eq!(opts(&["--algo", a.name()]).algo, a);
        }
    }

    #[test]
    fn memory_needed_counts_both_buffers_and_scratch() {
        let o = Options::default();
        // all_reduce at 64 MiB: 64 MiB send + 64 MiB receive; all_gather at 4 ranks needs 16 + 64 MiB.
        let scratch = 2 * o.chunk_bytes as u64;
        assert_eq!(o.memory_needed(), (128 << 20) + scratch);
        let ag = Options {
            collectives: vec![Collective::AllGather],
            ..Options::default()
        };
        assert_eq!(ag.memory_needed(), (80 << 20) + scratch);
        let rs = Options {
            collectives: vec![Collective::ReduceScatter],
            np: 3,
            ..Options::default()
        };
        // 64 MiB of floats over 3 ranks: 5592405 per rank, rounded down to a multiple of 4 elements.
        let per = 5_592_404u64 * 4;
        assert_eq!(rs.memory_needed(), per * 3 + per + scratch);
        // The largest dtype rounding wins; with all dtypes nothing exceeds twice the size plus scratch.
        let all = Options {
            collectives: Collective::ALL.to_vec(),
            dtypes: Dtype::ALL.to_vec(),
            ..Options::default()
        };
        assert_eq!(all.memory_needed(), (128 << 20) + scratch);
    }

    #[test]
    fn check_memory_names_maxbytes_and_the_numbers() {
        let o = Options::default();
        let need = o.memory_needed();
        assert!(o.check_memory(4, 4 * need).is_ok());
        let err = o.check_memory(4, 4 * need - 1).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
        let msg = err.to_string();
        for part in [
            "-e/--maxbytes",
            "129 MiB per rank x 4 local ranks = 516 MiB",
            "lower -e or --np",
            "64 MiB",
        ] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        assert!(o.check_memory(usize::MAX, u64::MAX - 1).is_err());
    }

    #[test]
    fn meminfo_parses_mem_available() {
        let text = "MemTotal:       16318412 kB\nMemFree:  1 kB\nMemAvailable:   12345678 kB\n";
        assert_eq!(parse_meminfo(text), Some(12_345_678 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: x kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: 5 MB\n"), None);
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(Options::mem_available().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn consensus_ignores_local_fields_only() {
        let base = Options::default();
        let all = json(&base);
        for f in LOCAL_ONLY_FIELDS {
            // A renamed field must not silently turn into a compared one.
            assert!(all.get(f).is_some(), "{f} is not a field of Options");
            assert!(base.consensus_fields().get(f).is_none(), "{f}");
        }
        let local = Options {
            np: 9,
            json: Some(PathBuf::from("r.json")),
            csv: Some(PathBuf::from("r.csv")),
            force: true,
            progress: Progress::Never,
            ..Options::default()
        };
        assert_eq!(local.consensus_fields(), base.consensus_fields());
        let c = base.consensus_fields();
        assert_eq!(
            c.as_object().unwrap().len(),
            all.as_object().unwrap().len() - LOCAL_ONLY_FIELDS.len()
        );
        assert_eq!(c["iters"], 20);
        assert_eq!(c["dtypes"], serde_json::json!(["float"]));
        let differs = |o: Options| o.consensus_fields() != c;
        assert!(differs(Options {
            iters: 21,
            ..Options::default()
        }));
        assert!(differs(Options {
            root: 1,
            ..Options::default()
        }));
        assert!(differs(Options {
            timeout: Duration::from_secs(61),
            ..Options::default()
        }));
        assert!(differs(Options {
            sizes: SizeRange {
                step: Step::Bytes(2),
                ..base.sizes
            },
            ..Options::default()
        }));
    }

    #[test]
    fn reductions_on_the_device_need_device_memory_and_count_their_staging() {
        assert!(!opts(&[]).reduce_on_device);
        let host = opts(&["--memory", "cuda", "--transport", "tcp", "-e", "64M"]);
        let dev = opts(&[
            "--memory",
            "cuda",
            "--transport",
            "tcp",
            "-e",
            "64M",
            "--reduce-on",
            "device",
        ]);
        assert!(dev.reduce_on_device && !host.reduce_on_device);
        assert_eq!(
            dev.consensus_fields()["reduce_on_device"],
            true,
            "ranks must agree on it"
        );
        assert!(
            dev.memory_needed() >= host.memory_needed() + 3 * (64 << 20),
            "three more staging buffers"
        );
        usage(&["--reduce-on", "device"], "--reduce-on", "add --memory cuda");
        usage(&["--reduce-on", "gpu"], "--reduce-on", "expected host or device");
    }

    #[test]
    fn staging_pieces_are_bounded_and_agreed_by_every_rank() {
        assert_eq!(opts(&[]).staging_pieces, 4);
        let o = opts(&["--staging-pieces", "1"]);
        assert_eq!(o.staging_pieces, 1);
        assert_eq!(
            o.consensus_fields()["staging_pieces"],
            1,
            "ranks must split calls alike"
        );
        usage(
            &["--staging-pieces", "0"],
            "--staging-pieces",
            "between 1 (no overlap) and 64",
        );
        usage(&["--staging-pieces", "65"], "--staging-pieces", "(got 65)");
    }

    #[test]
    fn memory_and_device_flags_reach_the_options_and_cuda_stays_off_mpi() {
        let o = opts(&[]);
        assert_eq!((o.memory, o.device.as_deref()), (crate::memory::MemoryKind::Host, None));
        assert_eq!(serde_json::to_value(&o).unwrap()["memory"], "host");
        let o = opts(&["--memory", "cuda", "--device", "1", "--transport", "tcp,tcp@lo"]);
        assert_eq!(
            (o.memory, o.device.as_deref()),
            (crate::memory::MemoryKind::Cuda, Some("1"))
        );
        assert_eq!(o.consensus_fields()["memory"], "cuda", "ranks must agree on the memory");
        usage(&["--memory", "gpu"], "--memory", "expected host or cuda");
        let kinds = [PathKind::Tcp(None), PathKind::Mpi];
        let e = memory_kind("cuda", &kinds).unwrap_err().to_string();
        assert!(
            e.starts_with("--memory:") && e.contains("not on mpi") && e.contains("drop mpi"),
            "{e}"
        );
        // rdma paths stage device buffers like tcp paths.
        let rdma = PathKind::Rdma {
            device: "mlx5_0".into(),
            port: 1,
        };
        assert_eq!(
            memory_kind("cuda", &[PathKind::Tcp(None), rdma]).unwrap(),
            crate::memory::MemoryKind::Cuda
        );
        assert_eq!(memory_kind("host", &kinds).unwrap(), crate::memory::MemoryKind::Host);
        // nccl takes device memory and nothing else.
        let e = memory_kind("host", &[PathKind::Tcp(None), PathKind::Nccl])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--transport:") && e.contains("--memory cuda"), "{e}");
        assert_eq!(
            memory_kind("cuda", &[PathKind::Tcp(None), PathKind::Nccl]).unwrap(),
            crate::memory::MemoryKind::Cuda
        );
        let host = opts(&["-e", "1M"]).memory_needed();
        let cuda = opts(&["-e", "1M", "--memory", "cuda"]).memory_needed();
        assert!(cuda > host, "staging and check buffers count twice: {cuda} vs {host}");
    }

    #[test]
    fn cuda_memory_runs_on_rdma_paths_in_a_build_with_rdma() {
        let argv = ["--memory", "cuda", "--transport", "tcp,rdma@mlx5_0:1"];
        if cfg!(feature = "rdma") {
            let o = opts(&argv);
            assert_eq!(o.memory, crate::memory::MemoryKind::Cuda);
            assert!(
                o.transports.iter().any(|p| matches!(p, PathKind::Rdma { .. })),
                "{:?}",
                o.transports
            );
        } else {
            // Without the feature the path itself is refused, naming the feature, before memory is looked at.
            usage(&argv, "--transport", "--features rdma");
        }
    }
}

#[cfg(test)]
mod path_tests {
    use super::PathKind;

    #[test]
    fn transports_name_an_interface_or_not() {
        assert_eq!("tcp".parse::<PathKind>(), Ok(PathKind::Tcp(None)));
        assert_eq!("tcp@eth0".parse::<PathKind>(), Ok(PathKind::Tcp(Some("eth0".into()))));
        assert_eq!(PathKind::Tcp(Some("vxlan0".into())).to_string(), "tcp@vxlan0");
        assert!("tcp@".parse::<PathKind>().unwrap_err().contains("tcp@IFACE"));
        assert_eq!(
            "tcp@ib0 | en*".parse::<PathKind>(),
            Ok(PathKind::Tcp(Some("ib0|en*".into())))
        );
        assert_eq!(PathKind::Tcp(Some("ib0|en*".into())).to_string(), "tcp@ib0|en*");
        assert!("tcp@ib0||eth0"
            .parse::<PathKind>()
            .unwrap_err()
            .contains("empty alternative"));
        assert!("tcp@eth 0".parse::<PathKind>().unwrap_err().contains("'eth 0'"));
        assert!("mpi@eth0".parse::<PathKind>().unwrap_err().contains("only tcp"));
        assert!("rdma".parse::<PathKind>().unwrap_err().contains("rdma@DEVICE[:PORT]"));
        assert!("rdma@mlx5_0:0".parse::<PathKind>().unwrap_err().contains("port '0'"));
        assert!("rdma@mlx5_0:x".parse::<PathKind>().unwrap_err().contains("port 'x'"));
        assert!("rdma@:1".parse::<PathKind>().unwrap_err().contains("device name"));
        if cfg!(feature = "rdma") {
            let p = PathKind::Rdma {
                device: "mlx5_0".into(),
                port: 1,
            };
            assert_eq!("rdma@mlx5_0".parse::<PathKind>(), Ok(p.clone()));
            assert_eq!(p.to_string(), "rdma@mlx5_0:1");
            assert_eq!(
                "rdma@mlx5_0:2".parse::<PathKind>().unwrap().to_string(),
                "rdma@mlx5_0:2"
            );
        } else {
            assert!("rdma@mlx5_0:1"
                .parse::<PathKind>()
                .unwrap_err()
                .contains("--features rdma"));
        }
        assert!("udp".parse::<PathKind>().unwrap_err().contains("unknown transport"));
        match "nccl".parse::<PathKind>() {
            Ok(p) => assert_eq!((cfg!(feature = "cuda"), p.to_string()), (true, "nccl".to_string())),
            Err(e) => assert!(!cfg!(feature = "cuda") && e.contains("--features cuda"), "{e}"),
        }
        assert_eq!(
            serde_json::to_value(PathKind::Tcp(Some("ib0".into()))).unwrap(),
            "tcp@ib0"
        );
    }
}

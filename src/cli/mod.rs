//! The command line, clap derive only: flag names, defaults and help. Values that need checking stay
//! strings here; [`crate::options::Options::from_cli`] validates them and names the flag in every error.
//!
//! Flags follow nccl-tests (same short letters, same long names such as `--minbytes`, `--warmup_iters`),
//! with dashed aliases (`--min-bytes`) for people used to other tools. Defaults are taken from
//! `Options::default` so the help text and the behaviour cannot drift apart.
//!
//! One concern, the subcommands' argument structs (about 700 lines, nearly all of it help text that the
//! man pages and docs/options.md are generated from).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::sizes::format_size_arg;
use values::Choices;

/// What `collbench -V` prints after the name: the version and which optional features (mpi, rdma, cuda)
/// this binary was built with, since they decide which paths run.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("COLLBENCH_BUILT_FEATURES"), ")");

/// Collective-communication benchmark and network validator, in the spirit of nccl-tests.
#[derive(Debug, Parser)]
#[command(name = "collbench", version = VERSION, propagate_version = true)]
// No subcommand prints help and exits 2 instead of defaulting to `run`: more verbs are coming (info,
// preflight, pairwise, compare), and an explicit one keeps `collbench <flags>` from changing meaning
// when they land, keeps each verb's --help to its own flags, and makes a mistyped verb an error
// rather than a 64 MiB sweep on every core.
#[command(arg_required_else_help = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands; each has its own argument struct so adding one is a variant plus a struct.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sweep message sizes over collectives and print an nccl-tests style table.
    Run(Box<RunArgs>),
    /// Show every host's network interfaces (kind, MTU, speed, addresses) and CPU limits, with advice.
    Info(InfoArgs),
    /// Draw busbw and time vs message size per path (PNG, SVG) from a results file written with -J.
    Plot(PlotArgs),
    /// Fit alpha-beta models per path to results files and predict times at a larger rank count.
    Model(ModelArgs),
    /// Compare two results files (baseline, then new): busbw and time changes per point, regressions
    /// beyond a threshold and the noise; exit 1 on a regression.
    Compare(CompareArgs),
    /// Measure the CPU reduction kernels against this machine's memory copy bandwidth (one process).
    Selftest(SelftestArgs),
    /// A short fixed plan over each path (connectivity, latency, bandwidth), judged against expectations:
    /// PASS / WARN / FAIL per check and overall; exit 1 on a failure.
    Preflight(Box<PreflightArgs>),
    /// Measure every pair of hosts (bandwidth both ways at once, 8 B latency) in rounds of disjoint pairs;
    /// print host x host matrices and name a slow host or link; exit 1 when one is named.
    Pairwise(PairwiseArgs),
    /// Point-to-point latency and bandwidth between two ranks, swept over message sizes in the shape of OSU's
    /// osu_latency (ping-pong) and osu_bw (windows of back-to-back sends).
    P2p(P2pArgs),
    /// Measure device-to-device copy bandwidth between every ordered GPU pair on this node (needs --features
    /// cuda) against each pair's link (NVLink or PCIe, from NVML); flag pairs far below it; exit 1 when one is.
    GpuMatrix(GpuMatrixArgs),
    /// Print a shell completion script (bash, zsh, fish, ...) to stdout.
    Completions(CompletionsArgs),
    /// Link nccl-tests' program names (all_reduce_perf, all_gather_perf, ...) to collbench in DIR: run
    /// under them, collbench takes nccl-tests' flags and prints its output (docs/nccl-tests.md).
    InstallAliases(InstallAliasesArgs),
}

/// Flags of `collbench install-aliases`.
#[derive(Debug, Clone, Args)]
pub struct InstallAliasesArgs {
    /// Directory for the links (e.g. /usr/local/bin); created, and said so, if missing while its parent exists.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Replace files of those names that are not links to this collbench (nccl-tests' own binaries).
    #[arg(long = "force")]
    pub force: bool,
}

/// Flags of `collbench completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Flags of `collbench gpu-matrix`.
#[derive(Debug, Clone, Args)]
pub struct GpuMatrixArgs {
    /// Bytes per copy (bytes, or K/M/G, binary).
    #[arg(long = "bytes", value_name = "SIZE", default_value = "256M")]
    pub bytes: String,

    /// Timed copies per pair (after one warm-up copy).
    #[arg(long = "iters", short = 'n', value_name = "N", default_value_t = 5)]
    pub iters: usize,

    /// Flag pairs whose bandwidth is under this fraction of their link's expectation.
    #[arg(long = "threshold", value_name = "FRACTION", default_value_t = 0.5)]
    pub threshold: f64,

    /// Write the measurements as JSON to this file [default: none]
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE")]
    pub output_file: Option<PathBuf>,

    /// Overwrite the output file if it exists.
    #[arg(long = "force")]
    pub force: bool,
}

/// Flags of `collbench pairwise`.
#[derive(Debug, Clone, Args)]
pub struct PairwiseArgs {
    /// Local ranks to spawn when no launcher (mpirun, srun, Kubernetes) is present.
    #[arg(long = "np", value_name = "N", default_value_t = defaults::NP)]
    pub np: usize,

    /// The path to measure: tcp, tcp@SPEC (the interface SPEC picks on each host: a name, a glob such as
    /// en*, or a list tried in order such as 'ib0|eth0'), or `rdma@DEVICE[:PORT]` (collbench's verbs
    /// transport, one queue pair per pair of ranks, set up over a TCP control path).
    #[arg(long = "transport", value_name = "PATH", default_value = "tcp")]
    pub transport: String,

    /// Interface plain `tcp` binds to: a name, a glob (en*) or a list tried in order (ib0|eth0) [default:
    /// lo for a single-host job; else as `collbench run` chooses]
    #[arg(long = "iface", value_name = "SPEC")]
    pub iface: Option<String>,

    /// Bytes each side of a pair sends per bandwidth iteration (bytes, or K/M/G, binary).
    #[arg(long = "bytes", value_name = "SIZE", default_value_t =
        format_size_arg(defaults::PAIRWISE_BYTES as u64))]
    pub bytes: String,

    /// Timed bandwidth iterations per pair; their bytes over their time count.
    #[arg(short = 'n', long = "iters", value_name = "N",
        default_value_t = defaults::PAIRWISE_ITERS)]
    pub iters: usize,

    /// Timed 8-byte round trips per pair; the median counts.
    #[arg(long = "lat-iters", alias = "lat_iters", value_name = "N",
        default_value_t = defaults::PAIRWISE_LAT_ITERS)]
    pub lat_iters: usize,

    /// Every rank takes part, not only the lowest rank of each host.
    #[arg(long = "per-rank", alias = "per_rank")]
    pub per_rank: bool,

    /// Report the first pass's findings as they are, without measuring the slow links again to tell a
    /// transient from a fault.
    #[arg(long = "no-confirm", alias = "no_confirm")]
    pub no_confirm: bool,

    /// Seconds the whole test may take, start-up included: one round is measured first, and every pair is
    /// measured if its rounds fit, else a sample of rounds in which every host meets as many partners as
    /// fit (docs/validator.md says what each size of cluster gets); suspects are measured again within it.
    /// 0: no limit, every pair (up to 1,024 hosts; beyond, as many rounds as hold 2^19 pairs).
    #[arg(long = "budget", value_name = "SECONDS", default_value_t = defaults::PAIRWISE_BUDGET_S)]
    pub budget: u64,

    #[command(flatten)]
    pub units: UnitsArg,

    #[command(flatten)]
    pub deadlines: DeadlineArgs,

    /// Write the matrices and findings as JSON to this file [default: none]
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE")]
    pub output_file: Option<PathBuf>,

    /// Draw bandwidth and latency heatmaps (pairwise-bandwidth.png, pairwise-latency.png) into this
    /// directory, created if missing [default: none]
    #[arg(long = "plot", value_name = "DIR")]
    pub plot: Option<PathBuf>,

    /// Write the verdict, every link's figures and the findings as OpenMetrics text (Prometheus exposition;
    /// see docs/metrics.md) [default: none]
    #[arg(long = "metrics", value_name = "FILE")]
    pub metrics: Option<PathBuf>,

    /// Overwrite output files that already exist.
    #[arg(long = "force")]
    pub force: bool,
}

/// Flags of `collbench p2p`.
#[derive(Debug, Clone, Args)]
pub struct P2pArgs {
    /// Local ranks to spawn when no launcher (mpirun, srun, Kubernetes) is present; ranks outside the pair
    /// wait, blocked, until it is done.
    #[arg(long = "np", value_name = "N", default_value_t = 2)]
    pub np: usize,

    /// The two ranks, A,B: A starts each round trip and sends the bandwidth windows, B echoes and receives.
    #[arg(long = "pair", value_name = "A,B", default_value = "0,1")]
    pub pair: String,

    /// The path to measure: tcp, tcp@SPEC (an interface name, glob or list), or `rdma@DEVICE[:PORT]`
    /// (collbench's verbs transport, set up over a TCP control path).
    #[arg(long = "transport", value_name = "PATH", default_value = "tcp")]
    pub transport: String,

    /// Interface plain `tcp` binds to: a name, a glob (en*) or a list tried in order (ib0|eth0) [default:
    /// lo for a single-host job; else as `collbench run` chooses]
    #[arg(long = "iface", value_name = "SPEC")]
    pub iface: Option<String>,

    /// Smallest message (bytes, or K/M/G, binary); 0 measures an empty message's latency, as osu_latency
    /// does (the bandwidth sweep starts at 1 byte).
    #[arg(
        short = 'b',
        long = "minbytes",
        alias = "min-bytes",
        value_name = "SIZE",
        default_value = "0"
    )]
    pub minbytes: String,

    /// Largest message; sizes double up to it.
    #[arg(
        short = 'e',
        long = "maxbytes",
        alias = "max-bytes",
        value_name = "SIZE",
        default_value = "4M"
    )]
    pub maxbytes: String,

    /// Timed round trips per size up to 8 KiB (a tenth above, as OSU's benchmarks do); the bandwidth sweep
    /// times a tenth of them in windows.
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 1000)]
    pub iters: usize,

    /// Untimed iterations before each size (at most 10 bandwidth windows).
    #[arg(
        short = 'w',
        long = "warmup_iters",
        alias = "warmup-iters",
        value_name = "N",
        default_value_t = 10
    )]
    pub warmup_iters: usize,

    /// Messages sent back to back before the receiver acks (osu_bw's window size); fewer for large messages,
    /// so a window's receive buffers stay within 64 MiB.
    #[arg(long = "window", value_name = "N", default_value_t = 64)]
    pub window: usize,

    /// Unit bandwidth is printed in: gbyte (MB/s, 10^6 bytes/s, as OSU prints) or gbit (Mb/s, 10^6 bits/s);
    /// JSON keeps bytes.
    #[arg(long = "units", value_name = "UNIT", default_value = "gbyte", value_parser = Choices(crate::units::UNITS))]
    pub units: String,

    #[command(flatten)]
    pub deadlines: DeadlineArgs,

    /// Write both sweeps as JSON to this file [default: none]
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE")]
    pub output_file: Option<PathBuf>,

    /// Overwrite the output file if it exists.
    #[arg(long = "force")]
    pub force: bool,
}

/// Flags of `collbench compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline results file (`collbench run -J`).
    #[arg(value_name = "OLD.json")]
    pub old: PathBuf,

    /// The results file to check against the baseline.
    #[arg(value_name = "NEW.json")]
    pub new: PathBuf,

    /// A point regressed when NEW's time is longer than OLD's by more than this percentage and the
    /// difference is larger than the noise of both.
    #[arg(long = "threshold", value_name = "PERCENT", default_value_t = 5.0)]
    pub threshold: f64,

    /// Write every compared point and the verdict as JSON to this file.
    #[arg(
        short = 'J',
        long = "output_file",
        alias = "output-file",
        alias = "json",
        value_name = "FILE"
    )]
    pub output_file: Option<PathBuf>,

    /// Write the comparison as a Markdown table to this file.
    #[arg(long = "markdown", value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Compare a file whose run stopped before its plan was done (`complete: false`), knowing some points are
    /// missing [default: refused]
    #[arg(long = "allow-incomplete")]
    pub allow_incomplete: bool,

    #[command(flatten)]
    pub units: UnitsArg,

    /// Overwrite output files that already exist.
    #[arg(long = "force")]
    pub force: bool,
}

/// Flags of `collbench selftest`.
#[derive(Debug, Clone, Args)]
pub struct SelftestArgs {
    /// Bytes in each buffer (bytes, or K/M/G, binary); keep it well above the last-level cache.
    #[arg(long = "bytes", value_name = "SIZE", default_value = "64M")]
    pub bytes: String,

    /// Rounds, each timing every kernel once (interleaved, so all see the same memory bandwidth); each
    /// kernel's fastest round is reported.
    #[arg(long = "iters", short = 'n', value_name = "N", default_value_t = 20)]
    pub iters: usize,

    /// Write the measurements as JSON to this file [default: none]; an existing file is refused before
    /// anything is measured, unless --force
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE")]
    pub output_file: Option<PathBuf>,

    /// Overwrite an existing -J file.
    #[arg(long = "force")]
    pub force: bool,

    #[command(flatten)]
    pub units: UnitsArg,

    /// Check the GPU kernels instead (needs --features cuda and an NVIDIA GPU): every dtype/op reduction
    /// against the CPU kernels on random data, the verification kernel, and float sum at 256 MiB vs a
    /// device-to-device copy (--bytes does not apply: the bandwidth is measured at 256 MiB, the target's size)
    #[arg(long = "gpu")]
    pub gpu: bool,

    /// CUDA device ordinal for --gpu [default: COLLBENCH_CUDA_DEVICE, else the local rank, else 0]
    #[arg(long = "device", value_name = "N", requires = "gpu")]
    pub device: Option<String>,
}

/// Flags of `collbench plot`.
#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    /// The results file `collbench run -J FILE` wrote.
    #[arg(value_name = "RESULTS.json")]
    pub results: PathBuf,

    /// Directory for the charts, created if missing; charts of the same name are replaced [default: the
    /// results file's directory]
    #[arg(long = "out", value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Image formats, comma-separated: png, svg.
    #[arg(
        long = "format",
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "png,svg",
        value_parser = Choices(values::IMAGE_FORMATS)
    )]
    pub format: Vec<String>,
}

/// Flags of `collbench info`.
#[derive(Debug, Clone, Args)]
pub struct InfoArgs {
    /// Ranks that will run on this host, for the CPU advice when no launcher is present.
    #[arg(long = "np", value_name = "N", default_value_t = defaults::NP)]
    pub np: usize,

    /// Interface the job's TCP path will use (for the MTU and path advice): a name, a glob (en*) or a list
    /// tried in order (ib0|eth0) [default: the rule plain `tcp` uses; lo without a launcher]
    #[arg(long = "iface", value_name = "SPEC")]
    pub iface: Option<String>,

    /// Write the inventory and advice as JSON to this file.
    #[arg(
        short = 'J',
        long = "output_file",
        alias = "output-file",
        alias = "json",
        value_name = "FILE"
    )]
    pub output_file: Option<PathBuf>,

    /// Deadline in seconds for the bootstrap under a launcher.
    #[arg(short = 'T', long = "timeout", value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,

    /// Overwrite the output file if it exists.
    #[arg(long = "force")]
    pub force: bool,
}

/// Headings that group `preflight --help`.
const VERDICT: &str = "Verdict";

/// Flags of `collbench preflight`: the verdict's inputs and outputs, then `run`'s path and launch flags. The
/// sweep itself (sizes, collectives, iterations) is the fixed plan, so `run`'s sweep flags are not accepted.
#[derive(Debug, Clone, Args)]
pub struct PreflightArgs {
    /// Expectations (TOML): per path and collective, minimum busbw, maximum latency at given sizes, maximum
    /// coefficient of variation; see launch/preflight-expect.toml [default: busbw >= 70% of the line rate
    /// where the link speed is known]
    #[arg(long = "expect", value_name = "FILE", help_heading = VERDICT)]
    pub expect: Option<PathBuf>,

    /// A results file to compare with (`collbench run -J` or `collbench preflight -J`); a significant
    /// regression fails [default: none]
    #[arg(long = "baseline", value_name = "FILE", help_heading = VERDICT)]
    pub baseline: Option<PathBuf>,

    /// With --baseline: a point regressed when its time is longer by more than this percentage and the noise.
    #[arg(long = "baseline-threshold", value_name = "PERCENT", default_value_t = 5.0, help_heading = VERDICT)]
    pub baseline_threshold: f64,

    /// Warnings (a result inside the noise of its threshold) fail too: exit 1.
    #[arg(long = "strict", help_heading = VERDICT)]
    pub strict: bool,

    /// Skip the pairwise link test (every pair of hosts, the slow host or link named), which otherwise
    /// follows the collectives' plan and connects every pair of ranks.
    #[arg(long = "no-pairwise", help_heading = VERDICT)]
    pub no_pairwise: bool,

    /// After the plan, run the pairwise test again and again for this long (90s, 15m, 2h; outside --budget)
    /// and name a host or link that is bad in some passes and not in others: a fault that comes and goes
    /// [default: no soak]
    #[arg(long = "soak", value_name = "DURATION", help_heading = VERDICT)]
    pub soak: Option<String>,

    /// Sweeps of each phase per path; medians and confidence intervals over them decide.
    #[arg(long = "repeat", value_name = "N", default_value_t = 3, help_heading = VERDICT)]
    pub repeat: u32,

    /// Seconds the whole preflight may take: the plan is sized from what the first measurements show, a phase
    /// that cannot finish in its share stops with a verdict naming what was too slow, and every output file is
    /// written.
    #[arg(long = "budget", value_name = "SECONDS", default_value_t = defaults::PREFLIGHT_BUDGET_S, help_heading = VERDICT)]
    pub budget: u64,

    /// Largest message of the bandwidth phase, which measures at a quarter of it, half and all (lowered to
    /// what memory holds).
    #[arg(long = "bandwidth-bytes", value_name = "SIZE", default_value = "64M", help_heading = VERDICT)]
    pub bandwidth_bytes: String,

    /// Judge the measurements saved in a `collbench preflight -J` file instead of measuring (with --expect,
    /// --baseline and --strict as given now) [default: measure]
    #[arg(long = "from-results", value_name = "FILE", help_heading = VERDICT)]
    pub from_results: Option<PathBuf>,

    /// Write the checks, the verdict and every measured point as JSON to this file [default: none]
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE",
        help_heading = OUTPUT)]
    pub output_file: Option<PathBuf>,

    /// Write the checks as JUnit XML (one testcase per check; FAIL a failure, WARN skipped) [default: none]
    #[arg(long = "junit", value_name = "FILE", help_heading = OUTPUT)]
    pub junit: Option<PathBuf>,

    /// Write the checks as a Markdown table to this file [default: none]
    #[arg(long = "markdown", value_name = "FILE", help_heading = OUTPUT)]
    pub markdown: Option<PathBuf>,

    /// Write the verdict and every check as OpenMetrics text (Prometheus exposition; for node_exporter's
    /// textfile collector or a Pushgateway; see docs/metrics.md) [default: none]
    #[arg(long = "metrics", value_name = "FILE", help_heading = OUTPUT)]
    pub metrics: Option<PathBuf>,

    /// Overwrite output files that already exist.
    #[arg(long = "force", help_heading = OUTPUT)]
    pub force: bool,

    /// Never draw the progress bar (it is drawn only when stderr is a terminal anyway).
    #[arg(long = "no-progress", alias = "no_progress", help_heading = OUTPUT)]
    pub no_progress: bool,

    #[command(flatten, next_help_heading = OUTPUT)]
    pub units: UnitsArg,

    /// Local ranks to spawn when no launcher (mpirun, srun, Kubernetes) is present.
    #[arg(long = "np", value_name = "N", help_heading = WHAT, default_value_t = defaults::NP)]
    pub np: usize,

    #[command(flatten)]
    pub link: LinkArgs,

    #[command(flatten)]
    pub deadlines: DeadlineArgs,

    /// Testing aid, as `run --fault`: RANK:PHASE:ACTION makes one rank kill or stop itself at PHASE.
    #[arg(long = "fault", value_name = "RANK:PHASE:ACTION", hide = true)]
    pub fault: Option<String>,
}

/// `--units`, shared by every subcommand that prints bandwidth in the unit nccl-tests does.
#[derive(Debug, Clone, Args)]
pub struct UnitsArg {
    /// Unit bandwidth is printed in: gbyte (GB/s, 10^9 bytes/s, as nccl-tests prints) or gbit (Gbit/s, 10^9
    /// bits/s, as perftest's --report_gbits and link speeds); files (JSON, CSV, Markdown) stay in GB/s.
    #[arg(long = "units", value_name = "UNIT", default_value = "gbyte",
        value_parser = Choices(crate::units::UNITS))]
    pub units: String,
}

impl UnitsArg {
    /// The unit chosen.
    pub fn unit(&self) -> crate::error::Result<crate::units::BwUnit> {
        crate::flags::units_flag(&self.units)
    }
}

/// Deadlines of the bootstrap, the connections and every wait, shared by `run`, `preflight` and `pairwise`.
#[derive(Debug, Clone, Args)]
pub struct DeadlineArgs {
    /// Deadline in seconds for any single wait in a collective or measurement; a stuck peer ends the run
    /// with an error naming it.
    #[arg(short = 'T', long = "timeout", value_name = "SECONDS", help_heading = TIMING, allow_negative_numbers = true,
        default_value_t = defaults::TIMEOUT_S as f64)]
    pub timeout: f64,

    /// Deadline in seconds for the bootstrap: reaching the rendezvous and every rank joining it.
    #[arg(long = "bootstrap-timeout", value_name = "SECONDS", help_heading = TIMING, allow_negative_numbers = true,
        default_value_t = defaults::BOOTSTRAP_TIMEOUT_S as f64)]
    pub bootstrap_timeout: f64,

    /// Deadline in seconds for opening and authenticating the data connections.
    #[arg(long = "connect-timeout", value_name = "SECONDS", help_heading = TIMING, allow_negative_numbers = true,
        default_value_t = defaults::CONNECT_TIMEOUT_S as f64)]
    pub connect_timeout: f64,
}

/// The paths to measure and how collbench's transports and algorithms run on them, shared by `run` and
/// `preflight` (which passes them to each of its phases).
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Paths to measure in turn, comma-separated: tcp (collbench's own transport), tcp@SPEC (bound to the
    /// interface SPEC picks on each host: a name, a glob such as en*, or a list tried in order such as
    /// 'ib0|eth0'), mpi (the MPI library's collectives; needs a build with --features mpi and an MPI launcher),
    /// nccl (NCCL's collectives on the device buffers; needs --features cuda, --memory cuda and libnccl.so.2).
    /// Plain tcp uses --iface, else loopback on one host, else IPoIB, the interface that reaches the
    /// rendezvous, the default route's, the first by name (never loopback or container bridges)
    #[arg(long = "transport", alias = "transports", value_name = "LIST", value_delimiter = ',',
        help_heading = TUNING, default_value = "tcp", value_parser = Choices(values::TRANSPORTS), hide_possible_values = true)]
    pub transport: Vec<String>,

    /// Algorithm: auto (latency algorithm below --algo-threshold, ring above; on 2^k ranks with no threshold given,
    /// all_reduce runs rhd from 128K to 8M and all_gather rd from 256K to 8M), ring, rd (recursive doubling;
    /// all_gather on other rank counts: Bruck), rhd (all_reduce by recursive halving + doubling), bruck (all_gather
    /// by Bruck's steps on any rank count) or tree.
    #[arg(long = "algo", value_name = "ALGO", help_heading = TUNING,
        default_value_t = defaults::ALGO.to_string(), value_parser = Choices(values::ALGOS), hide_possible_values = true)]
    pub algo: String,

    /// GID table index of rdma@ paths (like NCCL_IB_GID_INDEX) [default: 0 on InfiniBand; on RoCE the
    /// RoCE v2 entry with an IPv4 address]
    #[arg(long = "gid-index", value_name = "N", help_heading = TUNING)]
    pub gid_index: Option<u8>,

    /// Queue pairs per peer of rdma@ paths (1..=16, like NCCL_IB_QPS_PER_CONNECTION): a message's fragments
    /// go round-robin over them, so a large one uses them all
    #[arg(long = "rdma-qps", value_name = "N", help_heading = TUNING, default_value_t = defaults::RDMA_QPS)]
    pub rdma_qps: usize,

    /// Line rate in Gbit/s to report busbw against, for links whose speed the kernel does not know
    /// (virtual or shaped links) [default: the interface's reported speed]
    #[arg(long = "line-rate", value_name = "GBIT", help_heading = TUNING)]
    pub line_rate: Option<f64>,

    /// Interface plain `tcp` binds to: a name, a glob (en*) or a list tried in order (ib0|eth0), each host
    /// taking the first that matches [default: lo for a single-host job; else IPoIB, the interface that
    /// reaches the rendezvous, the default route's (see docs/interface.md)]
    #[arg(long = "iface", value_name = "SPEC", help_heading = TUNING)]
    pub iface: Option<String>,

    /// TCP streams per peer (1..=16).
    #[arg(long = "streams", value_name = "N", help_heading = TUNING,
        default_value_t = defaults::STREAMS)]
    pub streams: usize,

    /// Microseconds a TCP wait keeps polling the sockets, yielding the CPU between polls, before it sleeps in
    /// poll(2) (0..=100000; 0 sleeps at once). Polling answers sooner than a woken rank is scheduled.
    #[arg(long = "spin", value_name = "US", help_heading = TUNING,
        default_value_t = defaults::SPIN_US)]
    pub spin: u64,

    /// Send buffer (SO_SNDBUF) of every TCP data socket, 4 KiB..=256 MiB, or auto for the kernel's autotuning;
    /// the kernel doubles it and caps it at net.core.wmem_max.
    #[arg(long = "sndbuf", value_name = "SIZE|auto", help_heading = TUNING,
        default_value_t = defaults::SNDBUF.map_or("auto".into(), |b| format_size_arg(b as u64)))]
    pub sndbuf: String,

    /// TCP congestion control of every data socket (TCP_CONGESTION, as iperf3's -C), e.g. cubic, reno, bbr;
    /// it must be in net.ipv4.tcp_available_congestion_control, and for users without CAP_NET_ADMIN in
    /// tcp_allowed_congestion_control [default: the host's, net.ipv4.tcp_congestion_control]
    #[arg(long = "tcp-congestion", value_name = "NAME", help_heading = TUNING)]
    pub tcp_congestion: Option<String>,

    /// Pipeline chunk size (4 KiB..=64 MiB, a multiple of 16 bytes).
    #[arg(long = "chunk", value_name = "SIZE", help_heading = TUNING,
        default_value_t = format_size_arg(defaults::CHUNK_BYTES as u64))]
    pub chunk: String,
}

/// Headings that group `run --help`.
const SIZES: &str = "Sizes";
const WHAT: &str = "What to run";
const TIMING: &str = "Timing and reporting";
const TUNING: &str = "Algorithm and transport";
const OUTPUT: &str = "Output";

/// Flags of `collbench run`, as typed; see `Options::from_cli` for what each must satisfy.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Smallest message size (bytes, or K, M, G, T, P or E, binary, as in 64K or 1.5M).
    #[arg(short = 'b', long = "minbytes", alias = "min-bytes", value_name = "SIZE", help_heading = SIZES,
        allow_negative_numbers = true, default_value_t = format_size_arg(defaults::MIN_BYTES))]
    pub minbytes: String,

    /// Largest message size (bytes, or K, M, G, T, P or E, binary, as in 64K or 1.5M).
    #[arg(short = 'e', long = "maxbytes", alias = "max-bytes", value_name = "SIZE", help_heading = SIZES,
        allow_negative_numbers = true, default_value_t = format_size_arg(defaults::MAX_BYTES))]
    pub maxbytes: String,

    /// Multiply the size by this factor between points (>= 2) [default: 2]
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<u64>,
        short = 'f', long = "stepfactor", alias = "step-factor", value_name = "N", help_heading = SIZES)]
    pub stepfactor: Option<u64>,

    /// Add this many bytes between points instead of multiplying by -f [default: none]
    #[arg(short = 'i', long = "stepbytes", alias = "step-bytes", value_name = "SIZE", help_heading = SIZES,
        allow_negative_numbers = true)]
    pub stepbytes: Option<String>,

    /// Collectives to run, comma-separated, or `all`.
    #[arg(long = "collective", alias = "collectives", value_name = "LIST", value_delimiter = ',',
        help_heading = WHAT, default_value = defaults::COLLECTIVES, value_parser = Choices(values::COLLECTIVES))]
    pub collective: Vec<String>,

    /// Element types, comma-separated, or `all`.
    #[arg(short = 'd', long = "datatype", alias = "dtype", value_name = "LIST", value_delimiter = ',',
        help_heading = WHAT, default_value = defaults::DTYPES, value_parser = Choices(values::DTYPES))]
    pub datatype: Vec<String>,

    /// Reduction ops for reducing collectives, comma-separated, or `all`.
    #[arg(short = 'o', long = "op", alias = "ops", value_name = "LIST", value_delimiter = ',',
        help_heading = WHAT, default_value = defaults::OPS, value_parser = Choices(values::OPS))]
    pub op: Vec<String>,

    /// Root rank of broadcast and reduce.
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<usize>,
        short = 'r', long = "root", value_name = "RANK", help_heading = WHAT,
        default_value_t = defaults::ROOT)]
    pub root: usize,

    /// Local ranks to spawn when no launcher (mpirun, srun, Kubernetes) is present.
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<usize>,
        long = "np", value_name = "N", help_heading = WHAT, default_value_t = defaults::NP)]
    pub np: usize,

    /// Timed iterations per point.
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<u32>,
        short = 'n', long = "iters", value_name = "N", help_heading = TIMING,
        default_value_t = defaults::ITERS)]
    pub iters: u32,

    /// Untimed warm-up iterations per point.
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<u32>,
        short = 'w', long = "warmup_iters", aliases = ["warmup-iters", "warmup"], value_name = "N",
        help_heading = TIMING, default_value_t = defaults::WARMUP)]
    pub warmup_iters: u32,

    /// Whole sweeps of every path, interleaved (path A, path B, path A, ...); the comparison combines them,
    /// so its intervals include drift between sweeps as well as noise within a point.
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<u32>,
        long = "repeat", value_name = "N", help_heading = TIMING, default_value_t = defaults::REPEAT)]
    pub repeat: u32,

    /// How several paths take turns: `sweep` (each sweeps every point, then the next) or `point` (every
    /// path measures a point before any moves on, so a slow spell of a shared machine meets all paths at
    /// the same points; the table then has one table per collective and sweep, its rows' path last).
    #[arg(long = "interleave", value_name = "HOW", help_heading = TIMING, default_value = "sweep",
        value_parser = Choices(values::INTERLEAVE), hide_possible_values = true)]
    pub interleave: String,

    /// Data-check iterations per point; 0 turns the check off.
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<u32>,
        short = 'c', long = "check", value_name = "N", help_heading = TIMING,
        default_value_t = defaults::CHECK_ITERS)]
    pub check: u32,

    /// Which rank's time to report: 0/rank0, 1/avg, 2/min, 3/max = the slowest (nccl-tests: avg).
    #[arg(short = 'a', long = "average", value_name = "STAT", help_heading = TIMING,
        default_value_t = defaults::RANK_STAT.to_string(), value_parser = Choices(values::RANK_STATS),
        hide_possible_values = true)]
    pub average: String,

    /// Add p50/p99 iteration-time columns to the table.
    #[arg(long = "percentiles", help_heading = TIMING)]
    pub percentiles: bool,

    /// Keep every timed iteration's time (nccl-tests' -I): 1 adds the per-iteration objects
    /// (out_of_place_per_iter, in_place_per_iter: each rank's times and their summary) to the -J file.
    #[arg(short = 'I', long = "per_iter_timing", alias = "per-iter-timing", value_name = "0|1",
        help_heading = TIMING, default_value_t = 0)]
    pub per_iter_timing: u8,

    /// With -I 1: leading timed iterations the per-iteration summary leaves out (nccl-tests' -K); the
    /// iteration times themselves keep them.
    #[arg(short = 'K', long = "per_iter_skip", alias = "per-iter-skip", value_name = "N", help_heading = TIMING,
        default_value_t = 0)]
    pub per_iter_skip: u32,

    /// Collectives per timed iteration (nccl-tests' -m): they run back to back and the iteration's time is
    /// divided by N.
    #[arg(short = 'm', long = "agg_iters", alias = "agg-iters", value_name = "N", help_heading = TIMING,
        default_value_t = 1)]
    pub agg_iters: u32,

    /// Waits between collectives (nccl-tests' -z): 0 none; 1 a barrier after every collective, timed; 2 none
    /// beyond the call's own completion (collbench's calls return complete, so as 0); 3 a barrier after every
    /// timed iteration, not timed.
    #[arg(short = 'z', long = "blocking", value_name = "0-3", help_heading = TIMING, default_value_t = 0)]
    pub blocking: u8,

    /// Start the send and receive buffers this many elements past their alignment (nccl-tests' -u; host
    /// memory only).
    #[arg(short = 'u', long = "unalign", value_name = "N", help_heading = TIMING, default_value_t = 0)]
    pub unalign: u32,

    /// Call the time column cputime and the JSON key cpu_time (nccl-tests' -C). collbench's paths are timed by
    /// the CPU's clock around calls that return complete, so the figures are the same as with -C 0.
    #[arg(short = 'C', long = "report_cputime", alias = "report-cputime", value_name = "0|1",
        help_heading = TIMING, default_value_t = 0)]
    pub report_cputime: u8,

    #[command(flatten)]
    pub deadlines: DeadlineArgs,

    #[command(flatten)]
    pub link: LinkArgs,

    /// Message size at which --algo auto switches to the ring, for every collective; auto: each collective's
    /// measured switch points (all_reduce rd below 128K, rhd to 8M on 2^k ranks, then ring; all_gather Bruck below
    /// 256K, rd to 8M on 2^k ranks, then ring; the others 64K).
    #[arg(long = "algo-threshold", alias = "algo_threshold", value_name = "SIZE", help_heading = TUNING,
        default_value = "auto")]
    pub algo_threshold: String,

    /// Where the buffers live: host, or cuda (device memory, one GPU per rank, staged through pinned host
    /// memory around collbench's tcp and rdma algorithms; times include the staging. Needs a build with
    /// --features cuda and an NVIDIA driver)
    #[arg(long = "memory", value_name = "KIND", help_heading = TUNING, default_value = "host",
        value_parser = Choices(values::MEMORY), hide_possible_values = true)]
    pub memory: String,

    /// CUDA device ordinal for --memory cuda [default: COLLBENCH_CUDA_DEVICE, else the local rank modulo the
    /// device count]
    #[arg(long = "device", value_name = "N", help_heading = TUNING)]
    pub device: Option<String>,

    /// With --memory cuda on the tcp and rdma paths: split each call into at most N pieces of at least 1 MiB
    /// per rank block, so one piece's copies between device and host overlap the network carrying another
    /// (1..=64; 1: copy in, run, copy out)
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<usize>,
        long = "staging-pieces", value_name = "N", help_heading = TUNING,
        default_value_t = defaults::STAGING_PIECES)]
    pub staging_pieces: usize,

    /// With --memory cuda on the tcp and rdma paths, where all_reduce and reduce_scatter reduce: host (the
    /// algorithm reduces the staged data) or device (the GPU kernels reduce, the host runs an alltoall and,
    /// for all_reduce, an all_gather; the algo column says device_reduce)
    #[arg(long = "reduce-on", value_name = "WHERE", help_heading = TUNING, default_value = "host",
        value_parser = Choices(values::REDUCE_ON), hide_possible_values = true)]
    pub reduce_on: String,

    /// With several paths, the one the comparison table measures the others against (e.g. tcp@eth0)
    /// [default: none, the best path only]
    #[arg(long = "reference", value_name = "PATH", help_heading = TUNING)]
    pub reference: Option<String>,

    /// Write results as JSON to this file [default: none]
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE",
        help_heading = OUTPUT)]
    pub output_file: Option<PathBuf>,

    /// Write results as CSV to this file [default: none]
    #[arg(long = "csv", value_name = "FILE", help_heading = OUTPUT)]
    pub csv: Option<PathBuf>,

    /// Write results, and the paths compared, as Markdown to this file [default: none]
    #[arg(long = "markdown", value_name = "FILE", help_heading = OUTPUT)]
    pub markdown: Option<PathBuf>,

    /// Draw busbw and latency charts per collective (PNG and SVG) into this directory at the end of the run
    /// (charts of the same name are replaced); `collbench plot FILE.json` draws them from a saved run
    /// [default: none]
    #[arg(long = "plot", value_name = "DIR", help_heading = OUTPUT)]
    pub plot: Option<PathBuf>,

    /// At the end of the run, fit alpha-beta models per path to its measurements and predict every
    /// collective at N ranks: a table after the results, and the same in the JSON, Markdown and charts
    /// (dashed) [default: no prediction]
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<usize>,
        long = "target-ranks", value_name = "N", help_heading = OUTPUT)]
    pub target_ranks: Option<usize>,

    /// With --target-ranks: G ranks share each node, so also predict the two-level (hierarchical) form
    /// [default: flat only]
    #[arg(allow_negative_numbers = true, value_parser = crate::flags::count::<usize>,
        long = "ranks-per-node", value_name = "G", help_heading = OUTPUT)]
    pub ranks_per_node: Option<usize>,

    /// Overwrite output files that already exist.
    #[arg(long = "force", help_heading = OUTPUT)]
    pub force: bool,

    /// Never draw the progress bar (it is drawn only when stderr is a terminal anyway).
    #[arg(long = "no-progress", alias = "no_progress", help_heading = OUTPUT)]
    pub no_progress: bool,

    #[command(flatten, next_help_heading = OUTPUT)]
    pub units: UnitsArg,

    /// Testing aid: corrupt one output element on this rank in every data check, to prove the check,
    /// the #wrong column and exit status 1 work end to end.
    #[arg(long = "corrupt-rank", value_name = "RANK", hide = true)]
    pub corrupt_rank: Option<usize>,

    /// Testing aid: RANK:PHASE:ACTION makes rank RANK kill (SIGKILL) or stop (SIGSTOP) itself at PHASE:
    /// bootstrap (after joining the rendezvous), connect (before opening data connections), or
    /// COLLECTIVE@SIZE (before the first timed iteration of the first point of at least SIZE).
    #[arg(long = "fault", value_name = "RANK:PHASE:ACTION", hide = true)]
    pub fault: Option<String>,

    /// Testing aid: with --memory cuda, host memory posing as the device (copies queued and done when waited
    /// for), so the staged path runs end to end without a GPU or the cuda feature; its times mean nothing.
    #[arg(long = "emulate-device", hide = true)]
    pub emulate_device: bool,

    /// Print stdout as nccl-tests' PROGRAM (all_reduce_perf, ...) prints it, and exit as it does; set by the
    /// nccl-tests names (`collbench install-aliases`).
    #[arg(long = "nccl-tests-table", value_name = "PROGRAM", hide = true)]
    pub nccl_tests_table: Option<String>,

    /// With --nccl-tests-table: NCCL_TESTS_MIN_BW, the average busbw (GB/s) below 90% of which the run fails.
    #[arg(
        long = "nccl-tests-min-bw",
        value_name = "GBS",
        hide = true,
        requires = "nccl_tests_table"
    )]
    pub nccl_tests_min_bw: Option<f64>,

    /// With --nccl-tests-table: a timestamp after every row (nccl-tests' -S 1).
    #[arg(long = "nccl-tests-timestamps", hide = true, requires = "nccl_tests_table")]
    pub nccl_tests_timestamps: bool,
}

pub mod defaults;
mod model;
#[cfg(test)]
mod tests;
pub mod values;

pub use model::ModelArgs;

//! The command line, clap derive only: flag names, defaults and help. Values that need checking stay
//! strings here; [`crate::options::Options::from_cli`] validates them and names the flag in every error.
//!
//! Flags follow nccl-tests (same short letters, same long names such as `--minbytes`, `--warmup_iters`),
//! with dashed aliases (`--min-bytes`) for people used to other tools. Defaults are taken from
//! `Options::default` so the help text and the behaviour cannot drift apart.
//!
//! One concern, the subcommands' argument structs, nearly all of it help text that the man pages and
//! docs/options.md are generated from: `run`'s in `run`, `preflight`'s in `preflight`, the groups several
//! subcommands flatten (outputs, units, deadlines, path and launch flags) in `groups`, the others here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::defaults;
use crate::sizes::format_size_arg;
use values::Choices;

/// What `collbench -V` prints after the name: the version and which optional features (mpi, rdma, cuda)
/// this binary was built with, since they decide which paths run.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("COLLBENCH_BUILT_FEATURES"), ")");

/// Collective-communication benchmark and network validator, in the spirit of nccl-tests.
#[derive(Debug, Parser)]
#[command(name = "collbench", version = VERSION, propagate_version = true)]
// `collbench run -V` prints `collbench VERSION` as `collbench -V` does: clap prints a subcommand's display
// name, `collbench-run` unless set (the man pages set their own, src/docgen/).
#[command(mut_subcommands = |s: clap::Command| s.display_name("collbench"))]
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
    /// Directory for the links (e.g. /usr/local/bin); it must exist, unless --mkdir is given.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Create DIR (and its missing parents) when it does not exist, and say so.
    #[arg(long = "mkdir")]
    pub mkdir: bool,

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

    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `collbench pairwise`.
#[derive(Debug, Clone, Args)]
pub struct PairwiseArgs {
    /// Local ranks to spawn when no launcher (mpirun, srun, Kubernetes) is present.
    #[arg(long = "np", value_name = "N", default_value_t = defaults::NP)]
    pub np: usize,

    /// The path to measure: tcp, tcp@SPEC (the interface SPEC picks on each host: a name, a glob such as
    /// en*, or a list tried in order such as 'ib0|eth0'), or `rdma@DEVICE[:PORT]` (collbench's verbs
    /// transport, one queue pair per pair of ranks, set up over a TCP control path); nccl with --memory cuda
    /// (its point-to-point between GPUs, which --memory cuda measures anyway).
    #[arg(long = "transport", value_name = "PATH", default_value = "tcp")]
    pub transport: String,

    /// Interface plain `tcp` binds to: a name, a glob (en*) or a list tried in order (ib0|eth0) [default:
    /// lo for a single-host job; else as `collbench run` chooses]
    #[arg(long = "iface", value_name = "SPEC")]
    pub iface: Option<String>,

    /// Where the buffers live: host, or cuda (pairs of GPUs over NCCL's point-to-point, one rank per GPU,
    /// NCCL set up over a TCP control path on --iface; the cuda feature)
    #[arg(long = "memory", value_name = "KIND", default_value = "host",
        value_parser = Choices(values::MEMORY), hide_possible_values = true)]
    pub memory: String,

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

    #[command(flatten)]
    pub out: OutputArgs,

    /// Draw bandwidth and latency heatmaps (pairwise-bandwidth.png, pairwise-latency.png) into this
    /// directory, created if missing [default: none]
    #[arg(long = "plot", value_name = "DIR")]
    pub plot: Option<PathBuf>,

    /// Write the verdict, every link's figures and the findings as OpenMetrics text (Prometheus exposition;
    /// see docs/metrics.md) [default: none]
    #[arg(long = "metrics", value_name = "FILE")]
    pub metrics: Option<PathBuf>,
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

    #[command(flatten)]
    pub out: OutputArgs,
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

    #[command(flatten)]
    pub out: OutputArgs,

    /// Write the comparison as a Markdown table to this file.
    #[arg(long = "markdown", value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Compare a file whose run stopped before its plan was done (`complete: false`), knowing some points are
    /// missing [default: refused]
    #[arg(long = "allow-incomplete")]
    pub allow_incomplete: bool,

    #[command(flatten)]
    pub units: UnitsArg,
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

    #[command(flatten)]
    pub out: OutputArgs,

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

    #[command(flatten)]
    pub out: OutputArgs,

    /// Deadline in seconds for the bootstrap under a launcher.
    #[arg(short = 'T', long = "timeout", value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
}

// Headings that group `run --help` and `preflight --help`.
const SIZES: &str = "Sizes";
const WHAT: &str = "What to run";
const TIMING: &str = "Timing and reporting";
const TUNING: &str = "Algorithm and transport";
const OUTPUT: &str = "Output";
const VERDICT: &str = "Verdict";

mod groups;
mod model;
mod preflight;
mod run;
pub mod short_help;
#[cfg(test)]
mod tests;
pub mod values;

pub use groups::{DeadlineArgs, LinkArgs, OutputArgs, UnitsArg};
pub use model::ModelArgs;
pub use preflight::PreflightArgs;
pub use run::RunArgs;

//! The flags of `collbench run`.

use std::path::PathBuf;

use clap::Args;

use super::values::{self, Choices};
use super::{DeadlineArgs, LinkArgs, OutputArgs, UnitsArg, OUTPUT, SIZES, TIMING, TUNING, WHAT};
use crate::defaults;
use crate::sizes::format_size_arg;

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
    /// measured switch points (all_reduce rd below 128K, on 2^k ranks below 64K and rhd to 8M, then ring;
    /// all_gather Bruck below 256K, rd to 1M on 2^k ranks, then ring; the others 64K).
    #[arg(long = "algo-threshold", alias = "algo_threshold", value_name = "SIZE", help_heading = TUNING,
        default_value = "auto")]
    pub algo_threshold: String,

    /// With --algo auto, pick each point's algorithm by the lowest time a fitted model predicts (the JSON
    /// `collbench model -J` writes; its fit for the path's kind, tcp or rdma) where it prices auto's threshold
    /// pick and something beats it; elsewhere, and with --algo-threshold given, the threshold rule. Every rank
    /// reads the file and the ranks must agree on it [default: none]
    #[arg(long = "algo-model", alias = "algo_model", value_name = "FILE", help_heading = TUNING)]
    pub algo_model: Option<PathBuf>,

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

    #[command(flatten, next_help_heading = OUTPUT)]
    pub out: OutputArgs,

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

//! The flags of `collbench preflight`.

use std::path::PathBuf;

use clap::Args;

use super::values::{self, Choices};
use super::{DeadlineArgs, LinkArgs, OutputArgs, UnitsArg, OUTPUT, VERDICT, WHAT};
use crate::defaults;

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

    /// GPUs every node must have: a node with fewer fails the GPU count check (needs the cuda feature)
    /// [default: the ranks on the node under mpirun, srun or Kubernetes; not judged for --np's local ranks]
    #[arg(long = "gpus-per-node", value_name = "N", help_heading = VERDICT)]
    pub gpus_per_node: Option<usize>,

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

    #[command(flatten, next_help_heading = OUTPUT)]
    pub out: OutputArgs,

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

    /// Never draw the progress bar (it is drawn only when stderr is a terminal anyway).
    #[arg(long = "no-progress", alias = "no_progress", help_heading = OUTPUT)]
    pub no_progress: bool,

    #[command(flatten, next_help_heading = OUTPUT)]
    pub units: UnitsArg,

    /// Local ranks to spawn when no launcher (mpirun, srun, Kubernetes) is present.
    #[arg(long = "np", value_name = "N", help_heading = WHAT, default_value_t = defaults::NP)]
    pub np: usize,

    /// Where the phases' buffers live: host, or cuda (device memory, one GPU per rank: nccl takes it directly,
    /// tcp and rdma stage it through pinned host memory, as `run --memory cuda`; needs the cuda feature)
    #[arg(long = "memory", value_name = "KIND", help_heading = WHAT, default_value = "host",
        value_parser = Choices(values::MEMORY), hide_possible_values = true)]
    pub memory: String,

    /// CUDA device ordinal for --memory cuda [default: COLLBENCH_CUDA_DEVICE, else the local rank modulo the
    /// device count]
    #[arg(long = "device", value_name = "N", help_heading = WHAT)]
    pub device: Option<String>,

    #[command(flatten)]
    pub link: LinkArgs,

    #[command(flatten)]
    pub deadlines: DeadlineArgs,

    /// Testing aid, as `run --fault`: RANK:PHASE:ACTION makes one rank kill or stop itself at PHASE.
    #[arg(long = "fault", value_name = "RANK:PHASE:ACTION", hide = true)]
    pub fault: Option<String>,
}

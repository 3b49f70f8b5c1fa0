//! `collbench preflight`'s options, validated from its flags (naming the flag in every error): the verdict's
//! inputs and outputs ([`PreflightOptions`]), and the path, launch and deadline options its phases run with
//! ([`run_options`]). The rest of preflight reads these, never the flags.

use std::path::PathBuf;

use super::soak;
use crate::bench::options::MAX_REPEAT;
use crate::cli::PreflightArgs;
use crate::error::{Error, Result};
use crate::options::{
    AlgoOptions, BufferOptions, Deadlines, Options, Outputs, PathOptions, Progress, RdmaOptions, SweepOptions,
    TcpOptions, TestAids,
};
use crate::report::declared::Declared;
use crate::units::BwUnit;

/// What preflight judges against and writes, from its flags.
#[derive(Clone, Debug)]
pub struct PreflightOptions {
    /// Sweeps per phase (`--repeat`).
    pub repeat: u32,
    /// Seconds the whole check may take (`--budget`).
    pub budget: u64,
    /// `--no-pairwise`: skip the pairwise link test.
    pub no_pairwise: bool,
    /// `--soak`: seconds of repeated pairwise passes after the plan.
    pub soak_s: Option<f64>,
    /// `--expect FILE`.
    pub expect: Option<PathBuf>,
    /// `--baseline FILE`, a saved run to compare with.
    pub baseline: Option<PathBuf>,
    /// `--baseline-threshold`, in percent.
    pub baseline_threshold: f64,
    /// `--strict`: a WARN fails the job too.
    pub strict: bool,
    /// The output files.
    pub outputs: PreflightOutputs,
    /// The unit bandwidth is printed in (`--units`).
    pub units: BwUnit,
    /// `--gpus-per-node`: GPUs each node must have.
    pub gpus_per_node: Option<usize>,
}

/// Preflight's output files (`-J`, `--junit`, `--markdown`, `--metrics`) and `--force`.
#[derive(Clone, Debug, Default)]
pub struct PreflightOutputs {
    pub json: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
    pub force: bool,
}

impl PreflightOutputs {
    /// The output files asked for, with their flags.
    pub fn declared(&self) -> Declared<'_> {
        Declared::new(self.force)
            .file("-J/--output_file", self.json.as_deref())
            .file("--junit", self.junit.as_deref())
            .file("--markdown", self.markdown.as_deref())
            .file("--metrics", self.metrics.as_deref())
    }

    /// Whether an output file is standard output (`-J -`): the verdict's text then goes to stderr.
    pub fn stdout_taken(&self) -> bool {
        self.declared().stdout_taken()
    }
}

impl PreflightOptions {
    /// Validates the flags that can be checked without measuring, output files included.
    pub fn from_cli(args: &PreflightArgs) -> Result<PreflightOptions> {
        if !(1..=MAX_REPEAT).contains(&args.repeat) {
            return Err(Error::usage(
                "--repeat",
                format!("must be between 1 and {MAX_REPEAT} sweeps (got {})", args.repeat),
            ));
        }
        let soak_s = args.soak.as_deref().map(soak::parse_duration).transpose()?;
        if !args.baseline_threshold.is_finite() || args.baseline_threshold < 0.0 {
            return Err(Error::usage(
                "--baseline-threshold",
                format!("{} is not a percentage of 0 or more (e.g. 5)", args.baseline_threshold),
            ));
        }
        let gpus_per_node = args.gpus_per_node;
        if gpus_per_node == Some(0) {
            return Err(Error::usage(
                "--gpus-per-node",
                "must be 1 or more (leave it out on nodes without GPUs)",
            ));
        }
        if gpus_per_node.is_some() && !cfg!(feature = "cuda") {
            return Err(Error::usage(
                "--gpus-per-node",
                "the GPU checks need a collbench built with the cuda feature (cargo build --features cuda)",
            ));
        }
        let outputs = PreflightOutputs {
            json: args.out.output_file.clone(),
            junit: args.junit.clone(),
            markdown: args.markdown.clone(),
            metrics: args.metrics.clone(),
            force: args.out.force,
        };
        crate::report::file::refuse_same_file(&outputs.declared().files)?;
        Ok(PreflightOptions {
            repeat: args.repeat,
            budget: args.budget,
            no_pairwise: args.no_pairwise,
            soak_s,
            expect: args.expect.clone(),
            baseline: args.baseline.clone(),
            baseline_threshold: args.baseline_threshold,
            strict: args.strict,
            outputs,
            units: args.units.unit()?,
            gpus_per_node,
        })
    }
}

/// The largest bandwidth size asked for (`--bandwidth-bytes`), and the options `args` gives: `run`'s path,
/// launch and deadline parts validated as `run` validates them, host buffers, and no outputs (preflight writes
/// its own). The sweep is each phase's.
pub fn run_options(args: &PreflightArgs) -> Result<(u64, Options)> {
    let bw = super::plan::bandwidth_bytes(&args.bandwidth_bytes)?;
    let paths = PathOptions::from_cli(&args.link, None)?;
    let opts = Options {
        np: crate::options::np(args.np)?,
        sweep: SweepOptions::default(),
        algorithm: AlgoOptions::from_cli(&args.link, "auto")?,
        rdma: RdmaOptions::from_cli(&args.link)?,
        tcp: TcpOptions::from_cli(&args.link)?,
        buffers: BufferOptions::preflight(&args.memory, args.device.clone(), &paths)?,
        deadlines: Deadlines::from_cli(&args.deadlines)?,
        outputs: Outputs {
            progress: Progress::from_flag(args.no_progress),
            units: args.units.unit()?,
            ..Outputs::default()
        },
        aids: TestAids::from_cli(None, args.fault.as_deref())?,
        paths,
        nccl_tests: None,
    };
    Ok((bw, opts))
}

#[cfg(test)]
mod tests {
    use super::super::plan::{fit_memory, phase_options, union_options, Plan};
    use super::*;

    fn preflight_args(extra: &[&str]) -> PreflightArgs {
        use clap::Parser;
        let argv = ["collbench", "preflight"].iter().chain(extra);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Preflight(a) => *a,
            other => panic!("parsed as {other:?}"),
        }
    }

    fn base_options(args: &PreflightArgs) -> Result<Options> {
        run_options(args).map(|(_, o)| o)
    }

    #[test]
    fn path_flags_reach_the_phases_and_the_sweep_is_the_plans() {
        let base = base_options(&preflight_args(&[
            "--np",
            "3",
            "--streams",
            "2",
            "--line-rate",
            "25",
            "--rdma-qps",
            "3",
            "-T",
            "7",
            "--connect-timeout",
            "9",
            "--algo",
            "bruck",
            "--sndbuf",
            "auto",
            "--tcp-congestion",
            "reno",
        ]))
        .unwrap();
        let plan = Plan::new(4 << 20, 2);
        let o = phase_options(&base, &plan.phases[2]);
        assert_eq!(
            (o.np, o.tcp.streams, o.paths.line_rate_gbit, o.rdma.rdma_qps),
            (3, 2, Some(25.0), 3)
        );
        assert_eq!(
            (o.deadlines.timeout.as_secs(), o.deadlines.connect_timeout.as_secs()),
            (7, 9)
        );
        assert_eq!(
            (o.algorithm.algo, o.tcp.sndbuf),
            (crate::options::AlgoChoice::Bruck, None)
        );
        assert_eq!(o.tcp.tcp_congestion.as_deref(), Some("reno"));
        assert_eq!(
            (
                o.sweep.sizes.min,
                o.sweep.sizes.max,
                o.sweep.iters,
                o.sweep.warmup,
                o.sweep.check_iters
            ),
            (1 << 20, 4 << 20, 5, 1, 1)
        );
        let u = union_options(&base, &plan);
        assert_eq!(
            (u.sweep.sizes.min, u.sweep.sizes.max, u.sweep.collectives.len()),
            (8, 4 << 20, 2)
        );
        // Bad path flags are refused naming the flag, as `run` refuses them.
        let e = base_options(&preflight_args(&["--streams", "99"])).unwrap_err();
        assert!(e.to_string().starts_with("--streams:"), "{e}");
    }

    #[test]
    fn gpus_per_node_is_one_or_more_and_needs_the_cuda_feature() {
        let e = PreflightOptions::from_cli(&preflight_args(&["--gpus-per-node", "0"])).unwrap_err();
        assert!(e.to_string().starts_with("--gpus-per-node: must be 1 or more"), "{e}");
        let r = PreflightOptions::from_cli(&preflight_args(&["--gpus-per-node", "8"]));
        if cfg!(feature = "cuda") {
            assert_eq!(r.unwrap().gpus_per_node, Some(8));
        } else {
            assert!(r.unwrap_err().to_string().contains("cuda feature"));
        }
    }

    #[test]
    fn the_bandwidth_phase_is_lowered_to_what_memory_holds() {
        let base = base_options(&preflight_args(&[])).unwrap();
        let need = |b: u64| union_options(&base, &Plan::new(b, 3)).memory_needed();
        // Room for 4 ranks at 16 MiB but not at 32 MiB.
        let avail = 4 * need(16 << 20) + 1;
        assert!(4 * need(32 << 20) > avail);
        assert_eq!(fit_memory(&base, 64 << 20, 3, 4, avail), Some(16 << 20));
        assert_eq!(fit_memory(&base, 64 << 20, 3, 4, 1 << 20), None);
        assert_eq!(fit_memory(&base, 64 << 20, 3, 4, u64::MAX), Some(64 << 20));
    }
}

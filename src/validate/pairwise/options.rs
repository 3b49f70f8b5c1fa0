//! `collbench pairwise`'s options, validated from its flags (naming the flag in every error): the session
//! options of the one path it measures, the test, the budget and the outputs. The rest of the test reads these.

use std::path::PathBuf;

use super::PairwiseConfig;
use crate::cli::PairwiseArgs;
use crate::error::{Error, Result};
use crate::options::{own_path, Options};
use crate::report::declared::Declared;
use crate::sizes::parse_size;
use crate::units::BwUnit;

/// The files `pairwise` writes (`-J`, `--metrics`, `--plot`), `--force`, and the unit it prints in.
#[derive(Clone, Debug)]
pub struct PairwiseOutputs {
    pub json: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
    /// The heatmaps' directory.
    pub plot: Option<PathBuf>,
    pub force: bool,
    pub units: BwUnit,
}

impl PairwiseOutputs {
    /// The output files and chart directory asked for, with their flags.
    pub fn declared(&self) -> Declared<'_> {
        Declared::new(self.force)
            .file("-J/--output_file", self.json.as_deref())
            .file("--metrics", self.metrics.as_deref())
            .charts("--plot", self.plot.as_deref())
    }
}

/// Everything `pairwise`'s flags ask for: (session options, the test, the budget in seconds, the outputs).
pub fn from_cli(args: &PairwiseArgs) -> Result<(Options, PairwiseConfig, u64, PairwiseOutputs)> {
    let (opts, cfg) = options(args)?;
    let outputs = PairwiseOutputs {
        json: args.out.output_file.clone(),
        metrics: args.metrics.clone(),
        plot: args.plot.clone(),
        force: args.out.force,
        units: args.units.unit()?,
    };
    Ok((opts, cfg, args.budget, outputs))
}

/// Largest `--bytes`: two buffers of it per taking-part rank.
const MAX_BYTES: u64 = 1 << 30;
/// Most timed iterations of either kind.
const MAX_ITERS: usize = 1_000_000;

/// The session options and test configuration the flags ask for; errors name the flag.
fn options(args: &PairwiseArgs) -> Result<(Options, PairwiseConfig)> {
    if args.memory != "host" {
        return Err(Error::usage(
            "--memory",
            format!(
                "pairwise measures pairs on host memory only; GPU-to-GPU paths over NCCL's point-to-point are not \
                 measured pair by pair yet (got {}): run `collbench preflight --memory cuda --transport nccl` \
                 to check the GPUs and NCCL on device buffers, and pairwise on host memory for the network",
                args.memory
            ),
        ));
    }
    let opts = own_path::options(&own_path::PathFlags {
        command: "pairwise",
        np: args.np,
        transport: &args.transport,
        iface: args.iface.as_deref(),
        deadlines: &args.deadlines,
    })?;
    args.units.unit()?;
    let bytes = parse_size(&args.bytes).map_err(|e| Error::usage("--bytes", e))?;
    if !(1..=MAX_BYTES).contains(&bytes) {
        return Err(Error::usage(
            "--bytes",
            format!(
                "must be between 1 byte and 1G (got {}); a few MiB measures a link's bandwidth",
                args.bytes
            ),
        ));
    }
    for (flag, v) in [("-n/--iters", args.iters), ("--lat-iters", args.lat_iters)] {
        if !(1..=MAX_ITERS).contains(&v) {
            return Err(Error::usage(
                flag,
                format!("must be between 1 and {MAX_ITERS} (got {v})"),
            ));
        }
    }
    let cfg = PairwiseConfig {
        bytes: bytes as usize,
        iters: args.iters,
        lat_iters: args.lat_iters,
        per_host: !args.per_rank,
        confirm: !args.no_confirm,
    };
    Ok((opts, cfg))
}

//! `collbench pairwise`'s options, validated from its flags (naming the flag in every error): the session
//! options of the one path it measures, the test, the budget and the outputs. The rest of the test reads these.

use std::path::PathBuf;

use super::PairwiseConfig;
use crate::cli::PairwiseArgs;
use crate::error::{Error, Result};
use crate::options::{own_path, Options, PathKind};
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
    let on_gpus = args.memory == "cuda";
    // NCCL (whether or not this build has it) is the path on a device stream; plain tcp is the default.
    let traits = crate::transport::path::Traits::named(&args.transport);
    let path_nccl = traits.is_some_and(|t| t.on_device_stream);
    let default_path = args.transport.parse::<PathKind>().ok() == Some(PathKind::default());
    if path_nccl && !on_gpus {
        return Err(Error::usage(
            "--transport",
            "pairwise measures nccl on device buffers: add --memory cuda (pairs of GPUs over NCCL's \
             point-to-point)",
        ));
    }
    if on_gpus && !cfg!(feature = "cuda") {
        return Err(Error::usage("--memory", crate::nccl::not_built_message()));
    }
    if on_gpus && !(path_nccl || default_path) {
        return Err(Error::usage(
            "--transport",
            format!(
                "pairwise --memory cuda measures pairs of GPUs over NCCL's point-to-point, with a TCP control \
                 path on --iface: give --transport nccl or leave it out (got {}); pairwise on host memory \
                 measures {} itself",
                args.transport, args.transport
            ),
        ));
    }
    let mut opts = own_path::options(&own_path::PathFlags {
        command: "pairwise",
        np: args.np,
        transport: if on_gpus { "tcp" } else { &args.transport },
        iface: args.iface.as_deref(),
        deadlines: &args.deadlines,
    })?;
    if on_gpus {
        // One rank per GPU, each rank's device chosen as `run` chooses it; NCCL's communicator is set up over
        // the TCP control path on --iface.
        opts.paths.transports = vec![crate::path_names::NCCL
            .parse()
            .map_err(|e| Error::usage("--transport", e))?];
        opts.buffers.memory = crate::memory::MemoryKind::Cuda;
    }
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

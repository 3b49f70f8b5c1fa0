//! `collbench pairwise`: measures every pair over the path asked for (collbench's TCP transport, or its verbs
//! transport on an `rdma@` path, set up over a TCP control path), prints the matrices and findings on rank 0,
//! writes JSON and heatmaps; the driver launches it like `run`. The work is `validate::pairwise::command`'s.
//!
//! Exit status: 0 no finding, 1 a slow host or link named, 2 bad flags, 3 a peer or deadline failed,
//! 4 an output file could not be written.

use std::ffi::OsString;

use crate::cli::PairwiseArgs;
use crate::driver::drive;
use crate::error::Result;
use crate::validate::pairwise::command::PairwiseCommand;
use crate::validate::pairwise::options;

/// Runs `collbench pairwise` with the command line `argv` (program name first); returns the exit status.
pub fn pairwise(args: &PairwiseArgs, argv: &[OsString]) -> Result<i32> {
    let (opts, cfg, budget_s, outputs) = options::from_cli(args)?;
    drive(&mut PairwiseCommand::new(opts, cfg, budget_s, outputs), argv, &|k| {
        std::env::var(k).ok()
    })
}

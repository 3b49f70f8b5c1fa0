//! `collbench p2p`: launches like `pairwise` (local ranks without a launcher, one rank per process under
//! one), sweeps latency and bandwidth between the two ranks of `--pair` in OSU's shape, prints both sweeps on
//! rank 0 and writes JSON. The work is `validate::p2p`'s.
//!
//! Exit status: 0 measured, 2 bad flags (a rank of `--pair` outside the job included), 3 a peer or deadline
//! failed, 4 an output file could not be written.

use std::ffi::OsString;

use crate::cli::P2pArgs;
use crate::error::Result;
use crate::validate::p2p;
use crate::world::env;

/// Runs `collbench p2p` with the command line `argv` (program name first); returns the exit status.
pub fn p2p(args: &P2pArgs, argv: &[OsString]) -> Result<i32> {
    let (opts, cfg) = p2p::options(args)?;
    match env::identity_from(|k| std::env::var(k).ok())? {
        None => p2p::launch(&opts, &cfg, args, argv),
        Some(id) => p2p::run_rank(&opts, &cfg, &id, args),
    }
}

//! `collbench p2p`: sweeps latency and bandwidth between the two ranks of `--pair` in OSU's shape, prints both
//! sweeps on rank 0 and writes JSON; the driver launches it like `run`. The work is `p2p`'s.
//!
//! Exit status: 0 measured, 2 bad flags (a rank of `--pair` outside the job included), 3 a peer or deadline
//! failed, 4 an output file could not be written (on every rank: the job ends with rank 0's status).

use std::ffi::OsString;

use crate::cli::P2pArgs;
use crate::driver::drive;
use crate::error::Result;

/// Runs `collbench p2p` with the command line `argv` (program name first); returns the exit status.
pub fn p2p(args: &P2pArgs, argv: &[OsString]) -> Result<i32> {
    drive(&mut crate::p2p::options::command(args)?, argv, &|k| {
        std::env::var(k).ok()
    })
}

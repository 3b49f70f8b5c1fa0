//! `collbench run`: check what can be checked before any rank starts, then launch local ranks or be one
//! rank of a launched job.

use std::ffi::OsString;

use crate::cli::RunArgs;
use crate::error::Result;
use crate::options::Options;
use crate::run::{launch_local, run_rank};
use crate::world::env;

/// Runs `collbench run` with the command line `argv` (program name first); returns the exit status.
pub fn run(args: &RunArgs, argv: &[OsString]) -> Result<i32> {
    let opts = Options::from_cli(args)?;
    // The host is asked only now: validating the options touches nothing outside them.
    opts.tcp.check_host()?;
    // Before any rank starts: a missing driver or an unbuilt feature is a usage error, not a rank failure.
    // The emulated device (a testing aid) needs neither.
    if !opts.buffers.emulate_device {
        crate::memory::kind::check_run_memory(&args.memory)?;
    }
    // Each path's likewise (a missing libnccl stops the run before any rank starts).
    crate::paths::check_host(&opts)?;
    match env::identity_from(|k| std::env::var(k).ok())? {
        None => launch_local(&opts, argv),
        Some(id) => run_rank(&opts, &id, argv),
    }
}

//! `collbench run`: check what can be checked before any rank starts, then the driver launches local ranks or
//! is one rank of a launched job.

use std::ffi::OsString;

use crate::cli::RunArgs;
use crate::driver::drive;
use crate::error::Result;
use crate::options::Options;
use crate::run::RunCommand;

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
    drive(&mut RunCommand::new(opts, argv), argv, &|k| std::env::var(k).ok())
}

//! `collbench preflight`: a short fixed plan, measured within a time budget and judged against expectations.

use std::ffi::OsString;

use crate::cli::PreflightArgs;
use crate::driver::drive;
use crate::error::Result;
use crate::validate::preflight::options::{run_options, PreflightOptions};
use crate::validate::preflight::{self, PreflightCommand};

/// Runs `collbench preflight` with the command line `argv` (program name first); returns the exit status.
pub fn preflight(args: &PreflightArgs, argv: &[OsString]) -> Result<i32> {
    let pre = PreflightOptions::from_cli(args)?;
    if let Some(saved) = &args.from_results {
        return preflight::decide::from_results(&pre, saved);
    }
    let (bw, base) = run_options(args)?;
    let setup = preflight::setup(pre, bw, base)?;
    drive(&mut PreflightCommand::new(setup), argv, &|k| std::env::var(k).ok())
}

//! `collbench preflight`: a short fixed plan, measured within a time budget and judged against expectations.

use std::ffi::OsString;

use crate::cli::PreflightArgs;
use crate::driver::drive;
use crate::error::Result;
use crate::validate::preflight::{self, PreflightCommand};

/// Runs `collbench preflight` with the command line `argv` (program name first); returns the exit status.
pub fn preflight(args: &PreflightArgs, argv: &[OsString]) -> Result<i32> {
    preflight::check_flags(args)?;
    if let Some(saved) = &args.from_results {
        return preflight::decide::from_results(args, saved);
    }
    let setup = preflight::setup(args)?;
    drive(&mut PreflightCommand::new(setup), argv, &|k| std::env::var(k).ok())
}

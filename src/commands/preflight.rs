//! `collbench preflight`: a short fixed plan, measured within a time budget and judged against expectations.

use std::ffi::OsString;

use crate::cli::PreflightArgs;
use crate::error::Result;
use crate::validate::preflight;
use crate::world::env;

/// Runs `collbench preflight` with the command line `argv` (program name first); returns the exit status.
pub fn preflight(args: &PreflightArgs, argv: &[OsString]) -> Result<i32> {
    preflight::check_flags(args)?;
    if let Some(saved) = &args.from_results {
        return preflight::decide::from_results(args, saved);
    }
    let setup = preflight::setup(args)?;
    match env::identity_from(|k| std::env::var(k).ok())? {
        None => preflight::launch(&setup, argv),
        Some(id) => preflight::rank::run_rank(&setup, &id),
    }
}

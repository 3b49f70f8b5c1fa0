//! `collbench completions SHELL`: the shell completion script, generated from the clap definitions.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::Error;

/// `collbench completions SHELL`: the completion script for SHELL on stdout. Generated into memory first so
/// a closed stdout is an error with a message, not a panic inside clap_complete.
pub fn completions(args: &CompletionsArgs) -> Result<i32, Error> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "collbench", &mut script);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .map_err(|e| Error::io("writing the completion script to stdout", e))?;
    Ok(0)
}

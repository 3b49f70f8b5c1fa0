//! The subcommands' entry points, one file each: each takes its parsed flags, does what the subcommand
//! does by calling the layers below, and returns the exit status. [`main`] is the whole program: parse,
//! dispatch, and map an error to its message and exit code in one place.

use std::ffi::OsString;

use crate::cli::Command;
use crate::error::{stderr, Error};

mod alias;
mod compare;
mod completions;
mod gpu_matrix;
mod info;
mod install_aliases;
mod model;
mod p2p;
mod pairwise;
mod plot;
mod preflight;
mod run;
mod selftest;

/// Runs collbench with the command line `argv` (program name first); returns the exit status.
pub fn main(argv: &[OsString]) -> i32 {
    // Under an nccl-tests name (all_reduce_perf, ...): that program's flags, output and exit status.
    if let Some(code) = alias::dispatch(argv) {
        return code;
    }
    let cli = match crate::cli::short_help::parse(argv) {
        Ok(cli) => cli,
        Err(e) => return report_usage(&e),
    };
    let outcome = match &cli.command {
        Command::Run(args) => run::run(args, argv),
        Command::Info(args) => info::info(args, argv),
        Command::Plot(args) => plot::plot(args),
        Command::Model(args) => model::model(args),
        Command::Compare(args) => compare::compare(args),
        Command::Selftest(args) => selftest::selftest(args),
        Command::Preflight(args) => preflight::preflight(args, argv),
        Command::Pairwise(args) => pairwise::pairwise(args, argv),
        Command::P2p(args) => p2p::p2p(args, argv),
        Command::GpuMatrix(args) => gpu_matrix::gpu_matrix(args),
        Command::Completions(args) => completions::completions(args),
        Command::InstallAliases(args) => install_aliases::install_aliases(args),
    };
    outcome.unwrap_or_else(|e| report_error(&e))
}

/// Prints clap's outcome: `--help` and `-V` to stdout (exit 0); a usage error to stderr with the prefix every
/// collbench error has, then clap's usage lines (exit 2).
fn report_usage(e: &clap::Error) -> i32 {
    if !e.use_stderr() {
        // --help, --version: what the user asked for, printed as clap formats it.
        let _ = e.print();
        return 0;
    }
    let text = e.render().to_string();
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // No subcommand: the help, not an error message.
        stderr!("{}", text.trim_end());
        return 2;
    }
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    stderr!("collbench: error: {}", text.trim_end());
    2
}

/// Prints `e` the way every collbench error reaches the user and returns its exit status.
pub fn report_error(e: &Error) -> i32 {
    stderr!("collbench: error: {e}");
    e.exit_code()
}

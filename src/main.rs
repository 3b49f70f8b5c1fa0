//! The collbench binary: parse, run, map errors to exit codes.

use clap::Parser;

use collbench::cli::{Cli, Command};

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Under an nccl-tests name (all_reduce_perf, ...): that program's flags, output and exit status.
    if let Some(code) = collbench::alias::dispatch(&argv) {
        std::process::exit(code);
    }
    let cli = Cli::parse_from(&argv);
    let outcome = match &cli.command {
        Command::Run(args) => collbench::run::run(args, &argv),
        Command::Info(args) => collbench::info::info(args),
        Command::Plot(args) => collbench::plot::command::plot(args),
        Command::Model(args) => collbench::model::model(args),
        Command::Compare(args) => collbench::compare::compare(args),
        Command::Selftest(args) => collbench::selftest::selftest(args),
        Command::Preflight(args) => collbench::validate::preflight::preflight(args, &argv),
        Command::Pairwise(args) => collbench::validate::pairwise::command::pairwise(args, &argv),
        Command::GpuMatrix(args) => collbench::gpumatrix::gpu_matrix(args),
        Command::Completions(args) => collbench::docgen::completions(args),
        Command::InstallAliases(args) => collbench::alias::install::install_aliases(args),
    };
    std::process::exit(outcome.unwrap_or_else(|e| collbench::run::report_error(&e)));
}

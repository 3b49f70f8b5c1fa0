//! The collbench binary: parse, run, map errors to exit codes.

use clap::Parser;

use collbench::cli::{Cli, Command};

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = Cli::parse_from(&argv);
    let code = match &cli.command {
        Command::Run(args) => collbench::run::run(args, &argv).unwrap_or_else(|e| collbench::run::report_error(&e)),
        Command::Info(args) => collbench::info::info(args).unwrap_or_else(|e| collbench::run::report_error(&e)),
        Command::Plot(args) => {
            collbench::plot::command::plot(args).unwrap_or_else(|e| collbench::run::report_error(&e))
        }
        Command::Model(args) => collbench::model::model(args).unwrap_or_else(|e| collbench::run::report_error(&e)),
        Command::Compare(args) => {
            collbench::compare::compare(args).unwrap_or_else(|e| collbench::run::report_error(&e))
        }
        Command::Selftest(args) => {
            collbench::selftest::selftest(args).unwrap_or_else(|e| collbench::run::report_error(&e))
        }
        Command::Preflight(args) => {
            collbench::validate::preflight::preflight(args, &argv).unwrap_or_else(|e| collbench::run::report_error(&e))
        }
        Command::Pairwise(args) => collbench::validate::pairwise::command::pairwise(args, &argv)
            .unwrap_or_else(|e| collbench::run::report_error(&e)),
        Command::GpuMatrix(args) => {
            collbench::gpumatrix::gpu_matrix(args).unwrap_or_else(|e| collbench::run::report_error(&e))
        }
        Command::Completions(args) => {
            collbench::docgen::completions(args).unwrap_or_else(|e| collbench::run::report_error(&e))
        }
    };
    std::process::exit(code);
}

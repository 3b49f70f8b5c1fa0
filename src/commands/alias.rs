//! collbench under an nccl-tests program name (`all_reduce_perf`, ...): that program's flags, translated
//! to `collbench run`'s, its output and its exit status.

use std::ffi::OsString;

use clap::Parser;

use crate::alias::flags::{Backend, Parsed};
use crate::cli::{Cli, Command};
use crate::error::{stderr, Error, Result};

/// Runs as the nccl-tests program `argv[0]` names, when it names one: the exit status; `None` otherwise
/// (collbench's own command line).
pub fn dispatch(argv: &[OsString]) -> Option<i32> {
    let (program, collective) = crate::alias::program_of(argv.first()?)?;
    let args: Vec<String> = argv[1..].iter().map(|a| a.to_string_lossy().into_owned()).collect();
    Some(match run_as(program, collective, &args) {
        Ok(code) => code,
        Err(e) => {
            stderr!("{program} (collbench): error: {e}");
            e.exit_code()
        }
    })
}

/// Which path this machine runs, and in a few words why not NCCL where not (the whole reason, with what to
/// do, is what `collbench run --transport nccl --memory cuda` says: docs/nccl-tests.md).
fn backend() -> (Backend, Option<&'static str>) {
    if !cfg!(feature = "cuda") {
        return (Backend::Tcp, Some("built without the cuda feature"));
    }
    if crate::memory::kind::check_run_memory("cuda").is_err() {
        return (Backend::Tcp, Some("no usable CUDA driver or GPU"));
    }
    match crate::nccl::check_run(crate::memory::MemoryKind::Cuda) {
        Ok(_) => (Backend::Nccl, None),
        Err(_) => (Backend::Tcp, Some("libnccl not usable")),
    }
}

fn run_as(program: &str, collective: &str, args: &[String]) -> Result<i32> {
    let launched = crate::world::env::identity_from(|k| std::env::var(k).ok())?.is_some();
    let (path, why_not) = backend();
    let parsed = crate::alias::flags::translate(
        collective,
        program,
        args,
        &|k| std::env::var(k).ok(),
        launched,
        &|p| p.exists(),
        path,
    )?;
    let (run_args, notes) = match parsed {
        Parsed::Help => {
            crate::report::stdout::print(&crate::alias::flags::usage(program))?;
            return Ok(0);
        }
        Parsed::Run { args, notes } => (args, notes),
    };
    let rank0 = std::env::var("RANK").map_or(true, |r| r == "0")
        && std::env::var("OMPI_COMM_WORLD_RANK").map_or(true, |r| r == "0");
    // The ranks a local launch starts run this same `collbench run` command line.
    let mut argv: Vec<OsString> = vec!["collbench".into(), "run".into()];
    argv.extend(run_args.into_iter().map(OsString::from));
    let cli = Cli::try_parse_from(&argv).map_err(|e| Error::usage(program.to_string(), e.to_string()))?;
    let Command::Run(run) = &cli.command else {
        unreachable!("the command line built above is `collbench run`")
    };
    // Checked before any note, so a mistyped flag is answered by its error alone.
    crate::options::Options::from_cli(run)?;
    if rank0 {
        if let Some(why) = why_not {
            // One short line: the stdout header says the same; the long reason is in docs/nccl-tests.md.
            stderr!("{program} (collbench): note: not NCCL ({why}): tcp on host memory");
        }
        for n in notes {
            // nccl-tests' own line about the JSON file is on its stdout, before the header.
            if n.starts_with("# ") {
                crate::report::stdout::print(&format!("{n}\n"))?;
            } else {
                stderr!("{n}");
            }
        }
    }
    super::run::run(run, &argv)
}

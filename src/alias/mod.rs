//! collbench under nccl-tests' names: invoked as `all_reduce_perf`, `all_gather_perf`, ... (links made by
//! `collbench install-aliases DIR`), it runs that one collective with nccl-tests' flags ([`flags`]), defaults,
//! stdout ([`crate::report::nccl_table`]) and exit status. Where a GPU, the cuda build and libnccl are
//! present it runs NCCL's collectives on device memory; elsewhere collbench's tcp path on host memory.

pub mod flags;
pub mod install;

use std::ffi::OsString;
use std::path::Path;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};
use crate::report::nccl_table::PROGRAMS;
use flags::{Backend, Parsed};

/// The nccl-tests program `argv0` names (its file name, as nccl-tests reads it), with its collective.
pub fn program_of(argv0: &OsString) -> Option<(&'static str, &'static str)> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    PROGRAMS.iter().copied().find(|(p, _)| *p == name)
}

/// Runs as the nccl-tests program `argv[0]` names, when it names one: the exit status; `None` otherwise
/// (collbench's own command line).
pub fn dispatch(argv: &[OsString]) -> Option<i32> {
    let (program, collective) = program_of(argv.first()?)?;
    let args: Vec<String> = argv[1..].iter().map(|a| a.to_string_lossy().into_owned()).collect();
    Some(match run_as(program, collective, &args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{program} (collbench): error: {e}");
            e.exit_code()
        }
    })
}

/// Which path this machine runs, and why not NCCL where not.
fn backend() -> (Backend, Option<String>) {
    if !cfg!(feature = "cuda") {
        return (
            Backend::Tcp,
            Some("this collbench is built without the cuda feature".into()),
        );
    }
    let ready = crate::memory::kind::check_run_memory("cuda")
        .and_then(|_| crate::nccl::check_run(crate::memory::MemoryKind::Cuda));
    match ready {
        Ok(_) => (Backend::Nccl, None),
        Err(e) => (Backend::Tcp, Some(e.to_string())),
    }
}

fn run_as(program: &str, collective: &str, args: &[String]) -> Result<i32> {
    let launched = crate::world::env::identity_from(|k| std::env::var(k).ok())?.is_some();
    let (path, why_not) = backend();
    let parsed = flags::translate(
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
            print!("{}", flags::usage(program));
            return Ok(0);
        }
        Parsed::Run { args, notes } => (args, notes),
    };
    let rank0 = std::env::var("RANK").map_or(true, |r| r == "0")
        && std::env::var("OMPI_COMM_WORLD_RANK").map_or(true, |r| r == "0");
    if rank0 {
        if let Some(why) = why_not {
            eprintln!("{program} (collbench): note: not NCCL here ({why}); collbench's tcp path on host memory");
        }
        for n in notes {
            // nccl-tests' own line about the JSON file is on its stdout, before the header.
            if n.starts_with("# ") {
                println!("{n}");
            } else {
                eprintln!("{n}");
            }
        }
    }
    // The ranks a local launch starts run this same `collbench run` command line.
    let mut argv: Vec<OsString> = vec!["collbench".into(), "run".into()];
    argv.extend(run_args.into_iter().map(OsString::from));
    let cli = Cli::try_parse_from(&argv).map_err(|e| Error::usage(program.to_string(), e.to_string()))?;
    let Command::Run(run) = &cli.command else {
        unreachable!("the command line built above is `collbench run`")
    };
    crate::run::run(run, &argv)
}

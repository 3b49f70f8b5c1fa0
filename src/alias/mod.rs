//! collbench under nccl-tests' names: invoked as `all_reduce_perf`, `all_gather_perf`, ... (links made by
//! `collbench install-aliases DIR`), it runs that one collective with nccl-tests' flags ([`flags`]), defaults,
//! stdout (`report::nccl_table`) and exit status; the entry point is in `commands`. Where a GPU, the cuda build and libnccl are
//! present it runs NCCL's collectives on device memory; elsewhere collbench's tcp path on host memory.

pub mod flags;
pub mod install;

use std::ffi::OsString;
use std::path::Path;

use crate::report::nccl_table::PROGRAMS;

/// The nccl-tests program `argv0` names (its file name, as nccl-tests reads it), with its collective.
pub fn program_of(argv0: &OsString) -> Option<(&'static str, &'static str)> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    PROGRAMS.iter().copied().find(|(p, _)| *p == name)
}

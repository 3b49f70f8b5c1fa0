//! `collbench selftest`'s options, validated from its flags (naming the flag in every error): the CPU
//! kernels' [`SelftestOptions`] and the GPU check's [`GpuSelftest`].

use std::path::PathBuf;

use super::{SelftestOptions, MAX_BYTES};
use crate::cli::SelftestArgs;
use crate::error::{Error, Result};
use crate::reduce::Dtype;
use crate::sizes::{format_size, parse_size};
use crate::units::BwUnit;

impl SelftestOptions {
    /// Validates the flags; every error names the flag.
    pub fn from_args(args: &SelftestArgs) -> Result<Self> {
        let bytes = parse_size(&args.bytes).map_err(|m| Error::usage("--bytes", m))?;
        if bytes == 0 {
            return Err(Error::usage("--bytes", "must be at least 8 bytes (one double)"));
        }
        if bytes > MAX_BYTES {
            return Err(Error::usage(
                "--bytes",
                format!(
                    "{} is above the limit of {} (two buffers of this size are allocated)",
                    format_size(bytes),
                    format_size(MAX_BYTES)
                ),
            ));
        }
        let widest = Dtype::Double.size() as u64;
        if bytes % widest != 0 {
            return Err(Error::usage(
                "--bytes",
                format!("{bytes} is not a multiple of {widest} bytes, the widest element measured (double)"),
            ));
        }
        if args.iters == 0 {
            return Err(Error::usage("--iters", "must be at least 1"));
        }
        Ok(SelftestOptions {
            bytes: bytes as usize,
            iters: args.iters,
        })
    }
}

/// What `selftest --gpu` runs and writes.
#[derive(Debug, Clone)]
pub struct GpuSelftest {
    /// Rounds of the bandwidth measurement.
    pub iters: usize,
    /// The CUDA device asked for (`--device`).
    pub device: Option<String>,
    pub units: BwUnit,
    /// The JSON file (`-J`), where asked for.
    pub json: Option<PathBuf>,
    /// `--force`.
    pub force: bool,
}

impl GpuSelftest {
    /// Validates the flags `--gpu` reads; every error names the flag.
    pub fn from_args(args: &SelftestArgs) -> Result<Self> {
        if args.iters == 0 {
            return Err(Error::usage("--iters", "must be at least 1"));
        }
        Ok(GpuSelftest {
            iters: args.iters,
            device: args.device.clone(),
            units: args.units.unit()?,
            json: args.out.output_file.clone(),
            force: args.out.force,
        })
    }
}

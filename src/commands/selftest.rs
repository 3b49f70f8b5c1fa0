//! `collbench selftest`: the CPU reduction kernels against memory copy bandwidth (or the GPU's, `--gpu`).

use crate::cli::SelftestArgs;
#[cfg(not(feature = "cuda"))]
use crate::error::Error;
use crate::error::{Result, EXIT_OK};
use crate::selftest::{measure, render, SelftestOptions};

/// Runs the subcommand: measure, print the table, write JSON if asked. Exits 0 whatever the ratios.
pub fn selftest(args: &SelftestArgs) -> Result<i32> {
    // Checked before measuring, as `run` does: a result file from an earlier run is never replaced unasked,
    // and a path that cannot be written fails now rather than after the measurement.
    crate::report::declared::Declared::new(args.out.force)
        .file("-J/--output_file", args.out.output_file.as_deref())
        .check()?;
    if args.gpu {
        #[cfg(feature = "cuda")]
        return crate::selftest::gpu::selftest_gpu(&crate::selftest::options::GpuSelftest::from_args(args)?);
        #[cfg(not(feature = "cuda"))]
        return Err(Error::usage("--gpu", crate::memory::cuda_probe::not_built_message()));
    }
    let opts = SelftestOptions::from_args(args)?;
    let units = args.units.unit()?;
    let report = measure(opts);
    crate::report::stdout::print(&render(&report, units))?;
    if let Some(p) = &args.out.output_file {
        let text = serde_json::to_string_pretty(&report).expect("selftest JSON serialises");
        crate::report::file::write_atomic(
            p,
            text.as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    Ok(EXIT_OK)
}

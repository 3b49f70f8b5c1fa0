//! `collbench gpu-matrix`: device-to-device copy bandwidth between every GPU pair of this node.

use crate::cli::GpuMatrixArgs;
use crate::error::{Error, Result, EXIT_OK, EXIT_WRONG};
use crate::gpumatrix::{check_args, judge};

/// Runs `collbench gpu-matrix`; exit 1 when a pair is flagged.
pub fn gpu_matrix(args: &GpuMatrixArgs) -> Result<i32> {
    let (bytes, iters, threshold) = check_args(args)?;
    let copies = measure_copies(bytes, iters)?;
    let topo = crate::net::nvml::read();
    let report = judge::judge(&copies, &topo, bytes, iters, threshold);
    crate::report::stdout::print(&judge::render(&report))?;
    if let Some(p) = &args.out.output_file {
        let text = serde_json::to_string_pretty(&report).expect("the report serialises");
        crate::report::file::write_atomic(
            p,
            text.as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    Ok(if report.flagged > 0 { EXIT_WRONG } else { EXIT_OK })
}

#[cfg(feature = "cuda")]
fn measure_copies(bytes: u64, iters: usize) -> Result<Vec<judge::Copy>> {
    let bytes = usize::try_from(bytes).map_err(|_| Error::usage("--bytes", "too large for this machine"))?;
    crate::gpumatrix::measure::measure(bytes, iters).map_err(|m| Error::usage("gpu-matrix", m))
}

#[cfg(not(feature = "cuda"))]
fn measure_copies(_bytes: u64, _iters: usize) -> Result<Vec<judge::Copy>> {
    Err(Error::usage(
        "gpu-matrix",
        crate::memory::cuda_probe::not_built_message(),
    ))
}

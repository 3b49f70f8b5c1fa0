//! `collbench gpu-matrix`: device-to-device copy bandwidth between every ordered GPU pair on this node,
//! against what each pair's link should give, flagging pairs far below it (the scheduling failure that
//! splits NVLink-connected GPUs shows as NVLink peers copying at PCIe speed).

pub mod judge;
#[cfg(feature = "cuda")]
pub mod measure;

use crate::cli::GpuMatrixArgs;
use crate::error::{Error, Result, EXIT_OK, EXIT_WRONG};
use crate::sizes::parse_size;

/// Checked flags: bytes per copy, timed copies per pair, flagging threshold.
pub fn check_args(args: &GpuMatrixArgs) -> Result<(u64, usize, f64)> {
    let bytes = parse_size(&args.bytes).map_err(|m| Error::usage("--bytes", m))?;
    if bytes == 0 {
        return Err(Error::usage("--bytes", "must be at least 1 byte (try 256M)"));
    }
    if args.iters == 0 {
        return Err(Error::usage("-n/--iters", "must be at least 1 timed copy per pair"));
    }
    if !(args.threshold > 0.0 && args.threshold <= 1.0) {
        return Err(Error::usage(
            "--threshold",
            format!(
                "must be a fraction above 0 and at most 1 (got {}); 0.5 flags pairs under half their link",
                args.threshold
            ),
        ));
    }
    if let Some(p) = &args.output_file {
        crate::report::file::check_writable(p, args.force, "-J/--output_file")?;
    }
    Ok((bytes, args.iters, args.threshold))
}

/// Runs `collbench gpu-matrix`; exit 1 when a pair is flagged.
pub fn gpu_matrix(args: &GpuMatrixArgs) -> Result<i32> {
    let (bytes, iters, threshold) = check_args(args)?;
    let copies = measure_copies(bytes, iters)?;
    let topo = crate::net::nvml::read();
    let report = judge::judge(&copies, &topo, bytes, iters, threshold);
    print!("{}", judge::render(&report));
    if let Some(p) = &args.output_file {
        let text = serde_json::to_string_pretty(&report).expect("the report serialises");
        crate::report::file::write_atomic(p, text.as_bytes())?;
    }
    Ok(if report.flagged > 0 { EXIT_WRONG } else { EXIT_OK })
}

#[cfg(feature = "cuda")]
fn measure_copies(bytes: u64, iters: usize) -> Result<Vec<judge::Copy>> {
    let bytes = usize::try_from(bytes).map_err(|_| Error::usage("--bytes", "too large for this machine"))?;
    measure::measure(bytes, iters).map_err(|m| Error::usage("gpu-matrix", m))
}

#[cfg(not(feature = "cuda"))]
fn measure_copies(_bytes: u64, _iters: usize) -> Result<Vec<judge::Copy>> {
    Err(Error::usage(
        "gpu-matrix",
        crate::memory::cuda_probe::not_built_message(),
    ))
}

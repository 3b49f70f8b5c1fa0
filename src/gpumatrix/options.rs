//! `collbench gpu-matrix`'s flags, validated naming the flag.

use crate::cli::GpuMatrixArgs;
use crate::error::{Error, Result};
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
    crate::report::declared::Declared::new(args.out.force)
        .file("-J/--output_file", args.out.output_file.as_deref())
        .check()?;
    Ok((bytes, args.iters, args.threshold))
}

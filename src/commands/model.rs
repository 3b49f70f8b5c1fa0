//! `collbench model`: alpha-beta-gamma fits of results files and predictions at a target scale.

use crate::cli::ModelArgs;
use crate::error::{Error, Result};
use crate::model::{attach_measured, input, predict, render, ModelOptions};
use crate::report::file::check_writable;

/// `collbench model`: reads the files, fits, predicts, prints the table and writes the files asked for.
/// Returns the exit status.
pub fn model(args: &ModelArgs) -> Result<i32> {
    for (flag, f) in [("-J", &args.output_file), ("--markdown", &args.markdown)] {
        if let Some(p) = f {
            check_writable(p, args.force, flag)?;
        }
    }
    let mut samples = Vec::new();
    for f in &args.files {
        samples.extend(input::read_file(f)?);
    }
    let opts = ModelOptions {
        target_ranks: args.target_ranks,
        ranks_per_node: args.ranks_per_node,
        local_path: args.local_path.clone(),
        reference: args.reference.clone(),
        weighting: args.weight.parse().map_err(|e: String| Error::usage("--weight", e))?,
    };
    let mut report = predict(&samples, &opts)?;
    if !args.measured.is_empty() {
        let mut measured = Vec::new();
        for f in &args.measured {
            measured.extend(input::read_file(f)?);
        }
        if !measured.iter().any(|s| s.nranks == args.target_ranks) {
            return Err(Error::usage(
                "--measured",
                format!(
                    "no point in these files ran on {} ranks (the target)",
                    args.target_ranks
                ),
            ));
        }
        attach_measured(&mut report, &measured);
    }
    let text = render::text(&report);
    crate::report::stdout::print(&text)?;
    if let Some(p) = &args.output_file {
        let mut bytes =
            serde_json::to_vec_pretty(&report).map_err(|e| Error::io(format!("encoding {}", p.display()), e.into()))?;
        bytes.push(b'\n');
        crate::report::file::write_atomic(p, &bytes)?;
    }
    if let Some(p) = &args.markdown {
        crate::report::file::write_atomic(p, render::markdown(&report).as_bytes())?;
    }
    Ok(crate::error::EXIT_OK)
}

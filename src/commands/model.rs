//! `collbench model`: alpha-beta-gamma fits of results files and predictions at a target scale.

use crate::cli::ModelArgs;
use crate::error::{stderr, Error, Result};
use crate::model::Report;
use crate::model::{attach_measured, input, predict, render, ModelOptions};
use crate::report::declared::Declared;

/// `collbench model`: reads the files, fits, predicts, prints the table and writes the files asked for.
/// Returns the exit status.
pub fn model(args: &ModelArgs) -> Result<i32> {
    Declared::new(args.out.force)
        .file("-J/--output_file", args.out.output_file.as_deref())
        .file("--markdown", args.markdown.as_deref())
        .check()?;
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
    for w in weak_fit_warnings(&mut report) {
        stderr!("collbench: warning: {w}");
    }
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
    let text = render::text(&report, args.units.unit()?);
    crate::report::stdout::print(&text)?;
    if let Some(p) = &args.out.output_file {
        let mut bytes =
            serde_json::to_vec_pretty(&report).map_err(|e| Error::io(format!("encoding {}", p.display()), e.into()))?;
        bytes.push(b'\n');
        crate::report::file::write_atomic(p, &bytes, crate::report::file::Replace::from_force(args.out.force))?;
    }
    if let Some(p) = &args.markdown {
        crate::report::file::write_atomic(
            p,
            render::markdown(&report).as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    Ok(crate::error::EXIT_OK)
}

/// Below this R^2 a fit explains too little of the measured times for its predictions to be trusted.
pub const WEAK_R2: f64 = 0.9;

/// Above this relative RMS of its residuals (25%) a fit misses the times it was fitted to by more than a
/// quarter: its predictions are at least as far off.
pub const POOR_RMS: f64 = 0.25;

/// Above this largest relative residual (100%) a fit misses some measured time by its whole size.
pub const POOR_MAX: f64 = 1.0;

/// Beyond this many times the largest measured rank count, how the time grows with ranks is extrapolated
/// rather than measured.
pub const FAR_FACTOR: usize = 4;

/// Warnings for fits whose predictions should not be trusted, each saying by how much: R^2 below
/// [`WEAK_R2`]; residuals over [`POOR_RMS`] (RMS) or [`POOR_MAX`] (largest); a prediction whose 95% interval
/// is wider than itself; a target more than [`FAR_FACTOR`] times the largest rank count fitted. Each is also
/// added to its fit's notes, so the printed report and its files say it too.
fn weak_fit_warnings(report: &mut Report) -> Vec<String> {
    let target = report.target_ranks;
    let mut all = Vec::new();
    for fit in &mut report.fits {
        let mut warn = Vec::new();
        if fit.r2.is_finite() && fit.r2 < WEAK_R2 {
            warn.push(format!(
                "the fit of {} has R^2 {:.3}, below {WEAK_R2}: it explains little of the measured times, so its \
                 predictions are weak; measure more sizes, more iterations or more rank counts",
                fit.path, fit.r2
            ));
        }
        let (rms, max) = (fit.rel_rms * 100.0, fit.rel_max * 100.0);
        if (fit.rel_rms.is_finite() && fit.rel_rms > POOR_RMS) || (fit.rel_max.is_finite() && fit.rel_max > POOR_MAX) {
            warn.push(format!(
                "the fit of {} misses the times it was fitted to by {rms:.1}% RMS and up to {max:.1}% (warned above \
                 {:.0}% RMS or {:.0}% at one point): expect its predictions to be off by at least as much; its \
                 residuals per collective and rank count show where it fits worst",
                fit.path,
                POOR_RMS * 100.0,
                POOR_MAX * 100.0
            ));
        }
        let wide = report
            .predictions
            .iter()
            .filter(|p| p.path == fit.path && p.ci95_us.is_finite() && p.ci95_us > p.time_us)
            .count();
        if wide > 0 {
            warn.push(format!(
                "{wide} prediction(s) on {} have a 95% interval wider than the estimate itself: they say little",
                fit.path
            ));
        }
        let mut ranks: Vec<usize> = fit.residuals.iter().map(|r| r.nranks).collect();
        ranks.sort_unstable();
        ranks.dedup();
        match ranks.as_slice() {
            [only] if target > only * FAR_FACTOR => warn.push(format!(
                "the fit of {} saw one rank count ({only}) and predicts {target} ranks, more than \
                 {FAR_FACTOR}x beyond it: how the time grows with ranks is assumed, not measured; add a run \
                 at more rank counts",
                fit.path
            )),
            [.., largest] if target > largest * FAR_FACTOR => warn.push(format!(
                "the fit of {} saw rank counts up to {largest} and predicts {target} ranks, {:.1}x the largest \
                 (warned beyond {FAR_FACTOR}x): how the time grows with ranks is extrapolated, and errors grow \
                 with the distance, beyond the {rms:.1}% RMS it misses its own points by; add a run at {} ranks \
                 or more",
                fit.path,
                target as f64 / *largest as f64,
                target.div_ceil(FAR_FACTOR)
            )),
            _ => {}
        }
        for w in &warn {
            fit.notes.push(format!("warning: {w}"));
        }
        all.extend(warn);
    }
    all
}

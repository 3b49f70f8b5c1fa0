//! Alpha-beta(-gamma) models per path, fitted to measured sweeps, and predictions at a target scale.
//!
//! - [`coeff`]: each algorithm's textbook cost as coefficients of alpha (per step), beta (per byte on the
//!   wire) and gamma (per byte reduced), as src/algorithm/ runs it.
//! - [`lsq`]: weighted least squares with rank detection and the parameters' covariance.
//! - [`input`]: the measured points, from results files or the records of a run.
//! - [`fit`]: one path's parameters from all its collectives at once, weighted least squares.
//! - [`predict`](mod@predict): time (with a 95% interval), algbw, busbw, the dominant term, the ring/latency-algorithm
//!   crossover, the two-level form, and paths against each other, at the target scale.
//! - [`render`]: the text table and Markdown of a [`Report`] (JSON is its serde form).
//! - `table`: the report's tables, built once, printed as padded text columns or as Markdown.
//! - [`args`]: the `collbench model` command line.

pub mod coeff;
pub mod fit;
pub mod input;
pub mod lsq;
pub mod predict;
pub mod render;
mod table;

use std::collections::BTreeMap;

use serde::Serialize;

pub use fit::PathFit;
pub use input::Sample;
pub use predict::{Crossover, LocalLink, PathRatio, Prediction};

use crate::error::{stderr, Error, Result};
use crate::results::Record;

pub use fit::Weighting;

/// What to predict.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelOptions {
    /// Ranks at the target scale.
    pub target_ranks: usize,
    /// Ranks per node for the two-level prediction (None or 1: flat only).
    pub ranks_per_node: Option<usize>,
    /// A measured path to use as the local link of the two-level form.
    pub local_path: Option<String>,
    /// The path the others are compared with [default: the first path].
    pub reference: Option<String>,
    /// How the fit weighs points.
    pub weighting: Weighting,
}

/// The predicted and measured time at the largest measured size of one collective and algorithm.
#[derive(Clone, Debug, Serialize)]
pub struct LargestError {
    pub path: String,
    pub collective: crate::collective::Collective,
    pub algo: String,
    pub size: u64,
    pub predicted_us: f64,
    pub ci95_us: f64,
    pub measured_us: f64,
    pub error_pct: f64,
}

/// Everything `collbench model` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Identifies this document's layout.
    pub schema: &'static str,
    pub target_ranks: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks_per_node: Option<usize>,
    /// Where the fitted points came from.
    pub sources: Vec<String>,
    pub weighting: &'static str,
    pub fits: Vec<PathFit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_link: Option<LocalLink>,
    pub predictions: Vec<Prediction>,
    pub crossovers: Vec<Crossover>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    pub ratios: Vec<PathRatio>,
    /// Files measured at the target scale that predictions were checked against.
    pub measured_sources: Vec<String>,
    pub largest_errors: Vec<LargestError>,
}

/// Validates `opts` against what was measured; errors name the flag.
fn check_options(opts: &ModelOptions, fits: &[PathFit]) -> Result<()> {
    if opts.target_ranks < 2 {
        return Err(Error::usage(
            "--target-ranks",
            format!("{} ranks move nothing between ranks; give 2 or more", opts.target_ranks),
        ));
    }
    if let Some(g) = opts.ranks_per_node {
        if g == 0 || opts.target_ranks % g != 0 {
            return Err(Error::usage(
                "--ranks-per-node",
                format!(
                    "{g} does not divide --target-ranks {} into whole nodes; give a divisor of it",
                    opts.target_ranks
                ),
            ));
        }
    }
    let known: Vec<&str> = fits.iter().map(|f| f.path.as_str()).collect();
    for (flag, want) in [("--local-path", &opts.local_path), ("--reference", &opts.reference)] {
        if let Some(p) = want {
            if !known.contains(&p.as_str()) {
                return Err(Error::usage(
                    flag,
                    format!("no path {p} in the results (paths: {})", known.join(", ")),
                ));
            }
        }
    }
    if let Some(p) = &opts.local_path {
        let f = fits.iter().find(|f| &f.path == p);
        if f.and_then(|f| f.algo(crate::algorithm::Algo::Ring)).is_none() {
            return Err(Error::usage(
                "--local-path",
                format!("path {p} has no ring measurements to take the local link's alpha and beta from"),
            ));
        }
    }
    Ok(())
}

/// Fits every path of `samples` and predicts at the target scale.
pub fn predict(samples: &[Sample], opts: &ModelOptions) -> Result<Report> {
    let fits = fit::fit_all(samples, opts.weighting)?;
    check_options(opts, &fits)?;
    let local_fit = opts
        .local_path
        .as_ref()
        .and_then(|p| fits.iter().find(|f| &f.path == p).cloned());
    let local = match &local_fit {
        Some(f) => {
            let ring = f.algo(crate::algorithm::Algo::Ring);
            LocalLink {
                source: f.path.clone(),
                alpha_us: ring.map_or(0.0, |r| r.alpha_us.value),
                beta_us_per_byte: ring.map_or(0.0, |r| r.beta_us_per_byte.value),
            }
        }
        None => LocalLink {
            source: "default".into(),
            alpha_us: predict::DEFAULT_LOCAL.0,
            beta_us_per_byte: predict::DEFAULT_LOCAL.1,
        },
    };
    let two_level = opts.ranks_per_node.is_some_and(|g| g > 1);
    let target = predict::Target {
        nranks: opts.target_ranks,
        ranks_per_node: opts.ranks_per_node,
        local: local.clone(),
        local_fit,
    };
    let predictions: Vec<Prediction> = fits.iter().flat_map(|f| predict::predict(f, &target)).collect();
    let crossovers = fits
        .iter()
        .flat_map(|f| predict::crossovers(f, opts.target_ranks))
        .collect();
    let reference = opts.reference.clone().or_else(|| fits.first().map(|f| f.path.clone()));
    let ratios = match (&reference, fits.len()) {
        (Some(r), 2..) => predict::ratios(&predictions, r),
        _ => Vec::new(),
    };
    let mut sources: Vec<String> = Vec::new();
    for f in &fits {
        for s in &f.sources {
            if !sources.contains(s) {
                sources.push(s.clone());
            }
        }
    }
    Ok(Report {
        schema: "collbench-model/1",
        target_ranks: opts.target_ranks,
        ranks_per_node: opts.ranks_per_node,
        sources,
        weighting: opts.weighting.describe(),
        fits,
        local_link: two_level.then_some(local),
        predictions,
        crossovers,
        reference: if ratios.is_empty() { None } else { reference },
        ratios,
        measured_sources: Vec::new(),
        largest_errors: Vec::new(),
    })
}

/// The model of a finished run, for `collbench run --target-ranks`: `records` are the run's, on `hosts`
/// hosts.
pub fn predict_from_records(records: &[Record], hosts: usize, opts: &ModelOptions) -> Result<Report> {
    predict(&input::from_records(records, hosts), opts)
}

/// The model of a finished run for `collbench run --target-ranks N`, on rank 0: fits the run's records
/// (`hosts` distinct hosts) with the default weighting. A fit that cannot be made is a warning on stderr
/// naming why, never a failure: the measurements are the product.
pub fn for_run(records: &[Record], hosts: usize, target_ranks: usize, ranks_per_node: Option<usize>) -> Option<Report> {
    let opts = ModelOptions {
        target_ranks,
        ranks_per_node,
        local_path: None,
        reference: None,
        weighting: Weighting::default(),
    };
    match predict_from_records(records, hosts, &opts) {
        Ok(r) => Some(r),
        Err(e) => {
            stderr!(
                "collbench: warning: no prediction at --target-ranks {target_ranks}: {e} \
                 (the measurements above are complete; `collbench model` can fit a results file later)"
            );
            None
        }
    }
}

/// Puts `report` into a run's summary: its JSON form for the results file and its Markdown, headings one
/// level down, for the Markdown report.
pub fn attach_to_summary(summary: &mut crate::results::Summary, report: &Report) {
    summary.model = serde_json::to_value(report).ok();
    let md = render::markdown(report);
    let demoted: Vec<String> = md
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("#{l}")
            } else {
                l.to_string()
            }
        })
        .collect();
    summary.model_markdown = Some(demoted.join("\n") + "\n");
}

/// Puts measured times at the target scale beside the flat predictions (mean over repeats), and the error
/// at each collective and algorithm's largest measured size.
pub fn attach_measured(report: &mut Report, measured: &[Sample]) {
    let mut times: BTreeMap<(&str, &str, &str, u64), (f64, u32)> = BTreeMap::new();
    for s in measured
        .iter()
        .filter(|s| s.nranks == report.target_ranks && s.time_us.is_finite())
    {
        let e = times
            .entry((s.path.as_str(), s.collective.name(), s.algo.as_str(), s.size))
            .or_insert((0.0, 0));
        e.0 += s.time_us;
        e.1 += 1;
    }
    for p in report.predictions.iter_mut().filter(|p| !p.hierarchical) {
        if let Some((sum, k)) = times.get(&(p.path.as_str(), p.collective.name(), p.algo.as_str(), p.size)) {
            let m = sum / f64::from(*k);
            p.measured_us = Some(m);
            p.error_pct = Some((p.time_us - m) / m * 100.0);
        }
    }
    let mut largest: Vec<LargestError> = Vec::new();
    for p in report.predictions.iter().filter(|p| p.measured_us.is_some()) {
        let (Some(m), Some(e)) = (p.measured_us, p.error_pct) else {
            continue;
        };
        let entry = LargestError {
            path: p.path.clone(),
            collective: p.collective,
            algo: p.algo.clone(),
            size: p.size,
            predicted_us: p.time_us,
            ci95_us: p.ci95_us,
            measured_us: m,
            error_pct: e,
        };
        match largest
            .iter_mut()
            .find(|l| (&l.path, l.collective, &l.algo) == (&p.path, p.collective, &p.algo))
        {
            Some(l) if l.size < p.size => *l = entry,
            Some(_) => {}
            None => largest.push(entry),
        }
    }
    report.largest_errors = largest;
    let mut srcs: Vec<String> = Vec::new();
    for s in measured {
        if !srcs.contains(&s.source) {
            srcs.push(s.source.clone());
        }
    }
    report.measured_sources = srcs;
}

#[cfg(test)]
mod tests;

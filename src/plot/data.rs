//! What the charts show, extracted from records or from a results file, before anything is drawn: one
//! [`Table`] per collective/dtype/op, one [`Series`] per path, one [`Point`] per size with its band.
//!
//! One concern, the charts' data; its tests are two fifths of the file.

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;

use crate::error::{stderr, Error, Result};
use crate::results::document::{need, Document, Entry, WHAT_TO_GIVE};
use crate::results::summary_view::PredictionView;
use crate::results::{Record, RunInfo};

/// Everything the charts of one run show.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotData {
    /// A line under every title saying which run this was (version, start, hosts); may be empty.
    pub note: String,
    /// One entry per collective/dtype/op, in the order the run measured them.
    pub tables: Vec<Table>,
    /// Set for a results file whose run stopped before its plan was done (`complete: false`): its curves
    /// may stop early, and every chart says so.
    pub incomplete: Option<Incomplete>,
    /// Points whose 95% interval was wider than [`MAX_BAND_FACTOR`] either way, drawn clipped to it.
    pub clipped: Option<Clipped>,
}

/// What a results file says about the points its run did not measure.
#[derive(Clone, Debug, PartialEq)]
pub struct Incomplete {
    /// Planned points not measured, where the file lists them (`errors[].missing`); `None` where it does not
    /// (a run killed before it could say, or one still going).
    pub missing: Option<usize>,
}

/// The points whose band was clipped: how many, and the first of them (`tcp@lo all_reduce of 8 B:
/// ci95_us 1e6 at 20 us`).
#[derive(Clone, Debug, PartialEq)]
pub struct Clipped {
    pub count: usize,
    pub first: String,
}

/// A band is drawn at most this factor either side of its time. A 95% interval wider than that says the
/// point was not measured in any useful sense; drawn as given, an interval of 1e6 us at 20 us stretched the
/// time axis over more decades than memory holds ticks for.
pub const MAX_BAND_FACTOR: f64 = 1000.0;

/// One collective/dtype/op: the points of every path measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// The collective's name, e.g. `all_reduce`.
    pub collective: String,
    /// The element type's name, e.g. `float`.
    pub dtype: String,
    /// The reduction op; `None` for collectives that do not reduce.
    pub op: Option<String>,
    /// Ranks in the run.
    pub nranks: usize,
    /// One per path, in the order the run measured them.
    pub series: Vec<Series>,
    /// Planned points of this collective/dtype/op an incomplete run did not measure, where the file lists them.
    pub missing: usize,
}

/// One path's points in a table, by increasing size.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The path, e.g. `tcp@eth0`.
    pub path: String,
    /// The path's line rate in GB/s (1e9 B/s), where known.
    pub line_rate_gbs: Option<f64>,
    /// By increasing size, one per size.
    pub points: Vec<Point>,
    /// Set for a model's prediction of the path at another scale, drawn dashed without a band;
    /// `None` for measurements.
    pub predicted: Option<Predicted>,
}

/// What a predicted series is a prediction of.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicted {
    /// Ranks predicted at.
    pub nranks: usize,
    /// The algorithm predicted, e.g. `ring`.
    pub algo: String,
}

impl Series {
    /// The legend's name for the series: the path, or e.g. `tcp@eth0 predicted, 64 ranks (ring)`.
    pub fn label(&self) -> String {
        match &self.predicted {
            None => self.path.clone(),
            Some(p) => format!("{} predicted, {} ranks ({})", self.path, p.nranks, p.algo),
        }
    }
}

/// One predicted point of a model, as the charts use it: the results file's prediction, and what
/// [`predicted_samples`] takes of a model's report.
pub type PredictedSample = PredictionView;

/// The points of a model's report, for [`PlotData::add_predictions`].
pub fn predicted_samples(report: &crate::model::Report) -> Vec<PredictedSample> {
    report
        .predictions
        .iter()
        .map(|p| PredictedSample {
            path: p.path.clone(),
            collective: p.collective.name().to_string(),
            algo: p.algo.clone(),
            hierarchical: p.hierarchical,
            nranks: p.nranks,
            size: p.size,
            time_us: p.time_us,
            busbw: p.busbw,
        })
        .collect()
}

/// The predictions in a results file (`collbench.summary.model.predictions`); none when the run made no
/// model. The error names the entry that is not a prediction.
fn json_predictions(doc: &Document) -> std::result::Result<Vec<PredictedSample>, String> {
    let model = doc
        .collbench
        .as_ref()
        .and_then(|c| c.summary.as_ref())
        .and_then(|s| s.model.as_ref());
    model.map_or(Ok(Vec::new()), |m| m.predictions.clone())
}

/// One size on one path: the time and busbw drawn, and the band around each.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Bytes.
    pub size: u64,
    /// Mean over repeats of the reported (out-of-place) time, microseconds.
    pub time_us: f64,
    /// Lower end of the band around `time_us`, which covers every repeat's 95% confidence interval, so
    /// both the iteration noise and the spread between repeats. Each interval is taken on log time
    /// ([`log_band`]), so the band stays above zero time however wide the interval.
    pub time_lo_us: f64,
    /// Upper end of the band around `time_us`.
    pub time_hi_us: f64,
    /// Bus bandwidth at `time_us`, GB/s.
    pub busbw: f64,
    /// Lower end of the time band as a busbw band (busbw falls as time rises, so it comes from
    /// `time_hi_us`).
    pub busbw_lo: f64,
    /// Upper end of the busbw band, from `time_lo_us`.
    pub busbw_hi: f64,
    /// Entries (whole-sweep repeats) combined into this point.
    pub repeats: usize,
}

/// One measured point as read, before repeats are combined.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The path, e.g. `tcp@eth0`.
    pub path: String,
    /// Collective by name, as in the JSON.
    pub collective: String,
    /// Element type by name.
    pub dtype: String,
    /// Reduction op by name; `None` when the collective does not reduce.
    pub op: Option<String>,
    /// Ranks in the run.
    pub nranks: usize,
    /// Bytes.
    pub size: u64,
    /// Reported out-of-place time, microseconds.
    pub time_us: f64,
    /// Half-width of the 95% confidence interval of `time_us` (0 when unknown), microseconds.
    pub ci95_us: f64,
    /// Out-of-place bus bandwidth, GB/s.
    pub busbw: f64,
}

impl Sample {
    /// Whether the sample can be placed on log axes: a positive size and a positive, finite time.
    fn plottable(&self) -> bool {
        self.size > 0 && self.time_us.is_finite() && self.time_us > 0.0 && self.busbw.is_finite()
    }

    fn same_table(&self, t: &Table) -> bool {
        self.collective == t.collective && self.dtype == t.dtype && self.op == t.op
    }
}

impl PlotData {
    /// From a run's records (out-of-place figures), with each path's line rate in GB/s where known.
    /// `note` goes under every title; [`run_note`] makes one from the run's metadata.
    pub fn from_records(records: &[Record], line_rates: &[(String, f64)], note: &str) -> PlotData {
        let samples: Vec<Sample> = records
            .iter()
            .map(|r| Sample {
                path: r.path.clone(),
                collective: r.collective.name().to_string(),
                dtype: r.dtype.name().to_string(),
                op: r.op.map(|o| o.name().to_string()),
                nranks: r.nranks,
                size: r.size,
                time_us: r.out_of_place.time_us,
                ci95_us: r.out_of_place.ci95_us,
                busbw: r.out_of_place.busbw,
            })
            .collect();
        PlotData::from_samples(&samples, line_rates, note.to_string())
    }

    /// From the results file `collbench run -J FILE` wrote. Errors name the file and say what to do; what the
    /// charts must be read with (an incomplete run, clipped intervals) is said on stderr, naming the file.
    pub fn from_path(path: &Path) -> Result<PlotData> {
        let doc = crate::results::reader::read(path)?;
        let data =
            PlotData::from_document(&doc).map_err(|message| Error::usage(path.display().to_string(), message))?;
        for w in data.warnings() {
            stderr!("collbench: warning: {}: {w}", path.display());
        }
        Ok(data)
    }

    /// What a reader of these charts must know, one sentence each, for stderr.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(i) = &self.incomplete {
            out.push(match i.missing {
                Some(n) => format!(
                    "the run stopped before its plan was done (`complete: false`): {n} planned point(s) were not \
                     measured, so its curves stop early; the charts say so"
                ),
                None => "the run stopped before its plan was done (`complete: false`; the file does not list the \
                         points it missed), so its curves may stop early; the charts say so"
                    .to_string(),
            });
        }
        if let Some(c) = &self.clipped {
            out.push(format!(
                "the 95% interval of {} point(s) is wider than {MAX_BAND_FACTOR}x its time either way ({}{}); \
                 their bands are drawn clipped to {MAX_BAND_FACTOR}x",
                c.count,
                c.first,
                if c.count > 1 { ", ..." } else { "" }
            ));
        }
        out
    }

    /// The same for the charts of `table`, short enough for a line under the title; empty when all is well.
    pub fn chart_warning(&self, table: &Table) -> String {
        let mut parts = Vec::new();
        if let Some(i) = &self.incomplete {
            parts.push(match i.missing {
                Some(n) => format!(
                    "INCOMPLETE RUN: {n} planned point(s) not measured, {} of them in this chart",
                    table.missing
                ),
                None => "INCOMPLETE RUN: the run stopped before its plan was done; curves may stop early".to_string(),
            });
        }
        if let Some(c) = &self.clipped {
            parts.push(format!("{} band(s) clipped at {MAX_BAND_FACTOR}x their time", c.count));
        }
        parts.join("; ")
    }

    /// From a parsed results file. The error says what is wrong with it, for the caller to prefix with
    /// where the document came from.
    pub fn from_json(doc: &Value) -> std::result::Result<PlotData, String> {
        PlotData::from_document(&Document::from_value(doc)?)
    }

    fn from_document(doc: &Document) -> std::result::Result<PlotData, String> {
        // `collbench preflight -J` files carry their points without the run's block, as `compare` reads them;
        // a file from another tool (nccl-tests' -J) has neither the block nor each point's path.
        let foreign = doc.results.first().map_or(true, |e| e.path.is_none());
        if doc.collbench.is_none() && foreign {
            return Err(format!(
                "is not a collbench results file (no `collbench` block); {WHAT_TO_GIVE}"
            ));
        }
        let samples = doc
            .results
            .iter()
            .enumerate()
            .map(|(i, e)| sample_of(e, i))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut data = PlotData::from_samples(&samples, &json_line_rates(doc), json_note(doc));
        data.add_predictions(&json_predictions(doc)?);
        if doc.collbench.as_ref().is_some_and(|c| !c.complete) {
            data.mark_incomplete(doc);
        }
        if data.tables.is_empty() {
            return Err(format!(
                "has no results to plot ({} entries, none with a positive size and time): run \
                 `collbench run -J FILE` to the end, with -e above 0",
                doc.results.len()
            ));
        }
        Ok(data)
    }

    /// Marks the charts of `doc`'s incomplete run, counting its missing points per table where it lists them.
    fn mark_incomplete(&mut self, doc: &Document) {
        let missing: Vec<_> = doc.errors.iter().flat_map(|e| &e.missing).collect();
        for t in &mut self.tables {
            t.missing = missing
                .iter()
                .filter(|k| {
                    k.collective.name() == t.collective
                        && k.dtype.name() == t.dtype
                        && k.redop.map(|o| o.name()) == t.op.as_deref()
                })
                .count();
        }
        self.incomplete = Some(Incomplete {
            missing: (!missing.is_empty()).then_some(missing.len()),
        });
    }

    /// Groups samples into tables and series (first-seen order), combines samples of the same path and
    /// size (whole-sweep repeats) and attaches each path's line rate. Samples that cannot go on log axes
    /// (size 0, a time that is not positive and finite) are left out.
    pub fn from_samples(samples: &[Sample], line_rates: &[(String, f64)], note: String) -> PlotData {
        let mut tables: Vec<Table> = Vec::new();
        // Samples gathered per (table, path, size) before they are combined.
        let mut pending: Vec<Vec<Vec<Vec<&Sample>>>> = Vec::new();
        for s in samples.iter().filter(|s| s.plottable()) {
            let ti = match tables.iter().position(|t| s.same_table(t)) {
                Some(i) => i,
                None => {
                    tables.push(Table {
                        collective: s.collective.clone(),
                        dtype: s.dtype.clone(),
                        op: s.op.clone(),
                        nranks: s.nranks,
                        series: Vec::new(),
                        missing: 0,
                    });
                    pending.push(Vec::new());
                    tables.len() - 1
                }
            };
            let table = &mut tables[ti];
            let si = match table.series.iter().position(|x| x.path == s.path) {
                Some(i) => i,
                None => {
                    table.series.push(Series {
                        path: s.path.clone(),
                        line_rate_gbs: line_rate(line_rates, &s.path),
                        points: Vec::new(),
                        predicted: None,
                    });
                    pending[ti].push(Vec::new());
                    table.series.len() - 1
                }
            };
            let sizes = &mut pending[ti][si];
            match sizes.iter_mut().find(|g| g[0].size == s.size) {
                Some(g) => g.push(s),
                None => sizes.push(vec![s]),
            }
        }
        for (table, per_series) in tables.iter_mut().zip(pending) {
            for (series, sizes) in table.series.iter_mut().zip(per_series) {
                series.points = sizes.iter().map(|g| combine(g)).collect();
                series.points.sort_by_key(|p| p.size);
            }
        }
        let wide: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.plottable() && band_clipped(s.time_us, s.ci95_us))
            .collect();
        let clipped = wide.first().map(|s| Clipped {
            count: wide.len(),
            first: format!(
                "{} {} of {}: ci95_us {} at {} us",
                s.path,
                s.collective,
                crate::sizes::format_size(s.size),
                s.ci95_us,
                s.time_us
            ),
        });
        PlotData {
            note,
            tables,
            incomplete: None,
            clipped,
        }
    }

    /// Adds a model's flat predictions as dashed series: to every table of the predicted collective
    /// (whatever its dtype and op), one series per path and algorithm after the measured ones, by
    /// increasing size. Points that cannot go on log axes are left out.
    pub fn add_predictions(&mut self, predictions: &[PredictedSample]) {
        let usable = predictions.iter().filter(|p| {
            !p.hierarchical && p.size > 0 && p.time_us.is_finite() && p.time_us > 0.0 && p.busbw.is_finite()
        });
        for p in usable {
            for table in self.tables.iter_mut().filter(|t| t.collective == p.collective) {
                let same = |s: &Series| {
                    s.path == p.path
                        && s.predicted
                            .as_ref()
                            .is_some_and(|q| q.algo == p.algo && q.nranks == p.nranks)
                };
                let i = match table.series.iter().position(same) {
                    Some(i) => i,
                    None => {
                        table.series.push(Series {
                            path: p.path.clone(),
                            line_rate_gbs: None,
                            points: Vec::new(),
                            predicted: Some(Predicted {
                                nranks: p.nranks,
                                algo: p.algo.clone(),
                            }),
                        });
                        table.series.len() - 1
                    }
                };
                let points = &mut table.series[i].points;
                if points.iter().any(|q| q.size == p.size) {
                    continue;
                }
                // No band: the model's interval is a statement about the fit, not a measured spread.
                points.push(Point {
                    size: p.size,
                    time_us: p.time_us,
                    time_lo_us: p.time_us,
                    time_hi_us: p.time_us,
                    busbw: p.busbw,
                    busbw_lo: p.busbw,
                    busbw_hi: p.busbw,
                    repeats: 1,
                });
                points.sort_by_key(|q| q.size);
            }
        }
    }
}

/// A path's line rate from `(path, GB/s)` pairs; only a positive, finite rate counts.
fn line_rate(line_rates: &[(String, f64)], path: &str) -> Option<f64> {
    line_rates
        .iter()
        .find(|(p, r)| p == path && r.is_finite() && *r > 0.0)
        .map(|(_, r)| *r)
}

/// A time and the half-width of its 95% interval as a band on log time: `time x exp(-+ci/time)`. For a
/// narrow interval this is `time -+ ci`; for one as wide as its time or wider (8-byte points on a busy
/// machine) it stays above zero, where `time - ci` would reach zero or below and turn into an unbounded
/// busbw band. Times are positive and their spread multiplicative, so log time is their natural scale.
/// The band reaches at most [`MAX_BAND_FACTOR`] either way ([`band_clipped`] says when it was cut).
pub fn log_band(time_us: f64, ci95_us: f64) -> (f64, f64) {
    if !(time_us > 0.0 && ci95_us.is_finite()) {
        return (time_us, time_us);
    }
    let r = (ci95_us.abs() / time_us).min(MAX_BAND_FACTOR.ln());
    (time_us * (-r).exp(), time_us * r.exp())
}

/// Whether [`log_band`] clips the band of `time_us` with this interval.
pub fn band_clipped(time_us: f64, ci95_us: f64) -> bool {
    time_us > 0.0 && ci95_us.is_finite() && ci95_us.abs() / time_us > MAX_BAND_FACTOR.ln()
}

/// Combines the samples of one path and size: the mean time, a band from the lowest lower bound to the
/// highest upper bound of the repeats' intervals ([`log_band`]), and the busbw at the mean time.
pub fn combine(group: &[&Sample]) -> Point {
    let n = group.len() as f64;
    let time = group.iter().map(|s| s.time_us).sum::<f64>() / n;
    let bands: Vec<(f64, f64)> = group.iter().map(|s| log_band(s.time_us, s.ci95_us)).collect();
    let lo = bands.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let hi = bands.iter().map(|b| b.1).fold(f64::NEG_INFINITY, f64::max);
    // busbw x time is the same for every sample of one size (bytes x factor), so its mean gives the
    // busbw at the mean time.
    let bw_time = group.iter().map(|s| s.busbw * s.time_us).sum::<f64>() / n;
    let busbw = bw_time / time;
    let (busbw_lo, busbw_hi) = busbw_band(busbw, time, lo, hi);
    Point {
        size: group[0].size,
        time_us: time,
        time_lo_us: lo,
        time_hi_us: hi,
        busbw,
        busbw_lo,
        busbw_hi,
        repeats: group.len(),
    }
}

/// A time band as a busbw band: busbw x time / upper time and busbw x time / lower time; the upper busbw
/// bound is infinite only for a time band that reaches 0, which [`log_band`] never gives.
pub fn busbw_band(busbw: f64, time_us: f64, time_lo_us: f64, time_hi_us: f64) -> (f64, f64) {
    let lo = busbw * time_us / time_hi_us;
    let hi = if time_lo_us > 0.0 {
        busbw * time_us / time_lo_us
    } else {
        f64::INFINITY
    };
    (lo, hi)
}

/// The note under every title for a run: `collbench 0.1.0, 2025-03-04 05:06 UTC, 2 hosts, launcher local`.
pub fn run_note(run: &RunInfo) -> String {
    let hosts: HashSet<&str> = run.ranks.iter().map(|r| r.host.as_str()).collect();
    note(&run.version, &run.start_time, hosts.len(), &run.launcher)
}

fn note(version: &str, start_time: &str, hosts: usize, launcher: &str) -> String {
    // RFC 3339 down to the minute: the second adds nothing to a chart.
    let when = match start_time.get(..16) {
        Some(t) if start_time.as_bytes().get(10) == Some(&b'T') => format!("{} UTC", t.replace('T', " ")),
        _ => start_time.to_string(),
    };
    let hosts = match hosts {
        0 => String::new(),
        1 => ", 1 host".to_string(),
        n => format!(", {n} hosts"),
    };
    format!("collbench {version}, {when}{hosts}, launcher {launcher}")
}

/// The note from a results file's `collbench.run` block; empty when the block is missing.
fn json_note(doc: &Document) -> String {
    let Some(c) = &doc.collbench else {
        return String::new();
    };
    let run = &c.run;
    if run.version.is_empty() && run.start_time.is_empty() && run.launcher.is_empty() && run.ranks.is_empty() {
        return String::new();
    }
    let s = |v: &str| if v.is_empty() { "?".to_string() } else { v.to_string() };
    note(
        &s(&run.version),
        &s(&run.start_time),
        doc.hosts().len(),
        &s(&run.launcher),
    )
}

/// Each path's line rate (GB/s) from a results file: `collbench.summary.paths[].line_rate_gbs` where
/// present, else derived from the comparison (`busbw / line_rate_pct x 100`), first figure per path.
pub fn json_line_rates(doc: &Document) -> Vec<(String, f64)> {
    let mut rates: Vec<(String, f64)> = Vec::new();
    let Some(summary) = doc.collbench.as_ref().and_then(|c| c.summary.as_ref()) else {
        return rates;
    };
    let mut add = |path: Option<&str>, rate: Option<f64>| {
        if let (Some(p), Some(r)) = (path, rate) {
            if r.is_finite() && r > 0.0 && !rates.iter().any(|(q, _)| q == p) {
                rates.push((p.to_string(), r));
            }
        }
    };
    for p in &summary.paths {
        add(p.path.as_deref(), p.line_rate_gbs);
    }
    for c in &summary.comparison {
        for p in &c.paths {
            let derived = match (p.busbw, p.line_rate_pct) {
                (Some(bw), Some(pct)) if pct > 0.0 => Some(bw / pct * 100.0),
                _ => None,
            };
            add(p.path.as_deref(), derived);
        }
    }
    rates
}

/// The sample of results entry `i`; the error names the field it lacks.
fn sample_of(e: &Entry, i: usize) -> std::result::Result<Sample, String> {
    let oop = e.out_of_place();
    let redop = need(e.redop.clone(), i, "redop")?;
    let ci95_us = oop.ci95_us.unwrap_or(0.0);
    Ok(Sample {
        path: need(e.path.clone(), i, "path")?,
        collective: need(e.collective.clone(), i, "collective")?,
        dtype: need(e.dtype.clone(), i, "type")?,
        // nccl-tests writes "none" for collectives that do not reduce.
        op: (redop != "none").then_some(redop),
        nranks: need(e.nranks, i, "nranks")?,
        size: need(e.size, i, "size")?,
        time_us: need(oop.time, i, "out_of_place.time")?,
        // "nan" (unknown) draws no band.
        ci95_us: if ci95_us.is_finite() { ci95_us } else { 0.0 },
        busbw: need(oop.bus_bw, i, "out_of_place.bus_bw")?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::collective::Collective;
    use crate::results::testutil::{record, run_info};

    fn sample(path: &str, size: u64, time_us: f64, ci95_us: f64, busbw: f64) -> Sample {
        Sample {
            path: path.into(),
            collective: "all_reduce".into(),
            dtype: "float".into(),
            op: Some("sum".into()),
            nranks: 4,
            size,
            time_us,
            ci95_us,
            busbw,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn records_group_by_table_then_path_in_first_seen_order_with_sizes_sorted() {
        let mut recs = Vec::new();
        for (path, size) in [("tcp@eth0", 1024), ("tcp@eth0", 8), ("tcp@lo", 8), ("tcp@lo", 1024)] {
            let mut r = record(Collective::AllReduce, size, 10.0, 1.0, Some(0));
            r.path = path.into();
            recs.push(r);
        }
        recs.push(record(Collective::AllGather, 64, 5.0, 2.0, None));
        let d = PlotData::from_records(&recs, &[("tcp@lo".into(), 5.0)], "note");
        assert_eq!(d.note, "note");
        assert_eq!(d.tables.len(), 2);
        let ar = &d.tables[0];
        assert_eq!(
            (ar.collective.as_str(), ar.dtype.as_str(), ar.op.as_deref()),
            ("all_reduce", "float", Some("sum"))
        );
        assert_eq!(ar.nranks, 4);
        let paths: Vec<&str> = ar.series.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["tcp@eth0", "tcp@lo"]);
        let sizes: Vec<u64> = ar.series[0].points.iter().map(|p| p.size).collect();
        assert_eq!(sizes, [8, 1024]);
        assert_eq!(ar.series[0].line_rate_gbs, None);
        assert_eq!(ar.series[1].line_rate_gbs, Some(5.0));
        let ag = &d.tables[1];
        assert_eq!((ag.collective.as_str(), ag.op.as_deref()), ("all_gather", None));
        // Out-of-place figures, with the record's interval (testutil: 0.5 us).
        let p = &ag.series[0].points[0];
        assert_eq!((p.time_us, p.busbw), (5.0, 2.0));
        assert_eq!((p.time_lo_us, p.time_hi_us), log_band(5.0, 0.5));
    }

    #[test]
    fn unplottable_samples_are_left_out_and_empty_tables_dropped() {
        let samples = [
            sample("a", 0, 10.0, 0.0, 0.0),
            sample("a", 8, f64::NAN, 0.0, 1.0),
            sample("a", 16, 0.0, 0.0, 1.0),
        ];
        assert!(PlotData::from_samples(&samples, &[], String::new()).tables.is_empty());
        let d = PlotData::from_samples(&[sample("a", 8, 2.0, 0.0, 1.0), samples[0].clone()], &[], String::new());
        assert_eq!(d.tables[0].series[0].points.len(), 1);
    }

    #[test]
    fn busbw_band_follows_the_time_band_inversely() {
        // 10 us between 8 and 12 us at 4 GB/s: 4 x 10/12 .. 4 x 10/8.
        let (lo, hi) = busbw_band(4.0, 10.0, 8.0, 12.0);
        assert!(close(lo, 10.0 / 3.0) && close(hi, 5.0), "{lo} {hi}");
        let p = combine(&[&sample("a", 8, 10.0, 0.0, 4.0)]);
        assert_eq!(
            (p.busbw_lo, p.busbw, p.busbw_hi),
            (4.0, 4.0, 4.0),
            "no interval, no band"
        );
    }

    #[test]
    fn an_interval_wider_than_its_time_keeps_a_positive_time_and_a_finite_busbw_band() {
        // 8 B on a busy machine: 20 us +- 60 us. On linear time the band would reach -40 us and the busbw
        // band would run to infinity, over the whole chart.
        let (lo, hi) = log_band(20.0, 60.0);
        assert!(
            lo > 0.0 && close(lo, 20.0 * (-3.0f64).exp()) && close(hi, 20.0 * 3.0f64.exp()),
            "{lo} {hi}"
        );
        let p = combine(&[&sample("a", 8, 20.0, 60.0, 0.001)]);
        assert!(p.time_lo_us > 0.0 && p.busbw_hi.is_finite(), "{p:?}");
        assert!(
            close(p.busbw_hi, 0.001 * 3.0f64.exp()),
            "a small busbw keeps a small band: {p:?}"
        );
        // A narrow interval is as on linear time, to first order.
        let (lo, hi) = log_band(100.0, 1.0);
        assert!((lo - 99.0).abs() < 0.01 && (hi - 101.0).abs() < 0.01, "{lo} {hi}");
        // Without a time or an interval there is no band.
        assert_eq!(log_band(0.0, 1.0), (0.0, 0.0));
        assert_eq!(log_band(5.0, f64::NAN), (5.0, 5.0));
    }

    #[test]
    fn repeats_combine_to_the_mean_time_with_a_band_over_their_spread_and_intervals() {
        // Three whole-sweep repeats of one point; busbw x time is constant (40) as for one size.
        let s = [
            sample("a", 1 << 20, 8.0, 1.0, 5.0),
            sample("a", 1 << 20, 10.0, 0.5, 4.0),
            sample("a", 1 << 20, 12.0, 2.0, 40.0 / 12.0),
        ];
        let d = PlotData::from_samples(&s, &[], String::new());
        let pts = &d.tables[0].series[0].points;
        assert_eq!(pts.len(), 1);
        let p = &pts[0];
        assert_eq!(p.repeats, 3);
        assert!(close(p.time_us, 10.0));
        // From the lowest repeat's lower end to the highest one's upper end, each on log time.
        let (lo, hi) = (log_band(8.0, 1.0).0, log_band(12.0, 2.0).1);
        assert!(close(p.time_lo_us, lo) && close(p.time_hi_us, hi), "{p:?}");
        assert!(close(p.busbw, 4.0), "busbw at the mean time: {}", p.busbw);
        assert!(close(p.busbw_lo, 4.0 * 10.0 / hi) && close(p.busbw_hi, 4.0 * 10.0 / lo));
        // Repeats of other paths or sizes stay apart.
        let mut more = s.to_vec();
        more.push(sample("b", 1 << 20, 10.0, 0.0, 4.0));
        more.push(sample("a", 1 << 21, 20.0, 0.0, 4.0));
        let d = PlotData::from_samples(&more, &[], String::new());
        let series = &d.tables[0].series;
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].points.iter().map(|p| p.repeats).collect::<Vec<_>>(), [3, 1]);
    }

    /// A results file as `run -J` writes it, reduced to what plotting reads.
    fn doc() -> Value {
        let entry = |path: &str, size: u64, time: Value, ci: Option<f64>, bw: f64| {
            let mut oop = json!({ "time": time, "bus_bw": bw, "alg_bw": bw });
            if let Some(ci) = ci {
                oop["ci95_us"] = json!(ci);
            }
            json!({
                "size": size, "count": size / 4, "type": "float", "redop": "sum", "root": "    -1",
                "out_of_place": oop, "in_place": oop.clone(), "collective": "all_reduce",
                "path": path, "algo": "ring", "nranks": 2,
            })
        };
        json!({
            "version": 2,
            "results": [
                entry("tcp@lo", 8, json!(20.0), None, 0.001),
                entry("tcp@lo", 1024, json!(40.0), Some(4.0), 0.05),
                entry("tcp@eth0", 8, json!("nan"), Some(1.0), 0.0),
                entry("tcp@eth0", 1024, json!(80.0), Some(2.0), 0.025),
            ],
            "collbench": {
                "schema_version": 1,
                "run": {
                    "version": "0.1.0", "start_time": "2025-03-04T05:06:07Z", "launcher": "local",
                    "ranks": [{ "host": "a" }, { "host": "b" }, { "host": "a" }],
                },
                "summary": {
                    "comparison": [{
                        "collective": "all_reduce", "size": 1024,
                        "paths": [
                            { "path": "tcp@lo", "busbw": 0.05, "line_rate_pct": null },
                            { "path": "tcp@eth0", "busbw": 0.025, "line_rate_pct": 2.0 },
                        ],
                    }],
                },
            },
        })
    }

    #[test]
    fn json_files_read_like_records_with_old_files_lacking_intervals() {
        let d = PlotData::from_json(&doc()).unwrap();
        assert_eq!(d.note, "collbench 0.1.0, 2025-03-04 05:06 UTC, 2 hosts, launcher local");
        let t = &d.tables[0];
        assert_eq!(t.nranks, 2);
        assert_eq!(t.op.as_deref(), Some("sum"));
        let lo = &t.series[0];
        assert_eq!(lo.path, "tcp@lo");
        assert_eq!(
            (lo.points[0].time_lo_us, lo.points[0].time_hi_us),
            (20.0, 20.0),
            "no ci95_us: no band"
        );
        assert_eq!((lo.points[1].time_lo_us, lo.points[1].time_hi_us), log_band(40.0, 4.0));
        // The "nan" time is left out; the line rate comes from the comparison: 0.025 / 2% = 1.25 GB/s.
        let eth = &t.series[1];
        assert_eq!(eth.points.len(), 1);
        assert!(close(eth.line_rate_gbs.unwrap(), 1.25));
        assert_eq!(lo.line_rate_gbs, None);
    }

    fn predicted(collective: &str, algo: &str, size: u64, time_us: f64) -> Value {
        json!({
            "path": "tcp@lo", "collective": collective, "algo": algo, "hierarchical": false,
            "size": size, "nranks": 8, "time_us": time_us, "ci95_us": 1.0, "algbw": 1.0,
            "busbw": size as f64 / time_us / 1e3, "bound": "latency",
        })
    }

    #[test]
    fn predictions_go_to_their_collectives_table_as_dashed_series() {
        let mut v = doc();
        let mut gather = v["results"][1].clone();
        gather["collective"] = json!("all_gather");
        gather["redop"] = json!("none");
        v["results"].as_array_mut().unwrap().push(gather);
        let mut two_level = predicted("all_reduce", "ring", 8, 70.0);
        two_level["hierarchical"] = json!(true);
        v["collbench"]["summary"]["model"] = json!({ "predictions": [
            predicted("all_reduce", "ring", 1024, 90.0),
            predicted("all_reduce", "ring", 8, 50.0),
            predicted("all_reduce", "rec_doubling", 8, 30.0),
            predicted("all_gather", "ring", 1024, 60.0),
            predicted("broadcast", "ring", 1024, 10.0),
            two_level,
        ]});
        let d = PlotData::from_json(&v).unwrap();
        assert_eq!(
            d.tables.len(),
            2,
            "a prediction of an unmeasured collective adds no table"
        );
        let reduce = &d.tables[0];
        let labels: Vec<String> = reduce.series.iter().map(Series::label).collect();
        assert_eq!(
            labels,
            [
                "tcp@lo",
                "tcp@eth0",
                "tcp@lo predicted, 8 ranks (ring)",
                "tcp@lo predicted, 8 ranks (rec_doubling)"
            ]
        );
        let ring = &reduce.series[2];
        assert_eq!(ring.predicted.as_ref().unwrap().nranks, 8);
        // By size, the two-level point left out, no band, no line rate.
        let sizes: Vec<(u64, f64)> = ring.points.iter().map(|p| (p.size, p.time_us)).collect();
        assert_eq!(sizes, [(8, 50.0), (1024, 90.0)]);
        assert!(ring
            .points
            .iter()
            .all(|p| p.time_lo_us == p.time_hi_us && p.busbw_lo == p.busbw_hi));
        assert_eq!(ring.line_rate_gbs, None);
        let gather = &d.tables[1];
        assert_eq!(gather.collective, "all_gather");
        assert_eq!(gather.series.len(), 2);
        assert_eq!(gather.series[1].points.len(), 1);
        assert!(gather.series[1].label().ends_with("(ring)"));
    }

    #[test]
    fn a_results_file_with_a_broken_prediction_names_it() {
        let mut v = doc();
        v["collbench"]["summary"]["model"] = json!({ "predictions": [{ "path": "tcp@lo" }] });
        let e = PlotData::from_json(&v).unwrap_err();
        assert!(e.contains("collbench.summary.model.predictions[0]"), "{e}");
    }

    #[test]
    fn predictions_from_a_report_keep_every_point() {
        let recs: Vec<_> = [1u64 << 10, 1 << 14, 1 << 18, 1 << 22]
            .into_iter()
            .map(|size| record(Collective::AllReduce, size, 30.0 + size as f64 * 1e-3, 1.0, Some(0)))
            .collect();
        let opts = crate::model::ModelOptions {
            target_ranks: 8,
            ranks_per_node: None,
            local_path: None,
            reference: None,
            weighting: crate::model::Weighting::default(),
        };
        let report = crate::model::predict_from_records(&recs, 1, &opts).unwrap();
        let samples = predicted_samples(&report);
        assert_eq!(samples.len(), report.predictions.len());
        let mut data = PlotData::from_records(&recs, &[], "");
        data.add_predictions(&samples);
        let t = &data.tables[0];
        assert!(t.series.len() > 1, "{t:?}");
        assert!(t.series[1..]
            .iter()
            .all(|s| s.predicted.as_ref().is_some_and(|p| p.nranks == 8) && s.path == t.series[0].path));
    }

    #[test]
    fn summary_paths_line_rates_win_over_derived_ones() {
        let mut v = doc();
        v["collbench"]["summary"]["paths"] = json!([
            { "path": "tcp@eth0", "line_rate_gbs": 3.0 },
            { "path": "tcp@lo", "line_rate_gbs": null },
        ]);
        assert_eq!(
            json_line_rates(&Document::from_value(&v).unwrap()),
            [("tcp@eth0".to_string(), 3.0)]
        );
        let none_op = {
            let mut v = doc();
            v["results"][0]["redop"] = json!("none");
            PlotData::from_json(&v).unwrap()
        };
        assert_eq!(none_op.tables.len(), 2, "redop none is another table");
        assert_eq!(none_op.tables[0].op, None, "results[0] is seen first");
    }

    #[test]
    fn bad_documents_say_what_is_wrong() {
        let e = PlotData::from_json(&json!({ "results": [] })).unwrap_err();
        assert!(e.contains("not a collbench results file"), "{e}");
        let e = PlotData::from_json(&json!({ "collbench": {} })).unwrap_err();
        assert!(e.contains("no `results`"), "{e}");
        let mut v = doc();
        v["results"].as_array_mut().unwrap().clear();
        let e = PlotData::from_json(&v).unwrap_err();
        assert!(e.contains("no results to plot"), "{e}");
        let mut v = doc();
        v["results"][1].as_object_mut().unwrap().remove("path");
        let e = PlotData::from_json(&v).unwrap_err();
        assert!(e.contains("results[1]") && e.contains("path"), "{e}");
        let mut v = doc();
        v["results"][0]["out_of_place"]["time"] = json!("fast");
        let e = PlotData::from_json(&v).unwrap_err();
        assert!(e.contains("results[0]") && e.contains("expected a number"), "{e}");
    }

    #[test]
    fn an_absurd_interval_is_clipped_and_said() {
        // 1e6 us of interval at 20 us: exp(50000) overflowed, and the time axis asked for 2^31 decades.
        let d = PlotData::from_samples(
            &[
                sample("tcp@lo", 8, 20.0, 1e6, 0.001),
                sample("tcp@lo", 16, 20.0, 1.0, 0.002),
            ],
            &[],
            String::new(),
        );
        let p = &d.tables[0].series[0].points[0];
        assert!(
            close(p.time_hi_us, 20.0 * MAX_BAND_FACTOR) && close(p.time_lo_us, 20.0 / MAX_BAND_FACTOR),
            "{p:?}"
        );
        assert!(p.busbw_hi.is_finite() && p.busbw_lo > 0.0, "{p:?}");
        assert_eq!(d.clipped.as_ref().map(|c| c.count), Some(1));
        let w = d.warnings();
        assert!(
            w.len() == 1
                && w[0].contains("1 point(s)")
                && w[0].contains("tcp@lo all_reduce of 8 B: ci95_us 1000000 at 20 us"),
            "{w:?}"
        );
        assert_eq!(d.chart_warning(&d.tables[0]), "1 band(s) clipped at 1000x their time");
        // Wide intervals of busy small points are drawn as measured.
        assert!(!band_clipped(20.0, 60.0) && band_clipped(20.0, 200.0));
        let ordinary = PlotData::from_samples(&[sample("a", 8, 20.0, 60.0, 1.0)], &[], String::new());
        assert_eq!((ordinary.warnings().len(), ordinary.clipped), (0, None));
    }

    #[test]
    fn an_incomplete_run_is_marked_with_its_missing_points_per_chart() {
        let mut v = doc();
        v["collbench"]["complete"] = json!(false);
        let key = |collective: &str, size: u64, redop: Value| json!({ "path": "tcp@lo", "collective": collective, "size": size, "type": "float", "redop": redop, "repeat": 0 });
        v["errors"] = json!([{
            "message": "rank 1 died",
            "missing": [key("all_reduce", 2048, json!("sum")), key("all_reduce", 4096, json!("sum")), key("all_gather", 8, Value::Null)],
        }]);
        let d = PlotData::from_json(&v).unwrap();
        assert_eq!(d.incomplete, Some(Incomplete { missing: Some(3) }));
        assert_eq!(d.tables[0].missing, 2);
        assert_eq!(
            d.chart_warning(&d.tables[0]),
            "INCOMPLETE RUN: 3 planned point(s) not measured, 2 of them in this chart"
        );
        assert!(
            d.warnings()[0].contains("3 planned point(s) were not measured"),
            "{:?}",
            d.warnings()
        );
        // A file that does not list them is marked all the same.
        v["errors"] = json!([]);
        let d = PlotData::from_json(&v).unwrap();
        assert_eq!(d.incomplete, Some(Incomplete { missing: None }));
        assert!(d.chart_warning(&d.tables[0]).starts_with("INCOMPLETE RUN"));
        assert!(d.warnings()[0].contains("complete: false"), "{:?}", d.warnings());
        // A complete run has nothing to say.
        v["collbench"]["complete"] = json!(true);
        let d = PlotData::from_json(&v).unwrap();
        assert_eq!(
            (d.warnings().len(), d.chart_warning(&d.tables[0]), d.incomplete),
            (0, String::new(), None)
        );
    }

    #[test]
    fn run_note_names_version_start_hosts_and_launcher() {
        assert_eq!(
            run_note(&run_info(false)),
            "collbench 0.1.0, 2025-03-04 05:06 UTC, 1 host, launcher local"
        );
    }
}

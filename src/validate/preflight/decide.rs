//! Rank 0's last step, and all of `--from-results`: measurements to checks, the verdict, the outputs and the
//! exit status.

use std::path::Path;

use serde_json::Value;

use super::checks::{self, Inputs, PathInfo};
use super::document::{Report, PREFLIGHT_SCHEMA_VERSION};
use super::measure::Sample;
use super::options::PreflightOptions;
use super::render;
use super::verdict::{self, Check};
use crate::compare::input::Point;
use crate::error::{Error, Result};
use crate::report::file::write_atomic;
use crate::results::document::Entry;

/// What a preflight measured (live, or read back from its JSON).
pub struct Measured {
    pub nranks: usize,
    pub plan: Vec<String>,
    pub paths: Vec<PathInfo>,
    pub bandwidth_from: u64,
    /// Sweeps of each phase the plan ran: `--repeat`, or fewer where the budget lowered the plan.
    pub repeat: u32,
    /// Entries as `collbench run -J` writes them.
    pub connectivity: Vec<Entry>,
    pub results: Vec<Entry>,
    /// Every host during the collectives' phases (CPU, TCP counters, path configuration).
    pub evidence: Vec<super::evidence::HostEvidence>,
    /// The exit status of the failure that ended the preflight before its plan was done (a peer lost, a link
    /// cut during set-up): the report's exit code is then the process's, not the verdict's.
    pub ended_by: Option<i32>,
    /// Notes from before judging (the GPU checks not run, and why).
    pub notes: Vec<String>,
}

/// Judges `m` (with `extra` checks, e.g. pairwise) against the expectations and baseline `args` name, prints the
/// summary, writes the files asked for; returns the exit status. `keys` are the path names an expectations
/// entry may use.
pub fn decide(
    args: &PreflightOptions,
    m: &Measured,
    baseline: Option<&[Point]>,
    extra: Vec<Check>,
    keys: &[String],
) -> Result<i32> {
    let expect = args.expect.as_ref().map(|f| super::expect::read(f, keys)).transpose()?;
    let connectivity = Sample::from_entries(&m.connectivity, "connectivity")?;
    let samples = Sample::from_entries(&m.results, "results")?;
    let mut judged = checks::judge(&Inputs {
        paths: &m.paths,
        connectivity: &connectivity,
        samples: &samples,
        expect: expect.as_ref(),
        bandwidth_from: m.bandwidth_from,
    });
    judged.notes.extend(m.notes.iter().cloned());
    // A collective that falls short is explained by the hosts' evidence, pointing at the pairwise findings.
    let findings: Vec<String> = extra
        .iter()
        .filter(|c| c.verdict == verdict::Verdict::Fail && c.name.contains(" pairwise: "))
        .map(|c| c.name.clone())
        .collect();
    // Where the pairwise test blamed a host or link, a collective's shortfall is that finding's, with its cause:
    // one report never gives two causes for one fault.
    let blamed: Option<(super::cause::Cause, Vec<String>)> = extra
        .iter()
        .filter(|c| c.verdict == verdict::Verdict::Fail && c.name.contains(" pairwise: "))
        .find_map(|c| {
            c.cause
                .map(|k| (k, c.evidence.iter().map(|e| e.host.clone()).collect()))
        });
    for c in judged.checks.iter_mut() {
        if c.verdict == verdict::Verdict::Fail && c.name.ends_with(" busbw") && !m.evidence.is_empty() {
            let (j, hosts) = match &blamed {
                Some((cause, hosts)) => (
                    super::cause::Judged {
                        cause: *cause,
                        why: format!(
                            "what the pairwise test names ({}), with its cause; see that check",
                            findings.join("; ")
                        ),
                        busy: false,
                    },
                    hosts.clone(),
                ),
                None => (super::cause::judge_cluster(&m.evidence, &findings), Vec::new()),
            };
            if j.busy && c.source.starts_with("default:") {
                // A healthy cluster on busy hosts, judged by a default threshold: said, not failed. A
                // threshold the user set still fails.
                c.verdict = verdict::Verdict::Warn;
            }
            super::cause::annotate(c, j, &m.evidence, &hosts);
        }
    }
    // The collectives' evidence is of the first TCP path's interface (see rank.rs).
    if let Some(first) = m
        .paths
        .iter()
        .find(|p| crate::transport::path::Traits::named(&p.name).is_some_and(|t| t.on_tcp_interface))
        .or(m.paths.first())
    {
        judged
            .checks
            .extend(super::carrier::checks(&first.name, "the collectives", &m.evidence));
    }
    // A sweep far off its siblings is a finding, not noise for the median to hide.
    for p in &m.paths {
        judged
            .checks
            .extend(super::off_sweep::checks(&p.name, &samples, &m.evidence));
    }
    judged.checks.extend(extra);
    // A host starved of CPU during the collectives fails by name even where no figure showed it.
    if let Some(first) = m
        .paths
        .iter()
        .find(|p| crate::transport::path::Traits::named(&p.name).is_some_and(|t| t.on_tcp_interface))
        .or(m.paths.first())
    {
        let starved = super::starved::checks(&first.name, "the collectives", &m.evidence, &judged.checks);
        judged.checks.extend(starved);
    }
    if args.repeat == 2 {
        judged.notes.push(
            "--repeat 2: each interval is the range of two sweeps, of 50% confidence: too weak to decide with; give --repeat 3 or more"
                .into(),
        );
    }
    if let (Some(old), Some(file)) = (baseline, &args.baseline) {
        if !samples.is_empty() {
            let new = crate::compare::input::of_entries(&m.results, "this preflight")?;
            checks::baseline(
                old,
                &new,
                &file.display().to_string(),
                args.baseline_threshold,
                &mut judged,
            );
        }
    }
    let overall = verdict::overall(&judged.checks);
    let code = m.ended_by.unwrap_or_else(|| verdict::exit_code(overall, args.strict));
    let report = Report {
        collbench_preflight: PREFLIGHT_SCHEMA_VERSION,
        verdict: overall,
        strict: args.strict,
        exit_code: code,
        nranks: m.nranks,
        repeat: m.repeat,
        plan: m.plan.clone(),
        paths: m.paths.clone(),
        bandwidth_from: m.bandwidth_from,
        checks: judged.checks,
        notes: judged.notes,
        results: m.results.clone(),
        connectivity: m.connectivity.clone(),
        evidence: m.evidence.clone(),
    };
    if let Some(p) = &args.outputs.json {
        let mut bytes = serde_json::to_vec_pretty(&render::json(&report))
            .map_err(|e| Error::io(format!("encoding {}", p.display()), e.into()))?;
        bytes.push(b'\n');
        write_atomic(p, &bytes, crate::report::file::Replace::from_force(args.outputs.force))?;
    }
    if let Some(p) = &args.outputs.junit {
        write_atomic(
            p,
            render::junit(&report).as_bytes(),
            crate::report::file::Replace::from_force(args.outputs.force),
        )?;
    }
    if let Some(p) = &args.outputs.markdown {
        write_atomic(
            p,
            render::markdown(&report).as_bytes(),
            crate::report::file::Replace::from_force(args.outputs.force),
        )?;
    }
    if let Some(p) = &args.outputs.metrics {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        write_atomic(
            p,
            super::metrics::text(&report, now).as_bytes(),
            crate::report::file::Replace::from_force(args.outputs.force),
        )?;
    }
    // Last, so a stdout that cannot take it (a full device) loses no file.
    crate::report::stdout::print_beside(&render::text(&report, args.units), args.outputs.stdout_taken())?;
    Ok(code)
}

/// `--from-results FILE`: judge what a previous `collbench preflight -J` measured, with this command line's
/// expectations, baseline and strictness.
pub fn from_results(args: &PreflightOptions, file: &Path) -> Result<i32> {
    let shown = file.display().to_string();
    let bad = |m: String| Error::usage(format!("--from-results {shown}"), m);
    let text = std::fs::read_to_string(file).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
    if !Report::is_this_version(&doc) {
        return Err(bad(format!(
            "not a preflight results file of version {PREFLIGHT_SCHEMA_VERSION} (written by `collbench preflight -J`)"
        )));
    }
    args.outputs.declared().check()?;
    let saved = Report::read(&doc).map_err(bad)?;
    impossible_figure(&saved.connectivity, "connectivity").map_err(bad)?;
    impossible_figure(&saved.results, "results").map_err(bad)?;
    let m = Measured {
        nranks: saved.nranks,
        plan: saved.plan,
        bandwidth_from: saved.bandwidth_from,
        repeat: saved.repeat,
        connectivity: saved.connectivity,
        results: saved.results,
        paths: saved.paths,
        evidence: saved.evidence,
        // Judged again: the verdict of what was saved.
        ended_by: None,
        notes: saved
            .notes
            .into_iter()
            .filter(|n| n.starts_with(super::gpu::NOT_RUN))
            .collect(),
    };
    let baseline = args
        .baseline
        .as_ref()
        .map(|f| crate::compare::input::read(f))
        .transpose()?;
    let mut keys: Vec<String> = Vec::new();
    for p in &m.paths {
        for k in [&p.given, &p.name] {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    // The pairwise link test's checks are findings, not figures an expectation re-judges: they carry over.
    let pairwise: Vec<Check> = saved
        .checks
        .into_iter()
        .filter(|c| {
            c.name.starts_with(&format!("{} pairwise", c.path))
                || c.name.starts_with(&format!("{} configuration", c.path))
                || c.name.starts_with(&format!("{} fabric: ", c.path))
                || c.name.ends_with(" within the budget")
                || c.name.ends_with(" during the pairwise test")
                // GPU readings are findings of the moment they were read.
                || c.path == super::gpu::PATH
        })
        .collect();
    decide(args, &m, baseline.as_deref(), pairwise, &keys)
}

/// Refuses the first figure of `entries` (the file's `what` list) no measurement gives: a time, 99th percentile,
/// interval or bandwidth below zero or infinite, or a zero time for a point that moved bytes. Judged
/// as read they gave verdicts on `inf GB/s`; the error names the point and the field.
fn impossible_figure(entries: &[Entry], what: &str) -> std::result::Result<(), String> {
    for (i, e) in entries.iter().enumerate() {
        let moved = e.size.is_some_and(|s| s > 0);
        for (placement, p) in [("out_of_place", e.out_of_place()), ("in_place", e.in_place())] {
            // (field, value, whether zero is impossible too)
            let figures = [
                ("time", p.time, moved),
                ("p99_us", p.p99_us, false),
                ("ci95_us", p.ci95_us, false),
                ("alg_bw", p.alg_bw, false),
                ("bus_bw", p.bus_bw, false),
            ];
            for (field, v, not_zero) in figures {
                // "nan" (not measured) is read as such, and judged as missing.
                let Some(v) = v.filter(|v| !v.is_nan()) else { continue };
                let bad = v < 0.0 || v.is_infinite() || (not_zero && v == 0.0);
                if bad {
                    let point = format!(
                        "{} {} of {} B",
                        e.path.as_deref().unwrap_or("?"),
                        e.collective.as_deref().unwrap_or("?"),
                        e.size.map_or_else(|| "?".to_string(), |s| s.to_string())
                    );
                    return Err(format!(
                        "{what}[{i}] ({point}) has {placement}.{field} = {v}, which no measurement gives (times and \
                         bandwidths are positive and finite): the file was edited or damaged; measure again with \
                         `collbench preflight -J FILE`"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: f64, bus_bw: f64) -> Entry {
        let v = serde_json::json!({
            "size": 1048576, "path": "tcp@lo", "collective": "all_reduce",
            "out_of_place": { "time": time, "alg_bw": 1.0, "bus_bw": bus_bw, "ci95_us": 0.5, "p99_us": 12.0 },
            "in_place": { "time": "nan", "alg_bw": "nan", "bus_bw": "nan" },
        });
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn impossible_times_and_bandwidths_are_refused_naming_the_point_and_field() {
        assert_eq!(
            impossible_figure(&[entry(10.0, 2.0), entry(11.0, 1.9)], "results"),
            Ok(())
        );
        let e = impossible_figure(&[entry(10.0, 2.0), entry(-5.0, 2.0)], "results").unwrap_err();
        assert!(
            e.starts_with("results[1] (tcp@lo all_reduce of 1048576 B) has out_of_place.time = -5"),
            "{e}"
        );
        let e = impossible_figure(&[entry(0.0, 2.0)], "connectivity").unwrap_err();
        assert!(e.starts_with("connectivity[0] (") && e.contains("time = 0"), "{e}");
        let e = impossible_figure(&[entry(10.0, -1.0)], "results").unwrap_err();
        assert!(e.contains("out_of_place.bus_bw = -1"), "{e}");
    }
}

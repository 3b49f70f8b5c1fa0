//! From measurements to checks: which threshold applies to each path and collective (the expectations
//! file, else the link speed, else none, said so), and one [`Check`] per thing judged.

use serde::{Deserialize, Serialize};

use super::expect::{Expectations, LatencyStat, MinBusbw, PLANNED};
use super::measure::{self, Estimate, Sample};
use super::verdict::{threshold_check, Bound, Check, Verdict};
use crate::collective::Collective;
use crate::compare::diff::{diff, Verdict as Change};
use crate::compare::input::Point;
use crate::sizes::format_size;

/// busbw a path should reach, as a share of its line rate, when the expectations file says nothing.
pub const DEFAULT_LINE_RATE_PCT: f64 = 70.0;

/// One measured path: its name in the results, how `--transport` named it, and its line rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathInfo {
    /// As measured (`tcp@lo`).
    pub name: String,
    /// As `--transport` gave it (`tcp`).
    pub given: String,
    /// GB/s, where known.
    pub line_rate_gbs: Option<f64>,
    /// Where the line rate came from (`--line-rate`, `link speed of eth0`), or why there is none.
    pub rate_from: String,
}

/// Everything the checks are made from.
pub struct Inputs<'a> {
    pub paths: &'a [PathInfo],
    /// The connectivity sweep's samples (8 B).
    pub connectivity: &'a [Sample],
    /// The latency and bandwidth sweeps' samples.
    pub samples: &'a [Sample],
    pub expect: Option<&'a Expectations>,
    /// The smallest size of the bandwidth phase.
    pub bandwidth_from: u64,
}

/// The checks and what was measured but not judged (with why).
#[derive(Debug, Default)]
pub struct Judged {
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
}

fn matches(entry_path: &str, p: &PathInfo) -> bool {
    entry_path == "*" || entry_path == p.given || entry_path == p.name
}

/// The last value `pick` finds in the entries for path `p` and collective `c`, with its source.
fn from_file<T: Copy>(
    expect: Option<&Expectations>,
    p: &PathInfo,
    c: Collective,
    pick: impl Fn(&super::expect::Entry) -> Option<(T, usize)>,
) -> Option<(T, String)> {
    let e = expect?;
    e.entries
        .iter()
        .filter(|x| matches(&x.path, p) && x.collective.map_or(true, |xc| xc == c))
        .filter_map(|x| pick(x).map(|(v, line)| (v, format!("{} line {line}", e.file))))
        .last()
}

/// Every check of one preflight.
pub fn judge(inp: &Inputs<'_>) -> Judged {
    let mut out = Judged::default();
    for p in inp.paths {
        connectivity(inp, p, &mut out);
        data(inp, p, &mut out);
        for c in PLANNED {
            bandwidth(inp, p, c, &mut out);
        }
        latency(inp, p, &mut out);
    }
    out
}

fn built_in(name: String, p: &PathInfo, measured: String, threshold: &str, ok: bool, detail: String) -> Check {
    Check {
        name,
        path: p.name.clone(),
        measured,
        value: None,
        lo: None,
        hi: None,
        unit: String::new(),
        threshold: threshold.to_string(),
        source: "built in".into(),
        verdict: if ok { Verdict::Pass } else { Verdict::Fail },
        detail,
        cause: None,
        evidence: Vec::new(),
    }
}

fn connectivity(inp: &Inputs<'_>, p: &PathInfo, out: &mut Judged) {
    let mine: Vec<&Sample> = inp.connectivity.iter().filter(|s| s.path == p.name).collect();
    let wrong: u64 = mine.iter().map(|s| s.wrong).sum();
    let ok = !mine.is_empty() && wrong == 0;
    let measured = if mine.is_empty() {
        "not measured".to_string()
    } else {
        format!("{} x 8 B collectives, {wrong} wrong", mine.len())
    };
    let detail = if ok {
        "every rank reached its peers and got the right data".to_string()
    } else if mine.is_empty() {
        "the path was not measured".to_string()
    } else {
        "8 B collectives delivered wrong data".to_string()
    };
    out.checks.push(built_in(
        format!("{} connectivity", p.name),
        p,
        measured,
        "completes, 0 wrong",
        ok,
        detail,
    ));
}

fn data(inp: &Inputs<'_>, p: &PathInfo, out: &mut Judged) {
    let mine: Vec<&Sample> = inp.samples.iter().filter(|s| s.path == p.name).collect();
    if mine.is_empty() {
        // Nothing was checked (the run ended before any point): no claim about the data either way.
        return;
    }
    let wrong: u64 = mine.iter().map(|s| s.wrong).sum();
    let bad: Vec<String> = mine
        .iter()
        .filter(|s| s.wrong > 0)
        .map(|s| format!("{} {}", s.collective, format_size(s.size)))
        .collect();
    out.checks.push(built_in(
        format!("{} data", p.name),
        p,
        format!("{wrong} wrong elements in {} points", mine.len()),
        "0 wrong",
        wrong == 0,
        if bad.is_empty() {
            "every checked result was exact".to_string()
        } else {
            format!("wrong data at {}", bad.join(", "))
        },
    ));
}

/// The samples of path `p`, collective `c`, grouped by size (ascending), sweeps together.
fn by_size<'a>(samples: &'a [Sample], p: &PathInfo, c: Collective, from: u64, to: u64) -> Vec<(u64, Vec<&'a Sample>)> {
    let mut groups: Vec<(u64, Vec<&Sample>)> = Vec::new();
    for s in samples
        .iter()
        .filter(|s| s.path == p.name && s.collective == c.name() && s.size >= from && s.size <= to)
    {
        match groups.iter_mut().find(|g| g.0 == s.size) {
            // A size met twice in one sweep (rounding) counts once.
            Some(g) if g.1.iter().any(|x| x.repeat == s.repeat) => {}
            Some(g) => g.1.push(s),
            None => groups.push((s.size, vec![s])),
        }
    }
    groups.sort_by_key(|g| g.0);
    groups
}

fn bandwidth(inp: &Inputs<'_>, p: &PathInfo, c: Collective, out: &mut Judged) {
    let groups = by_size(inp.samples, p, c, inp.bandwidth_from, u64::MAX);
    // The plateau: the size with the highest median busbw.
    let Some((size, sweeps, est)) = groups
        .iter()
        .map(|(size, g)| (*size, g, measure::busbw(g)))
        .max_by(|a, b| a.2.value.total_cmp(&b.2.value))
    else {
        out.notes.push(format!("{} {c}: no bandwidth point measured", p.name));
        return;
    };
    let name = format!("{} {c} busbw", p.name);
    let at = format!("at {}", format_size(size));
    // The minimum in GB/s with its source: the file's, or the default share of a known line rate.
    let min = match from_file(inp.expect, p, c, |e| e.min_busbw) {
        Some((MinBusbw::Gbs(g), src)) => Ok((g, src)),
        Some((MinBusbw::PctOfLine(pct), src)) => match p.line_rate_gbs {
            Some(rate) => Ok((
                rate * pct / 100.0,
                format!("{src}: {pct}% of {rate:.3} GB/s ({})", p.rate_from),
            )),
            None => Err(Some((pct, src))),
        },
        None => match p.line_rate_gbs {
            Some(rate) => Ok((
                rate * DEFAULT_LINE_RATE_PCT / 100.0,
                format!(
                    "default: {DEFAULT_LINE_RATE_PCT}% of {} ({:.1} Gbit/s)",
                    p.rate_from,
                    rate * 8.0
                ),
            )),
            None => Err(None),
        },
    };
    match min {
        Ok((g, src)) => out.checks.push(with_size(
            threshold_check(name, &p.name, est, "GB/s", 3, Bound::AtLeast, g, src),
            &at,
        )),
        // A share of a line rate nobody knows: shown, and a warning rather than a guess.
        Err(Some((pct, src))) => {
            let mut ch = threshold_check(name, &p.name, est, "GB/s", 3, Bound::AtLeast, 0.0, src);
            ch.threshold = format!(">= {pct}% of an unknown line rate");
            ch.verdict = Verdict::Warn;
            ch.detail = format!(
                "cannot judge: the line rate of {} is unknown ({}); give --line-rate GBIT",
                p.name, p.rate_from
            );
            out.checks.push(ch);
        }
        Err(None) => out.notes.push(format!(
            "{} {c} busbw {:.3} GB/s at {}: not judged, no threshold ({}; give --line-rate GBIT or min_busbw in \
             --expect)",
            p.name,
            est.value,
            format_size(size),
            p.rate_from
        )),
    }
    if let Some((max, src)) = from_file(inp.expect, p, c, |e| e.max_cv) {
        out.checks.push(with_size(
            threshold_check(
                format!("{} {c} cv", p.name),
                &p.name,
                measure::cv(sweeps),
                "",
                3,
                Bound::AtMost,
                max,
                src,
            ),
            &at,
        ));
    }
}

/// The check with the size it was judged at in its detail.
fn with_size(mut c: Check, at: &str) -> Check {
    c.detail = format!("{at}: {}", c.detail);
    c
}

fn latency(inp: &Inputs<'_>, p: &PathInfo, out: &mut Judged) {
    let Some(e) = inp.expect else { return };
    let c = Collective::AllReduce;
    // The last limit per (size, statistic) wins.
    let mut limits: Vec<(u64, LatencyStat, f64, usize)> = Vec::new();
    for x in e
        .entries
        .iter()
        .filter(|x| matches(&x.path, p) && x.collective.map_or(true, |xc| xc == c))
    {
        for l in &x.latency {
            limits.retain(|k| !(k.0 == l.size && k.1 == l.stat));
            limits.push((l.size, l.stat, l.max_us, l.line));
        }
    }
    let groups = by_size(inp.samples, p, c, 0, inp.bandwidth_from.saturating_sub(1));
    for (size, stat, max_us, line) in limits {
        let name = format!("{} {c} {} @ {}", p.name, stat.word(), format_size(size));
        let src = format!("{} line {line}", e.file);
        match groups.iter().find(|g| g.0 == size) {
            Some((_, sweeps)) => {
                let est: Estimate = match stat {
                    LatencyStat::P99 => measure::p99(sweeps),
                    LatencyStat::Time => measure::time(sweeps),
                };
                out.checks
                    .push(threshold_check(name, &p.name, est, "us", 1, Bound::AtMost, max_us, src));
            }
            None => {
                let sizes: Vec<String> = groups.iter().map(|g| format_size(g.0)).collect();
                out.checks.push(Check {
                    name,
                    path: p.name.clone(),
                    measured: "not measured".into(),
                    value: None,
                    lo: None,
                    hi: None,
                    unit: "us".into(),
                    threshold: format!("<= {max_us:.1} us"),
                    source: src,
                    verdict: Verdict::Warn,
                    detail: format!(
                        "the plan measures latency at {} only; use one of those sizes",
                        sizes.join(", ")
                    ),
                    cause: None,
                    evidence: Vec::new(),
                });
            }
        }
    }
}

/// Checks against a baseline: per path and collective, FAIL when a point is significantly slower than the
/// baseline's by more than `threshold_pct`, PASS when none is; points only one side has are noted.
pub fn baseline(old: &[Point], new: &[Point], file: &str, threshold_pct: f64, out: &mut Judged) {
    let d = diff(old, new, threshold_pct);
    let mut keys: Vec<(String, String)> = Vec::new();
    for c in &d.changes {
        let k = (c.key.path.clone(), c.key.collective.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (path, coll) in &keys {
        let mine: Vec<_> = d
            .changes
            .iter()
            .filter(|c| &c.key.path == path && &c.key.collective == coll)
            .collect();
        let worst = mine
            .iter()
            .max_by(|a, b| a.time_pct.total_cmp(&b.time_pct))
            .expect("a key comes from a change");
        let regressed: Vec<String> = mine
            .iter()
            .filter(|c| c.verdict == Change::Regressed)
            .map(|c| format!("{} {:+.1}%", format_size(c.key.size), c.time_pct))
            .collect();
        out.checks.push(Check {
            name: format!("{path} {coll} vs baseline"),
            path: path.clone(),
            measured: format!(
                "worst time change {:+.1}% at {} ({} points)",
                worst.time_pct,
                format_size(worst.key.size),
                mine.len()
            ),
            value: worst.time_pct.is_finite().then_some(worst.time_pct),
            lo: None,
            hi: None,
            unit: "%".into(),
            threshold: format!("no point slower by > {threshold_pct}% beyond the noise"),
            source: format!("--baseline {file}"),
            verdict: if regressed.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            detail: if regressed.is_empty() {
                "no significant regression".into()
            } else {
                format!("regressed: {}", regressed.join(", "))
            },
            cause: None,
            evidence: Vec::new(),
        });
    }
    if keys.is_empty() {
        out.notes.push(format!(
            "--baseline {file}: no point in common with this preflight (same path, collective, type, size and rank \
             count); nothing compared"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::preflight::expect::parse;

    fn path(rate: Option<f64>) -> PathInfo {
        PathInfo {
            name: "tcp@eth0".into(),
            given: "tcp".into(),
            line_rate_gbs: rate,
            rate_from: if rate.is_some() {
                "link speed of eth0".into()
            } else {
                "link speed of eth0 unknown".into()
            },
        }
    }

    fn s(coll: &str, size: u64, repeat: u32, time_us: f64, busbw: f64) -> Sample {
        Sample {
            path: "tcp@eth0".into(),
            collective: coll.into(),
            size,
            repeat,
            time_us,
            ci95_us: time_us * 0.01,
            busbw,
            p99_us: time_us * 1.5,
            iters: 10,
            wrong: 0,
        }
    }

    /// Sweeps: all_reduce a median 2 GB/s at 16 MiB (1.98 to 2.02), all_gather 1 GB/s; latency 100 us at 8 B.
    fn samples() -> Vec<Sample> {
        let mut v = Vec::new();
        for r in 0..3 {
            let t = [10_000.0, 9_900.0, 10_100.0][r as usize];
            v.push(s("all_reduce", 8, r, 100.0, 0.0));
            v.push(s("all_reduce", 16 << 20, r, t, 2.0 * 10_000.0 / t));
            v.push(s("all_gather", 16 << 20, r, 10_000.0, 1.0));
        }
        v
    }

    fn run(rate: Option<f64>, toml: Option<&str>, samples: &[Sample]) -> Judged {
        let paths = [path(rate)];
        let expect = toml.map(|t| parse(t, "e.toml", &["tcp".into()]).unwrap());
        let conn = [s("all_reduce", 8, 0, 50.0, 0.0)];
        judge(&Inputs {
            paths: &paths,
            connectivity: &conn,
            samples,
            expect: expect.as_ref(),
            bandwidth_from: 1 << 20,
        })
    }

    fn find<'a>(j: &'a Judged, name: &str) -> &'a Check {
        j.checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name} in {:?}", j.checks))
    }

    #[test]
    fn link_speed_gives_the_default_busbw_threshold() {
        // 25 Gbit/s = 3.125 GB/s; 70% = 2.1875 GB/s: all_reduce's 2 GB/s fails.
        let j = run(Some(3.125), None, &samples());
        let c = find(&j, "tcp@eth0 all_reduce busbw");
        assert_eq!(c.verdict, Verdict::Fail);
        assert_eq!(c.threshold, ">= 2.188 GB/s");
        assert!(
            c.source.contains("default: 70% of link speed of eth0 (25.0 Gbit/s)"),
            "{}",
            c.source
        );
        assert_eq!(find(&j, "tcp@eth0 connectivity").verdict, Verdict::Pass);
        assert_eq!(find(&j, "tcp@eth0 data").verdict, Verdict::Pass);
    }

    #[test]
    fn without_a_link_speed_bandwidth_is_noted_not_judged() {
        let j = run(None, None, &samples());
        assert!(j.checks.iter().all(|c| !c.name.ends_with("busbw")), "{:?}", j.checks);
        assert!(
            j.notes
                .iter()
                .any(|n| n.contains("all_reduce busbw 2.000 GB/s") && n.contains("not judged")),
            "{:?}",
            j.notes
        );
    }

    #[test]
    fn the_file_overrides_defaults_and_later_entries_override_earlier() {
        let t = "[[expect]]\nmin_busbw = 5\n[[expect]]\npath = \"tcp\"\ncollective = \"all_gather\"\nmin_busbw = \
                 \"0.5 GB/s\"\nmax_cv = 0.5\nlatency = []\n[[expect]]\nlatency = [{ size = 8, max_p99 = \"1ms\" }, \
                 { size = 16, max_time = 1 }]\n";
        let j = run(Some(100.0), Some(t), &samples());
        let ar = find(&j, "tcp@eth0 all_reduce busbw");
        assert_eq!((ar.verdict, ar.source.as_str()), (Verdict::Fail, "e.toml line 2"));
        let ag = find(&j, "tcp@eth0 all_gather busbw");
        assert_eq!((ag.verdict, ag.source.as_str()), (Verdict::Pass, "e.toml line 6"));
        assert_eq!(find(&j, "tcp@eth0 all_gather cv").verdict, Verdict::Pass);
        let p99 = find(&j, "tcp@eth0 all_reduce p99 @ 8 B");
        assert_eq!((p99.verdict, p99.source.as_str()), (Verdict::Pass, "e.toml line 10"));
        let missing = find(&j, "tcp@eth0 all_reduce time @ 16 B");
        assert_eq!(missing.verdict, Verdict::Warn);
        assert!(missing.detail.contains("8 B"), "{}", missing.detail);
    }

    #[test]
    fn a_percentage_without_a_line_rate_warns() {
        let j = run(None, Some("[[expect]]\nmin_busbw = \"80%\"\n"), &samples());
        let c = find(&j, "tcp@eth0 all_reduce busbw");
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.detail.contains("--line-rate"), "{}", c.detail);
    }

    #[test]
    fn wrong_data_fails_the_data_check() {
        let mut v = samples();
        v[1].wrong = 4;
        let c = find(&run(None, None, &v), "tcp@eth0 data").clone();
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("all_reduce 16 MiB"), "{}", c.detail);
    }

    #[test]
    fn a_threshold_at_the_median_is_inside_the_noise() {
        let j = run(
            None,
            Some("[[expect]]\ncollective = \"all_reduce\"\nmin_busbw = 2.0\n"),
            &samples(),
        );
        assert_eq!(find(&j, "tcp@eth0 all_reduce busbw").verdict, Verdict::Warn);
    }
}

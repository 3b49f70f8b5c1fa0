//! The preflight's outputs: a table of checks for people (stdout), JSON (`-J`, schema
//! schema/collbench-preflight.schema.json), JUnit XML for CI systems (`--junit`), Markdown (`--markdown`).

use serde_json::{json, Value};

pub use super::document::Report;
use super::verdict::{Check, Verdict};
use crate::units::BwUnit;
use crate::validate::wrap::{para, wrap, WIDTH};

const COLUMNS: [&str; 5] = ["check", "measured", "threshold", "source", "verdict"];

/// A check's measurement in `units`: from its numbers where it has them (a figure printed to 3 decimals and
/// then converted would carry its rounding 8 times over), else as written.
fn measured(c: &Check, units: BwUnit) -> String {
    match (c.unit.as_str(), c.value, c.lo, c.hi) {
        ("GB/s", Some(v), Some(lo), Some(hi)) if units != BwUnit::Gbyte => {
            let first = c.measured.split_whitespace().next().unwrap_or("");
            let d = first.split_once('.').map_or(0, |(_, d)| d.len());
            let f = |x: f64| format!("{:.d$}", units.of_gbs(x));
            format!("{} {units} [{}, {}]", f(v), f(lo), f(hi))
        }
        _ => units.restate(&c.measured),
    }
}

/// Each check's cells, bandwidth in `units` (the checks hold GB/s, as the JSON does).
fn rows(checks: &[Check], units: BwUnit) -> Vec<[String; 5]> {
    checks
        .iter()
        .map(|c| {
            [
                c.name.clone(),
                measured(c, units),
                units.restate(&c.threshold),
                units.restate(&c.source),
                c.verdict.word().to_string(),
            ]
        })
        .collect()
}

fn counts(checks: &[Check]) -> (usize, usize, usize) {
    let n = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
    (n(Verdict::Pass), n(Verdict::Warn), n(Verdict::Fail))
}

/// Checks of one kind (a pairwise finding about one host or link) listed one by one on stdout at most; the
/// rest are counted (every one is in the JSON), so a 1,000-host run stays a screen long.
pub const MAX_FINDING_CHECKS: usize = 12;

/// Whether `c` is one pairwise finding (a slow host or link), of which a large cluster may have many.
fn is_finding(c: &Check) -> bool {
    c.name.contains(" pairwise: slow host ") || c.name.contains(" pairwise: slow link ")
}

/// The checks shown on stdout: every check but the pairwise findings beyond [`MAX_FINDING_CHECKS`] (failed
/// ones first), and a line counting those left out.
fn shown(checks: &[Check]) -> (Vec<&Check>, Option<String>) {
    let findings: Vec<&Check> = checks.iter().filter(|c| is_finding(c)).collect();
    if findings.len() <= MAX_FINDING_CHECKS {
        return (checks.iter().collect(), None);
    }
    let mut keep: Vec<&Check> = findings
        .iter()
        .copied()
        .filter(|c| c.verdict == Verdict::Fail)
        .collect();
    keep.extend(findings.iter().copied().filter(|c| c.verdict != Verdict::Fail));
    keep.truncate(MAX_FINDING_CHECKS);
    let left: Vec<&Check> = findings
        .iter()
        .copied()
        .filter(|c| !keep.iter().any(|k| std::ptr::eq(*k, *c)))
        .collect();
    let count = |what: &str| left.iter().filter(|c| c.name.contains(what)).count();
    let (p, w, f) = counts_of(&left);
    let note = format!(
        "... and {} more pairwise findings ({} slow hosts, {} slow links; {f} failed, {w} warned, {p} passed): \
         every one in -J",
        left.len(),
        count(" pairwise: slow host "),
        count(" pairwise: slow link ")
    );
    let shown = checks
        .iter()
        .filter(|c| !is_finding(c) || keep.iter().any(|k| std::ptr::eq(*k, *c)))
        .collect();
    (shown, Some(note))
}

fn counts_of(checks: &[&Check]) -> (usize, usize, usize) {
    let n = |v: Verdict| checks.iter().filter(|c| c.verdict == v).count();
    (n(Verdict::Pass), n(Verdict::Warn), n(Verdict::Fail))
}

/// The table's columns on stdout: where each threshold came from, and why a check failed, are on the lines
/// under it (for the checks that did not pass) and in the JSON and Markdown.
const SHOWN: [&str; 4] = ["check", "measured", "threshold", "verdict"];

/// The table of `rows` (cells as [`SHOWN`]) in [`WIDTH`] columns: the widest of the first three columns are
/// narrowed until the row fits, and a cell longer than its column goes on to the row's next lines.
fn table(rows: &[[String; 4]]) -> String {
    let mut width = SHOWN.map(str::len);
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Two spaces before the table and between its columns; the verdict's column is never narrowed.
    let room = WIDTH - 2 - 2 * (SHOWN.len() - 1) - width[3];
    while width[..3].iter().sum::<usize>() > room {
        let widest = (0..3).max_by_key(|&i| width[i]).unwrap_or(0);
        width[widest] -= 1;
    }
    let line = |cells: [&str; 4]| {
        let padded: Vec<String> = cells.iter().zip(width).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    let mut out = line(SHOWN);
    for row in rows {
        let cells: Vec<Vec<String>> = row.iter().zip(width).map(|(c, w)| wrap(c, w, w)).collect();
        let n = cells.iter().map(Vec::len).max().unwrap_or(1);
        for i in 0..n {
            let cell = |k: usize| cells[k].get(i).map_or("", String::as_str);
            out += &line([cell(0), cell(1), cell(2), cell(3)]);
        }
    }
    out
}

/// The verdict as one line of at most [`WIDTH`] columns, for people and `grep`: the word, how many checks
/// failed (or warned) and which, as many names as fit.
pub fn verdict_line(r: &Report) -> String {
    let (p, w, f) = counts(&r.checks);
    let n = r.checks.len();
    let (what, names): (String, Vec<&str>) = {
        let of = |v: Verdict| {
            r.checks
                .iter()
                .filter(|c| c.verdict == v)
                .map(|c| c.name.as_str())
                .collect()
        };
        if f > 0 {
            (format!("{f} of {n} checks failed"), of(Verdict::Fail))
        } else if w > 0 {
            (format!("{w} of {n} checks warned"), of(Verdict::Warn))
        } else {
            (format!("{p} of {n} checks passed"), Vec::new())
        }
    };
    let mut tail = String::new();
    if f > 0 && w > 0 {
        tail += &format!("; {w} warned");
    }
    if r.strict {
        tail += "; --strict: warnings fail";
    }
    if !matches!(r.exit_code, 0 | 1) {
        tail += &format!("; ended before its plan was done, exit {}", r.exit_code);
    }
    let head = format!("Preflight verdict: {}: {what}", r.verdict.word());
    // As many names as fit, then how many did not.
    let room = WIDTH.saturating_sub(head.chars().count() + tail.chars().count() + " ()".len());
    let more = |k: usize| match (names.len() - k, k) {
        (0, _) => String::new(),
        (m, 0) => format!("{m} more"),
        (m, _) => format!(", {m} more"),
    };
    let (mut best, mut len) = (None, 0);
    for k in 0..=names.len() {
        if k > 0 {
            len += names[k - 1].chars().count() + if k > 1 { 2 } else { 0 };
        }
        if len > room {
            break;
        }
        if len + more(k).len() <= room {
            best = Some(k);
        }
    }
    let listed = match best {
        Some(k) if !names.is_empty() => format!(" ({}{})", names[..k].join(", "), more(k)),
        _ => String::new(),
    };
    format!("{head}{listed}{tail}")
}

/// The human summary, every line at most [`WIDTH`] columns: a table of checks, the notes, what failed or
/// warned and why, and last the verdict on one line; bandwidth in `units`. Past [`MAX_FINDING_CHECKS`]
/// pairwise findings, the rest are counted on one line.
pub fn text(r: &Report, units: BwUnit) -> String {
    let (checks, left_out) = shown(&r.checks);
    let rows: Vec<[String; 4]> = checks
        .iter()
        .map(|c| {
            let [name, measured, threshold, _, verdict] = rows(std::slice::from_ref(*c), units).remove(0);
            [name, measured, threshold, verdict]
        })
        .collect();
    let mut out = String::from("\nPreflight checks:\n");
    out += &table(&rows);
    if let Some(l) = &left_out {
        out += &para(l, 2);
    }
    for n in &r.notes {
        out += &para(&format!("note: {}", units.restate(n)), 2);
    }
    for c in checks.iter().filter(|c| c.verdict != Verdict::Pass) {
        out += &para(&why(c, units), 2);
        for e in &c.evidence {
            out += &para(&format!("evidence: {}", e.line()), 6);
        }
    }
    out += &verdict_line(r);
    out.push('\n');
    out
}

/// A failed or warned check in one line: the value, the threshold and where it came from, then why; bandwidth
/// in `units`.
pub fn why(c: &Check, units: BwUnit) -> String {
    format!(
        "{}: {}: {} vs {} ({}): {}",
        c.verdict.word(),
        c.name,
        measured(c, units),
        units.restate(&c.threshold),
        units.restate(&c.source),
        units.restate(&c.detail)
    )
}

/// The same as Markdown.
pub fn markdown(r: &Report) -> String {
    let (p, w, f) = counts(&r.checks);
    let mut out = format!(
        "## collbench preflight: {}\n\n{} rank(s); {p} passed, {w} warned, {f} failed.\n\n",
        r.verdict.word(),
        r.nranks
    );
    out += &format!("| {} |\n|{}\n", COLUMNS.join(" | "), "---|".repeat(COLUMNS.len()));
    // Files keep GB/s, as the JSON does.
    for (c, row) in r.checks.iter().zip(rows(&r.checks, BwUnit::Gbyte)) {
        let mut cells: Vec<String> = row.iter().map(|x| x.replace('|', "\\|")).collect();
        if c.verdict != Verdict::Pass {
            cells[4] = format!("**{}**", cells[4]);
        }
        out += &format!("| {} |\n", cells.join(" | "));
    }
    if !r.notes.is_empty() {
        out += "\nNot judged:\n\n";
        for n in &r.notes {
            out += &format!("- {n}\n");
        }
    }
    let bad: Vec<&Check> = r.checks.iter().filter(|c| c.verdict != Verdict::Pass).collect();
    if !bad.is_empty() {
        out += "\nWhy:\n\n";
        for c in bad {
            out += &format!(
                "- **{}** {}\n",
                c.verdict.word(),
                why(c, BwUnit::Gbyte).split_once(": ").map_or("", |x| x.1)
            );
            for e in &c.evidence {
                out += &format!("  - evidence: {}\n", e.line());
            }
        }
    }
    out
}

/// Text made safe for an XML attribute or element.
fn xml(s: &str) -> String {
    // Control characters are not allowed in XML 1.0.
    let allowed: String = s
        .chars()
        .map(|c| {
            if c < ' ' && !matches!(c, '\n' | '\t' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    quick_xml::escape::escape(&allowed).into_owned()
}

/// JUnit XML: one testcase per check; FAIL is a failure, WARN is skipped (with its reason).
pub fn junit(r: &Report) -> String {
    let (_, w, f) = counts(&r.checks);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out += &format!(
        "<testsuites name=\"collbench preflight\" tests=\"{}\" failures=\"{f}\" skipped=\"{w}\">\n",
        r.checks.len()
    );
    out += &format!(
        "  <testsuite name=\"preflight\" tests=\"{}\" failures=\"{f}\" skipped=\"{w}\" errors=\"0\">\n",
        r.checks.len()
    );
    for c in &r.checks {
        let evidence: String = c.evidence.iter().map(|e| format!("; evidence: {}", e.line())).collect();
        let what = format!(
            "measured {}; threshold {} ({}); {}{evidence}",
            c.measured, c.threshold, c.source, c.detail
        );
        out += &format!(
            "    <testcase classname=\"preflight.{}\" name=\"{}\"",
            xml(&c.path),
            xml(&c.name)
        );
        match c.verdict {
            Verdict::Pass => {
                out += &format!("><system-out>{}</system-out></testcase>\n", xml(&what));
            }
            Verdict::Warn => {
                out += &format!("><skipped message=\"WARN: {}\"/></testcase>\n", xml(&what));
            }
            Verdict::Fail => {
                out += &format!(
                    "><failure message=\"{}\" type=\"preflight\">{}</failure></testcase>\n",
                    xml(&c.detail),
                    xml(&what)
                );
            }
        }
    }
    out += "  </testsuite>\n</testsuites>\n";
    out
}

/// The JSON document.
pub fn json(r: &Report) -> Value {
    serde_json::to_value(r).unwrap_or_else(|e| json!({"error": e.to_string()}))
}

#[cfg(test)]
pub(super) mod tests {
    use quick_xml::events::Event;

    use super::super::checks::PathInfo;
    use super::super::document::PREFLIGHT_SCHEMA_VERSION;
    use super::*;

    fn check(name: &str, verdict: Verdict) -> Check {
        Check {
            name: name.into(),
            path: "tcp@lo".into(),
            measured: "1.000 GB/s [0.9, 1.1]".into(),
            value: Some(1.0),
            lo: Some(0.9),
            hi: Some(1.1),
            unit: "GB/s".into(),
            threshold: ">= 2 GB/s".into(),
            source: "e.toml line 3".into(),
            verdict,
            detail: "a <tricky> & \"quoted\" detail".into(),
            cause: None,
            evidence: Vec::new(),
        }
    }

    pub(crate) fn report() -> Report {
        Report {
            collbench_preflight: PREFLIGHT_SCHEMA_VERSION,
            verdict: Verdict::Fail,
            strict: false,
            exit_code: 1,
            nranks: 4,
            repeat: 3,
            plan: vec!["Preflight plan".into()],
            paths: vec![PathInfo {
                name: "tcp@lo".into(),
                given: "tcp".into(),
                line_rate_gbs: None,
                rate_from: "link speed of lo unknown".into(),
            }],
            bandwidth_from: 1 << 20,
            checks: vec![
                check("tcp@lo connectivity", Verdict::Pass),
                check("tcp@lo all_reduce busbw", Verdict::Fail),
                check("tcp@lo all_gather | busbw", Verdict::Warn),
            ],
            notes: vec!["n1".into()],
            results: Vec::new(),
            connectivity: Vec::new(),
            evidence: Vec::new(),
        }
    }

    #[test]
    fn the_text_summary_lists_every_check_and_the_verdict() {
        let t = text(&report(), BwUnit::Gbyte);
        for name in [
            "tcp@lo connectivity",
            "tcp@lo all_reduce busbw",
            "e.toml line 3",
            "note: n1",
        ] {
            assert!(t.contains(name), "{t}");
        }
        // The failure line gives the value, the threshold and where it came from.
        assert!(
            t.contains("FAIL: tcp@lo all_reduce busbw: 1.000 GB/s [0.9, 1.1] vs >= 2 GB/s (e.toml line 3): a <tricky>"),
            "{t}"
        );
        assert_eq!(
            t.lines().last(),
            Some("Preflight verdict: FAIL: 1 of 3 checks failed (tcp@lo all_reduce busbw); 1 warned"),
            "{t}"
        );
    }

    /// A preflight of a real cluster's shape: long sources, long names, findings with evidence, a long note.
    fn realistic() -> Report {
        let mut r = report();
        let long = |name: &str, verdict: Verdict, source: &str, detail: &str| Check {
            source: source.into(),
            detail: detail.into(),
            measured: "11.482 GB/s [11.301, 11.650]".into(),
            value: Some(11.482),
            lo: Some(11.301),
            hi: Some(11.650),
            ..check(name, verdict)
        };
        r.checks = vec![
            long("tcp@eth0 connectivity", Verdict::Pass, "built in", "every rank reached every other"),
            long(
                "tcp@eth0 all_reduce busbw",
                Verdict::Fail,
                "default: 70% of link speed of eth0 from /sys/class/net/eth0/speed (25000 Mb/s) (25.0 Gbit/s)",
                "at 64 MiB: the interval lies below the threshold; the slowest rank was 3 on node-017, whose \
                 sends waited on its peer's receive window for 41% of the run",
            ),
            long(
                "tcp@eth0 all_gather busbw",
                Verdict::Warn,
                "expectations.toml line 12: 90% of 12.500 GB/s (link speed of eth0 from ethtool)",
                "at 64 MiB: the interval straddles the threshold; more sweeps (--repeat) give a surer verdict",
            ),
            long(
                "tcp@eth0 pairwise: slow link node-017.rack-3.cluster.example.com <-> node-018.rack-3.cluster.example.com",
                Verdict::Fail,
                "pairwise: 5 x the median absolute deviation below the median of 120 links, false findings held at 1%",
                "a_very_long_word_without_any_space_in_it_such_as_a_path_/var/lib/collbench/results/2026-12-06/preflight.json",
            ),
        ];
        r.checks[1].evidence = vec![super::super::evidence::HostEvidence {
            host: "node-017.rack-3.cluster.example.com".into(),
            wall_s: 12.0,
            busy_pct: Some(97.0),
            throttled_s: Some(4.2),
            throttled_periods: Some(120),
            tcp: Some(super::super::evidence::TcpCounters {
                out_segs: 9_000_000,
                retrans_segs: 4_100,
                ..Default::default()
            }),
            ..Default::default()
        }];
        r.notes = vec![
            "tcp@eth0 reduce_scatter busbw 11.210 GB/s at 64 MiB: not judged, no threshold (link speed of eth0 \
             unknown; give --line-rate GBIT or min_busbw in --expect)"
                .into(),
        ];
        r
    }

    #[test]
    fn every_line_of_a_realistic_summary_fits_a_log_and_the_verdict_comes_last() {
        let r = realistic();
        for units in [BwUnit::Gbyte, BwUnit::Gbit] {
            let t = text(&r, units);
            for l in t.lines() {
                assert!(l.chars().count() <= WIDTH, "{} columns: {l}\n{t}", l.chars().count());
            }
            // Nothing is lost to the width: every word of a failure's source and detail is printed (in GB/s
            // as written; in Gbit/s its figures are restated).
            for c in r
                .checks
                .iter()
                .filter(|c| c.verdict != Verdict::Pass && units == BwUnit::Gbyte)
            {
                for word in format!("{} {}", c.source, c.detail)
                    .split_whitespace()
                    .filter(|w| w.len() < 60)
                {
                    assert!(t.contains(word), "{word}:\n{t}");
                }
            }
            // A check's row starts with its name and ends with its verdict.
            let row = t
                .lines()
                .find(|l| l.trim_start().starts_with("tcp@eth0 all_gather busbw"));
            assert!(row.is_some_and(|l| l.ends_with("WARN")), "{t}");
            assert_eq!(
                t.lines().last(),
                Some("Preflight verdict: FAIL: 2 of 4 checks failed (tcp@eth0 all_reduce busbw, 1 more); 1 warned"),
                "{t}"
            );
        }
    }

    #[test]
    fn the_verdict_line_names_what_fits_and_counts_the_rest() {
        let mut r = realistic();
        r.checks.truncate(3);
        assert_eq!(
            verdict_line(&r),
            "Preflight verdict: FAIL: 1 of 3 checks failed (tcp@eth0 all_reduce busbw); 1 warned"
        );
        r.checks[1].verdict = Verdict::Pass;
        r.verdict = Verdict::Warn;
        assert_eq!(
            verdict_line(&r),
            "Preflight verdict: WARN: 1 of 3 checks warned (tcp@eth0 all_gather busbw)"
        );
        r.checks[2].verdict = Verdict::Pass;
        r.verdict = Verdict::Pass;
        r.exit_code = 3;
        assert_eq!(
            verdict_line(&r),
            "Preflight verdict: PASS: 3 of 3 checks passed; ended before its plan was done, exit 3"
        );
    }

    #[test]
    fn markdown_is_a_table_with_escaped_pipes() {
        let m = markdown(&report());
        assert!(m.starts_with("## collbench preflight: FAIL"), "{m}");
        assert!(m.contains("| check | measured | threshold | source | verdict |"), "{m}");
        assert!(m.contains("all_gather \\| busbw"), "{m}");
        assert!(m.contains("| **FAIL** |"), "{m}");
        // Header, separator and one row per check: every table line has the same number of cells.
        let table: Vec<&str> = m.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(table.len(), 2 + 3);
        for l in table {
            assert_eq!(l.replace("\\|", "").matches('|').count(), 6, "{l}");
        }
    }

    #[test]
    fn junit_is_well_formed_and_counts_failures_and_skips() {
        let x = junit(&report());
        let mut reader = quick_xml::Reader::from_str(&x);
        let (mut cases, mut failures, mut skipped) = (0, 0, 0);
        loop {
            match reader.read_event().unwrap_or_else(|e| panic!("{e}\n{x}")) {
                Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"testcase" => cases += 1,
                Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"failure" => failures += 1,
                Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"skipped" => skipped += 1,
                Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!((cases, failures, skipped), (3, 1, 1));
        assert!(x.contains("failures=\"1\" skipped=\"1\""), "{x}");
        assert!(x.contains("&lt;tricky&gt; &amp; &quot;quoted&quot;"), "{x}");
    }

    #[test]
    fn json_validates_against_the_schema() {
        let schema: Value =
            serde_json::from_str(include_str!("../../../schema/collbench-preflight.schema.json")).unwrap();
        let mut compiler = boon::Compiler::new();
        let mut schemas = boon::Schemas::new();
        compiler.add_resource("urn:preflight", schema).unwrap();
        let idx = compiler.compile("urn:preflight", &mut schemas).unwrap();
        let v = json(&report());
        if let Err(e) = schemas.validate(&v, idx) {
            panic!("{e:#}\n{v:#}");
        }
        assert_eq!(v["checks"][1]["verdict"], "fail");
        let mut bad = v.clone();
        bad["checks"][0]["verdict"] = json!("maybe");
        assert!(schemas.validate(&bad, idx).is_err());
    }

    #[test]
    fn a_thousand_host_preflight_counts_the_findings_past_a_screen() {
        let mut r = report();
        for i in 0..300 {
            let name = if i < 5 {
                format!("tcp@eth0 pairwise: slow host h{i}")
            } else {
                format!("tcp@eth0 pairwise: slow link h{i} <-> h{}", i + 500)
            };
            r.checks
                .push(check(&name, if i % 3 == 0 { Verdict::Warn } else { Verdict::Fail }));
        }
        let t = text(&r, BwUnit::Gbyte);
        assert!(t.lines().count() <= 60, "{} lines:\n{t}", t.lines().count());
        assert_eq!(
            t.matches("FAIL: tcp@eth0 pairwise: slow").count(),
            MAX_FINDING_CHECKS,
            "{t}"
        );
        // The count goes on to a second line rather than past 100 columns.
        let words = t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains("... and 288 more pairwise findings (2 slow hosts, 286 slow links; 188 failed, 100 warned, 0 passed): every one in -J"),
            "{t}"
        );
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
        // The other checks and the verdict over all of them stay.
        assert!(t.contains("tcp@lo all_reduce busbw") && t.contains("note: n1"), "{t}");
        let last = t.lines().last().unwrap_or("");
        assert!(
            last.starts_with("Preflight verdict: FAIL: 201 of 303 checks failed (tcp@lo all_reduce busbw, ")
                && last.ends_with(" more); 101 warned")
                && last.chars().count() <= WIDTH,
            "{t}"
        );
        // The JSON keeps every check.
        assert_eq!(json(&r)["checks"].as_array().map(Vec::len), Some(303));
    }
}

//! The preflight's outputs: a table of checks for people (stdout), JSON (`-J`, schema
//! schema/collbench-preflight.schema.json), JUnit XML for CI systems (`--junit`), Markdown (`--markdown`).

use serde_json::{json, Value};

pub use super::document::Report;
use super::verdict::{Check, Verdict};
use crate::units::BwUnit;

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

/// The human summary: a column-aligned table of checks, the notes, what failed or warned and why, the verdict;
/// bandwidth in `units`. Past [`MAX_FINDING_CHECKS`] pairwise findings, the rest are counted on one line.
pub fn text(r: &Report, units: BwUnit) -> String {
    let (checks, left_out) = shown(&r.checks);
    let rows: Vec<[String; 5]> = checks
        .iter()
        .map(|c| rows(std::slice::from_ref(*c), units).remove(0))
        .collect();
    let mut width = COLUMNS.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells.iter().zip(width).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    let mut out = String::from("\nPreflight checks:\n");
    out += &line(&COLUMNS.map(String::from));
    for row in &rows {
        out += &line(row);
    }
    if let Some(l) = &left_out {
        out += &format!("  {l}\n");
    }
    for n in &r.notes {
        out += &format!("  note: {}\n", units.restate(n));
    }
    for c in checks.iter().filter(|c| c.verdict != Verdict::Pass) {
        out += &format!("  {}\n", why(c, units));
        for e in &c.evidence {
            out += &format!("      evidence: {}\n", e.line());
        }
    }
    let (p, w, f) = counts(&r.checks);
    out += &format!(
        "Preflight verdict: {} ({p} passed, {w} warned, {f} failed{}){}\n",
        r.verdict.word(),
        if r.strict { "; --strict: warnings fail" } else { "" },
        match r.exit_code {
            0 | 1 => String::new(),
            code => format!("; ended before its plan was done, exit {code}"),
        }
    );
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
        assert!(
            t.contains("Preflight verdict: FAIL (1 passed, 1 warned, 1 failed)"),
            "{t}"
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
        assert!(
            t.contains("... and 288 more pairwise findings (2 slow hosts, 286 slow links; 188 failed, 100 warned, 0 passed): every one in -J"),
            "{t}"
        );
        // The other checks and the verdict over all of them stay.
        assert!(t.contains("tcp@lo all_reduce busbw") && t.contains("note: n1"), "{t}");
        assert!(
            t.contains("Preflight verdict: FAIL (1 passed, 101 warned, 201 failed)"),
            "{t}"
        );
        // The JSON keeps every check.
        assert_eq!(json(&r)["checks"].as_array().map(Vec::len), Some(303));
    }
}

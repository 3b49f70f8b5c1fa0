//! The Markdown report (`--markdown FILE`): the run in a few lines, one table per path and collective, and
//! the paths compared, for pasting into an issue or a wiki. Rewritten after every record, like the JSON.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::file::{write_atomic, Replace};
use super::Reporter;
use crate::error::Result;
use crate::results::failure::{PointKey, RunError};
use crate::results::record::{Record, RunInfo, Summary, Timing};

/// Writes the Markdown report at a path.
pub struct MarkdownReporter {
    path: PathBuf,
    /// Whether a file at the path may be replaced: `--force` at first, then yes (the file is this run's).
    replace: Replace,
    head: String,
    records: Vec<Record>,
    /// What ended the run early, once it has failed.
    error: Option<RunError>,
}

impl MarkdownReporter {
    /// A reporter for `path` that replaces a file already there only with `force`; check it first with [`check_writable`](super::check_writable).
    pub fn new(path: impl Into<PathBuf>, force: bool) -> Self {
        MarkdownReporter {
            path: path.into(),
            replace: Replace::from_force(force),
            head: String::new(),
            records: Vec::new(),
            error: None,
        }
    }

    fn write(&mut self, summary: Option<&Summary>) -> Result<()> {
        // A stream (a pipe, /dev/stdout) cannot be rewritten: it gets the final report only.
        if summary.is_none() && self.error.is_none() && super::file::is_stream(&self.path) {
            return Ok(());
        }
        let mut text = render(&self.head, &self.records, summary);
        if let Some(e) = &self.error {
            text.push_str(&incomplete(e));
        }
        write_atomic(&self.path, text.as_bytes(), self.replace)?;
        self.replace = Replace::Allowed;
        Ok(())
    }
}

fn cell(t: &Timing) -> String {
    let wrong = t.wrong.map_or_else(|| "n/a".to_string(), |w| w.to_string());
    format!("{:.2} | {:.3} | {:.3} | {wrong}", t.time_us, t.algbw, t.busbw)
}

/// The table a record belongs in: its path, collective and sweep.
fn key(r: &Record) -> (&str, &'static str, u32) {
    (r.path.as_str(), r.collective.name(), r.repeat)
}

/// The section that marks a failed run's report incomplete: the error with its facts, and every point the
/// run did not measure.
fn incomplete(e: &RunError) -> String {
    let mut s = String::from(
        "\n## Incomplete run\n\nThe run failed before its last point; the tables above hold what \
                              it measured.\n\n",
    );
    let _ = writeln!(s, "- error: {}", crate::error::escape(&e.message));
    if let Some(p) = &e.phase {
        let _ = writeln!(s, "- phase: {}", crate::error::escape(p));
    }
    if let (Some(r), Some(h)) = (e.rank, &e.host) {
        let who = if e.culprit { "culprit" } else { "reported by" };
        let _ = writeln!(s, "- {who}: rank {r} (host {})", crate::error::escape(h));
    }
    let _ = writeln!(s, "- exit status: {}", e.exit_code);
    let _ = writeln!(s, "- points not measured: {}", e.missing.len());
    for p in &e.missing {
        let _ = writeln!(s, "  - {p}");
    }
    s
}

/// The whole document for `records` so far (and the summary once the run is over).
pub fn render(head: &str, records: &[Record], summary: Option<&Summary>) -> String {
    let mut s = head.to_string();
    let mut current: Option<(&str, &str, u32)> = None;
    let repeated = records.iter().any(|r| r.repeat > 0);
    // One table per (path, collective, sweep) in the order they first appear, whether the paths took turns
    // by sweep or, with --interleave point, at every point.
    let mut order: Vec<(&str, &str, u32)> = Vec::new();
    for r in records {
        if !order.contains(&key(r)) {
            order.push(key(r));
        }
    }
    let grouped = order.iter().flat_map(|k| records.iter().filter(move |r| key(r) == *k));
    for r in grouped {
        let key = key(r);
        if current != Some(key) {
            current = Some(key);
            let sweep = if repeated {
                format!(", sweep {}", r.repeat + 1)
            } else {
                String::new()
            };
            let _ = write!(
                s,
                "\n## {} on {} ({} ranks{sweep})\n\n| size (B) | count | type | redop | root | time (us) | algbw (GB/s) | \
                 busbw (GB/s) | #wrong | in-place time (us) | algbw | busbw | #wrong | algo |\n\
                 |---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
                key.1, key.0, r.nranks
            );
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.size,
            r.count,
            r.dtype.name(),
            r.op.map_or("none", |o| o.name()),
            r.root.map_or_else(|| "-1".to_string(), |x| x.to_string()),
            cell(&r.out_of_place),
            cell(&r.in_place),
            r.algo
        );
    }
    if let Some(sum) = summary {
        if !sum.comparison.is_empty() {
            s.push_str(
                "\n## Paths compared\n\nOut-of-place; time with its 95% interval; vs best = busbw / the best path's; \
                 \"yes\" where the gap to the best is larger than both intervals.\n\n| collective | size (B) | type | \
                 redop | path | time (us) | +- (us) | busbw (GB/s) | vs best | vs reference | % of line rate | \
                 significant |\n|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|\n",
            );
            for c in &sum.comparison {
                for p in &c.paths {
                    let opt =
                        |v: Option<f64>, prec: usize| v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"));
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.3} | {:.3} | {} | {} | {} |",
                        c.collective.name(),
                        c.size,
                        c.dtype.name(),
                        c.op.map_or("none", |o| o.name()),
                        p.path,
                        p.time_us,
                        p.ci95_us,
                        p.busbw,
                        p.vs_best,
                        opt(p.vs_reference, 3),
                        opt(p.line_rate_pct, 1),
                        if p.significant { "yes" } else { "" }
                    );
                }
            }
        }
        if !sum.paths.is_empty() {
            let _ = write!(
                s,
                "\n## Path costs\n\n{}.\n\n| {} |\n|{}\n",
                super::cost_table::LEGEND,
                super::cost_table::HEADERS.join(" | "),
                "---:|".repeat(super::cost_table::HEADERS.len())
            );
            for c in &sum.paths {
                let _ = writeln!(s, "| {} |", super::cost_table::cells(c).join(" | "));
            }
        }
        let _ = write!(
            s,
            "\n{} wrong elements, in {} of {} points; finished {}.\n",
            sum.wrong,
            sum.out_of_bounds,
            records.len(),
            sum.end_time
        );
        if let Some(m) = &sum.model_markdown {
            s.push('\n');
            s.push_str(m);
        }
    }
    s
}

impl Reporter for MarkdownReporter {
    fn begin(&mut self, run: &RunInfo) -> Result<()> {
        let hosts: std::collections::BTreeSet<&str> = run.ranks.iter().map(|r| r.host.as_str()).collect();
        self.head = format!(
            "# collbench {}\n\n`{}`\n\n{} ranks on {} host(s), launcher {}, started {} (bootstrap {:.3} s, connect \
             {:.3} s).\n",
            run.version,
            run.args.join(" "),
            run.nranks,
            hosts.len(),
            run.launcher,
            run.start_time,
            run.bootstrap_s,
            run.connect_s
        );
        self.write(None)
    }

    fn record(&mut self, rec: &Record) -> Result<()> {
        self.records.push(rec.clone());
        self.write(None)
    }

    fn finish(&mut self, summary: &Summary) -> Result<()> {
        self.write(Some(summary))
    }

    fn fail(&mut self, error: &RunError, planned: &[PointKey]) -> Result<()> {
        let measured: Vec<PointKey> = self.records.iter().map(PointKey::of).collect();
        self.error = Some(error.clone().with_missing(planned, &measured));
        self.write(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::report::summary::summarize;
    use crate::results::testutil::{record, run_info};

    #[test]
    fn paths_taking_turns_at_every_point_still_get_a_table_each() {
        // --interleave point: records arrive a, b, a, b; each path's rows stay together, in size order.
        let mut recs = Vec::new();
        for size in [1u64 << 20, 2 << 20] {
            let a = record(Collective::AllReduce, size, 100.0, 2.0, Some(0));
            let mut b = a.clone();
            b.path = "mpi".into();
            recs.extend([a, b]);
        }
        let doc = render("", &recs, None);
        let titles: Vec<&str> = doc.lines().filter(|l| l.starts_with("## ")).collect();
        assert_eq!(
            titles,
            ["## all_reduce on tcp@lo (4 ranks)", "## all_reduce on mpi (4 ranks)"]
        );
        let sizes: Vec<&str> = doc
            .lines()
            .filter(|l| l.starts_with("| 1048576 |") || l.starts_with("| 2097152 |"))
            .map(|l| l.split(" | ").next().unwrap())
            .collect();
        assert_eq!(sizes, ["| 1048576", "| 2097152", "| 1048576", "| 2097152"], "{doc}");
    }

    #[test]
    fn tables_per_path_and_the_comparison_are_written_as_the_run_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.md");
        let mut m = MarkdownReporter::new(&path, false);
        m.begin(&run_info(false)).unwrap();
        let a = record(Collective::AllReduce, 1 << 20, 100.0, 2.0, Some(0));
        let mut b = a.clone();
        b.path = "tcp@vxlan0".into();
        b.out_of_place.time_us = 150.0;
        b.out_of_place.busbw = 1.2;
        m.record(&a).unwrap();
        let partial = std::fs::read_to_string(&path).unwrap();
        assert!(partial.contains("## all_reduce on tcp@lo (4 ranks)"), "{partial}");
        assert!(partial.contains("| 1048576 |"), "{partial}");
        m.record(&b).unwrap();
        m.finish(&summarize(
            &[a, b],
            "2025-01-01T00:00:00Z".into(),
            Some("tcp@lo"),
            &[],
            Vec::new(),
        ))
        .unwrap();
        let done = std::fs::read_to_string(&path).unwrap();
        assert!(done.contains("## all_reduce on tcp@vxlan0 (4 ranks)"), "{done}");
        assert!(done.contains("## Paths compared"), "{done}");
        let row = done
            .lines()
            .find(|l| l.contains("| tcp@vxlan0 | 150.00"))
            .unwrap_or_else(|| panic!("{done}"));
        assert!(row.contains("| 0.600 | 0.600 |"), "vs best and vs reference: {row}");
        assert!(row.ends_with("| yes |"), "150 +- 0.5 is clear of 100 +- 0.5: {row}");
        assert!(done.contains("0 wrong elements"), "{done}");
    }
}

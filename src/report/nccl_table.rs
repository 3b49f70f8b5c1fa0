//! stdout as nccl-tests prints it, for collbench started under an nccl-tests name (`all_reduce_perf`, ...):
//! its header lines, one table laid out as its `writeResultHeader`, `writeBenchmarkLinePreamble`,
//! `writeBenchmarkLineBody` and `writePerIterReport` lay it out (src/util.cu, JSON version 3), its footer,
//! and its exit status, with `NCCL_TESTS_MIN_BW` judged as it judges it. Nothing of collbench's own goes to
//! stdout here: the wrong element's place goes to stderr.

use std::io::Write;

use serde::Serialize;

use super::format::{float_col, g};
use super::summary::{nccl_avg_busbw, out_of_bounds};
use super::Reporter;
use crate::error::{stderr, Error, Result, EXIT_OK};
use crate::results::record::{Record, RunInfo, Summary, Timing};
use crate::results::run_params::{or_unknown, IterParams, StepView};
use crate::transport::path::Traits;

/// nccl-tests' exit status when a result is wrong or the average bus bandwidth is under 90% of
/// `NCCL_TESTS_MIN_BW` (its `testNumResults`).
pub const EXIT_NCCL_TESTS_FAILED: i32 = 7;

/// The programs nccl-tests builds that collbench answers to, with the collective each runs.
pub const PROGRAMS: [(&str, &str); 7] = [
    ("all_reduce_perf", "all_reduce"),
    ("all_gather_perf", "all_gather"),
    ("reduce_scatter_perf", "reduce_scatter"),
    ("broadcast_perf", "broadcast"),
    ("reduce_perf", "reduce"),
    ("alltoall_perf", "alltoall"),
    ("sendrecv_perf", "sendrecv"),
];

/// Under an nccl-tests name: which program, the minimum average busbw, and whether rows carry a timestamp.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NcclTestsStyle {
    /// The program's name, e.g. `all_reduce_perf`.
    pub program: String,
    /// `NCCL_TESTS_MIN_BW` (GB/s): the run fails when the average busbw is under 90% of it.
    pub min_bw: Option<f64>,
    /// `-S 1`: a timestamp after each row.
    pub timestamps: bool,
}

impl NcclTestsStyle {
    /// nccl-tests' exit status for a run whose data check found `wrong` elements and whose rows (rank 0's;
    /// none elsewhere) are `records`: [`EXIT_NCCL_TESTS_FAILED`] on wrong data or too little bandwidth.
    pub fn exit_status(&self, wrong: u64, records: &[Record]) -> i32 {
        let slow = self.min_bw.is_some_and(|min| nccl_avg_busbw(records) < min * 0.9);
        if wrong > 0 || slow {
            EXIT_NCCL_TESTS_FAILED
        } else {
            EXIT_OK
        }
    }
}

/// Writes nccl-tests' stdout to `out`, flushing after every row.
pub struct NcclTableReporter<W: Write> {
    out: W,
    style: NcclTestsStyle,
    iteration: IterParams,
    rows: Vec<Record>,
}

impl<W: Write> NcclTableReporter<W> {
    /// A reporter writing `style`'s layout to `out`.
    pub fn new(out: W, style: NcclTestsStyle) -> Self {
        NcclTableReporter {
            out,
            style,
            iteration: IterParams::default(),
            rows: Vec::new(),
        }
    }

    /// The writer back, with everything written so far.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write(&mut self, text: &str) -> Result<()> {
        let io = |e| Error::io("writing the results table", e);
        self.out.write_all(text.as_bytes()).map_err(io)?;
        self.out.flush().map_err(io)
    }
}

/// `"{v:>w$}"` for every value, as nccl-tests' `%*s` columns.
fn cols(cells: &[(&str, usize)]) -> String {
    cells.iter().map(|(v, w)| format!("  {v:>w$}")).collect()
}

/// The three lines of nccl-tests' `writeResultHeader` (its blank `#` line first).
pub fn result_header(it: &IterParams, timestamps: bool) -> String {
    let time = if it.cputime { "cputime" } else { "time" };
    let (ts_label, ts_fmt, pad) = if timestamps {
        ("timestamp", "%Y-%m-%d %H:%M:%S", 19)
    } else {
        ("", "", 0)
    };
    let lead = |a: &str, b: &str| format!("# {a:>10}  {b:>12}  {:>8}  {:>6}  {:>6}", "", "", "");
    let first = |a: &str, b: &str, c: &str, d: &str, e: &str| format!("# {a:>10}  {b:>12}  {c:>8}  {d:>6}  {e:>6}");
    let mut s = String::from("#\n");
    if it.per_iter {
        s += &lead("", "");
        s += "              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n";
        let half = |t: &str| {
            cols(&[
                (t, 7),
                ("algbw", 6),
                ("busbw", 6),
                ("#wrong", 6),
                ("i_min", 7),
                ("i_max", 7),
                ("i_p99", 7),
                ("i_cv%", 7),
            ])
        };
        s += &format!(
            "{}{}{} {ts_label:>pad$}\n",
            first("size", "count", "type", "redop", "root"),
            half(time),
            half(time)
        );
        let units = cols(&[
            ("(us)", 7),
            ("(GB/s)", 6),
            ("(GB/s)", 6),
            ("", 6),
            ("(us)", 7),
            ("(us)", 7),
            ("(us)", 7),
            ("(%)", 7),
        ]);
        s += &format!(
            "{}{units}{units} {ts_fmt:>pad$}\n",
            first("(B)", "(elements)", "", "", "")
        );
    } else {
        s += &lead("", "");
        s += "           out-of-place                       in-place          \n";
        let half = |t: &str| cols(&[(t, 7), ("algbw", 6), ("busbw", 6), ("#wrong", 6)]);
        s += &format!(
            "{}{}{} {ts_label:>pad$}\n",
            first("size", "count", "type", "redop", "root"),
            half(time),
            half(time)
        );
        let units = cols(&[("(us)", 7), ("(GB/s)", 6), ("(GB/s)", 6), ("", 6)]);
        s += &format!(
            "{}{units}{units} {ts_fmt:>pad$}\n",
            first("(B)", "(elements)", "", "", "")
        );
    }
    s
}

/// One placement's cells: time, algbw, busbw, #wrong (`N/A` with the check off), then the per-iteration
/// min, max, p99 and coefficient of variation under `-I 1`.
fn placement(t: &Timing, per_iter: bool) -> String {
    let wrong = t
        .wrong
        .map_or_else(|| "    N/A".to_string(), |w| format!("  {:>6}", g(w as f64)));
    let mut s = format!(
        "  {}  {}  {}{wrong}",
        float_col(t.time_us, 7),
        float_col(t.algbw, 6),
        float_col(t.busbw, 6)
    );
    if per_iter {
        let p = t.per_iter.clone().unwrap_or_default();
        s += &format!(
            "  {}  {}  {}  {}",
            float_col(p.min_us, 7),
            float_col(p.max_us, 7),
            float_col(p.p99_us, 7),
            float_col(p.cv_pct, 7)
        );
    }
    s
}

/// One row as nccl-tests prints it (without its newline).
pub fn row(rec: &Record, per_iter: bool) -> String {
    let root = format!("{:6}", rec.root.map_or(-1, |r| r as i64));
    format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {root:>6}{}{}",
        rec.size,
        rec.count,
        rec.dtype.name(),
        rec.op.map_or("none", |o| o.name()),
        placement(&rec.out_of_place, per_iter),
        placement(&rec.in_place, per_iter)
    )
}

/// Now, as nccl-tests stamps rows (`%Y-%m-%d %H:%M:%S`; UTC here).
fn now_stamp() -> String {
    let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    format!("{} {}", &t[..10], &t[11..19])
}

/// The `#  Rank` line of one rank: nccl-tests' fields, with the GPU where the rank has one, else device -1 and
/// the network end in the brackets.
fn rank_line(r: &crate::results::record::RankInfo) -> String {
    let gpu = r.device.as_deref().and_then(|d| {
        let rest = d.strip_prefix("cuda:")?;
        let (ordinal, rest) = rest.split_once(" [")?;
        let (bus, name) = rest.split_once("] ")?;
        Some((ordinal.parse::<i32>().ok()?, bus.to_string(), name.to_string()))
    });
    let (dev, bus, info) = gpu.unwrap_or((-1, r.iface.clone(), format!("tcp {} (host memory)", r.addr)));
    format!(
        "#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {dev:2} [{bus}] {info}",
        r.rank, 0, r.pid, r.host
    )
}

impl<W: Write> Reporter for NcclTableReporter<W> {
    fn begin(&mut self, run: &RunInfo) -> Result<()> {
        let p = &run.params;
        self.iteration = p.iteration.unwrap_or_default();
        let it = self.iteration;
        let library_on_device = p
            .transports
            .iter()
            .find_map(|t| Traits::named(t).filter(|k| k.on_device_stream)?.library);
        let path = if let Some(library) = library_on_device {
            format!("{library}'s collectives on device memory (one GPU per rank)")
        } else {
            format!(
                "collbench's {} path on host memory, not NCCL",
                p.transports.first().map_or(crate::path_names::TCP, String::as_str)
            )
        };
        let step = match p.step {
            Some(StepView::Factor(f)) => format!("{f}(factor)"),
            Some(StepView::Bytes(b)) => format!("{b}(bytes)"),
            None => "?(bytes)".to_string(),
        };
        let mut s = format!("# collbench version {} as nccl-tests: {path}\n", run.version);
        s += &format!("# Collective test starting: {}\n", self.style.program);
        s += &format!(
            "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: {} \
             validation: {} graph: 0 unalign: {}\n",
            or_unknown(&p.min_bytes),
            or_unknown(&p.max_bytes),
            or_unknown(&p.warmup),
            or_unknown(&p.iters),
            it.agg,
            or_unknown(&p.check_iters),
            it.unalign
        );
        match it.blocking {
            1 => s += "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n",
            2 => s += "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n",
            3 => s += "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n",
            _ => {}
        }
        if it.per_iter {
            s += "# Per-Iteration Report: CPU clock timing; i_* uses max over process rows";
            if it.skip > 0 {
                s += &format!("; summary skips first {} iterations", it.skip);
            }
            s += " \n";
        }
        s += "#\n# Using devices\n";
        for r in &run.ranks {
            s += &rank_line(r);
            s += "\n";
        }
        self.write(&s)
    }

    fn record(&mut self, rec: &Record) -> Result<()> {
        let mut s = String::new();
        if self.rows.is_empty() {
            if let Some(mode) = rec.timing {
                let it = &self.iteration;
                let line = mode.describe(rec.out_of_place.iters, it.agg, it.blocking, it.per_iter);
                s += &format!("# {line}\n");
            }
            s += &result_header(&self.iteration, self.style.timestamps);
        }
        s += &row(rec, self.iteration.per_iter);
        if self.style.timestamps {
            s += &format!("{:>21}", now_stamp());
        }
        s += "\n";
        if let Some(w) = &rec.first_wrong {
            stderr!(
                "collbench: wrong data at {} B: rank {} (host {}) {} element {}: expected {}, got {}",
                rec.size,
                w.rank,
                w.host,
                if w.in_place { "in place" } else { "out of place" },
                w.offset,
                w.expected,
                w.got
            );
        }
        self.rows.push(rec.clone());
        self.write(&s)
    }

    fn finish(&mut self, _summary: &Summary) -> Result<()> {
        let oob = out_of_bounds(&self.rows);
        let bw = nccl_avg_busbw(&self.rows);
        let verdict = match self.style.min_bw {
            None => "",
            Some(min) if bw < min * 0.9 => "FAILED",
            Some(_) => "OK",
        };
        let mut s = String::new();
        if self.rows.is_empty() {
            s += &result_header(&self.iteration, self.style.timestamps);
        }
        s += &format!(
            "# {:<20} : {oob} {}\n",
            "Out of bounds values",
            if oob == 0 { "OK" } else { "FAILED" }
        );
        s += &format!("# {:<20} : {} {verdict}\n", "Avg bus bandwidth", g(bw));
        s += &format!("#\n# Collective test concluded: {}\n#\n\n", self.style.program);
        self.write(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::results::per_iter::PerIter;
    use crate::results::testutil::{record, run_info};

    fn style() -> NcclTestsStyle {
        NcclTestsStyle {
            program: "all_reduce_perf".into(),
            min_bw: None,
            timestamps: false,
        }
    }

    #[test]
    fn the_header_is_nccl_tests_own_byte_for_byte() {
        // nccl-tests 2.19's writeResultHeader without -I, -C or -S: the lines end in the blank its `%*s`
        // leaves.
        let h = result_header(&IterParams::default(), false);
        let want = concat!(
            "#\n",
            "#                                                              out-of-place                       in-place          \n",
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n",
        );
        assert_eq!(h, want);
        let per_iter = result_header(
            &IterParams {
                per_iter: true,
                cputime: true,
                ..IterParams::default()
            },
            true,
        );
        let names = per_iter.lines().nth(2).unwrap();
        assert!(names.ends_with("i_p99    i_cv%           timestamp"), "{names}");
        assert_eq!(names.matches("cputime").count(), 2, "{names}");
        assert!(per_iter.lines().nth(3).unwrap().ends_with("(%)   %Y-%m-%d %H:%M:%S"));
    }

    #[test]
    fn rows_footer_and_exit_status_follow_nccl_tests() {
        let mut t = NcclTableReporter::new(Vec::new(), style());
        t.begin(&run_info(false)).unwrap();
        let mut a = record(Collective::AllReduce, 1 << 20, 100.0, 2.0, Some(0));
        a.in_place.wrong = None;
        a.out_of_place.per_iter = Some(PerIter::default());
        let b = record(Collective::AllReduce, 2 << 20, 150.0, 4.0, Some(0));
        t.record(&a).unwrap();
        t.record(&b).unwrap();
        t.finish(&crate::report::summarize(&[], String::new(), None, &[], Vec::new()))
            .unwrap();
        let out = String::from_utf8(t.into_inner()).unwrap();
        let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect();
        assert_eq!(
            rows[0],
            "     1048576        262144     float     sum      -1   100.00    1.00    2.00       0   100.00    1.50    3.00    N/A"
        );
        // The mean over every row and placement: (2 + 3 + 4 + 5) / 4.
        assert!(out.contains("\n# Avg bus bandwidth    : 3.5 \n#\n# Collective test concluded: all_reduce_perf\n#\n\n"));
        assert!(out.starts_with("# collbench version 0.1.0 as nccl-tests: collbench's"));
        assert!(out.contains("\n#  Rank  0 Group  0 Pid   1234 on      node1 device -1 [lo] tcp 127.0.0.1:40000"));
        let min = |bw: f64| NcclTestsStyle {
            min_bw: Some(bw),
            ..style()
        };
        let recs = [a, b];
        assert_eq!(min(3.8).exit_status(0, &recs), EXIT_OK, "3.5 is within 90% of 3.8");
        assert_eq!(min(4.0).exit_status(0, &recs), EXIT_NCCL_TESTS_FAILED);
        assert_eq!(style().exit_status(1, &recs), EXIT_NCCL_TESTS_FAILED);
        assert_eq!(
            style().exit_status(0, &[]),
            EXIT_OK,
            "ranks without rows judge by the data check"
        );
    }
}

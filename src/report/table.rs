//! The nccl-tests style text table: a `#` header with the run parameters and ranks, then one table per
//! (path, collective) whose first 13 columns are laid out exactly as nccl-tests lays them out (see
//! `writeResultHeader`, `writeBenchmarkLinePreamble` and `writeBenchmarkLineBody` in nccl-tests'
//! src/util.cu), so people and existing parsers read it. collbench's own columns (algorithm, then
//! p50/p99 with `--percentiles`) come after those 13.
//!
//! One concern, the text table's layout (byte-compatible with nccl-tests); its tests are a third of the file.

use std::io::Write;

use super::format::{bytes, float_col, g};
use super::summary::{avg_busbw, nccl_avg_busbw, out_of_bounds, AVG_FROM_BYTES};
use super::Reporter;
use crate::error::{Error, Result};
use crate::results::record::{Record, RunInfo, Summary, Timing};
use crate::results::run_params::{or_unknown, IterParams, StepView};
use crate::transport::path::Traits;
use crate::units::BwUnit;

/// Writes the table to `out` (stdout in production), flushing after every row so it streams.
pub struct TableReporter<W: Write> {
    out: W,
    percentiles: bool,
    /// Whole sweeps per path (`--repeat`), for the table titles.
    repeats: u64,
    /// Rows of the table being printed, for its footer.
    table: Vec<Record>,
    /// Rows printed in every table, for the closing total.
    points: u64,
    /// `--interleave point`: the paths take turns at every point, so a table holds every path's rows of one
    /// collective and sweep, each row naming its path in a last column.
    by_point: bool,
    /// `-C 1`: the time columns are called `cputime`, as nccl-tests calls them.
    cputime: bool,
    /// How each timed iteration ran (`-m -z -I`), for the `# timing:` line of paths that queue.
    iteration: IterParams,
    /// The unit of the bandwidth columns and averages (`--units`); GB/s keeps nccl-tests' table.
    units: BwUnit,
}

impl<W: Write> TableReporter<W> {
    /// A reporter writing to `out`.
    pub fn new(out: W) -> Self {
        TableReporter {
            out,
            percentiles: false,
            repeats: 1,
            table: Vec::new(),
            points: 0,
            by_point: false,
            cputime: false,
            iteration: IterParams::default(),
            units: BwUnit::Gbyte,
        }
    }

    /// The same reporter printing bandwidth in `units`.
    pub fn with_units(mut self, units: BwUnit) -> Self {
        self.units = units;
        self
    }

    /// The writer back, with everything written so far.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn lines<I: IntoIterator<Item = String>>(&mut self, lines: I) -> Result<()> {
        let io = |e| Error::io("writing the results table", e);
        for l in lines {
            // Trailing blanks carry nothing and would make `$NF` parsers see an empty column.
            writeln!(self.out, "{}", l.trim_end()).map_err(io)?;
        }
        self.out.flush().map_err(io)
    }

    fn close_table(&mut self) -> Result<()> {
        if self.table.is_empty() {
            return Ok(());
        }
        // Points far off their neighbours' curve, under the footer in `#` lines parsers pass over.
        let off: Vec<String> = self
            .table
            .iter()
            .zip(crate::results::off_curve::of_records(&self.table))
            .filter_map(|(r, f)| f.map(|f| format!("# {}", off_curve_line(r, f))))
            .collect();
        let mut lines = if self.by_point {
            // A footer per path: an average over two paths' rows would describe neither.
            let mut paths: Vec<&str> = Vec::new();
            for r in &self.table {
                if !paths.contains(&r.path.as_str()) {
                    paths.push(&r.path);
                }
            }
            let mut lines = Vec::new();
            for path in paths {
                let rows: Vec<Record> = self.table.iter().filter(|r| r.path == path).cloned().collect();
                lines.push(format!("# {path}:"));
                lines.extend(footer(&rows, self.units));
            }
            lines
        } else {
            footer(&self.table, self.units)
        };
        lines.extend(off);
        self.table.clear();
        self.lines(lines)
    }
}

impl<W: Write> Reporter for TableReporter<W> {
    fn begin(&mut self, run: &RunInfo) -> Result<()> {
        let p = &run.params;
        self.percentiles = p.percentiles;
        self.repeats = p.repeat.unwrap_or(1);
        self.by_point = p.interleave.as_deref() == Some("point");
        self.cputime = p.iteration.is_some_and(|i| i.cputime);
        self.iteration = p.iteration.unwrap_or_default();
        self.lines(run_header(run))
    }

    fn record(&mut self, rec: &Record) -> Result<()> {
        let new_table = self.table.last().map_or(true, |p| {
            (p.path != rec.path && !self.by_point) || p.collective != rec.collective || p.repeat != rec.repeat
        });
        let mut lines = Vec::new();
        if new_table {
            self.close_table()?;
            lines.push("#".to_string());
            let sweep = if self.repeats > 1 {
                format!(", sweep {} of {}", rec.repeat + 1, self.repeats)
            } else {
                String::new()
            };
            if self.by_point {
                lines.push(format!(
                    "# {}, {} ranks{sweep}, paths taking turns at every point (path in the last column)",
                    rec.collective.name(),
                    rec.nranks
                ));
                lines.extend(column_headers(self.percentiles, self.units).map(|mut l| {
                    // Headers name the path column; the units line only pads, and is trimmed anyway.
                    if l.contains("algo") {
                        l.push_str(&format!("  {:>12}", "path"));
                    }
                    l
                }));
            } else {
                lines.push(format!(
                    "# {} on {}, {} ranks{sweep}",
                    rec.collective.name(),
                    rec.path,
                    rec.nranks
                ));
                if let Some(mode) = rec.timing {
                    let it = &self.iteration;
                    let line = mode.describe(rec.out_of_place.iters, it.agg, it.blocking, it.per_iter);
                    lines.push(format!("# {line}"));
                }
                lines.extend(column_headers(self.percentiles, self.units));
            }
        }
        if self.cputime {
            for l in lines.iter_mut().filter(|l| l.contains("#wrong")) {
                *l = l.replace("   time", "cputime");
            }
        }
        let mut line = row(rec, self.percentiles, self.units);
        if self.by_point {
            line.push_str(&format!("  {:>12}", rec.path));
        }
        lines.push(line);
        if let Some(w) = &rec.first_wrong {
            // Say where the first wrong element is; a `#` line keeps column parsers undisturbed.
            lines.push(format!(
                "#   wrong data: rank {} (host {}) {} element {}: expected {}, got {}",
                w.rank,
                w.host,
                // Not nccl-tests' placement words: parsers take lines holding them for its table header.
                if w.in_place { "ip" } else { "oop" },
                w.offset,
                w.expected,
                w.got
            ));
        }
        self.table.push(rec.clone());
        self.points += 1;
        self.lines(lines)
    }

    fn finish(&mut self, summary: &Summary) -> Result<()> {
        self.close_table()?;
        self.lines(comparison_lines(summary, self.units))?;
        self.lines(cost_lines(summary))?;
        self.lines(memory_line(summary))?;
        let verdict = if summary.wrong == 0 { "OK" } else { "FAILED" };
        self.lines([
            "#".to_string(),
            // Says how many points were checked as well as how many had wrong elements: "0 in 0 point(s)"
            // read as if nothing had been measured.
            format!(
                "# {:<20} : {} in {} of {} point(s) {verdict}",
                "Total wrong elements", summary.wrong, summary.out_of_bounds, self.points
            ),
            format!("# {:<20} : {}", "End time", summary.end_time),
            "#".to_string(),
        ])
    }
}

/// The paths side by side, when the run had several: per point, each path's out-of-place time with its
/// 95% interval, busbw, share of the best path's (and of the reference's), and whether the gap is real.
fn comparison_lines(summary: &Summary, units: BwUnit) -> Vec<String> {
    if summary.comparison.is_empty() {
        return Vec::new();
    }
    let any =
        |f: &dyn Fn(&crate::results::PathFigure) -> bool| summary.comparison.iter().any(|c| c.paths.iter().any(f));
    let with_ref = any(&|p| p.vs_reference.is_some());
    let with_rate = any(&|p| p.line_rate_pct.is_some());
    // An optional column: blank when the run has none of it, `-` where one path lacks it.
    let opt = |on: bool, v: Option<f64>, prec: usize| match (on, v) {
        (false, _) => String::new(),
        (true, Some(v)) => format!(" {v:>7.prec$}"),
        (true, None) => format!(" {:>7}", "-"),
    };
    let mut out = vec![
        "#".to_string(),
        format!(
            "# Paths compared (oop = separate buffers; mean us +- 95% interval; vs best = bus {units} over the \
             best path's; * = the gap to the best is larger than both intervals)"
        ),
        format!(
            "# {:>14} {:>12} {:>8} {:>6}  {:<16} {:>10} {:>9} {:>7} {:>7}{}{}",
            "collective",
            "size(B)",
            "type",
            "redop",
            "path",
            "oop us",
            "+-us",
            format!("bus {units}"),
            "vs best",
            if with_ref { "  vs ref" } else { "" },
            if with_rate { "  % line" } else { "" }
        ),
    ];
    for c in &summary.comparison {
        for p in &c.paths {
            out.push(format!(
                "# {:>14} {:>12} {:>8} {:>6}  {:<16} {:>10} {:>9} {:>7} {:>7}{}{}{}",
                c.collective.name(),
                c.size,
                c.dtype.name(),
                c.op.map_or("none", |o| o.name()),
                p.path,
                float_col(p.time_us, 10).trim(),
                float_col(p.ci95_us, 9).trim(),
                float_col(units.of_gbs(p.busbw), 7).trim(),
                format!("{:.3}", p.vs_best),
                opt(with_ref, p.vs_reference, 3),
                opt(with_rate, p.line_rate_pct, 1),
                if p.significant { " *" } else { "" }
            ));
        }
    }
    out
}

/// What each path cost: start-up, CPU per GB, CPU saturation and throttling.
fn cost_lines(summary: &Summary) -> Vec<String> {
    if summary.paths.is_empty() {
        return Vec::new();
    }
    let widths = super::cost_table::WIDTHS;
    let row = |cells: Vec<String>| {
        let mut l = String::from("#");
        for (c, w) in cells.iter().zip(widths) {
            l.push_str(&format!(" {c:>w$}"));
        }
        l
    };
    let mut out = vec![
        "#".to_string(),
        format!("# Path costs ({})", super::cost_table::LEGEND),
        row(super::cost_table::HEADERS.iter().map(|h| h.to_string()).collect()),
    ];
    out.extend(summary.paths.iter().map(|c| row(super::cost_table::cells(c))));
    out
}

/// The footer's peak memory line: the largest rank's VmHWM against the bound for this sweep.
fn memory_line(summary: &Summary) -> Option<String> {
    let m = summary.peak_memory.as_ref()?;
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    // The device runtime's start-up memory is named only where there is some: host runs keep their line.
    let runtime = if m.runtime_bytes > 0 {
        format!(" + {:.1} MiB CUDA/NCCL at start-up", mib(m.runtime_bytes))
    } else {
        String::new()
    };
    Some(format!(
        "# {:<20} : {:.1} MiB (rank {} on {}), bound 3 x largest message + 64 MiB{runtime} = {:.1} MiB {}",
        "Peak memory per rank",
        mib(m.max_bytes),
        m.rank,
        m.host,
        mib(m.bound_bytes),
        if m.within_bound() { "OK" } else { "EXCEEDED" }
    ))
}

/// The `#` lines before the first table: version, command line, parameters, launcher, one line per rank.
fn run_header(run: &RunInfo) -> Vec<String> {
    let p = &run.params;
    let step = match p.step {
        Some(StepView::Factor(f)) => format!("{f}(factor)"),
        Some(StepView::Bytes(b)) => format!("{b}(bytes)"),
        None => "?".to_string(),
    };
    let timeout = p.timeout_s.map_or_else(|| "?".to_string(), g);
    let mut lines = vec![
        format!("# collbench version {}", run.version),
        format!("# Command line: {}", run.args.join(" ")),
        // The first line keeps nccl-tests' wording for the parameters both tools have.
        format!(
            "# nRanks {} minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} validation: {}",
            run.nranks,
            or_unknown(&p.min_bytes),
            or_unknown(&p.max_bytes),
            or_unknown(&p.warmup),
            or_unknown(&p.iters),
            or_unknown(&p.check_iters),
        ),
        format!(
            "# rank stat: {} algo: {} streams: {}{} chunk bytes: {} timeout: {timeout} s",
            or_unknown(&p.rank_stat),
            or_unknown(&p.algo),
            or_unknown(&p.streams),
            // Records from before --sndbuf existed show nothing rather than a guess.
            p.sndbuf.as_ref().map_or(String::new(), |b| format!(" sndbuf: {b}")),
            or_unknown(&p.chunk_bytes),
        ),
        format!(
            "# Timeouts: bootstrap {} s connect {} s collective wait {timeout} s",
            p.bootstrap_timeout_s.map_or_else(|| "?".to_string(), g),
            p.connect_timeout_s.map_or_else(|| "?".to_string(), g),
        ),
        format!(
            "# Launcher: {} bootstrap: {:.3} s connect: {:.3} s start: {}",
            run.launcher, run.bootstrap_s, run.connect_s, run.start_time
        ),
        format!("# Job token: {}", run.auth),
    ];
    if let Some(m) = &p.algo_model {
        let fitted: Vec<&str> = m.paths.iter().map(|t| t.fitted_on.as_str()).collect();
        // A forced --algo keeps its algorithm; the model then only sizes ring_pipelined's chunk.
        let role = match p.algo.as_deref() {
            None | Some("auto") => "--algo auto picked by its predicted times".to_string(),
            Some(a) => format!("--algo {a} forced the algorithm; the model sizes ring_pipelined's chunks"),
        };
        lines.push(format!(
            "# Algorithm model: {} {} (fitted on {}): {role}",
            m.file,
            m.digest,
            fitted.join(", ")
        ));
    }
    // Host memory says nothing, as before; device memory says what its times cover.
    if p.memory.as_deref() == Some("cuda") {
        // The staging lines describe the tcp and rdma paths; a run of nccl alone has none of them.
        let staged = p.transports.is_empty()
            || p.transports
                .iter()
                .any(|t| !Traits::named(t).is_some_and(|k| k.on_device_stream));
        let pieces = p.staging_pieces.unwrap_or(1);
        if staged {
            lines.push(format!(
                "# Memory: cuda (device buffers, one GPU per rank): each call copies its input to pinned host memory, \
                 runs collbench's algorithm (tcp or rdma path) and reductions on the host, and copies the output \
                 back, in up to {pieces} pieces (--staging-pieces) whose copies overlap the network; times include \
                 the copies the network did not hide (staging_wait_us in the JSON; staging_us the copies' device time)"
            ));
        } else {
            lines.push("# Memory: cuda (device buffers, one GPU per rank)".to_string());
        }
        if staged && p.reduce_on_device {
            lines.push(
                "# Memory: --reduce-on device: all_reduce and reduce_scatter are reduced by the GPU kernels after an \
                 alltoall on the host (all_reduce then all-gathers on the host); algo device_reduce"
                    .to_string(),
            );
        }
        if p.emulate_device {
            lines.push(
                "# Memory: EMULATED device (host memory posing as one, --emulate-device): a test of the staged \
                 path, not a measurement of any GPU"
                    .to_string(),
            );
        }
        let direct = p
            .transports
            .iter()
            .filter_map(|t| Some((t, Traits::named(t).filter(|k| k.on_device_stream)?)));
        for (t, k) in direct {
            let library = k.library.unwrap_or("the library");
            lines.push(format!(
                "# Memory: the {t} path runs {library}'s collectives on the device buffers directly (no staging, \
                 reductions on the GPU); its calls are timed to the end of its stream, as each table's `# timing:` \
                 line says"
            ));
        }
    }
    // Said once per run, for rank 0's host (where the run reads sysfs).
    if let Some(route) = &run.rdma_route {
        let host = run.ranks.first().map_or("?", |r| r.host.as_str());
        lines.push(format!(
            "# Memory: rdma paths: {route}; checked on rank 0's host {host}"
        ));
    }
    if let Some(c) = &run.connections {
        lines.push(format!(
            "# Connections: {} of {} rank pairs ({}), at most {} peers per rank, x {} stream(s) x {} path(s) = {} \
             TCP connections{}",
            c.pairs,
            c.all_pairs,
            c.why,
            c.max_peers,
            c.streams,
            c.paths,
            c.sockets,
            // Shaped and lossy links reach different shares of their rate under different algorithms.
            c.congestion
                .as_ref()
                .map_or(String::new(), |cc| format!(", congestion control {cc}"))
        ));
    }
    lines.extend(["#".to_string(), "# Using ranks".to_string()]);
    // nccl-tests' "#  Rank %2d Group %2d Pid %6d on %10s device ..." with the network end in place of a GPU.
    lines.extend(run.ranks.iter().map(|r| {
        let mut line = format!(
            "#  Rank {:2} Pid {:6} on {:>10} iface {} addr {}",
            r.rank, r.pid, r.host, r.iface, r.addr
        );
        // Further TCP paths, one `iface addr` pair each.
        for e in r.endpoints.iter().skip(1) {
            line.push_str(&format!(" + iface {} addr {}", e.iface, e.addr));
        }
        // nccl-tests names each rank's GPU here; so does collbench where the buffers live on one.
        if let Some(d) = &r.device {
            line.push_str(&format!(" device {d}"));
        }
        line
    }));
    lines
}

/// A point `factor` times slower than its neighbours' curve, in words (the table's `#` line, the warning).
pub fn off_curve_line(r: &Record, factor: f64) -> String {
    format!(
        "OFF CURVE: {} {} {} B: {factor:.1}x slower than its neighbours' sizes suggest (a spell of loss or \
         contention during this point?); measure it again",
        r.path,
        r.collective.name(),
        r.size
    )
}

/// The algorithm column's width: every name fits, so the columns after it (p50, p99, path) stay under
/// their headers for parsers that slice by position.
const ALGO: usize = crate::algorithm::Algo::LONGEST_NAME;

/// nccl-tests' three column-header lines (group, names, units), plus collbench's extra columns.
fn column_headers(percentiles: bool, units: BwUnit) -> [String; 3] {
    let bw = format!("({units})");
    let group = format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place",
        "", "", "", "", ""
    );
    let mut names = format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{}{}  {:>ALGO$}",
        "size",
        "count",
        "type",
        "redop",
        "root",
        placement_header("time", "algbw", "busbw", "#wrong"),
        placement_header("time", "algbw", "busbw", "#wrong"),
        "algo"
    );
    let mut units = format!(
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{}{}  {:>ALGO$}",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        placement_header("(us)", &bw, &bw, ""),
        placement_header("(us)", &bw, &bw, ""),
        ""
    );
    if percentiles {
        for name in ["oop_p50", "oop_p99", "ip_p50", "ip_p99"] {
            names.push_str(&format!("  {name:>7}"));
            units.push_str(&format!("  {:>7}", "(us)"));
        }
    }
    [group, names, units]
}

fn placement_header(time: &str, algbw: &str, busbw: &str, wrong: &str) -> String {
    format!("  {time:>7}  {algbw:>6}  {busbw:>6}  {wrong:>6}")
}

/// One table row: nccl-tests' 13 columns, then the algorithm, then p50/p99 when asked for.
fn row(rec: &Record, percentiles: bool, units: BwUnit) -> String {
    let op = rec.op.map_or("none", |o| o.name());
    let root = rec.root.map_or(-1, |r| r as i64);
    let mut s = format!(
        "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}  {:>ALGO$}",
        rec.size,
        rec.count,
        rec.dtype.name(),
        op,
        root,
        placement(&rec.out_of_place, units),
        placement(&rec.in_place, units),
        rec.algo
    );
    if percentiles {
        for t in [&rec.out_of_place, &rec.in_place] {
            s.push_str(&format!("  {}  {}", float_col(t.p50_us, 7), float_col(t.p99_us, 7)));
        }
    }
    s
}

fn placement(t: &Timing, units: BwUnit) -> String {
    // nccl-tests prints #wrong with %6g; N/A is kept 6 wide too (nccl-tests pads it to 5, which shifts
    // the in-place columns by one).
    let wrong = t.wrong.map_or_else(|| "N/A".to_string(), |w| g(w as f64));
    format!(
        "  {}  {}  {}  {wrong:>6}",
        float_col(t.time_us, 7),
        float_col(units.of_gbs(t.algbw), 6),
        float_col(units.of_gbs(t.busbw), 6)
    )
}

/// nccl-tests' two footer lines for one table (its average: every row, both placements), then collbench's
/// average over the sizes that matter, in words nccl-tests' parsers do not look for.
fn footer(table: &[Record], units: BwUnit) -> Vec<String> {
    let oob = out_of_bounds(table);
    let mut lines = vec![
        format!(
            "# {:<20} : {oob} {}",
            "Out of bounds values",
            if oob == 0 { "OK" } else { "FAILED" }
        ),
        format!(
            "# {:<20} : {}",
            "Avg bus bandwidth",
            g(units.of_gbs(nccl_avg_busbw(table)))
        ),
    ];
    let avgs = avg_busbw(table);
    let several = avgs.len() > 1;
    for a in avgs {
        let label = if several {
            format!("{} {}, ", a.dtype.name(), a.op.map_or("none", |o| o.name()))
        } else {
            String::new()
        };
        let over = if a.from_size >= AVG_FROM_BYTES {
            format!("{} >= {}", sizes(a.points), bytes(a.from_size))
        } else {
            format!("all {}, none >= {}", sizes(a.points), bytes(AVG_FROM_BYTES))
        };
        lines.push(format!(
            "#   (collbench: {label}bus {units} averaged over {over}: {})",
            g(units.of_gbs(a.busbw))
        ));
    }
    lines
}

fn sizes(n: usize) -> String {
    if n == 1 {
        "1 size".to_string()
    } else {
        format!("{n} sizes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::reduce::Dtype;
    use crate::report::summarize;
    use crate::results::testutil::{record, run_info};
    use crate::results::RankInfo;

    fn render(percentiles: bool, recs: &[Record]) -> String {
        let mut t = TableReporter::new(Vec::new());
        t.begin(&run_info(percentiles)).unwrap();
        for r in recs {
            t.record(r).unwrap();
        }
        t.finish(&summarize(recs, "2025-03-04T05:07:00Z".into(), None, &[], Vec::new()))
            .unwrap();
        String::from_utf8(t.into_inner()).unwrap()
    }

    #[test]
    fn golden_run_header() {
        let mut t = TableReporter::new(Vec::new());
        t.begin(&run_info(false)).unwrap();
        let out = String::from_utf8(t.into_inner()).unwrap();
        let want = "\
# collbench version 0.1.0
# Command line: collbench run --np 2
# nRanks 2 minBytes 8 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
# rank stat: max algo: auto streams: 1 sndbuf: 524288 chunk bytes: 524288 timeout: 60 s
# Timeouts: bootstrap 120 s connect 60 s collective wait 60 s
# Launcher: local bootstrap: 0.012 s connect: 0.046 s start: 2025-03-04T05:06:07Z
# Job token: COLLBENCH_JOB_TOKEN
# Connections: 1 of 1 rank pairs (control tree, rec_doubling, bruck), at most 1 peers per rank, x 1 stream(s) x 1 path(s) = 1 TCP connections, congestion control cubic
#
# Using ranks
#  Rank  0 Pid   1234 on      node1 iface lo addr 127.0.0.1:40000
#  Rank  1 Pid   1235 on      node1 iface lo addr 127.0.0.1:40001 + iface eth1 addr 10.0.0.2:40002 device cuda:1 [0000:1a:00.0] NVIDIA H200
";
        assert_eq!(out, want);
    }

    #[test]
    fn device_memory_on_an_rdma_path_says_its_route_once() {
        let mut run = run_info(false);
        run.params.memory = Some("cuda".into());
        let header = |run: &RunInfo| run_header(run).join("\n");
        assert!(!header(&run).contains("rdma paths"), "tcp only: nothing about rdma");
        run.rdma_route = Some(
            "staging through host memory (GPUDirect RDMA route: nvidia_peermem loaded; not used by this version)"
                .into(),
        );
        let h = header(&run);
        let lines: Vec<&str> = h.lines().filter(|l| l.contains("GPUDirect")).collect();
        assert_eq!(
            lines,
            [
                "# Memory: rdma paths: staging through host memory (GPUDirect RDMA route: nvidia_peermem loaded; not \
              used by this version); checked on rank 0's host node1"
            ]
        );
    }

    #[test]
    fn golden_table_with_none_root_and_na() {
        let mut ag = record(Collective::AllGather, 1024, 12.345, 1.5, None);
        ag.count = 64;
        ag.algo = "bruck".into();
        let mut bc = record(Collective::Broadcast, 2 << 20, 12345.67, 123.456, Some(0));
        bc.in_place.wrong = Some(1234567);
        bc.path = "tcp@eth0".into();
        let out = render(false, &[ag, bc]);
        let body: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("# all_gather")).collect();
        let want = [
            "# all_gather on tcp@lo, 4 ranks",
            "#                                                              out-of-place                       in-place",
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong              algo",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)",
            "        1024            64     float    none      -1    12.35    0.75    1.50     N/A    12.35    1.25    2.50     N/A             bruck",
            "# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : 2",
            "#   (collbench: bus GB/s averaged over all 1 size, none >= 1 MiB: 2)",
            "#",
            "# broadcast on tcp@eth0, 4 ranks",
            "#                                                              out-of-place                       in-place",
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong              algo",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)",
            "     2097152        524288     float    none       0  12345.7   61.73  123.46       0  12345.7   62.23  124.46  1.23457e+06              ring",
            "# Out of bounds values : 1 FAILED",
            "# Avg bus bandwidth    : 123.956",
            "#   (collbench: bus GB/s averaged over 1 size >= 2 MiB: 123.956)",
            "#",
            "# Total wrong elements : 1234567 in 1 of 2 point(s) FAILED",
            "# End time             : 2025-03-04T05:07:00Z",
            "#",
        ];
        assert_eq!(body, want);
    }

    #[test]
    fn columns_line_up_with_their_headers() {
        // Every algorithm's name, the longest (halving_doubling) included, leaves p50/p99 under their headers.
        for algo in crate::algorithm::Algo::NATIVE
            .iter()
            .chain([&crate::algorithm::Algo::Library])
        {
            columns_line_up_with(algo.name());
        }
    }

    fn columns_line_up_with(algo: &str) {
        let mut rec = record(Collective::AllReduce, 8, 5.0, 0.01, Some(0));
        rec.in_place.wrong = None;
        rec.algo = algo.into();
        let out = render(true, &[rec]);
        let names = out.lines().find(|l| l.contains("#wrong")).unwrap();
        let row = out.lines().find(|l| l.trim_start().starts_with("8 ")).unwrap();
        // Every column is right-aligned: each header name ends where its value ends.
        let ends = |s: &str| -> Vec<usize> {
            let b = s.as_bytes();
            (0..b.len())
                .filter(|&i| b[i] != b' ' && (i + 1 == b.len() || b[i + 1] == b' '))
                .collect()
        };
        // Index 0 is the header's leading '#'.
        assert_eq!(ends(names)[1..], ends(row), "{algo}:\n{names}\n{row}");
        assert_eq!(ends(row).len(), 18);
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&fields[..5], &["8", "2", "float", "sum", "-1"]);
        assert_eq!(fields[8], "0");
        assert_eq!(fields[12], "N/A");
        assert_eq!(&fields[13..], &[algo, "4.75", "8.00", "4.75", "8.00"]);
    }

    #[test]
    fn footer_averages_sizes_from_one_mib_and_counts_out_of_bounds() {
        let mut recs = vec![
            record(Collective::AllReduce, 8, 5.0, 0.5, Some(0)),
            record(Collective::AllReduce, 1 << 20, 50.0, 10.0, Some(2)),
            record(Collective::AllReduce, 2 << 20, 90.0, 20.0, Some(0)),
        ];
        recs[1].in_place.wrong = Some(0);
        recs[2].in_place.wrong = Some(5);
        let out = render(false, &recs);
        let footer: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("# Out of") || l.starts_with("# Avg"))
            .collect();
        // nccl-tests' average: every size, both placements: (0.5 + 1.5 + 10 + 11 + 20 + 21) / 6.
        assert_eq!(
            footer,
            ["# Out of bounds values : 2 FAILED", "# Avg bus bandwidth    : 10.6667"]
        );
        // collbench's: sizes from 1 MiB, in words nccl-tests' parsers do not look for.
        assert!(out.contains("#   (collbench: bus GB/s averaged over 2 sizes >= 1 MiB: 15.5)\n"));
        assert!(out.contains("# Total wrong elements : 7 in 2 of 3 point(s) FAILED\n"));
        // The sixth whitespace field is the value, as parsers of nccl-tests output expect.
        let avg_line = footer[1].split_whitespace().collect::<Vec<_>>();
        assert_eq!(avg_line[5], "10.6667");
    }

    #[test]
    fn one_table_per_path_and_collective_with_an_average_per_dtype() {
        let a = record(Collective::AllReduce, 8, 5.0, 1.0, Some(0));
        let mut b = a.clone();
        b.dtype = Dtype::Double;
        let c = record(Collective::AllGather, 8, 5.0, 1.0, Some(0));
        let out = render(false, &[a.clone(), b, c, a]);
        let titles: Vec<&str> = out.lines().filter(|l| l.contains(" on tcp@")).collect();
        assert_eq!(
            titles,
            [
                "# all_reduce on tcp@lo, 4 ranks",
                "# all_gather on tcp@lo, 4 ranks",
                "# all_reduce on tcp@lo, 4 ranks"
            ]
        );
        assert_eq!(out.matches("# Out of bounds values").count(), 3);
        assert!(out.contains("#   (collbench: float sum, bus GB/s averaged"));
        assert!(out.contains("#   (collbench: double sum, bus GB/s averaged"));
        assert!(out.lines().all(|l| l == l.trim_end()));
    }

    #[test]
    fn paths_taking_turns_share_a_table_with_the_path_last_and_a_footer_each() {
        let mut t = TableReporter::new(Vec::new());
        let mut run = run_info(false);
        run.params.interleave = Some("point".into());
        t.begin(&run).unwrap();
        let mut recs = Vec::new();
        for coll in [Collective::AllReduce, Collective::AllGather] {
            for size in [1u64 << 20, 2 << 20] {
                let a = record(coll, size, 100.0, 2.0, Some(0));
                let mut b = record(coll, size, 150.0, 1.0, Some(0));
                b.path = "mpi".into();
                b.algo = "library".into();
                recs.extend([a, b]);
            }
        }
        for r in &recs {
            t.record(r).unwrap();
        }
        t.finish(&summarize(&recs, "2025-03-04T05:07:00Z".into(), None, &[], Vec::new()))
            .unwrap();
        let out = String::from_utf8(t.into_inner()).unwrap();
        let titles: Vec<&str> = out.lines().filter(|l| l.contains("taking turns")).collect();
        assert_eq!(
            titles,
            [
                "# all_reduce, 4 ranks, paths taking turns at every point (path in the last column)",
                "# all_gather, 4 ranks, paths taking turns at every point (path in the last column)"
            ]
        );
        let rows: Vec<Vec<&str>> = out
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 8);
        for (r, want) in rows.iter().zip(["tcp@lo", "mpi"].iter().cycle()) {
            // nccl-tests' 13 columns, the algorithm, then the path.
            assert_eq!(r.len(), 15, "{r:?}");
            assert_eq!(r[14], *want, "{r:?}");
        }
        let header = out
            .lines()
            .find(|l| l.contains("#wrong") && l.contains("algo"))
            .unwrap();
        assert!(header.ends_with("algo          path"), "{header}");
        // Each path's average over its own rows: tcp@lo (2 + 3) / 2, mpi (1 + 2) / 2, per table.
        let avgs: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("# Avg bus bandwidth") || l == &"# tcp@lo:" || l == &"# mpi:")
            .collect();
        let one = [
            "# tcp@lo:",
            "# Avg bus bandwidth    : 2.5",
            "# mpi:",
            "# Avg bus bandwidth    : 1.5",
        ];
        assert_eq!(avgs, [one, one].concat());
    }

    #[test]
    fn rows_are_flushed_as_they_come() {
        struct Counting(Vec<u8>, usize);
        impl Write for Counting {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                self.1 += 1;
                Ok(())
            }
        }
        let mut t = TableReporter::new(Counting(Vec::new(), 0));
        let mut run = run_info(false);
        run.ranks.push(RankInfo {
            rank: 2,
            pid: 1,
            host: "h".into(),
            iface: "x".into(),
            addr: "a".into(),
            endpoints: Vec::new(),
            device: None,
        });
        t.begin(&run).unwrap();
        t.record(&record(Collective::AllReduce, 8, 5.0, 1.0, Some(0))).unwrap();
        t.record(&record(Collective::AllReduce, 16, 5.0, 1.0, Some(0))).unwrap();
        assert_eq!(t.into_inner().1, 3);
    }
}

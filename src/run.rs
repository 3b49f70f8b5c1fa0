//! `collbench run` as the driver runs it: one rank of the job sweeps every path, rank 0 reports.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::time::SystemTime;

use indicatif::ProgressBar;

use crate::bench::tally::Tally;
use crate::bench::{self, Sweep};
use crate::driver::{Connected, Ending, Rank, RankCommand};
use crate::error::{stderr, Error, Result, EXIT_OK, EXIT_WRONG};
use crate::options::{Interleave, Options, Progress};
use crate::paths;
use crate::report::declared::Declared;
use crate::report::{self, Reporter};
use crate::results::{self, RankInfo, RunInfo};
use crate::session;
use crate::transport::Transport;
use crate::world::Identity;

/// With device memory, each rank's GPU as it names it ([`Gpu::label`]), gathered on rank 0 over the
/// control path before the first sweep, for the rank list; `None` on other ranks and for host memory (no
/// exchange then, so host runs are as before).
///
/// [`Gpu::label`]: crate::memory::cuda::Gpu::label
fn rank_devices(sess: &mut session::Session, opts: &Options) -> Result<Option<Vec<String>>> {
    if opts.buffers.memory != crate::memory::MemoryKind::Cuda {
        return Ok(None);
    }
    let me = if opts.buffers.emulate_device {
        "emulated (host memory posing as a device)".to_string()
    } else {
        device_label(opts)
    };
    let Some(t) = sess.transports.first_mut() else {
        return Ok(None);
    };
    let all = crate::algorithm::control::gather(t, me.as_bytes())?;
    Ok(all.map(|v| {
        v.into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }))
}

#[cfg(feature = "cuda")]
fn device_label(opts: &Options) -> String {
    crate::memory::cuda::Gpu::label(opts.buffers.device.as_deref())
}

/// Without the `cuda` feature `--memory cuda` never gets this far (refused before any rank starts).
#[cfg(not(feature = "cuda"))]
fn device_label(_opts: &Options) -> String {
    "cuda:? (built without the cuda feature)".to_string()
}

/// `ranks` with each one's device, where they were gathered.
fn with_devices(mut ranks: Vec<RankInfo>, devices: Option<Vec<String>>) -> Vec<RankInfo> {
    for (r, d) in ranks.iter_mut().zip(devices.into_iter().flatten()) {
        r.device = Some(d);
    }
    ranks
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// `collbench run` as the driver runs it: its options, and the command line the results file records.
pub struct RunCommand<'a> {
    pub opts: Options,
    pub argv: &'a [OsString],
    /// When the command started (RFC 3339), before the bootstrap.
    pub start_time: String,
}

impl<'a> RunCommand<'a> {
    /// `run` with `opts`, started now.
    pub fn new(opts: Options, argv: &'a [OsString]) -> Self {
        RunCommand {
            opts,
            argv,
            start_time: now_rfc3339(),
        }
    }
}

impl RankCommand for RunCommand<'_> {
    fn name(&self) -> &'static str {
        "run"
    }

    fn options(&self) -> &Options {
        &self.opts
    }

    fn outputs(&self) -> Declared<'_> {
        self.opts.outputs.declared()
    }

    fn check_size(&self, size: usize) -> Result<()> {
        check_root(&self.opts, size)
    }

    fn rank(&self, id: &Identity, conn: Connected<'_>) -> Result<Ending> {
        run_rank(self, id, conn).map(Ending::Own)
    }
}

/// One rank of a job, connected: open every path, sweep, report (rank 0), and return this rank's exit status.
fn run_rank(cmd: &RunCommand<'_>, id: &Identity, mut conn: Connected<'_>) -> Result<i32> {
    let (opts, argv) = (&cmd.opts, cmd.argv);
    if let Err(e) = distinct_paths(&conn.sess, opts) {
        // Ranks on one host resolve the same interfaces and would all print the same error: rank 0 says it.
        let one_host = conn.sess.world.ranks.iter().all(|r| r.host == conn.sess.world.host);
        return if one_host && id.rank != 0 {
            Ok(e.exit_code())
        } else {
            Err(e)
        };
    }
    let devices = rank_devices(&mut conn.sess, opts)?;
    let sess = &conn.sess;
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
    let mut files = Vec::new();
    let mut run_info = None;
    if id.rank == 0 {
        (reporters, files) = rank0_reporters(opts);
        let info = RunInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            args: argv.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            start_time: cmd.start_time.clone(),
            nranks: sess.world.size,
            launcher: sess.world.launcher.clone(),
            bootstrap_s: sess.world.bootstrap_s,
            connect_s: sess.connect_s,
            auth: sess.world.token_from.clone(),
            connections: Some(results::Connections {
                congestion: sess.transports.first().and_then(|t| t.congestion()),
                ..results::Connections::of(&sess.links, opts.tcp.streams, sess.transports.len())
            }),
            ranks: with_devices(sess.world.ranks.clone(), devices),
            params: results::RunParams::from_options(opts),
            legacy_options: None,
            // With device memory and an rdma path: how it moves device buffers and whether this host could
            // carry GPUDirect RDMA; nothing for host-memory and tcp-only runs.
            rdma_route: paths::device_route(opts),
            min_bw: opts.nccl_tests.as_ref().and_then(|s| s.min_bw),
        };
        let begun = reporters.iter_mut().try_for_each(|r| r.begin(&info));
        if let Err(e) = begun {
            // An output rank 0 cannot write (a full stdout, a file that appeared) ends the job: every peer hears
            // why from rank 0 rather than finding it gone and blaming the link to it.
            return Err(crate::paths::abort_on(&mut conn.sess, 0, e));
        }
        run_info = Some(info);
        if let Some(note) = crate::algorithm::Algo::unforced_note(opts.algorithm.algo, &opts.sweep.collectives) {
            stderr!("collbench: note: {note}");
        }
        if let Some(note) = bench::options::repeat_note(opts.sweep.repeat) {
            stderr!("collbench: note: {note}");
        }
        let notes = bench::plan::rounded(&bench::plan::points(&opts.sweep, sess.world.size), sess.world.size);
        if !notes.is_empty() {
            stderr!(
                "collbench: note: {} point(s) rounded like nccl-tests does, e.g. {}",
                notes.len(),
                notes[0]
            );
        }
    }
    // Every path is opened once, here, and borrowed by every sweep below.
    let given: Vec<String> = opts.paths.transports.iter().map(|p| p.to_string()).collect();
    let host = sess.world.host.clone();
    let size = sess.world.size;
    let on_signal = conn.on_signal.clone();
    let Rank { mut sess, mut paths } = match conn.open() {
        Ok(r) => r,
        Err(e) => {
            return Err(mark_incomplete(
                &mut reporters,
                e,
                id.rank,
                &host,
                &planned(opts, size, &given),
            ))
        }
    };
    if !files.is_empty() {
        let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
        on_signal.set(mark_on_signal(files, host.clone(), planned(opts, size, &names)));
    }
    let progress = (id.rank == 0 && opts.outputs.progress == Progress::Auto && std::io::stderr().is_terminal())
        .then(ProgressBar::new_spinner);
    let ranks = sess.world.ranks.clone();
    let line_rates = paths.line_rates(&sess, opts.paths.line_rate_gbit);
    let mut tally = Tally::default();
    // Repeats interleave the paths (A, B, A, B), so slow drift of the machine touches every path alike; with
    // --interleave point they take turns at every point, so a slow spell shorter than a sweep does too.
    let npoints = bench::plan::points(&opts.sweep, sess.world.size).len();
    let turns: Vec<Option<usize>> = match opts.sweep.interleave {
        Interleave::Sweep => vec![None],
        Interleave::Point => (0..npoints).map(Some).collect(),
    };
    if let (Some(pb), Interleave::Point) = (&progress, opts.sweep.interleave) {
        bench::show_progress(pb, npoints * paths.len() * opts.sweep.repeat as usize);
    }
    for repeat in 0..opts.sweep.repeat {
        for &only in &turns {
            for i in 0..paths.len() {
                let swept = paths.sweep(
                    i,
                    &mut sess,
                    Sweep {
                        opts: opts.settings(),
                        repeat,
                        ranks: &ranks,
                        reporters: &mut reporters,
                        progress: progress.as_ref(),
                        only,
                    },
                );
                match swept {
                    Ok(outcome) => {
                        let connect_s = paths.iter().nth(i).and_then(|p| p.connect_s(&sess));
                        tally.add(outcome, connect_s, &line_rates);
                    }
                    Err(e) => {
                        if let Some(pb) = &progress {
                            pb.finish_and_clear();
                        }
                        // The files are marked with this failure below: a signal from here on must not replace it.
                        on_signal.clear();
                        // Every peer learns that this rank gave up, and all name the same culprit.
                        let e = paths.abort(i, &mut sess, e);
                        let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
                        let planned = planned(opts, sess.world.size, &names);
                        return Err(mark_incomplete(&mut reporters, e, id.rank, &host, &planned));
                    }
                }
            }
        }
    }
    // The bar goes before anything else is written, so no line lands after it.
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    tally.warn_cpu_limited();
    let code = match &opts.nccl_tests {
        // Under an nccl-tests name, its exit status (NCCL_TESTS_MIN_BW judged on rank 0's rows).
        Some(style) => style.exit_status(tally.wrong, &tally.records),
        None if tally.wrong > 0 => EXIT_WRONG,
        None => EXIT_OK,
    };
    if let (0, Some(info)) = (id.rank, &run_info) {
        finish(opts, info, &ranks, &line_rates, tally, &mut reporters)?;
    }
    on_signal.clear();
    Ok(code)
}

/// Every point the run plans, in run order, on the paths named `paths`.
fn planned(opts: &Options, nranks: usize, paths: &[String]) -> Vec<results::PointKey> {
    let points = bench::plan::points(&opts.sweep, nranks);
    let key = |path: &String, repeat: u32, p: &bench::plan::Point| results::PointKey {
        path: path.clone(),
        collective: p.coll,
        size: p.layout.size_bytes as u64,
        dtype: p.dtype,
        redop: p.op,
        repeat,
    };
    let mut out = Vec::new();
    for repeat in 0..opts.sweep.repeat {
        match opts.sweep.interleave {
            Interleave::Sweep => {
                for path in paths {
                    out.extend(points.iter().map(|p| key(path, repeat, p)));
                }
            }
            Interleave::Point => {
                for p in &points {
                    out.extend(paths.iter().map(|path| key(path, repeat, p)));
                }
            }
        }
    }
    out
}

/// `e`, after rank 0 has marked its files incomplete with it (the error's facts and the points of `planned`
/// not measured). A file that cannot take the mark is said on stderr; the run's own error stays the one
/// returned.
fn mark_incomplete(
    reporters: &mut [Box<dyn Reporter>],
    e: Error,
    rank: usize,
    host: &str,
    planned: &[results::PointKey],
) -> Error {
    if reporters.is_empty() {
        return e;
    }
    let (rank, host, culprit) = match e.culprit() {
        Some(crate::error::Culprit::Rank(p)) => (p.rank, p.host.clone(), true),
        _ => (rank, host.to_string(), false),
    };
    let facts = results::RunError {
        message: e.to_string(),
        phase: e.phase().map(str::to_string),
        rank: Some(rank),
        host: Some(host),
        culprit,
        exit_code: e.exit_code(),
        missing: Vec::new(),
    };
    for r in reporters.iter_mut() {
        if let Err(w) = r.fail(&facts, planned) {
            stderr!("collbench: warning: could not mark an output incomplete: {w}");
        }
    }
    e
}

/// Rank 0's last step: the summary to every reporter, then the model at the target scale and the charts,
/// where asked for.
fn finish(
    opts: &Options,
    info: &RunInfo,
    ranks: &[RankInfo],
    line_rates: &[(String, f64)],
    tally: Tally,
    reporters: &mut [Box<dyn Reporter>],
) -> Result<()> {
    let runtime_bytes = tally.runtime_bytes();
    let Tally {
        records,
        costs,
        peak_rss,
        ..
    } = tally;
    let records = records.as_slice();
    for (r, f) in records.iter().zip(results::off_curve::of_records(records)) {
        if let Some(f) = f {
            stderr!("collbench: warning: {}", report::table::off_curve_line(r, f));
        }
    }
    let mut summary = report::summary::summarize(
        records,
        now_rfc3339(),
        opts.paths.reference.as_deref(),
        line_rates,
        costs,
    );
    let hosts: Vec<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    let largest = records.iter().map(|r| r.size).max().unwrap_or(0);
    summary.peak_memory = results::PeakMemory::of(peak_rss, &hosts, largest).map(|m| m.with_runtime(runtime_bytes));
    let distinct: std::collections::BTreeSet<&str> = hosts.iter().copied().collect();
    let model = opts
        .outputs
        .target_ranks
        .and_then(|n| crate::model::for_run(records, distinct.len(), n, opts.outputs.ranks_per_node));
    if let Some(m) = &model {
        crate::model::attach_to_summary(&mut summary, m);
    }
    for r in reporters.iter_mut() {
        r.finish(&summary)?;
    }
    if let Some(m) = &model {
        crate::report::stdout::print_beside(
            &format!("\n{}", crate::model::render::text_after_results(m, opts.outputs.units)),
            opts.outputs.stdout_taken(),
        )?;
    }
    if let Some(dir) = &opts.outputs.plot {
        let mut data = crate::plot::PlotData::from_records(records, line_rates, &crate::plot::run_note(info));
        if let Some(m) = &model {
            data.add_predictions(&crate::plot::data::predicted_samples(m));
        }
        for p in crate::plot::write_plots(&data, dir, &crate::plot::Format::ALL)? {
            stderr!("collbench: chart {}", p.display());
        }
    }
    Ok(())
}

/// `-r/--root` must be a rank of the job: checked before any rank connects (the trees are planned from it).
fn check_root(opts: &Options, size: usize) -> Result<()> {
    if opts.sweep.root >= size {
        return Err(Error::usage(
            "-r/--root",
            format!(
                "root rank {} does not exist in a job of {size} ranks; give 0 to {}",
                opts.sweep.root,
                size.saturating_sub(1)
            ),
        ));
    }
    Ok(())
}

/// Results are keyed by path name, so two `--transport` entries that land on one interface (`tcp` and
/// `tcp@lo` for local ranks) would mix their measurements: refused before anything is measured.
fn distinct_paths(sess: &session::Session, opts: &Options) -> Result<()> {
    let names: Vec<String> = sess.transports.iter().map(|t| t.path()).collect();
    for (i, a) in names.iter().enumerate() {
        if let Some(j) = names[..i].iter().position(|b| b == a) {
            let given: Vec<String> = opts
                .paths
                .transports
                .iter()
                .filter(|p| p.is_tcp())
                .map(|p| p.to_string())
                .collect();
            return Err(Error::usage(
                "--transport",
                format!(
                    "{} and {} both use {a} on rank {} (host {}): list each interface once",
                    given[j], given[i], sess.world.rank, sess.world.host
                ),
            ));
        }
    }
    Ok(())
}

/// Rank 0's reporters: the table on stdout and every file asked for; and the files again, shared with the
/// rank's signal watcher, which marks them incomplete on SIGINT or SIGTERM.
fn rank0_reporters(opts: &Options) -> (Vec<Box<dyn Reporter>>, Vec<SharedFile>) {
    // With an output file on stdout (`-J -`) the table goes to stderr, so the file stays whole for its reader.
    let out: Box<dyn std::io::Write> = if opts.outputs.stdout_taken() {
        Box::new(report::stdout::Stdout::over(std::io::stderr()))
    } else {
        Box::new(report::stdout::Stdout::new())
    };
    let table: Box<dyn Reporter> = match &opts.nccl_tests {
        Some(style) => Box::new(report::nccl_table::NcclTableReporter::new(out, style.clone())),
        None => Box::new(report::table::TableReporter::new(out).with_units(opts.outputs.units)),
    };
    let force = opts.outputs.force;
    let mut files: Vec<Box<dyn Reporter + Send>> = Vec::new();
    if let Some(p) = &opts.outputs.json {
        files.push(Box::new(report::json::JsonReporter::new(p.clone(), force)));
    }
    if let Some(p) = &opts.outputs.csv {
        files.push(Box::new(report::csv::CsvReporter::new(p.clone(), force)));
    }
    if let Some(p) = &opts.outputs.markdown {
        files.push(Box::new(report::markdown::MarkdownReporter::new(p.clone(), force)));
    }
    let shared: Vec<report::Shared> = files.into_iter().map(report::Shared::new).collect();
    let handles = shared.iter().map(|s| s.0.clone()).collect();
    let mut v: Vec<Box<dyn Reporter>> = vec![table];
    v.extend(shared.into_iter().map(|s| Box::new(s) as Box<dyn Reporter>));
    (v, handles)
}

/// A file reporter as the signal watcher reaches it.
type SharedFile = std::sync::Arc<std::sync::Mutex<Box<dyn Reporter + Send>>>;

/// Rank 0's hook for a stop signal: every file marked incomplete, the signal named and the points of
/// `planned` not measured listed, as a failed run marks them.
fn mark_on_signal(
    files: Vec<SharedFile>,
    host: String,
    planned: Vec<results::PointKey>,
) -> crate::driver::signals::Hook {
    Box::new(move |sig, code| {
        let facts = results::RunError {
            message: format!("interrupted by {sig} before the run's last point"),
            phase: None,
            rank: Some(0),
            host: Some(host),
            culprit: false,
            exit_code: code,
            missing: Vec::new(),
        };
        for f in &files {
            let mut r = f.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(w) = r.fail(&facts, &planned) {
                stderr!("collbench: warning: could not mark an output incomplete: {w}");
            }
        }
        stderr!(
            "collbench: rank 0: interrupted by {sig}; the output files keep the points measured, marked incomplete"
        );
    })
}

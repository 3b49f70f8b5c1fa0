//! The sweep runner: for every point, warm up, time, check, then combine all ranks' measurements on
//! rank 0 and hand the record to the reporters as soon as it exists.

pub mod cost;
pub mod memory;
pub mod options;
pub mod plan;
pub mod point;
pub mod stats;
pub mod tally;
pub mod usage;

use indicatif::{ProgressBar, ProgressStyle};

use crate::algorithm::options::AlgoOptions;
use crate::engine::call::{Alloc, Memory};
use crate::engine::options::BufferOptions;
use crate::engine::Engine;
use crate::error::{stderr, Error, Result};
use crate::fault::TestAids;
use crate::report::Reporter;
use crate::results::{PathCost, RankInfo, Record};
use crate::transport::path::PathOptions;
use options::SweepOptions;
use point::RankPoint;

/// What a finished sweep leaves behind.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Every record, on rank 0 only.
    pub records: Vec<Record>,
    /// Wrong elements over the whole sweep, known on every rank.
    pub wrong: u64,
    /// What the sweep cost, on rank 0 only.
    pub cost: Option<PathCost>,
    /// Every rank's peak resident memory (VmHWM) at the end of the sweep, in rank order, on rank 0 only.
    pub peak_rss: Vec<Option<u64>>,
    /// The most host memory any rank's device runtime took when its path opened (bytes), on rank 0 only.
    pub runtime_bytes: u64,
    /// Points the engine could not run, one line per reason (`skipping half points on mpi: ...`), on rank 0
    /// only: the caller says each once per run, however many sweeps meet it.
    pub skipped: Vec<String>,
}

/// The option parts a sweep reads: what to measure, which algorithm, the paths (for the links they need),
/// the testing aids and the device buffers' settings.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    pub sweep: &'a SweepOptions,
    pub algorithm: &'a AlgoOptions,
    pub paths: &'a PathOptions,
    pub aids: &'a TestAids,
    pub buffers: &'a BufferOptions,
}

/// One sweep's settings and outputs, besides its engine and memory.
pub struct Sweep<'a> {
    pub opts: Settings<'a>,
    /// Which whole sweep this is (`--repeat`).
    pub repeat: u32,
    /// Every rank's info, for naming hosts.
    pub ranks: &'a [RankInfo],
    /// Where records go: rank 0's reporters; none on the other ranks.
    pub reporters: &'a mut [Box<dyn Reporter>],
    pub progress: Option<&'a ProgressBar>,
    /// The one point to measure, by its index in [`plan::points`]' order (`--interleave point`); `None`:
    /// every point. The caller then owns the progress bar's length ([`show_progress`]).
    pub only: Option<usize>,
}

/// Prints each of a sweep's skip notes that `said` does not hold yet, and remembers it: once per run.
pub fn note_skipped(said: &mut Vec<String>, skipped: Vec<String>) {
    for s in skipped {
        if !said.contains(&s) {
            stderr!("collbench: note: {s}");
            said.push(s);
        }
    }
}

/// Sets the progress bar up for `len` steps.
pub fn show_progress(pb: &ProgressBar, len: usize) {
    pb.set_length(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
}

/// Runs every point of `s.opts.sweep` on engine `e`, on the memory `alloc` makes for the sweep's largest send
/// and receive buffers. Every rank returns the same `wrong` total.
pub fn sweep<E: Engine, A: Alloc>(e: &mut E, s: Sweep<'_>, alloc: A) -> Result<Outcome> {
    let Sweep {
        opts,
        repeat,
        ranks,
        reporters,
        progress,
        only,
    } = s;
    let n = e.size();
    if opts.sweep.root >= n {
        return Err(Error::usage(
            "-r/--root",
            format!("root rank {} does not exist in a job of {n} ranks", opts.sweep.root),
        ));
    }
    let mut points = plan::points(opts.sweep, n);
    if let Some(i) = only {
        // Every rank plans the same points (the options are agreed), so index i is the same point on all.
        points = points.get(i).copied().into_iter().collect();
    }
    let (send_bytes, recv_bytes) = plan::buffer_bytes(&points);
    let runtime_bytes = alloc.runtime_bytes();
    // -u: room for calls that start up to 8 B (the widest element) per unaligned element later.
    let mut bufs = alloc.alloc(send_bytes, recv_bytes, opts.sweep.iteration.shift_bytes(8))?;
    if let (Some(pb), None) = (progress, only) {
        show_progress(pb, points.len());
    }
    let path = e.path();
    let ctx = stats::Context {
        path: &path,
        root: opts.sweep.root,
        ranks,
        stat: opts.sweep.rank_stat,
        iters: opts.sweep.iters,
        repeat,
        per_iter_skip: opts.sweep.iteration.per_iter.then_some(opts.sweep.iteration.skip),
        timing: point::timing_mode(e, &bufs, &opts),
    };
    let mut out = Outcome::default();
    // Ranks arrive at a path at different times (start-up skew, the previous path's last point): line them
    // up, so the first call measures the path's own start-up, not how late the slowest rank came.
    e.barrier()?;
    let started = usage::Sample::now();
    // Bytes this rank moved, counted as busbw counts them; calls per placement include warm-up and check.
    let calls = f64::from(opts.sweep.warmup) + f64::from(opts.sweep.iters) + f64::from(opts.sweep.check_iters);
    let mut bytes = 0.0;
    let mut first_us = None;
    for p in &points {
        if let Some(why) = e.unsupported(p.dtype, p.op) {
            // Every rank skips the same points; rank 0 reports each reason once.
            let note = format!("skipping {} points on {path}: {why}", p.dtype);
            if e.rank() == 0 && !out.skipped.contains(&note) {
                out.skipped.push(note);
            }
            if let Some(pb) = progress {
                pb.inc(1);
            }
            continue;
        }
        let algo = e.algo(p.coll, p.layout.size_bytes as u64);
        if let Some(pb) = progress {
            pb.set_message(format!("{} {} {} B", p.coll, p.dtype, p.layout.size_bytes));
        }
        // Errors say where they happened: which collective, size and type.
        let phase = format!(
            "{} of {} ({}{})",
            p.coll,
            crate::sizes::format_size(p.layout.size_bytes as u64),
            p.dtype,
            p.op.map(|o| format!(" {o}")).unwrap_or_default()
        );
        let mine = point::measure(e, p, algo, &mut bufs, &opts).map_err(|err| err.during(&phase))?;
        bytes += 2.0 * calls * p.layout.size_bytes as f64 * p.coll.bus_factor(n);
        first_us.get_or_insert(mine.first_us);
        let gathered = gather_json::<_, RankPoint>(e, &mine, "measurement")
            .map_err(|err| err.during(&format!("the gathering of results of {phase}")))?;
        if let Some(per_rank) = gathered {
            let rec = stats::record(&ctx, bufs.algo_name(p.coll, algo), p, &per_rank);
            out.wrong += rec.out_of_place.wrong.unwrap_or(0) + rec.in_place.wrong.unwrap_or(0);
            // The table shares the terminal with the progress bar: the bar steps aside while a row is written.
            let mut write = || reporters.iter_mut().try_for_each(|r| r.record(&rec));
            match progress {
                Some(pb) => pb.suspend(write)?,
                None => write()?,
            }
            out.records.push(rec);
        }
        if let Some(pb) = progress {
            pb.inc(1);
        }
    }
    // The buffers go when this sweep ends; the next sweep's may land at the same addresses.
    e.forget_memory();
    let host = ranks.get(e.rank()).map_or("", |r| r.host.as_str());
    let mine = usage::Usage {
        runtime_bytes,
        ..started.usage_since(host, bytes, first_us.unwrap_or(0.0))
    };
    if let Some(usages) = gather_json::<_, usage::Usage>(e, &mine, "usage report")? {
        out.cost = Some(cost::of_sweep(&path, &usages));
        out.peak_rss = usages.iter().map(|u| u.peak_rss).collect();
        out.runtime_bytes = usages.iter().map(|u| u.runtime_bytes).max().unwrap_or(0);
    }
    // Every rank learns the verdict, so all exit with the same status.
    let total = e.broadcast(&out.wrong.to_le_bytes())?;
    out.wrong = u64::from_le_bytes(total.as_slice().try_into().map_err(|_| {
        Error::peer(format!(
            "rank {}: rank 0 sent a malformed verdict; mixed collbench versions?",
            e.rank()
        ))
    })?);
    Ok(out)
}

/// Every rank's `mine` on rank 0 (in rank order), `None` on the others; `what` names it in errors.
fn gather_json<E: Engine, T: serde::Serialize + serde::de::DeserializeOwned>(
    e: &mut E,
    mine: &T,
    what: &str,
) -> Result<Option<Vec<T>>> {
    let encoded = serde_json::to_vec(mine).expect("a rank's report serialises");
    let Some(all) = e.gather(&encoded)? else {
        return Ok(None);
    };
    all.iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b).map_err(|err| {
                Error::peer(format!(
                    "rank {r} sent an unreadable {what} ({err}); mixed collbench versions?"
                ))
            })
        })
        .collect::<Result<Vec<T>>>()
        .map(Some)
}

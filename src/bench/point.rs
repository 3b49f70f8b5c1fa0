//! One point on one rank: fill, warm up, time every iteration, then check the data.

use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::plan::Point;
use super::Settings;
use crate::algorithm::Algo;
use crate::engine::call::{Buffers, Memory};
use crate::engine::Engine;
use crate::error::Result;
use crate::reduce::pattern::{CheckOutcome, Pattern, Source};
use crate::reduce::Op;
use crate::results::timing::TimingMode;

/// What one rank measured for one placement.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RankTiming {
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Sample standard deviation of the iteration times (us), for confidence intervals.
    #[serde(default)]
    pub std_us: f64,
    /// Wrong elements on this rank; `None` when the check was off.
    pub wrong: Option<u64>,
    /// First wrong element: (offset, expected, got).
    pub first: Option<(u64, String, String)>,
    /// Device memory only: the mean time per timed call (us) of the copies between device and pinned host
    /// staging, from CUDA events; `avg_us` includes the part of it not overlapped with the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_us: Option<f64>,
    /// Device memory only: the mean time per timed call (us) the host waited for staging copies, the part of
    /// them not overlapped with the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging_wait_us: Option<f64>,
    /// With per-iteration timing (`-I 1`): every timed iteration's time (us), in order; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub times_us: Vec<f64>,
}

/// What one rank measured for one point.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RankPoint {
    pub out_of_place: RankTiming,
    pub in_place: RankTiming,
    /// The point's first call (out-of-place, warm-up or timed), us: on a path's first point, its start-up.
    #[serde(default)]
    pub first_us: f64,
}

/// Measures `p` out of place and in place with `algo`.
pub fn measure<E: Engine, M: Memory>(
    e: &mut E,
    p: &Point,
    algo: Algo,
    bufs: &mut M,
    opts: &Settings<'_>,
) -> Result<RankPoint> {
    let mut first_us = 0.0;
    Ok(RankPoint {
        out_of_place: measure_placement(e, p, algo, bufs, opts, false, Some(&mut first_us))?,
        in_place: measure_placement(e, p, algo, bufs, opts, true, None)?,
        first_us,
    })
}

fn measure_placement<E: Engine, M: Memory>(
    e: &mut E,
    p: &Point,
    algo: Algo,
    bufs: &mut M,
    opts: &Settings<'_>,
    in_place: bool,
    mut first_us: Option<&mut f64>,
) -> Result<RankTiming> {
    // Collectives that do not reduce use the max pattern: it gives every rank distinct values at any rank count.
    let pattern = Pattern::new(p.dtype, p.op.unwrap_or(Op::Max), e.size());
    let call = p.call(opts.sweep.root, e.rank(), in_place);
    // -u: this point's buffers start whole elements past their alignment (the sweep's padding allows 8 B each).
    bufs.host().shift = opts.sweep.iteration.shift_bytes(p.layout.elem_size);
    prepare(e.rank(), p, &pattern, bufs.host(), in_place);
    bufs.load(&call)?;
    for _ in 0..opts.sweep.warmup {
        let t0 = Instant::now();
        bufs.run(e, algo, &call)?;
        if let Some(f) = first_us.take() {
            *f = t0.elapsed().as_secs_f64() * 1e6;
        }
    }
    e.barrier()?;
    crate::fault::Fault::check_point(opts.aids.fault.as_ref(), e.rank(), p.coll, p.layout.size_bytes as u64);
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("static histogram bounds are valid");
    let mut total_ns: u128 = 0;
    let it = opts.sweep.iteration;
    let agg = it.agg.max(1);
    let mut times_us = Vec::with_capacity(if it.per_iter { opts.sweep.iters as usize } else { 0 });
    // Only the timed calls' staging is reported.
    bufs.take_staging();
    let slow = crate::fault::Fault::slow_at(opts.aids.fault.as_ref(), e.rank(), p.coll, p.layout.size_bytes as u64);
    let mode = timing_mode(e, bufs, opts);
    if mode == Some(TimingMode::Queued) {
        // nccl-tests' -z 0: every timed call queued back to back, one wait, the time divided by the calls.
        let t0 = Instant::now();
        for _ in 0..opts.sweep.iters {
            if let Some(d) = slow {
                std::thread::sleep(d);
            }
            bufs.queue(e, algo, &call, agg)?;
        }
        bufs.wait(e)?;
        let calls = u128::from(opts.sweep.iters.max(1)) * u128::from(agg);
        let ns = t0.elapsed().as_nanos() / calls;
        if let Some(f) = first_us.take() {
            *f = ns as f64 / 1e3;
        }
        total_ns = ns * u128::from(opts.sweep.iters);
        hist.saturating_record((ns as u64).max(1));
    }
    // -z 1 and -z 2: a wait after each call (-z 1: and a barrier, timed); calls that return complete need none.
    let per_call = matches!(it.blocking, 1 | 2);
    for _ in 0..opts.sweep.iters {
        if mode == Some(TimingMode::Queued) {
            break;
        }
        let t0 = Instant::now();
        if let Some(d) = slow {
            // The `slow` testing aid: this point alone, every iteration, as a loss spell would.
            std::thread::sleep(d);
        }
        if per_call {
            for _ in 0..agg {
                bufs.queue(e, algo, &call, 1)?;
                bufs.wait(e)?;
                if it.blocking == 1 {
                    e.barrier()?;
                }
            }
        } else {
            // -m: the iteration's collectives queued back to back (one group where the engine has them).
            bufs.queue(e, algo, &call, agg)?;
            bufs.wait(e)?;
        }
        let ns = t0.elapsed().as_nanos() / u128::from(agg);
        // -z 3: the ranks line up after each iteration, outside its time.
        if it.blocking == 3 {
            e.barrier()?;
        }
        if let Some(f) = first_us.take() {
            *f = ns as f64 / 1e3;
        }
        total_ns += ns;
        hist.saturating_record((ns as u64).max(1));
        if it.per_iter {
            times_us.push(ns as f64 / 1e3);
        }
    }
    let mut timing = RankTiming {
        times_us,
        avg_us: total_ns as f64 / 1e3 / opts.sweep.iters.max(1) as f64,
        p50_us: hist.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: hist.value_at_quantile(0.99) as f64 / 1e3,
        std_us: hist.stdev() / 1e3,
        wrong: None,
        first: None,
        staging_us: None,
        staging_wait_us: None,
    };
    if let Some(s) = bufs.take_staging() {
        let per_call_us = |secs: f64| secs * 1e6 / f64::from(opts.sweep.iters.max(1));
        timing.staging_us = Some(per_call_us(s.copy_s));
        timing.staging_wait_us = Some(per_call_us(s.wait_s));
    }
    if opts.sweep.check_iters > 0 {
        let mut outcome = CheckOutcome::default();
        for _ in 0..opts.sweep.check_iters {
            prepare(e.rank(), p, &pattern, bufs.host(), in_place);
            bufs.load(&call)?;
            bufs.run(e, algo, &call)?;
            bufs.unload(&call)?;
            if opts.aids.corrupt_rank == Some(e.rank()) {
                corrupt(e.rank(), e.size(), p, bufs.host(), opts.sweep.root, in_place);
            }
            outcome.merge(verify(
                e.rank(),
                e.size(),
                p,
                &pattern,
                bufs.host(),
                opts.sweep.root,
                in_place,
            ));
        }
        timing.wrong = Some(outcome.wrong);
        timing.first = outcome.first.map(|m| (m.index as u64, m.expected, m.got));
    }
    Ok(timing)
}

/// How `e` on `bufs` times a point's calls under the sweep's options ([`TimingMode::of`]); `None` where its
/// calls return complete.
pub fn timing_mode<E: Engine, M: Memory>(e: &E, bufs: &M, opts: &Settings<'_>) -> Option<TimingMode> {
    let it = opts.sweep.iteration;
    TimingMode::of(it.blocking, it.per_iter, opts.sweep.percentiles, bufs.queues(e))
}

/// Fills this rank's input with its pattern and poisons the rest of the output, so stale data is caught.
fn prepare(rank: usize, p: &Point, pattern: &Pattern, bufs: &mut Buffers, in_place: bool) {
    let es = p.layout.elem_size;
    let input_len = p.layout.send_count * es;
    if in_place {
        let view = &mut bufs.recv_mut()[..p.coll.recv_elems(&p.layout, true) * es];
        let at = p.coll.in_place_input_at(&p.layout, rank) * es;
        let (before, rest) = view.split_at_mut(at);
        let (input, after) = rest.split_at_mut(input_len);
        pattern.fill(Source::Rank(rank), 0, input);
        pattern.poison(before);
        pattern.poison(after);
    } else {
        pattern.fill(Source::Rank(rank), 0, &mut bufs.send_mut()[..input_len]);
        pattern.poison(&mut bufs.recv_mut()[..p.layout.recv_count * es]);
    }
}

/// Checks every output element this rank must hold; offsets in the result are receive-buffer elements.
fn verify(
    rank: usize,
    n: usize,
    p: &Point,
    pattern: &Pattern,
    bufs: &Buffers,
    root: usize,
    in_place: bool,
) -> CheckOutcome {
    let es = p.layout.elem_size;
    let mut total = CheckOutcome::default();
    for ex in p.coll.expected(&p.layout, rank, n, root, in_place) {
        let mut o = pattern.check(ex.source, ex.first, &bufs.recv()[ex.at * es..(ex.at + ex.len) * es]);
        if let Some(m) = &mut o.first {
            m.index += ex.at;
        }
        total.merge(o);
    }
    total
}

/// Flips every bit of the first byte of the last element this rank must hold (testing aid).
fn corrupt(rank: usize, n: usize, p: &Point, bufs: &mut Buffers, root: usize, in_place: bool) {
    let es = p.layout.elem_size;
    if let Some(ex) = p
        .coll
        .expected(&p.layout, rank, n, root, in_place)
        .iter()
        .rev()
        .find(|ex| ex.len > 0)
    {
        bufs.recv_mut()[(ex.at + ex.len - 1) * es] ^= 0xff;
    }
}

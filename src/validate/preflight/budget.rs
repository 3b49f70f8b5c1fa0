//! The time budget (`--budget`): how a preflight's seconds are shared among its parts, how large the plan and
//! the pairwise test can be at the speed the first measurements show, and when the collectives must stop.
//!
//! Start-up (connecting, the connectivity check and the probe) comes first; of what is left, a margin is kept
//! for judging and writing the files, the collectives get [`COLLECTIVES_SHARE`] and the pairwise test the rest.
//! Sizing is from measured speed, so a cluster whose links are slow gets a smaller plan rather than a longer
//! one; the collectives also stop between points once their share is spent, whatever the links did since.

use std::time::Instant;

use super::plan::{Plan, MIN_BANDWIDTH_BYTES};
use crate::validate::pairwise::PairwiseConfig;

/// Of the time left after start-up (less the margin), what the collectives' phases may use; the pairwise
/// test gets the rest.
pub const COLLECTIVES_SHARE: f64 = 0.6;
/// Kept back at the end for judging and writing: this share of the budget, at least [`MIN_MARGIN_S`].
const MARGIN_SHARE: f64 = 0.1;
const MIN_MARGIN_S: f64 = 3.0;
/// A sized plan's expected time must fit its share this many times over: the probe's estimate is rough.
const SAFETY: f64 = 1.5;
/// The smallest pairwise message: below it a round trip's latency, not the link, is measured.
const MIN_PAIRWISE_BYTES: usize = 64 << 10;
/// What a round trip of the pairwise ping-pong is budgeted beyond its measured time, microseconds: one in
/// twenty waiting out a 300 ms retransmission timeout, as on a lossy link.
pub const STALL_ALLOWANCE_US: f64 = 15_000.0;
/// The fewest timed round trips of the pairwise ping-pong.
const MIN_LAT_ITERS: usize = 20;

/// The clock of one preflight and its budget.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    start: Instant,
    total_s: f64,
}

impl Budget {
    /// A budget of `total_s` seconds from now.
    pub fn new(total_s: u64) -> Budget {
        Budget {
            start: Instant::now(),
            total_s: total_s as f64,
        }
    }

    /// The whole budget, seconds.
    pub fn total_s(&self) -> f64 {
        self.total_s
    }

    /// Seconds since the preflight started.
    pub fn elapsed_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Seconds kept for judging and writing at the end.
    pub fn margin_s(&self) -> f64 {
        (self.total_s * MARGIN_SHARE).max(MIN_MARGIN_S)
    }

    /// The collectives' share, as (seconds they may use, the moment from the start they must end), when they
    /// start at `now_s`.
    pub fn collectives_window(&self, now_s: f64) -> (f64, f64) {
        let left = (self.total_s - self.margin_s() - now_s).max(0.0);
        let share = left * COLLECTIVES_SHARE;
        (share, now_s + share)
    }

    /// Seconds the pairwise test may use when it starts at `now_s`: all that is left but the margin.
    pub fn pairwise_s(&self, now_s: f64) -> f64 {
        (self.total_s - self.margin_s() - now_s).max(0.0)
    }
}

/// What the probe measured on the slowest path: the busbw of an all_reduce at [`MIN_BANDWIDTH_BYTES`], and
/// the time of a small collective, microseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Probe {
    pub busbw_gbs: f64,
    pub call_us: f64,
}

/// The plan sized to a share of the budget.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sized {
    /// The largest bandwidth size.
    pub bw_max: u64,
    pub repeat: u32,
    /// Seconds the latency and bandwidth phases should take at the probed speed.
    pub expected_s: f64,
    /// Whether the size or the repeats are lower than asked for.
    pub lowered: bool,
}

/// The largest plan (bandwidth size first, then sweeps) whose latency and bandwidth phases fit `seconds` on
/// `paths` paths of `nranks` ranks at the probed speed; at worst [`MIN_BANDWIDTH_BYTES`] and one sweep, which
/// the stop between points then bounds.
pub fn size_plan(want_bw: u64, want_repeat: u32, nranks: usize, paths: usize, p: Probe, seconds: f64) -> Sized {
    let cost = |bw: u64, repeat: u32| Plan::new(bw, repeat).measure_s(nranks, paths, p.busbw_gbs, p.call_us);
    let fits = |bw: u64, repeat: u32| cost(bw, repeat) * SAFETY <= seconds;
    let mut bw = want_bw;
    while bw > MIN_BANDWIDTH_BYTES && !fits(bw, want_repeat) {
        bw /= 2;
    }
    let mut repeat = want_repeat;
    while repeat > 1 && !fits(bw, repeat) {
        repeat -= 1;
    }
    Sized {
        bw_max: bw,
        repeat,
        expected_s: cost(bw, repeat),
        lowered: bw != want_bw || repeat != want_repeat,
    }
}

/// `base` sized so `participants` hosts' pairwise test, with room to re-measure a slow host's links alone, fits
/// `seconds` at `link_gbs` per link and `rtt_us` per round trip: smaller messages and fewer round trips, never
/// larger than `base`'s.
pub fn size_pairwise(
    base: &PairwiseConfig,
    participants: usize,
    link_gbs: f64,
    rtt_us: f64,
    seconds: f64,
) -> PairwiseConfig {
    if participants < 2 {
        return base.clone();
    }
    let first = if participants % 2 == 0 {
        participants - 1
    } else {
        participants
    };
    // The first pass, then at worst every link of one host measured again alone, each after settling.
    let rounds = (first + participants - 1) as f64;
    let settling = (participants - 1) as f64 * crate::validate::pairwise::SETTLE.as_secs_f64();
    let per_round = (seconds / SAFETY - settling).max(0.0) / rounds;
    let link = link_gbs.max(1e-6) * 1e9;
    // Bandwidth gets most of a round: warm-up and timed exchanges, each a message both ways at once.
    let fit_bytes = per_round * 0.7 * link / (base.iters as f64 + 1.0);
    let mut bytes = base.bytes;
    while bytes > MIN_PAIRWISE_BYTES && (bytes as f64) > fit_bytes {
        bytes /= 2;
    }
    // The ping-pong the rest, warm-up round trips included.
    let fit_trips = (per_round * 0.3 / (rtt_us.max(1.0) * 1e-6)) as usize;
    let lat_iters = fit_trips
        .saturating_sub(10)
        .clamp(MIN_LAT_ITERS.min(base.lat_iters), base.lat_iters);
    PairwiseConfig {
        bytes,
        lat_iters,
        ..base.clone()
    }
}

/// The time a point of a first sweep is expected to take when the points before it in its phase took
/// `before` seconds each: twice the longest (each size is double the last), 0 for the phase's first point.
pub fn first_sweep_point_s(before: &[f64]) -> f64 {
    2.0 * before.iter().copied().fold(0.0, f64::max)
}

/// Whether a point expected to take `point_s` may start at `now_s` when the phase must end at `end_s`.
pub fn may_start(now_s: f64, point_s: f64, end_s: f64) -> bool {
    now_s + point_s <= end_s
}

/// The pairwise test as preflight runs it: fewer round trips than `collbench pairwise` by default, since
/// the budget is shared with the collectives.
pub fn preflight_pairwise() -> PairwiseConfig {
    PairwiseConfig {
        lat_iters: 100,
        ..PairwiseConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_keeps_a_margin_and_shares_the_rest() {
        let b = Budget::new(100);
        assert_eq!(b.margin_s(), 10.0);
        let (share, end) = b.collectives_window(10.0);
        assert!(
            (share - 48.0).abs() < 1e-9 && (end - 58.0).abs() < 1e-9,
            "{share} {end}"
        );
        assert!((b.pairwise_s(58.0) - 32.0).abs() < 1e-9);
        assert_eq!(b.pairwise_s(95.0), 0.0, "nothing left is nothing, not negative");
        assert_eq!(Budget::new(10).margin_s(), MIN_MARGIN_S);
    }

    #[test]
    fn a_slow_cluster_gets_a_smaller_plan_not_a_longer_one() {
        let fast = Probe {
            busbw_gbs: 1.0,
            call_us: 100.0,
        };
        let full = size_plan(64 << 20, 3, 4, 1, fast, 100.0);
        assert_eq!(
            (full.bw_max, full.repeat, full.lowered),
            (64 << 20, 3, false),
            "{full:?}"
        );
        // 100 Mbit/s: 64 MiB sweeps would take minutes; the plan shrinks to fit 60 s.
        let slow = Probe {
            busbw_gbs: 0.0125,
            call_us: 300.0,
        };
        let s = size_plan(64 << 20, 3, 4, 1, slow, 60.0);
        assert!(s.lowered && s.bw_max < 64 << 20, "{s:?}");
        assert!(s.expected_s * SAFETY <= 60.0, "{s:?}");
        // Nothing fits: the smallest plan, which the stop between points bounds.
        let crawl = Probe {
            busbw_gbs: 1e-5,
            call_us: 1e5,
        };
        let c = size_plan(64 << 20, 3, 4, 2, crawl, 10.0);
        assert_eq!((c.bw_max, c.repeat), (MIN_BANDWIDTH_BYTES, 1), "{c:?}");
    }

    #[test]
    fn the_pairwise_test_shrinks_to_its_share() {
        let base = PairwiseConfig::default();
        let roomy = size_pairwise(&base, 4, 1.0, 50.0, 60.0);
        assert_eq!((roomy.bytes, roomy.lat_iters), (base.bytes, base.lat_iters));
        // 100 Mbit/s links and lossy round trips in 20 s: smaller messages, fewer round trips.
        let tight = size_pairwise(&base, 4, 0.0125, 5_000.0, 20.0);
        assert!(
            tight.bytes < base.bytes && tight.bytes >= MIN_PAIRWISE_BYTES,
            "{tight:?}"
        );
        assert!(
            tight.lat_iters < base.lat_iters && tight.lat_iters >= MIN_LAT_ITERS,
            "{tight:?}"
        );
        assert_eq!(size_pairwise(&base, 1, 1e-9, 1e9, 0.0), base);
    }

    #[test]
    fn a_first_sweep_point_is_predicted_from_those_before_it() {
        assert_eq!(first_sweep_point_s(&[]), 0.0);
        assert_eq!(first_sweep_point_s(&[0.5, 3.0, 1.0]), 6.0);
        // 10 s left of the phase and the last point took 6 s: the next (double) would overrun, so it waits.
        assert!(!may_start(20.0, first_sweep_point_s(&[6.0]), 30.0));
    }

    #[test]
    fn a_point_starts_only_if_it_ends_in_time() {
        assert!(may_start(10.0, 5.0, 15.0));
        assert!(!may_start(10.0, 5.1, 15.0));
    }
}

//! Cross-rank statistics: many ranks' measurements of one point become one record.

use super::options::RankStat;
use super::plan::Point;
use super::point::{RankPoint, RankTiming};
use crate::results::per_iter::PerIter;
use crate::results::{RankInfo, Record, Timing, WrongElement};

/// Combines every rank's measurement of one placement.
pub fn combine_timing(per_rank: &[&RankTiming], stat: RankStat, p: &Point, nranks: usize, iters: u32) -> Timing {
    let avgs: Vec<f64> = per_rank.iter().map(|t| t.avg_us).collect();
    let mean = avgs.iter().sum::<f64>() / avgs.len().max(1) as f64;
    let min = avgs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = avgs.iter().copied().fold(0.0, f64::max);
    let rank0 = avgs.first().copied().unwrap_or(0.0);
    let time_us = match stat {
        RankStat::Rank0 => rank0,
        RankStat::Avg => mean,
        RankStat::Min => min,
        RankStat::Max => max,
    };
    // The spread behind the reported time: that rank's samples (for the mean, the ranks' combined).
    let pick = |want: f64| per_rank.iter().find(|t| t.avg_us == want).map_or(0.0, |t| t.std_us);
    let std_us = match stat {
        RankStat::Rank0 => per_rank.first().map_or(0.0, |t| t.std_us),
        RankStat::Min => pick(min),
        RankStat::Max => pick(max),
        RankStat::Avg => {
            (per_rank.iter().map(|t| t.std_us * t.std_us).sum::<f64>()).sqrt() / per_rank.len().max(1) as f64
        }
    };
    let ci95_us = crate::report::paths_compared::ci95_half_width(std_us, iters);
    let (algbw, busbw) = p.layout.bandwidth(p.coll, nranks, time_us / 1e6);
    let wrong = per_rank.iter().try_fold(0u64, |acc, t| t.wrong.map(|w| acc + w));
    Timing {
        time_us,
        algbw,
        busbw,
        wrong,
        rank0_us: rank0,
        avg_us: mean,
        min_us: min,
        max_us: max,
        p50_us: per_rank.iter().map(|t| t.p50_us).fold(0.0, f64::max),
        p99_us: per_rank.iter().map(|t| t.p99_us).fold(0.0, f64::max),
        ci95_us,
        iters,
        staging_us: per_rank.iter().filter_map(|t| t.staging_us).reduce(f64::max),
        staging_wait_us: per_rank.iter().filter_map(|t| t.staging_wait_us).reduce(f64::max),
        per_iter: None,
    }
}

/// What every record of a sweep shares.
pub struct Context<'a> {
    /// The path measured.
    pub path: &'a str,
    pub root: usize,
    /// Every rank's info, for naming hosts.
    pub ranks: &'a [RankInfo],
    pub stat: RankStat,
    pub iters: u32,
    /// Which whole sweep this is (`--repeat`).
    pub repeat: u32,
    /// Per-iteration timing (`-I 1`): the leading iterations its summary leaves out (`-K`); `None`: off.
    pub per_iter_skip: Option<u32>,
    /// How the path's calls were waited for, where they return before they complete.
    pub timing: Option<crate::results::timing::TimingMode>,
}

/// One table row from every rank's measurement of `p` with `algo`.
pub fn record(ctx: &Context<'_>, algo: &str, p: &Point, per_rank: &[RankPoint]) -> Record {
    let Context {
        path,
        root,
        ranks,
        stat,
        iters,
        repeat,
        per_iter_skip,
        timing,
    } = *ctx;
    let n = per_rank.len();
    let oop: Vec<&RankTiming> = per_rank.iter().map(|r| &r.out_of_place).collect();
    let ip: Vec<&RankTiming> = per_rank.iter().map(|r| &r.in_place).collect();
    // The first wrong element: lowest rank, out-of-place before in-place.
    let first_wrong = per_rank.iter().enumerate().find_map(|(rank, rp)| {
        [(false, &rp.out_of_place), (true, &rp.in_place)]
            .into_iter()
            .find_map(|(in_place, t)| {
                t.first.as_ref().map(|(offset, expected, got)| WrongElement {
                    rank,
                    host: ranks.get(rank).map(|r| r.host.clone()).unwrap_or_default(),
                    in_place,
                    offset: *offset,
                    expected: expected.clone(),
                    got: got.clone(),
                })
            })
    });
    // Calls queued and waited for once give one sample per point: their spread is unknown, as at -n 1.
    let spread = |t: Timing| match timing {
        Some(crate::results::timing::TimingMode::Queued) => Timing {
            ci95_us: crate::report::paths_compared::ci95_half_width(0.0, 1),
            ..t
        },
        _ => t,
    };
    let per_iter = |ts: &[&RankTiming]| {
        let times: Vec<&[f64]> = ts.iter().map(|t| t.times_us.as_slice()).collect();
        per_iter_skip.and_then(|skip| PerIter::of(&times, skip))
    };
    Record {
        path: path.to_string(),
        collective: p.coll,
        algo: algo.to_string(),
        size: p.layout.size_bytes as u64,
        count: p.layout.count as u64,
        dtype: p.dtype,
        op: p.op,
        root: p.coll.rooted().then_some(root),
        nranks: n,
        out_of_place: Timing {
            per_iter: per_iter(&oop),
            ..spread(combine_timing(&oop, stat, p, n, iters))
        },
        in_place: Timing {
            per_iter: per_iter(&ip),
            ..spread(combine_timing(&ip, stat, p, n, iters))
        },
        first_wrong,
        repeat,
        timing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::reduce::{Dtype, Op};

    fn point() -> Point {
        let layout = Collective::AllReduce.layout(1_000_000, 4, 4);
        Point {
            coll: Collective::AllReduce,
            dtype: Dtype::Float,
            op: Some(Op::Sum),
            requested: 1_000_000,
            layout,
        }
    }

    fn t(avg: f64, wrong: Option<u64>) -> RankTiming {
        RankTiming {
            avg_us: avg,
            p50_us: avg,
            p99_us: avg * 2.0,
            std_us: avg / 10.0,
            wrong,
            first: None,
            staging_us: None,
            staging_wait_us: None,
            times_us: Vec::new(),
        }
    }

    #[test]
    fn the_slowest_rank_sets_the_time_by_default() {
        let (a, b, c) = (t(100.0, Some(0)), t(300.0, Some(2)), t(200.0, Some(1)));
        let rows = [&a, &b, &c];
        let m = combine_timing(&rows, RankStat::Max, &point(), 4, 20);
        assert_eq!(m.time_us, 300.0);
        assert_eq!((m.min_us, m.avg_us, m.rank0_us, m.p99_us), (100.0, 200.0, 100.0, 600.0));
        assert_eq!(m.wrong, Some(3));
        // The interval comes from the slowest rank's spread (std 30 us over 20 samples).
        assert!((m.ci95_us - 2.093 * 30.0 / 20f64.sqrt()).abs() < 1e-9, "{}", m.ci95_us);
        // 1e6 bytes in 300 us = 3.33 GB/s algbw; busbw x 1.5 at 4 ranks.
        assert!((m.algbw - 1e6 / 300e-6 / 1e9).abs() < 1e-9);
        assert!((m.busbw - m.algbw * 1.5).abs() < 1e-9);
        assert_eq!(combine_timing(&rows, RankStat::Min, &point(), 4, 20).time_us, 100.0);
        assert_eq!(combine_timing(&rows, RankStat::Avg, &point(), 4, 20).time_us, 200.0);
        assert_eq!(combine_timing(&rows, RankStat::Rank0, &point(), 4, 20).time_us, 100.0);
    }

    #[test]
    fn staging_times_are_the_most_over_ranks_and_absent_on_host_memory() {
        let host = combine_timing(&[&t(1.0, Some(0))], RankStat::Max, &point(), 4, 20);
        assert_eq!((host.staging_us, host.staging_wait_us), (None, None));
        let dev = |copy: f64, wait: f64| RankTiming {
            staging_us: Some(copy),
            staging_wait_us: Some(wait),
            ..t(100.0, Some(0))
        };
        let (a, b) = (dev(40.0, 5.0), dev(30.0, 9.0));
        let m = combine_timing(&[&a, &b], RankStat::Max, &point(), 4, 20);
        assert_eq!((m.staging_us, m.staging_wait_us), (Some(40.0), Some(9.0)));
    }

    #[test]
    fn an_unchecked_rank_makes_the_count_unknown() {
        let (a, b) = (t(1.0, Some(0)), t(1.0, None));
        assert_eq!(combine_timing(&[&a, &b], RankStat::Max, &point(), 2, 1).wrong, None);
    }
}

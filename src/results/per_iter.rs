//! nccl-tests' per-iteration summary (`-I 1`): every rank's iteration times, the slowest rank's time at each
//! iteration, and statistics of those over the iterations the summary keeps (`-K` leaves leading ones out).
//! Percentiles are nearest-rank on the sorted times and the deviation is the population's, as nccl-tests'
//! `computeIterStats` (src/util.cu) computes them, so its tools/analyze_perf_json.py reads the same numbers.

use serde::{Deserialize, Serialize};

/// One placement's per-iteration object (`out_of_place_per_iter`, `in_place_per_iter`), nccl-tests' keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PerIter {
    /// Leading iterations left out of the statistics below (`-K`); `times_us` keeps them.
    pub skipped_iterations: u32,
    pub min_us: f64,
    pub max_us: f64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub stdev_us: f64,
    /// `stdev_us / avg_us` in percent.
    pub cv_pct: f64,
    /// Every timed iteration's time (us): the slowest process's at that iteration.
    pub times_us: Vec<f64>,
    /// One row per process (collbench runs one rank per process), its time at every iteration (us);
    /// written with two or more processes, as nccl-tests writes it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_process_max_times_us: Vec<Vec<f64>>,
}

impl PerIter {
    /// The summary of `per_rank` (each rank's iteration times, in rank order) leaving out the first `skip`
    /// iterations from the statistics; `None` when no rank kept its times.
    pub fn of(per_rank: &[&[f64]], skip: u32) -> Option<PerIter> {
        let n = per_rank.iter().map(|t| t.len()).min()?;
        if n == 0 {
            return None;
        }
        let times_us: Vec<f64> = (0..n)
            .map(|i| per_rank.iter().map(|t| t[i]).fold(f64::NEG_INFINITY, f64::max))
            .collect();
        let skip = (skip as usize).min(n - 1);
        let mut sorted = times_us[skip..].to_vec();
        sorted.sort_by(f64::total_cmp);
        let m = sorted.len();
        let at = |pct: usize| sorted[(m * pct).div_ceil(100).saturating_sub(1).min(m - 1)];
        let avg_us = sorted.iter().sum::<f64>() / m as f64;
        let stdev_us = (sorted.iter().map(|t| (t - avg_us).powi(2)).sum::<f64>() / m as f64).sqrt();
        Some(PerIter {
            skipped_iterations: skip as u32,
            min_us: sorted[0],
            max_us: sorted[m - 1],
            avg_us,
            p50_us: sorted[m / 2],
            p95_us: at(95),
            p99_us: at(99),
            stdev_us,
            cv_pct: if avg_us > 0.0 { stdev_us / avg_us * 100.0 } else { 0.0 },
            times_us,
            per_process_max_times_us: if per_rank.len() > 1 {
                per_rank.iter().map(|t| t[..n].to_vec()).collect()
            } else {
                Vec::new()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_rank_sets_each_iteration_and_the_summary_skips_leading_ones() {
        let a = [100.0, 10.0, 10.0, 12.0];
        let b = [90.0, 11.0, 30.0, 9.0];
        let p = PerIter::of(&[&a, &b], 1).unwrap();
        assert_eq!(p.times_us, [100.0, 11.0, 30.0, 12.0]);
        assert_eq!(p.per_process_max_times_us, vec![a.to_vec(), b.to_vec()]);
        // Over 11, 12, 30: nearest-rank percentiles, population deviation.
        assert_eq!(
            (p.skipped_iterations, p.min_us, p.max_us, p.p50_us),
            (1, 11.0, 30.0, 12.0)
        );
        assert_eq!((p.p95_us, p.p99_us), (30.0, 30.0));
        let avg = 53.0 / 3.0;
        assert!((p.avg_us - avg).abs() < 1e-12);
        let sd = ((11.0f64 - avg).powi(2) + (12.0 - avg).powi(2) + (30.0 - avg).powi(2)) / 3.0;
        assert!((p.stdev_us - sd.sqrt()).abs() < 1e-12);
        assert!((p.cv_pct - sd.sqrt() / avg * 100.0).abs() < 1e-9);
    }

    #[test]
    fn one_process_has_no_process_rows_and_no_times_no_summary() {
        let p = PerIter::of(&[&[5.0, 7.0]], 0).unwrap();
        assert!(p.per_process_max_times_us.is_empty());
        assert_eq!((p.p50_us, p.p95_us), (7.0, 7.0));
        assert_eq!(PerIter::of(&[&[], &[]], 0), None);
        assert_eq!(PerIter::of(&[], 0), None);
        let v = serde_json::to_value(p).unwrap();
        assert!(v.get("per_process_max_times_us").is_none());
    }
}

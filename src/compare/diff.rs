//! Pairing the points of two runs and the decision rule: a regression is slower beyond the threshold and
//! beyond the noise of both runs.

use serde::Serialize;

use super::input::{Key, Point};
use crate::report::paths_compared::{slower_beyond_noise, Estimate};

/// What one compared point did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Slower by more than the threshold, and the intervals do not overlap.
    Regressed,
    /// Faster by more than the threshold, and the intervals do not overlap.
    Improved,
    /// Within the threshold or within the noise.
    Unchanged,
}

impl Verdict {
    /// The word in tables.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Regressed => "REGRESSED",
            Verdict::Improved => "improved",
            Verdict::Unchanged => "same",
        }
    }
}

/// One point present in both runs with the same rank count.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub key: Key,
    pub nranks: u64,
    pub old: Estimate,
    pub new: Estimate,
    /// Change of the time, percent of the old time (positive: slower).
    pub time_pct: f64,
    /// Change of busbw, percent of the old busbw (negative: slower).
    pub busbw_pct: f64,
    /// The 95% intervals of the times do not overlap.
    pub significant: bool,
    pub verdict: Verdict,
}

/// Every point of two runs: compared, in one run only, or at different rank counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diff {
    pub changes: Vec<Change>,
    pub only_old: Vec<Key>,
    pub only_new: Vec<Key>,
    /// Points in both runs at different rank counts: (key, old nranks, new nranks).
    pub nranks_differ: Vec<(Key, u64, u64)>,
}

impl Diff {
    /// The compared points that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.verdict == Verdict::Regressed)
    }
}

/// The decision for one point: `threshold_pct` is the smallest change in time that counts.
pub fn judge(old: &Estimate, new: &Estimate, threshold_pct: f64) -> (f64, bool, Verdict) {
    let time_pct = pct(old.time_us, new.time_us);
    let significant = slower_beyond_noise(new, old) || slower_beyond_noise(old, new);
    let verdict = if significant && time_pct > threshold_pct {
        Verdict::Regressed
    } else if significant && time_pct < -threshold_pct {
        Verdict::Improved
    } else {
        Verdict::Unchanged
    };
    (time_pct, significant, verdict)
}

fn pct(old: f64, new: f64) -> f64 {
    if old > 0.0 {
        100.0 * (new - old) / old
    } else {
        f64::NAN
    }
}

/// Pairs the points of two runs by key, in the old run's order, then what only the new run has.
pub fn diff(old: &[Point], new: &[Point], threshold_pct: f64) -> Diff {
    let mut d = Diff::default();
    for o in old {
        let same_key: Vec<&Point> = new.iter().filter(|n| n.key == o.key).collect();
        match same_key.iter().find(|n| n.nranks == o.nranks) {
            Some(n) => {
                let (time_pct, significant, verdict) = judge(&o.est, &n.est, threshold_pct);
                d.changes.push(Change {
                    key: o.key.clone(),
                    nranks: o.nranks,
                    old: o.est,
                    new: n.est,
                    time_pct,
                    busbw_pct: pct(o.est.busbw, n.est.busbw),
                    significant,
                    verdict,
                });
            }
            None => match same_key.first() {
                Some(n) => d.nranks_differ.push((o.key.clone(), o.nranks, n.nranks)),
                None => d.only_old.push(o.key.clone()),
            },
        }
    }
    for n in new {
        if !old.iter().any(|o| o.key == n.key) {
            d.only_new.push(n.key.clone());
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(time_us: f64, ci95_us: f64) -> Estimate {
        Estimate {
            time_us,
            ci95_us,
            busbw: 1000.0 / time_us,
            repeats: 1,
        }
    }

    fn point(size: u64, nranks: u64, time_us: f64, ci95_us: f64) -> Point {
        Point {
            key: Key {
                path: "tcp@lo".into(),
                collective: "all_reduce".into(),
                dtype: "float".into(),
                redop: "sum".into(),
                size,
            },
            nranks,
            est: est(time_us, ci95_us),
        }
    }

    #[test]
    fn slower_beyond_threshold_and_noise_is_a_regression() {
        let (pct, sig, v) = judge(&est(100.0, 2.0), &est(130.0, 2.0), 5.0);
        assert!((pct - 30.0).abs() < 1e-9);
        assert!(sig);
        assert_eq!(v, Verdict::Regressed);
    }

    #[test]
    fn slower_inside_the_noise_is_not_a_regression() {
        // 30% slower, but 130 - 20 < 100 + 20: the intervals overlap.
        let (_, sig, v) = judge(&est(100.0, 20.0), &est(130.0, 20.0), 5.0);
        assert!(!sig);
        assert_eq!(v, Verdict::Unchanged);
    }

    #[test]
    fn significant_but_below_the_threshold_is_not_a_regression() {
        // 3% slower with tight intervals: real, but smaller than the 5% that counts.
        let (pct, sig, v) = judge(&est(100.0, 0.1), &est(103.0, 0.1), 5.0);
        assert!((pct - 3.0).abs() < 1e-9);
        assert!(sig);
        assert_eq!(v, Verdict::Unchanged);
        assert_eq!(judge(&est(100.0, 0.1), &est(103.0, 0.1), 2.0).2, Verdict::Regressed);
    }

    #[test]
    fn faster_beyond_threshold_and_noise_is_an_improvement() {
        assert_eq!(judge(&est(100.0, 1.0), &est(70.0, 1.0), 5.0).2, Verdict::Improved);
    }

    #[test]
    fn unknown_numbers_never_decide() {
        assert_eq!(judge(&est(f64::NAN, 1.0), &est(200.0, 1.0), 5.0).2, Verdict::Unchanged);
        assert_eq!(
            judge(&est(100.0, f64::INFINITY), &est(200.0, 1.0), 5.0).2,
            Verdict::Unchanged
        );
    }

    #[test]
    fn points_pair_by_key_and_rank_count() {
        let old = [
            point(8, 2, 100.0, 1.0),
            point(16, 2, 100.0, 1.0),
            point(32, 2, 100.0, 1.0),
        ];
        let new = [
            point(8, 2, 150.0, 1.0),
            point(16, 4, 100.0, 1.0),
            point(64, 2, 1.0, 1.0),
        ];
        let d = diff(&old, &new, 5.0);
        assert_eq!(d.changes.len(), 1);
        assert_eq!(d.changes[0].key.size, 8);
        assert!((d.changes[0].busbw_pct - (100.0 / 150.0 - 1.0) * 100.0).abs() < 1e-9);
        assert_eq!(d.regressions().count(), 1);
        assert_eq!(d.nranks_differ.len(), 1);
        assert_eq!(
            (d.nranks_differ[0].0.size, d.nranks_differ[0].1, d.nranks_differ[0].2),
            (16, 2, 4)
        );
        assert_eq!(d.only_old.iter().map(|k| k.size).collect::<Vec<_>>(), [32]);
        assert_eq!(d.only_new.iter().map(|k| k.size).collect::<Vec<_>>(), [64]);
    }
}

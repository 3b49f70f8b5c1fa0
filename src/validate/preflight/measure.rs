//! What a check reads: one sample per point and sweep, taken from live records or from a saved preflight
//! file, and the estimates over sweeps (median with an interval) that the verdict compares with thresholds.

use crate::error::{Error, Result};
use crate::report::paths_compared::ci95_half_width;
use crate::results::document::Entry;

/// One point of one sweep, out of place.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub path: String,
    pub collective: String,
    pub size: u64,
    pub repeat: u32,
    pub time_us: f64,
    pub ci95_us: f64,
    pub busbw: f64,
    pub p99_us: f64,
    pub iters: u32,
    /// Wrong elements, both placements.
    pub wrong: u64,
}

impl Sample {
    /// The samples of a `results`-style list (entries as `collbench run -J` writes them); `what` names it.
    pub fn from_entries(entries: &[Entry], what: &str) -> Result<Vec<Sample>> {
        let bad = |m: String| Error::usage(what, m);
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let (oop, ip) = (e.out_of_place(), e.in_place());
                let s =
                    |f: &Option<String>, k: &str| f.clone().ok_or_else(|| bad(format!("entry {i} has no string {k}")));
                let u = |f: Option<u64>, k: &str| f.ok_or_else(|| bad(format!("entry {i} has no whole number {k}")));
                // "nan" (written for a number that is not finite) reads back as NaN.
                let f = |x: Option<f64>| x.unwrap_or(f64::NAN);
                let w = |x: Option<f64>| x.unwrap_or(0.0) as u64;
                Ok(Sample {
                    path: s(&e.path, "/path")?,
                    collective: s(&e.collective, "/collective")?,
                    size: u(e.size, "/size")?,
                    repeat: u(e.repeat.map(u64::from), "/repeat")? as u32,
                    time_us: f(oop.time),
                    ci95_us: f(oop.ci95_us),
                    busbw: f(oop.bus_bw),
                    p99_us: f(oop.p99_us),
                    iters: u(oop.iters.map(u64::from), "/out_of_place/iters")? as u32,
                    wrong: w(oop.nwrong) + w(ip.nwrong),
                })
            })
            .collect()
    }
}

/// A figure over sweeps: the median, and an interval the truth lies in with the noise seen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The median of `v` with the range of `v` as its interval.
fn median_and_range(v: Vec<f64>) -> Estimate {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Estimate {
        value: median(v),
        lo,
        hi,
    }
}

/// The time of one point over its sweeps: the median time; as its interval the range of the sweeps (for the
/// median of k sweeps a distribution-free interval of confidence 1 - 2^(1-k): 75% for 3, 94% for 5), or with a
/// single sweep that sweep's own 95% interval. A t-interval over 3 sweeps (t = 4.3) would often reach down to
/// a zero time on a busy machine, and then no busbw threshold, however absurd, could fail.
pub fn time(sweeps: &[&Sample]) -> Estimate {
    match sweeps {
        [] => Estimate {
            value: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
        },
        [one] => Estimate {
            value: one.time_us,
            lo: (one.time_us - one.ci95_us).max(0.0),
            hi: one.time_us + one.ci95_us,
        },
        many => median_and_range(many.iter().map(|s| s.time_us).collect()),
    }
}

/// busbw of one point over its sweeps: busbw at the median time, the interval from the time's.
pub fn busbw(sweeps: &[&Sample]) -> Estimate {
    let t = time(sweeps);
    // busbw is inversely proportional to time at a fixed size: bytes x factor = busbw x time.
    let work = sweeps.first().map_or(f64::NAN, |s| s.busbw * s.time_us);
    let at = |us: f64| if us > 0.0 { work / us } else { f64::INFINITY };
    Estimate {
        value: at(t.value),
        lo: at(t.hi),
        hi: at(t.lo),
    }
}

/// The 99th-percentile iteration time of one point: median over sweeps, their range as the interval.
pub fn p99(sweeps: &[&Sample]) -> Estimate {
    median_and_range(sweeps.iter().map(|s| s.p99_us).collect())
}

/// Coefficient of variation of the iteration times (standard deviation over mean) of one point: median over
/// sweeps, their range as the interval. The standard deviation is recovered from the recorded 95% interval.
pub fn cv(sweeps: &[&Sample]) -> Estimate {
    median_and_range(
        sweeps
            .iter()
            .map(|s| s.ci95_us / ci95_half_width(1.0, s.iters) / s.time_us)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(repeat: u32, time_us: f64, ci95_us: f64) -> Sample {
        Sample {
            path: "tcp@lo".into(),
            collective: "all_reduce".into(),
            size: 1 << 20,
            repeat,
            time_us,
            ci95_us,
            busbw: 1000.0 / time_us,
            p99_us: time_us * 2.0,
            iters: 10,
            wrong: 0,
        }
    }

    #[test]
    fn estimates_take_the_median_and_an_interval_around_it() {
        let s = [sample(0, 100.0, 1.0), sample(1, 300.0, 1.0), sample(2, 110.0, 1.0)];
        let refs: Vec<&Sample> = s.iter().collect();
        let t = time(&refs);
        assert_eq!((t.value, t.lo, t.hi), (110.0, 100.0, 300.0));
        let b = busbw(&refs);
        assert!((b.value - 1000.0 / 110.0).abs() < 1e-9);
        assert!(
            (b.lo - 1000.0 / 300.0).abs() < 1e-9 && (b.hi - 10.0).abs() < 1e-9,
            "{b:?}"
        );
        // One sweep: its own interval, a time never below zero.
        let one = time(&refs[..1]);
        assert_eq!((one.value, one.lo, one.hi), (100.0, 99.0, 101.0));
        let wide = sample(0, 100.0, 500.0);
        assert_eq!(time(&[&wide]).lo, 0.0);
        assert!(busbw(&[&wide]).hi.is_infinite());
        let p = p99(&refs);
        assert_eq!((p.value, p.lo, p.hi), (220.0, 200.0, 600.0));
        // std = ci95 / (t9 / sqrt 10); cv = std / time.
        let c = cv(&refs[..1]);
        let want = 1.0 / (2.262 / 10f64.sqrt()) / 100.0;
        assert!((c.value - want).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn saved_entries_read_back_as_samples() {
        let v = serde_json::json!([{"path": "tcp@lo", "collective": "all_reduce", "size": 8, "repeat": 1,
            "out_of_place": {"time": 5.0, "ci95_us": "nan", "bus_bw": 0.1, "p99_us": 9.0, "iters": 20, "nwrong": 2.0},
            "in_place": {"nwrong": 1.0}}]);
        // As a saved preflight's entries read: each one an entry, then a sample.
        let read = |v: &serde_json::Value| {
            let entries =
                crate::results::document::entries_from_value(v, "entry").map_err(|m| Error::usage("f.json", m))?;
            Sample::from_entries(&entries, "f.json")
        };
        let s = read(&v).unwrap();
        assert_eq!((s[0].size, s[0].repeat, s[0].wrong, s[0].iters), (8, 1, 3, 20));
        assert!(s[0].ci95_us.is_nan());
        let e = read(&serde_json::json!([{"path": 1}])).unwrap_err();
        assert!(e.to_string().starts_with("f.json: entry 0"), "{e}");
    }
}

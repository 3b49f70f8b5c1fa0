//! Paths side by side: at every collective/dtype/op/size measured on more than one path, each path's time
//! with its 95% confidence interval, its busbw as a fraction of the best path's and of a chosen reference,
//! and whether the difference from the best is larger than the noise.

use crate::results::record::{Comparison, PathFigure, Record};

/// Two-sided 95% Student t quantiles for 1..=30 degrees of freedom; 1.96 beyond.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// Half-width of the 95% confidence interval of a mean of `n` samples with standard deviation `std`.
pub fn ci95_half_width(std: f64, n: u32) -> f64 {
    if n < 2 {
        return f64::INFINITY;
    }
    let t = T95.get(n as usize - 2).copied().unwrap_or(1.96);
    t * std / (n as f64).sqrt()
}

/// One sweep's figures of one point, the inputs of [`combine_sweeps`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    /// The reported time, microseconds.
    pub time_us: f64,
    /// Half-width of its 95% confidence interval, microseconds.
    pub ci95_us: f64,
    /// Bus bandwidth at that time, GB/s.
    pub busbw: f64,
}

/// Whole sweeps of one point combined: the mean time over repeats and an interval that covers the
/// spread between repeats as well as the noise within each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Mean time over the sweeps, microseconds.
    pub time_us: f64,
    /// Half-width of the 95% interval of that mean, microseconds.
    pub ci95_us: f64,
    /// Bus bandwidth at the mean time, GB/s.
    pub busbw: f64,
    /// Sweeps combined.
    pub repeats: u32,
}

/// Combines the sweeps of one point (at least one; the first one's busbw scales to the mean time).
pub fn combine_sweeps(sweeps: &[Sweep]) -> Estimate {
    let k = sweeps.len();
    let first = sweeps[0];
    if k == 1 {
        return Estimate {
            time_us: first.time_us,
            ci95_us: first.ci95_us,
            busbw: first.busbw,
            repeats: 1,
        };
    }
    let mean = sweeps.iter().map(|s| s.time_us).sum::<f64>() / k as f64;
    let var = sweeps.iter().map(|s| (s.time_us - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let between = ci95_half_width(var.sqrt(), k as u32);
    // The mean of k independent means: its within-sweep interval shrinks by sqrt(k).
    let within = sweeps.iter().map(|s| s.ci95_us.powi(2)).sum::<f64>().sqrt() / k as f64;
    Estimate {
        time_us: mean,
        ci95_us: between.max(within),
        // busbw is inversely proportional to time at a fixed size.
        busbw: first.busbw * first.time_us / mean,
        repeats: k as u32,
    }
}

/// Whether `slow` takes longer than `fast` by more than the noise of either: their 95% intervals of the
/// time do not overlap.
pub fn slower_beyond_noise(slow: &Estimate, fast: &Estimate) -> bool {
    slow.time_us - slow.ci95_us > fast.time_us + fast.ci95_us
}

/// One path's sweeps of one point combined, with the record that names the point.
struct Combined<'a> {
    first: &'a Record,
    est: Estimate,
}

fn combine<'a>(sweeps: &[&'a Record]) -> Combined<'a> {
    let figures: Vec<Sweep> = sweeps
        .iter()
        .map(|r| Sweep {
            time_us: r.out_of_place.time_us,
            ci95_us: r.out_of_place.ci95_us,
            busbw: r.out_of_place.busbw,
        })
        .collect();
    Combined {
        first: sweeps[0],
        est: combine_sweeps(&figures),
    }
}

/// Every point measured on two or more paths, in first-seen order, best path (highest busbw) first;
/// `line_rates` gives a path's line rate in GB/s where known. Whole-sweep repeats of one path
/// (`--repeat`) are combined first.
pub fn compare(records: &[Record], reference: Option<&str>, line_rates: &[(String, f64)]) -> Vec<Comparison> {
    // Each path's sweeps of each point, in first-seen order.
    let mut groups: Vec<Vec<&Record>> = Vec::new();
    for r in records {
        let same = |g: &&mut Vec<&Record>| {
            let f = g[0];
            f.path == r.path && f.collective == r.collective && f.dtype == r.dtype && f.op == r.op && f.size == r.size
        };
        match groups.iter_mut().find(same) {
            // Sizes that round to the same bytes (tiny sharded sizes round to 0) repeat a point within one
            // sweep: only one measurement per sweep counts.
            Some(g) if g.iter().any(|x| x.repeat == r.repeat) => {}
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    let mut out: Vec<Comparison> = Vec::new();
    for g in &groups {
        let Combined { first: r, est: c } = combine(g);
        let fig = PathFigure {
            path: r.path.clone(),
            time_us: c.time_us,
            ci95_us: c.ci95_us,
            busbw: c.busbw,
            vs_best: 1.0,
            vs_reference: None,
            significant: false,
            line_rate_pct: line_rates
                .iter()
                .find(|(p, rate)| *p == r.path && *rate > 0.0)
                .map(|(_, rate)| 100.0 * c.busbw / rate),
            repeats: c.repeats,
        };
        match out
            .iter_mut()
            .find(|x| x.collective == r.collective && x.dtype == r.dtype && x.op == r.op && x.size == r.size)
        {
            Some(x) => x.paths.push(fig),
            None => out.push(Comparison {
                collective: r.collective,
                dtype: r.dtype,
                op: r.op,
                size: r.size,
                paths: vec![fig],
            }),
        }
    }
    out.retain(|c| c.paths.len() > 1);
    for c in &mut out {
        c.paths.sort_by(|a, b| b.busbw.total_cmp(&a.busbw));
        let best = c.paths[0].clone();
        let refbw = reference
            .and_then(|name| c.paths.iter().find(|p| p.path == name))
            .map(|p| p.busbw);
        for p in &mut c.paths {
            p.vs_best = if best.busbw > 0.0 { p.busbw / best.busbw } else { 1.0 };
            p.vs_reference = refbw.filter(|&b| b > 0.0).map(|b| p.busbw / b);
            // Intervals of the times that do not overlap: the gap is larger than the noise of either.
            p.significant = p.path != best.path && slower_beyond_noise(&estimate(p), &estimate(&best));
        }
    }
    out
}

/// A path's figure as an [`Estimate`], for the significance rule.
fn estimate(p: &PathFigure) -> Estimate {
    Estimate {
        time_us: p.time_us,
        ci95_us: p.ci95_us,
        busbw: p.busbw,
        repeats: p.repeats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::results::testutil::record;

    fn on(path: &str, time_us: f64, busbw: f64, ci: f64) -> Record {
        let mut r = record(Collective::AllReduce, 1 << 20, time_us, busbw, Some(0));
        r.path = path.into();
        r.out_of_place.ci95_us = ci;
        r
    }

    #[test]
    fn t_quantiles_shrink_with_samples() {
        assert!(ci95_half_width(1.0, 1).is_infinite());
        assert!((ci95_half_width(1.0, 2) - 12.706 / 2f64.sqrt()).abs() < 1e-9);
        assert!((ci95_half_width(2.0, 20) - 2.093 * 2.0 / 20f64.sqrt()).abs() < 1e-9);
        assert!((ci95_half_width(1.0, 1000) - 1.96 / 1000f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn paths_are_ranked_against_the_best_and_the_reference() {
        let recs = [
            on("tcp@eth0", 100.0, 2.0, 1.0),
            on("tcp@vxlan0", 125.0, 1.6, 1.0),
            on("tcp@x", 101.0, 1.98, 5.0),
        ];
        let c = compare(&recs, Some("tcp@vxlan0"), &[("tcp@eth0".into(), 4.0)]);
        assert_eq!(c.len(), 1);
        let p = &c[0].paths;
        assert_eq!(
            p.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            ["tcp@eth0", "tcp@x", "tcp@vxlan0"]
        );
        assert_eq!(p[0].vs_best, 1.0);
        assert!((p[2].vs_best - 0.8).abs() < 1e-12);
        assert!((p[0].vs_reference.unwrap() - 1.25).abs() < 1e-12);
        // 125 - 1 > 100 + 1: a real difference; 101 - 5 < 100 + 1: inside the noise.
        assert!(p[2].significant);
        assert!(!p[1].significant);
        assert!(!p[0].significant, "the best is not different from itself");
        assert_eq!(p[0].line_rate_pct, Some(50.0), "2 GB/s of a 4 GB/s link");
        assert_eq!(p[1].line_rate_pct, None, "unknown line rate");
    }

    #[test]
    fn single_path_points_and_unknown_references_give_nothing_to_compare() {
        assert!(compare(&[on("tcp@eth0", 1.0, 1.0, 0.1)], None, &[]).is_empty());
        // One path measured twice at the same size (rounding) is not a comparison.
        assert!(compare(&[on("a", 1.0, 1.0, 0.1), on("a", 1.1, 0.9, 0.1)], None, &[]).is_empty());
        let c = compare(&[on("a", 1.0, 1.0, 0.1), on("b", 2.0, 0.5, 0.1)], Some("nope"), &[]);
        assert!(c[0].paths.iter().all(|p| p.vs_reference.is_none()));
    }

    fn sweep(path: &str, repeat: u32, time_us: f64, ci: f64) -> Record {
        let mut r = on(path, time_us, 1000.0 / time_us, ci);
        r.repeat = repeat;
        r
    }

    #[test]
    fn repeats_combine_into_a_mean_with_the_spread_between_sweeps() {
        // Path a: sweeps at 100 and 110 us, each +-1 us within; b: one sweep at 200 us.
        let recs = [
            sweep("a", 0, 100.0, 1.0),
            sweep("b", 0, 200.0, 1.0),
            sweep("a", 1, 110.0, 1.0),
        ];
        let c = compare(&recs, None, &[]);
        let a = c[0].paths.iter().find(|p| p.path == "a").unwrap();
        assert_eq!(a.repeats, 2);
        assert!((a.time_us - 105.0).abs() < 1e-9);
        // Between sweeps: t(1 df) x sd 7.07 / sqrt 2 = 12.706 x 5; wider than the within-sweep 1.41 / 2.
        assert!((a.ci95_us - 12.706 * 5.0).abs() < 1e-6, "{}", a.ci95_us);
        assert!((a.busbw - 1000.0 / 105.0).abs() < 1e-9, "busbw follows the mean time");
        // 200 - 1 > 105 + 63.5: still a real gap.
        assert!(c[0].paths.iter().find(|p| p.path == "b").unwrap().significant);
        // Steady sweeps: the spread between them is zero, so the within-sweep noise sets the interval.
        let steady = [
            sweep("a", 0, 100.0, 4.0),
            sweep("a", 1, 100.0, 4.0),
            sweep("b", 0, 100.0, 1.0),
        ];
        let a = compare(&steady, None, &[])[0]
            .paths
            .iter()
            .find(|p| p.path == "a")
            .unwrap()
            .clone();
        assert!((a.ci95_us - 32f64.sqrt() / 2.0).abs() < 1e-9, "{}", a.ci95_us);
    }

    #[test]
    fn a_size_repeated_within_one_sweep_counts_once() {
        let recs = [
            sweep("a", 0, 100.0, 1.0),
            sweep("a", 0, 300.0, 1.0),
            sweep("b", 0, 100.0, 1.0),
        ];
        let c = compare(&recs, None, &[]);
        let a = c[0].paths.iter().find(|p| p.path == "a").unwrap();
        assert_eq!((a.repeats, a.time_us), (1, 100.0));
    }
}

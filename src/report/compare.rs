//! Paths side by side: at every collective/dtype/op/size measured on more than one path, each path's time
//! with its 95% confidence interval, its busbw as a fraction of the best path's and of a chosen reference,
//! and whether the difference from the best is larger than the noise.

use super::record::{Comparison, PathFigure, Record};

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

/// Every point measured on two or more paths, in first-seen order, best path (highest busbw) first;
/// `line_rates` gives a path's line rate in GB/s where known.
pub fn compare(records: &[Record], reference: Option<&str>, line_rates: &[(String, f64)]) -> Vec<Comparison> {
    let mut out: Vec<Comparison> = Vec::new();
    for r in records {
        let fig = PathFigure {
            path: r.path.clone(),
            time_us: r.out_of_place.time_us,
            ci95_us: r.out_of_place.ci95_us,
            busbw: r.out_of_place.busbw,
            vs_best: 1.0,
            vs_reference: None,
            significant: false,
            line_rate_pct: line_rates
                .iter()
                .find(|(p, rate)| *p == r.path && *rate > 0.0)
                .map(|(_, rate)| 100.0 * r.out_of_place.busbw / rate),
        };
        match out
            .iter_mut()
            .find(|c| c.collective == r.collective && c.dtype == r.dtype && c.op == r.op && c.size == r.size)
        {
            // Sizes that round to the same bytes (tiny sharded sizes round to 0) repeat a point on one path:
            // only different paths are compared.
            Some(c) if c.paths.iter().any(|p| p.path == fig.path) => {}
            Some(c) => c.paths.push(fig),
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
            p.significant = p.path != best.path && p.time_us - p.ci95_us > best.time_us + best.ci95_us;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::report::testutil::record;

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
}

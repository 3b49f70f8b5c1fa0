//! The host-effects model localisation judges with, and the bar a robust z must pass when many links or
//! hosts are judged at once.
//!
//! In log space a link's value is a cluster level, plus one effect per end, plus the link's own residual:
//! `y_ab = mu + h_a + h_b + e_ab`. A slow host lowers its effect, a slow path its residual, and a busy host
//! (late wake-ups on shared cores) its effect, not its links' residuals. The fit is median polish over the
//! links that were measured (any subset of the pairs, not only a full matrix), so a few bad links or hosts
//! do not move the others' estimates.

use super::median::median;

/// Sweeps of median polish at most; it settles in a handful on clean data.
const MAX_SWEEPS: usize = 50;

/// A link's fit: the cluster level, each host's effect and each link's residual (all in log units).
#[derive(Clone, Debug)]
pub struct Fit {
    /// The level of a link between two typical hosts (the median host effect is 0).
    pub mu: f64,
    /// Each host's effect; NaN for a host without a measured link.
    pub host: Vec<f64>,
    /// Each link's residual; NaN where the link's value is not finite.
    pub resid: Vec<f64>,
}

/// For each of `n` hosts, the indices of the links in `ends` that touch it and have a finite `y`.
pub fn adjacency(y: &[f64], ends: &[(usize, usize)], n: usize) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); n];
    for (i, &(a, b)) in ends.iter().enumerate() {
        if y[i].is_finite() && a < n && b < n {
            adj[a].push(i);
            adj[b].push(i);
        }
    }
    adj
}

/// Median polish of `y` (one value per link, ends `ends`, over `n` hosts): host effects swept one host at a
/// time (each link has two ends, so both ends moved at once would overshoot), recentred after each sweep.
pub fn polish(y: &[f64], ends: &[(usize, usize)], n: usize) -> Fit {
    let adj = adjacency(y, ends, n);
    let mut finite: Vec<f64> = y.iter().copied().filter(|v| v.is_finite()).collect();
    let mu0 = median(&mut finite);
    if !mu0.is_finite() {
        return Fit {
            mu: f64::NAN,
            host: vec![f64::NAN; n],
            resid: vec![f64::NAN; y.len()],
        };
    }
    let mut mu = mu0;
    let mut h = vec![0.0; n];
    let mut e: Vec<f64> = y.iter().map(|v| v - mu).collect();
    let mut scratch = Vec::new();
    for _ in 0..MAX_SWEEPS {
        let mut moved: f64 = 0.0;
        for (a, links) in adj.iter().enumerate() {
            if links.is_empty() {
                continue;
            }
            scratch.clear();
            scratch.extend(links.iter().map(|&i| e[i]));
            let d = median(&mut scratch);
            h[a] += d;
            for &i in links {
                e[i] -= d;
            }
            moved = moved.max(d.abs());
        }
        // The median host effect is 0; the level carries the shift (each link has two ends).
        scratch.clear();
        scratch.extend((0..n).filter(|&a| !adj[a].is_empty()).map(|a| h[a]));
        let c = median(&mut scratch);
        if c.is_finite() {
            for (a, links) in adj.iter().enumerate() {
                if !links.is_empty() {
                    h[a] -= c;
                }
            }
            mu += 2.0 * c;
        }
        if moved < 1e-12 {
            break;
        }
    }
    for (a, links) in adj.iter().enumerate() {
        if links.is_empty() {
            h[a] = f64::NAN;
        }
    }
    Fit { mu, host: h, resid: e }
}

/// 1.4826 x the median absolute deviation of `v` from `centre`: the standard deviation of normal data,
/// unmoved by a minority of outliers; NaN when `v` is empty.
pub fn robust_sd(v: impl Iterator<Item = f64>, centre: f64) -> f64 {
    let mut dev: Vec<f64> = v.map(|x| (x - centre).abs()).collect();
    1.4826 * median(&mut dev)
}

/// The z a standard normal exceeds with probability `p` (one-sided, 0 < p <= 0.5): Abramowitz and Stegun
/// 26.2.23, within 4.5e-4 of the exact value.
pub fn upper_z(p: f64) -> f64 {
    let p = p.clamp(f64::MIN_POSITIVE, 0.5);
    let t = (-2.0 * p.ln()).sqrt();
    t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
}

/// The z each of `m` one-sided tests must pass so that, all clean, none is flagged with probability at
/// least 1 - `alpha` (Sidak: each at 1 - (1 - alpha)^(1/m)); never below `least`.
pub fn bar(m: usize, alpha: f64, least: f64) -> f64 {
    let m = m.max(1) as f64;
    // 1 - (1 - alpha)^(1/m), without the cancellation of the direct form at large m.
    let p = -((-alpha).ln_1p() / m).exp_m1();
    upper_z(p).max(least)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_z_matches_the_normal_table() {
        for (p, z) in [
            (0.5, 0.0),
            (0.05, 1.6449),
            (0.01, 2.3263),
            (1e-4, 3.7190),
            (1e-7, 5.1993),
        ] {
            assert!((upper_z(p) - z).abs() < 1e-3, "p={p}: {} vs {z}", upper_z(p));
        }
    }

    #[test]
    fn the_bar_rises_with_the_number_judged() {
        // One test at 1%: the plain one-sided 1% point; a million: the 1e-8 point, about 5.6.
        assert!((bar(1, 0.01, 0.0) - 2.3263).abs() < 1e-3);
        assert!(
            (bar(1_000_000, 0.01, 0.0) - 5.612).abs() < 0.01,
            "{}",
            bar(1_000_000, 0.01, 0.0)
        );
        assert!(bar(10, 0.01, 0.0) < bar(1000, 0.01, 0.0));
        assert_eq!(bar(3, 0.01, 4.0), 4.0);
    }

    #[test]
    fn polish_recovers_host_effects_and_a_bad_link_from_a_partial_schedule() {
        // 8 hosts, host 3 at -1, link (1, 5) at -2 on top; every pair but (0, 7) and (2, 4) measured.
        let n = 8;
        let (mut y, mut ends) = (Vec::new(), Vec::new());
        for a in 0..n {
            for b in a + 1..n {
                if [(0, 7), (2, 4)].contains(&(a, b)) {
                    continue;
                }
                let h = |x: usize| if x == 3 { -1.0 } else { 0.0 };
                y.push(5.0 + h(a) + h(b) + if (a, b) == (1, 5) { -2.0 } else { 0.0 });
                ends.push((a, b));
            }
        }
        let f = polish(&y, &ends, n);
        assert!((f.mu - 5.0).abs() < 1e-9, "{f:?}");
        assert!((f.host[3] + 1.0).abs() < 1e-9, "{f:?}");
        let bad = ends.iter().position(|&p| p == (1, 5)).unwrap();
        assert!((f.resid[bad] + 2.0).abs() < 1e-9, "{f:?}");
        let others = (0..y.len()).filter(|&i| i != bad).map(|i| f.resid[i].abs());
        assert!(others.fold(0.0, f64::max) < 1e-9, "{f:?}");
        // A host with no link has no effect; no link at all, no fit.
        let f = polish(&[1.0], &[(0, 1)], 3);
        assert!(f.host[2].is_nan() && f.resid[0] == 0.0, "{f:?}");
        assert!(polish(&[f64::NAN], &[(0, 1)], 2).mu.is_nan());
    }
}

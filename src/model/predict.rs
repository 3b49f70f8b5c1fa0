//! Predictions at the target scale from fitted paths: time with a 95% interval, algbw and busbw per
//! collective, size and algorithm (the ring and the latency algorithm), the size where they cross, which
//! term dominates, the two-level (hierarchical) form when ranks share nodes, and paths against each other.
//!
//! The two-level model, for G ranks per node on N/G = M nodes (the shape NCCL and MPI libraries use):
//! - all_reduce: ring reduce-scatter inside each node over the local link, then an all-reduce between nodes
//!   over the path in which the node's G ranks each carry 1/G of the vector at the same time, so the node's
//!   link carries what one all-reduce of the whole vector over M ranks carries (and each rank reduces 1/G of
//!   it), then a ring all-gather inside each node;
//! - all_gather: the all-gather between nodes (the node's link carries (M-1)/M of the output), then a ring
//!   all-gather inside each node;
//! - reduce_scatter: ring reduce-scatter inside each node, then between nodes as for all_reduce.
//!
//! The other collectives are predicted flat only.

use std::collections::BTreeSet;

use serde::Serialize;

use super::coeff::coeffs;
use super::fit::PathFit;
use crate::algorithm::Algo;
use crate::collective::Collective;
use crate::report::paths_compared::ci95_half_width;

/// The local link's parameters in the two-level model.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LocalLink {
    /// Where they come from: a fitted path's name, or `default`.
    pub source: String,
    pub alpha_us: f64,
    pub beta_us_per_byte: f64,
}

/// The local link assumed when no `--local-path` is given: a shared-memory class link, 2 us per step and
/// 20 GB/s.
pub const DEFAULT_LOCAL: (f64, f64) = (2.0, 1.0 / 20e3);

/// One predicted point.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub path: String,
    pub collective: Collective,
    /// The algorithm between nodes (and everywhere in the flat model).
    pub algo: String,
    /// Whether this is the two-level form.
    pub hierarchical: bool,
    pub size: u64,
    pub nranks: usize,
    pub time_us: f64,
    /// Half-width of the 95% interval from the fit's parameter uncertainty.
    pub ci95_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// The largest of the three terms: `latency`, `bandwidth` or `reduction`.
    pub bound: &'static str,
    /// The measured time at this point, when measurements at the target scale were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_us: Option<f64>,
    /// (predicted - measured) / measured, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_pct: Option<f64>,
    /// Parameters this prediction rests on that the data could not identify (held at 0): the time is then
    /// not a prediction but what is left without them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unidentified: Vec<String>,
}

/// The parameters of `algo` (and gamma, for a reducing `coll`) on `fit` that the data did not identify: held
/// at 0 because they came out negative beyond their noise. One a little below 0 within its noise is not
/// among them (0 is its estimate), nor is gamma held because no non-reducing collective separates it from
/// beta (beta then carries the reduction cost).
pub fn unidentified(fit: &PathFit, coll: Collective, algo: Algo) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(a) = fit.algos.iter().find(|a| a.algo == algo) {
        if !a.alpha_us.identified() {
            v.push(format!("alpha of {}", algo.name()));
        }
        if !a.beta_us_per_byte.identified() {
            v.push(format!("beta of {}", algo.name()));
        }
    }
    if coll.reduces() && fit.gamma_us_per_byte.held == Some(super::fit::Held::Negative) {
        v.push("gamma".into());
    }
    v
}

/// Where the ring and the latency algorithm of one collective cost the same at the target scale.
#[derive(Clone, Debug, Serialize)]
pub struct Crossover {
    pub path: String,
    pub collective: Collective,
    pub latency_algo: String,
    /// Bytes (size column) above which the ring is faster; `None` when one is faster at every size.
    pub size: Option<f64>,
    pub note: String,
}

/// One path's predicted time against the reference path's at the same point.
#[derive(Clone, Debug, Serialize)]
pub struct PathRatio {
    pub path: String,
    pub reference: String,
    pub collective: Collective,
    pub algo: String,
    pub hierarchical: bool,
    pub size: u64,
    /// time(path) / time(reference).
    pub ratio: f64,
}

/// What the target scale looks like.
#[derive(Clone, Debug)]
pub struct Target {
    pub nranks: usize,
    /// Ranks per node for the two-level form (None or 1: flat only).
    pub ranks_per_node: Option<usize>,
    pub local: LocalLink,
    /// The local link's own fit, when it was measured, for its share of the uncertainty.
    pub local_fit: Option<PathFit>,
}

/// 95% half-width for a standard error with `dof` degrees of freedom (Student t).
fn half_width(sd: f64, dof: usize) -> f64 {
    if !sd.is_finite() || dof == 0 {
        return f64::NAN;
    }
    // ci95_half_width divides by sqrt(samples) and uses samples-1 degrees of freedom.
    let n = dof + 1;
    ci95_half_width(sd * (n as f64).sqrt(), n as u32)
}

fn bound(terms: [f64; 3]) -> &'static str {
    let names = ["latency", "bandwidth", "reduction"];
    let i = (0..3).max_by(|&a, &b| terms[a].total_cmp(&terms[b])).unwrap_or(0);
    names[i]
}

/// The ring and the latency algorithm of `coll` that `fit` has parameters for (one entry when they are the
/// same algorithm).
pub fn algos_of(fit: &PathFit, coll: Collective) -> Vec<Algo> {
    let mut v = vec![Algo::available(coll)[0], Algo::latency(coll)];
    v.dedup();
    v.retain(|a| fit.algo(*a).is_some());
    v
}

/// The algorithms predicted for `coll`: [`algos_of`], then every other algorithm of `coll` measured for it
/// in the fit (recursive-doubling all_gather, which runs on 2, 4, 8, ... ranks where Bruck runs elsewhere,
/// is fitted under its own name and would otherwise never be checked).
pub fn predicted_algos(fit: &PathFit, coll: Collective) -> Vec<Algo> {
    let mut v = algos_of(fit, coll);
    for &a in Algo::available(coll) {
        let measured = fit.residuals.iter().any(|r| r.collective == coll && r.algo == a.name());
        if measured && !v.contains(&a) && fit.algo(a).is_some() {
            v.push(a);
        }
    }
    v
}

/// Flat prediction of `coll` by `algo` on `p` ranks at `n` bytes: (time, variance, terms).
pub fn flat(fit: &PathFit, coll: Collective, algo: Algo, p: usize, n: f64) -> Option<(f64, f64, [f64; 3])> {
    let (v, _) = fit.design(coll, algo, p, n, 1.0)?;
    let (t, var) = fit.eval(&v);
    Some((t, var, fit.terms(&v)))
}

/// Two-level prediction (see the module docs): (time, variance, terms); `None` for collectives without a
/// two-level form or a target that is not whole nodes.
pub fn two_level(fit: &PathFit, t: &Target, coll: Collective, algo: Algo, n: f64) -> Option<(f64, f64, [f64; 3])> {
    let g = t.ranks_per_node.filter(|&g| g > 1)?;
    if t.nranks % g != 0 {
        return None;
    }
    let m = t.nranks / g;
    let gf = g as f64;
    // Between nodes: the collective over M ranks, each of the node's G ranks reducing 1/G.
    let (mut v, _) = fit.design(coll, algo, m, n, 1.0 / gf)?;
    // Inside the node: ring steps over the local link; reductions run on the same CPUs (the path's gamma).
    let intra: &[Collective] = match coll {
        Collective::AllReduce => &[Collective::ReduceScatter, Collective::AllGather],
        Collective::AllGather => &[Collective::AllGather],
        Collective::ReduceScatter => &[Collective::ReduceScatter],
        _ => return None,
    };
    let (mut local_time, mut local_var, mut local_terms) = (0.0, 0.0, [0.0; 2]);
    for &c in intra {
        let k = coeffs(c, Algo::Ring, g, n)?;
        let last = v.len() - 1;
        v[last] += k.c;
        match &t.local_fit {
            Some(lf) => {
                let (lv, _) = lf.design(c, Algo::Ring, g, n, 0.0)?;
                let (lt, lvar) = lf.eval(&lv);
                let lterms = lf.terms(&lv);
                local_time += lt;
                local_var += lvar;
                local_terms[0] += lterms[0];
                local_terms[1] += lterms[1];
            }
            None => {
                local_terms[0] += k.a * t.local.alpha_us;
                local_terms[1] += k.b * t.local.beta_us_per_byte;
                local_time += k.a * t.local.alpha_us + k.b * t.local.beta_us_per_byte;
            }
        }
    }
    // The path's share carries its parameters' correlations; the local link's fit is independent of it.
    let (time, var) = fit.eval(&v);
    let mut terms = fit.terms(&v);
    terms[0] += local_terms[0];
    terms[1] += local_terms[1];
    Some((time + local_time, var + local_var, terms))
}

/// Every prediction of `fit` at the target, over `sizes` per collective (the sizes the path measured).
pub fn predict(fit: &PathFit, t: &Target) -> Vec<Prediction> {
    let mut out = Vec::new();
    let mut colls: Vec<Collective> = fit.residuals.iter().map(|r| r.collective).collect();
    colls.sort();
    colls.dedup();
    for coll in colls {
        let sizes: BTreeSet<u64> = fit
            .residuals
            .iter()
            .filter(|r| r.collective == coll)
            .map(|r| r.size)
            .collect();
        for algo in predicted_algos(fit, coll) {
            for hier in [false, true] {
                for &size in &sizes {
                    let n = size as f64;
                    let got = if hier {
                        two_level(fit, t, coll, algo, n)
                    } else {
                        flat(fit, coll, algo, t.nranks, n)
                    };
                    let Some((time, var, terms)) = got else { continue };
                    let algbw = if time > 0.0 { n / 1e3 / time } else { 0.0 };
                    out.push(Prediction {
                        path: fit.path.clone(),
                        collective: coll,
                        algo: algo.name().to_string(),
                        hierarchical: hier,
                        size,
                        nranks: t.nranks,
                        time_us: time,
                        ci95_us: half_width(var.max(0.0).sqrt(), fit.dof),
                        algbw,
                        busbw: algbw * coll.bus_factor(t.nranks),
                        bound: bound(terms),
                        measured_us: None,
                        error_pct: None,
                        unidentified: unidentified(fit, coll, algo),
                    });
                }
            }
        }
    }
    out
}

/// The crossover of every collective of `fit` that has both a ring and a different latency algorithm.
pub fn crossovers(fit: &PathFit, p: usize) -> Vec<Crossover> {
    let mut colls: Vec<Collective> = fit.residuals.iter().map(|r| r.collective).collect();
    colls.sort();
    colls.dedup();
    let mut out = Vec::new();
    for coll in colls {
        let algos = algos_of(fit, coll);
        let [ring, lat] = algos[..] else { continue };
        // Each algorithm's time is intercept + slope * n; they meet where the intercepts' gap is made up.
        let line = |a: Algo| {
            let t0 = flat(fit, coll, a, p, 0.0).map_or(0.0, |x| x.0);
            let t1 = flat(fit, coll, a, p, 1.0).map_or(0.0, |x| x.0);
            (t0, t1 - t0)
        };
        let mut unknown = unidentified(fit, coll, ring);
        unknown.extend(unidentified(fit, coll, lat));
        if !unknown.is_empty() {
            out.push(Crossover {
                path: fit.path.clone(),
                collective: coll,
                latency_algo: lat.name().to_string(),
                size: None,
                note: format!(
                    "cannot tell which is faster: {} not identified by the data (held at 0)",
                    unknown.join(", ")
                ),
            });
            continue;
        }
        let ((ir, sr), (il, sl)) = (line(ring), line(lat));
        let meet = (ir - il) / (sl - sr);
        let (size, note) = if meet.is_finite() && meet > 0.0 && il < ir {
            (Some(meet), format!("{lat} below, {ring} above"))
        } else if meet.is_finite() && meet > 0.0 {
            (Some(meet), format!("{ring} below, {lat} above"))
        } else if ir <= il && sr <= sl {
            (None, format!("{ring} is faster at every size"))
        } else {
            (None, format!("{lat} is faster at every size"))
        };
        out.push(Crossover {
            path: fit.path.clone(),
            collective: coll,
            latency_algo: lat.name().to_string(),
            size,
            note,
        });
    }
    out
}

/// Every path's predictions against `reference`'s at the same points.
pub fn ratios(preds: &[Prediction], reference: &str) -> Vec<PathRatio> {
    let mut out = Vec::new();
    for p in preds.iter().filter(|p| p.path != reference) {
        let r = preds.iter().find(|r| {
            r.path == reference
                && (r.collective, &r.algo, r.hierarchical, r.size) == (p.collective, &p.algo, p.hierarchical, p.size)
        });
        if let Some(r) = r {
            out.push(PathRatio {
                path: p.path.clone(),
                reference: reference.to_string(),
                collective: p.collective,
                algo: p.algo.clone(),
                hierarchical: p.hierarchical,
                size: p.size,
                ratio: p.time_us / r.time_us,
            });
        }
    }
    out
}

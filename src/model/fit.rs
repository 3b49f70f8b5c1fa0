//! Fits one path's parameters to its measured points: per algorithm a latency term alpha and a per-byte
//! term beta, and one per-byte reduction cost gamma for the path (every algorithm runs the same reduction
//! kernel on the same CPUs), all in one weighted least-squares problem across the path's collectives.
//!
//! Each point is weighted by 1/time^k ([`Weighting`]): k = 1 minimises relative error (an 8-byte point
//! counts as much as a 16 MiB one), k = 1/2 (the default) takes a point's variance as proportional to its
//! time, as for a sum of many independent per-packet delays: small messages still pin alpha, and a
//! mid-size regime the linear model does not describe (a shaper's burst allowance, socket buffers) cannot
//! drag beta away from the sustained rate the large messages show.
//!
//! Identifiability: alpha and beta of an algorithm separate through the size sweep (intercept and slope).
//! gamma separates from beta only where a collective that does not reduce (all_gather) pins beta beside
//! one that does; where nothing pins it, gamma is held at 0 and the reduction cost stays inside beta, which
//! predicts the reducing collectives just as well but says so in the notes.

use std::collections::BTreeSet;

use serde::Serialize;

use super::coeff::{algo_named, coeffs, Coeffs};
use super::input::Sample;
use super::lsq::{self, Failure};
use crate::algorithm::Algo;
use crate::collective::Collective;
use crate::error::{Error, Result};

/// How the fit weighs its points: each squared residual is divided by time^(2k).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Weighting {
    /// k = 1: relative error.
    Relative,
    /// k = 1/2: variance proportional to time.
    #[default]
    Sqrt,
    /// k = 0: plain least squares on time (large messages dominate).
    Absolute,
}

impl Weighting {
    /// k.
    pub fn exponent(self) -> f64 {
        match self {
            Weighting::Relative => 1.0,
            Weighting::Sqrt => 0.5,
            Weighting::Absolute => 0.0,
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Weighting::Relative => "relative",
            Weighting::Sqrt => "sqrt",
            Weighting::Absolute => "absolute",
        }
    }

    /// What the fit minimises, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Weighting::Relative => "least squares on relative error (each point weighted by 1/time)",
            Weighting::Sqrt => "least squares with variance proportional to time (each point weighted by 1/sqrt(time))",
            Weighting::Absolute => "plain least squares on time",
        }
    }
}

impl std::str::FromStr for Weighting {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [Weighting::Relative, Weighting::Sqrt, Weighting::Absolute]
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| format!("unknown weighting '{s}' (expected relative, sqrt or absolute)"))
    }
}

/// Why a parameter was held at 0 instead of fitted.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// Nothing measured depends on it (gamma without a reducing collective).
    Unmeasured,
    /// The data cannot tell it from another parameter (gamma without a non-reducing collective beside).
    Inseparable,
    /// It came out negative by less than twice its standard error: the data say it is too small to see,
    /// and 0 is its estimate under the constraint that costs are not negative (the interval keeps its
    /// standard error). The predictions resting on it are predictions.
    WithinNoise,
    /// It came out negative beyond twice its standard error: the model does not describe the data there,
    /// and what rests on it is not a prediction.
    Negative,
}

/// One fitted parameter.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Param {
    pub value: f64,
    /// Standard error from the fit (NaN with no degrees of freedom left); for a parameter held at 0 within
    /// its noise, the standard error it had when it was fitted.
    pub sd: f64,
    /// Why it was held at 0 instead of fitted, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
    /// The same, as a kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

impl Param {
    /// Whether the data identified it: fitted, or held at 0 where 0 is within its noise.
    pub fn identified(&self) -> bool {
        matches!(self.held, None | Some(Held::WithinNoise))
    }
}

/// How many standard errors below 0 a fitted cost may come out and still be taken as 0 (about the 95% level).
pub const NEGATIVE_SDS: f64 = 2.0;

/// The rank counts an algorithm must be measured at for its per-call cost to be fitted beside its per-step
/// alpha. Two would identify both (their step counts differ) but fix them by those two points alone, with
/// nothing left to show the per-step term grows as the form says; from three on, the fit is checked.
pub const CALL_RANK_COUNTS: usize = 3;

/// Parameters per algorithm in the fit's vector: alpha, beta, then the per-call cost.
const PER_ALGO: usize = 3;

/// One algorithm's parameters on a path, with what they were fitted from.
#[derive(Clone, Debug, Serialize)]
pub struct AlgoFit {
    #[serde(serialize_with = "algo_name")]
    pub algo: Algo,
    /// Microseconds per message step.
    pub alpha_us: Param,
    /// Microseconds per byte on the busiest link.
    pub beta_us_per_byte: Param,
    /// Microseconds per call, whatever its steps: fitted where the algorithm was measured at
    /// [`CALL_RANK_COUNTS`] rank counts or more (`None` otherwise, and the step's alpha carries it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_us: Option<Param>,
    pub points: usize,
    pub collectives: Vec<Collective>,
    pub rank_counts: Vec<usize>,
    pub sizes: usize,
}

fn algo_name<S: serde::Serializer>(a: &Algo, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(a.name())
}

/// One measured point against the fit.
#[derive(Clone, Debug, Serialize)]
pub struct Residual {
    pub collective: Collective,
    pub algo: String,
    pub nranks: usize,
    pub size: u64,
    pub measured_us: f64,
    pub fitted_us: f64,
    /// (fitted - measured) / measured.
    pub rel: f64,
}

/// Everything fitted for one path.
#[derive(Clone, Debug, Serialize)]
pub struct PathFit {
    pub path: String,
    /// The files (or runs) its points came from.
    pub sources: Vec<String>,
    pub algos: Vec<AlgoFit>,
    /// Microseconds per byte reduced.
    pub gamma_us_per_byte: Param,
    /// Root mean square of the relative residuals (the quantity the fit minimises, per point).
    pub rel_rms: f64,
    /// The largest |relative residual|.
    pub rel_max: f64,
    /// Coefficient of determination in the weighted (relative) space.
    pub r2: f64,
    /// Points minus fitted parameters.
    pub dof: usize,
    pub residuals: Vec<Residual>,
    pub notes: Vec<String>,
    /// Covariance of the parameter vector (alpha, beta, per-call cost per algorithm in `algos` order, then
    /// gamma).
    #[serde(skip)]
    pub cov: Vec<Vec<f64>>,
    #[serde(skip)]
    theta: Vec<f64>,
}

impl PathFit {
    /// The parameter vector's coefficients for `coll` by `algo` on `p` ranks at `n` bytes, with the
    /// reduction share scaled by `gamma_share`; `None` when the algorithm was not fitted on this path.
    pub fn design(
        &self,
        coll: Collective,
        algo: Algo,
        p: usize,
        n: f64,
        gamma_share: f64,
    ) -> Option<(Vec<f64>, Coeffs)> {
        let i = self.algos.iter().position(|a| a.algo == algo)?;
        let k = coeffs(coll, algo, p, n)?;
        let mut v = vec![0.0; self.theta.len()];
        v[PER_ALGO * i] = k.a;
        v[PER_ALGO * i + 1] = k.b;
        v[PER_ALGO * i + 2] = k.calls();
        v[self.theta.len() - 1] = k.c * gamma_share;
        Some((v, k))
    }

    /// The model's value `v . theta` and its variance.
    pub fn eval(&self, v: &[f64]) -> (f64, f64) {
        let t = v.iter().zip(&self.theta).map(|(a, b)| a * b).sum();
        (t, lsq::quad_form(v, &self.cov))
    }

    /// The three terms (latency: per-step and per-call; beta; gamma parts) of `v . theta`.
    pub fn terms(&self, v: &[f64]) -> [f64; 3] {
        let g = self.theta.len() - 1;
        let mut out = [0.0, 0.0, v[g] * self.theta[g]];
        for i in 0..g {
            out[usize::from(i % PER_ALGO == 1)] += v[i] * self.theta[i];
        }
        out
    }

    /// The fitted parameters of `algo`, if it was fitted.
    pub fn algo(&self, algo: Algo) -> Option<&AlgoFit> {
        self.algos.iter().find(|a| a.algo == algo)
    }
}

/// Fits every path of `samples`, in order of first appearance. Points that cannot be modelled (a
/// library's algorithm, one rank, no time) are left out with a note; a path with nothing left is an error.
pub fn fit_all(samples: &[Sample], weighting: Weighting) -> Result<Vec<PathFit>> {
    let mut paths: Vec<&str> = Vec::new();
    for s in samples {
        if !paths.contains(&s.path.as_str()) {
            paths.push(&s.path);
        }
    }
    paths
        .into_iter()
        .map(|p| {
            let mine: Vec<&Sample> = samples.iter().filter(|s| s.path == p).collect();
            fit_path(p, &mine, weighting)
        })
        .collect()
}

fn sources(samples: &[&Sample]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in samples {
        if !v.contains(&s.source) {
            v.push(s.source.clone());
        }
    }
    v
}

/// The weighted least-squares solution of one set of points, with the design it was solved on.
struct Solved {
    algos: Vec<Algo>,
    /// Per algorithm, whether its per-call cost was fitted (held or not) or left out.
    call_fitted: Vec<bool>,
    x: Vec<Vec<f64>>,
    y: Vec<f64>,
    w: Vec<f64>,
    sol: lsq::Solution,
    /// Why each parameter was held (at 0) instead of fitted.
    why: Vec<Option<(Held, String)>>,
    /// The standard error each parameter held within its noise had when it was fitted.
    held_sd: Vec<f64>,
}

/// Why a set of points could not be solved.
enum Refit {
    /// This algorithm's alpha and beta cannot be told apart: drop its points and solve again.
    Drop(Algo, String),
    /// Nothing to be done about it by dropping points.
    Fatal(String),
}

/// Fits alpha and beta per algorithm and one gamma to `pts`, holding at 0 any parameter that comes out
/// negative or that the data cannot separate (gamma without an all_gather beside the reductions).
fn solve(pts: &[(&Sample, Algo)], weighting: Weighting) -> std::result::Result<Solved, Refit> {
    let algos: Vec<Algo> = Algo::NATIVE
        .into_iter()
        .filter(|a| pts.iter().any(|(_, b)| b == a))
        .collect();
    let k = PER_ALGO * algos.len() + 1;
    let g = k - 1;
    let mut x = Vec::with_capacity(pts.len());
    for (s, a) in pts {
        let i = algos.iter().position(|b| b == a).unwrap_or(0);
        let c = coeffs(s.collective, *a, s.nranks, s.size as f64).unwrap_or(Coeffs { a: 0.0, b: 0.0, c: 0.0 });
        let mut row = vec![0.0; k];
        row[PER_ALGO * i] = c.a;
        row[PER_ALGO * i + 1] = c.b;
        row[PER_ALGO * i + 2] = c.calls();
        row[g] = c.c;
        x.push(row);
    }
    let y: Vec<f64> = pts.iter().map(|(s, _)| s.time_us).collect();
    let w: Vec<f64> = y.iter().map(|t| 1.0 / t.powf(weighting.exponent())).collect();
    let mut free = vec![true; k];
    let mut why: Vec<Option<(Held, String)>> = vec![None; k];
    let mut held_sd = vec![f64::NAN; k];
    // The per-call cost only where enough rank counts check it (see CALL_RANK_COUNTS); elsewhere it is not
    // fitted at all and the per-step alpha carries it, as before it existed.
    let mut call_fitted: Vec<bool> = algos
        .iter()
        .map(|a| {
            let ranks: BTreeSet<usize> = pts.iter().filter(|(_, b)| b == a).map(|(s, _)| s.nranks).collect();
            ranks.len() >= CALL_RANK_COUNTS
        })
        .collect();
    for (i, &fitted) in call_fitted.iter().enumerate() {
        free[PER_ALGO * i + 2] = fitted;
    }
    if !pts.iter().any(|(s, _)| s.collective.reduces()) {
        free[g] = false;
        why[g] = Some((Held::Unmeasured, "no reducing collective measured".into()));
    }
    let describe = |i: usize| {
        let a = algos[i];
        let mine: Vec<&Sample> = pts.iter().filter(|(_, b)| *b == a).map(|(s, _)| *s).collect();
        let sizes: BTreeSet<u64> = mine.iter().map(|s| s.size).collect();
        let ranks: BTreeSet<usize> = mine.iter().map(|s| s.nranks).collect();
        format!(
            "algorithm {a}: alpha and beta cannot be told apart: its {} point(s) have {} size(s) at rank \
             count(s) {}; measure a size sweep (-b/-e with two or more sizes) or a second rank count",
            mine.len(),
            sizes.len(),
            ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
        )
    };
    let sol = loop {
        match lsq::solve(&x, &y, &w, &free) {
            Err(Failure::Dependent(j)) if j == g => {
                free[g] = false;
                why[g] = Some((
                    Held::Inseparable,
                    "not separable from beta: no collective without a reduction (all_gather) was measured \
                     with the same algorithms; the reduction cost is inside beta"
                        .into(),
                ));
            }
            // A per-call cost the steps cannot be told from: not fitted, as with too few rank counts.
            Err(Failure::Dependent(j)) if j % PER_ALGO == 2 => {
                free[j] = false;
                call_fitted[j / PER_ALGO] = false;
            }
            Err(Failure::Dependent(j)) => return Err(Refit::Drop(algos[j / PER_ALGO], describe(j / PER_ALGO))),
            Err(Failure::TooFewRows { rows, params }) => {
                return Err(Refit::Fatal(format!(
                    "{rows} point(s) for {params} parameters; measure a size sweep (-b/-e)"
                )))
            }
            Ok(sol) => {
                // Costs cannot be negative: hold the most negative at 0 and fit the rest again.
                let worst = (0..k)
                    .filter(|&j| free[j] && sol.theta[j] < 0.0)
                    .min_by(|&a, &b| sol.theta[a].total_cmp(&sol.theta[b]));
                match worst {
                    Some(j) => {
                        free[j] = false;
                        // A cost a little below 0 within its noise is a cost too small to see: 0 is its
                        // estimate. Only one below 0 beyond its noise says the model misses something.
                        let (v, sd) = (sol.theta[j], sol.cov[j][j].sqrt());
                        why[j] = Some(if v + NEGATIVE_SDS * sd >= 0.0 {
                            held_sd[j] = sd;
                            (
                                Held::WithinNoise,
                                format!(
                                    "came out {v:.3e} ± {sd:.1e}, below 0 by less than {NEGATIVE_SDS} standard \
                                     errors: too small to see, held at 0 (its standard error kept)"
                                ),
                            )
                        } else {
                            (
                                Held::Negative,
                                format!("came out negative ({v:.3e} ± {sd:.1e}, beyond its noise); held at 0"),
                            )
                        });
                        if (0..k).all(|j| !free[j]) {
                            return Err(Refit::Fatal(
                                "every parameter came out negative; the data fit no cost model".into(),
                            ));
                        }
                    }
                    None => break sol,
                }
            }
        }
    };
    let mut sol = sol;
    // A parameter held within its noise keeps its uncertainty: predictions resting on it carry it.
    for (j, sd) in held_sd.iter().enumerate() {
        if sd.is_finite() {
            sol.cov[j][j] = sd * sd;
        }
    }
    Ok(Solved {
        algos,
        call_fitted,
        x,
        y,
        w,
        sol,
        why,
        held_sd,
    })
}

/// Fits one path.
pub fn fit_path(path: &str, all: &[&Sample], weighting: Weighting) -> Result<PathFit> {
    let srcs = sources(all);
    let err = |msg: String| Error::usage(srcs.join(", "), format!("path {path}: {msg}"));
    let mut notes = Vec::new();
    let mut skipped = BTreeSet::new();
    let mut pts: Vec<(&Sample, Algo)> = Vec::new();
    for s in all {
        match algo_named(&s.algo) {
            _ if s.nranks < 2 => {
                skipped.insert(format!(
                    "{} point(s) on 1 rank move nothing between ranks",
                    s.collective
                ));
            }
            // Sharded collectives round tiny sizes down to 0 bytes: such a call sends nothing and returns at
            // once, and its sub-microsecond time would pull alpha to 0 in a relative fit.
            _ if s.size == 0 => {
                skipped.insert(format!("{} point(s) of 0 bytes do not communicate", s.collective));
            }
            _ if !(s.time_us.is_finite() && s.time_us > 0.0) => {
                skipped.insert(format!("{} point(s) without a time", s.collective));
            }
            Some(a) if coeffs(s.collective, a, s.nranks, s.size as f64).is_some() => pts.push((s, a)),
            _ => {
                skipped.insert(format!(
                    "{} by `{}`: no cost model for this algorithm (a library's own choice?)",
                    s.collective, s.algo
                ));
            }
        }
    }
    notes.extend(skipped.into_iter().map(|s| format!("left out: {s}")));
    if pts.is_empty() {
        return Err(err(
            "no point can be fitted (needs collbench's own algorithms on 2 or more ranks with a time)".into(),
        ));
    }
    let hosts_differ = pts.iter().any(|(s, _)| s.hosts != s.nranks);
    if hosts_differ {
        notes.push(
            "some runs had several ranks per host: the flat model takes every rank as its own host, so \
             their points mix the local link in"
                .into(),
        );
    }
    // An algorithm whose alpha and beta the data cannot separate (one size of it, as when --algo auto ran it
    // at a single point) is left out and the rest fitted again, so it does not cost the others their fit.
    let mut unfit: Vec<String> = Vec::new();
    let Solved {
        algos,
        call_fitted,
        x,
        y,
        w,
        sol,
        why,
        held_sd,
    } = loop {
        if pts.is_empty() {
            return Err(err(unfit.join("; ")));
        }
        match solve(&pts, weighting) {
            Ok(solved) => break solved,
            Err(Refit::Drop(a, reason)) => {
                unfit.push(reason);
                pts.retain(|(_, b)| *b != a);
            }
            Err(Refit::Fatal(msg)) => return Err(err(msg)),
        }
    };
    notes.extend(
        unfit
            .iter()
            .map(|u| format!("left out (not fitted, not predicted): {u}")),
    );
    let k = PER_ALGO * algos.len() + 1;
    let g = k - 1;
    let param = |j: usize| Param {
        value: sol.theta[j],
        sd: if held_sd[j].is_finite() {
            held_sd[j]
        } else {
            sol.cov[j][j].sqrt()
        },
        fixed: why[j].as_ref().map(|w| w.1.clone()),
        held: why[j].as_ref().map(|w| w.0),
    };
    let algo_fits = algos
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let mine: Vec<&Sample> = pts.iter().filter(|(_, b)| *b == a).map(|(s, _)| *s).collect();
            let mut collectives: Vec<Collective> = mine.iter().map(|s| s.collective).collect();
            collectives.sort();
            collectives.dedup();
            let ranks: BTreeSet<usize> = mine.iter().map(|s| s.nranks).collect();
            let sizes: BTreeSet<u64> = mine.iter().map(|s| s.size).collect();
            AlgoFit {
                algo: a,
                alpha_us: param(PER_ALGO * i),
                beta_us_per_byte: param(PER_ALGO * i + 1),
                call_us: call_fitted[i].then(|| param(PER_ALGO * i + 2)),
                points: mine.len(),
                collectives,
                rank_counts: ranks.into_iter().collect(),
                sizes: sizes.len(),
            }
        })
        .collect();
    for (j, reason) in why.iter().enumerate() {
        if let Some((_, r)) = reason {
            let name = if j == g {
                "gamma".to_string()
            } else {
                let name = ["alpha", "beta", "per-call cost"][j % PER_ALGO];
                format!("{name} of {}", algos[j / PER_ALGO])
            };
            notes.push(format!("{name}: {r}"));
        }
    }
    let residuals: Vec<Residual> = pts
        .iter()
        .zip(&x)
        .map(|((s, _), row)| {
            let fitted: f64 = row.iter().zip(&sol.theta).map(|(a, b)| a * b).sum();
            Residual {
                collective: s.collective,
                algo: s.algo.clone(),
                nranks: s.nranks,
                size: s.size,
                measured_us: s.time_us,
                fitted_us: fitted,
                rel: (fitted - s.time_us) / s.time_us,
            }
        })
        .collect();
    let m = residuals.len() as f64;
    let rel_rms = (residuals.iter().map(|r| r.rel * r.rel).sum::<f64>() / m).sqrt();
    let rel_max = residuals.iter().map(|r| r.rel.abs()).fold(0.0, f64::max);
    // Weighted total sum of squares about the weighted mean (w = 1/y, so w*y = 1).
    let sw2: f64 = w.iter().map(|wi| wi * wi).sum();
    let ybar = w.iter().zip(&y).map(|(wi, yi)| wi * wi * yi).sum::<f64>() / sw2;
    let tss: f64 = w.iter().zip(&y).map(|(wi, yi)| (wi * (yi - ybar)).powi(2)).sum();
    let r2 = if tss > 0.0 { 1.0 - sol.rss / tss } else { f64::NAN };
    Ok(PathFit {
        path: path.to_string(),
        sources: srcs.clone(),
        algos: algo_fits,
        gamma_us_per_byte: param(g),
        rel_rms,
        rel_max,
        r2,
        dof: sol.dof,
        residuals,
        notes,
        cov: sol.cov,
        theta: sol.theta,
    })
}

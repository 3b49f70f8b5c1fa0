//! Fits and predictions on synthetic data with known parameters.

use super::*;
use crate::algorithm::Algo;
use crate::collective::Collective;

/// Known parameters: per algorithm (alpha us, beta us/B), and gamma us/B.
const TRUE: [(Algo, f64, f64); 4] = [
    (Algo::Ring, 30.0, 8e-3),
    (Algo::RecDoubling, 20.0, 9e-3),
    (Algo::Bruck, 25.0, 8.5e-3),
    (Algo::Tree, 22.0, 8.2e-3),
];
const GAMMA: f64 = 2e-3;

fn truth(coll: Collective, algo: Algo, p: usize, n: f64) -> f64 {
    let (_, a, b) = TRUE.iter().find(|t| t.0 == algo).copied().unwrap();
    coeff::coeffs(coll, algo, p, n).unwrap().time(a, b, GAMMA)
}

/// A deterministic stream of numbers in [-1, 1) (no randomness in tests).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// Samples of `colls` by each algorithm in `algos` at rank counts `ps`, sizes 8 B..16 MiB, with relative
/// noise of up to `noise`, on `path` scaled by `slow` (a slower path: beta times `slow`).
fn synth(path: &str, colls: &[(Collective, Algo)], ps: &[usize], noise: f64, slow: f64) -> Vec<Sample> {
    let mut rng = Lcg(7);
    let mut out = Vec::new();
    for &p in ps {
        for &(coll, algo) in colls {
            for e in 3..=24 {
                let n = (1u64 << e) as f64;
                let k = coeff::coeffs(coll, algo, p, n).unwrap();
                let (_, a, b) = TRUE.iter().find(|t| t.0 == algo).copied().unwrap();
                let t = k.time(a, b * slow, GAMMA) * (1.0 + noise * rng.next());
                out.push(Sample {
                    path: path.into(),
                    collective: coll,
                    algo: algo.name().into(),
                    size: 1 << e,
                    nranks: p,
                    hosts: p,
                    time_us: t,
                    source: format!("{path}.json"),
                });
            }
        }
    }
    out
}

const ALL4: [(Collective, Algo); 4] = [
    (Collective::AllReduce, Algo::Ring),
    (Collective::AllReduce, Algo::RecDoubling),
    (Collective::AllGather, Algo::Ring),
    (Collective::AllGather, Algo::Bruck),
];

fn opts(n: usize) -> ModelOptions {
    ModelOptions {
        target_ranks: n,
        ranks_per_node: None,
        local_path: None,
        reference: None,
        weighting: Weighting::Relative,
    }
}

#[test]
fn exact_data_gives_back_the_parameters_exactly() {
    let s = synth("tcp@eth0", &ALL4, &[2, 3], 0.0, 1.0);
    for w in [Weighting::Sqrt, Weighting::Absolute] {
        let f = &fit::fit_all(&s, w).unwrap()[0];
        assert!(f.rel_max < 1e-6, "{w:?}: {}", f.rel_max);
    }
    let f = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    for a in &f.algos {
        let (_, alpha, beta) = TRUE.iter().find(|t| t.0 == a.algo).copied().unwrap();
        assert!((a.alpha_us.value / alpha - 1.0).abs() < 1e-6, "{a:?}");
        assert!((a.beta_us_per_byte.value / beta - 1.0).abs() < 1e-6, "{a:?}");
    }
    assert!((f.gamma_us_per_byte.value / GAMMA - 1.0).abs() < 1e-6);
    assert!(f.rel_max < 1e-9 && (f.r2 - 1.0).abs() < 1e-9, "{} {}", f.rel_max, f.r2);
    assert!(f.notes.is_empty(), "{:?}", f.notes);
}

#[test]
fn noisy_data_gives_back_the_parameters_within_their_errors() {
    let s = synth("tcp@eth0", &ALL4, &[2, 3], 0.03, 1.0);
    let f = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    for a in &f.algos {
        let (_, alpha, beta) = TRUE.iter().find(|t| t.0 == a.algo).copied().unwrap();
        for (got, want, tol) in [(&a.alpha_us, alpha, 0.1), (&a.beta_us_per_byte, beta, 0.03)] {
            assert!(got.sd > 0.0 && got.sd.is_finite(), "{a:?}");
            assert!(
                (got.value - want).abs() < 4.0 * got.sd,
                "{} {a:?}: {} vs {want}",
                a.algo,
                got.value
            );
            assert!(
                (got.value / want - 1.0).abs() < tol,
                "{} {a:?}: {} vs {want}",
                a.algo,
                got.value
            );
        }
    }
    let g = &f.gamma_us_per_byte;
    assert!(
        (g.value - GAMMA).abs() < 4.0 * g.sd && (g.value / GAMMA - 1.0).abs() < 0.3,
        "{g:?}"
    );
    // The noise is up to 3%, uniform: its RMS is 3%/sqrt(3).
    assert!(f.rel_rms > 0.01 && f.rel_rms < 0.025, "{}", f.rel_rms);
    assert!(f.r2 > 0.99, "{}", f.r2);
}

#[test]
fn predictions_at_a_larger_scale_match_the_true_model_and_carry_intervals() {
    let r = predict(&synth("tcp@eth0", &ALL4, &[2, 3], 0.02, 1.0), &opts(16)).unwrap();
    let mut seen = 0;
    for p in r.predictions.iter().filter(|p| p.size >= 1 << 20) {
        let algo = coeff::algo_named(&p.algo).unwrap();
        let want = truth(p.collective, algo, 16, p.size as f64);
        assert!((p.time_us / want - 1.0).abs() < 0.05, "{p:?} vs {want}");
        assert!(p.ci95_us > 0.0 && p.ci95_us < 0.2 * p.time_us, "{p:?}");
        assert_eq!(p.bound, "bandwidth");
        let algbw = p.size as f64 / 1e3 / p.time_us;
        assert!((p.algbw - algbw).abs() < 1e-12 && (p.busbw - algbw * p.collective.bus_factor(16)).abs() < 1e-12);
        seen += 1;
    }
    assert_eq!(seen, 2 * 2 * 5, "2 collectives x 2 algorithms x 1..16 MiB");
    let small = r.predictions.iter().find(|p| p.size == 8).unwrap();
    assert_eq!(small.bound, "latency");
}

/// Recursive-doubling all_gather (what `--algo rd` runs on 2, 4, 8, ... ranks) is fitted under its own name
/// and predicted too, beside the ring and Bruck; an algorithm fitted only for another collective is not.
#[test]
fn every_algorithm_measured_for_a_collective_is_predicted() {
    let colls = [
        (Collective::AllReduce, Algo::Ring),
        (Collective::AllReduce, Algo::RecDoubling),
        (Collective::AllGather, Algo::Ring),
        (Collective::AllGather, Algo::RecDoubling),
    ];
    let r = predict(&synth("tcp@eth0", &colls, &[2, 4], 0.0, 1.0), &opts(8)).unwrap();
    let algos = |c: Collective| {
        let mut v: Vec<&str> = r
            .predictions
            .iter()
            .filter(|p| p.collective == c && !p.hierarchical)
            .map(|p| p.algo.as_str())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    assert_eq!(algos(Collective::AllGather), ["rec_doubling", "ring"]);
    assert_eq!(algos(Collective::AllReduce), ["rec_doubling", "ring"]);
    for p in r
        .predictions
        .iter()
        .filter(|p| p.collective == Collective::AllGather && p.algo == "rec_doubling")
    {
        let want = truth(Collective::AllGather, Algo::RecDoubling, 8, p.size as f64);
        assert!((p.time_us / want - 1.0).abs() < 1e-6, "{p:?} vs {want}");
    }
    // Fitted only from all_reduce: not an all_gather prediction.
    let only_reduce = synth("tcp@eth0", &colls[..3], &[2, 4], 0.0, 1.0);
    let r = predict(&only_reduce, &opts(8)).unwrap();
    assert!(r
        .predictions
        .iter()
        .all(|p| !(p.collective == Collective::AllGather && p.algo == "rec_doubling")));
}

#[test]
fn the_crossover_is_where_ring_and_latency_algorithm_meet() {
    let r = predict(&synth("tcp@eth0", &ALL4, &[2, 3], 0.0, 1.0), &opts(8)).unwrap();
    let f = &r.fits[0];
    assert_eq!(r.crossovers.len(), 2);
    for c in &r.crossovers {
        let n = c.size.unwrap_or_else(|| panic!("{c:?}"));
        let lat = coeff::algo_named(&c.latency_algo).unwrap();
        let t = |a, n| predict::flat(f, c.collective, a, 8, n).unwrap().0;
        assert!((t(Algo::Ring, n) / t(lat, n) - 1.0).abs() < 1e-9, "{c:?}");
        assert!(
            t(lat, n / 2.0) < t(Algo::Ring, n / 2.0) && t(lat, n * 2.0) > t(Algo::Ring, n * 2.0),
            "{c:?}"
        );
        // And where the true model puts it.
        let tt = |a| truth(c.collective, a, 8, n);
        assert!((tt(Algo::Ring) / tt(lat) - 1.0).abs() < 1e-6, "{c:?}");
    }
}

#[test]
fn without_all_gather_gamma_is_held_and_ring_all_reduce_still_predicts() {
    let only = [(Collective::AllReduce, Algo::Ring)];
    let r = predict(&synth("p", &only, &[4], 0.0, 1.0), &opts(64)).unwrap();
    let f = &r.fits[0];
    assert!(f.gamma_us_per_byte.fixed.is_some());
    assert!(
        f.notes.iter().any(|n| n.contains("gamma") && n.contains("all_gather")),
        "{:?}",
        f.notes
    );
    // beta absorbed gamma/2 (ring: 2(p-1)/p beta + (p-1)/p gamma), which holds at every p.
    let beta = f.algos[0].beta_us_per_byte.value;
    assert!((beta / (8e-3 + GAMMA / 2.0) - 1.0).abs() < 1e-9, "{beta}");
    for p in &r.predictions {
        let want = truth(p.collective, Algo::Ring, 64, p.size as f64);
        assert!((p.time_us / want - 1.0).abs() < 1e-9, "{p:?}");
    }
}

#[test]
fn one_rank_count_separates_alpha_and_beta_but_one_size_does_not() {
    let one_p = synth("p", &[(Collective::AllReduce, Algo::Ring)], &[3], 0.0, 1.0);
    let f = &fit::fit_all(&one_p, Weighting::Relative).unwrap()[0];
    assert!((f.algos[0].alpha_us.value / 30.0 - 1.0).abs() < 1e-6);
    let one_size: Vec<Sample> = one_p.into_iter().filter(|s| s.size == 1 << 20).collect();
    let e = predict(&one_size, &opts(8)).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
    let msg = e.to_string();
    assert!(
        msg.starts_with("p.json: path p: algorithm ring: alpha and beta cannot be told apart")
            && msg.contains("1 size(s)")
            && msg.contains("rank count(s) 3;"),
        "{msg}"
    );
}

#[test]
fn an_algorithm_measured_at_one_size_is_left_out_and_the_others_still_fitted() {
    // As --algo auto leaves it: the ring at the one size above the switch point of a short sweep.
    let mut s = synth("p", &ALL4, &[2, 3], 0.0, 1.0);
    let n = 1u64 << 20;
    s.push(Sample {
        path: "p".into(),
        collective: Collective::AllReduce,
        algo: Algo::Tree.name().into(),
        size: n,
        nranks: 3,
        hosts: 3,
        time_us: truth(Collective::AllReduce, Algo::Tree, 3, n as f64),
        source: "p.json".into(),
    });
    let f = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    assert!(f.algo(Algo::Tree).is_none(), "{:?}", f.algos);
    for (a, alpha, beta) in TRUE.iter().filter(|t| t.0 != Algo::Tree) {
        let fit = f.algo(*a).unwrap();
        assert!((fit.alpha_us.value / alpha - 1.0).abs() < 1e-6, "{a}: {fit:?}");
        assert!((fit.beta_us_per_byte.value / beta - 1.0).abs() < 1e-6, "{a}: {fit:?}");
    }
    assert!(
        f.notes.iter().any(|m| m
            .starts_with("left out (not fitted, not predicted): algorithm tree: alpha and beta cannot be told apart")
            && m.contains("1 point(s) have 1 size(s) at rank count(s) 3;")),
        "{:?}",
        f.notes
    );
    let r = predict(&s, &opts(16)).unwrap();
    assert!(!r.predictions.is_empty());
    assert!(
        r.predictions.iter().all(|p| p.algo != Algo::Tree.name()),
        "{:?}",
        r.predictions
    );
}

#[test]
fn points_that_cannot_be_modelled_are_left_out_with_a_note_or_an_error() {
    let mut s = synth("p", &ALL4, &[2, 3], 0.0, 1.0);
    let mut lib = s[0].clone();
    lib.algo = "library".into();
    let mut one = s[0].clone();
    one.nranks = 1;
    let mut nan = s[1].clone();
    nan.time_us = f64::NAN;
    s.extend([lib.clone(), one.clone(), nan]);
    let f = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    assert_eq!(f.residuals.len(), 2 * 4 * 22);
    assert_eq!(f.notes.len(), 3, "{:?}", f.notes);
    let e = predict(&[lib, one], &opts(4)).unwrap_err();
    assert!(e.to_string().contains("no point can be fitted"), "{e}");
}

#[test]
fn two_level_prediction_is_the_sum_of_its_stages() {
    let s = synth("net", &ALL4, &[2, 3], 0.0, 1.0);
    let mut o = opts(32);
    o.ranks_per_node = Some(8);
    let r = predict(&s, &o).unwrap();
    let (la, lb) = predict::DEFAULT_LOCAL;
    let n = (16u64 << 20) as f64;
    let p = r
        .predictions
        .iter()
        .find(|p| p.hierarchical && p.collective == Collective::AllReduce && p.algo == "ring" && p.size == 16 << 20)
        .unwrap();
    let local = |c| coeff::coeffs(c, Algo::Ring, 8, n).unwrap();
    let inter = coeff::coeffs(Collective::AllReduce, Algo::Ring, 4, n).unwrap();
    let want = inter.a * 30.0
        + inter.b * 8e-3
        + inter.c * GAMMA / 8.0
        + local(Collective::ReduceScatter).time(la, lb, GAMMA)
        + local(Collective::AllGather).time(la, lb, GAMMA);
    assert!((p.time_us / want - 1.0).abs() < 1e-6, "{} vs {want}", p.time_us);
    assert!(r.local_link.as_ref().is_some_and(|l| l.source == "default"));
    // Flat only without ranks per node.
    let flat = predict(&s, &opts(32)).unwrap();
    assert!(flat.predictions.iter().all(|p| !p.hierarchical));
    assert!(flat.local_link.is_none());
}

#[test]
fn a_measured_local_path_replaces_the_default_local_link() {
    let mut s = synth("net", &ALL4, &[2, 3], 0.0, 1.0);
    s.extend(synth("lo", &ALL4, &[2, 3], 0.0, 0.1));
    let mut o = opts(8);
    o.ranks_per_node = Some(4);
    o.local_path = Some("lo".into());
    let r = predict(&s, &o).unwrap();
    let l = r.local_link.unwrap();
    assert_eq!(l.source, "lo");
    assert!((l.beta_us_per_byte / 8e-4 - 1.0).abs() < 1e-6, "{l:?}");
    o.local_path = Some("nowhere".into());
    let e = predict(&s, &o).unwrap_err();
    assert!(e.to_string().starts_with("--local-path: no path nowhere"), "{e}");
}

#[test]
fn paths_are_compared_at_the_target() {
    let mut s = synth("tcp@eth0", &ALL4, &[2, 3], 0.0, 1.0);
    s.extend(synth("tcp@vxlan0", &ALL4, &[2, 3], 0.0, 1.25));
    let r = predict(&s, &opts(64)).unwrap();
    assert_eq!(r.reference.as_deref(), Some("tcp@eth0"));
    let big = r
        .ratios
        .iter()
        .find(|q| q.collective == Collective::AllReduce && q.algo == "ring" && q.size == 16 << 20)
        .unwrap();
    // Bandwidth-bound: the ratio approaches the beta ratio (gamma is shared, so a little less).
    assert!(big.ratio > 1.15 && big.ratio < 1.25, "{big:?}");
    let small = r.ratios.iter().find(|q| q.size == 8).unwrap();
    assert!((small.ratio - 1.0).abs() < 0.01, "{small:?}");
}

#[test]
fn weightings_parse_by_name() {
    for w in [Weighting::Relative, Weighting::Sqrt, Weighting::Absolute] {
        assert_eq!(w.name().parse::<Weighting>(), Ok(w));
    }
    assert_eq!(Weighting::default(), Weighting::Sqrt);
    assert!("log"
        .parse::<Weighting>()
        .unwrap_err()
        .contains("relative, sqrt or absolute"));
}

#[test]
fn bad_options_name_their_flag() {
    let s = synth("p", &ALL4, &[2], 0.0, 1.0);
    let e = predict(&s, &opts(1)).unwrap_err();
    assert!(e.to_string().starts_with("--target-ranks:"), "{e}");
    let mut o = opts(10);
    o.ranks_per_node = Some(4);
    let e = predict(&s, &o).unwrap_err();
    assert!(e.to_string().starts_with("--ranks-per-node: 4 does not divide"), "{e}");
    let mut o = opts(10);
    o.reference = Some("tcp@ib0".into());
    assert!(predict(&s, &o)
        .unwrap_err()
        .to_string()
        .starts_with("--reference: no path tcp@ib0"));
}

#[test]
fn measured_times_at_the_target_give_errors_at_the_largest_size() {
    let fit_on = synth("p", &ALL4, &[2, 3], 0.0, 1.0);
    let mut r = predict(&fit_on, &opts(6)).unwrap();
    let mut at6 = synth("p", &ALL4, &[6], 0.0, 1.0);
    // The measured run is 10% slower than the model at every point; two repeats average.
    at6.iter_mut().for_each(|s| s.time_us *= 1.1);
    let again = at6.clone();
    at6.extend(again);
    attach_measured(&mut r, &at6);
    assert_eq!(r.largest_errors.len(), 4);
    for e in &r.largest_errors {
        assert_eq!(e.size, 16 << 20);
        assert!((e.error_pct - (1.0 / 1.1 - 1.0) * 100.0).abs() < 1e-6, "{e:?}");
    }
    let text = render::text(&r, crate::units::BwUnit::Gbyte);
    assert!(
        text.contains("# measured at 6 ranks (p.json): error at the largest size"),
        "{text}"
    );
    assert!(render::markdown(&r).contains("| measured (us) | error |"));
}

#[test]
fn a_parameter_the_data_cannot_identify_is_said_and_its_predictions_marked() {
    let mut r = predict(&synth("tcp@eth0", &ALL4, &[2, 3], 0.0, 1.0), &opts(64)).unwrap();
    // The ring's alpha as the fit holds it when it comes out negative.
    let ring = r.fits[0].algos.iter_mut().find(|a| a.algo == Algo::Ring).unwrap();
    ring.alpha_us = fit::Param {
        value: 0.0,
        sd: f64::NAN,
        fixed: Some("came out negative (-3.2e1 ± 1.0e0, beyond its noise); held at 0".into()),
        held: Some(fit::Held::Negative),
    };
    let target = predict::Target {
        nranks: 64,
        ranks_per_node: None,
        local: predict::LocalLink {
            source: "default".into(),
            alpha_us: predict::DEFAULT_LOCAL.0,
            beta_us_per_byte: predict::DEFAULT_LOCAL.1,
        },
        local_fit: None,
    };
    r.predictions = predict::predict(&r.fits[0], &target);
    r.crossovers = predict::crossovers(&r.fits[0], 64);
    let marked: Vec<&predict::Prediction> = r.predictions.iter().filter(|p| p.algo == "ring").collect();
    assert!(!marked.is_empty());
    assert!(
        marked.iter().all(|p| p.unidentified == ["alpha of ring".to_string()]),
        "{marked:?}"
    );
    // The other algorithms' predictions do not rest on it.
    assert!(r
        .predictions
        .iter()
        .filter(|p| p.algo != "ring")
        .all(|p| p.unidentified.is_empty()));
    // No claim about which algorithm is faster rests on it.
    let ar = r
        .crossovers
        .iter()
        .find(|c| c.collective == Collective::AllReduce)
        .unwrap();
    assert!(ar.size.is_none() && ar.note.starts_with("cannot tell"), "{ar:?}");
    let text = render::text(&r, crate::units::BwUnit::Gbyte);
    assert!(text.contains("not identified (held at 0)"), "{text}");
    assert!(
        text.contains("* rests on a parameter the data could not identify (alpha of ring on tcp@eth0"),
        "{text}"
    );
    assert!(!text.contains("faster at every size"), "{text}");
}

/// A flat target of `n` ranks.
fn target(n: usize) -> predict::Target {
    predict::Target {
        nranks: n,
        ranks_per_node: None,
        local: predict::LocalLink {
            source: "default".into(),
            alpha_us: predict::DEFAULT_LOCAL.0,
            beta_us_per_byte: predict::DEFAULT_LOCAL.1,
        },
        local_fit: None,
    }
}

/// `colls` on ranks `ps` as [`synth`] makes them, but with the reduction costing `gamma` us/B.
fn synth_gamma(colls: &[(Collective, Algo)], ps: &[usize], noise: f64, gamma: f64) -> Vec<Sample> {
    let mut out = synth("tcp@eth0", colls, ps, noise, 1.0);
    for s in &mut out {
        let k = coeff::coeffs(s.collective, Algo::Ring, s.nranks, s.size as f64).unwrap();
        s.time_us -= k.c * (GAMMA - gamma);
    }
    out
}

#[test]
fn a_cost_below_0_within_its_noise_is_held_at_0_and_still_predicts() {
    let ring = [(Collective::AllReduce, Algo::Ring), (Collective::AllGather, Algo::Ring)];
    // Noisy points from a reduction that costs next to nothing: gamma comes out a little below 0.
    let r = predict(&synth_gamma(&ring, &[2, 3], 0.3, -6e-4), &opts(64)).unwrap();
    let g = &r.fits[0].gamma_us_per_byte;
    assert_eq!(g.held, Some(fit::Held::WithinNoise), "{g:?}");
    assert!(
        g.identified() && g.value == 0.0 && g.sd.is_finite() && g.sd > 0.0,
        "{g:?}"
    );
    assert!(
        g.fixed.as_deref().unwrap().contains("less than 2 standard errors"),
        "{g:?}"
    );
    for p in &r.predictions {
        assert!(p.unidentified.is_empty(), "{p:?}");
        assert!(p.ci95_us.is_finite() && p.ci95_us > 0.0, "{p:?}");
    }
    // The interval of a reducing collective carries gamma's uncertainty: wider than the same fit's without it.
    let ar = |r: &Report| {
        r.predictions
            .iter()
            .find(|p| p.collective == Collective::AllReduce && p.algo == "ring" && p.size == 16 << 20)
            .unwrap()
            .ci95_us
    };
    let mut pinned = r.clone();
    pinned.fits[0]
        .cov
        .iter_mut()
        .for_each(|row| *row.last_mut().unwrap() = 0.0);
    let last = pinned.fits[0].cov.len() - 1;
    pinned.fits[0].cov[last].iter_mut().for_each(|c| *c = 0.0);
    pinned.predictions = predict::predict(&pinned.fits[0], &target(64));
    assert!(ar(&r) > ar(&pinned), "{} vs {}", ar(&r), ar(&pinned));
    let text = render::text(&r, crate::units::BwUnit::Gbyte);
    assert!(!text.contains("not a prediction"), "{text}");
    assert!(!text.contains("not identified"), "{text}");
}

#[test]
fn a_cost_below_0_beyond_its_noise_marks_what_rests_on_it() {
    let ring = [(Collective::AllReduce, Algo::Ring), (Collective::AllGather, Algo::Ring)];
    // All-reduce faster than its bytes allow: gamma far below 0, with little noise.
    let r = predict(&synth_gamma(&ring, &[2, 3], 0.001, -3e-3), &opts(64)).unwrap();
    let g = &r.fits[0].gamma_us_per_byte;
    assert_eq!(g.held, Some(fit::Held::Negative), "{g:?}");
    assert!(!g.identified());
    for p in &r.predictions {
        let want: &[&str] = if p.collective == Collective::AllReduce {
            &["gamma"]
        } else {
            &[]
        };
        assert_eq!(p.unidentified, want, "{p:?}");
    }
    let text = render::text(&r, crate::units::BwUnit::Gbyte);
    assert!(
        text.contains("not a prediction") && text.contains("not identified (held at 0)"),
        "{text}"
    );
}

/// Known costs with a per-call part: (algorithm, per-call us, per-step alpha us, beta us/B).
const WITH_CALL: [(Algo, f64, f64, f64); 5] = [
    (Algo::Ring, 40.0, 30.0, 8e-3),
    (Algo::RecDoubling, 150.0, 20.0, 9e-3),
    (Algo::Bruck, 120.0, 25.0, 8.5e-3),
    (Algo::Tree, 90.0, 22.0, 8.2e-3),
    (Algo::HalvingDoubling, 110.0, 24.0, 8.1e-3),
];

/// Every latency algorithm beside the ring, on the collectives that run it.
const LATENCY: [(Collective, Algo); 6] = [
    (Collective::AllReduce, Algo::Ring),
    (Collective::AllReduce, Algo::RecDoubling),
    (Collective::AllReduce, Algo::Tree),
    (Collective::AllReduce, Algo::HalvingDoubling),
    (Collective::AllGather, Algo::Ring),
    (Collective::AllGather, Algo::Bruck),
];

fn truth_with_call(coll: Collective, algo: Algo, p: usize, n: f64) -> f64 {
    let (_, call, a, b) = WITH_CALL.iter().find(|t| t.0 == algo).copied().unwrap();
    let k = coeff::coeffs(coll, algo, p, n).unwrap();
    call * k.calls() + k.time(a, b, GAMMA)
}

/// Noise-free samples of [`LATENCY`] at rank counts `ps`, 8 B to 16 MiB, from [`truth_with_call`].
fn synth_with_call(ps: &[usize]) -> Vec<Sample> {
    let mut out = Vec::new();
    for &p in ps {
        for &(coll, algo) in &LATENCY {
            for e in 3..=24 {
                out.push(Sample {
                    path: "tcp@eth0".into(),
                    collective: coll,
                    algo: algo.name().into(),
                    size: 1 << e,
                    nranks: p,
                    hosts: p,
                    time_us: truth_with_call(coll, algo, p, (1u64 << e) as f64),
                    source: "s.json".into(),
                });
            }
        }
    }
    out
}

/// The largest |relative error| of `predict(p, n)` against the truth over [`LATENCY`] at `p` ranks, 8 B to
/// 16 MiB, per algorithm.
fn worst_errors(p: usize, predict: impl Fn(Collective, Algo, usize, f64) -> f64) -> Vec<(Algo, f64)> {
    let mut worst: Vec<(Algo, f64)> = Vec::new();
    for &(coll, algo) in &LATENCY {
        for e in 3..=24 {
            let n = (1u64 << e) as f64;
            let err = (predict(coll, algo, p, n) / truth_with_call(coll, algo, p, n) - 1.0).abs();
            match worst.iter_mut().find(|w| w.0 == algo) {
                Some(w) => w.1 = w.1.max(err),
                None => worst.push((algo, err)),
            }
        }
    }
    worst
}

#[test]
fn a_per_call_cost_is_fitted_from_2_3_and_4_ranks_and_predicts_8_and_16_within_1_percent() {
    let s = synth_with_call(&[2, 3, 4]);
    let fit = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    for (algo, call, a, b) in WITH_CALL {
        let f = fit.algo(algo).unwrap();
        let c = f.call_us.as_ref().expect("three rank counts fit the per-call cost");
        assert!((c.value - call).abs() < 1e-6 * call, "{algo}: call {c:?}");
        assert!(
            (f.alpha_us.value - a).abs() < 1e-6 * a,
            "{algo}: alpha {:?}",
            f.alpha_us
        );
        assert!((f.beta_us_per_byte.value - b).abs() < 1e-6 * b, "{algo}");
    }
    for p in [8usize, 16] {
        let report = predict(&s, &opts(p)).unwrap();
        let mut seen = 0;
        for pr in report.predictions.iter().filter(|pr| !pr.hierarchical) {
            let algo = coeff::algo_named(&pr.algo).unwrap();
            let want = truth_with_call(pr.collective, algo, p, pr.size as f64);
            assert!(
                (pr.time_us / want - 1.0).abs() < 0.01,
                "{p} ranks {} {algo} {} B: {} us, true {want} us",
                pr.collective,
                pr.size,
                pr.time_us
            );
            seen += 1;
        }
        assert!(seen >= LATENCY.len() * 10, "{seen} predictions at {p}");
        // The picker prices with the same terms (its costs as the model file holds them).
        let table = crate::algorithm::CostTable {
            kind: "tcp".into(),
            fitted_on: "tcp@eth0".into(),
            algos: fit
                .algos
                .iter()
                .map(|f| crate::algorithm::AlgoCost {
                    algo: f.algo,
                    call_us: f.call_us.as_ref().map_or(0.0, |c| c.value),
                    alpha_us: f.alpha_us.value,
                    beta_us_per_byte: f.beta_us_per_byte.value,
                })
                .collect(),
            gamma_us_per_byte: fit.gamma_us_per_byte.value,
            ring_chunk: crate::defaults::CHUNK_BYTES,
        };
        let priced = worst_errors(p, |c, a, p, n| table.predict_us(c, a, p, n as u64).unwrap());
        assert!(priced.iter().all(|w| w.1 < 0.01), "{p}: {priced:?}");
    }
}

#[test]
fn the_forms_without_a_per_call_cost_miss_the_latency_algorithms_at_8_and_16() {
    // The old design on the same points: alpha and beta per algorithm and gamma, no per-call column.
    let s = synth_with_call(&[2, 3, 4]);
    let algos: Vec<Algo> = WITH_CALL.iter().map(|w| w.0).collect();
    let k = 2 * algos.len() + 1;
    let mut x = Vec::new();
    for p in &s {
        let algo = coeff::algo_named(&p.algo).unwrap();
        let c = coeff::coeffs(p.collective, algo, p.nranks, p.size as f64).unwrap();
        let i = algos.iter().position(|a| *a == algo).unwrap();
        let mut row = vec![0.0; k];
        (row[2 * i], row[2 * i + 1], row[k - 1]) = (c.a, c.b, c.c);
        x.push(row);
    }
    let y: Vec<f64> = s.iter().map(|p| p.time_us).collect();
    let w: Vec<f64> = y.iter().map(|t| 1.0 / t).collect();
    let old = lsq::solve(&x, &y, &w, &vec![true; k]).unwrap().theta;
    for p in [8usize, 16] {
        let worst = worst_errors(p, |coll, algo, p, n| {
            let i = algos.iter().position(|a| *a == algo).unwrap();
            coeff::coeffs(coll, algo, p, n)
                .unwrap()
                .time(old[2 * i], old[2 * i + 1], old[k - 1])
        });
        // Every latency algorithm is off by more than 10% somewhere in the sweep.
        for (algo, e) in &worst {
            if *algo != Algo::Ring {
                assert!(*e > 0.10, "{p} ranks {algo}: old forms within {:.1}%", e * 100.0);
            }
        }
    }
    // And the new fit of the same points is not.
    let fit = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    assert!(fit.algos.iter().all(|a| a.call_us.is_some()));
}

#[test]
fn two_rank_counts_leave_the_per_call_cost_out_and_the_forms_as_before() {
    let s = synth("tcp@eth0", &ALL4, &[2, 3], 0.0, 1.0);
    let fit = &fit::fit_all(&s, Weighting::Relative).unwrap()[0];
    assert!(fit.algos.iter().all(|a| a.call_us.is_none()), "{:?}", fit.algos);
    let json = serde_json::to_string(fit).unwrap();
    assert!(!json.contains("call_us"), "{json}");
    for (algo, a, b) in TRUE.iter().copied().filter(|t| fit.algo(t.0).is_some()) {
        let f = fit.algo(algo).unwrap();
        assert!(
            (f.alpha_us.value - a).abs() < 1e-6 * a && (f.beta_us_per_byte.value - b).abs() < 1e-9,
            "{algo}"
        );
    }
}

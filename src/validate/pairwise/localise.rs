//! Localisation: which links are slow, and whether a slow host explains them, with false findings
//! controlled for the number of links and hosts judged, not per link.
//!
//! Bandwidth and latency are judged the same way, in log space (a link at half the rate is as far below at
//! 1 GB/s as at 50 GB/s):
//! 1. A host-effects model (`fit`) is fit by median polish over the links measured (a
//!    partial schedule too): a cluster level, one effect per host, one residual per link. The typical link
//!    is the level between two hosts of the median effect, not the best of any host's links (whose
//!    expected value rises with the number of links it is the best of).
//! 2. A link is slow when its residual is below 0 by more than the relative floor AND by more than the
//!    multiplicity-corrected bar of robust standard deviations of the residuals (Sidak over the links
//!    judged, `alpha` family-wise, never below `k`): the floor keeps a quiet network's tiny spread from
//!    flagging ordinary jitter, the bar keeps 500,000 links from yielding false findings that one link at
//!    the same level would not. Bandwidth is judged in two stages where hosts have many partners (at least
//!    32): screening for suspects to measure again down to `bw_least` (20% below), and a suspect measured
//!    twice is slow beyond `bw_least` and the bar for the links measured twice (its second measurement is
//!    independent of the screening, so the bar is corrected for those links, not for every link screened).
//!    A link measured once (its suspect left unconfirmed, or no re-measure) must be `bw_floor` (40%) below,
//!    as must every link with fewer partners per host (the spread is then estimated from too few links to
//!    let the bar alone decide) and every host. Latency keeps `lat_factor` throughout.
//! 3. A host is slow when its effect is below the typical host's by the floor and by the bar over the
//!    hosts judged, with the spread of the hosts at or above the typical one (slow hosts do not widen it).
//!    On latency, more than a quarter of the hosts (and more than two) at least half as far below together
//!    are not single faults but a cluster in two parts (the busy half of a shared machine): none is named
//!    for latency. On bandwidth a host beyond the floor is a fault however many share it.
//! 4. Latency is judged on each link's fastest round trip where its distribution was kept: a busy host
//!    delays some round trips (the median and tail move with its load at that moment) but its fastest ones
//!    still show the path; a slow path delays them all. And its excess over what its hosts' effects
//!    predict must be at least `lat_excess_us`.
//! 5. Stalled round trips are counts: a link is slow with at least `min_stalls` of them, more than the
//!    typical link's, and more than the stalls of the other links make likely for that many round trips
//!    (Poisson, at the same corrected level; where the lower half of the links stall too, as on a fabric
//!    losing packets everywhere, their rate is the background).
//! 6. After the fit, a host with slow links to (nearly) every partner is a slow host; so is, then, a host
//!    that two or more of the remaining slow links (at least half its partners) share. A host whose links are
//!    at or better than the typical link (their median) is never a slow host. So is, last, the end of a slow
//!    bandwidth link whose every link is halfway (in log) to the floor and slower the same way from it (into
//!    it, or out of it), where the other end's are not. Slow links that touch
//!    no slow host are slow links, and neither end is blamed.
//! 7. With four hosts or fewer there is no fit: each link is held against the hosts' best links (the median
//!    of those within the floor of their upper median), which are measured again with the suspects and
//!    count at their lower reading (`judge_small`), so the reference holds twice as a finding must; a
//!    slow link is below it by the floor plus how far those best links moved between their readings.
//! 8. Where the first pass named suspects, only they are findings (`findings`): measured again alone,
//!    they move the fit the other links are held against, and a link it cleared stays cleared.

use serde::{Deserialize, Serialize};

use super::direction::{self, Direction};
use super::fit::{self, Fit};
use super::median::median;
use super::{Finding, Link, Metric, Participant};

/// The knobs of [`findings`]; the defaults never flag a clean run (see the tests and README).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Where the links are too few to fit host effects (every pair of four hosts or fewer), a link's
    /// bandwidth must be this fraction or more below its hosts' best neighbour to be slow: 0.4, because on
    /// shared machines a clean link scatters by +-20% (so 0.8 / 1.2 = a third below its best neighbour).
    pub bw_floor: f64,
    /// Where host effects are fit, a link (or host) this fraction or less below what its hosts predict (the
    /// typical host) is never slow, however quiet the network: 0.2. Above it the bar of robust deviations
    /// decides, so the floor does not cut into a noisy cluster's scatter, nor hide a link at half rate.
    #[serde(default = "default_bw_least")]
    pub bw_least: f64,
    /// A link's latency must be this factor or more above what its hosts predict to be slow (scheduling on
    /// shared cores moves small-message latency far more than bandwidth, so the bar is higher).
    pub lat_factor: f64,
    /// ...and further below its expected value than this many robust standard deviations of the residuals,
    /// at least: the bar rises above it with the number of links (or hosts) judged, see `alpha`.
    pub k: f64,
    /// ...and a link's latency must exceed what its hosts predict by at least this many microseconds: below
    /// it the difference is the hosts' scheduling (a process woken late on a busy core), not the network.
    pub lat_excess_us: f64,
    /// A link with at least this many stalled round trips (lost packets) may be slow, when the other links'
    /// stalls do not make that many likely and it stalls more than the typical link; 0 counts every link and host
    /// as stalled (for tests of re-measuring).
    pub min_stalls: u64,
    /// A host is slow when at least this share of its links are slow (and it has at least two); a host
    /// that two or more slow links share, at least half of its own, is blamed after those.
    pub host_share: f64,
    /// The chance that a clean test names anything, per metric, for links and for hosts: each of m links is
    /// judged at 1 - (1 - alpha)^(1/m) (Sidak).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
}

/// [`Thresholds::alpha`]'s default, also for files that predate it.
fn default_alpha() -> f64 {
    0.01
}

/// [`Thresholds::bw_least`]'s default, also for files that predate it.
fn default_bw_least() -> f64 {
    0.2
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            bw_floor: 0.4,
            bw_least: default_bw_least(),
            lat_factor: 3.0,
            k: 4.0,
            lat_excess_us: 50.0,
            min_stalls: 2,
            host_share: 0.75,
            alpha: default_alpha(),
        }
    }
}

/// The least spread (log units, about 1%) the residuals are judged with: a perfectly quiet synthetic or
/// loopback matrix has none, and the floor decides there.
const LEAST_SD: f64 = 0.01;

/// Partners per host (median) from which the residuals' spread is estimated well enough for the bar of
/// robust deviations to decide down to [`Thresholds::bw_least`]: with 15 (16 hosts) a clean lognormal matrix
/// has links 4 robust deviations below what the fit predicts, so the [`Thresholds::bw_floor`] stays there.
const MANY_PARTNERS: usize = 32;

/// The share of hosts, below together, beyond which they are a second mode of the cluster, not faults.
const GROUP_SHARE: f64 = 0.25;

/// Round trips a link's stall count is over when its distribution was not kept (the default count).
const DEFAULT_ROUND_TRIPS: usize = crate::defaults::PAIRWISE_LAT_ITERS;

/// The lower median of `v` (reordered): with an even count the lower middle value; NaN when empty.
fn lower_median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

/// The upper median of `v` (reordered): with an even count the higher middle value; NaN when empty.
fn upper_median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One metric's verdict before hosts named by other metrics are taken into account.
struct Verdict {
    metric: Metric,
    /// Each link's goodness (higher is better: GB/s, round trips per microsecond, minus the stalls).
    good: Vec<f64>,
    /// What each link's two hosts predict for it (goodness); the typical link where there is no model.
    expected: Vec<f64>,
    /// A link between two typical hosts (goodness).
    typical: f64,
    /// Links slow on their own (residual beyond the bar and the floor).
    slow: Vec<bool>,
    /// Hosts whose effect is slow (beyond the bar and the floor), before the counting of slow links.
    host: Vec<bool>,
    /// How far below typical (goodness ratio) a link counts as one of a slow host's slow links.
    floor_ratio: f64,
    /// The links that set `typical` where links are too few to fit host effects (the best link of each host
    /// in the upper half): measured again with the suspects, so the reference holds twice as a finding must.
    anchors: Vec<usize>,
}

/// The latency a link is judged on, in microseconds: its fastest round trip where the distribution was
/// kept (see the module doc), else its median.
pub fn judged_latency_us(l: &Link) -> f64 {
    match l.latency {
        Some(st) if st.min_us.is_finite() && st.min_us > 0.0 => st.min_us,
        _ => l.latency_us,
    }
}

/// One metric's values to judge: goodness per link (higher is better), the links' ends over `n` hosts, which
/// links were measured twice (confirmed suspects), and the floors (log units) a slow link must pass.
struct Judged<'a> {
    metric: Metric,
    good: Vec<f64>,
    /// Goodness per link as a reference for others, where links are too few to fit: the lower of two
    /// measurements where there were two (a reading raised by a quiet moment is no reference).
    reference: Vec<f64>,
    ends: &'a [(usize, usize)],
    again: &'a [bool],
    n: usize,
    /// Below what the fit predicts, with at least [`MANY_PARTNERS`] partners per host: the floor of links
    /// measured twice, and of every link when screening for suspects ...
    floor_log: f64,
    /// ... the floor of links measured once when judging, and of every link with fewer partners (too few to
    /// fit at all: below the hosts' best neighbour).
    few_floor_log: f64,
    /// Screening for suspects (to measure again) rather than judging.
    pass: Pass,
}

/// What a verdict is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Naming the links to measure again: a link at [`Thresholds::bw_least`] is one.
    Screen,
    /// The findings: a link measured once must be below [`Thresholds::bw_floor`], a single measurement
    /// being weaker evidence than two.
    Judge,
}

/// The log-space verdict on `j`: links and hosts below by more than the floor and the corrected bar;
/// `also(value, expected)` (goodness) must hold too for a link or host to be slow.
///
/// A link measured once is judged at the bar for every link measured once. A link measured twice (a suspect
/// of the first pass, kept at the better of its two measurements) is judged at the bar for the links
/// measured twice: its second measurement is independent of what made it a suspect, so a clean one passes
/// that bar with the same small chance whatever the number of links the first pass screened.
fn judge_log(j: Judged, th: &Thresholds, also: impl Fn(f64, f64) -> bool) -> Verdict {
    let Judged {
        metric,
        good,
        reference,
        ends,
        again,
        n,
        floor_log,
        few_floor_log,
        pass,
    } = j;
    let log = |v: &Vec<f64>| -> Vec<f64> {
        v.iter()
            .map(|&v| if v.is_finite() && v > 0.0 { v.ln() } else { f64::NAN })
            .collect()
    };
    let y = log(&good);
    let Fit { mu, host, resid } = fit::polish(&y, ends, n);
    let judged: Vec<f64> = resid.iter().copied().filter(|e| e.is_finite()).collect();
    let mut degree = vec![0usize; n];
    for (i, &(a, b)) in ends.iter().enumerate() {
        if y[i].is_finite() {
            degree[a] += 1;
            degree[b] += 1;
        }
    }
    let fitted = degree.iter().filter(|&&d| d > 0).count();
    if judged.len() < 2 * fitted {
        return judge_small(
            metric,
            good,
            (&y, &log(&reference), again),
            ends,
            n,
            few_floor_log,
            th,
            also,
        );
    }
    let mut degs: Vec<f64> = degree.iter().filter(|&&d| d > 0).map(|&d| d as f64).collect();
    let partners = median(&mut degs);
    // The hosts' floor is the few-partner one at any size: a host effect is a median of its links, and the
    // bar decides well below it.
    let host_floor = few_floor_log;
    let many = partners >= MANY_PARTNERS as f64;
    let twice_floor = if many { floor_log } else { few_floor_log };
    let once_floor = if many && pass == Pass::Screen {
        floor_log
    } else {
        few_floor_log
    };
    let mut centre = judged.clone();
    let centre = median(&mut centre);
    let sd = fit::robust_sd(judged.iter().copied(), centre).max(LEAST_SD);
    let twice = (0..resid.len()).filter(|&i| again[i] && resid[i].is_finite()).count();
    let once_bar = fit::bar(judged.len() - twice, th.alpha, th.k) * sd;
    let twice_bar = fit::bar(twice, th.alpha, th.k) * sd;
    let mut efs: Vec<f64> = host.iter().copied().filter(|h| h.is_finite()).collect();
    let ref_h = upper_median(&mut efs);
    // The spread of host effects from the hosts at or above the typical one (slow hosts do not widen it),
    // and never below what the links' own scatter leaves in a host effect (a median of its links).
    let from_links = 1.2533 * sd / partners.max(1.0).sqrt();
    let host_sd = fit::robust_sd(efs.iter().copied().filter(|&h| h >= ref_h), ref_h).max(from_links);
    let host_bar = fit::bar(efs.len(), th.alpha, th.k) * host_sd;
    let expected: Vec<f64> = ends
        .iter()
        .map(|&(a, b)| (mu + host[a] + host[b]).exp())
        .map(|v| if v.is_finite() { v } else { (mu + 2.0 * ref_h).exp() })
        .collect();
    let slow: Vec<bool> = (0..good.len())
        .map(|i| {
            let bar = if again[i] {
                twice_bar.max(twice_floor)
            } else {
                once_bar.max(once_floor)
            };
            resid[i].is_finite() && -resid[i] > bar && also(good[i], expected[i])
        })
        .collect();
    let typical = (mu + 2.0 * ref_h).exp();
    let mut below: Vec<bool> = (0..n)
        .map(|a| {
            let d = host[a] - ref_h;
            d.is_finite() && -d > host_bar.max(host_floor) && also((mu + host[a] + ref_h).exp(), typical)
        })
        .collect();
    // Latency: many hosts at least half as far apart as a named one are a second mode of the cluster (busy
    // CPUs on part of it), not faults. Bandwidth: beyond the floor every host is a fault, however many.
    let apart = host
        .iter()
        .filter(|&&h| (ref_h - h) > 0.5 * host_floor.max(host_bar))
        .count();
    if metric == Metric::Latency && apart > 2 && apart as f64 > GROUP_SHARE * efs.len() as f64 {
        below = vec![false; n];
    }
    Verdict {
        metric,
        good,
        expected,
        typical,
        slow,
        host: below,
        floor_ratio: (-host_floor).exp(),
        anchors: Vec::new(),
    }
}

/// [`judge_log`] where the links are too few to tell host effects from link residuals (fewer than two per
/// host: a full matrix of four hosts or fewer, where the model fits any one slow link or host exactly):
/// each link against the typical one, and hosts named by counting their slow links. The typical link is
/// the median of the hosts' best links within the floor of their upper median: a median over links would
/// call two slow hosts of four normal (five of six links touch them), the upper median alone would be the
/// one high link that is the best of both its hosts.
///
/// `(y, yr, again)` are the links' log goodness as judged and as references, and which links were measured
/// twice. A link is judged by its better reading and the typical one is set by the hosts' best links at
/// their lower one: one high reading of a link is the best of both its hosts, two of four, and would alone
/// make the typical one (a pair measured beside a pair that leaves it the CPUs reads twice the others on
/// shared cores). The floor grows by how far those best links moved between their two readings (median).
#[allow(clippy::too_many_arguments)]
fn judge_small(
    metric: Metric,
    good: Vec<f64>,
    (y, yr, again): (&[f64], &[f64], &[bool]),
    ends: &[(usize, usize)],
    n: usize,
    floor_log: f64,
    th: &Thresholds,
    also: impl Fn(f64, f64) -> bool,
) -> Verdict {
    // Each host's best link (by its reference reading) and which link that is.
    let mut best: Vec<Option<(f64, usize)>> = vec![None; n];
    for (i, (&v, &(a, b))) in yr.iter().zip(ends).enumerate() {
        if v.is_finite() {
            for h in [a, b] {
                if best[h].map_or(true, |(w, _)| v > w) {
                    best[h] = Some((v, i));
                }
            }
        }
    }
    let mut caps: Vec<f64> = best.iter().flatten().map(|&(v, _)| v).collect();
    // The upper median keeps two slow hosts of four from setting the level; the hosts within the floor of
    // it are one level, and their median is the typical link (the best of three links is biased up by the
    // scatter, and the upper median of four would be one link's value).
    let top = upper_median(&mut caps);
    let level = |v: f64| v >= top - floor_log;
    let reference = median(&mut caps.iter().copied().filter(|&v| level(v)).collect::<Vec<_>>());
    let mut anchors: Vec<usize> = best
        .iter()
        .flatten()
        .filter(|&&(v, _)| level(v))
        .map(|&(_, i)| i)
        .collect();
    anchors.sort_unstable();
    anchors.dedup();
    let dev: Vec<f64> = y.iter().map(|v| v - reference).collect();
    let healthy: Vec<f64> = dev
        .iter()
        .copied()
        .filter(|d| d.is_finite() && -d <= floor_log)
        .collect();
    let centre = median(&mut healthy.clone());
    let sd = fit::robust_sd(healthy.iter().copied(), centre).max(LEAST_SD);
    let bar = fit::bar(dev.iter().filter(|d| d.is_finite()).count(), th.alpha, th.k) * sd;
    // How far the reference itself moved between its two readings: on hosts whose CPUs set the pace the
    // same link reads far apart from one round to the next, and a link is slow only beyond the floor and
    // that (where each host has its own cores the readings agree and the floor alone decides).
    let mut moved: Vec<f64> = anchors
        .iter()
        .filter(|&&i| again[i])
        .map(|&i| y[i] - yr[i])
        .filter(|d| d.is_finite())
        .collect();
    let floor_log = floor_log + if moved.is_empty() { 0.0 } else { median(&mut moved) };
    let typical = reference.exp();
    let slow = (0..good.len())
        .map(|i| dev[i].is_finite() && -dev[i] > bar.max(floor_log) && also(good[i], typical))
        .collect();
    Verdict {
        metric,
        expected: vec![typical; good.len()],
        good,
        typical,
        slow,
        host: vec![false; n],
        floor_ratio: (-floor_log).exp(),
        anchors,
    }
}

/// The probability that a Poisson count of mean `mean` is `k` or more.
fn poisson_tail(k: u64, mean: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if mean <= 0.0 {
        return 0.0;
    }
    // 1 - P(X < k), the terms summed in log space so a large mean does not underflow.
    let mut term = (-mean).exp();
    let mut below = 0.0;
    for j in 0..k {
        below += term;
        term *= mean / (j + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// Stalls: a link is slow with at least `min_stalls` and more than the others' rate makes likely.
fn judge_stalls(links: &[Link], n: usize, th: &Thresholds) -> Verdict {
    let trips = |l: &Link| l.latency.map_or(DEFAULT_ROUND_TRIPS, |s| s.samples).max(1) as f64;
    // The background rate: the links below the minimum (a busy machine's occasional late answer).
    let (quiet_stalls, quiet_trips) = links
        .iter()
        .filter(|l| l.stalls < th.min_stalls)
        .fold((0.0, 0.0), |(s, t), l| (s + l.stalls as f64, t + trips(l)));
    // Fewer than three is no background (a clean path has none): the minimum alone decides.
    let quiet = if quiet_trips > 0.0 && quiet_stalls >= 3.0 {
        quiet_stalls / quiet_trips
    } else {
        0.0
    };
    // Where the lower half of the links stall too (loss on the whole fabric), their rate is the background:
    // a link stalling as often as the typical one is the fabric's, not its own.
    let mut rates: Vec<f64> = links.iter().map(|l| l.stalls as f64 / trips(l)).collect();
    let mut counts: Vec<f64> = links.iter().map(|l| l.stalls as f64).collect();
    let lower = lower_median(&mut counts);
    let rate = if lower >= th.min_stalls as f64 {
        quiet.max(lower_median(&mut rates))
    } else {
        quiet
    };
    let level = 1.0 - (1.0 - th.alpha).powf(1.0 / links.len().max(1) as f64);
    let good: Vec<f64> = links.iter().map(|l| -(l.stalls as f64)).collect();
    let typical = median(&mut good.clone());
    // A link at or below the typical link's stalls is never slow, whatever the background (a minimum of 0
    // counts every link as stalled).
    let slow = links
        .iter()
        .map(|l| {
            l.stalls >= th.min_stalls
                && (th.min_stalls == 0 || -(l.stalls as f64) < typical)
                && (rate == 0.0 || poisson_tail(l.stalls, rate * trips(l)) < level)
        })
        .collect();
    Verdict {
        metric: Metric::Stalls,
        expected: vec![typical; links.len()],
        good,
        typical,
        slow,
        host: vec![false; n],
        floor_ratio: 1.0,
        anchors: Vec::new(),
    }
}

/// Per metric, the verdict: bandwidth, latency (as round trips per microsecond), stalls.
fn verdicts(n: usize, links: &[Link], th: &Thresholds, pass: Pass) -> [Verdict; 3] {
    let ends: Vec<(usize, usize)> = links.iter().map(|l| (l.a, l.b)).collect();
    let n = n.max(links.iter().map(|l| l.a.max(l.b) + 1).max().unwrap_or(0));
    let again: Vec<bool> = links.iter().map(|l| l.remeasured).collect();
    let bw = judge_log(
        Judged {
            metric: Metric::Bandwidth,
            good: links.iter().map(|l| l.bw_gbs).collect(),
            reference: links.iter().map(|l| l.bw_lower_gbs.unwrap_or(l.bw_gbs)).collect(),
            ends: &ends,
            again: &again,
            n,
            floor_log: -(1.0 - th.bw_least).ln(),
            few_floor_log: -(1.0 - th.bw_floor).ln(),
            pass,
        },
        th,
        |_, _| true,
    );
    // Latency as a rate (round trips per microsecond), so "higher is better" holds for both metrics.
    let rate: Vec<f64> = links.iter().map(|l| 1.0 / judged_latency_us(l)).collect();
    let excess_us = th.lat_excess_us.max(scheduling_scatter_us(links));
    let lat = judge_log(
        Judged {
            metric: Metric::Latency,
            reference: rate.clone(),
            good: rate,
            ends: &ends,
            again: &again,
            n,
            floor_log: th.lat_factor.ln(),
            few_floor_log: th.lat_factor.ln(),
            pass,
        },
        th,
        |v, expected| 1.0 / v - 1.0 / expected >= excess_us,
    );
    [bw, lat, judge_stalls(links, n, th)]
}

/// How far waiting for a core moves a round trip on these hosts, in microseconds: the median over the links
/// of how far a link's median round trip sits above its fastest. On hosts with cores to spare the two are
/// microseconds apart; where every core is busy the median is a scheduler's time slice (milliseconds) and
/// the fastest trip of a healthy link lands anywhere below it, so a link's fastest trip must exceed what its
/// hosts predict by more than this to be slow (see [`Thresholds::lat_excess_us`]). 0 without statistics.
fn scheduling_scatter_us(links: &[Link]) -> f64 {
    let mut gaps: Vec<f64> = links
        .iter()
        .filter_map(|l| l.latency)
        .map(|st| st.p50_us - st.min_us)
        .filter(|g| g.is_finite())
        .collect();
    let m = median(&mut gaps);
    if m.is_finite() {
        m.max(0.0)
    } else {
        0.0
    }
}

/// Findings for one metric's verdict `v`. Hosts marked in `named` (by an earlier metric) are not named
/// again, and links touching them are taken as explained; the hosts this metric names are marked.
fn judge(
    hosts: &[Participant],
    links: &[Link],
    adj: &[Vec<usize>],
    v: &Verdict,
    th: &Thresholds,
    named: &mut [bool],
) -> Vec<Finding> {
    let to_value = |g: f64| v.metric.value_of_goodness(g);
    let n = hosts.len().min(adj.len());
    let mut out = Vec::new();
    let mut slow_host = named.to_vec();
    // A host whose links are, at their median, at or better than the typical link is never slow: its slow
    // links are each their own (a minimum of 0 stalls counts every link and host as stalled).
    let below_typical = |h: usize| {
        let mut vals: Vec<f64> = adj[h].iter().map(|&i| v.good[i]).collect();
        median(&mut vals) < v.typical || (v.metric == Metric::Stalls && th.min_stalls == 0)
    };
    let blame = |h: usize, out: &mut Vec<Finding>, slow_host: &mut Vec<bool>| {
        slow_host[h] = true;
        let mut vals: Vec<f64> = adj[h].iter().map(|&i| v.good[i]).collect();
        let below = adj[h]
            .iter()
            .filter(|&&i| v.slow[i] || v.good[i] < v.floor_ratio * v.typical)
            .count();
        out.push(Finding::SlowHost {
            host: hosts[h].name.clone(),
            metric: v.metric,
            value: to_value(median(&mut vals)),
            reference: to_value(v.typical),
            slow_links: below.max(1),
            links: adj[h].len(),
        });
    };
    // The hosts the fit puts below the others, then those slow with (nearly) every partner.
    for h in (0..n).filter(|&h| !named[h]) {
        let nslow = adj[h].iter().filter(|&&i| v.slow[i]).count();
        let share = adj[h].len() >= 2 && nslow as f64 >= th.host_share * adj[h].len() as f64;
        if (v.host[h] || share) && below_typical(h) {
            blame(h, &mut out, &mut slow_host);
        }
    }
    // Then the simplest account of the slow links left: a host that two or more of them (and at least half
    // its partners) share is more likely at fault than as many separate paths. Packet loss at one host
    // stalls some of its links and not others in a short test, so this is how such a host gets named.
    loop {
        let unexplained = |h: usize| {
            adj[h]
                .iter()
                .filter(|&&i| v.slow[i] && !slow_host[links[i].a] && !slow_host[links[i].b])
                .count()
        };
        let pick = (0..n)
            .filter(|&h| !slow_host[h] && below_typical(h))
            .map(|h| (unexplained(h), h))
            .filter(|&(k, h)| k >= 2 && 2 * k >= adj[h].len())
            .max_by_key(|&(k, h)| (k, std::cmp::Reverse(h)));
        match pick {
            Some((_, h)) => blame(h, &mut out, &mut slow_host),
            None => break,
        }
    }
    // Last, a slow link with one end whose every link is slow the same way seen from it (all into it, or all
    // out of it, by the direction rule) and at least halfway (in log) to the floor below the typical link,
    // where the other end's are not: that end's effect, its other links short of the floor by the scatter
    // only. A host slow to receive (small TCP buffers) halves one way of each of its pairs, which sits at
    // the floor, so one measured below it and the rest just above must still name the host. Scatter lowers
    // links both ways alike and does not line them up on one host; where both ends qualify, or neither, the
    // link stays a link.
    if v.metric == Metric::Bandwidth {
        let halfway = v.floor_ratio.sqrt() * v.typical;
        let low_everywhere = |h: usize| {
            let mine = || adj[h].iter().map(|&i| &links[i]);
            let slower = |s: direction::Sides| match direction::of_links(mine(), h).map(|s| s.direction()) {
                Some(Direction::In) => s.received_gbs < s.sent_gbs,
                Some(Direction::Out) => s.sent_gbs < s.received_gbs,
                _ => false,
            };
            adj[h].len() >= 2
                && adj[h].iter().all(|&i| v.good[i] < halfway)
                && mine().all(|l| slower(direction::at_host(l, h)))
        };
        for (i, l) in links.iter().enumerate() {
            if !v.slow[i] || slow_host[l.a] || slow_host[l.b] {
                continue;
            }
            match (low_everywhere(l.a), low_everywhere(l.b)) {
                (true, false) => blame(l.a, &mut out, &mut slow_host),
                (false, true) => blame(l.b, &mut out, &mut slow_host),
                _ => {}
            }
        }
    }
    for (i, l) in links.iter().enumerate() {
        if v.slow[i] && !slow_host[l.a] && !slow_host[l.b] {
            out.push(Finding::SlowLink {
                a: l.a_name.clone(),
                b: l.b_name.clone(),
                metric: v.metric,
                value: to_value(v.good[i]),
                reference: to_value(v.expected[i]),
            });
        }
    }
    named.copy_from_slice(&slow_host);
    out
}

/// The links of each host, over every link (a NaN value is still the host's link for counting).
fn all_adjacency(links: &[Link], n: usize) -> Vec<Vec<usize>> {
    let ends: Vec<(usize, usize)> = links.iter().map(|l| (l.a, l.b)).collect();
    let n = n.max(links.iter().map(|l| l.a.max(l.b) + 1).max().unwrap_or(0));
    fit::adjacency(&vec![0.0; links.len()], &ends, n)
}

/// Links of a suspect host measured again: its worst few by bandwidth (measuring all of a host's links
/// again at 1,000 hosts would be 999 more rounds; a few show whether the host stays slow).
pub const SUSPECT_LINKS_PER_HOST: usize = 4;

/// The links (indices into `links`) the findings rest on, and what confirming them re-measures: every link
/// slow by any metric, the worst [`SUSPECT_LINKS_PER_HOST`] of each host found slow and, where links are too
/// few to fit host effects and bandwidth found any, the links that set the typical bandwidth (a reference
/// read high once would otherwise make every suspect slow twice).
pub fn suspects(links: &[Link], th: &Thresholds) -> Vec<usize> {
    let n = links.iter().map(|l| l.a.max(l.b) + 1).max().unwrap_or(0);
    let adj = all_adjacency(links, n);
    let mut pick = vec![false; links.len()];
    let verdicts = verdicts(n, links, th, Pass::Screen);
    for v in &verdicts {
        for (i, &s) in v.slow.iter().enumerate() {
            pick[i] |= s;
        }
        for h in (0..n).filter(|&h| v.host[h]) {
            let mut mine = adj[h].clone();
            mine.sort_by(|&x, &y| (v.good[x] / v.expected[x]).total_cmp(&(v.good[y] / v.expected[y])));
            for &i in mine.iter().take(SUSPECT_LINKS_PER_HOST) {
                pick[i] = true;
            }
        }
    }
    let bw = &verdicts[0];
    if bw.slow.contains(&true) || bw.host.contains(&true) {
        for &i in &bw.anchors {
            pick[i] = true;
        }
    }
    (0..links.len()).filter(|&i| pick[i]).collect()
}

/// Every finding of a test: slow hosts and slow links by bandwidth, then by latency, then by stalled round
/// trips (each leaving out what the hosts named before explain: a host already named by bandwidth explains
/// its slow latencies too). `links` may be any subset of the pairs of `hosts` (a partial schedule).
///
/// Where the first pass named suspects ([`Link::suspect`]), only they can be slow links, and only a host with
/// a suspect link a slow host: the suspects come back measured alone (on shared cores, faster than beside a
/// round's other pairs), which moves what the fit predicts for the links measured once; a link the first pass
/// cleared on its own figures is not named for that. A suspect the reserve left out is judged as measured.
pub fn findings(hosts: &[Participant], links: &[Link], th: &Thresholds) -> Vec<Finding> {
    let n = hosts.len();
    let adj = all_adjacency(links, n);
    let mut named = vec![false; adj.len()];
    let mut out = Vec::new();
    // A link measured again was a suspect (`confirm::merge` keeps the mark).
    let screened: Vec<bool> = links.iter().map(|l| l.suspect).collect();
    let screen = screened.contains(&true);
    for mut v in verdicts(n, links, th, Pass::Judge) {
        if screen {
            held_to_the_screen(&mut v, &screened, &adj);
        }
        out.extend(judge(hosts, links, &adj, &v, th, &mut named));
    }
    out.extend(one_way(hosts, links, &mut named));
    // A host a later metric named explains the slow links an earlier one left at it.
    let blamed: Vec<&str> = (0..n).filter(|&h| named[h]).map(|h| hosts[h].name.as_str()).collect();
    out.retain(|f| match f {
        Finding::SlowLink { a, b, .. } => !blamed.contains(&a.as_str()) && !blamed.contains(&b.as_str()),
        Finding::SlowHost { .. } => true,
    });
    out
}

/// `v` with only the `screened` links slow, and only hosts with a screened link slow.
fn held_to_the_screen(v: &mut Verdict, screened: &[bool], adj: &[Vec<usize>]) {
    for (slow, &s) in v.slow.iter_mut().zip(screened) {
        *slow &= s;
    }
    for (h, slow) in v.host.iter_mut().enumerate() {
        *slow &= adj.get(h).is_some_and(|mine| mine.iter().any(|&i| screened[i]));
    }
}

/// A host whose every send (or every receive) is this fraction of the other hosts' typical one or less is slow
/// one way, however its links look judged by their slower direction.
pub const ONE_WAY_SHARE: f64 = 0.4;

/// Hosts not yet `named` that are slow one way: the median of what a host sends (or receives) at most
/// [`ONE_WAY_SHARE`] of the other hosts' median, and each of those directions below 60% of it. Judged by its
/// slower direction, a link of a host slow to send looks like any link of a host that is starved or shaped
/// both ways; with two faulty hosts among four, the slow links are half the matrix and nothing stands out,
/// while the one way that is slow still does.
fn one_way(hosts: &[Participant], links: &[Link], named: &mut [bool]) -> Vec<Finding> {
    let n = hosts.len();
    if n < 3 {
        return Vec::new();
    }
    // Each participant's sends and receives: (bandwidth out, bandwidth in) per link.
    let mut sent: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut got: Vec<Vec<f64>> = vec![Vec::new(); n];
    for l in links.iter().filter(|l| l.a < n && l.b < n) {
        sent[l.a].push(l.bw_ab_gbs);
        got[l.b].push(l.bw_ab_gbs);
        sent[l.b].push(l.bw_ba_gbs);
        got[l.a].push(l.bw_ba_gbs);
    }
    let mut out = Vec::new();
    for way in [&sent, &got] {
        let meds: Vec<f64> = way.iter().map(|v| median(&mut v.clone())).collect();
        for h in 0..n {
            if named[h] || way[h].len() < 2 || !meds[h].is_finite() {
                continue;
            }
            let mut others: Vec<f64> = (0..n)
                .filter(|&o| o != h && meds[o].is_finite())
                .map(|o| meds[o])
                .collect();
            let reference = median(&mut others);
            if reference.is_nan() || reference <= 0.0 {
                continue;
            }
            let slow = way[h].iter().filter(|&&x| x < 0.6 * reference).count();
            if meds[h] <= ONE_WAY_SHARE * reference && slow == way[h].len() {
                named[h] = true;
                out.push(Finding::SlowHost {
                    host: hosts[h].name.clone(),
                    metric: Metric::Bandwidth,
                    value: meds[h],
                    reference,
                    slow_links: slow,
                    links: way[h].len(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A deterministic scatter of +-`amp` (relative) around 1, different for every (i, salt).
    pub fn jitter(i: usize, salt: u64, amp: f64) -> f64 {
        // splitmix64: a fixed, well-spread sequence (tests must not depend on a random seed).
        let mut z = (i as u64).wrapping_add(salt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        1.0 + amp * (2.0 * (z as f64 / u64::MAX as f64) - 1.0)
    }

    /// A standard normal draw, fixed for every (i, salt) (Box-Muller over two of [`jitter`]'s uniforms).
    pub fn normal(i: usize, salt: u64) -> f64 {
        let u = |k: usize| (jitter(k, salt, 1.0) / 2.0).clamp(1e-12, 1.0);
        (-2.0 * u(2 * i).ln()).sqrt() * (std::f64::consts::TAU * u(2 * i + 1)).cos()
    }

    /// `n` hosts h0.. with links of bandwidth `bw(a, b, i)` and latency `lat(a, b, i)`.
    pub fn matrix(
        n: usize,
        bw: impl Fn(usize, usize, usize) -> f64,
        lat: impl Fn(usize, usize, usize) -> f64,
    ) -> (Vec<Participant>, Vec<Link>) {
        let hosts: Vec<Participant> = (0..n)
            .map(|h| Participant {
                name: format!("h{h}"),
                rank: h,
                host: format!("h{h}"),
                gpu: None,
            })
            .collect();
        let mut links = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let i = links.len();
                let v = bw(a, b, i);
                let l = lat(a, b, i);
                links.push(Link {
                    a,
                    b,
                    a_name: format!("h{a}"),
                    b_name: format!("h{b}"),
                    bw_ab_gbs: v,
                    bw_ba_gbs: v,
                    bw_gbs: v,
                    bidir_gbs: 2.0 * v,
                    latency_us: l,
                    stalls: 0,
                    latency: Some(super::super::LatencyStats {
                        samples: 200,
                        min_us: 0.9 * l,
                        avg_us: 1.1 * l,
                        p50_us: l,
                        p99_us: 2.0 * l,
                        p999_us: 3.0 * l,
                        max_us: 4.0 * l,
                        msg_rate: 1e6 / (1.1 * l),
                    }),
                    bw_msg_rate: v * 1e9 / (4 << 20) as f64,
                    remeasured: false,
                    bw_lower_gbs: None,
                    suspect: false,
                });
            }
        }
        (hosts, links)
    }

    fn run(n: usize, bw: impl Fn(usize, usize, usize) -> f64) -> Vec<Finding> {
        let (h, l) = matrix(n, bw, |_, _, i| 40.0 * jitter(i, 99, 0.3));
        findings(&h, &l, &Thresholds::default())
    }

    fn slow_hosts(f: &[Finding]) -> Vec<String> {
        f.iter()
            .filter_map(|x| match x {
                Finding::SlowHost { host, .. } => Some(host.clone()),
                _ => None,
            })
            .collect()
    }

    fn slow_links(f: &[Finding]) -> Vec<(String, String)> {
        f.iter()
            .filter_map(|x| match x {
                Finding::SlowLink { a, b, .. } => Some((a.clone(), b.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn clean_noisy_matrices_have_no_finding() {
        // +-20% bandwidth scatter and +-30% latency, as a busy shared machine shows, at several sizes.
        for n in [2, 3, 4, 5, 8, 16] {
            for salt in 0..20 {
                let f = run(n, |_, _, i| 1.0 * jitter(i, salt, 0.2));
                assert!(f.is_empty(), "n={n} salt={salt}: {f:?}");
            }
        }
    }

    #[test]
    fn a_host_at_a_quarter_or_half_rate_is_named_and_no_link() {
        for rate in [0.25, 0.5] {
            for n in [3, 4, 6, 8] {
                for bad in [0, n - 1] {
                    let f = run(n, |a, b, i| {
                        let v = jitter(i, 7, 0.1);
                        if a == bad || b == bad {
                            v * rate
                        } else {
                            v
                        }
                    });
                    assert_eq!(slow_hosts(&f), [format!("h{bad}")], "n={n} rate {rate}: {f:?}");
                    assert!(slow_links(&f).is_empty(), "n={n}: {f:?}");
                    match &f[0] {
                        Finding::SlowHost {
                            metric,
                            value,
                            reference,
                            slow_links,
                            links,
                            ..
                        } => {
                            assert_eq!((*metric, *slow_links, *links), (Metric::Bandwidth, n - 1, n - 1));
                            assert!(*value < rate * 1.1 && *reference > 0.9, "{f:?}");
                        }
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn one_slow_pair_is_named_as_that_link_and_no_host() {
        for n in [3, 4, 6] {
            let f = run(n, |a, b, i| {
                let v = jitter(i, 3, 0.1);
                if (a, b) == (1, 2) {
                    v / 3.0
                } else {
                    v
                }
            });
            assert_eq!(slow_links(&f), [("h1".to_string(), "h2".to_string())], "n={n}: {f:?}");
            assert!(slow_hosts(&f).is_empty(), "n={n}: {f:?}");
        }
    }

    #[test]
    fn slow_links_sharing_one_host_blame_that_host() {
        // Two of h2's three links slow (a lossy host stalls some links, not all): h2, not two links.
        let f = run(4, |a, b, i| {
            let v = jitter(i, 11, 0.1);
            if (a, b) == (0, 2) || (a, b) == (1, 2) {
                v / 5.0
            } else {
                v
            }
        });
        assert_eq!(slow_hosts(&f), ["h2"], "{f:?}");
        assert!(slow_links(&f).is_empty(), "{f:?}");
        // Two slow links with no end in common stay two links.
        let f = run(4, |a, b, i| {
            let v = jitter(i, 11, 0.1);
            if (a, b) == (0, 1) || (a, b) == (2, 3) {
                v / 5.0
            } else {
                v
            }
        });
        assert_eq!(slow_links(&f).len(), 2, "{f:?}");
        assert!(slow_hosts(&f).is_empty(), "{f:?}");
    }

    #[test]
    fn a_slow_pair_among_links_scattered_by_busy_cores_is_that_link_alone() {
        // Four hosts on two cores, h0 -> h1 shaped to 100 Mbit/s, as measured (h2 <-> h3 read 2.03 and 1.46;
        // h1 <-> h3 0.86 at best): 41% below the upper median of the hosts' best links, but 30% below their
        // median, inside the scatter.
        let bw = [0.012, 1.024, 0.926, 0.995, 0.860, 2.029];
        let (h, mut l) = matrix(4, |_, _, i| bw[i], |_, _, _| 9.0);
        for (i, lower) in [(0, 0.012), (4, 0.86), (5, 1.46)] {
            (l[i].remeasured, l[i].bw_lower_gbs) = (true, Some(lower));
        }
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_links(&f), [("h0".to_string(), "h1".to_string())], "{f:?}");
        assert!(slow_hosts(&f).is_empty(), "{f:?}");
    }

    #[test]
    fn a_reference_that_moves_between_its_readings_widens_the_floor() {
        // Four hosts on two cores, h0 -> h1 shaped: h2 <-> h3 read 2.4 then 1.9, the others about 1.0 twice,
        // so h0's and h1's other links are 42-47% below the typical link, beyond the 40% floor but within how
        // far the typical link itself moved (21%). Only the shaped link is slow.
        let scattered = |rest: f64| {
            let bw = [0.012, 1.1 * rest, rest, 1.05 * rest, rest, 2.4];
            let (h, mut l) = matrix(4, |_, _, i| bw[i], |_, _, _| 9.0);
            for (i, lower) in [
                (0, 0.011),
                (1, rest),
                (2, 0.95 * rest),
                (3, rest),
                (4, 0.95 * rest),
                (5, 1.9),
            ] {
                (l[i].remeasured, l[i].bw_lower_gbs) = (true, Some(lower));
            }
            findings(&h, &l, &Thresholds::default())
        };
        let f = scattered(1.0);
        assert_eq!(slow_links(&f), [("h0".to_string(), "h1".to_string())], "{f:?}");
        assert!(slow_hosts(&f).is_empty(), "{f:?}");
        // The same readings with h0 and h1 at 0.8 of that (54-58% below the typical link): beyond both, two
        // slow hosts.
        let f = scattered(0.8);
        assert_eq!(slow_hosts(&f), ["h0", "h1"], "{f:?}");
    }

    #[test]
    fn two_slow_hosts_are_both_named() {
        // Four hosts: five of six links touch a slow host, so a median over links would call them normal.
        for n in [4, 6, 8] {
            let f = run(n, |a, b, i| {
                let v = jitter(i, 5, 0.1);
                if [a, b].iter().any(|h| [0, 2].contains(h)) {
                    v / 4.0
                } else {
                    v
                }
            });
            assert_eq!(slow_hosts(&f), ["h0", "h2"], "n={n}: {f:?}");
            assert!(slow_links(&f).is_empty(), "n={n}: {f:?}");
        }
    }

    #[test]
    fn a_host_with_slow_latency_to_everyone_is_named_by_latency() {
        let (h, l) = matrix(
            5,
            |_, _, i| jitter(i, 1, 0.1),
            |a, b, i| 30.0 * jitter(i, 2, 0.2) * if a == 3 || b == 3 { 10.0 } else { 1.0 },
        );
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(f.len(), 1, "{f:?}");
        match &f[0] {
            Finding::SlowHost {
                host,
                metric,
                value,
                reference,
                ..
            } => {
                assert_eq!((host.as_str(), *metric), ("h3", Metric::Latency));
                assert!(*value > 200.0 && *reference < 40.0, "{f:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_host_whose_round_trips_stall_is_named() {
        let (h, mut l) = matrix(4, |_, _, i| jitter(i, 6, 0.1), |_, _, _| 12.0);
        for link in &mut l {
            if link.a == 1 || link.b == 1 {
                link.stalls = 3;
            }
        }
        l[5].stalls = 1; // h2-h3: one stall is not enough
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_hosts(&f), ["h1"], "{f:?}");
        assert!(slow_links(&f).is_empty(), "{f:?}");
        assert!(
            matches!(f[0], Finding::SlowHost { metric: Metric::Stalls, value, .. } if value == 3.0),
            "{f:?}"
        );
        // One of its links also slow by bandwidth: still the host alone.
        l[0].bw_gbs = 0.1;
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(
            (slow_hosts(&f), slow_links(&f)),
            (vec!["h1".to_string()], vec![]),
            "{f:?}"
        );
    }

    #[test]
    fn a_host_named_by_bandwidth_explains_its_slow_latencies() {
        let (h, l) = matrix(
            4,
            |a, b, i| jitter(i, 4, 0.1) * if a == 2 || b == 2 { 0.25 } else { 1.0 },
            |a, b, _| if (a, b) == (2, 3) { 100.0 } else { 10.0 },
        );
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_hosts(&f), ["h2"], "{f:?}");
        assert!(slow_links(&f).is_empty(), "{f:?}");
    }

    #[test]
    fn a_small_dip_inside_the_floor_is_not_flagged_even_on_a_quiet_network() {
        // Identical links but one 30% lower: MAD is 0, so only the relative floor keeps it from being flagged.
        let (h, l) = matrix(4, |a, b, _| if (a, b) == (0, 1) { 0.7 } else { 1.0 }, |_, _, _| 20.0);
        assert!(findings(&h, &l, &Thresholds::default()).is_empty());
        // Nor is a pair at 4x the latency when that is 30 us more: scheduling, not the network.
        let (h, l) = matrix(4, |_, _, _| 1.0, |a, b, _| if (a, b) == (0, 1) { 40.0 } else { 10.0 });
        assert!(findings(&h, &l, &Thresholds::default()).is_empty());
        // The same pair at half the rate is.
        let (h, l) = matrix(4, |a, b, _| if (a, b) == (0, 1) { 0.5 } else { 1.0 }, |_, _, _| 20.0);
        assert_eq!(slow_links(&findings(&h, &l, &Thresholds::default())).len(), 1);
    }

    #[test]
    fn suspects_measured_alone_do_not_make_links_the_first_pass_cleared_slow() {
        // 16 hosts on 2 shared cores, 4 of the 15 rounds sampled (a budget), h7 at a fifth of the rate. A
        // link's fastest round trip is bimodal: mostly 80-110 us (its pair pinged while the round's other pairs
        // moved bulk data), a few 8-28 us. The suspects, h7's links, come back measured alone at 8-14 us,
        // which lowers what the fit predicts for their hosts' other links; those links were judged on the
        // first pass's figures and cleared.
        let th = Thresholds::default();
        let sampled: Vec<(usize, usize)> = [0, 3, 7, 11]
            .iter()
            .flat_map(|&r| super::super::schedule::round(16, r))
            .collect();
        let mut first_named = 0;
        for salt in 0..40 {
            let bw =
                |a: usize, b: usize, i: usize| jitter(i, salt, 0.15) * if a == 7 || b == 7 { 0.0025 } else { 0.0119 };
            let lat = |_: usize, _: usize, i: usize| {
                if jitter(i, salt ^ 0x1a7, 1.0) < 0.4 {
                    18.0 * jitter(i, salt ^ 0x2b8, 0.55)
                } else {
                    95.0 * jitter(i, salt ^ 0x3c9, 0.16)
                }
            };
            let (h, all) = matrix(16, bw, lat);
            let mut l: Vec<Link> = all.into_iter().filter(|l| sampled.contains(&(l.a, l.b))).collect();
            let picked = super::super::confirm::mark_suspects(&mut l, &th);
            assert!(picked.iter().any(|&(a, b)| a == 7 || b == 7), "salt={salt}: {picked:?}");
            let (_, alone) = matrix(16, bw, |_, _, i| 11.0 * jitter(i, salt ^ 0x4da, 0.3));
            for x in l.iter_mut().filter(|x| x.suspect) {
                let fresh = alone.iter().find(|f| (f.a, f.b) == (x.a, x.b)).unwrap();
                *x = super::super::confirm::merge(x, fresh);
            }
            let f = findings(&h, &l, &th);
            assert_eq!(
                (slow_hosts(&f), slow_links(&f)),
                (vec!["h7".to_string()], vec![]),
                "salt={salt}: {f:?}"
            );
            // Without the screen's marks the same figures name links the first pass cleared.
            let unmarked: Vec<Link> = l
                .iter()
                .map(|x| Link {
                    suspect: false,
                    ..x.clone()
                })
                .collect();
            let g = findings(&h, &unmarked, &th);
            first_named += usize::from(slow_links(&g).len() + slow_hosts(&g).len() > 1);
        }
        // (5 of these 40, each a latency link at 84-97 us against 9-29 predicted, as in results/scale.)
        assert!(first_named > 0, "the matrices never moved the fit");
    }

    /// `n` hosts as a cluster of shared machines: lognormal scatter per link (10% bandwidth, 20% latency)
    /// and per host (5%, 10%: some CPUs busier than others); `bw_x(a, b)` and `lat_x(a, b)` scale a link.
    fn cluster(
        n: usize,
        salt: u64,
        bw_x: impl Fn(usize, usize) -> f64,
        lat_x: impl Fn(usize, usize) -> f64,
    ) -> (Vec<Participant>, Vec<Link>) {
        let host = |h: usize, s: u64| normal(h, salt ^ (s << 40));
        matrix(
            n,
            |a, b, i| 1.2 * (0.1 * normal(i, salt) - 0.05 * (host(a, 1) + host(b, 1))).exp() * bw_x(a, b),
            |a, b, i| 20.0 * (0.2 * normal(i, salt ^ 0xabc) + 0.1 * (host(a, 2) + host(b, 2))).exp() * lat_x(a, b),
        )
    }

    /// The seeds each size is tried with: many at small sizes, fewer where a matrix has 30,000 links.
    fn seeds(n: usize) -> u64 {
        match n {
            0..=16 => 40,
            17..=64 => 12,
            _ => 3,
        }
    }

    #[test]
    fn clean_lognormal_clusters_have_no_finding_at_any_size() {
        for n in [16, 64, 256] {
            for salt in 0..seeds(n) {
                let (h, l) = cluster(n, salt, |_, _| 1.0, |_, _| 1.0);
                let f = findings(&h, &l, &Thresholds::default());
                assert!(f.is_empty(), "n={n} salt={salt}: {f:?}");
                assert!(suspects(&l, &Thresholds::default()).is_empty(), "n={n} salt={salt}");
            }
        }
    }

    #[test]
    fn one_link_at_four_tenths_is_exactly_that_link_at_any_size() {
        for n in [16, 64, 256] {
            for salt in 0..seeds(n).min(4) {
                let (bad_a, bad_b) = (3, n - 2);
                let (h, l) = cluster(
                    n,
                    salt,
                    |a, b| if (a, b) == (bad_a, bad_b) { 0.4 } else { 1.0 },
                    |_, _| 1.0,
                );
                let f = findings(&h, &l, &Thresholds::default());
                assert_eq!(
                    slow_links(&f),
                    [(format!("h{bad_a}"), format!("h{bad_b}"))],
                    "n={n} salt={salt}: {f:?}"
                );
                assert!(slow_hosts(&f).is_empty(), "n={n} salt={salt}: {f:?}");
                // Judged against what its two hosts do with others.
                match &f[0] {
                    Finding::SlowLink { value, reference, .. } => {
                        assert!(value / reference < 0.6 && *reference > 0.9, "{f:?}")
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    #[test]
    fn one_host_at_four_tenths_is_exactly_that_host_at_any_size() {
        for n in [16, 64, 256] {
            for salt in 0..seeds(n).min(4) {
                let bad = n / 3;
                let (h, l) = cluster(n, salt, |a, b| if a == bad || b == bad { 0.4 } else { 1.0 }, |_, _| 1.0);
                let f = findings(&h, &l, &Thresholds::default());
                assert_eq!(slow_hosts(&f), [format!("h{bad}")], "n={n} salt={salt}: {f:?}");
                assert!(slow_links(&f).is_empty(), "n={n} salt={salt}: {f:?}");
                // Confirming it measures a few of its links again, not all of them.
                let again = suspects(&l, &Thresholds::default());
                assert!(!again.is_empty() && again.len() <= SUSPECT_LINKS_PER_HOST, "{again:?}");
                assert!(again.iter().all(|&i| l[i].a == bad || l[i].b == bad), "{again:?}");
            }
        }
    }

    #[test]
    fn a_busy_half_is_at_most_one_finding_never_its_links() {
        // Half the hosts busy: 4x the latency at each busy end (their fastest round trips too) and 0.8x
        // the bandwidth.
        for n in [16, 64, 256] {
            for salt in 0..seeds(n).min(4) {
                let busy = |h: usize| h >= n / 2;
                let x = |a: usize, b: usize, f: f64| (if busy(a) { f } else { 1.0 }) * (if busy(b) { f } else { 1.0 });
                let (h, l) = cluster(n, salt, |a, b| x(a, b, 0.8), |a, b| x(a, b, 4.0));
                let f = findings(&h, &l, &Thresholds::default());
                assert!(slow_links(&f).is_empty() && f.len() <= 1, "n={n} salt={salt}: {f:?}");
            }
        }
    }

    #[test]
    fn a_partial_schedule_is_judged_on_the_links_it_has() {
        // 64 hosts, each measured with 12 partners (a ring of neighbours at distances 1..=6): a slow link and
        // a slow host are still exactly themselves, and a clean one has no finding.
        let n = 64;
        let keep = |l: &Link| {
            let d = (l.b - l.a).min(n - (l.b - l.a));
            d <= 6
        };
        for salt in 0..6 {
            let (h, l) = cluster(n, salt, |_, _| 1.0, |_, _| 1.0);
            let l: Vec<Link> = l.into_iter().filter(|l| keep(l)).collect();
            assert_eq!(l.len(), n * 6);
            assert!(findings(&h, &l, &Thresholds::default()).is_empty(), "salt={salt}");
            let (h, l) = cluster(n, salt, |a, b| if (a, b) == (10, 13) { 0.4 } else { 1.0 }, |_, _| 1.0);
            let l: Vec<Link> = l.into_iter().filter(|l| keep(l)).collect();
            let f = findings(&h, &l, &Thresholds::default());
            assert_eq!(
                slow_links(&f),
                [("h10".to_string(), "h13".to_string())],
                "salt={salt}: {f:?}"
            );
            assert!(slow_hosts(&f).is_empty(), "{f:?}");
            let (h, l) = cluster(n, salt, |a, b| if a == 40 || b == 40 { 0.4 } else { 1.0 }, |_, _| 1.0);
            let l: Vec<Link> = l.into_iter().filter(|l| keep(l)).collect();
            let f = findings(&h, &l, &Thresholds::default());
            assert_eq!(
                (slow_hosts(&f), slow_links(&f).len()),
                (vec!["h40".to_string()], 0),
                "salt={salt}: {f:?}"
            );
        }
    }

    #[test]
    fn a_link_between_the_floors_is_a_suspect_and_named_only_when_measured_twice() {
        // 64 hosts (63 partners each), +-5% scatter: a link at 70% is screened (below `bw_least`), one
        // measurement does not name it (not below `bw_floor`), two do.
        let th = Thresholds::default();
        for salt in 0..4 {
            let (h, mut l) = matrix(
                64,
                |a, b, i| jitter(i, salt, 0.05) * if (a, b) == (5, 50) { 0.7 } else { 1.0 },
                |_, _, _| 20.0,
            );
            let i = l.iter().position(|l| (l.a, l.b) == (5, 50)).expect("the pair");
            assert_eq!(suspects(&l, &th), [i], "salt={salt}");
            assert!(findings(&h, &l, &th).is_empty(), "salt={salt}");
            l[i].remeasured = true;
            let f = findings(&h, &l, &th);
            assert_eq!(
                slow_links(&f),
                [("h5".to_string(), "h50".to_string())],
                "salt={salt}: {f:?}"
            );
            // A suspect whose second measurement was clean is kept at it, and is not named.
            l[i].bw_gbs = 1.0;
            assert!(findings(&h, &l, &th).is_empty(), "salt={salt}");
        }
        // With 15 partners per host the 40% floor holds for every link, measured twice or not.
        let (h, mut l) = matrix(
            16,
            |a, b, i| jitter(i, 1, 0.05) * if (a, b) == (2, 9) { 0.7 } else { 1.0 },
            |_, _, _| 20.0,
        );
        assert!(suspects(&l, &th).is_empty());
        for link in &mut l {
            link.remeasured = true;
        }
        assert!(findings(&h, &l, &th).is_empty());
    }

    #[test]
    fn a_link_at_one_percent_among_widely_scattered_links_is_named() {
        // Four hosts whose links scatter from 0.95 to 2.2 GB/s, one at 0.012: the spread is wide, but the
        // link is two orders of magnitude below it (a linear spread once put the bar below zero).
        let vals = [0.012, 0.95, 2.2, 1.1, 1.4, 1.9];
        let (h, l) = matrix(4, |_, _, i| vals[i], |_, _, _| 20.0);
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_links(&f), [("h0".to_string(), "h1".to_string())], "{f:?}");
    }

    #[test]
    fn latency_is_judged_on_the_fastest_round_trips() {
        // A busy pair: its median latency 5x the others but its fastest round trips as fast: not slow.
        let (h, mut l) = matrix(8, |_, _, i| jitter(i, 2, 0.1), |_, _, i| 20.0 * jitter(i, 3, 0.1));
        l[9].latency_us *= 5.0;
        if let Some(st) = l[9].latency.as_mut() {
            st.p50_us *= 5.0;
        }
        assert!(findings(&h, &l, &Thresholds::default()).is_empty());
        // A long path: every round trip slower.
        if let Some(st) = l[9].latency.as_mut() {
            st.min_us *= 5.0;
        }
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_links(&f).len(), 1, "{f:?}");
    }

    #[test]
    fn fastest_trips_scattered_by_busy_cores_are_no_finding_and_a_quiet_slow_path_is() {
        // Every core busy (two loops beside four namespace hosts): every link's median is a time slice, its
        // fastest trip anywhere from 5 us to most of a slice.
        let mins = [4.85, 944.0, 7.74, 26.5, 526.0, 16.9];
        let busy = |i: usize| super::super::LatencyStats {
            samples: 50,
            min_us: mins[i],
            avg_us: 1500.0,
            p50_us: 1990.0,
            p99_us: 4000.0,
            p999_us: 4000.0,
            max_us: 4000.0,
            msg_rate: 600.0,
        };
        let (h, mut l) = matrix(4, |_, _, _| 0.05, |_, _, _| 1990.0);
        for (i, x) in l.iter_mut().enumerate() {
            x.latency = Some(busy(i));
        }
        let f = findings(&h, &l, &Thresholds::default());
        assert!(f.is_empty(), "{f:?}");
        // The same fastest trips with quiet cores (each link's median just above its fastest): the two slow
        // paths are the two links, 944 and 526 us against 5-27.
        for x in &mut l {
            let st = x.latency.as_mut().unwrap();
            st.p50_us = 1.1 * st.min_us;
            x.latency_us = st.p50_us;
        }
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(
            slow_links(&f),
            [("h0".into(), "h2".into()), ("h1".into(), "h3".into())],
            "{f:?}"
        );
    }

    #[test]
    fn a_host_at_or_below_the_typical_stalls_is_never_slow() {
        // Loss on the whole fabric: every link stalls a few times. Hosts at the typical count, or below it,
        // are not slow, whichever way the counts fall.
        let (h, mut l) = matrix(4, |_, _, i| jitter(i, 6, 0.1), |_, _, _| 12.0);
        for link in &mut l {
            link.stalls = 3;
        }
        assert!(findings(&h, &l, &Thresholds::default()).is_empty());
        // h0's links at 2 (below the typical 3 or 4), the rest at 4 and 5: nobody, h0 least of all.
        for (i, link) in l.iter_mut().enumerate() {
            link.stalls = if link.a == 0 { 2 } else { [4, 5, 4][i % 3] };
        }
        let f = findings(&h, &l, &Thresholds::default());
        assert!(f.is_empty(), "{f:?}");
        // One host's links far above a stalling fabric's are still its own.
        for link in &mut l {
            link.stalls = if link.a == 2 || link.b == 2 { 30 } else { 3 };
        }
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_hosts(&f), ["h2"], "{f:?}");
    }

    #[test]
    fn stalls_common_to_every_link_are_background_not_findings() {
        // 32 hosts on a machine where every link's round trips stall now and then (1 in 100): two or three
        // stalls on a link are that background; a link with 15 is not.
        let (h, mut l) = matrix(32, |_, _, i| jitter(i, 8, 0.1), |_, _, _| 20.0);
        for (i, link) in l.iter_mut().enumerate() {
            link.stalls = [0, 1, 2, 3, 2, 1][i % 6];
        }
        assert!(findings(&h, &l, &Thresholds::default()).is_empty());
        l[100].stalls = 15;
        let f = findings(&h, &l, &Thresholds::default());
        assert_eq!(slow_links(&f).len(), 1, "{f:?}");
    }

    /// Four hosts whose links carry `m` (row sends to column, as the column received it) each way.
    fn one_way(m: [[f64; 4]; 4]) -> (Vec<Participant>, Vec<Link>) {
        let (hosts, mut links) = matrix(4, |_, _, _| 1.0, |_, _, _| 10.0);
        for l in &mut links {
            l.bw_ab_gbs = m[l.a][l.b];
            l.bw_ba_gbs = m[l.b][l.a];
            l.bw_gbs = l.bw_ab_gbs.min(l.bw_ba_gbs);
            l.bidir_gbs = l.bw_ab_gbs + l.bw_ba_gbs;
        }
        (hosts, links)
    }

    #[test]
    fn a_host_whose_links_all_sit_at_the_floor_is_named_from_the_one_beyond_it() {
        // As measured on 4 namespace hosts with h2's tcp_rmem at 4096: every way into h2 at 0.018-0.026 GB/s,
        // the rest at about 0.046, and the links the others are held against read 15% lower the second time,
        // which widens the floor to 49% below. Row sends to column. Only the slowest way into h2 is beyond
        // it; the other two sit just above it, and everything h2 sends is as fast as the rest: h2 is the
        // cause, not the link h2 <-> h3.
        let m = [
            [0.0, 0.047, 0.026, 0.045],
            [0.046, 0.0, 0.025, 0.046],
            [0.045, 0.047, 0.0, 0.046],
            [0.046, 0.045, 0.018, 0.0],
        ];
        let (hosts, mut links) = one_way(m);
        for l in &mut links {
            if l.b != 2 {
                (l.remeasured, l.bw_lower_gbs) = (true, Some(0.85 * l.bw_gbs));
            }
        }
        (links[5].remeasured, links[5].bw_lower_gbs) = (true, Some(0.018)); // h2 <-> h3, the suspect
        let f = findings(&hosts, &links, &Thresholds::default());
        assert_eq!(slow_hosts(&f), ["h2"], "{f:?}");
        assert!(slow_links(&f).is_empty(), "{f:?}");
        // The same figures both ways alike (scatter, not a host's one way) stay the one link beyond the floor.
        let mut alike = links.clone();
        for l in &mut alike {
            (l.bw_ab_gbs, l.bw_ba_gbs) = (l.bw_gbs, l.bw_gbs);
        }
        let f = findings(&hosts, &alike, &Thresholds::default());
        assert_eq!(slow_links(&f), [("h2".to_string(), "h3".to_string())], "{f:?}");
        assert!(slow_hosts(&f).is_empty(), "{f:?}");
        // So does the slow way with h2's other links as fast as the rest.
        links[3].bw_gbs = 0.046; // h1 <-> h2
        links[1].bw_gbs = 0.045; // h0 <-> h2
        let f = findings(&hosts, &links, &Thresholds::default());
        assert_eq!(slow_links(&f), [("h2".to_string(), "h3".to_string())], "{f:?}");
        assert!(slow_hosts(&f).is_empty(), "{f:?}");
    }

    #[test]
    fn a_host_slow_to_send_beside_a_starved_one_is_named_from_its_one_way() {
        // Measured on 4 namespace hosts: h2 shaped to 100 Mbit/s on its way out, h1's rank under a 0.02-core
        // quota. Row sends to column. Judged by each link's slower direction half the links are slow and no
        // host stands out; what h2 sends is a third of what the others send.
        let m = [
            [0.0, 0.018, 0.051, 0.044],
            [0.034, 0.0, 0.044, 0.030],
            [0.012, 0.012, 0.0, 0.012],
            [0.047, 0.027, 0.025, 0.0],
        ];
        let (hosts, links) = one_way(m);
        let f = findings(&hosts, &links, &Thresholds::default());
        assert!(
            f.iter()
                .any(|f| matches!(f, Finding::SlowHost { host, .. } if host == "h2")),
            "{f:?}"
        );
        for f in &f {
            let named = match f {
                Finding::SlowHost { host, .. } => vec![host.as_str()],
                Finding::SlowLink { a, b, .. } => vec![a.as_str(), b.as_str()],
            };
            assert!(!named.contains(&"h0") && !named.contains(&"h3"), "{f:?}");
        }
    }
}

//! Localisation: which links are slow, and whether a slow host explains them.
//!
//! Both metrics are judged as a "goodness" where higher is better (GB/s, and 1/latency):
//! 1. Reference R: each host's best link bounds what the host itself can do, so R is the upper median of
//!    the hosts' best links. (The median of all links would not do: with one slow host of four, half the
//!    links are slow and their median lies between the two groups; with two, it is a slow one.) A best
//!    link is biased upward by noise; the floor (40%) absorbs that for scatter up to +-20%, the spreads
//!    (below) for more.
//! 2. Noise: the robust spread (1.4826 x MAD) of the links that look healthy (within the floor of R).
//! 3. A link is slow when it is below R by more than the relative floor AND by more than k spreads: the
//!    floor keeps a quiet network's tiny spread from flagging ordinary jitter, the spreads keep a noisy
//!    network (shared CPUs, busy switches) from flagging its everyday scatter.
//! 4. A host with slow links to (nearly) every partner is a slow host; so is, then, a host that two or
//!    more of the remaining slow links (at least half its partners) share. Slow links that touch no slow
//!    host are slow links, and neither end is blamed.

use serde::{Deserialize, Serialize};

use super::{Finding, Link, Metric, Participant};

/// The knobs of [`findings`]; the defaults never flag a clean run (see the tests and README).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// A link's bandwidth must be this fraction or more below the reference to be slow: 0.4, because on
    /// shared machines a clean link scatters by +-20% (so 0.8 / 1.2 = a third below its best neighbour).
    pub bw_floor: f64,
    /// A link's latency must be this factor or more above the reference to be slow (scheduling on shared
    /// cores moves small-message latency far more than bandwidth, so the bar is higher).
    pub lat_factor: f64,
    /// ...and further from the reference than this many robust standard deviations of the healthy links.
    pub k: f64,
    /// ...and a link's latency must exceed the reference by at least this many microseconds: below it the
    /// difference is the hosts' scheduling (a process woken late on a busy core), not the network.
    pub lat_excess_us: f64,
    /// A link with at least this many stalled round trips (lost packets) is slow, whatever the others do.
    pub min_stalls: u64,
    /// A host is slow when at least this share of its links are slow (and it has at least two); a host
    /// that two or more slow links share, at least half of its own, is blamed after those.
    pub host_share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            bw_floor: 0.4,
            lat_factor: 3.0,
            k: 4.0,
            lat_excess_us: 50.0,
            min_stalls: 2,
            host_share: 0.75,
        }
    }
}

/// The median of `v` (reordered); NaN when empty.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Which of `good` (higher is better, one per link, ends in `ends` over `n` hosts) are slow, and the
/// reference they were judged against. NaN values are never slow and never counted.
pub fn slow_links(good: &[f64], ends: &[(usize, usize)], n: usize, floor: f64, k: f64) -> (Vec<bool>, f64) {
    slow_links_with(good, ends, n, floor, k, |_| true)
}

/// [`slow_links`], where a link is slow only if `also(goodness)` holds too.
pub fn slow_links_with(
    good: &[f64],
    ends: &[(usize, usize)],
    n: usize,
    floor: f64,
    k: f64,
    also: impl Fn(f64) -> bool,
) -> (Vec<bool>, f64) {
    let mut best = vec![f64::NAN; n];
    for (&v, &(a, b)) in good.iter().zip(ends) {
        if v.is_finite() {
            for h in [a, b] {
                best[h] = if best[h].is_finite() { best[h].max(v) } else { v };
            }
        }
    }
    let mut caps: Vec<f64> = best.into_iter().filter(|v| v.is_finite()).collect();
    if caps.is_empty() {
        return (vec![false; good.len()], f64::NAN);
    }
    caps.sort_by(f64::total_cmp);
    let reference = caps[caps.len() / 2];
    let healthy_min = (1.0 - floor) * reference;
    let mut healthy: Vec<f64> = good.iter().copied().filter(|&v| v >= healthy_min).collect();
    let centre = median(&mut healthy);
    let mut dev: Vec<f64> = healthy.iter().map(|v| (v - centre).abs()).collect();
    let spread = 1.4826 * median(&mut dev);
    let spread = if spread.is_finite() { spread } else { 0.0 };
    let threshold = healthy_min.min(reference - k * spread);
    (
        good.iter()
            .map(|&v| v.is_finite() && v < threshold && also(v))
            .collect(),
        reference,
    )
}

/// Findings for one metric: `good[i]` is link i's goodness, `slow` and `reference` what [`slow_links`]
/// made of them. Hosts marked in `named` (by an earlier metric) are not named again, and links touching
/// them are taken as explained; the hosts this metric names are marked.
fn judge(
    hosts: &[Participant],
    links: &[Link],
    metric: Metric,
    good: &[f64],
    (slow, reference): (Vec<bool>, f64),
    th: &Thresholds,
    named: &mut [bool],
) -> Vec<Finding> {
    let to_value = |v: f64| metric.value_of_goodness(v);
    let ends: Vec<(usize, usize)> = links.iter().map(|l| (l.a, l.b)).collect();
    let mut out = Vec::new();
    // Each host's links listed once: searching all links per host is N x links, too slow at a thousand hosts.
    let mut by_host: Vec<Vec<usize>> = vec![Vec::new(); hosts.len()];
    for (i, &(a, b)) in ends.iter().enumerate() {
        by_host[a].push(i);
        by_host[b].push(i);
    }
    let mine = |h: usize| -> Vec<usize> { by_host[h].clone() };
    let mut slow_host = named.to_vec();
    let blame = |h: usize, out: &mut Vec<Finding>, slow_host: &mut Vec<bool>| {
        slow_host[h] = true;
        let links_h = mine(h);
        let mut vals: Vec<f64> = links_h.iter().map(|&i| good[i]).collect();
        out.push(Finding::SlowHost {
            host: hosts[h].name.clone(),
            metric,
            value: to_value(median(&mut vals)),
            reference: to_value(reference),
            slow_links: links_h.iter().filter(|&&i| slow[i]).count(),
            links: links_h.len(),
        });
    };
    // First the hosts slow with (nearly) every partner.
    for h in (0..hosts.len()).filter(|&h| !named[h]) {
        let links_h = mine(h);
        let nslow = links_h.iter().filter(|&&i| slow[i]).count();
        if links_h.len() >= 2 && nslow as f64 >= th.host_share * links_h.len() as f64 {
            blame(h, &mut out, &mut slow_host);
        }
    }
    // Then the simplest account of the slow links left: a host that two or more of them (and at least half
    // its partners) share is more likely at fault than as many separate paths. Packet loss at one host
    // stalls some of its links and not others in a short test, so this is how such a host gets named.
    loop {
        let unexplained = |h: usize| {
            mine(h)
                .into_iter()
                .filter(|&i| slow[i] && !slow_host[ends[i].0] && !slow_host[ends[i].1])
                .count()
        };
        let pick = (0..hosts.len())
            .filter(|&h| !slow_host[h])
            .map(|h| (unexplained(h), h))
            .filter(|&(k, h)| k >= 2 && 2 * k >= mine(h).len())
            .max_by_key(|&(k, h)| (k, std::cmp::Reverse(h)));
        match pick {
            Some((_, h)) => blame(h, &mut out, &mut slow_host),
            None => break,
        }
    }
    for (i, l) in links.iter().enumerate() {
        if slow[i] && !slow_host[l.a] && !slow_host[l.b] {
            out.push(Finding::SlowLink {
                a: l.a_name.clone(),
                b: l.b_name.clone(),
                metric,
                value: to_value(good[i]),
                reference: to_value(reference),
            });
        }
    }
    named.copy_from_slice(&slow_host);
    out
}

/// One metric's verdict on every link: the metric, each link's goodness (higher is better), and which links
/// are slow with the reference they were judged against.
type Verdict = (Metric, Vec<f64>, (Vec<bool>, f64));

/// Per metric, which links are slow: bandwidth, latency (as round trips per microsecond), stalls.
fn slow_by_metric(links: &[Link], th: &Thresholds) -> [Verdict; 3] {
    let bw: Vec<f64> = links.iter().map(|l| l.bw_gbs).collect();
    // Latency as a rate (round trips per microsecond), so "higher is better" holds for both metrics.
    let lat: Vec<f64> = links.iter().map(|l| 1.0 / l.latency_us).collect();
    let ends: Vec<(usize, usize)> = links.iter().map(|l| (l.a, l.b)).collect();
    let n = links.iter().map(|l| l.a.max(l.b) + 1).max().unwrap_or(0);
    let bw_slow = slow_links(&bw, &ends, n, th.bw_floor, th.k);
    let lat_floor = 1.0 - 1.0 / th.lat_factor;
    let lat_slow = {
        let (_, reference) = slow_links(&lat, &ends, n, lat_floor, th.k);
        let min_us = 1.0 / reference + th.lat_excess_us;
        slow_links_with(&lat, &ends, n, lat_floor, th.k, |v| 1.0 / v >= min_us)
    };
    // Stalls have no scatter to judge against: a clean path has none, so a count is its own verdict.
    let stalls: Vec<f64> = links.iter().map(|l| -(l.stalls as f64)).collect();
    let stalled = (
        links.iter().map(|l| l.stalls >= th.min_stalls).collect(),
        median(&mut stalls.clone()),
    );
    [
        (Metric::Bandwidth, bw, bw_slow),
        (Metric::Latency, lat, lat_slow),
        (Metric::Stalls, stalls, stalled),
    ]
}

/// The links (indices into `links`) slow by any metric: what the findings rest on, and what confirming
/// them re-measures.
pub fn suspects(links: &[Link], th: &Thresholds) -> Vec<usize> {
    let slow = slow_by_metric(links, th);
    (0..links.len())
        .filter(|&i| slow.iter().any(|(_, _, (s, _))| s[i]))
        .collect()
}

/// Every finding of a test: slow hosts and slow links by bandwidth, then by latency, then by stalled round
/// trips (each leaving out what the hosts named before explain: a host already named by bandwidth explains
/// its slow latencies too).
pub fn findings(hosts: &[Participant], links: &[Link], th: &Thresholds) -> Vec<Finding> {
    let n = hosts.len();
    let mut named = vec![false; n];
    let mut out = Vec::new();
    for (metric, good, slow) in slow_by_metric(links, th) {
        out.extend(judge(hosts, links, metric, &good, slow, th, &mut named));
    }
    // A host a later metric named explains the slow links an earlier one left at it.
    let blamed: Vec<String> = (0..n).filter(|&h| named[h]).map(|h| hosts[h].name.clone()).collect();
    out.retain(|f| match f {
        Finding::SlowLink { a, b, .. } => !blamed.contains(a) && !blamed.contains(b),
        Finding::SlowHost { .. } => true,
    });
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
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
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
}

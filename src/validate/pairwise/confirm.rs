//! Confirming the findings: the links the first pass found slow are measured again, and a finding stands
//! only if it holds with both measurements merged. A transient (a process woken late on a busy core, a
//! burst of someone else's traffic) lowers one measurement; a fault lowers both. Without this, one slow
//! round on a shared machine names a healthy link.
//!
//! Each suspect is measured again alone, one pair per round: pairs that shared a round the first time share
//! nothing the second, so one pair's slowness (or its hosts' busy CPUs) is not blamed on another, and a link
//! that is slow only beside other traffic is not slow on its own. Measuring only the suspects keeps the cost
//! small: a clean run has few or none.

use super::{localise, measure, Finding, Link, PairwiseConfig, Participant, Thresholds};
use crate::algorithm::control;
use crate::error::{Error, Result};
use crate::transport::Transport;

/// Confirms the first pass, on every rank: rank 0 names the suspects in `links` (its first-pass links; `None`
/// elsewhere), every rank learns them and re-runs the rounds of `first_rounds` that hold one, and rank 0
/// merges the suspects' second measurements into `links`. `parts` are the participating ranks,
/// `participants` their report entries. Returns the rounds run again and, on rank 0 when any ran, the
/// first pass's findings (for [`dismissed`]).
#[allow(clippy::too_many_arguments)]
pub fn remeasure<T: Transport + ?Sized>(
    t: &mut T,
    meter: &mut dyn measure::Meter<T>,
    parts: &[usize],
    participants: &[Participant],
    first_rounds: &[Vec<(usize, usize)>],
    mut links: Option<&mut [Link]>,
    cfg: &PairwiseConfig,
    th: &Thresholds,
) -> Result<(usize, Option<Vec<Finding>>)> {
    let suspects = links.as_deref_mut().map(|l| mark_suspects(l, th));
    let suspects = share(t, suspects, parts.len())?;
    let again = rounds(first_rounds, &suspects);
    if again.is_empty() {
        return Ok((0, None));
    }
    let mine = measure::run_rounds(t, meter, parts, &again, cfg, measure::SETTLE)?;
    let (Some(all), Some(links)) = (measure::collect(t, &mine)?, links) else {
        return Ok((again.len(), None));
    };
    let first = localise::findings(participants, links, th);
    for fresh in measure::links_of(participants, &all, &suspects)? {
        let old = links
            .iter_mut()
            .find(|l| (l.a, l.b) == (fresh.a, fresh.b))
            .expect("a suspect is one of the links");
        *old = merge(old, &fresh);
    }
    Ok((again.len(), Some(first)))
}

/// The pairs (a, b) of the links the first pass names to measure again ([`localise::suspects`]), each marked
/// [`Link::suspect`]: the findings are then held to the first pass's screen, so a link it cleared is not named
/// because the suspects, measured again alone, moved what it is held against.
pub fn mark_suspects(links: &mut [Link], th: &Thresholds) -> Vec<(usize, usize)> {
    let picked = localise::suspects(links, th);
    for &i in &picked {
        links[i].suspect = true;
    }
    picked.into_iter().map(|i| (links[i].a, links[i].b)).collect()
}

/// Rank 0's `pairs` on every rank (`pairs` is `Some` on rank 0, ignored elsewhere). A list that is not pairs
/// of the `n` participants (a < b < n) is a protocol error: the ranks run different versions.
pub fn share<T: Transport + ?Sized>(
    t: &mut T,
    pairs: Option<Vec<(usize, usize)>>,
    n: usize,
) -> Result<Vec<(usize, usize)>> {
    let bytes = serde_json::to_vec(&pairs.unwrap_or_default()).expect("pairs serialise");
    let got = control::broadcast(t, &bytes)?;
    let pairs: Vec<(usize, usize)> = serde_json::from_slice(&got).map_err(|e| {
        Error::peer(format!(
            "rank {}: rank 0 sent an unreadable list of links to re-measure ({e}); were all ranks started with \
             the same collbench version?",
            t.rank()
        ))
    })?;
    check(&pairs, n, t.rank())?;
    Ok(pairs)
}

/// Checks that `pairs` are distinct pairs (a, b) of participants with a < b < `n`.
pub fn check(pairs: &[(usize, usize)], n: usize, rank: usize) -> Result<()> {
    for (k, &(a, b)) in pairs.iter().enumerate() {
        if a >= b || b >= n || pairs[..k].contains(&(a, b)) {
            return Err(Error::peer(format!(
                "rank {rank}: rank 0 asked to re-measure the pair ({a}, {b}), which is not a new pair of the {n} \
                 participants; were all ranks started with the same collbench version?"
            )));
        }
    }
    Ok(())
}

/// The rounds that measure `suspects` again: each alone, in the reverse order of `first` (the first pass's
/// rounds), so a drift through a pass (its hosts busier as it starts) does not fall on the same links twice.
pub fn rounds(first: &[Vec<(usize, usize)>], suspects: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    first
        .iter()
        .rev()
        .flatten()
        .filter(|p| suspects.contains(p))
        .map(|p| vec![*p])
        .collect()
}

/// A link from its first measurement and its re-measurement. A transient only lowers a measurement, so the
/// better bandwidth (both directions from the same measurement) and the lower latency count. Stalled round
/// trips add up: a stall is a lost packet's retransmission timer, not scatter, and a second look only adds
/// evidence. The lower bandwidth is kept beside it: where a link sets the typical value others are held
/// against, a round that left its pair more of the hosts' CPUs raises it, and the lower reading counts.
pub fn merge(first: &Link, again: &Link) -> Link {
    let bw = if again.bw_gbs > first.bw_gbs { again } else { first };
    let lower = [first.bw_lower_gbs.unwrap_or(first.bw_gbs), again.bw_gbs]
        .into_iter()
        .filter(|v| !v.is_nan())
        .reduce(f64::min);
    Link {
        bw_ab_gbs: bw.bw_ab_gbs,
        bw_ba_gbs: bw.bw_ba_gbs,
        bw_gbs: bw.bw_gbs,
        bidir_gbs: bw.bidir_gbs,
        // f64::min keeps the measured one when the other is NaN (a side that reported none).
        latency_us: first.latency_us.min(again.latency_us),
        // The distribution of the measurement whose median is kept, so the two stay one measurement's.
        latency: if again.latency_us < first.latency_us || first.latency.is_none() {
            again.latency.or(first.latency)
        } else {
            first.latency
        },
        bw_msg_rate: bw.bw_msg_rate,
        stalls: first.stalls + again.stalls,
        remeasured: true,
        bw_lower_gbs: lower,
        ..first.clone()
    }
}

/// The hosts a finding blames: one host, or a link's two ends.
fn subject(f: &Finding) -> [Option<&str>; 2] {
    match f {
        Finding::SlowHost { host, .. } => [Some(host), None],
        Finding::SlowLink { a, b, .. } => [Some(a), Some(b)],
    }
}

/// The findings of `first` that nothing in `confirmed` blames, not even in part: a first-pass slow host whose
/// re-measured links show one slow link at it was not a transient but the link, which `confirmed` names
/// (and the reverse), so it is not listed as dismissed.
pub fn dismissed(first: &[Finding], confirmed: &[Finding]) -> Vec<Finding> {
    let touches = |x: &Finding, y: &Finding| {
        let ys = subject(y);
        subject(x).iter().flatten().any(|h| ys.contains(&Some(h)))
    };
    first
        .iter()
        .filter(|f| confirmed.iter().all(|c| !touches(c, f)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::localise::tests::matrix;
    use super::super::{measure_on, schedule, Metric, PairwiseConfig};
    use super::*;
    use crate::options::Options;
    use crate::session::run_threads;

    /// Four ranks over loopback where every link counts as stalled (`min_stalls` 0), so every link is a
    /// suspect; with `confirm`, the report from rank 0.
    fn all_suspect(confirm: bool) -> super::super::PairwiseReport {
        let cfg = PairwiseConfig {
            bytes: 16 << 10,
            iters: 1,
            lat_iters: 3,
            per_host: true,
            confirm,
        };
        let th = Thresholds {
            min_stalls: 0,
            ..Thresholds::default()
        };
        let out = run_threads(4, &Options::default(), |sess| {
            let hosts: Vec<String> = sess.world.ranks.iter().map(|r| r.host.clone()).collect();
            measure_on(&mut sess.transports[0], &hosts, &cfg, &th)
        });
        let mut reports: Vec<_> = out.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert!(reports[1..].iter().all(Option::is_none));
        reports.remove(0).expect("rank 0 has the report")
    }

    #[test]
    fn every_rank_re_measures_the_suspects_rank_0_names() {
        let rep = all_suspect(true);
        // All six links again, each alone (every rank ran the same ones, or the exchanges would have failed or
        // hung rather than returned).
        assert_eq!((rep.rounds, rep.remeasure_rounds), (3, 6));
        assert!(rep.links.iter().all(|l| l.remeasured), "{:?}", rep.links);
        // Every link "stalls", so every host is blamed, and what was blamed first still is.
        assert_eq!(rep.findings.len(), 4, "{:?}", rep.findings);
        assert!(rep.dismissed.is_empty(), "{:?}", rep.dismissed);
    }

    #[test]
    fn without_confirming_nothing_is_measured_twice() {
        let rep = all_suspect(false);
        assert_eq!(rep.remeasure_rounds, 0);
        assert!(rep.links.iter().all(|l| !l.remeasured), "{:?}", rep.links);
        assert_eq!(rep.findings.len(), 4, "{:?}", rep.findings);
    }

    #[test]
    fn each_suspect_is_measured_again_alone() {
        let first = schedule::rounds(4);
        assert_eq!(first.len(), 3);
        // One suspect: alone, without the pair that shared its round.
        assert_eq!(rounds(&first, &[(1, 3)]), vec![vec![(1, 3)]]);
        // Two suspects of one round are not measured together again.
        let same: Vec<(usize, usize)> = first[0].clone();
        let again = rounds(&first, &same);
        assert_eq!(again.len(), 2);
        assert!(again.iter().all(|r| r.len() == 1), "{again:?}");
        // A slow host's three links: three rounds of one pair.
        assert_eq!(rounds(&first, &[(0, 2), (1, 2), (2, 3)]).len(), 3);
        assert!(rounds(&first, &[]).is_empty());
        // Every link a suspect: the first pass's last round is measured again first, its first round last.
        let every: Vec<(usize, usize)> = first.iter().flatten().copied().collect();
        let again = rounds(&first, &every);
        assert!(first[2].contains(&again[0][0]), "{again:?}");
        assert!(first[0].contains(&again[5][0]), "{again:?}");
    }

    #[test]
    fn a_bad_list_from_rank_0_is_refused() {
        assert!(check(&[(0, 1), (1, 3)], 4, 2).is_ok());
        for bad in [vec![(1, 1)], vec![(2, 1)], vec![(0, 4)], vec![(0, 1), (0, 1)]] {
            let e = check(&bad, 4, 2).unwrap_err().to_string();
            assert!(
                e.contains("rank 2: rank 0 asked to re-measure") && e.contains("same collbench version"),
                "{e}"
            );
        }
    }

    #[test]
    fn merging_keeps_the_better_bandwidth_and_latency_and_adds_stalls() {
        let (_, links) = matrix(2, |_, _, _| 1.0, |_, _, _| 30.0);
        let mut first = links[0].clone();
        (first.bw_ab_gbs, first.bw_ba_gbs, first.bw_gbs, first.bidir_gbs) = (0.2, 0.9, 0.2, 1.1);
        (first.latency_us, first.stalls, first.suspect) = (300.0, 1, true);
        let mut again = links[0].clone();
        (again.bw_ab_gbs, again.bw_ba_gbs, again.bw_gbs, again.bidir_gbs) = (0.8, 0.7, 0.7, 1.5);
        (again.latency_us, again.stalls) = (31.0, 2);
        let m = merge(&first, &again);
        assert_eq!((m.bw_ab_gbs, m.bw_ba_gbs, m.bw_gbs, m.bidir_gbs), (0.8, 0.7, 0.7, 1.5));
        assert_eq!((m.latency_us, m.stalls, m.remeasured), (31.0, 3, true));
        // A suspect stays one: the findings hold to the first pass's marks.
        assert!(m.suspect);
        // The first measurement's bandwidth stays when it was the better one; a missing latency is no value.
        again.latency_us = f64::NAN;
        let m = merge(&again, &first);
        assert_eq!((m.bw_gbs, m.latency_us), (0.7, 300.0));
        assert_eq!((m.a, m.b, m.a_name.as_str()), (0, 1, "h0"));
    }

    #[test]
    fn a_transient_is_dismissed_and_a_fault_confirmed() {
        // Four hosts; in the first pass link (1, 3) and every link of h2 are slow.
        let slow = |a: usize, b: usize| (a, b) == (1, 3) || a == 2 || b == 2;
        let (hosts, mut first) = matrix(4, |a, b, _| if slow(a, b) { 0.25 } else { 1.0 }, |_, _, _| 30.0);
        let th = Thresholds::default();
        let pairs = mark_suspects(&mut first, &th);
        // The suspects, and (0, 1) and (0, 3): the best links of h0, h1 and h3, which set the typical value.
        assert_eq!(pairs, vec![(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]);
        let before = localise::findings(&hosts, &first, &th);
        // Measured again, h2 is as slow and link (1, 3) is healthy: it was a transient.
        let (_, again) = matrix(4, |a, b, _| if a == 2 || b == 2 { 0.25 } else { 1.0 }, |_, _, _| 30.0);
        let mut merged = first.clone();
        for l in merged.iter_mut().filter(|l| pairs.contains(&(l.a, l.b))) {
            let fresh = again.iter().find(|f| (f.a, f.b) == (l.a, l.b)).unwrap();
            *l = merge(l, fresh);
        }
        let after = localise::findings(&hosts, &merged, &th);
        assert!(
            matches!(&after[..], [Finding::SlowHost { host, metric: Metric::Bandwidth, .. }] if host == "h2"),
            "{after:?}"
        );
        let gone = dismissed(&before, &after);
        assert!(
            matches!(&gone[..], [Finding::SlowLink { a, b, .. }] if (a.as_str(), b.as_str()) == ("h1", "h3")),
            "{before:?} -> {gone:?}"
        );
    }

    #[test]
    fn a_host_suspicion_that_is_a_link_is_reported_as_the_link() {
        // Four hosts; the first pass blames h0 (all its links slow, a busy moment), measured again only
        // h0<->h1 stays slow, at 1% of the others: the link is the finding, and h0 is not a dismissed
        // transient.
        let (hosts, mut first) = matrix(4, |a, _, _| if a == 0 { 0.012 } else { 1.1 }, |_, _, _| 30.0);
        let th = Thresholds::default();
        let before = localise::findings(&hosts, &first, &th);
        assert!(
            matches!(&before[..], [Finding::SlowHost { host, .. }] if host == "h0"),
            "{before:?}"
        );
        let pairs = mark_suspects(&mut first, &th);
        // h0's links, and (1, 2) and (1, 3), which set the typical value.
        assert_eq!(pairs, vec![(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]);
        let (_, again) = matrix(4, |a, b, _| if (a, b) == (0, 1) { 0.012 } else { 1.1 }, |_, _, _| 30.0);
        let mut merged = first.clone();
        for l in merged.iter_mut().filter(|l| pairs.contains(&(l.a, l.b))) {
            *l = merge(l, again.iter().find(|f| (f.a, f.b) == (l.a, l.b)).unwrap());
        }
        let after = localise::findings(&hosts, &merged, &th);
        assert!(
            matches!(&after[..], [Finding::SlowLink { a, b, .. }] if (a.as_str(), b.as_str()) == ("h0", "h1")),
            "{after:?}"
        );
        assert!(dismissed(&before, &after).is_empty());
        // A finding about other hosts is still dismissed.
        let other = [Finding::SlowLink {
            a: "h2".into(),
            b: "h3".into(),
            metric: Metric::Latency,
            value: 300.0,
            reference: 30.0,
        }];
        assert_eq!(dismissed(&other, &after).len(), 1);
    }

    /// What each finding blames, in order: `host h2`, `link h0-h1`.
    fn named(f: &[Finding]) -> Vec<String> {
        f.iter()
            .map(|f| match f {
                Finding::SlowHost { host, .. } => format!("host {host}"),
                Finding::SlowLink { a, b, .. } => format!("link {a}-{b}"),
            })
            .collect()
    }

    /// `first` with the links of `pairs` merged with their measurement in `again`.
    fn merged(first: &[Link], again: &[Link], pairs: &[(usize, usize)]) -> Vec<Link> {
        let mut out = first.to_vec();
        for l in out.iter_mut().filter(|l| pairs.contains(&(l.a, l.b))) {
            *l = merge(l, again.iter().find(|f| (f.a, f.b) == (l.a, l.b)).unwrap());
        }
        out
    }

    #[test]
    fn a_typical_link_read_high_once_does_not_turn_a_slow_pair_into_two_slow_hosts() {
        // Four hosts on shared cores, h0 <-> h1 shaped to 1%: the first pass measured h2 <-> h3 while the
        // shaped pair left it the CPUs (3.49 GB/s), the other links beside a busy pair (1.22-1.77).
        let bw = |first: bool| {
            move |a: usize, b: usize, _| match (a, b) {
                (0, 1) => 0.012,
                (0, 2) => [1.4, 1.22][first as usize],
                (0, 3) => [1.6, 1.77][first as usize],
                (1, 2) => [1.3, 1.5][first as usize],
                (1, 3) => [1.7, 1.3][first as usize],
                _ => [1.5, 3.49][first as usize],
            }
        };
        let (hosts, mut first) = matrix(4, bw(true), |_, _, _| 30.0);
        let th = Thresholds::default();
        // Against 3.49, every link of h0 and h1 is 49-65% below: both hosts, as the first pass reads it.
        let before = localise::findings(&hosts, &first, &th);
        assert_eq!(named(&before), ["host h0", "host h1"]);
        // h2 <-> h3 set that value: it is measured again with the suspects, each alone.
        let pairs = mark_suspects(&mut first, &th);
        assert!(pairs.contains(&(2, 3)), "{pairs:?}");
        let (_, again) = matrix(4, bw(false), |_, _, _| 30.0);
        let after = localise::findings(&hosts, &merged(&first, &again, &pairs), &th);
        assert_eq!(named(&after), ["link h0-h1"]);
        // The matrix keeps each link's better reading; its lower one is beside it.
        let l23 = merged(&first, &again, &pairs).pop().unwrap();
        assert_eq!((l23.bw_gbs, l23.bw_lower_gbs, l23.remeasured), (3.49, Some(1.5), true));
    }

    #[test]
    fn two_slow_hosts_of_four_stay_named_when_their_reference_holds_twice() {
        // h0 and h2 at a quarter: the one healthy link, h1 <-> h3, sets the typical value. Measured again
        // (every reading within 10% of the first) it holds, and both hosts are still named.
        let bw = |salt: u64| {
            move |a: usize, b: usize, i: usize| {
                let v = localise::tests::jitter(i, salt, 0.1);
                if [a, b].iter().any(|h| [0, 2].contains(h)) {
                    v / 4.0
                } else {
                    v
                }
            }
        };
        let (hosts, mut first) = matrix(4, bw(5), |_, _, _| 30.0);
        let th = Thresholds::default();
        let pairs = mark_suspects(&mut first, &th);
        assert!(pairs.contains(&(1, 3)), "{pairs:?}");
        let (_, again) = matrix(4, bw(6), |_, _, _| 30.0);
        let after = localise::findings(&hosts, &merged(&first, &again, &pairs), &th);
        assert_eq!(named(&after), ["host h0", "host h2"]);
    }
}

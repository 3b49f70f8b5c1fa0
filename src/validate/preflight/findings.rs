//! A pairwise report's findings as preflight checks: each slow host or link with the evidence of the hosts it
//! names and its most likely cause, a warning where every rank shares one host or the hosts were only busy.

use super::evidence::HostEvidence;

/// A rank that waited for a CPU this share of the measurement is starved (as the cause's rule has it).
const STARVED_WAIT_SHARE: f64 = 0.5;
use super::verdict::{bare_check, Check, Verdict};
use crate::validate::pairwise::{self, Finding, PairwiseReport};

/// The checks of one path's pairwise report, each finding with the evidence of the hosts it names and its
/// most likely cause (`seen`: every host during the test).
pub(super) fn pairwise_findings(path: &str, rep: &PairwiseReport, seen: &[HostEvidence]) -> Vec<Check> {
    if rep.links.is_empty() {
        return Vec::new();
    }
    // Every host losing alike is the fabric's loss: one finding that names no host, and the single hosts and
    // links that loss slowed are not named on their own (a starved CPU or a host set up apart still is).
    if let Some(j) = super::cause::fabric_loss(seen) {
        let mut fabric = bare_check(
            format!("{path} fabric: loss on every host"),
            path,
            j.why.split(':').next().unwrap_or(&j.why).to_string(),
            "no host losing packets".into(),
            "the hosts' TCP counters during the pairwise test, against each other (built in)".into(),
            Verdict::Fail,
            format!(
                "{} host(s) or link(s) the pairwise test measured slower are this loss, not faults of their own",
                rep.findings.len()
            ),
        );
        super::cause::annotate(&mut fabric, j, seen, &[]);
        let mut rest = single_findings(
            path,
            &PairwiseReport {
                findings: Vec::new(),
                ..rep.clone()
            },
            seen,
        );
        let own: Vec<Check> = single_findings(path, rep, seen)
            .into_iter()
            .filter(|c| !matches!(c.cause, Some(super::cause::Cause::Loss | super::cause::Cause::Link)))
            .filter(|c| c.verdict != Verdict::Pass)
            .collect();
        if own.is_empty() {
            rest.insert(0, fabric);
            return rest;
        }
        let mut out = vec![fabric];
        out.extend(own);
        return out;
    }
    single_findings(path, rep, seen)
}

/// [`pairwise_findings`] where the loss is not the fabric's: each finding on its own.
fn single_findings(path: &str, rep: &PairwiseReport, seen: &[HostEvidence]) -> Vec<Check> {
    let check = |name: String, measured: String, threshold: String, verdict, detail: String| {
        let source = "pairwise localisation (host effects and link residuals in log space, false findings controlled for the links and hosts judged, built in)".to_string();
        bare_check(name, path, measured, threshold, source, verdict, detail)
    };
    if rep.findings.is_empty() {
        let mut bw: Vec<f64> = rep.links.iter().map(|l| l.bw_gbs).collect();
        let mut lat: Vec<f64> = rep.links.iter().map(|l| l.latency_us).collect();
        let min_bw = bw.iter().copied().fold(f64::INFINITY, f64::min);
        let mut links = check(
            format!("{path} pairwise links"),
            format!(
                "{} links: {:.4} GB/s median (lowest {min_bw:.4} GB/s), {:.1} us median latency",
                rep.links.len(),
                pairwise::median::median(&mut bw),
                pairwise::median::median(&mut lat)
            ),
            "no slow host or link".into(),
            Verdict::Pass,
            format!("every {} pair measured in {} rounds", rep.unit, rep.rounds),
        );
        // The figure a dashboard follows: the slowest link's bandwidth.
        if min_bw.is_finite() {
            links.value = Some(min_bw);
            links.unit = "GB/s".into();
        }
        return vec![links];
    }
    // Ranks that all share one host talk over its loopback: their differences are the CPU scheduler's, not a
    // cable's or a switch port's, so they are shown as warnings rather than failing the run.
    let one_host = rep.hosts.windows(2).all(|w| w[0].host == w[1].host);
    let checks = rep
        .findings
        .iter()
        .map(|f| {
            let line = pairwise::render::finding_line(f);
            let (name, targets) = match f {
                Finding::SlowHost { host, .. } => (format!("{path} pairwise: slow host {host}"), vec![host.clone()]),
                Finding::SlowLink { a, b, .. } => (
                    format!("{path} pairwise: slow link {a} <-> {b}"),
                    vec![a.clone(), b.clone()],
                ),
            };
            let stalls = matches!(
                f,
                Finding::SlowHost {
                    metric: pairwise::Metric::Stalls,
                    ..
                } | Finding::SlowLink {
                    metric: pairwise::Metric::Stalls,
                    ..
                }
            );
            // Participants are ranks when all share a host: the evidence is that host's.
            let mut hosts: Vec<String> = targets
                .iter()
                .map(|t| {
                    rep.hosts
                        .iter()
                        .find(|p| &p.name == t)
                        .map_or(t.clone(), |p| p.host.clone())
                })
                .collect();
            // A link with an end whose interface lost its carrier during the test is that end's: whichever pair
            // measured while the carrier was down reads slow, and its healthy partner is not to blame.
            let flapped = seen
                .iter()
                .filter(|e| hosts.contains(&e.host))
                .filter_map(|e| e.link_downs.filter(|&d| d > 0).map(|d| (e.host.clone(), d)))
                .max_by_key(|(_, d)| *d);
            let (name, line) = match (&flapped, f) {
                (Some((h, downs)), Finding::SlowLink { .. }) => {
                    let figures = line.split_once(": ").map_or(line.as_str(), |(_, r)| r);
                    let figures = figures.split(';').next().unwrap_or(figures).to_string();
                    hosts = vec![h.clone()];
                    (
                        format!("{path} pairwise: slow host {h}"),
                        format!(
                            "SLOW HOST {h}: one of its links measured {figures} while its interface lost its carrier \
                             {downs} time(s) during the test"
                        ),
                    )
                }
                _ => (name, line),
            };
            let latency_like = matches!(
                f,
                Finding::SlowHost {
                    metric: pairwise::Metric::Latency | pairwise::Metric::Stalls,
                    ..
                } | Finding::SlowLink {
                    metric: pairwise::Metric::Latency | pairwise::Metric::Stalls,
                    ..
                }
            );
            let judged = super::cause::judge_metric(&hosts, seen, stalls, latency_like);
            // The matrix shows which way it is slow: a host slow to receive is judged as the receiver, so its
            // partners' retransmissions (what it dropped) do not blame them.
            let way = pairwise::direction::of_finding(rep, f);
            let judged = match (&way, f) {
                (Some((pairwise::direction::Direction::In, why)), Finding::SlowHost { host, .. }) => {
                    super::cause::judge_receiver(host, seen, why, judged)
                }
                _ => judged,
            };
            let line = match &way {
                Some((d, why)) if *d != pairwise::direction::Direction::Both => format!("{line}; {why}"),
                _ => line,
            };
            // A finding the budget left on one measurement, its cause the link only because nothing else
            // showed, made while every host was busy: the cores', as far as the evidence goes, so said and not
            // failed (a finding that held when measured again fails, busy or not).
            let busy_only = judged.busy
                || (judged.cause == super::cause::Cause::Link
                    && once_measured(rep, f)
                    && super::cause::every_host_busy(seen));
            // A link slow because one end's ranks are throttled is that host's fault, not the path's.
            // Starved: throttled by a quota it can see, or waiting for a core (where it cannot see its cgroup).
            let starved = |e: &HostEvidence| e.throttled_share().max(e.waited_share().unwrap_or(0.0));
            let throttled = seen
                .iter()
                .filter(|e| hosts.contains(&e.host))
                .filter(|e| {
                    e.throttled_share() >= crate::results::record::THROTTLED_SHARE
                        || e.waited_share().is_some_and(|w| w >= STARVED_WAIT_SHARE)
                })
                .max_by(|a, b| starved(a).total_cmp(&starved(b)))
                .map(|e| e.host.clone());
            let (name, line) = match (&throttled, judged.cause, f) {
                (Some(h), super::cause::Cause::Cpu, Finding::SlowLink { .. }) => {
                    // The blame moves to the throttled end: the line names it alone, with the link's figures.
                    let figures = line.split_once(": ").map_or(line.as_str(), |(_, r)| r);
                    let figures = figures.split(';').next().unwrap_or(figures);
                    (
                        format!("{path} pairwise: slow host {h}"),
                        format!(
                            "SLOW HOST {h}: one of its links measured {figures} while its ranks were starved of \
                             CPU (throttled by their quota, or waiting for a core)"
                        ),
                    )
                }
                _ => (name, line),
            };
            let mut c = if one_host || busy_only {
                let detail = if one_host {
                    format!(
                        "{line}; every rank runs on one host, so these pairs share its loopback and CPUs: a slower \
                         pair here means ranks waited for a core, not a bad link (a warning, not a failure)"
                    )
                } else {
                    format!("{line}; the hosts were busy (a warning, not a failure)")
                };
                check(name, line.clone(), "no slow host or link".into(), Verdict::Warn, detail)
            } else {
                check(name, line.clone(), "no slow host or link".into(), Verdict::Fail, line)
            };
            super::cause::annotate(&mut c, judged, seen, &hosts);
            (c, busy_only && !one_host)
        })
        .fold(Vec::new(), |mut v: Vec<(Check, bool)>, (c, busy)| {
            // One check per host or link, whichever metrics found it.
            if !v.iter().any(|(x, _)| x.name == c.name) {
                v.push((c, busy));
            }
            v
        });
    let (busy, named): (Vec<_>, Vec<_>) = checks.into_iter().partition(|(_, busy)| *busy);
    let mut checks: Vec<Check> = named.into_iter().map(|(c, _)| c).collect();
    if !busy.is_empty() {
        checks.push(busy_hosts(path, busy.len(), seen));
    }
    checks
}

/// Whether `f` rests on links measured once where a second measurement was due: the budget left no rounds to
/// measure its suspects again (`--no-confirm` is the user's choice, and is said in the report's header).
fn once_measured(rep: &PairwiseReport, f: &Finding) -> bool {
    let left_out = rep.config.confirm && rep.plan.as_ref().is_some_and(|p| p.unconfirmed > 0);
    let touches = |l: &pairwise::Link, h: &str| l.a_name == h || l.b_name == h;
    left_out
        && match f {
            Finding::SlowHost { host, .. } => !rep.links.iter().any(|l| l.remeasured && touches(l, host)),
            Finding::SlowLink { a, b, .. } => !rep.links.iter().any(|l| l.remeasured && touches(l, a) && touches(l, b)),
        }
}

/// The findings made while every host was busy, none set apart by its evidence: one warning that names no host
/// or link (a host is named only with evidence against it).
fn busy_hosts(path: &str, n: usize, seen: &[HostEvidence]) -> Check {
    let busiest = seen.iter().filter_map(|e| e.busy_pct).fold(0.0, f64::max);
    let lowest = seen.iter().filter_map(|e| e.busy_pct).fold(f64::INFINITY, f64::min);
    let mut c = bare_check(
        format!("{path} pairwise: busy hosts"),
        path,
        format!(
            "{n} host(s) or link(s) measured slower while every host's CPUs were {:.0}-{busiest:.0}% busy",
            if lowest.is_finite() { lowest } else { busiest }
        ),
        "no slow host or link".into(),
        "pairwise localisation, judged against every host's CPU evidence (built in)".into(),
        Verdict::Warn,
        format!(
            "{n} pair(s) or host(s) were slower than the rest while every host was busy with other work, and no \
             host's evidence (throttling, a wait for a CPU, loss, its configuration) sets it apart: a rank \
             waiting for a core answers late, so no host or link is named; the hosts were busy (a warning, not a \
             failure): measure again when they are quieter"
        ),
    );
    c.cause = Some(super::cause::Cause::Cpu);
    c.evidence = seen.to_vec();
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::pairwise::localise::{self, tests::matrix, Thresholds};
    use crate::validate::pairwise::PairwiseConfig;

    /// Three participants, the links of participant 0 slow, on `hosts` (one per participant).
    fn report(hosts: [&str; 3]) -> PairwiseReport {
        report_of(hosts, |a, b| if a == 0 || b == 0 { 0.25 } else { 1.0 }, |_, _| 30.0)
    }

    /// Three participants on `hosts` with the bandwidth and latency of each pair.
    fn report_of(
        hosts: [&str; 3],
        bw: impl Fn(usize, usize) -> f64,
        lat: impl Fn(usize, usize) -> f64,
    ) -> PairwiseReport {
        let (mut parts, links) = matrix(3, |a, b, _| bw(a, b), |a, b, _| lat(a, b));
        for (p, h) in parts.iter_mut().zip(hosts) {
            p.host = h.to_string();
        }
        let findings = localise::findings(&parts, &links, &Thresholds::default());
        assert!(!findings.is_empty(), "the synthetic matrix has a slow participant");
        PairwiseReport {
            schema: pairwise::SCHEMA.into(),
            path: "tcp@lo".into(),
            unit: "ranks".into(),
            config: PairwiseConfig::default(),
            hosts: parts,
            links,
            findings,
            dismissed: Vec::new(),
            host_config: Vec::new(),
            link_downs: Vec::new(),
            thresholds: Thresholds::default(),
            rounds: 3,
            remeasure_rounds: 0,
            elapsed_s: 1.0,
            plan: None,
        }
    }

    #[test]
    fn slow_pairs_fail_across_hosts_and_only_warn_on_one_host() {
        let across = pairwise_findings("tcp@eth0", &report(["h0", "h1", "h2"]), &[]);
        assert!(
            !across.is_empty() && across.iter().all(|c| c.verdict == Verdict::Fail),
            "{across:?}"
        );
        let local = pairwise_findings("tcp@lo", &report(["vm", "vm", "vm"]), &[]);
        assert_eq!(local.len(), across.len());
        assert!(local.iter().all(|c| c.verdict == Verdict::Warn), "{local:?}");
        assert!(local.iter().all(|c| c.detail.contains("one host")), "{local:?}");
    }

    #[test]
    fn loss_on_every_host_alike_is_one_fabric_finding_that_names_nobody() {
        let rep = report(["h0", "h1", "h2"]);
        let lossy = |h: &str, resent: u64| HostEvidence {
            host: h.into(),
            wall_s: 5.0,
            busy_pct: Some(20.0),
            tcp: Some(super::super::evidence::TcpCounters {
                out_segs: 20_000,
                retrans_segs: resent,
                in_segs: 20_000,
                ..Default::default()
            }),
            ..Default::default()
        };
        let seen = [lossy("h0", 230), lossy("h1", 210), lossy("h2", 250)];
        let c = pairwise_findings("tcp@eth0", &rep, &seen);
        let failed: Vec<&Check> = c.iter().filter(|c| c.verdict == Verdict::Fail).collect();
        assert_eq!(failed.len(), 1, "{c:?}");
        assert_eq!(
            (failed[0].name.as_str(), failed[0].cause),
            (
                "tcp@eth0 fabric: loss on every host",
                Some(super::super::cause::Cause::Loss)
            )
        );
        assert_eq!(failed[0].evidence.len(), 3);
        for h in ["h0", "h1", "h2"] {
            let said = format!("{} {} {}", failed[0].name, failed[0].measured, failed[0].detail);
            assert!(!super::super::cause::names(&said, h), "{h} named: {said}");
        }
        // One host losing far more than the others is that host's.
        let seen = [lossy("h0", 2_000), lossy("h1", 210), lossy("h2", 250)];
        let c = pairwise_findings("tcp@eth0", &rep, &seen);
        assert!(c.iter().all(|c| !c.name.contains("fabric")), "{c:?}");
        assert!(c.iter().any(|c| c.name == "tcp@eth0 pairwise: slow host h0"), "{c:?}");
    }

    #[test]
    fn a_slow_link_to_a_host_that_lost_its_carrier_is_that_hosts_alone() {
        let rep = report_of(
            ["h0", "h1", "h2"],
            |a, b| if a + b == 1 { 0.2 } else { 1.0 },
            |_, _| 30.0,
        );
        let evidence = |h: &str, downs: u64| HostEvidence {
            host: h.into(),
            wall_s: 5.0,
            link_downs: Some(downs),
            ..Default::default()
        };
        let steady = pairwise_findings(
            "tcp@eth0",
            &rep,
            &[evidence("h0", 0), evidence("h1", 0), evidence("h2", 0)],
        );
        assert!(
            steady
                .iter()
                .any(|c| c.name == "tcp@eth0 pairwise: slow link h0 <-> h1"),
            "{steady:?}"
        );
        let c = pairwise_findings(
            "tcp@eth0",
            &rep,
            &[evidence("h0", 0), evidence("h1", 2), evidence("h2", 0)],
        );
        let failed: Vec<&Check> = c.iter().filter(|c| c.verdict == Verdict::Fail).collect();
        assert_eq!(failed.len(), 1, "{c:?}");
        assert_eq!(failed[0].name, "tcp@eth0 pairwise: slow host h1");
        assert!(
            failed[0].measured.contains("lost its carrier 2 time(s)"),
            "{:?}",
            failed[0]
        );
        let said = format!("{} {} {}", failed[0].name, failed[0].measured, failed[0].detail);
        assert!(!super::super::cause::names(&said, "h0"), "h0 named: {said}");
    }

    /// `seen` with every host's CPUs 10% busy: quiet hosts, otherwise the same evidence.
    fn quiet(seen: &[HostEvidence]) -> Vec<HostEvidence> {
        seen.iter()
            .map(|e| HostEvidence {
                busy_pct: Some(10.0),
                ..e.clone()
            })
            .collect()
    }

    #[test]
    fn a_bandwidth_finding_left_on_one_measurement_on_busy_hosts_is_a_warning() {
        // h0's links at a quarter, every host's CPUs busy with other work, nothing else in the evidence.
        let busy = |h: &str| HostEvidence {
            host: h.into(),
            wall_s: 5.0,
            busy_pct: Some(100.0),
            throttled_s: Some(0.0),
            ..Default::default()
        };
        let seen = [busy("h0"), busy("h1"), busy("h2")];
        let verdict = |rep: &PairwiseReport| {
            let c = pairwise_findings("tcp@eth0", rep, &seen);
            assert_eq!(c.len(), 1, "{c:?}");
            (c[0].name.clone(), c[0].verdict)
        };
        // Measured twice (or with nothing left out): the finding held, busy or not.
        let mut rep = report(["h0", "h1", "h2"]);
        rep.plan = Some(pairwise::plan::Record {
            budget_s: Some(20.0),
            plan: pairwise::plan::plan(3, 1.0, 20.0),
            unconfirmed: 0,
        });
        assert_eq!(verdict(&rep), ("tcp@eth0 pairwise: slow host h0".into(), Verdict::Fail));
        // The budget left its suspects measured once: the cores', as far as the evidence goes.
        rep.plan.as_mut().unwrap().unconfirmed = 2;
        assert_eq!(verdict(&rep), ("tcp@eth0 pairwise: busy hosts".into(), Verdict::Warn));
        // ...but where one of h0's links was measured again, it held: a failure.
        rep.links[0].remeasured = true;
        assert_eq!(verdict(&rep), ("tcp@eth0 pairwise: slow host h0".into(), Verdict::Fail));
        // The same once-measured finding on quiet hosts fails by name.
        rep.links[0].remeasured = false;
        let c = pairwise_findings("tcp@eth0", &rep, &quiet(&seen));
        assert_eq!((c.len(), c[0].verdict), (1, Verdict::Fail), "{c:?}");
    }

    #[test]
    fn slow_round_trips_on_hosts_all_busy_are_one_warning_that_names_nobody() {
        let rep = report_of(
            ["h0", "h1", "h2"],
            |_, _| 1.0,
            |a, b| if a == 0 || b == 0 { 300.0 } else { 30.0 },
        );
        let busy = |h: &str| HostEvidence {
            host: h.into(),
            wall_s: 5.0,
            busy_pct: Some(97.0),
            waited_s: Some(2.0),
            ..Default::default()
        };
        let seen = [busy("h0"), busy("h1"), busy("h2")];
        let c = pairwise_findings("tcp@eth0", &rep, &seen);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "tcp@eth0 pairwise: busy hosts");
        assert_eq!(
            (c[0].verdict, c[0].cause),
            (Verdict::Warn, Some(super::super::cause::Cause::Cpu))
        );
        for h in ["h0", "h1", "h2"] {
            let said = format!("{} {} {}", c[0].name, c[0].measured, c[0].detail);
            assert!(!super::super::cause::names(&said, h), "{h} named: {said}");
        }
        assert_eq!(c[0].evidence.len(), 3);
        // The same findings on quiet hosts fail by name.
        let c = pairwise_findings("tcp@eth0", &rep, &quiet(&seen));
        assert!(!c.is_empty() && c.iter().all(|c| c.verdict == Verdict::Fail), "{c:?}");
        assert!(c.iter().all(|c| super::super::cause::names(&c.name, "h0")), "{c:?}");
    }
}

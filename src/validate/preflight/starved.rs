//! A host whose ranks were starved of CPU, apart from the other hosts, while a part of the preflight measured:
//! throttled by their cgroup's quota, or (where no cgroup is visible, as behind `ip netns exec`) ready to run
//! and waiting for a core, by the rank's own scheduler statistics. A starved rank may not show in any figure
//! (a link bounded by its line rate needs little CPU), so the evidence itself fails, by name, unless another
//! failed check already blames that host's CPU: one fault, one answer.

use super::cause::Cause;
use super::evidence::HostEvidence;
use super::verdict::{bare_check, Check, Verdict};

/// A host starved for this share of the measurement (throttled, or a rank waiting for a core)...
pub const STARVED_SHARE: f64 = 0.25;
/// ...and by this much more than the other hosts' median is starved apart from them; hosts all alike busy are
/// a busy machine, not a starved host.
pub const STARVED_MARGIN: f64 = 0.2;

/// The share of the measurement `e`'s ranks were starved: throttled, or the most starved rank waiting.
fn share(e: &HostEvidence) -> f64 {
    e.throttled_share().max(e.waited_share().unwrap_or(0.0))
}

/// Whether `e` is starved by a known figure (throttling or a wait was read).
fn known(e: &HostEvidence) -> bool {
    e.throttled_s.is_some() || e.waited_s.is_some()
}

/// The hosts of `seen` starved apart from the others, with their share and the others' median share. Needs two
/// hosts or more with a known figure: on one host every rank shares the same CPUs.
pub fn starved_hosts(seen: &[HostEvidence]) -> Vec<(&HostEvidence, f64, f64)> {
    let known: Vec<&HostEvidence> = seen.iter().filter(|e| known(e)).collect();
    if known.len() < 2 {
        return Vec::new();
    }
    known
        .iter()
        .filter_map(|e| {
            let mut others: Vec<f64> = known.iter().filter(|o| o.host != e.host).map(|o| share(o)).collect();
            others.sort_by(f64::total_cmp);
            let median = others[others.len() / 2];
            let s = share(e);
            (s >= STARVED_SHARE && s >= median + STARVED_MARGIN).then_some((*e, s, median))
        })
        .collect()
}

/// One FAIL check per host in `seen` starved during `during` (e.g. `the collectives`) that no check in
/// `already` blames on its CPU.
pub fn checks(path: &str, during: &str, seen: &[HostEvidence], already: &[Check]) -> Vec<Check> {
    let blamed = |host: &str| {
        already.iter().any(|c| {
            c.verdict == Verdict::Fail
                && c.cause == Some(Cause::Cpu)
                && (super::cause::names(&c.name, host)
                    || super::cause::names(&c.detail, host)
                    || (c.evidence.len() == 1 && c.evidence[0].host == host))
        })
    };
    starved_hosts(seen)
        .into_iter()
        .filter(|(e, _, _)| !blamed(&e.host))
        .map(|(e, s, others)| {
            let how = match (e.throttled_s, e.waited_s) {
                (Some(t), _) if e.throttled_share() >= e.waited_share().unwrap_or(0.0) => format!(
                    "its ranks were throttled by their CPU quota{} for {t:.2} s of the {:.2} s",
                    e.quota_cores
                        .map(|q| format!(" of {} cores", crate::net::inventory::cores(q)))
                        .unwrap_or_default(),
                    e.wall_s
                ),
                (_, Some(w)) => format!(
                    "a rank waited for a CPU, ready to run, for {w:.2} s of the {:.2} s{}",
                    e.wall_s,
                    if e.throttled_s.is_none() {
                        " (its cgroup's throttling is not visible to it)"
                    } else {
                        ""
                    }
                ),
                _ => unreachable!("a starved host has a known figure"),
            };
            Check {
                cause: Some(Cause::Cpu),
                evidence: vec![e.clone()],
                ..bare_check(
                    format!("{path} CPU of {} during {during}", e.host),
                    path,
                    format!(
                        "starved {:.0}% of the time (other hosts {:.0}%)",
                        100.0 * s,
                        100.0 * others
                    ),
                    format!(
                        "under {:.0}%, or within {:.0} points of the other hosts",
                        100.0 * STARVED_SHARE,
                        100.0 * STARVED_MARGIN
                    ),
                    "the ranks' cgroup and scheduler statistics (built in)".into(),
                    Verdict::Fail,
                    format!(
                        "{}: during {during} {how}, against {:.0}% on the other hosts: its ranks answer late and \
                         every collective waits for them; raise or remove its CPU quota (`collbench info` on {} \
                         shows it where visible), or move the other work off it",
                        e.host,
                        100.0 * others,
                        e.host
                    ),
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, waited: Option<f64>, throttled: Option<f64>) -> HostEvidence {
        HostEvidence {
            host: name.into(),
            wall_s: 10.0,
            waited_s: waited,
            throttled_s: throttled,
            ..Default::default()
        }
    }

    #[test]
    fn a_host_waiting_for_a_cpu_apart_from_the_others_fails_by_name() {
        let seen = [
            host("h0", Some(0.3), None),
            host("h1", Some(7.8), None),
            host("h2", Some(0.3), None),
            host("h3", Some(0.2), None),
        ];
        let c = checks("tcp@eth0", "the collectives", &seen, &[]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "tcp@eth0 CPU of h1 during the collectives");
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Fail, Some(Cause::Cpu)));
        assert_eq!(c[0].measured, "starved 78% of the time (other hosts 3%)");
        assert!(c[0].detail.contains("not visible"), "{}", c[0].detail);
        assert_eq!(c[0].evidence.len(), 1);
    }

    #[test]
    fn a_throttled_host_names_its_quota() {
        let mut h1 = host("h1", Some(7.0), Some(7.5));
        h1.quota_cores = Some(0.02);
        let seen = [host("h0", Some(0.1), Some(0.0)), h1, host("h2", Some(0.1), Some(0.0))];
        let c = checks("tcp@eth0", "the pairwise test", &seen, &[]);
        assert_eq!(c.len(), 1);
        assert!(
            c[0].detail.contains("CPU quota of 0.02 cores for 7.50 s"),
            "{}",
            c[0].detail
        );
    }

    #[test]
    fn hosts_alike_busy_one_host_or_nothing_known_name_nobody() {
        // Every host waited alike: a busy machine.
        let busy = [
            host("h0", Some(6.0), None),
            host("h1", Some(7.0), None),
            host("h2", Some(6.5), None),
        ];
        assert!(checks("p", "x", &busy, &[]).is_empty());
        // Starved, but not by a quarter of the time.
        let mild = [
            host("h0", Some(2.0), None),
            host("h1", Some(0.1), None),
            host("h2", Some(0.1), None),
        ];
        assert!(checks("p", "x", &mild, &[]).is_empty());
        assert!(checks("p", "x", &[host("vm", Some(9.0), None)], &[]).is_empty());
        let unknown = [host("h0", None, None), host("h1", Some(9.0), None)];
        assert!(checks("p", "x", &unknown, &[]).is_empty());
    }

    #[test]
    fn a_host_already_blamed_on_its_cpu_is_not_named_twice() {
        let seen = [
            host("h0", Some(0.1), None),
            host("h1", Some(9.0), None),
            host("h2", Some(0.1), None),
        ];
        let mut finding = bare_check(
            "p pairwise: slow host h1".into(),
            "p",
            String::new(),
            String::new(),
            String::new(),
            Verdict::Fail,
            String::new(),
        );
        finding.cause = Some(Cause::Cpu);
        assert!(checks("p", "x", &seen, std::slice::from_ref(&finding)).is_empty());
        // Blamed on something else, the starved host still gets its own check.
        finding.cause = Some(Cause::Link);
        assert_eq!(checks("p", "x", &seen, &[finding]).len(), 1);
    }
}

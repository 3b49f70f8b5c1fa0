//! Which way a slow host or link is slow. Each pair sends both ways at once and each direction is measured as
//! its receiver got it, so the matrix tells a host that is slow to receive (an ingress policer, a switch
//! port's egress toward it, its NIC's receive side) from one slow to send. A host that drops what it receives
//! makes its partners retransmit: without the direction, their retransmissions would blame them.

use super::{Finding, Link, Metric, PairwiseReport};

/// A direction is slow when its bandwidth is below this share of the other direction's.
const SLOWER_SHARE: f64 = 0.6;

/// Which way data moves slowly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Into the host (or from the link's first end to its second).
    In,
    /// Out of the host (or from the second end to the first).
    Out,
    /// Both ways alike.
    Both,
}

/// A host's bandwidth each way: the median of what it received from its partners and of what they received
/// from it, GB/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sides {
    pub received_gbs: f64,
    pub sent_gbs: f64,
}

impl Sides {
    /// The slower side, if one is slower by `SLOWER_SHARE` (0.6).
    pub fn direction(&self) -> Direction {
        if self.received_gbs < SLOWER_SHARE * self.sent_gbs {
            Direction::In
        } else if self.sent_gbs < SLOWER_SHARE * self.received_gbs {
            Direction::Out
        } else {
            Direction::Both
        }
    }
}

/// What `host` received and sent over `l`, one of its links.
pub fn at_host(l: &Link, host: usize) -> Sides {
    // bw_ab_gbs: a sent to b, as b received it.
    let (received_gbs, sent_gbs) = if l.b == host {
        (l.bw_ab_gbs, l.bw_ba_gbs)
    } else {
        (l.bw_ba_gbs, l.bw_ab_gbs)
    };
    Sides { received_gbs, sent_gbs }
}

/// What `host` received and sent over `links` (its own), each side's median; `None` without a finite one.
pub fn of_links<'a>(links: impl IntoIterator<Item = &'a Link>, host: usize) -> Option<Sides> {
    let (received, sent): (Vec<f64>, Vec<f64>) = links
        .into_iter()
        .map(|l| {
            let s = at_host(l, host);
            (s.received_gbs, s.sent_gbs)
        })
        .unzip();
    Some(Sides {
        received_gbs: median(received)?,
        sent_gbs: median(sent)?,
    })
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    Some(super::median::median(&mut v))
}

/// What `host` (a participant's name) received and sent over its links; `None` without a link.
pub fn of_host(rep: &PairwiseReport, host: &str) -> Option<Sides> {
    let me = rep.hosts.iter().position(|p| p.name == host)?;
    of_links(rep.links.iter().filter(|l| l.a == me || l.b == me), me)
}

/// The direction of a bandwidth finding and a phrase saying it (`h2 is slow to receive: ...`); `None` for
/// latency and stall findings (a round trip has no direction) or where the links are not in `rep`.
pub fn of_finding(rep: &PairwiseReport, f: &Finding) -> Option<(Direction, String)> {
    match f {
        Finding::SlowHost {
            host,
            metric: Metric::Bandwidth,
            ..
        } => {
            let s = of_host(rep, host)?;
            let d = s.direction();
            let way = match d {
                Direction::In => "slow to receive",
                Direction::Out => "slow to send",
                Direction::Both => "slow both ways",
            };
            Some((
                d,
                format!(
                    "{host} is {way}: it received {:.4} GB/s from its partners (median), they received {:.4} GB/s \
                     from it",
                    s.received_gbs, s.sent_gbs
                ),
            ))
        }
        Finding::SlowLink {
            a,
            b,
            metric: Metric::Bandwidth,
            ..
        } => {
            let ia = rep.hosts.iter().position(|p| &p.name == a)?;
            let ib = rep.hosts.iter().position(|p| &p.name == b)?;
            let l = rep.links.iter().find(|l| (l.a, l.b) == (ia.min(ib), ia.max(ib)))?;
            // Seen from `a`: what b received from a, and what a received from b.
            let (a_to_b, b_to_a) = if l.a == ia {
                (l.bw_ab_gbs, l.bw_ba_gbs)
            } else {
                (l.bw_ba_gbs, l.bw_ab_gbs)
            };
            let s = Sides {
                received_gbs: a_to_b,
                sent_gbs: b_to_a,
            };
            let d = s.direction();
            let way = match d {
                Direction::In => format!("slow from {a} to {b}"),
                Direction::Out => format!("slow from {b} to {a}"),
                Direction::Both => "slow both ways".into(),
            };
            Some((
                d,
                format!("the link is {way}: {a} -> {b} {a_to_b:.4} GB/s, {b} -> {a} {b_to_a:.4} GB/s"),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::localise::tests::matrix as synthetic;
    use super::super::{localise, PairwiseConfig, Thresholds, SCHEMA};
    use super::*;

    /// Four hosts at 1 GB/s where `slow(a, b)` says which directions (a sends to b) are at 0.2.
    fn report(slow: impl Fn(usize, usize) -> bool) -> PairwiseReport {
        let (hosts, mut links) = synthetic(4, |_, _, _| 1.0, |_, _, _| 30.0);
        for l in links.iter_mut() {
            if slow(l.a, l.b) {
                l.bw_ab_gbs = 0.2;
            }
            if slow(l.b, l.a) {
                l.bw_ba_gbs = 0.2;
            }
            l.bw_gbs = l.bw_ab_gbs.min(l.bw_ba_gbs);
        }
        let th = Thresholds::default();
        let findings = localise::findings(&hosts, &links, &th);
        PairwiseReport {
            schema: SCHEMA.into(),
            path: "tcp@eth0".into(),
            unit: "hosts".into(),
            config: PairwiseConfig::default(),
            hosts,
            links,
            findings,
            dismissed: Vec::new(),
            host_config: Vec::new(),
            link_downs: Vec::new(),
            thresholds: th,
            rounds: 3,
            remeasure_rounds: 0,
            elapsed_s: 1.0,
            plan: None,
        }
    }

    fn host_finding(rep: &PairwiseReport) -> &Finding {
        rep.findings
            .iter()
            .find(|f| {
                matches!(
                    f,
                    Finding::SlowHost {
                        metric: Metric::Bandwidth,
                        ..
                    }
                )
            })
            .unwrap_or_else(|| panic!("no slow host: {:?}", rep.findings))
    }

    #[test]
    fn a_host_slow_to_receive_is_told_from_one_slow_to_send() {
        let rep = report(|_, to| to == 2);
        let (d, text) = of_finding(&rep, host_finding(&rep)).unwrap();
        assert_eq!(d, Direction::In);
        assert!(
            text.starts_with("h2 is slow to receive: it received 0.2000 GB/s"),
            "{text}"
        );
        let rep = report(|from, _| from == 2);
        assert_eq!(of_finding(&rep, host_finding(&rep)).unwrap().0, Direction::Out);
        let rep = report(|from, to| from == 2 || to == 2);
        assert_eq!(of_finding(&rep, host_finding(&rep)).unwrap().0, Direction::Both);
    }

    #[test]
    fn a_link_slow_one_way_says_which() {
        let rep = report(|from, to| (from, to) == (3, 1));
        let f = Finding::SlowLink {
            a: "h1".into(),
            b: "h3".into(),
            metric: Metric::Bandwidth,
            value: 0.2,
            reference: 1.0,
        };
        let (d, text) = of_finding(&rep, &f).unwrap();
        assert_eq!(d, Direction::Out);
        assert!(
            text.starts_with("the link is slow from h3 to h1: h1 -> h3 1.0000 GB/s, h3 -> h1 0.2000"),
            "{text}"
        );
        let latency = Finding::SlowLink {
            a: "h1".into(),
            b: "h3".into(),
            metric: Metric::Latency,
            value: 300.0,
            reference: 30.0,
        };
        assert_eq!(of_finding(&rep, &latency), None, "a round trip has no direction");
    }
}
